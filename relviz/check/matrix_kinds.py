"""The six position-matrix kinds of the checker: their references, their named mistakes, their settings grids.

Each is a ``MatrixKind`` registered with the engine (relviz.check.matrix); a new kind is one more entry
here (or in a module of its own), never a branch in the engine.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from relviz._checks import check_int
from relviz.check.alibi_slopes import (  # noqa: F401  (the cause names are re-exported for tests and callers)
    ALIBI_TWICE, ALIBI_TWICE_TEXT, BIAS_MAX_IGNORED, BIAS_MAX_TEXT, EXTRA_FIRST, EXTRA_FIRST_TEXT, FROM_0, FROM_0_TEXT,
    MAX_HEADS, SORTED, SORTED_TEXT, _bf16, _power_of_2, _slopes, _slopes_extra_first, _slopes_from_0, _slopes_naive,
    _slopes_sorted, _slopes_truncated,
)
from relviz.check.matrix import Grid, MatrixKind, Settings, Variant, register_matrix_kind
from relviz.positions import (relative_positions, shaw_clip_offsets, t5_bucket, t5_config, t5_direction, t5_finish,
                              t5_log_part)
from relviz.precision import t5_bucket_in_dtype, t5_bucket_mesh_tf
from relviz.skew import skew, skew_variant

#: The settings search's bounded grid (a setting outside it must be given explicitly).
FIT_NUM_BUCKETS = range(2, 129)
FIT_MAX_DISTANCES = (8, 16, 20, 24, 32, 48, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024)
FIT_MAX_K = 512


def t5_bucket_variant(n: np.ndarray, num_buckets: int, max_distance: int, bidirectional: bool, *,
                      rounded: bool = False, max_exact_before_halving: bool = False, clamp: bool = True,
                      log: bool = True) -> np.ndarray:
    """T5 buckets with a coding mistake: rounding instead of truncation, max_exact = num_buckets // 2
    taken before the halving for direction, no clamp to the last bucket, or no log buckets at all (every
    distance its own bucket up to the last). With every flag at its default this is Hugging Face's
    ``_relative_position_bucket`` (tests check it equals relviz's t5_bucket). The arithmetic variants
    (Mesh TensorFlow, bfloat16, float16) are relviz.precision's."""
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = (num_buckets if max_exact_before_halving else per_direction) // 2
    first, n = t5_direction(torch.as_tensor(np.asarray(n, dtype=np.int64)), bidirectional, per_direction)
    if not log or max_exact < 1 or max_distance <= max_exact:
        return (first + n.clamp(max=per_direction - 1)).numpy()
    large = t5_log_part(n, max_exact, max_distance, per_direction)
    return t5_finish(first, n, large.round() if rounded else large, max_exact, per_direction, clamp=clamp).numpy()


def _t5_arithmetic(n: np.ndarray, s: Settings, dtype: torch.dtype | None) -> np.ndarray:
    """T5 buckets in another arithmetic: Mesh TensorFlow's float32 (dtype None) or the formula in dtype."""
    n = torch.as_tensor(n)
    kwargs = dict(num_buckets=s.num_buckets, max_distance=s.max_distance, bidirectional=s.bidirectional)
    return (t5_bucket_mesh_tf(n, **kwargs) if dtype is None else t5_bucket_in_dtype(n, dtype, **kwargs)).numpy()


def _t5(n: np.ndarray, s: Settings, bidirectional: bool | None = None) -> np.ndarray:
    bidirectional = s.bidirectional if bidirectional is None else bidirectional
    return t5_bucket(torch.as_tensor(n), num_buckets=s.num_buckets, max_distance=s.max_distance,
                     bidirectional=bidirectional).numpy()


def _shaw(n: np.ndarray, k: int) -> np.ndarray:
    return shaw_clip_offsets(torch.as_tensor(n), k=k).numpy()


def _skew_input(length: int) -> torch.Tensor:
    """The qer the skew check feeds: cell (row, col) holds row·L + col, so an output names its source."""
    return torch.arange(length * length, dtype=torch.float32).reshape(length, length)


def _skew_like(length: int, *, pad_right: bool, drop_last: bool, flip: bool = False) -> np.ndarray:
    qer = _skew_input(length)
    qer = qer.flip(-1) if flip else qer
    return skew_variant(qer, pad_right=pad_right, drop_last=drop_last).numpy().astype(np.float64)




def _other_alignment(grid: Grid, s: Settings) -> int | None:
    """The query offset of the other alignment convention (first keys: 0, last keys: k_len − q_len)."""
    last = grid.k_len - grid.q_len
    if last == 0:
        return None
    return last if s.q_offset == 0 else (0 if s.q_offset == last else None)


def _alignment(fn: Callable[[Grid, Settings], np.ndarray]) -> Callable[[Grid, Settings], np.ndarray | None]:
    def build(grid: Grid, s: Settings) -> np.ndarray | None:
        other = _other_alignment(grid, s)
        return None if other is None else fn(grid, replace(s, q_offset=other))
    return build


ALIGNMENT = ("queries aligned to the other end",
             "Your queries sit at the other end of the keys: query i at key position i (T5, offset 0) versus the "
             "last q_len keys (tensor2tensor, offset k_len − q_len). Both conventions exist; pick the one your "
             "model's cache uses and set the query offset to match.")

SIGN = "sign flipped: i − j instead of j − i"
SIGN_TEXT = ("Your code computes query − key. relviz, T5, Mesh TensorFlow, tensor2tensor and Shaw et al. use "
             "key − query (j − i): negative means the key lies in the query's past.")


def _ref_relative(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: n, s.q_offset)


def _ref_shaw(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: _shaw(n, s.k), s.q_offset)


def _ref_t5(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: _t5(n, s), s.q_offset)


def _alibi_slope(s: Settings) -> float:
    return float(_slopes(s.num_heads, s.alibi_bias_max)[s.head])


def _ref_alibi(grid: Grid, s: Settings) -> np.ndarray:
    slope = _alibi_slope(s)
    return grid.toeplitz(lambda n: -slope * np.abs(n).astype(np.float64), s.q_offset)


def _with_slope(slope_of: Callable[[Settings], float | None]) -> Callable[[Grid, Settings], np.ndarray | None]:
    def build(grid: Grid, s: Settings) -> np.ndarray | None:
        slope = slope_of(s)
        return None if slope is None else grid.toeplitz(lambda n: -slope * np.abs(n).astype(np.float64), s.q_offset)
    return build


def _head(values: np.ndarray, head: int) -> float | None:
    return float(values[head]) if 0 <= head < len(values) else None


def _ref_skew(grid: Grid, s: Settings) -> np.ndarray:
    return skew(_skew_input(grid.q_len)).numpy().astype(np.float64)


SEED_NOTEBOOK = "the seed notebook's max_position² table (clipping, not buckets)"
VARIANTS: dict[str, list[Variant]] = {
    "relative": [
        Variant(SIGN, SIGN_TEXT, lambda g, s: -_ref_relative(g, s)),
        Variant("off by one (+1)", "Every value is one too large: an index shifted by one somewhere (e.g. "
                "positions counted from 1 for the keys only).", lambda g, s: _ref_relative(g, s) + 1),
        Variant("off by one (−1)", "Every value is one too small: an index shifted by one somewhere (e.g. "
                "positions counted from 1 for the queries only).", lambda g, s: _ref_relative(g, s) - 1),
        Variant("shifted to a table index (j − i + q_len − 1)",
                "Your matrix is the relative index plus q_len − 1: a lookup index into a table of "
                "q_len + k_len − 1 rows, not the signed offset itself. Fine for an embedding lookup.",
                lambda g, s: _ref_relative(g, s) + g.q_len - 1 + s.q_offset, harmless=True),
        Variant(*ALIGNMENT, _alignment(_ref_relative)),
    ],
    "shaw": [
        Variant(SIGN, SIGN_TEXT + " With clipping, the past keys read the future rows of the table.",
                lambda g, s: g.toeplitz(lambda n: _shaw(-n, s.k), s.q_offset)),
        Variant("signed clip, no + k", "Your values are clip(j − i, −k, k), from −k to k: an embedding lookup "
                "needs clip(j − i, −k, k) + k, from 0 to 2k (a negative index wraps around in numpy and PyTorch).",
                lambda g, s: _ref_shaw(g, s) - s.k),
        Variant("clipped at k + 1", "Off by one in the clipping distance: clip(j − i, −(k+1), k+1) + (k+1) "
                "(a table of 2k + 3 rows).", lambda g, s: g.toeplitz(lambda n: _shaw(n, s.k + 1), s.q_offset)),
        Variant("clipped at k − 1", "Off by one in the clipping distance: clip(j − i, −(k−1), k−1) + (k−1) "
                "(a table of 2k − 1 rows).",
                lambda g, s: g.toeplitz(lambda n: _shaw(n, s.k - 1), s.q_offset) if s.k >= 1 else None),
        Variant("zero-pad beyond the table instead of clamp (index 2k + 1)",
                "Offsets beyond ±k point to an extra row 2k + 1 (a zero vector, as tensor2tensor's masked "
                "relative attention does past its stored distances) instead of clamping to the end rows 0 "
                "and 2k as Shaw et al. do.",
                lambda g, s: g.toeplitz(lambda n: np.where(np.abs(n) > s.k, 2 * s.k + 1, _shaw(n, s.k)), s.q_offset)),
        Variant("zero-pad beyond the table instead of clamp (index −1)",
                "Offsets beyond ±k are marked −1 (no vector: zero-padded) instead of clamped to the end rows "
                "0 and 2k as Shaw et al. do.",
                lambda g, s: g.toeplitz(lambda n: np.where(np.abs(n) > s.k, -1, _shaw(n, s.k)), s.q_offset)),
        Variant(*ALIGNMENT, _alignment(_ref_shaw)),
    ],
    "t5": [
        Variant(SIGN, SIGN_TEXT + " In T5 the past and future offsets use different buckets, so every "
                "off-diagonal cell moves.", lambda g, s: g.toeplitz(lambda n: _t5(-n, s), s.q_offset)),
        Variant("bidirectional vs unidirectional",
                "Your map uses the other mode: bidirectional (encoder) gives the future its own half of the "
                "buckets; unidirectional (decoder) puts every future offset in bucket 0.",
                lambda g, s: g.toeplitz(lambda n: _t5(n, s, not s.bidirectional), s.q_offset)
                if t5_ok(s.num_buckets, s.max_distance, not s.bidirectional) else None),
        Variant("log in bfloat16", "Your buckets were computed in bfloat16 (e.g. a model cast with "
                ".to(torch.bfloat16) computing the bucket chain in its dtype): the log and the division round "
                "to 8 bits and some offsets land one bucket off. T5 computes the buckets in float32.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, torch.bfloat16), s.q_offset)),
        Variant("log in float16", "Your buckets were computed in float16: some offsets land one bucket off. "
                "T5 computes the buckets in float32.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, torch.float16), s.q_offset)
                if g.q_len + g.k_len + abs(s.q_offset) < 65504 else None),
        Variant("Mesh TensorFlow vs Hugging Face float32 edge",
                "Your buckets follow Mesh TensorFlow, which multiplies by the reciprocals 1/max_exact and "
                "1/log(max_distance/max_exact) where Hugging Face (and relviz) divides; at a bucket edge the "
                "float32 result lands on the other side. Both are 'T5'; relviz follows Hugging Face.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, None), s.q_offset), harmless=True),
        Variant("rounded instead of truncated", "Your code rounds the logarithmic bucket to the nearest "
                "integer; T5 truncates toward zero (int / .to(torch.long)).",
                lambda g, s: g.toeplitz(lambda n: t5_bucket_variant(
                    n, s.num_buckets, s.max_distance, s.bidirectional, rounded=True), s.q_offset)),
        Variant("max_exact taken before halving", "Your max_exact is num_buckets // 2 even in bidirectional "
                "mode; T5 takes half of one direction's buckets (num_buckets // 2 // 2): 8 exact + 8 "
                "logarithmic per direction for 32 buckets, not 16 close + 16 far.",
                lambda g, s: g.toeplitz(lambda n: t5_bucket_variant(
                    n, s.num_buckets, s.max_distance, s.bidirectional, max_exact_before_halving=True), s.q_offset)
                if s.bidirectional else None),
        Variant(SEED_NOTEBOOK,
                "Your 'T5' map is Shaw-style clipping, clamp(j − i, −m, m) + m, as in the seed notebook's "
                "T5RelativePositionalEncoder (whose table has max_position² rows, far more than the 2m + 1 it "
                "can use). T5 buckets offsets logarithmically instead.",
                # its max_position is a clipping distance: settings.k when built by name
                lambda g, s: _seed_notebook(g, s, s.k),
                candidates=lambda g, s, got: [_seed_notebook(g, s, m) for m in _seed_candidates(s, got)]),
        Variant(*ALIGNMENT, _alignment(_ref_t5)),
    ],
    "alibi": [
        Variant("sign flipped: + slope · |j − i|", "Your bias rewards distance: ALiBi subtracts slope · "
                "distance, so farther keys get a lower score.", lambda g, s: -_ref_alibi(g, s)),
        Variant(ALIBI_TWICE, ALIBI_TWICE_TEXT, lambda g, s: 2 * _ref_alibi(g, s),
                # in either form: −slope·|j − i|, or BLOOM/Falcon's slope · j (the same softmax, causal)
                candidates=lambda g, s, got: [2 * _ref_alibi(g, s), 2 * _alibi_slope(s) * (g.j + 0 * g.i)]),
        Variant(BIAS_MAX_IGNORED, BIAS_MAX_TEXT,
                _with_slope(lambda s: _head(_slopes(s.num_heads), s.head) if s.alibi_bias_max != 8 else None)),
        Variant(SORTED, SORTED_TEXT, _with_slope(lambda s: _head(_slopes_sorted(s.num_heads), s.head)
                                                 if not _power_of_2(s.num_heads) else None)),
        Variant(EXTRA_FIRST, EXTRA_FIRST_TEXT, _with_slope(lambda s: _head(_slopes_extra_first(s.num_heads), s.head)
                                                           if not _power_of_2(s.num_heads) else None)),
        Variant("slope · j (the original ALiBi code and BLOOM)",
                "Your bias is slope · (key position), as in the original ALiBi code and BLOOM. Each row differs "
                "from −slope · (i − j) by slope · i, which the softmax cancels: the same attention under a "
                "causal mask.", lambda g, s: _alibi_slope(s) * (g.j + 0 * g.i).astype(np.float64), harmless=True),
        Variant("non-power-of-2 slopes: 2^(−8h/n) for every n",
                "Your slopes apply the power-of-2 formula to a head count that is not a power of 2. ALiBi "
                "takes the slopes of the nearest lower power of 2, then every other slope of the next one.",
                _with_slope(lambda s: _head(_slopes_naive(s.num_heads), s.head)
                            if s.num_heads & (s.num_heads - 1) else None)),
        Variant("non-power-of-2 slopes: the first n of the next power of 2",
                "Your slopes are the first n slopes of the next power of 2. ALiBi takes the slopes of the "
                "nearest lower power of 2, then every other slope of the next one.",
                _with_slope(lambda s: _head(_slopes_truncated(s.num_heads), s.head)
                            if s.num_heads & (s.num_heads - 1) else None)),
        Variant("heads in reverse order", "Your head h has the slope of head n − 1 − h.",
                _with_slope(lambda s: _head(_slopes(s.num_heads, s.alibi_bias_max)[::-1], s.head)
                            if s.num_heads > 1 else None)),
        Variant("head numbered from 1", "Your head h has the slope of head h + 1 (or h − 1): heads counted "
                "from 1 on one side and from 0 on the other.",
                _with_slope(lambda s: _head(_slopes(s.num_heads, s.alibi_bias_max), s.head + 1))),
        Variant("slopes rounded to bfloat16", "Your slopes are rounded to bfloat16 (as Falcon does).",
                _with_slope(lambda s: float(_bf16(_slopes(s.num_heads, s.alibi_bias_max))[s.head])), harmless=True),
        Variant(*ALIGNMENT, _alignment(_ref_alibi)),
    ],
    "alibi_slopes": [
        Variant("non-power-of-2 slopes: 2^(−8h/n) for every n",
                "Your slopes apply the power-of-2 formula to a head count that is not a power of 2. ALiBi "
                "takes the slopes of the nearest lower power of 2, then every other slope of the next one.",
                lambda g, s: _slopes_naive(g.k_len) if not _power_of_2(g.k_len) else None),
        Variant("non-power-of-2 slopes: the first n of the next power of 2",
                "Your slopes are the first n slopes of the next power of 2. ALiBi takes the slopes of the "
                "nearest lower power of 2, then every other slope of the next one.",
                lambda g, s: _slopes_truncated(g.k_len) if not _power_of_2(g.k_len) else None),
        Variant("heads in reverse order", "Your slopes run from the flattest to the steepest; ALiBi's head 0 "
                "has the steepest slope.",
                lambda g, s: _slopes(g.k_len, s.alibi_bias_max)[::-1] if g.k_len > 1 else None),
        Variant("slopes rounded to bfloat16", "Your slopes are rounded to bfloat16 (as Falcon does).",
                lambda g, s: _bf16(_slopes(g.k_len, s.alibi_bias_max)), harmless=True),
        Variant("log2 of the slopes", "Your values are log2(slope) (−8h/n), not the slopes.",
                lambda g, s: np.log2(_slopes(g.k_len, s.alibi_bias_max))),
        Variant(BIAS_MAX_IGNORED, BIAS_MAX_TEXT, lambda g, s: _slopes(g.k_len) if s.alibi_bias_max != 8 else None),
        Variant(SORTED, SORTED_TEXT, lambda g, s: _slopes_sorted(g.k_len) if not _power_of_2(g.k_len) else None),
        Variant(FROM_0, FROM_0_TEXT, lambda g, s: _slopes_from_0(g.k_len) if s.alibi_bias_max == 8 else None),
        Variant(EXTRA_FIRST, EXTRA_FIRST_TEXT,
                lambda g, s: _slopes_extra_first(g.k_len) if not _power_of_2(g.k_len) else None),
    ],
    "skew": [
        Variant("pad on the right", "Your skew pads the zero column on the right of QE_rᵀ; the Music "
                "Transformer pads on the left, then reshapes and drops the first row.",
                lambda g, s: _skew_like(g.q_len, pad_right=True, drop_last=False)),
        Variant("dropped the last row", "Your skew drops the last row of the reshaped (L + 1) × L tensor; "
                "the Music Transformer drops the first.",
                lambda g, s: _skew_like(g.q_len, pad_right=False, drop_last=True)),
        Variant("pad on the right and dropped the last row",
                "Your skew pads on the right and drops the last row; the Music Transformer pads on the left "
                "and drops the first.", lambda g, s: _skew_like(g.q_len, pad_right=True, drop_last=True)),
        Variant("E_r in the opposite order", "Your E_r's column m stands for distance −m; the skew needs "
                "column m to stand for distance m − (L − 1) (farthest first, distance 0 last).",
                lambda g, s: _skew_like(g.q_len, pad_right=False, drop_last=False, flip=True)),
        Variant("not skewed", "Your output is QE_rᵀ itself: the pad, reshape and slice did not happen "
                "(or were undone).", lambda g, s: _skew_input(g.q_len).numpy().astype(np.float64)),
        Variant("transposed", "Your output is the transpose of the skew: queries along the columns.",
                lambda g, s: _ref_skew(g, s).T.copy()),
    ],
}



def _seed_notebook(grid: Grid, s: Settings, max_position: int) -> np.ndarray:
    return grid.toeplitz(lambda n: _shaw(n, max_position), s.q_offset)


def _seed_candidates(s: Settings, got: np.ndarray) -> list[int]:
    """The seed notebook's index is clamp(j − i, −m, m) + m: its value at j − i = 0 is m itself."""
    if got.ndim != 2:
        return []
    i = np.arange(got.shape[0])
    j = i + s.q_offset
    inside = (j >= 0) & (j < got.shape[1])
    if not inside.any():
        return []
    m = int(got[i[inside][0], j[inside][0]])
    return [m] if 0 <= m <= 2**24 else []


def t5_ok(num_buckets: int, max_distance: int, bidirectional: bool) -> bool:
    try:
        t5_config(num_buckets, max_distance, bidirectional)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# Settings grids and validation per kind


def _offsets(got: np.ndarray) -> list[int]:
    q_len, k_len = got.shape
    return sorted({0, k_len - q_len})


def _relative_candidates(got: np.ndarray) -> list[Settings]:
    return [Settings(q_offset=q_offset) for q_offset in _offsets(got)]


def _shaw_candidates(got: np.ndarray) -> list[Settings]:
    ks = range(0, min(FIT_MAX_K, sum(got.shape)) + 1)
    return [Settings(q_offset=q_offset, k=k) for q_offset in _offsets(got) for k in ks]


def _t5_candidates(got: np.ndarray) -> list[Settings]:
    top = int(got.max()) if got.dtype.kind in "iu" else FIT_NUM_BUCKETS[-1]
    # Every bucket is below num_buckets; a map reaching bucket b needs num_buckets ≤ 2(b + 1) + 2
    # (bidirectional: the future starts at num_buckets // 2; unidirectional: all-exact ends at b).
    buckets = [nb for nb in FIT_NUM_BUCKETS if top < nb <= 2 * (top + 1) + 2]
    grid = [Settings(q_offset=q_offset, num_buckets=nb, max_distance=md, bidirectional=bidirectional)
            for q_offset in _offsets(got) for bidirectional in (True, False) for nb in buckets
            for md in FIT_MAX_DISTANCES if t5_ok(nb, md, bidirectional)]
    return sorted(grid, key=lambda s: (s.num_buckets != 32 or s.max_distance != 128))


def _alibi_candidates(got: np.ndarray) -> list[Settings]:
    return [Settings(q_offset=q_offset, num_heads=num_heads, head=head, causal=causal)
            for q_offset in _offsets(got) for causal in (False, True)
            for num_heads in range(1, 65) for head in range(num_heads)]


def _no_check(s: Settings, shape: tuple[int, ...]) -> None:
    return None


def _check_shaw(s: Settings, shape: tuple[int, ...]) -> None:
    check_int("k", s.k, minimum=0, maximum=2**24)


def _check_t5(s: Settings, shape: tuple[int, ...]) -> None:
    t5_config(s.num_buckets, s.max_distance, s.bidirectional)


def _check_bias_max(s: Settings) -> None:
    if isinstance(s.alibi_bias_max, bool) or not isinstance(s.alibi_bias_max, (int, float)) \
            or not math.isfinite(s.alibi_bias_max) or not 0 < s.alibi_bias_max <= 64:
        raise ValueError(f"alibi_bias_max must be a number in (0, 64] (8: Press et al.); got {s.alibi_bias_max!r}")


def _check_alibi(s: Settings, shape: tuple[int, ...]) -> None:
    check_int("num_heads", s.num_heads, minimum=1, maximum=MAX_HEADS)
    check_int("head", s.head, minimum=0, maximum=s.num_heads - 1)
    _check_bias_max(s)


def _check_slopes(s: Settings, shape: tuple[int, ...]) -> None:
    check_int("number of slopes", int(np.prod(shape)), minimum=1, maximum=MAX_HEADS)
    _check_bias_max(s)


def _check_skew(s: Settings, shape: tuple[int, ...]) -> None:
    if shape[0] != shape[1]:
        raise ValueError(f"the skew's output is square (L × L); got shape {shape}")


def _alibi_compared(grid: Grid, s: Settings) -> np.ndarray:
    return grid.j <= grid.i + s.q_offset if s.causal else np.ones(1, dtype=bool)


def _skew_compared(grid: Grid, s: Settings) -> np.ndarray:
    return np.ones(1, dtype=bool) if s.full else grid.j <= grid.i


def _skew_note(s: Settings) -> str:
    return ("Feed your skew qer = torch.arange(L * L, dtype=torch.float32).reshape(L, L): each output cell "
            "then names the QE_rᵀ cell it came from (row · L + column). Only j ≤ i is meaningful "
            + ("(compared here: every cell, the garbage too)." if s.full else
               "(compared here; the upper triangle is garbage the causal mask hides)."))


def _one_head(bias: object, s: Settings) -> object:
    """Head ``s.head`` of a [num_heads, L, L] (or [1, num_heads, L, L]) bias."""
    while getattr(bias, "ndim", 0) > 3 and bias.shape[0] == 1:
        bias = bias[0]
    if getattr(bias, "ndim", 0) != 3:
        raise ValueError(f"expected a bias [num_heads, seq_len, seq_len]; got shape {tuple(getattr(bias, 'shape', ()))}")
    return bias[s.head]


def _positions(length: int) -> torch.Tensor:
    return relative_positions(length, length, device="cpu")                     # [L, L] int64, j − i


SKEW_HINT = ("Skew: run your skew on `qer = torch.arange(L * L, dtype=torch.float32).reshape(L, L)` and upload "
             "the L × L result; each cell then names the QE_rᵀ cell it came from.")

for _spec in (
    MatrixKind("relative", "relative index j − i", ("q_offset",), _ref_relative, tuple(VARIANTS["relative"]),
               _no_check, _relative_candidates, integer=True, signature="fn(q_len, k_len) -> [q_len, k_len] (j − i)",
               invoke=lambda fn, s, n: fn(n, n)),
    MatrixKind("shaw", "Shaw clip index clip(j − i, −k, k) + k", ("k", "q_offset"), _ref_shaw,
               tuple(VARIANTS["shaw"]), _check_shaw, _shaw_candidates, integer=True,
               signature="fn(q_len, k_len, k) -> [q_len, k_len] lookup index", invoke=lambda fn, s, n: fn(n, n, s.k)),
    MatrixKind("t5", "T5 bucket map", ("num_buckets", "max_distance", "bidirectional", "q_offset"), _ref_t5,
               tuple(VARIANTS["t5"]), _check_t5, _t5_candidates, integer=True,
               signature="fn(relative_position, bidirectional, num_buckets, max_distance) -> buckets "
                         "(relative_position: [L, L] int64 tensor, j − i)",
               invoke=lambda fn, s, n: fn(_positions(n), s.bidirectional, s.num_buckets, s.max_distance)),
    MatrixKind("alibi", "ALiBi bias of one head", ("num_heads", "head", "q_offset", "causal", "alibi_bias_max"),
               _ref_alibi, tuple(VARIANTS["alibi"]), _check_alibi, _alibi_candidates,
               key=lambda s: (s.q_offset, _alibi_slope(s)), compared=_alibi_compared,
               signature="fn(num_heads, seq_len) -> bias [num_heads, seq_len, seq_len] (head --head is checked)",
               invoke=lambda fn, s, n: _one_head(fn(s.num_heads, n), s)),
    MatrixKind("alibi_slopes", "ALiBi slopes (one per head)", ("alibi_bias_max",),
               lambda g, s: _slopes(g.k_len, s.alibi_bias_max), tuple(VARIANTS["alibi_slopes"]), _check_slopes,
               vector=True, toeplitz=False, offsets=False, signature="fn(num_heads) -> slopes [num_heads]",
               invoke=lambda fn, s, n: fn(s.num_heads)),
    MatrixKind("skew", "skew output for qer = arange(L·L).reshape(L, L)", ("full",), _ref_skew,
               tuple(VARIANTS["skew"]), _check_skew, compared=_skew_compared, note=_skew_note, hint=SKEW_HINT,
               toeplitz=False, offsets=False, signature="fn(qer [L, L]) -> skewed [L, L]",
               invoke=lambda fn, s, n: fn(_skew_input(n))),
):
    register_matrix_kind(_spec)
