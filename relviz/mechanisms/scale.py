"""Changes to the softmax temperature that depend on position or on the RoPE scaling.

- ``SoftmaxScale``: DeepSeek-V3 multiplies its softmax scale 1/√d_qk by get_mscale(factor, mscale_all_dim)²
  when its YaRN config sets mscale_all_dim (get_mscale(f, m) = 0.1·m·ln f + 1).
- ``QueryTemperature``: Llama 4's layers without RoPE scale each query by
  1 + attn_scale·ln(⌊(pos + 1)/floor_scale⌋ + 1), so attention sharpens slowly with position
  (``attn_temperature_tuning``; Nakanishi 2025, "Scalable-Softmax").
- ``PositionQueryScale``: Ministral 3 and Mistral 4 scale every layer's rotated queries by
  1 + β·ln(1 + ⌊pos / original_max_position_embeddings⌋) (``llama_4_scaling_beta`` in rope_parameters).
- ``FieldScale``: Granite sets the softmax scale outright (``attention_multiplier``).
- ``LayerIndexScale``: GPT-2's ``scale_attn_weights`` and ``scale_attn_by_inverse_layer_idx``.
- ``QueryPowerScale``: Beam's layers without RoPE scale each query by (1 + (pos + 1)/2048)^0.1, smoothly.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz.mechanisms.base import REQUIRED, LayerContext, Mechanism
from relviz.mechanisms.rotation import rope_free
from relviz.mechanisms.view_kinds import MAX_POINTS, LayerView, Note, TemperatureCurve, step_positions
from relviz.rope.math import get_mscale, llama4_query_scale

__all__ = ["SoftmaxScale", "QueryTemperature", "PositionQueryScale", "QueryPowerScale", "QueryScalar", "FieldScale",
           "LayerIndexScale"]


@dataclass(frozen=True)
class SoftmaxScale(Mechanism):
    head_dim: int
    factor: float
    mscale_all_dim: float

    name = "softmax_scale"
    option_types = {"head_dim_field": str}
    role = "scales the softmax"
    order = 70
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> SoftmaxScale | None:
        cfg = ctx.config
        params = cfg.sub("rope_parameters") or cfg.sub("rope_scaling")
        if params is None or params.raw("rope_type", params.raw("type", "default")) == "default":
            return None
        all_dim = params.float("mscale_all_dim", 0.0, minimum=0.0, maximum=1e3)
        if not all_dim:
            return None
        factor = params.float("factor", minimum=1e-6, maximum=1e6)
        return cls(head_dim=cfg.int(options["head_dim_field"], minimum=1, maximum=1 << 16), factor=factor,
                   mscale_all_dim=all_dim)

    def scale(self) -> float:
        """The softmax scale the layer uses, in place of 1/√d (DeepSeek-V3's yarn_apply_mscale)."""
        mscale = get_mscale(self.factor, self.mscale_all_dim)
        return self.head_dim ** (-0.5) * mscale * mscale

    def label(self) -> str:
        return f"scale ×{self.scale() * self.head_dim ** 0.5:.3g}"

    def describe(self) -> str:
        return (f"softmax scale 1/√{self.head_dim} × mscale² = {self.scale():.6g} "
                f"(factor {self.factor:g}, mscale_all_dim {self.mscale_all_dim:g})")

    def settings(self) -> dict[str, Any]:
        return {"softmax_scale": self.scale(), "factor": self.factor, "mscale_all_dim": self.mscale_all_dim}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note(f"Softmax {self.label()}", self.describe() + ": the same on every position, so it "
                     "sharpens every row alike (YaRN's length correction, applied to the logits).")]


@dataclass(frozen=True)
class QueryTemperature(Mechanism):
    attn_scale: float
    floor_scale: float

    name = "query_temperature"
    option_types = {"rope_flags_field": str}
    role = "scales queries with position"
    order = 71
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> QueryTemperature | None:
        cfg = ctx.config
        if not cfg.bool("attn_temperature_tuning", True):
            return None
        flags = cfg.list(options["rope_flags_field"], ctx.layers, lambda n, v: v, counted_by=ctx.layers_field)
        if flags is None or flags[ctx.index]:
            return None                       # only the layers without RoPE
        return cls(attn_scale=cfg.float("attn_scale", 0.1, minimum=0.0, maximum=1e3),
                   floor_scale=cfg.float("floor_scale", 8192, minimum=1.0, maximum=1e12))

    def factors(self, positions: torch.Tensor) -> torch.Tensor:
        """[L] the factor on each query at these positions, exactly as transformers computes it."""
        return torch.log1p(torch.floor((positions.float() + 1.0) / self.floor_scale)) * self.attn_scale + 1.0

    def label(self) -> str:
        return "q temperature"

    def describe(self) -> str:
        return (f"queries scaled by 1 + {self.attn_scale:g}·ln(⌊(pos + 1)/{self.floor_scale:g}⌋ + 1): "
                "no RoPE here, attention sharpens with position instead")

    def settings(self) -> dict[str, Any]:
        return {"attn_scale": self.attn_scale, "floor_scale": self.floor_scale}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        positions, sampled = step_positions(length, self.floor_scale)
        factors = self.factors(torch.from_numpy(positions)).double().numpy()
        first = math.ceil(self.floor_scale) - 1      # the first position whose pos + 1 reaches floor_scale
        flat = f"Flat at 1 for positions 0 to {first - 1:,}; the first step" if first > 0 else "The first step"
        caption = (f"{self.describe()}. {flat} is at position {first:,} (pos + 1 = {self.floor_scale:,g}), then one "
                   f"every {self.floor_scale:,g}: ×{factors[-1]:.3f} at position {length - 1:,}. Larger queries "
                   "make the softmax sharper, so a long context does not dilute attention to a uniform blur.")
        if sampled:
            caption += " (Steps sampled: each value drawn is exact.)"
        return [TemperatureCurve(f"Query temperature against position, over {length:,} positions", caption,
                                 positions, factors, length, sampled)]


@dataclass(frozen=True)
class PositionQueryScale(Mechanism):
    """Mistral's ``llama_4_scaling_beta``: after the rotation, every query is multiplied by
    1 + β·ln(1 + ⌊pos / original⌋), a step up at each multiple of the original context (transformers'
    ``get_llama_4_attn_scale``). A RoPE field by where it sits, a softmax temperature by what it does."""

    beta: float
    original: int

    name = "position_query_scale"
    option_types = {"beta_field": str}
    role = "scales queries with position"
    order = 71
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> PositionQueryScale:
        cfg = ctx.config
        params = cfg.sub("rope_parameters") or cfg.sub("rope_scaling")
        field = options.get("beta_field", "llama_4_scaling_beta")
        if params is None or params.raw(field) is None:   # transformers' attention multiplies by None and fails
            raise ValueError(f"config field {cfg.name('rope_parameters.' + field)} is required: this family's "
                             "attention scales every query by 1 + β·ln(1 + ⌊pos / original⌋) (a number ≥ 0)")
        beta = params.float(field, minimum=0.0, maximum=1e3)
        original = params.int("original_max_position_embeddings", cfg.int("max_position_embeddings", REQUIRED,
                                                                          minimum=1, maximum=1 << 24),
                              minimum=1, maximum=1 << 24)
        return cls(beta=beta, original=original)

    def factors(self, positions: torch.Tensor) -> torch.Tensor:
        """[L] the factor on each query at integer positions [L], exactly as transformers computes it."""
        return llama4_query_scale(positions, self.beta, self.original)

    def label(self) -> str:
        return "q scale by position"

    def describe(self) -> str:
        return (f"queries scaled by 1 + {self.beta:g}·ln(1 + ⌊pos/{self.original:,}⌋) after the rotation "
                "(llama_4_scaling_beta): attention sharpens past each multiple of the original context")

    def settings(self) -> dict[str, Any]:
        return {"llama_4_scaling_beta": self.beta, "query_scale_every": self.original}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        positions, sampled = step_positions(length, self.original)      # the last position before each step
        positions = np.unique(np.minimum(np.where(positions > 0, positions + 1, 0), length - 1))   # ⌊p/n⌋: its first
        factors = self.factors(torch.from_numpy(positions)).double().numpy()
        caption = (f"{self.describe()}. Flat at 1 for the first {self.original:,} positions, then a step every "
                   f"{self.original:,}: ×{factors[-1]:.3f} at position {length - 1:,}. It multiplies every logit of "
                   "the query's row, so the softmax sharpens as the context grows past the original one.")
        if sampled:
            caption += " (Steps sampled: each value drawn is exact.)"
        return [TemperatureCurve(f"Query scale against position, over {length:,} positions", caption,
                                 positions, factors, length, sampled)]


@dataclass(frozen=True)
class QueryPowerScale(Mechanism):
    """Beam's layers without RoPE: every query multiplied by (1 + (pos + 1)/length)^exponent, computed as
    exp(exponent · ln(1 + (pos + 1)/length)) (transformers' ``compute_attention_scaling``, "scalable softmax"):
    smooth, where Llama 4's temperature steps. Its two constants are the modeling code's, not config fields, so the
    family table holds them; it applies on the layer types whose rope_parameters entry is null, as the model's
    forward decides."""

    exponent: float
    length: float

    name = "query_power_scale"
    option_types = {"exponent": float, "length": float}
    role = "scales queries with position"
    order = 71
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> QueryPowerScale | None:
        if not rope_free(ctx.config, ctx.layer_type):
            return None                       # only the layer types that run without RoPE (as the rotation reads it)
        return cls(exponent=options["exponent"], length=options["length"])

    def factors(self, positions: torch.Tensor) -> torch.Tensor:
        """[L] the factor on each query at integer positions [L], exactly as transformers computes it."""
        return torch.exp(self.exponent * torch.log1p((positions.float() + 1) / self.length))

    def label(self) -> str:
        return "q scale by position"

    def describe(self) -> str:
        return (f"queries scaled by (1 + (pos + 1)/{self.length:,.0f})^{self.exponent:g}: no RoPE here, attention "
                "sharpens smoothly with position instead")

    def settings(self) -> dict[str, Any]:
        return {"query_scale_exponent": self.exponent, "query_scale_length": self.length}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        count = min(length, MAX_POINTS)
        positions = np.unique(np.round(np.geomspace(1, length, count)).astype(np.int64) - 1)
        factors = self.factors(torch.from_numpy(positions)).double().numpy()
        caption = (f"{self.describe()}. ×{factors[0]:.4f} at the first position, ×{factors[-1]:.3f} at position "
                   f"{length - 1:,}: larger queries make the softmax sharper, so a long context does not dilute "
                   "attention to a uniform blur.")
        sampled = count < length
        if sampled:
            caption += f" (Sampled at {len(positions)} positions: each value drawn is exact.)"
        return [TemperatureCurve(f"Query scale against position, over {length:,} positions", caption,
                                 positions, factors, length, sampled)]


@dataclass(frozen=True)
class FieldScale(Mechanism):
    """The softmax scale a config field sets outright, in place of 1/√head_dim: Granite's ``attention_multiplier``
    (µP: 1/head_dim where 1/√head_dim would be), which transformers hands its attention as ``scaling``."""

    field: str
    value: float
    head_dim: int | None = None

    name = "field_scale"
    option_types = {"field": str, "default": float}
    role = "scales the softmax"
    order = 72
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> FieldScale | None:
        cfg = ctx.config
        if cfg.raw(options["field"]) is None and "default" not in options:
            return None                       # HyperCLOVA X: null is 1/√head_dim, the standard scale
        value = cfg.float(options["field"], options.get("default", REQUIRED), minimum=1e-12, maximum=1e6)
        return cls(field=options["field"], value=value, head_dim=cfg.int("head_dim", None, minimum=1, maximum=1 << 16))

    def scale(self) -> float:
        """The softmax scale transformers uses on this layer (the config field's value)."""
        return self.value

    def label(self) -> str:
        return f"scale {self.value:.4g}"

    def describe(self) -> str:
        than = f" (1/√head_dim would be {self.head_dim ** -0.5:.6g})" if self.head_dim else ""
        return f"softmax scale {self.field} = {self.value:.6g}, in place of 1/√head_dim{than}"

    def settings(self) -> dict[str, Any]:
        return {self.field: self.value, "softmax_scale": self.value}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note(f"Softmax {self.label()}", self.describe() + ": the same for every position; it sets "
                     "how sharp every row of this layer's attention is.")]


@dataclass(frozen=True)
class LayerIndexScale(Mechanism):
    """GPT-2's two switches: 1/√head_dim only with ``scale_attn_weights``, and divided by the layer's index + 1 with
    ``scale_attn_by_inverse_layer_idx`` (transformers' GPT2Attention.scaling). Read only where they change the
    standard 1/√head_dim."""

    scale_value: float
    index: int
    scaled: bool
    by_layer: bool

    name = "layer_index_scale"
    option_types = {"width_field": str, "heads_field": str}
    role = "scales the softmax"
    order = 72
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> LayerIndexScale | None:
        cfg = ctx.config
        scaled, by_layer = cfg.bool("scale_attn_weights", True), cfg.bool("scale_attn_by_inverse_layer_idx", False)
        if scaled and not by_layer:
            return None                                            # the standard scale
        heads = cfg.int(options["heads_field"], minimum=1, maximum=1 << 16)
        head_dim = cfg.int(options["width_field"], minimum=1, maximum=1 << 24) // heads
        value = head_dim ** -0.5 if scaled else 1.0
        if by_layer:
            value /= float(ctx.index + 1)
        return cls(scale_value=value, index=ctx.index, scaled=scaled, by_layer=by_layer)

    def scale(self) -> float:
        """The softmax scale transformers uses on this layer."""
        return self.scale_value

    def label(self) -> str:
        return f"scale {self.scale_value:.4g}"

    def describe(self) -> str:
        base = "1/√head_dim" if self.scaled else "1 (scale_attn_weights off)"
        by = f", divided by layer index + 1 = {self.index + 1} (scale_attn_by_inverse_layer_idx)" if self.by_layer else ""
        return f"softmax scale {base}{by} = {self.scale_value:.6g}"

    def settings(self) -> dict[str, Any]:
        return {"softmax_scale": self.scale_value, "scale_attn_weights": self.scaled,
                "scale_attn_by_inverse_layer_idx": self.by_layer}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note(f"Softmax scale {self.label()}", self.describe() + ": the same for every position; deeper "
                     "layers get flatter rows where it divides by the layer's index." if self.by_layer else
                     self.describe() + ": the same for every position.")]


@dataclass(frozen=True)
class QueryScalar(Mechanism):
    """Gemma 2 and 3: the softmax scale is query_pre_attn_scalar^-0.5, not 1/√head_dim (their config's own
    field; transformers' attention sets ``scaling`` from it). Zamba's is (attention_head_dim / 2)^-0.5: the field
    and a divisor are options. Gemma 3n's and 4's attention sets its own (``scaling`` 1.0, so the scalar 1: the
    option ``family_scalar``), whatever the config says."""

    scalar: float
    head_dim: int | None
    fixed: bool = False      # Gemma 4: the family's attention sets it, whatever the config says
    field: str = "query_pre_attn_scalar"
    divisor: float = 1.0

    name = "query_scalar"
    option_types = {"default": float, "family_scalar": float, "field": str, "divisor": float}
    role = "scales the softmax"
    order = 72
    legend = "scale"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> QueryScalar:
        cfg = ctx.config
        head_dim = cfg.int("head_dim", None, minimum=1, maximum=1 << 16)
        if "family_scalar" in options:
            return cls(scalar=options["family_scalar"], head_dim=head_dim, fixed=True)
        field = options.get("field", "query_pre_attn_scalar")
        default = options.get("default", 256.0 if "field" not in options else REQUIRED)
        return cls(scalar=cfg.float(field, default, minimum=1e-6, maximum=1e12), head_dim=head_dim, field=field,
                   divisor=options.get("divisor", 1.0))

    def scale(self) -> float:
        """The softmax scale transformers uses on this layer ((config.query_pre_attn_scalar / divisor) ** -0.5)."""
        return (self.scalar / self.divisor) ** -0.5

    def label(self) -> str:
        return f"scale {self.scale():g}" if self.fixed else f"scale 1/√{self.scalar / self.divisor:g}"

    def describe(self) -> str:
        than = f" (1/√head_dim would be {self.head_dim ** -0.5:.6g})" if self.head_dim else ""
        if self.fixed:
            return (f"softmax scale {self.scale():.6g}, set by the family's attention whatever the config says "
                    f"(q and k are RMS-normalised per head instead){than}")
        what = f"({self.field} / {self.divisor:g})" if self.divisor != 1 else self.field
        return f"softmax scale {what}^-0.5 = 1/√{self.scalar / self.divisor:g} = {self.scale():.6g}{than}"

    def settings(self) -> dict[str, Any]:
        return {"softmax_scale": self.scale()} if self.fixed else {self.field: self.scalar,
                                                                     "softmax_scale": self.scale()}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note(f"Softmax {self.label()}", self.describe() + ": the same for every position; it sets "
                     "how sharp every row of this layer's attention is.")]
