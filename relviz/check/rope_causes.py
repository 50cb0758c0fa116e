"""The RoPE mistakes relviz can compute: each is a Recipe built from the same settings as the reference.

A mistake is named only when its cache, computed here, reproduces the upload on every cell
(relviz.check.rope.compare). The list follows what people got wrong in public code: the pair layout
when porting weights between Meta's and Hugging Face's rotations, GPT-J's concatenated sin/cos table,
θ's exponent over the wrong dimension count (partial rotary), positions from 1, θ or the angles in
bfloat16 or float16, a scaling rule dropped or swapped, YaRN's attention factor dropped or applied twice,
the rotary dims in the wrong place.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from relviz.check.rope import Recipe, RopeKind, RopeSettings, reference_recipe
from relviz.rope.config import RopeScaling
from relviz.rope.math import CACHE_LAYOUTS, default_inv_freq, rope_parameters, yarn_default_attention

#: Bases a "base off" mistake may have used instead (the common published values, 10^4 … 10^7).
COMMON_BASES = (10000.0, 20000.0, 50000.0, 100000.0, 150000.0, 160000.0, 250000.0, 500000.0, 1000000.0,
                2000000.0, 5000000.0, 10000000.0)

LAYOUT = "pair layout swapped (interleaved vs half-split)"
SWAP = "sin and cos swapped"
SINCOS = "sin and cos concatenated in one table instead of the cache the rotation multiplies"
COMPLEX = "cos and sin interleaved in one table (a complex cache viewed as real)"
SIGNED_SIN = "rotate_half's sign folded into the sin cache"
FROM_1 = "positions starting at 1"
DENOM_HEAD = "frequency exponent over head_dim instead of rotary_dim"
DENOM_MINUS_2 = "frequency exponent 2i/(d − 2) instead of 2i/d"
DENOM_NOT_DOUBLED = "frequency exponent i/d instead of 2i/d"
SCALING_MISSING = "scaling rule missing"
ATTN_MISSING = "attention factor missing (YaRN / LongRoPE mscale)"
ATTN_TWICE = "attention factor applied twice"
ATTN_DEFAULT = "attention factor 0.1·ln(factor) + 1 where the config sets its own"
PARTIAL_IGNORED = "partial rotary ignored: every dim rotates"
PARTIAL_AT_END = "partial rotary over the last dims instead of the first"
PARTIAL_SPLIT = "half-split pairs over head_dim instead of rotary_dim"
PARTIAL_AS_FULL_HEAD = "partial rotary cut from a full-head rotation (θ over head_dim, pairs (i, i + head_dim/2))"
NO_ROTATION_LAYER = "rotation applied on a layer that has none"


def base_off(base: float, configured: float) -> str:
    return f"base off: {base:g} instead of {configured:g}"


def angles_in(dtype: torch.dtype) -> str:
    return f"angles computed in {_name(dtype)}"


def inv_freq_in(dtype: torch.dtype) -> str:
    return f"inv_freq (θ) rounded to {_name(dtype)}"


#: Linear factors tried where the settings scale nothing (published models use 2 to 64).
SPURIOUS_FACTORS = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def scaling_where_none(factor: float) -> str:
    return f"linear scaling ×{factor:g} applied where the settings have none"


def wrong_rule(rule: str) -> str:
    return f"wrong scaling rule: {rule}"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class RopeCause:
    name: str
    explanation: str
    harmless: bool = False
    #: the low-precision format a step was done in (the check then says how large the error is and, with
    #: ``positions``, from which position neighbouring positions collapse)
    precision: torch.dtype | None = None
    positions: bool = False


def collapse_position(dtype: torch.dtype) -> int:
    """The first integer position p whose successor p + 1 rounds to the same value in ``dtype`` (bfloat16: 256,
    float16: 2048): from there on, neighbouring positions share one angle."""
    mantissa = round(-math.log2(torch.finfo(dtype).eps)) + 1   # significant bits: 8 (bfloat16), 11 (float16)
    return 1 << mantissa


def precision_note(cause: RopeCause, error: float, worst_row: int, first: int, rows: int) -> str:
    """What a low-precision step did to this cache, in numbers: the largest error and where positions collapse."""
    text = (f" The largest difference from the float32 reference is {error:.3g}, at row {worst_row} (position "
            f"{first + worst_row}).")
    if cause.positions:
        p = collapse_position(cause.precision)
        if first + rows - 1 > p:
            text += (f" From position {p} on, neighbouring positions round to the same {_name(cause.precision)} value "
                     f"({p + 1} → {p}), so rows {p - first} and {p + 1 - first} hold the same angles.")
        else:
            text += (f" Positions here end before {p}, where neighbouring positions would start to share one "
                     f"{_name(cause.precision)} value; the error is θ's and the product's rounding.")
    return text


def _with(s: RopeSettings, rows: int, **config_changes: object) -> torch.Tensor:
    """θ [P] for the settings' config with ``config_changes``."""
    return rope_parameters(replace(s.config, **config_changes), s.q_offset + rows, device="cpu")[0]


def _inv_freq_over(s: RopeSettings, denominator: int) -> torch.Tensor:
    """θ_i = base^(−2i/denominator) over the settings' pairs [rotary_dim/2]: relviz.rope.math's default rule
    with another denominator (base^(−i/d), the pair index not doubled, is base^(−2i/2d))."""
    return default_inv_freq(s.rotary_dim, s.base, "cpu", over=denominator)


def _scaling_alternatives(s: RopeSettings) -> Iterator[tuple[str, RopeScaling]]:
    """The other common rules at the same factor and original context (the rule the config names excluded)."""
    scaling = s.config.scaling
    factor = scaling.factor or 2.0
    original = s.config.original_max_position_embeddings
    options = {
        "linear": RopeScaling("linear", factor=factor),
        "yarn": RopeScaling("yarn", factor=factor, original_max_position_embeddings=original),
        "llama3": RopeScaling("llama3", factor=factor, original_max_position_embeddings=original,
                              low_freq_factor=1.0, high_freq_factor=4.0),
        "dynamic": RopeScaling("dynamic", factor=factor),
    }
    for rule, alternative in options.items():
        if rule != scaling.rope_type:
            yield rule, alternative


def variants(kind: RopeKind, s: RopeSettings, rows: int) -> Iterator[tuple[RopeCause, Recipe]]:
    """Every named mistake that applies at these settings, as the recipe that computes it."""
    ref = reference_recipe(s, rows)
    if not s.rotates:
        for other in s.elsewhere:
            yield RopeCause(NO_ROTATION_LAYER, "Your layer rotates q and k, but this layer of the model applies no "
                            "position at all (a NoPE layer: Llama 4's no_rope_layers, SmolLM3, Cohere 2's global "
                            "layers); the rotation of the model's other layers must be skipped here."), \
                reference_recipe(replace(other, q_offset=s.q_offset), rows)
        return
    if kind.laid_out:
        other = next(layout for layout in CACHE_LAYOUTS if layout != s.layout)
        yield RopeCause(LAYOUT, f"Your cache pairs the dims as the {other} layout; the settings say {s.layout}. "
                        "Meta's Llama and GPT-J rotate adjacent pairs (2i, 2i + 1); Hugging Face's rotate_half "
                        "pairs (i, i + d/2). Porting weights between them needs the q/k projection rows "
                        "permuted, or the rotation to follow the checkpoint's layout."), replace(ref, layout=other)
        yield RopeCause(SWAP, "Your cos cache holds sin (or your sin cache cos): the two were swapped where they "
                        "were built or unpacked."), replace(ref, swap=True)
        for table in ("sincos", "cossin"):
            yield RopeCause(SINCOS, "Your cache is one table of sin and cos side by side (GPT-J's "
                            "create_sinusoidal_positions returns cat(sin, cos)), not the cache the rotation "
                            "multiplies: split it (sin, cos = table.chunk(2, dim=-1)) and repeat each value for "
                            "the two dims of its pair."), replace(ref, table=table)
        if kind.signed_ok:
            yield RopeCause(SIGNED_SIN, "Your sin cache holds −sin on the first dim of each pair and sin on the "
                            "second (rotate_half's or rotate_every_two's sign moved into the cache). An equivalent "
                            "convention if your rotation then multiplies x by this cache without negating.",
                            harmless=True), replace(ref, signed=True)
        yield RopeCause(COMPLEX, "Your cache alternates cos and sin (torch.view_as_real of Meta's freqs_cis): "
                        "a cos cache repeats cos θ for both dims of a pair."), replace(ref, table="complex")
    yield RopeCause(FROM_1, "Your positions start at 1 (row 0 rotates by θ, not 0): e.g. arange(1, L + 1), or "
                    "position ids from an attention mask's cumsum without the − 1."), replace(ref, first=ref.first + 1)
    for base in COMMON_BASES:
        if base != s.base:
            yield RopeCause(base_off(base, s.base), f"Your θ_i = {base:g}^(−2i/d) but the settings say base {s.base:g}: "
                            "rope_theta was not read from the config (a default of 10000 is the usual culprit)."), \
                replace(ref, inv_freq=_with(s, rows, base=base))
    if s.rotary_dim != s.head_dim:
        yield RopeCause(DENOM_HEAD, f"Your θ_i = base^(−2i/{s.head_dim}) divides by head_dim; with partial rotary "
                        f"the exponent is over the rotary dims, 2i/{s.rotary_dim} (transformers' dim = "
                        "int(head_dim × partial_rotary_factor))."),  replace(ref, inv_freq=_inv_freq_over(s, s.head_dim))
    if s.config.scaling.rope_type == "default":
        if s.rotary_dim > 2:
            yield RopeCause(DENOM_MINUS_2, "Your θ_i = base^(−2i/(d − 2)): the last pair reaches exactly 1/base "
                            "(tensor2tensor's timescales k/(d/2 − 1)); RoPE's exponent is 2i/d."), \
                replace(ref, inv_freq=_inv_freq_over(s, s.rotary_dim - 2))
        yield RopeCause(DENOM_NOT_DOUBLED, "Your θ_i = base^(−i/d): the pair index is not doubled (arange(d/2)/d "
                        "instead of arange(0, d, 2)/d), so the frequencies fall half as fast."), \
            replace(ref, inv_freq=_inv_freq_over(s, 2 * s.rotary_dim))
    for dtype in (torch.bfloat16, torch.float16):
        yield RopeCause(angles_in(dtype), f"Your positions and θ were multiplied in {_name(dtype)} (e.g. "
                        f"arange(L, dtype=inv_freq.dtype) after the model was cast with .to({_name(dtype)})): "
                        "positions round and the angles drift with the position. Compute them in float32 "
                        "(transformers does it under autocast disabled).", precision=dtype, positions=True), \
            replace(ref, dtype=dtype)
        yield RopeCause(inv_freq_in(dtype), f"Your θ (inv_freq) was rounded to {_name(dtype)}, e.g. a buffer cast "
                        "with the model; the angles then drift with the position. Keep inv_freq in float32.",
                        precision=dtype), replace(ref, inv_freq=ref.inv_freq.to(dtype).float())
    scaling = s.config.scaling
    if scaling.rope_type != "default":
        yield RopeCause(SCALING_MISSING, f"Your cache is plain RoPE: the config's {scaling.rope_type} scaling "
                        "rule was not applied (rope_scaling / rope_parameters not read)."), \
            replace(ref, inv_freq=_with(s, rows, scaling=RopeScaling()), scale=1.0)
        for rule, alternative in _scaling_alternatives(s):
            try:
                inv_freq, scale = rope_parameters(replace(s.config, scaling=alternative), s.q_offset + rows,
                                                  device="cpu")
            except ValueError:
                continue
            yield RopeCause(wrong_rule(rule), f"Your frequencies follow the {rule} rule at the same factor; the "
                            f"settings say {scaling.rope_type}."), replace(ref, inv_freq=inv_freq, scale=scale)
    else:
        for factor in SPURIOUS_FACTORS:  # a rule applied where this layer has none (a model's other layers' rule)
            yield RopeCause(scaling_where_none(factor), f"Your frequencies are divided by {factor:g} (linear "
                            "scaling, position interpolation) but these settings scale nothing: a model-wide "
                            "rope_scaling was applied to a layer that keeps plain RoPE (Gemma 3's sliding layers "
                            "rotate unscaled at their local base; only its global layers use the ×8)."), \
                replace(ref, inv_freq=ref.inv_freq / factor)
    default = yarn_default_attention(scaling.factor or 1.0)
    configured = scaling.attention_factor is not None or (scaling.mscale and scaling.mscale_all_dim)
    if kind.scaled and scaling.rope_type == "yarn" and configured and abs(default - ref.scale) > 1e-9:
        yield RopeCause(ATTN_DEFAULT, f"Your cos and sin carry YaRN's default attention factor {default:.6g} "
                        f"(0.1·ln(factor) + 1), but the config sets {ref.scale:.6g} (its attention_factor, or "
                        "DeepSeek's get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)): the "
                        "config's field was not passed on."), replace(ref, scale=default)
    if kind.scaled and ref.scale != 1.0:
        yield RopeCause(ATTN_MISSING, f"Your cos and sin lack the attention factor {ref.scale:.6g} that YaRN "
                        "(0.1·ln(factor) + 1, or DeepSeek's mscale ratio) and LongRoPE put on them."), \
            replace(ref, scale=1.0)
        yield RopeCause(ATTN_TWICE, f"Your cos and sin carry the attention factor squared ({ref.scale ** 2:.6g}): "
                        "it was applied to the cache and again elsewhere (to the logits or the softmax scale)."), \
            replace(ref, scale=ref.scale ** 2)
    if s.rotary_dim != s.head_dim:
        yield RopeCause(PARTIAL_IGNORED, f"Every dim of your cache rotates; only the first {s.rotary_dim} of "
                        f"{s.head_dim} should (partial_rotary_factor / rotary_dim ignored)."), \
            replace(ref, inv_freq=_with(s, rows, partial_rotary_factor=1.0))
        if kind.laid_out:
            yield RopeCause(PARTIAL_AT_END, f"Your rotary dims are the last {s.rotary_dim}; the model rotates the "
                            "first ones (x[..., :rotary_dim]) and passes the rest through."), \
                replace(ref, start=s.head_dim - s.rotary_dim)
            if s.layout == "half":
                yield RopeCause(PARTIAL_AS_FULL_HEAD, f"Your rotary dims rotate as the first {s.rotary_dim // 2} pairs "
                                f"of a full-head RoPE: θ_i = base^(−2i/{s.head_dim}) and pairs (i, i + "
                                f"{s.head_dim // 2}). Partial rotary is a RoPE over the rotary dims alone: θ_i = "
                                f"base^(−2i/{s.rotary_dim}), pairs (i, i + {s.rotary_dim // 2}). This is also "
                                "transformers' 'proportional' RoPE (rope_type proportional: Gemma 4's global layers): "
                                "for such a model your cache is right, and relviz's settings cannot express that rule "
                                "yet."), \
                    replace(ref, inv_freq=_inv_freq_over(s, s.head_dim), stride=s.head_dim // 2)
                yield RopeCause(PARTIAL_SPLIT, f"Your pairs are (i, i + {s.head_dim // 2}): rotate_half was applied "
                                f"to the whole head; with partial rotary the pairs are (i, i + {s.rotary_dim // 2}) "
                                "within the rotary dims."), replace(ref, stride=s.head_dim // 2)
