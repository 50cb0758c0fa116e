"""Checking RoPE: the cos and sin caches a model multiplies q and k by, and the rotation angles.

Kinds (registered with relviz.check):

- ``rope_cos``, ``rope_sin``: [seq_len, head_dim], row m for position q_offset + m, as the model
  multiplies them: half-split pairs (i, i + r/2) as Llama and GPT-NeoX (``cat(freqs, freqs)``), or
  interleaved pairs (2i, 2i + 1) as GPT-J and Meta's Llama (each value twice in a row). With partial
  rotary (r = rotary_dim < head_dim) the pass-through dims r … head_dim − 1 hold cos 1 and sin 0. A
  scaling rule's attention factor (YaRN, LongRoPE) multiplies cos and sin, as in transformers.
- ``rope_angles``: [seq_len, r/2], the angle (q_offset + m)·θ_i of pair i.

The reference is transformers' arithmetic (relviz.rope: θ in float32, the angle one float32 product,
cos and sin in float32). Floats compare with a tolerance that grows with the angle (64 float32 ulps of
it, so a float64 implementation passes at any position) plus, when the upload is stored in bfloat16 or
float16, one unit of that format. A cause is named only when the mistake, computed for the same
settings (relviz.check.rope_causes), reproduces every cell.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import torch

from relviz._checks import check_int
from relviz.check.registry import Kind, register
from relviz.check.result import (
    FIRST_MISMATCHES, Cause, CheckResult, Mismatch, number, partial_cause, partial_worth_showing,
)
from relviz.rope.config import RopeConfig, RopeScaling
from relviz.rope.math import CACHE_LAYOUTS, rope_parameters

#: Most rows (positions) and cells of a checked cache.
MAX_ROWS = 65536
MAX_CELLS = 1 << 23
#: Tolerance: ATOL plus ANGLE_RTOL × |angle| (64 float32 ulps: float64 or exp/log implementations pass,
#: bfloat16 or float16 arithmetic, 2^−8 and 2^−11 relative, does not).
ATOL = 1e-6
ANGLE_RTOL = 2.0 ** -18
#: A named mistake is first tried on this many rows spread over the cache.
PROBE_ROWS = 64


@dataclass(frozen=True)
class RopeSettings:
    """What a RoPE cache depends on: the head's RoPE config (θ, rotary dims, scaling), the pair layout,
    and the first position (row m holds position q_offset + m)."""

    config: RopeConfig = field(default_factory=RopeConfig)
    layout: str = "half"
    q_offset: int = 0
    #: False: a layer without rotation (a model's NoPE layer): q and k pass unchanged, cos 1, sin 0, angle 0
    rotates: bool = True
    #: The model's rotating layers' settings (what a NoPE layer must not apply; relviz.check.rope_model)
    elsewhere: tuple[RopeSettings, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.config, RopeConfig):
            raise ValueError(f"config must be a relviz.rope.RopeConfig; got {type(self.config).__name__}")
        if self.layout not in CACHE_LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(CACHE_LAYOUTS)}; got {self.layout!r}")
        check_int("q_offset", self.q_offset, minimum=0, maximum=1 << 24)

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    @property
    def rotary_dim(self) -> int:
        return self.config.rotary_dim

    @property
    def base(self) -> float:
        return self.config.base

    @property
    def scaling(self) -> str:
        return describe_scaling(self.config.scaling) if self.rotates else "no rotation on this layer"


def describe_scaling(s: RopeScaling) -> str:
    """A scaling rule in a few words ("none", "yarn ×32 over 4096", ...)."""
    if s.rope_type == "default":
        return "none"
    parts = [s.rope_type]
    if s.factor is not None:
        parts.append(f"×{s.factor:g}")
    if s.original_max_position_embeddings is not None:
        parts.append(f"over {s.original_max_position_embeddings}")
    return " ".join(parts)


def rope_settings(*, head_dim: int, base: float = 10000.0, rotary_dim: int | None = None, layout: str = "half",
                  q_offset: int = 0, scaling: RopeScaling | None = None,
                  max_position_embeddings: int = 4096) -> RopeSettings:
    """RopeSettings from the numbers a user knows (rotary_dim: how many dims rotate, default all)."""
    head_dim = check_int("head_dim", head_dim, minimum=2, maximum=4096)
    rotary_dim = head_dim if rotary_dim is None else check_int("rotary_dim", rotary_dim, minimum=2, maximum=head_dim)
    if rotary_dim % 2:
        raise ValueError(f"rotary_dim must be even (RoPE rotates pairs of dimensions); got {rotary_dim}")
    config = RopeConfig(head_dim=head_dim, base=base, partial_rotary_factor=rotary_dim / head_dim,
                        max_position_embeddings=max_position_embeddings, scaling=scaling or RopeScaling())
    if config.rotary_dim != rotary_dim:  # int(head_dim × rotary_dim / head_dim) rounded down in floats
        config = replace(config, partial_rotary_factor=math.nextafter(rotary_dim / head_dim, 2.0))
    return RopeSettings(config, layout, q_offset)


# ---------------------------------------------------------------------------------------
# How a cache is computed: the reference and every named mistake are a Recipe


@dataclass(frozen=True)
class Recipe:
    """How a cache is computed. ``inv_freq`` [P] float32; ``first``: the position of row 0; ``dtype``: the
    arithmetic of positions × θ; ``scale``: on cos and sin; ``start``: the first rotary column;
    ``stride``: the distance between a half-split pair's two columns (r/2; head_dim/2 when split over the
    whole head); ``table``: "sincos"/"cossin" (one concatenated table), "complex" (cos, sin interleaved)."""

    inv_freq: torch.Tensor
    first: int
    layout: str
    scale: float = 1.0
    dtype: torch.dtype = torch.float32
    start: int = 0
    stride: int | None = None
    swap: bool = False
    table: str = ""
    signed: bool = False    # the first dim of each pair holds −value (rotate_half's sign folded into sin)


def reference_recipe(s: RopeSettings, rows: int) -> Recipe:
    inv_freq, scale = rope_parameters(s.config, s.q_offset + rows, device="cpu")
    if not s.rotates:
        inv_freq, scale = torch.zeros_like(inv_freq), 1.0  # every angle 0: cos 1, sin 0
    return Recipe(inv_freq, s.q_offset, s.layout, scale)


def angles_of(recipe: Recipe, rows: np.ndarray | int) -> torch.Tensor:
    """[R, P] float32: (first + row)·θ_i in the recipe's arithmetic (one product per cell, as transformers)."""
    rows = np.arange(rows) if isinstance(rows, int) else rows
    positions = torch.as_tensor(rows, dtype=torch.int64) + recipe.first                          # [R]
    return (positions.to(recipe.dtype)[:, None] * recipe.inv_freq.to(recipe.dtype)[None, :]).float()  # [R, P]


def lay_out(values: torch.Tensor, recipe: Recipe, head_dim: int, rest: float) -> torch.Tensor:
    """[R, head_dim]: per-pair values [R, P] placed in the recipe's columns, ``rest`` elsewhere."""
    rows, pairs = values.shape
    out = torch.full((rows, head_dim), rest, dtype=torch.float32)                                  # [R, D]
    stride = recipe.stride or pairs
    if not recipe.signed and recipe.start + 2 * pairs <= head_dim and (recipe.layout == "interleaved"
                                                                      or stride == pairs):
        # the common case as one contiguous block: [R, 2P] written at once (fancy indexing costs 10x more)
        block = (values.repeat_interleave(2, dim=1) if recipe.layout == "interleaved"
                 else torch.cat([values, values], 1))
        out[:, recipe.start:recipe.start + 2 * pairs] = block
        return out
    index = torch.arange(pairs)
    if recipe.layout == "interleaved":
        first, second = recipe.start + 2 * index, recipe.start + 2 * index + 1
    else:
        first, second = recipe.start + index, recipe.start + index + stride
    keep = second < head_dim
    out[:, first[keep]] = -values[:, keep] if recipe.signed else values[:, keep]
    out[:, second[keep]] = values[:, keep]
    return out


def _table(angle: torch.Tensor, recipe: Recipe, head_dim: int) -> torch.Tensor:
    """A single sin/cos table where one cache was expected (rotary columns; 1 on the rest)."""
    cos, sin = angle.cos() * recipe.scale, angle.sin() * recipe.scale                               # [R, P]
    if recipe.table == "complex":
        values = torch.stack([cos, sin], dim=-1).flatten(1)                                          # [R, 2P]
    else:
        values = torch.cat([sin, cos] if recipe.table == "sincos" else [cos, sin], dim=1)           # [R, 2P]
    out = torch.ones(angle.shape[0], head_dim)
    width = min(values.shape[1], head_dim - recipe.start)
    out[:, recipe.start:recipe.start + width] = values[:, :width]
    return out


@dataclass(frozen=True)
class RopeKind:
    """A RoPE kind: what its array holds, computed from a recipe at the given rows."""

    name: str
    description: str
    build: Callable[[Recipe, np.ndarray, int], torch.Tensor]   # (recipe, rows, width) -> [R, width]
    width_of: Callable[[RopeSettings], int]
    pairs_of: Callable[[RopeSettings, int], np.ndarray]       # (settings, width) -> pair of each column
    scaled: bool = True     # whether the attention factor shows (cos, sin) or not (angles)
    laid_out: bool = True   # whether the layout shows
    #: (head_dim, rotary_dim) an array of this shape implies when the flags do not say
    dims_of: Callable[[tuple[int, int]], tuple[int, int | None]] = lambda shape: (shape[1], None)
    #: what to take from a function's output (the cos or the sin of its (cos, sin); None: all of it)
    pick: int | None = None
    #: whether a sign-folded variant exists (a sin cache: −sin, sin per pair)
    signed_ok: bool = False
    #: what a pass-through dim holds (cos 1, sin 0; None: the kind has no pass-through dims)
    rest: float | None = None
    signature: str = "fn(seq_len, head_dim) -> (cos, sin), each [seq_len, head_dim]"


def _cache(recipe: Recipe, rows: np.ndarray, width: int, *, sine: bool) -> torch.Tensor:
    """The cos cache (``sine=False``) or the sin cache at ``rows``, [R, width]; a recipe with ``swap``
    (the named mistake of swapped caches) gives the other one, pass-through dims included."""
    angle = angles_of(recipe, rows)
    if recipe.table:
        return _table(angle, recipe, width)
    sine = sine != recipe.swap
    values = angle.sin() if sine else angle.cos()
    return lay_out(values * recipe.scale, recipe, width, 0.0 if sine else 1.0)


def _angles(recipe: Recipe, rows: np.ndarray, width: int) -> torch.Tensor:
    angle = angles_of(recipe, rows)
    out = torch.zeros(angle.shape[0], width)
    out[:, :min(width, angle.shape[1])] = angle[:, :width]
    return out


def _cache_pairs(s: RopeSettings, width: int) -> np.ndarray:
    """The frequency pair of each column of a cos/sin cache (−1: a pass-through dim)."""
    r = s.rotary_dim
    pairs = np.full(width, -1)
    columns = np.arange(min(r, width))
    pairs[columns] = columns // 2 if s.layout == "interleaved" else columns % (r // 2)
    return pairs


COS = RopeKind("rope_cos", "RoPE cos cache [seq_len, head_dim]", partial(_cache, sine=False),
               lambda s: s.head_dim, _cache_pairs, pick=0, rest=1.0)
SIN = RopeKind("rope_sin", "RoPE sin cache [seq_len, head_dim]", partial(_cache, sine=True),
               lambda s: s.head_dim, _cache_pairs, pick=1, signed_ok=True, rest=0.0)
ANGLES = RopeKind("rope_angles", "RoPE angles [seq_len, rotary_dim / 2]", _angles, lambda s: s.rotary_dim // 2,
                  lambda s, width: np.arange(width), scaled=False, laid_out=False,
                  dims_of=lambda shape: (2 * shape[1], 2 * shape[1]),
                  signature="fn(seq_len, head_dim) -> angles [seq_len, rotary_dim / 2] (position × θ_i)")
ROPE_KINDS: dict[str, RopeKind] = {kind.name: kind for kind in (COS, SIN, ANGLES)}


# ---------------------------------------------------------------------------------------
# Comparing


def _storage(got: np.ndarray) -> torch.dtype | None:
    """The half-precision format the upload is stored in (every value exactly representable), or None."""
    values = torch.as_tensor(got, dtype=torch.float64)
    for dtype in (torch.bfloat16, torch.float16):
        if torch.equal(values.to(dtype).double(), values):
            return dtype
    return None


def tolerance(angle_bound: np.ndarray, values: np.ndarray, storage: torch.dtype | None) -> np.ndarray:
    """Per-cell tolerance: ATOL + ANGLE_RTOL·|angle| (+ one unit of the storage format)."""
    tol = ATOL + ANGLE_RTOL * np.abs(angle_bound)
    if storage is torch.bfloat16:
        tol = tol + np.abs(values) * 2.0 ** -7
    elif storage is torch.float16:
        tol = tol + np.abs(values) * 2.0 ** -10 + 2.0 ** -24
    return tol


def _angle_bound(kind: RopeKind, recipe: Recipe, rows: np.ndarray, width: int) -> np.ndarray:
    """[R, width] |angle| behind each cell as ``recipe`` places it (a one-table recipe: the row's largest)."""
    angle = angles_of(recipe, rows).abs()                                                      # [R, P]
    if recipe.table:
        return angle.amax(dim=1, keepdim=True).expand(-1, width).double().numpy()
    if not kind.laid_out:
        return kind.build(replace(recipe, scale=1.0), rows, width).abs().double().numpy()
    return lay_out(angle, replace(recipe, swap=False), width, 0.0).double().numpy()


def validate(kind: RopeKind, got: np.ndarray, s: RopeSettings) -> None:
    if not isinstance(s, RopeSettings):
        raise ValueError(f"settings for kind {kind.name!r} must be RopeSettings (relviz.check.rope); "
                         f"got {type(s).__name__}")
    if got.ndim != 2:
        raise ValueError(f"a {kind.description} is 2-D; got shape {tuple(got.shape)}")
    rows, width = got.shape
    check_int("rows of the cache (positions)", rows, minimum=1, maximum=MAX_ROWS)
    if rows * width > MAX_CELLS:
        raise ValueError(f"the cache has {rows * width:,} values; at most {MAX_CELLS:,} are checked")
    if width != kind.width_of(s):
        raise ValueError(f"a {kind.description} for head_dim {s.head_dim}, rotary_dim {s.rotary_dim} has "
                         f"{kind.width_of(s)} columns; got {width} (shape {tuple(got.shape)})"
                         + (" — one column per pair? repeat each value for both dims of its pair as your rotation "
                            "does, or check the angles with kind rope_angles" if kind.laid_out
                            and width == s.rotary_dim // 2 else ""))
    if not np.isfinite(got).all():
        raise ValueError("the cache holds NaN or infinite values: a RoPE cache is finite everywhere")


def compare(kind_name: str, got: np.ndarray, s: RopeSettings, *, fitted: bool = False) -> CheckResult:
    """Compare ``got`` with the reference cache at ``s``; name every computed mistake that reproduces it."""
    from relviz.check.rope_causes import variants  # here, not at the top: rope_causes imports this module

    kind = ROPE_KINDS[kind_name]
    got = np.asarray(got, dtype=np.float64)
    validate(kind, got, s)
    rows, width = got.shape
    every = np.arange(rows)
    storage = _storage(got)
    ref = reference_recipe(s, rows)
    exact = kind.build(ref, every, width)                                    # [R, W] float32, the reference
    expected = exact.double().numpy()
    bound = _angle_bound(kind, ref, every, width)
    # "matches": the float32 reference within float32 rounding; a cache stored in bfloat16 or float16 is named
    mismatch = ~(np.abs(expected - got) <= tolerance(bound, expected, None))
    causes: list[Cause] = []
    closest = None
    if mismatch.any() and storage is not None:
        stored = _stored(exact, storage)
        if (np.abs(stored - got) <= tolerance(bound, stored, storage)).all():
            causes.append(replace(stored_cause(storage, expected, got, stored, s.q_offset),
                                  reproduce=proof(kind, ref, ref, got, storage)))
    if mismatch.any():  # a mistake can coincide with the storage rounding (a few positions): list both
        # Each mistake is tried on a spread of rows first; only one that reproduces them is built in full.
        probe = np.unique(np.linspace(0, rows - 1, min(rows, PROBE_ROWS)).round().astype(np.int64))
        near: list[tuple[float, Any, Recipe]] = []
        for variant, recipe in variants(kind, s, rows):
            matches = _reproduces(kind, recipe, ref, got, probe, width, storage)
            if matches.all():
                full = _reproduces(kind, recipe, ref, got, every, width, storage)
                if not full.all():   # the probe rows agree, others do not: its share of every row, scaled to probe's
                    near.append((float((full & mismatch).sum()) * len(probe) / rows, variant, recipe))
                    continue
                if variant.name not in [c.name for c in causes]:
                    explanation = variant.explanation
                    if variant.precision is not None:
                        from relviz.check.rope_causes import precision_note

                        gap = np.abs(expected - got)
                        worst = int(np.unravel_index(int(gap.argmax()), gap.shape)[0])
                        explanation += precision_note(variant, float(gap.max()), worst, s.q_offset, rows)
                    causes.append(Cause(variant.name, explanation, variant.harmless, 1.0,
                                        proof(kind, recipe, ref, got, storage)))
                continue
            near.append((float((matches & mismatch[probe]).sum()), variant, recipe))
        if not causes:  # the closest partial fit: the share of the cells it reproduces, where that beats the
            reference_share = 1.0 - float(mismatch.mean())  # reference's own (else it explains nothing)
            for _, variant, recipe in sorted(near, key=lambda item: -item[0])[:3]:
                matches = _reproduces(kind, recipe, ref, got, every, width, storage)
                explained = float(matches.mean())
                if partial_worth_showing(explained, reference_share) and (closest is None or explained > closest.explains):
                    closest = partial_cause(variant.name, variant.explanation, variant.harmless, explained)
    pairs = kind.pairs_of(s, width)
    cells = np.argwhere(mismatch)[:FIRST_MISMATCHES]
    first = tuple(Mismatch(int(i), int(j), int(pairs[j]), number(expected[i, j]), number(got[i, j]))
                  for i, j in cells)
    note = (f"Row m holds position {s.q_offset} + m; columns follow the {s.layout} layout "
            f"({'pairs (2i, 2i + 1)' if s.layout == 'interleaved' else 'pairs (i, i + rotary_dim/2)'}); "
            "the mismatch table's third column is the frequency pair i of the column (−1: a pass-through dim)."
            if kind.laid_out else f"Row m holds position {s.q_offset} + m; column i is pair i's angle.")
    return CheckResult(kind_name, s, fitted, expected, got, np.ones_like(mismatch), mismatch, first,
                       tuple(causes), None if causes else closest, note, np.broadcast_to(pairs, got.shape))


def stored_in(storage: torch.dtype) -> str:
    return f"stored in {str(storage).removeprefix('torch.')}"


def stored_cause(storage: torch.dtype, expected: np.ndarray, got: np.ndarray, stored: np.ndarray,
                 first: int) -> Cause:
    """The reference rounded to ``storage`` reproduces the upload: name the step, the error, and where neighbouring
    positions start to share one stored value (their float32 values differ)."""
    name = str(storage).removeprefix("torch.")
    gap = np.abs(got - expected)
    worst = int(np.unravel_index(int(gap.argmax()), gap.shape)[0])
    collapsed = (stored[1:] == stored[:-1]) & (expected[1:] != expected[:-1])            # [R − 1, W]
    rows = np.flatnonzero(collapsed.any(axis=1))
    text = (f"Every cell is relviz's float32 reference rounded to {name}: the cache was stored (or cast) in {name}, "
            f"as transformers does for a {name} model (cos and sin are cast to the dtype of q and k). The largest "
            f"difference from the float32 reference is {gap.max():.3g}, at row {worst} (position {first + worst}).")
    if rows.size:
        text += (f" From position {first + int(rows[0])} on, neighbouring positions share one stored value in some "
                 "dims where their float32 values differ.")
    return Cause(stored_in(storage), text, True, 1.0)


def proof(kind: RopeKind, recipe: Recipe, ref: Recipe, got: np.ndarray,
          storage: torch.dtype | None) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """A cause's ``reproduce``: the whole cache ``recipe`` gives (rounded to the upload's storage format, if any)
    and each cell's tolerance (the angle bound of the reference and of the recipe, whichever is larger)."""
    def reproduce() -> tuple[np.ndarray, np.ndarray]:
        rows, width = got.shape
        every = np.arange(rows)
        built = _stored(kind.build(recipe, every, width), storage)
        bound = np.maximum(_angle_bound(kind, ref, every, width), _angle_bound(kind, recipe, every, width))
        return built, tolerance(bound, built, storage)
    return reproduce


def _reproduces(kind: RopeKind, recipe: Recipe, ref: Recipe, got: np.ndarray, rows: np.ndarray, width: int,
                storage: torch.dtype | None) -> np.ndarray:
    """[R, width] bool: which cells of ``got``'s ``rows`` the recipe reproduces within the tolerance (the angle
    bound of the reference and of the recipe, whichever is larger)."""
    built = _stored(kind.build(recipe, rows, width), storage)
    bound = np.maximum(_angle_bound(kind, ref, rows, width), _angle_bound(kind, recipe, rows, width))
    return np.abs(built - got[rows]) <= tolerance(bound, built, storage)


def variant_cache(kind_name: str, cause: str, shape: tuple[int, ...], s: RopeSettings) -> np.ndarray | None:
    """The array the named mistake (relviz.check.rope_causes) produces at ``shape`` and ``s`` (None: it does not
    apply there); the reference itself for cause ''."""
    from relviz.check.rope_causes import variants  # here, not at the top: rope_causes imports this module

    kind = ROPE_KINDS[kind_name]
    rows, width = shape
    validate(kind, np.zeros((rows, width)), s)
    if not cause:
        return kind.build(reference_recipe(s, rows), np.arange(rows), width).double().numpy()
    recipe = next((r for c, r in variants(kind, s, rows) if c.name == cause), None)
    return None if recipe is None else kind.build(recipe, np.arange(rows), width).double().numpy()


def _stored(values: torch.Tensor, storage: torch.dtype | None) -> np.ndarray:
    """float64 values as the upload stores them (rounded to its half-precision format, if any)."""
    return (values if storage is None else values.to(storage)).double().numpy()


def check(kind_name: str, got: np.ndarray, settings: RopeSettings | None) -> CheckResult:
    """Compare with ``settings`` (None: search for them); a mismatch no named mistake reproduces is explained by
    the settings search (relviz.check.rope_fit.explain): other settings, with or without one named mistake."""
    from relviz.check.rope_fit import explain, fit  # here, not at the top: rope_fit imports this module

    if settings is None:
        return fit(kind_name, got)
    return explain(compare(kind_name, got, settings), settings)


PAGE_HINT = ("RoPE: upload the cache your model multiplies q and k by, `cos` or `sin` of shape [seq_len, head_dim] "
             "(e.g. `np.save(path, cos[0, 0].float().numpy())`), or the angles [seq_len, rotary_dim / 2]. Row m is "
             "position q_offset + m; pass-through dims of a partial rotary hold cos 1 and sin 0.")


def _from_args(kind: RopeKind, args: Any, shape: tuple[int, ...] | None) -> RopeSettings:
    from relviz.check.rope_model import settings_from_args  # rope_model (the readers of settings) imports this module

    return settings_from_args(kind, args, shape)


def _invoke(kind: RopeKind) -> Callable[[Callable[..., Any], RopeSettings, int], Any]:
    def invoke(fn: Callable[..., Any], s: RopeSettings, length: int) -> Any:
        out = fn(length, s.head_dim)
        if kind.pick is None:
            return out
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"expected a pair (cos, sin); got {type(out).__name__}")
        return out[kind.pick]
    return invoke


for _kind in ROPE_KINDS.values():
    register(Kind(_kind.name, _kind.description, ("head_dim", "rotary_dim", "base", "layout", "scaling", "q_offset"),
                  lambda got, s, name=_kind.name: check(name, got, s), labels=("row", "column", "pair"),
                  axes=("row m: position q_offset + m", "column (dim)" if _kind.laid_out else "column: pair i"),
                  max_side=MAX_ROWS, hint=PAGE_HINT,
                  from_args=lambda args, shape, kind=_kind: _from_args(kind, args, shape),
                  invoke=_invoke(_kind), signature=_kind.signature,
                  variant=lambda cause, shape, s, name=_kind.name: variant_cache(name, cause, shape, s)))
