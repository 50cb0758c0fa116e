"""Rotation (RoPE) as one layer of a real model applies it: frequencies, scaling, which dims, which pairs.

The frequency math is relviz.rope's (transformers' ``modeling_rope_utils``, operation for operation);
this module adds what differs from layer to layer and family to family:

- the parameters per layer type (transformers 5 nests ``rope_parameters`` by layer type: Gemma 3 and
  ModernBERT use one base on sliding layers and another on full ones) and layers without rotation
  (``no_rope_layers``: Llama 4, SmolLM3; Cohere 2 rotates on its sliding layers only);
- the pair layout (each written once, in relviz.rope.math): ``half`` pairs (i, i + r/2) as Llama's rotate_half; ``interleaved`` pairs (2i, 2i + 1)
  as GPT-J, CodeGen and Cohere (rotate_every_two); ``complex`` the same pairs multiplied as complex
  numbers (Llama 4's ``view_as_complex``); ``deinterleave`` interleaved pairs in, half-split layout out
  (DeepSeek-V3 with ``rope_interleave``);
- which dims rotate: the first r (partial rotary: Phi, GPT-NeoX, GPT-J's ``rotary_dim``), or the last
  r of a wider head (DeepSeek-V3's ``qk_rope_head_dim`` after ``qk_nope_head_dim``);
- M-RoPE sections (Qwen2-VL): the pairs split into temporal / height / width, each turned by its own
  position id; text tokens carry one position on all three axes, so for text it is 1-D RoPE.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._checks import check_tensor
from relviz.attention_steps import Attention, dot_product_attention
from relviz.mechanisms.base import ConfigView, LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Wavelengths
from relviz.rope.config import FAMILY_RULES, MAX_HEAD_DIM, ROPE_TYPES, RopeConfig, rope_config_from_hf
from relviz.rope.math import LAYOUTS, default_inv_freq, rope_parameters, rotate_pairs, unscaled
from relviz.schemes.view_kinds import PositionStructure, expand_offsets

__all__ = ["Rotation", "LAYOUTS", "structure_caption", "rope_free"]

def _layer_rope_fields(cfg: ConfigView, layer_type: str | None) -> Mapping[str, Any] | None:
    """The config with this layer type's rope parameters un-nested (None: this layer type has no rotation)."""
    field = "rope_parameters" if cfg.raw("rope_parameters") else "rope_scaling"   # the one read, for messages
    params = cfg.raw(field)
    if not isinstance(params, Mapping):
        return cfg.data
    nested = [k for k, v in params.items() if isinstance(v, Mapping) or (v is None and k.endswith("_attention"))]
    if not nested:
        return cfg.data
    if layer_type is None or layer_type not in params:
        raise ValueError(f"config field {cfg.name(field)} is nested by layer type "
                         f"({', '.join(map(str, nested))}) but {cfg.name('layer_types')} gives this layer the type "
                         f"{layer_type!r}")
    chosen = params[layer_type]
    if chosen is None:
        return None
    # transformers 5.23's YaRN reads truncate from config.rope_parameters itself, not from the layer type's entry:
    # nested, it never finds one there and truncates (the entry's truncate: false is ignored; seen on Gemma 3)
    chosen = {k: v for k, v in chosen.items() if k != "truncate"} if isinstance(chosen, Mapping) else chosen
    return {**cfg.data, "rope_parameters": chosen, "rope_scaling": None}


def rope_free(cfg: ConfigView, layer_type: str | None) -> bool:
    """Whether the config's rope parameters, nested by layer type, give this layer type none (null), read where the
    rotation reads them (rope_parameters, else the older rope_scaling): the one place a layer is told to run without
    RoPE this way, so what scales such a layer instead (relviz.mechanisms.scale.QueryPowerScale) agrees with it."""
    return _layer_rope_fields(cfg, layer_type) is None


@dataclass(frozen=True)
class Rotation(Mechanism):
    """RoPE on one layer: ``rope`` (base, head dim, partial factor, scaling), layout, where the dims sit."""

    rope: RopeConfig
    layout: str = "half"
    head_width: int | None = None       # the q/k width the rotated dims sit in (None: rope.head_dim)
    rotary_offset: int = 0              # index of the first rotated dim within the head
    sections: tuple[int, ...] | None = None   # M-RoPE: pairs per axis (temporal, height, width)
    sections_interleaved: bool = False  # Qwen3-VL: the axes take turns pair by pair instead of in blocks
    reciprocal: bool = True             # θ's arithmetic: transformers' 1/base^(2i/d); False: base^(−2i/d), the toy
                                        # rope's as trained (relviz.rope.math.default_inv_freq; default rule only)
    backwards: bool = False             # each pair turned by −θ·p (NanoChat's rotate_half flips the signs)
    float64_angles: bool = False        # RoFormer's arithmetic: p / base^(2i/d), sin and cos in float64, rounded once

    def __post_init__(self) -> None:
        if self.float64_angles and (self.rope.scaling.rope_type != "default" or not self.reciprocal):
            raise ValueError("float64_angles (RoFormer's arithmetic: p / base^(2i/d) in float64) is the default rule's; "
                             f"got rope_type {self.rope.scaling.rope_type!r}")
        if not self.reciprocal and self.rope.scaling.rope_type != "default":
            raise ValueError(f"reciprocal=False (θ as base^(−2i/d), relviz's toy rope) is the default rule's other "
                             f"arithmetic; rope_type {self.rope.scaling.rope_type!r} computes θ as transformers does")

    positional = True
    name = "rotation"
    option_types = {"layout": frozenset(LAYOUTS), "layout_when_set": frozenset(LAYOUTS), "skip_field": str,
                    "layer_types": (str, tuple, list), "layer_types_when": str, "per_layer_type": dict,
                    "defaults": dict, "type_aliases": dict, "fields": dict, "rotary_dim_field": str, "theta": float,
                    "layout_field": str, "layout_field_default": bool, "pass_before_field": str,
                    "sections_interleaved": bool, "sections_default": (list, tuple), "type_when_field": dict,
                    "consumed_fields": (list, tuple), "backwards": bool, "float64_angles": bool,
                    "default_rule_partial": bool, "theta_per_layer_field": str}
    role = "rotates q and k"
    order = 0
    legend = "rotation"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Rotation | None:
        cfg = ctx.config
        skip = options.get("skip_field")
        if skip:
            flags = cfg.list(skip, ctx.layers, lambda n, v: _flag(n, v), counted_by=ctx.layers_field)
            if flags is not None and not flags[ctx.index]:
                return None
        only = options.get("layer_types")      # EXAONE 4: only while its config sets a window
        when = options.get("layer_types_when")
        if only is not None and ctx.layer_type not in only and (when is None or cfg.has(when)):
            return None
        if options.get("per_layer_type"):
            cfg = _nest_by_layer_type(cfg, options["per_layer_type"])
        fields = _layer_rope_fields(cfg, ctx.layer_type)
        if fields is None:
            return None
        fields = {**options.get("defaults", {}), **fields}
        for key in ("rope_parameters", "rope_scaling"):        # e.g. Qwen2-VL: "mrope" is the default rule
            params = fields.get(key)
            if isinstance(params, Mapping):
                kind = params.get("rope_type", params.get("type"))
                aliases = dict(options.get("type_aliases", {}))
                for field_name, renamed in options.get("type_when_field", {}).items():
                    if params.get(field_name):    # Hunyuan: "dynamic" with an alpha is its rotary's ntk_alpha
                        aliases.update(renamed)
                if isinstance(kind, str) and kind in aliases:
                    params = {**{k: v for k, v in params.items() if k != "type"}, "rope_type": aliases[kind]}
                elif isinstance(kind, str) and kind in FAMILY_RULES:   # only a family's own rotary computes it
                    raise ValueError(f"config field {cfg.name(key)}.rope_type is {kind!r}: a rule only "
                                     f"{FAMILY_RULES[kind]} computes; transformers' other families have no such rule")
                # fields another mechanism reads (transformers' ignore_keys_at_rope_validation), e.g. Mistral's
                # llama_4_scaling_beta (relviz.mechanisms.scale.PositionQueryScale)
                fields[key] = {k: v for k, v in params.items() if k not in options.get("consumed_fields", ())}
        for key, value in options.get("fields", {}).items():   # e.g. GPT-J: head_dim from n_embd / n_head
            fields[key] = fields.get(value) if isinstance(value, str) else value
        per_layer = options.get("theta_per_layer_field")     # Granite SWA's layer_rope_theta: θ per layer, 0 = NoPE
        thetas = cfg.list(per_layer, ctx.layers, _theta, counted_by=ctx.layers_field) if per_layer else None
        if thetas is not None:
            if thetas[ctx.index] == 0:
                return None
            key = "rope_parameters" if isinstance(fields.get("rope_parameters"), Mapping) else "rope_scaling"
            if isinstance(fields.get(key), Mapping):
                fields[key] = {**fields[key], "rope_theta": thetas[ctx.index]}
            fields["rope_theta"] = thetas[ctx.index]
        rotary_field = options.get("rotary_dim_field")
        if not rotary_field:
            fields = _partial_under_default_rule(cfg, fields, options.get("default_rule_partial"))
        if rotary_field:
            head_dim = _head_dim(cfg, fields)
            rotary = ConfigView(fields, cfg.prefix).int(rotary_field, head_dim, minimum=2, maximum=head_dim)
            fields["partial_rotary_factor"] = rotary / head_dim
            fields["head_dim"] = head_dim
        if "theta" in options and not cfg.has("rope_theta"):
            fields["rope_theta"] = options["theta"]
        rope = _rope_config(cfg, fields)
        layout = options.get("layout", "half")
        if options.get("layout_field") and cfg.bool(options["layout_field"], options.get("layout_field_default", False)):
            layout = options.get("layout_when_set", "interleaved")
        width, offset = None, 0
        if options.get("pass_before_field"):
            offset = cfg.int(options["pass_before_field"], 0, minimum=0, maximum=1 << 16)
            width = offset + 2 * rope.pairs       # the rotated dims close the head (dots3: 64 of head_dim 256 rotate)
        params = fields.get("rope_parameters") or fields.get("rope_scaling") or {}
        sections = params.get("mrope_section") if isinstance(params, Mapping) else None
        if sections is None:                 # Qwen3-VL's rotary module falls back to its own sections
            sections = options.get("sections_default")
        if sections is not None:
            sections = _sections(cfg, sections, rope.pairs)
        return cls(rope=rope, layout=layout, head_width=width, rotary_offset=offset, sections=sections,
                   sections_interleaved=bool(options.get("sections_interleaved", False)),
                   backwards=bool(options.get("backwards", False)),
                   float64_angles=bool(options.get("float64_angles", False)))

    # -- the reference math ------------------------------------------------------------------

    def parameters(self, seq_len: int | None = None, device: torch.device | str = "cpu") -> tuple[torch.Tensor, float]:
        """(θ_i [pairs] float32, attention scaling), as the layer's rotary module holds them for a forward over
        seq_len positions (relviz.rope.math; the toy rope's own arithmetic of the default rule where it has one)."""
        if not self.reciprocal:
            return default_inv_freq(self.rope.rotary_dim, self.rope.base, device, reciprocal=False), 1.0
        return rope_parameters(self.rope, seq_len, device=device)

    def inv_freq(self, seq_len: int | None = None) -> torch.Tensor:
        """θ_i [pairs] float32, as the layer's rotary module holds it for a forward over seq_len positions."""
        return self.parameters(seq_len)[0]

    def attention_scaling(self, seq_len: int | None = None) -> float:
        return self.parameters(seq_len)[1]

    @property
    def rotary_dim(self) -> int:
        return 2 * self.rope.pairs

    @property
    def width(self) -> int:
        return self.head_width or self.rope.head_dim

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [..., L, width] rotated at ``positions`` ([L], or [3, L] for M-RoPE axes) as the layer does it."""
        x = check_tensor("x", x, min_ndim=2, floating=True)
        positions = check_tensor("positions", positions)
        if x.shape[-1] != self.width:
            raise ValueError(f"x must have this layer's head width {self.width} as its last dim; got {x.shape[-1]}")
        if positions.ndim == 1:
            positions = positions[None]
        if positions.ndim != 2 or positions.shape[-1] != x.shape[-2] or positions.shape[0] not in (1, 3):
            raise ValueError(f"positions must be [L] or [3, L] with L = {x.shape[-2]}; got {tuple(positions.shape)}")
        seq_len = int(positions.max()) + 1 if positions.numel() else 1
        return self.turn(x, self._angles(positions.to(x.device), seq_len))

    def _angles(self, positions: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, float]:
        """(the angle of each pair at each position [A, L, P] float32, attention scaling) for positions [A, L];
        float64 in RoFormer's arithmetic (its sinusoidal table's: position / base^(2i/d), then sin and cos)."""
        if self.float64_angles:
            d = self.rope.rotary_dim
            over = torch.tensor([np.power(self.rope.base, 2 * i / d) for i in range(d // 2)], dtype=torch.float64,
                                device=positions.device)                                # [P], as numpy computes it
            return positions.double()[..., None] / over, 1.0                           # [A, L, P]
        inv_freq, scaling = self.parameters(seq_len if self.rope.scaling.rope_type != "default" else None,
                                            positions.device)
        return positions.float()[..., None] * inv_freq.float(), scaling                 # [A, L, P]

    def turn(self, x: torch.Tensor, angles: tuple[torch.Tensor, float]) -> torch.Tensor:
        """x [..., L, width] turned by ``angles`` (:meth:`_angles`, or :meth:`prepare`'s), unchecked."""
        freqs, scaling = angles                                                         # [A, L, P]
        if self.sections is not None and self.sections_interleaved:      # the axis of each pair (relviz.vision)
            from relviz.vision.mrope import mrope_pair_axes

            axes = mrope_pair_axes(self.sections, interleaved=True).to(x.device)
            freqs = freqs.expand(3, -1, -1).gather(0, axes.view(1, 1, -1).expand(1, freqs.shape[1], -1))[0]
        elif self.sections is not None:
            freqs = freqs.expand(3, -1, -1)
            freqs = torch.cat([part[k % 3] for k, part in enumerate(freqs.split(list(self.sections), dim=-1))], -1)
        else:
            freqs = freqs[0]                                                            # [L, P]
        r, start = self.rotary_dim, self.rotary_offset
        before, rot, after = x[..., :start], x[..., start:start + r], x[..., start + r:]
        return torch.cat((before, rotate_pairs(rot, freqs, scaling, layout=self.layout, backwards=self.backwards),
                          after), dim=-1)

    def prepare(self, length: int, like: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The angles at positions 0..L − 1 ([1, L, P], and the attention scaling), once per forward: every layer
        of the toy model turns by the same."""
        return self._angles(torch.arange(length, device=like.device)[None], length)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
               shared: tuple[torch.Tensor, float] | None = None, need_weights: bool = False) -> Attention:
        """Plain attention on q and k [B, H, L, D_head] turned by the rotation."""
        angles = self.prepare(q.shape[-2], q) if shared is None else shared
        return dot_product_attention(self.turn(q, angles), self.turn(k, angles), v, causal=causal,
                                     need_weights=need_weights)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """mean over the rotation pairs of cos((j − i) · θ_p), θ as the layer uses it at ``length`` positions: how
        much an unchanged vector agrees with itself after the relative turn, per offset, drawn per cell [1, L, L]."""
        inv_freq, scaling = self.parameters(length)
        theta = inv_freq.double().numpy()                                                  # [pairs]
        offsets = np.arange(-(length - 1), length)                                         # [2L − 1]
        per_offset = np.cos(offsets[:, None] * theta[None, :]).mean(axis=1)                # [2L − 1]
        return PositionStructure(
            "RoPE: mean cos((j − i) · θ_p) over the rotation pairs", "mean cos((j−i)θ)",
            expand_offsets(per_offset, length)[None].astype(np.float32), None, causal, True,
            caption=structure_caption(float(scaling)))

    # -- words -------------------------------------------------------------------------------

    def label(self) -> str:
        scaled = self.rope.scaling.rope_type
        return f"RoPE θ {_short(self.rope.base)}" + (f" {scaled}" if scaled != "default" else "") + \
            (" by −θ" if self.backwards else "")

    def describe(self) -> str:
        s = self.rope.scaling
        dims = f"{self.rotary_dim} of {self.width} dims"
        if self.rotary_offset:
            dims += f" (dims {self.rotary_offset}–{self.rotary_offset + self.rotary_dim - 1})"
        scaled = f", {s.rope_type} ×{s.factor:g}" if s.factor and s.alpha is None else ""
        if s.alpha is not None:
            scaled += f", {s.rope_type} α {s.alpha:g} (base ×{s.alpha:g}^({self.rotary_dim}/{self.rotary_dim - 2}))"
        if self.rope.proportional:
            turning = self.rope.turning_pairs
            dims += (f", proportional: {turning} of {self.rope.pairs} pairs (i, i + {self.rotary_dim // 2}) turn, "
                     f"θ_i = base^(−2i/{self.rope.head_dim}); the other {self.rope.pairs - turning} have θ = 0")
        sections = (f", M-RoPE sections {list(self.sections)}" + (" interleaved" if self.sections_interleaved else "")
                    if self.sections else "")
        turn = ("; each pair turns by −θ·p (the other way: its rotate_half flips the signs, so a query at i and a key "
                "at j score as +θ's would at the mirrored offset i − j)" if self.backwards else "")
        return (f"RoPE base {self.rope.base:g} on {dims}{scaled}{sections}; layout: {LAYOUTS[self.layout]}{turn}")

    def settings(self) -> dict[str, Any]:
        s = self.rope.scaling
        scaling = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(s).items()
                   if v is not None and k != "rope_type"}
        out: dict[str, Any] = {"rope_theta": self.rope.base, "rope_type": s.rope_type, "head_dim": self.width,
                               "rotary_dim": self.rotary_dim, "layout": self.layout,
                               "max_position_embeddings": self.rope.max_position_embeddings}
        if scaling:
            out["scaling"] = scaling
        if self.rotary_offset:
            out["rotary_offset"] = self.rotary_offset
        if self.sections:
            out["mrope_section"] = list(self.sections)
        if self.backwards:
            out["turns"] = "backwards (by -theta * p)"
        if self.float64_angles:
            out["angle_arithmetic"] = "float64: p / base ** (2i/d), sin and cos rounded to float32 once (RoFormer)"
        if not self.reciprocal:
            out["theta_arithmetic"] = "base ** (-2i/d), relviz's toy rope as trained (transformers: 1 / base ** (2i/d))"
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        inv_freq, scaling = self.parameters(length)
        plain = (rope_parameters(self.rope if self.rope.proportional else unscaled(self.rope), device="cpu")[0]
                 if self.reciprocal else inv_freq)
        inv_freq, plain = inv_freq[:self.rope.turning_pairs], plain[:self.rope.turning_pairs]   # θ = 0: none
        view = Wavelengths("", "", inv_freq.numpy(), plain.numpy(), length, self.rope.scaled_from,
                           self.rope.scaling.rope_type, float(scaling))
        wraps = int((view.turns >= 1).sum())
        scaled = (f" {self.rope.scaling.rope_type} scaling (from {self.rope.scaled_from:,} positions) moves the "
                  "slow pairs (grey rings: the base alone)." if self.rope.scaled_from else "")
        pairs, short = len(inv_freq), len(inv_freq) - wraps
        turns = (f"every one of its {pairs} pairs completes at least one turn (green)" if short == 0 else
                 f"no pair completes a turn (red): every angle alone tells far positions apart" if wraps == 0 else
                 f"{wraps} of {pairs} pairs {'completes' if wraps == 1 else 'complete'} at least one turn (green); "
                 f"the other {short} "
                 f"{'never does' if short == 1 else 'never do'} (red): {'its' if short == 1 else 'their'} angle "
                 "alone tells far positions apart")
        caption = (f"{self.describe()}. At {length:,} positions {turns}.{scaled}" +
                   (f" cos and sin are multiplied by {scaling:.4f}." if scaling != 1 else ""))
        return [Wavelengths(f"Rotation: wavelength of each pair against {length:,} positions", caption,
                            view.inv_freq, view.plain, length, view.original, view.rule, view.attention_scaling)]


def structure_caption(attention_scaling: float = 1.0) -> str:
    """The words beside :meth:`Rotation.structure`; ``attention_scaling``: the factor on cos and sin (1: none)."""
    return ("q and k are rotated by angles proportional to their positions, so q_i · k_j sees only the difference: "
            "pair p turns by (j − i) · θ_p. Shown: how much an unchanged vector still agrees with itself after that "
            "relative turn, averaged over the pairs. Nothing learned."
            + (f" Not drawn: cos and sin are also multiplied by {attention_scaling:.4f}, which scales q · k by its "
               "square." if attention_scaling != 1 else ""))


def _nest_by_layer_type(cfg: ConfigView, spec: Mapping[str, Mapping[str, Any]]) -> ConfigView:
    """An older flat config (Gemma 3's rope_theta + rope_local_base_freq, ModernBERT's global/local_rope_theta)
    nested by layer type as the family's config class nests it; a config nested already is left alone."""
    params = cfg.raw("rope_parameters")
    if isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values()):
        return cfg
    older = cfg.raw("rope_scaling")
    if params is None and isinstance(older, Mapping) and any(isinstance(v, Mapping) for v in older.values()):
        return cfg                      # nested already, under the older name (read there by _layer_rope_fields)
    scaling = cfg.raw("rope_scaling") or (params if isinstance(params, Mapping) else None) or {}
    if not isinstance(scaling, Mapping):
        raise ValueError(f"config field {cfg.name('rope_scaling')} must be a JSON object or null; got {scaling!r:.60}")
    nested = {}
    for layer_type, rule in spec.items():
        theta = cfg.float(rule["theta_field"], rule["theta"], minimum=1.0 + 1e-9, maximum=1e12)
        extra = {k: v for k, v in scaling.items() if k != "rope_theta"} if rule.get("scaled") else {}
        nested[layer_type] = {"rope_type": "default", **extra, "rope_theta": theta}
    return ConfigView({**cfg.data, "rope_parameters": nested, "rope_scaling": None}, cfg.prefix)


#: where a config may set the share of each head that rotates (as relviz.rope.config reads it, first found wins)
_PARTIAL_FIELDS = ("partial_rotary_factor", "rotary_pct")


def _partial_under_default_rule(cfg: ConfigView, fields: dict[str, Any], reads: bool | None) -> dict[str, Any]:
    """The fields as the family's default rule sees them: transformers computes the default rule's θ with each
    family's own ``compute_default_rope_parameters``, and some read partial_rotary_factor (GPT-NeoX's) where others
    ignore it (Llama's turns every dim): ``reads`` (the family table's ``default_rule_partial``) says which; None, with
    a share below 1 set under the default rule, is refused naming the field (relviz cannot tell)."""
    key = "rope_parameters" if isinstance(fields.get("rope_parameters"), Mapping) else "rope_scaling"
    params = fields.get(key) if isinstance(fields.get(key), Mapping) else {}
    if params.get("rope_type", params.get("type")) not in (None, "default") or reads is True:
        return fields
    where = [(f"{key}.{f}", params[f]) for f in _PARTIAL_FIELDS if params.get(f) is not None]
    where += [(f, fields[f]) for f in _PARTIAL_FIELDS if fields.get(f) is not None]
    if not where or where[0][1] == 1:
        return fields
    if reads is None:
        raise ValueError(f"config field {cfg.name(where[0][0])} is {where[0][1]!r} under the default RoPE rule: "
                         "transformers computes that rule with each family's own code, which rotates only that share "
                         "of each head in some families (GPT-NeoX's) and every dim in others (Llama's), and relviz's "
                         "family table does not say which this family's does, so it cannot tell")
    kept = {k: v for k, v in fields.items() if k not in _PARTIAL_FIELDS}
    if params:
        kept[key] = {k: v for k, v in params.items() if k not in _PARTIAL_FIELDS}
    return kept


def _theta(name: str, value: Any) -> float:
    """A layer's own RoPE base: a number above 1, or 0 for a layer without RoPE."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value == 0 or 1 < value <= 1e12):
        raise ValueError(f"config field {name} must be a RoPE base above 1 (at most 1e12), or 0 for a layer without "
                         f"RoPE; got {value!r:.60}")
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if value not in (0, 1) or isinstance(value, float):
        raise ValueError(f"config field {name} must be 0 or 1; got {value!r}")
    return bool(value)


def _head_dim(cfg: ConfigView, fields: Mapping[str, Any]) -> int:
    view = ConfigView(fields, cfg.prefix)
    if view.has("head_dim"):
        return view.int("head_dim", minimum=2, maximum=MAX_HEAD_DIM)
    hidden = view.int("hidden_size", minimum=1, maximum=1 << 20)
    heads = view.int("num_attention_heads", minimum=1, maximum=1 << 14)
    if not 2 <= hidden // heads <= MAX_HEAD_DIM or (hidden // heads) % 2:   # (RopeConfig's limit, named here)
        raise ValueError(f"config fields {view.name('hidden_size')} ({hidden}) // {view.name('num_attention_heads')} "
                         f"({heads}) give a head of {hidden // heads} dims: RoPE needs an even head_dim from 2 to "
                         f"{MAX_HEAD_DIM} (or set head_dim)")
    return hidden // heads


#: the rope fields relviz reads, and their allowed ranges (the rest is relviz.rope's to check)
_FLOATS = {"rope_theta": (1.0 + 1e-9, 1e12), "factor": (1e-6, 1e6), "partial_rotary_factor": (1e-6, 1.0),
           "attention_factor": (1e-6, 1e3), "beta_fast": (1e-6, 1e6), "beta_slow": (1e-6, 1e6),
           "mscale": (0.0, 1e3), "mscale_all_dim": (0.0, 1e3), "low_freq_factor": (1e-6, 1e6), "alpha": (1e-6, 1e6),
           "high_freq_factor": (1e-6, 1e6)}


def _check_rope_fields(cfg: ConfigView, fields: Mapping[str, Any]) -> None:
    """Check every rope field where it sits, so a bad value is refused naming its own config field."""
    top = ConfigView(fields, cfg.prefix)
    for key in ("rope_theta", "partial_rotary_factor", "rotary_pct", "rotary_emb_base"):
        low, high = _FLOATS.get(key, _FLOATS["partial_rotary_factor" if key == "rotary_pct" else "rope_theta"])
        top.float(key, None, minimum=low, maximum=high)
    top.int("max_position_embeddings", 2048, minimum=1, maximum=1 << 24)
    top.int("original_max_position_embeddings", None, minimum=1, maximum=1 << 24)
    for key in ("rope_parameters", "rope_scaling"):
        value = fields.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"config field {cfg.name(key)} must be a JSON object or null; got {value!r:.60}")
        params = ConfigView(value, f"{cfg.name(key)}.")
        for name, inner in value.items():
            if isinstance(inner, Mapping):
                raise ValueError(f"config field {params.name(str(name))} must be a number, a string or a list; "
                                 "got a JSON object")
        for name, (low, high) in _FLOATS.items():
            params.float(name, None, minimum=low, maximum=high)
        params.int("original_max_position_embeddings", None, minimum=1, maximum=1 << 24)
        kind = value.get("rope_type", value.get("type"))
        if kind is not None and kind not in (*ROPE_TYPES, "su"):
            raise ValueError(f"config field {params.name('rope_type')} must be one of {', '.join(ROPE_TYPES)}; "
                             f"got {kind!r:.60}")
        params.bool("truncate", True)


def _rope_config(cfg: ConfigView, fields: Mapping[str, Any]) -> RopeConfig:
    """relviz.rope's reading of the (un-nested) fields, after each field is checked where it sits."""
    _check_rope_fields(cfg, fields)
    head_dim = _head_dim(cfg, fields)       # an integer (1.0 heads is read as 1, the head as 64, not 64.0)
    try:
        return rope_config_from_hf({**fields, "head_dim": head_dim})
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"config: the rope settings could not be read ({type(exc).__name__}: {exc})") from exc
    except ValueError as exc:
        raise ValueError(f"config ({cfg.prefix or 'top-level '}rope settings): {exc}") from exc


def _sections(cfg: ConfigView, sections: Any, pairs: int) -> tuple[int, ...]:
    ok = isinstance(sections, (list, tuple)) and len(sections) == 3 and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sections)
    if not ok or sum(sections) != pairs:
        raise ValueError(f"config field {cfg.name('rope_parameters.mrope_section')} must be three non-negative "
                         f"integers adding up to the {pairs} rotary pairs; got {sections!r}")
    return tuple(sections)


def _short(base: float) -> str:
    if base >= 1e9:                      # Falcon-H1's 1e11: "1e+11", not "100000M"
        return f"{base:g}"
    if base >= 1e6 and base % 1e5 == 0:
        return f"{base / 1e6:g}M"
    if base >= 1e3 and base % 100 == 0:
        return f"{base / 1e3:g}k"
    return f"{base:g}"
