"""What a RoPE attention head is configured as: :class:`RopeConfig` and its :class:`RopeScaling`, read
from a Hugging Face config.json (``rope_config_from_hf``) or a published preset (``rope_presets``).

Its own module because everything RoPE in relviz starts from these settings (the frequencies in
:mod:`relviz.rope.math`, the page's views in :mod:`relviz.rope.scores`, the checker, the mechanisms):
each field is checked once here, where the config is built, and the maths trusts it.
"""
from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from relviz._checks import check_int


#: every rule relviz computes, as transformers 5.23 names them (modeling_rope_utils' ROPE_INIT_FUNCTIONS, plus
#: Hunyuan's ``ntk_alpha``, which its rotary module computes itself for a "dynamic" config with an ``alpha``);
#: relviz.rope.math.ROPE_RULES holds one function per name
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional", "ntk_alpha")

#: rules transformers' shared registry lacks, which only a family's own rotary module computes: rule -> whose
#: (a config of another family naming one is refused; the family's table entry names it through type_aliases)
FAMILY_RULES = {"ntk_alpha": "Hunyuan's rotary module (HunYuanDenseV1RotaryEmbedding)"}

#: the rules that stretch no original context (the figures mark none)
UNSTRETCHED = ("default", "proportional", "ntk_alpha")

#: rope_type -> what the rule does to θ, in words (the RoPE page's note under its rule)
RULE_TEXT = {
    "default": "plain RoPE: θ_i = base^(−2i/d).",
    "linear": "position interpolation: every θ_i divided by the factor, so positions up to factor × the "
              "original context fall in the angle range seen in training (high frequencies get squeezed too).",
    "dynamic": "dynamic NTK: once the sequence is longer than max_position_embeddings, the base grows to "
               "base · (factor·L/max − (factor − 1))^(d/(d−2)), recomputed for the current length L.",
    "yarn": "YaRN: pairs that turn more than beta_fast times in the original context keep θ_i, pairs that "
            "turn fewer than beta_slow times are interpolated (θ_i/factor), a linear ramp in between; the "
            "logits are scaled by the attention factor² (cos and sin each carry it).",
    "llama3": "Llama 3.1: wavelengths shorter than original/high_freq_factor untouched, longer than "
              "original/low_freq_factor divided by the factor, a smooth blend between.",
    "longrope": "LongRoPE: each wavelength multiplied by its own short factor (within the original context) "
                "or long factor (beyond it); attention factor sqrt(1 + ln(scale)/ln(original)).",
    "proportional": "proportional (Gemma 4's global layers): θ_i = base^(−2i/head_dim) for the first "
                    "int(partial_rotary_factor · head_dim // 2) pairs, θ = 0 (no turn) for the rest of the head, "
                    "then every θ divided by the factor; attention factor 1.",
    "ntk_alpha": "NTK-alpha (Hunyuan): the base raised once to base · alpha^(d/(d−2)), the same at every length.",
}

MAX_HEAD_DIM = 4096
MAX_POSITIONS = 1 << 24


def _check_float(name: str, value: object, *, minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None) -> float:
    """A finite real number within bounds, or ValueError naming ``name`` and the allowed range."""
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    allowed = f"a finite number {' and '.join(parts)}".rstrip()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    value = float(value)
    if (above is not None and value <= above) or (minimum is not None and value < minimum) \
            or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}; got {value:g}")
    return value


@dataclass(frozen=True)
class RopeScaling:
    """A scaling rule and its parameters (the fields of a config's ``rope_scaling``).

    ``None`` means "absent from the config": the rule then uses transformers' default for it.
    """

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    attention_factor: float | None = None
    beta_fast: float | None = None      # yarn (default 32)
    beta_slow: float | None = None      # yarn (default 1)
    mscale: float | None = None         # yarn, DeepSeek style
    mscale_all_dim: float | None = None
    truncate: bool | None = None        # yarn: floor/ceil the correction range (default True)
    low_freq_factor: float | None = None   # llama3
    high_freq_factor: float | None = None  # llama3
    short_factor: tuple[float, ...] | None = None  # longrope, one per rotary pair
    long_factor: tuple[float, ...] | None = None
    alpha: float | None = None          # ntk_alpha (Hunyuan): the base times alpha^(d/(d − 2)), whatever the length

    @property
    def scales(self) -> bool:
        """Whether a rule changes θ from the base's (every rope_type but plain RoPE's "default")."""
        return self.rope_type != "default"

    def __post_init__(self) -> None:
        if self.rope_type not in ROPE_TYPES:
            raise ValueError(f"rope_type must be one of {', '.join(ROPE_TYPES)}; got {self.rope_type!r}")
        needs_factor = self.rope_type in ("linear", "dynamic", "llama3") or \
            (self.rope_type == "yarn" and self.factor is None and self.original_max_position_embeddings is None)
        if needs_factor and self.factor is None:
            raise ValueError(f"factor is required for rope_type {self.rope_type!r} (a number >= 1)")
        if self.factor is not None:
            object.__setattr__(self, "factor", _check_float("factor", self.factor, above=0.0, maximum=1e6))
        if self.rope_type in ("yarn", "llama3", "longrope") and self.original_max_position_embeddings is not None:
            check_int("original_max_position_embeddings", self.original_max_position_embeddings,
                      minimum=1, maximum=MAX_POSITIONS)
        if self.attention_factor is not None:
            object.__setattr__(self, "attention_factor",
                               _check_float("attention_factor", self.attention_factor, above=0.0, maximum=1e3))
        for name in ("beta_fast", "beta_slow"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check_float(name, value, above=0.0, maximum=1e6))
        for name in ("mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check_float(name, value, minimum=0.0, maximum=1e3))
        if self.truncate is not None and not isinstance(self.truncate, bool):
            raise ValueError(f"truncate must be True or False; got {self.truncate!r}")
        if self.rope_type == "llama3":
            for name in ("low_freq_factor", "high_freq_factor"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name} is required for rope_type 'llama3' (a number > 0)")
                object.__setattr__(self, name, _check_float(name, getattr(self, name), above=0.0, maximum=1e6))
            if self.high_freq_factor < self.low_freq_factor:   # equal: no smooth band (Llama 4 Scout: 1 and 1)
                raise ValueError(f"high_freq_factor must be ≥ low_freq_factor ({self.low_freq_factor:g}); "
                                 f"got {self.high_freq_factor:g}")
            if self.original_max_position_embeddings is None:
                raise ValueError("original_max_position_embeddings is required for rope_type 'llama3' "
                                 f"(an integer from 1 to {MAX_POSITIONS})")
        if self.rope_type == "ntk_alpha":
            if self.alpha is None:
                raise ValueError("alpha is required for rope_type 'ntk_alpha' (a number > 0)")
            object.__setattr__(self, "alpha", _check_float("alpha", self.alpha, above=0.0, maximum=1e6))
        elif self.alpha is not None:
            raise ValueError(f"alpha belongs to rope_type 'ntk_alpha' only; got it with {self.rope_type!r}")
        if self.rope_type == "longrope":
            for name in ("short_factor", "long_factor"):
                values = getattr(self, name)
                if values is None or isinstance(values, (str, bytes)) or not isinstance(values, Sequence) \
                        or not values:
                    raise ValueError(f"{name} is required for rope_type 'longrope': a list of positive "
                                     f"numbers, one per rotary pair; got {values!r}")
                object.__setattr__(self, name, tuple(
                    _check_float(f"{name}[{k}]", v, above=0.0, maximum=1e6) for k, v in enumerate(values)))


@dataclass(frozen=True)
class RopeConfig:
    """The position-related settings of a RoPE attention head.

    ``max_position_embeddings`` matters to dynamic NTK (where scaling starts) and to yarn/longrope
    (their default factor and original length).
    """

    head_dim: int = 128
    base: float = 10000.0
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int = 4096
    scaling: RopeScaling = field(default_factory=RopeScaling)

    def __post_init__(self) -> None:
        check_int("head_dim", self.head_dim, minimum=2, maximum=MAX_HEAD_DIM)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (RoPE rotates pairs of dimensions); got {self.head_dim}")
        object.__setattr__(self, "base", _check_float("base", self.base, above=1.0, maximum=1e12))
        object.__setattr__(self, "partial_rotary_factor",
                           _check_float("partial_rotary_factor", self.partial_rotary_factor, above=0.0, maximum=1.0))
        check_int("max_position_embeddings", self.max_position_embeddings, minimum=1, maximum=MAX_POSITIONS)
        if not isinstance(self.scaling, RopeScaling):
            raise ValueError(f"scaling must be a RopeScaling; got {type(self.scaling).__name__}")
        if int(self.head_dim * self.partial_rotary_factor) < 2:
            raise ValueError(f"partial_rotary_factor × head_dim must leave at least 2 rotary dimensions; "
                             f"got int({self.partial_rotary_factor:g} × {self.head_dim}) = "
                             f"{int(self.head_dim * self.partial_rotary_factor)}")
        if self.scaling.rope_type in ("dynamic", "ntk_alpha") and self.rotary_dim < 4:
            raise ValueError(f"{self.scaling.rope_type} NTK raises the base to the power d/(d − 2): "
                             "rotary_dim must be >= 4; "
                             f"got {self.rotary_dim}")
        if self.scaling.rope_type == "longrope":
            for name in ("short_factor", "long_factor"):
                if len(getattr(self.scaling, name)) != self.pairs:
                    raise ValueError(f"{name} must have {self.pairs} entries "
                                     f"(one per rotary pair); got {len(getattr(self.scaling, name))}")

    @property
    def proportional(self) -> bool:
        """transformers' "proportional" rule (Gemma 4's global layers): cos and sin span the whole head, the pairs
        past ``turning_pairs`` hold θ = 0 (they do not turn), and θ_i's exponent is over head_dim."""
        return self.scaling.rope_type == "proportional"

    @property
    def rotary_dim(self) -> int:
        """How many dimensions go through the rotation (transformers: int(head_dim × partial_rotary_factor);
        the whole head under the proportional rule, whose extra pairs turn by θ = 0)."""
        return self.head_dim if self.proportional else int(self.head_dim * self.partial_rotary_factor)

    @property
    def turning_pairs(self) -> int:
        """How many pairs turn at all: every pair, but int(partial_rotary_factor · head_dim // 2) (transformers'
        rope_angles) under the proportional rule."""
        return int(self.partial_rotary_factor * self.head_dim // 2) if self.proportional else self.pairs

    @property
    def pairs(self) -> int:
        """How many pairs rotate: len(arange(0, rotary_dim, 2)) (an odd rotary_dim rounds up, as in HF)."""
        return (self.rotary_dim + 1) // 2

    @property
    def original_max_position_embeddings(self) -> int:
        """The pre-training context: the scaling's original length, else max_position_embeddings."""
        return self.scaling.original_max_position_embeddings or self.max_position_embeddings

    @property
    def scaled_from(self) -> int | None:
        """The original context a scaling stretches (what the figures mark), or None without a scaling or for a
        rule that stretches no context (proportional, NTK-alpha: the same θ at every length)."""
        return None if self.scaling.rope_type in UNSTRETCHED else self.original_max_position_embeddings

    def with_scaling(self, **changes: object) -> RopeConfig:
        return replace(self, scaling=replace(self.scaling, **changes))


class PerLayerTypeRope(ValueError):
    """A config whose RoPE parameters are nested per layer type (Gemma 3, ModernBERT): one RopeConfig cannot hold
    them; a model's per-layer plan (relviz.model_plan) reads each layer's. Its own type, so a caller that can ask
    for one layer (the checker's ``--layer``) tells it from a bad field without reading the message."""


def rope_config_from_hf(config: Mapping[str, object]) -> RopeConfig:
    """Read a Hugging Face config.json (as a dict) into a RopeConfig, as transformers standardises it.

    Reads ``rope_theta`` (or ``rope_parameters``/``rope_scaling`` holding it), ``partial_rotary_factor``,
    ``head_dim`` (else hidden_size // num_attention_heads), GPT-NeoX's ``rotary_pct`` (default 0.25)
    and ``rotary_emb_base`` and the scaling dict; a top-level
    ``original_max_position_embeddings`` (Phi-3) wins over the one inside the dict, as in transformers.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json); got {type(config).__name__}")
    scaling = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if not isinstance(scaling, Mapping):
        raise ValueError(f"rope_scaling must be a mapping or null; got {scaling!r}")
    if any(isinstance(v, Mapping) for v in scaling.values()):
        raise PerLayerTypeRope("rope_parameters nested per layer type are not supported (one RoPE per model only)")
    scaling = dict(scaling)
    rope_type = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    if rope_type == "su":  # Phi-3's first name for LongRoPE; transformers' Phi3Config reads it as longrope
        rope_type = "longrope"
    base = scaling.pop("rope_theta", None) or config.get("rope_theta") or config.get("rotary_emb_base") or 10000.0
    partial = (scaling.pop("partial_rotary_factor", None) or config.get("partial_rotary_factor")
               or config.get("rotary_pct") or 1.0)
    heads = config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (config["hidden_size"] // heads if heads else None)
    if head_dim is None:
        raise ValueError("config has neither head_dim nor hidden_size and num_attention_heads")
    max_positions = config.get("max_position_embeddings", 2048)
    if rope_type in ("yarn", "llama3", "longrope"):
        if config.get("original_max_position_embeddings") is not None:
            scaling["original_max_position_embeddings"] = config["original_max_position_embeddings"]
        scaling.setdefault("original_max_position_embeddings", max_positions)
    known = {f for f in RopeScaling.__dataclass_fields__} - {"rope_type"}
    if rope_type == "default":
        scaling = {}
    if rope_type == "ntk_alpha":     # Hunyuan's rule reads alpha alone (its configs carry YaRN leftovers it ignores)
        scaling = {"alpha": scaling.get("alpha")}
    unknown = sorted(set(scaling) - known)
    if unknown:
        raise ValueError(f"rope_scaling has fields relviz does not know for {rope_type!r}: {', '.join(unknown)}")
    return RopeConfig(head_dim=head_dim, base=base, partial_rotary_factor=partial,
                      max_position_embeddings=max_positions, scaling=RopeScaling(rope_type=rope_type, **scaling))


# ---------------------------------------------------------------------------------------
# Presets: published checkpoints' settings (relviz/presets.json names the source of each)

PRESETS_PATH = Path(__file__).resolve().parents[1] / "presets.json"


def load_presets() -> dict:
    """The presets file: {"rope": [...], "t5": [...], "alibi": [...], "missing": [...]}, each with its source."""
    return json.loads(PRESETS_PATH.read_text(encoding="utf-8"))


def rope_presets() -> dict[str, tuple[str, RopeConfig, str]]:
    """id -> (label, RopeConfig read from the model's config.json fields, source)."""
    return {entry["id"]: (entry["label"], rope_config_from_hf(entry["config"]), entry["source"])
            for entry in load_presets()["rope"]}


def preset_caption(label: str, config: RopeConfig, source: str) -> str:
    """One published preset in a line: its head, base, context and rule, and where the numbers come from."""
    return (f"**{label}** — head dim {config.head_dim}, rotary dims {config.rotary_dim}, base "
            f"{config.base:,g}, max_position_embeddings {config.max_position_embeddings:,}, rule "
            f"**{config.scaling.rope_type}**. Source: {source}.")


class HandSetRule(NamedTuple):
    """A scaling rule a head can be set by hand with: the RopeScaling fields it takes beyond the factor and the
    original context, and whether the model publishes max_position_embeddings = original × factor (``stretched``:
    yarn, llama3) or the original (linear, dynamic)."""

    fields: tuple[str, ...] = ()
    stretched: bool = False


#: the rules a head can be set by hand (the RoPE page's custom head, whose controls are these entries' fields);
#: plain RoPE (None) has no scaling, so neither a factor nor an original context. LongRoPE needs a factor per pair:
#: presets only.
HAND_SET_RULES: dict[str, HandSetRule | None] = {
    "default": None,
    "linear": HandSetRule(),
    "dynamic": HandSetRule(),
    "yarn": HandSetRule(("beta_fast", "beta_slow"), stretched=True),
    "llama3": HandSetRule(("low_freq_factor", "high_freq_factor"), stretched=True),
}


def hand_set_config(head_dim: int, base: float, rule: str, *, factor: float = 1.0, original: int = 4096,
                    **extra: float) -> RopeConfig:
    """A head set by hand: ``rule`` one of HAND_SET_RULES, ``extra`` the rule's own fields (others ignored)."""
    if rule not in HAND_SET_RULES:
        raise ValueError(f"rule must be one of {', '.join(HAND_SET_RULES)}; got {rule!r}")
    entry = HAND_SET_RULES[rule]
    if entry is None:
        return RopeConfig(head_dim=head_dim, base=base, max_position_embeddings=original)
    fields, stretched = entry
    if not stretched:
        return RopeConfig(head_dim=head_dim, base=base, max_position_embeddings=original,
                          scaling=RopeScaling(rule, factor=factor))
    return RopeConfig(head_dim=head_dim, base=base, max_position_embeddings=int(original * factor),
                      scaling=RopeScaling(rule, factor=factor, original_max_position_embeddings=original,
                                          **{name: extra[name] for name in fields}))
