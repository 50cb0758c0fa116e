"""A model's position plan: for every attention layer of every stack, the mechanisms it applies.

``read_plan(config, tensor=...)`` walks the family table's entry for the config's model_type: for each
stack and layer it asks each listed mechanism to read itself (``Mechanism.read``); a layer that applies
no position mechanism gets ``NoPosition``. ``ModelPlan`` answers per layer (``layer=i``, ``stack=...``)
and keeps the single-structure methods earlier versions had (they read layer 0 unless told otherwise).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from relviz._checks import check_int
from relviz.layer_config import LAYER_TYPE_FIELDS, config_of_layer, derived_config, holds, layer_types, summed_layers
from relviz.mechanisms import MECHANISMS, Mechanism
from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.base import MAX_LAYERS, REQUIRED, ConfigView, LayerContext
from relviz.mechanisms.deberta import DisentangledRelative
from relviz.mechanisms.families import FAMILIES, HYBRID_FIELDS, READ, check_family, family_of
from relviz.mechanisms.mixer import ATTENTION, TokenMixer, check_read
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.sinks import Sinks
from relviz.mechanisms.t5_bias import T5Bias
from relviz.positions import t5_bias
from relviz.rope.config import RopeConfig
from relviz.schemes.registry import REGISTRY as SCHEMES

__all__ = ["LayerPlan", "ModelPlan", "read_plan", "MAX_DEPTH", "FROM_TABLE", "UNVERIFIED", "OBSERVED"]

M = TypeVar("M", bound=Mechanism)
MAX_DEPTH = 12
#: where a layer's plan comes from (LayerPlan.read_from)
FROM_TABLE = "relviz's family table (checked against transformers by its tests)"
UNVERIFIED = "from config fields; not verified against transformers"
OBSERVED = "observed: transformers built and ran this layer, and the plan equals what it did"


@dataclass(frozen=True)
class LayerPlan:
    """One attention layer: its stack, index, transformers layer type, and the mechanisms it applies."""

    stack: str
    index: int
    layer_type: str | None
    mechanisms: tuple[Mechanism, ...]
    read_from: str = FROM_TABLE

    def find(self, kind: type[M]) -> M | None:
        return next((m for m in self.mechanisms if isinstance(m, kind)), None)

    @property
    def mixer(self) -> TokenMixer:
        """What mixes tokens on this layer (softmax attention unless the plan lists another mixer)."""
        return self.find(TokenMixer) or TokenMixer((ATTENTION,))

    @property
    def verified(self) -> bool:
        return self.read_from != UNVERIFIED

    def label(self) -> str:
        return " · ".join(m.label() for m in self.mechanisms)

    def describe(self) -> str:
        head = f"{self.stack} layer {self.index}" + (f" ({self.layer_type})" if self.layer_type else "")
        caveat = "" if self.verified else f" [{UNVERIFIED}]"
        return head + ": " + "; ".join(m.describe() for m in self.mechanisms) + caveat

    def key(self) -> tuple:
        return tuple(m.key() for m in self.mechanisms)

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "layer": self.index, "layer_type": self.layer_type,
                "mixer": list(self.mixer.kinds), "read_from": self.read_from,
                "mechanisms": [m.to_json() for m in self.mechanisms]}


@dataclass
class ModelPlan:
    """A checkpoint's (or a config's) position structure, layer by layer."""

    model_type: str
    source: str
    plans: dict[str, list[LayerPlan]]
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: what the notes are and where config came from, as a page heads them (a toy checkpoint has no config.json)
    notes_title: str = "Where transformers departs from the config or the original code"
    config_title: str = "settings read from config.json"
    tensors_read: list[str] = field(default_factory=list)
    in_family_table: bool = True
    directory: Path | None = None
    #: the family entry the observer derived from what transformers ran (a model_type outside the table
    #: without RoPE: relviz.observe_position), read like a row of the table; None for every other plan
    observed_entry: dict[str, Any] | None = None

    # -- layers -----------------------------------------------------------------------------

    @property
    def stack_names(self) -> list[str]:
        return list(self.plans)

    def layer(self, layer: int = 0, *, stack: str | None = None) -> LayerPlan:
        stack = self._stack(stack)
        layers = self.plans[stack]
        check_int("layer", layer, minimum=0, maximum=len(layers) - 1)
        return layers[layer]

    def all_layers(self) -> list[LayerPlan]:
        return [plan for layers in self.plans.values() for plan in layers]

    def _stack(self, stack: str | None) -> str:
        if stack is None:
            return next(iter(self.plans))
        if stack not in self.plans:
            raise ValueError(f"stack must be one of {', '.join(self.plans)}; got {stack!r}")
        return stack

    def mixer(self, *, layer: int = 0, stack: str | None = None) -> TokenMixer:
        """What mixes tokens on this layer: ``.kinds`` (e.g. ("softmax_attention",), ("state_space",)),
        ``.attends``, and words (``label``, ``describe``)."""
        return self.layer(layer, stack=stack).mixer

    def _attending(self, what: str, layer: int, stack: str | None) -> LayerPlan:
        plan = self.layer(layer, stack=stack)
        if not plan.mixer.attends:
            raise ValueError(f"{what}: {plan.stack} layer {plan.index} of this {self.model_type} model does not "
                             f"attend: its token mixer is {plan.mixer.label().split(': ', 1)[-1]} "
                             f"(layer type {plan.layer_type!r}); ask a softmax-attention layer")
        return plan

    def _need(self, kind: type[M], what: str, layer: int = 0, stack: str | None = None) -> M:
        plan = self._attending(what, layer, stack)
        found = plan.find(kind)
        if found is None:
            raise ValueError(f"{what} needs a layer with {kind.name}; {plan.stack} layer {plan.index} of this "
                             f"{self.model_type} model applies {', '.join(m.name for m in plan.mechanisms)}")
        return found

    def first(self, kind: type[M]) -> M | None:
        """The first layer's mechanism of this kind, anywhere in the model (None: no layer has it)."""
        return next((m for plan in self.all_layers() if (m := plan.find(kind)) is not None), None)

    @property
    def scheme(self) -> str | None:
        """The relviz toy scheme that hands out the model's first position mechanism (its ``concept``; None: none
        does)."""
        return next((scheme.name for plan in self.all_layers() for m in plan.mechanisms if m.positional
                     for scheme in SCHEMES.values() if isinstance(m, scheme.concept)), None)

    # -- rotation ----------------------------------------------------------------------------

    def rope_inv_freq(self, seq_len: int | None = None, *, layer: int = 0, stack: str | None = None
                      ) -> torch.Tensor | None:
        """θ_i [pairs] of this layer's rotation, as its rotary module holds it; None for a layer with none."""
        rotation = self.layer(layer, stack=stack).find(Rotation)
        return None if rotation is None else rotation.inv_freq(seq_len)

    def rope_attention_scaling(self, seq_len: int | None = None, *, layer: int = 0,
                               stack: str | None = None) -> float | None:
        rotation = self.layer(layer, stack=stack).find(Rotation)
        return None if rotation is None else rotation.attention_scaling(seq_len)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, *, layer: int = 0,
               stack: str | None = None) -> torch.Tensor:
        """x [..., L, head width] as this layer rotates it (x unchanged on an attention layer without rotation)."""
        rotation = self._attending("rotate", layer, stack).find(Rotation)
        return x if rotation is None else rotation.rotate(x, positions)

    @property
    def rope(self) -> RopeConfig:
        """The first rotating layer's RoPE settings."""
        rotation = self.first(Rotation)
        if rotation is None:
            raise ValueError(f"rope needs a layer with rotation; no layer of this {self.model_type} model rotates")
        return rotation.rope

    # -- pattern, sinks, biases ----------------------------------------------------------------

    def attention_pattern(self, length: int, *, layer: int = 0, stack: str | None = None) -> torch.Tensor:
        """bool [length, length]: True where a query may attend a key on this layer."""
        return self._need(AttentionPattern, "attention_pattern", layer, stack).mask(length)

    def sinks(self, *, layer: int = 0) -> torch.Tensor:
        """[H] this layer's learned sink logits (GPT-OSS)."""
        found = self._need(Sinks, "sinks", layer)
        if found.logits is None:
            raise ValueError("the sink logits live in the weights: inspect a model directory, not a config alone")
        return found.logits

    def bias_table(self, *, stack: str = "encoder", layer: int = 0) -> torch.Tensor:
        """T5: the learned table [num_buckets, heads] this layer looks up."""
        return self._need(T5Bias, "bias_table", layer, stack)._table()

    def bias(self, q_len: int, k_len: int, *, stack: str = "encoder", layer: int = 0) -> torch.Tensor:
        """T5: [H, q_len, k_len] what the layer adds to its logits (transformers' compute_bias)."""
        return self._need(T5Bias, "bias", layer, stack).bias(q_len, k_len)

    def local_block_bias(self, *, layer: int = 0) -> torch.Tensor:
        """LongT5: the encoder bias for one block [H, block, 3·block] (transformers' compute_bias(block_len))."""
        found = self._need(T5Bias, "local_block_bias", layer, "encoder")
        window = self._need(AttentionPattern, "local_block_bias", layer, "encoder").window
        if window is None:
            raise ValueError("local_block_bias needs a block-local encoder (LongT5)")
        block = window + 1
        return t5_bias(found._table().float(), block, 3 * block, num_buckets=found.num_buckets,
                       max_distance=found.max_distance, bidirectional=True, q_offset=block)

    def global_bias_table(self, *, layer: int = 0) -> torch.Tensor:
        """LongT5 transient-global: the side-bias table [num_buckets, heads]."""
        found = self._need(T5Bias, "global_bias_table", layer, "encoder")
        if found.global_table is None:
            raise ValueError("global_bias_table needs LongT5 with encoder_attention_type 'transient-global'")
        return found.global_table

    def alibi_slopes(self, *, layer: int = 0) -> torch.Tensor:
        return self._need(Alibi, "alibi_slopes", layer).slopes()

    def relative_positions(self, q_len: int, k_len: int) -> torch.Tensor:
        """DeBERTa-v2: [q_len, k_len] bucketed query − key positions (build_relative_position)."""
        return self._need(DisentangledRelative, "relative_positions").relative_positions(q_len, k_len)

    def relative_embeddings(self) -> torch.Tensor:
        """DeBERTa-v2: the relative embeddings the layers use (after the LayerNorm norm_rel_ebd asks for)."""
        return self._need(DisentangledRelative, "relative_embeddings").relative_embeddings()

    def position_embeddings(self) -> torch.Tensor:
        """[max_positions, d] learned absolute position vectors."""
        found = self.first(LearnedAbsolute)
        if found is None:
            raise ValueError(f"position_embeddings needs learned absolute positions; this {self.model_type} "
                             "model has none")
        return found.positions()

    # -- old single-structure views of T5 models ---------------------------------------------

    @property
    def stacks(self) -> list[str]:
        """The stacks that hold T5 bias tables (encoder first)."""
        return [s for s, layers in self.plans.items() if any(p.find(T5Bias) for p in layers)]

    def layers(self, stack: str) -> list[int]:
        """The layers of a stack that own a T5 table (block 0, or every layer for UMT5)."""
        return sorted({b.table_layer for p in self.plans.get(stack, []) if (b := p.find(T5Bias)) is not None})

    # -- summaries ---------------------------------------------------------------------------

    def runs(self, stack: str | None = None) -> list[tuple[int, int, LayerPlan]]:
        """(first, last, plan) for each run of consecutive layers that apply the same mechanisms."""
        out: list[tuple[int, int, LayerPlan]] = []
        for plan in self.plans[self._stack(stack)]:
            if out and out[-1][2].key() == plan.key():
                out[-1] = (out[-1][0], plan.index, out[-1][2])
            else:
                out.append((plan.index, plan.index, plan))
        return out

    def to_json(self) -> dict[str, Any]:
        """The plan per layer plus the small tables (no L × L matrices)."""
        out: dict[str, Any] = {"model_type": self.model_type, "scheme": self.scheme, "source": self.source,
                               "config": self.config, "notes": self.notes, "tensors_read": self.tensors_read,
                               "in_family_table": self.in_family_table,
                               **({"observed_entry": self.observed_entry} if self.observed_entry else {}),
                               "layers": {s: [p.to_json() for p in layers] for s, layers in self.plans.items()}}
        rotation = self.first(Rotation)
        if rotation is not None:
            out["rope_inv_freq"] = rotation.inv_freq().tolist()
            out["rope_attention_scaling"] = rotation.attention_scaling()
        alibi = self.first(Alibi)
        if alibi is not None:
            out["alibi_slopes"] = alibi.slopes().float().tolist()
        tables = {f"{p.stack}.{b.table_layer}": b.table.float().tolist() for p in self.all_layers()
                  if (b := p.find(T5Bias)) is not None and b.table is not None}
        if tables:
            out["bias_tables"] = dict(sorted(tables.items()))
        absolute = self.first(LearnedAbsolute)
        if absolute is not None and absolute.table is not None:
            out["position_embeddings_shape"] = list(absolute.table.shape)
        return out


# ---------------------------------------------------------------------------------------


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, Mapping):
        return max([_depth(v, level + 1) for v in value.values()] or [level + 1])
    if isinstance(value, (list, tuple)):
        return max([_depth(v, level + 1) for v in value] or [level + 1])
    return level


def read_plan(config: Mapping[str, Any], *, source: str = "config",
              tensor: Callable[[str], torch.Tensor | None] | None = None,
              family: Mapping[str, Any] | None = None) -> ModelPlan:
    """The per-layer plan of a parsed config.json; ``tensor(suffix)`` reads weights (None: config alone).

    ``family``: an entry to read instead of the table's (the one relviz.observe_position derives from what
    transformers ran, for a model_type outside the table); its keys are checked like the table's."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json); got {type(config).__name__}")
    if _depth(config) > MAX_DEPTH:
        raise ValueError(f"config is nested more than {MAX_DEPTH} levels deep: not a Hugging Face config")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ValueError("config field model_type is required (e.g. 'llama')")
    text = config.get("text_config")
    cfg = ConfigView(config)
    observed_entry = family is not None
    family, listed = family_of(model_type, dict(config)) if family is None else (
        check_family(model_type, dict(family)), False)
    # the model's stacks read from nested configs (a vision tower): kept when the text side's family is read
    nested = {name: spec for name, spec in family.get("stacks", {}).items() if spec.get("config")}
    if isinstance(text, Mapping) and not observed_entry and (not family or not listed
                                                             or text.get("model_type") in FAMILIES):
        cfg = ConfigView(text, "text_config.")          # a vision-language model: its text side
        inner, inner_listed = family_of(str(text.get("model_type")), dict(text))
        family, listed = (inner, inner_listed) if inner else (family, listed)
    if not family:
        raise ValueError(_unknown(model_type, config))
    refusal = family.get("refuse")          # the table's own: what transformers runs that relviz has no mechanism for
    if refusal and holds(cfg.data, refusal.get("when", {})):
        raise ValueError(f"model_type {str(cfg.raw('model_type', model_type))!r} is refused by relviz's family table: "
                         f"{refusal['reason']}")
    for fields in family.get("required", ()):    # what its config class fills with defaults the table does not hold
        if not any(cfg.has(f) for f in fields):
            raise ValueError(f"config field {cfg.name(fields[0])}"
                             + (f" (or {', '.join(cfg.name(f) for f in fields[1:])})" if fields[1:] else "")
                             + f" is left out: the {str(cfg.raw('model_type', model_type))!r} config class fills it "
                             "with a default of its own, which relviz's family table does not hold, so relviz cannot "
                             "tell what transformers runs (write the field out as the config class does)")
    if not listed and not observed_entry and not any(cfg.has(f) for f in LAYER_TYPE_FIELDS):
        hybrid = [f for f in HYBRID_FIELDS if cfg.has(f)]
        if hybrid:
            raise ValueError(f"model_type {model_type!r} is not in relviz's family table, and its config field "
                             f"{cfg.name(hybrid[0])} says which layers attend in a way relviz reads only for "
                             "families in its table: relviz cannot tell which layers attend, so it reads none "
                             "(relviz.hf.observe asks transformers)")
    cfg = derived_config(cfg, family, family["stacks"])
    root = ConfigView(config)
    shared: dict[str, Any] = {}
    plans: dict[str, list[LayerPlan]] = {}
    for stack, spec in {**family["stacks"], **nested}.items():
        # a stack read from a nested config (a vision tower's vision_config), with its own mechanisms; absent
        # from this config (a text-only checkpoint of the family): no such stack
        stack_cfg = root.sub(spec["config"]) if spec.get("config") else cfg
        if stack_cfg is None:
            continue
        mechanisms = spec.get("mechanisms", family["mechanisms"])
        field_name = spec["layers_field"]
        if not stack_cfg.has(field_name) and spec.get("fallback_field"):
            field_name = spec["fallback_field"]
        if spec.get("layers_sum"):              # Swin: depths, one entry per stage, the blocks summed
            layers = summed_layers(stack_cfg, field_name)
        else:
            layers = stack_cfg.int(field_name, spec.get("layers_default", REQUIRED), minimum=1, maximum=MAX_LAYERS)
        types = layer_types(stack_cfg, layers, field_name)
        plans[stack] = []
        for index in range(layers):
            ctx = LayerContext(config=config_of_layer(stack_cfg, index), stack=stack, index=index, layers=layers, layer_type=types[index],
                               causal=_causal(stack_cfg, spec), layers_field=field_name, tensor=tensor or (lambda suffix: None),
                               has_weights=tensor is not None, shared=shared)
            mixer = TokenMixer.read(ctx, mechanisms.get("mixer", {}))
            found: list[Mechanism] = [mixer]
            for name, options in mechanisms.items():
                if not mixer.attends or name == TokenMixer.name or not holds(stack_cfg.data, options.get("requires", {})):
                    continue
                mechanism = MECHANISMS[name].read(ctx, options)
                if mechanism is not None:
                    found.append(mechanism)
            check_read(ctx.config.name(f"layer_types[{index}]"), types[index], found)
            if mixer.attends and not any(m.positional for m in found):
                found.append(NoPosition())
            found.sort(key=lambda m: m.order)
            plans[stack].append(LayerPlan(stack, index, types[index], tuple(found),
                                          FROM_TABLE if listed else UNVERIFIED))
    plans = _mixers_where_they_differ(plans)
    plan = ModelPlan(model_type=model_type, source=source, plans=plans, in_family_table=listed,
                     observed_entry=dict(family) if observed_entry else None)
    plan.config = _summary(plan, cfg)
    plan.notes = sorted({n for p in plan.all_layers() for m in p.mechanisms for n in m.notes()})
    read_parts = {spec["config"] for spec in {**family["stacks"], **nested}.values() if spec.get("config")} | {
        "text_config"}
    for key, part in config.items():        # a vision or audio tower the family table reads no stack from: said
        if isinstance(part, Mapping) and isinstance(part.get("model_type"), str) and key not in read_parts:
            plan.notes.append(f"config field {key} ({part['model_type']!r}) is not read: relviz's family table "
                              f"reads no stack from it, so this plan holds {', '.join(plan.stack_names)} only")
    if not listed and not observed_entry:
        read = sorted(k for k in cfg.data if k in _FIELDS_READ or k.startswith("rope"))
        plan.notes.insert(0, f"model_type {model_type!r} is not in relviz's family table: every layer is read "
                             f"{UNVERIFIED} (as a decoder with transformers' standard rotary module, from "
                             f"{', '.join(read) or 'its rope settings'}); relviz.hf.observe checks it against "
                             "transformers")
    return plan


#: the fields a config read without a family entry looks at (the rotation's and the pattern's)
_FIELDS_READ = ("num_hidden_layers", "layer_types", "head_dim", "hidden_size", "num_attention_heads",
                "partial_rotary_factor", "max_position_embeddings", "sliding_window", "use_sliding_window",
                "attention_chunk_size")


def _mixers_where_they_differ(plans: dict[str, list[LayerPlan]]) -> dict[str, list[LayerPlan]]:
    """Keep the token mixer in a layer's mechanisms only in models where some layer does not just attend
    (the strip then gets a mixer row); a plain attention model's layers list their position mechanisms alone."""
    hybrid = any(p.mixer.kinds != (ATTENTION,) for layers in plans.values() for p in layers)
    if hybrid:
        return plans
    return {stack: [LayerPlan(p.stack, p.index, p.layer_type, tuple(m for m in p.mechanisms
                                                                  if not isinstance(m, TokenMixer)), p.read_from)
                    for p in layers] for stack, layers in plans.items()}


def _summary(plan: ModelPlan, cfg: ConfigView) -> dict[str, Any]:
    """Model-level settings by their transformers names. A setting every layer agrees on is one value; one that
    differs is a dict by layer type (by stack, then layer type, in a model of several stacks), None where those
    layers lack it, and ``{"per_layer": [...]}`` where layers of one type differ: never one layer's value shown as
    the model's (OLMo 3's sliding layers are plain RoPE, its full layers YaRN)."""
    out: dict[str, Any] = {f"{stack}_layers": len(layers) for stack, layers in plan.plans.items()}
    several = len(plan.plans) > 1
    per_layer: list[tuple[str, dict[str, Any]]] = []
    for stack, layers in plan.plans.items():
        for layer in layers:
            settings: dict[str, Any] = {}
            for m in layer.mechanisms:
                for key, value in m.settings().items():
                    settings.setdefault(key, value)
            group = " ".join(dict.fromkeys(str(part) for part in ((stack,) if several else ()) +
                                           (layer.layer_type or stack,)))
            per_layer.append((group, settings))
    keys = list(dict.fromkeys(k for _, settings in per_layer for k in settings))
    for key in keys:
        values = [(group, settings.get(key)) for group, settings in per_layer]
        if len({json.dumps(v, sort_keys=True, default=repr) for _, v in values}) == 1:
            out[key] = values[0][1]
            continue
        groups: dict[str, list[Any]] = {}
        for group, value in values:
            groups.setdefault(group, []).append(value)
        out[key] = {group: vs[0] if len({json.dumps(v, sort_keys=True, default=repr) for v in vs}) == 1
                    else {"per_layer": vs} for group, vs in groups.items()}
    if cfg.has("layer_types"):
        out["layer_types"] = list(cfg.raw("layer_types"))
    return out


def _causal(cfg: ConfigView, spec: Mapping[str, Any]) -> bool:
    """Whether a stack's self-attention is causal: the entry's, or a config field's where it names one (RoFormer's
    is_decoder: the same layers, causal only when the config makes it a decoder)."""
    return cfg.bool(spec["causal_field"], spec["causal"]) if spec.get("causal_field") else spec["causal"]


def _unknown(model_type: str, config: Mapping[str, Any]) -> str:
    could = [f for f in ("max_position_embeddings", "num_hidden_layers", "num_attention_heads", "layer_types",
                         "sliding_window") if config.get(f) is not None]
    return (f"model_type {model_type!r} is not supported: it is not in relviz's family table and its config has "
            f"no RoPE settings (rope_parameters, rope_scaling, rope_theta). relviz could read "
            f"{', '.join(could) or 'no position-related field'}; it could not tell which position mechanism its "
            f"layers apply. Supported: {', '.join(READ)}, and any model built on transformers' "
            f"standard rotary module")
