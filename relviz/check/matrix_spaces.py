"""What can differ in each Toeplitz position-matrix kind, for the fit-then-explain search (relviz.check.search).

Per kind: the steps of its formula that code computes differently, and the settings worth trying, derived
from the upload's values rather than from a grid: T5's num_buckets from the largest bucket, its
max_distance from the interval the observed bucket edges allow (log(max_distance / max_exact) is bounded
by each edge); Shaw's k from the values' range; ALiBi's head count and head from the slope the values show,
looked up among every slope rule's slopes.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator

import numpy as np
import torch

from relviz.check.alibi_slopes import (
    EXTRA_FIRST, EXTRA_FIRST_TEXT, FROM_0_TEXT, SORTED, SORTED_TEXT, _bf16, _power_of_2, _slopes, _slopes_extra_first, _slopes_from_0,
    _slopes_naive, _slopes_sorted, _slopes_truncated,
)
from relviz.check.matrix import Settings
from relviz.check.matrix_kinds import FIT_MAX_DISTANCES, _shaw, _t5, t5_bucket_variant, t5_ok
from relviz.check.search import FormulaStep, Space
from relviz.precision import t5_bucket_in_dtype, t5_bucket_mesh_tf

#: Head counts the ALiBi search looks a slope up in (besides the given one).
ALIBI_HEADS = range(1, 65)
#: Most max_distance values tried per (num_buckets, direction, step) once the observed edges bound it.
MAX_DISTANCE_TRIES = 12

# ---------------------------------------------------------------------------------------
# T5


def _kwargs(s: Settings) -> dict:
    return dict(num_buckets=s.num_buckets, max_distance=s.max_distance, bidirectional=s.bidirectional)


def _t5_step(**flags: bool) -> Callable[[np.ndarray, Settings], np.ndarray]:
    return lambda n, s: t5_bucket_variant(n, s.num_buckets, s.max_distance, s.bidirectional, **flags)


def _t5_dtype(dtype: torch.dtype) -> Callable[[np.ndarray, Settings], np.ndarray | None]:
    def build(n: np.ndarray, s: Settings) -> np.ndarray | None:
        if dtype == torch.float16 and np.abs(n).max(initial=0) > 65504:
            return None
        return t5_bucket_in_dtype(torch.as_tensor(n), dtype, **_kwargs(s)).numpy()
    return build


def _t5_positions(dtype: torch.dtype) -> Callable[[np.ndarray, Settings], np.ndarray]:
    """The relative position itself rounded to ``dtype`` (a float cast of j − i) before bucketing."""
    return lambda n, s: _t5(torch.as_tensor(n).to(dtype).to(torch.int64).numpy(), s)


def _t5_precision_note(build: Callable[[np.ndarray, Settings], np.ndarray | None],
                       dtype: torch.dtype) -> Callable[[np.ndarray, Settings], str]:
    """How large the low-precision step's error is at the upload's offsets, and the nearest neighbouring offsets
    that share one bucket where float32 gives them two (as RoPE's precision causes say)."""
    name = str(dtype).removeprefix("torch.")

    def note(n: np.ndarray, s: Settings) -> str:
        n = np.arange(int(n.min()), int(n.max()) + 1)                                           # every offset
        low = build(n, s)
        if low is None:
            return ""
        low, ref = np.asarray(low, dtype=np.int64), _t5(n, s).astype(np.int64)
        off = np.flatnonzero(low != ref)
        if not off.size:
            return f"At your offsets every bucket equals the float32 one: the {name} step changes nothing here."
        nearest = int(n[off[np.argmin(np.abs(n[off]))]])
        text = (f"Against the float32 buckets, {off.size} of your {n.size} offsets land in another bucket, by at "
                f"most {int(np.abs(low - ref).max())}; the nearest to 0 is j − i = {nearest}.")
        merged = np.flatnonzero((low[1:] == low[:-1]) & (ref[1:] != ref[:-1]))
        if merged.size:
            pair = merged[np.argmin(np.minimum(np.abs(n[merged]), np.abs(n[merged + 1])))]
            text += (f" The nearest neighbouring offsets that share one bucket where float32 gives them two are "
                     f"j − i = {int(n[pair])} and {int(n[pair + 1])}.")
        return text
    return note


T5_STEPS = (
    FormulaStep("", "", lambda n, s: _t5(n, s)),
    FormulaStep("log in bfloat16", "The bucket's log and quotients were computed in bfloat16 (a model cast with "
                ".to(torch.bfloat16) computing the bucket chain in its dtype): some offsets land one bucket off. T5 "
                "computes them in float32.", _t5_dtype(torch.bfloat16), options={"wide": True},
                note=_t5_precision_note(_t5_dtype(torch.bfloat16), torch.bfloat16)),
    FormulaStep("log in float16", "The bucket's log and quotients were computed in float16: some offsets land one "
                "bucket off. T5 computes them in float32.", _t5_dtype(torch.float16), options={"wide": True},
                note=_t5_precision_note(_t5_dtype(torch.float16), torch.float16)),
    FormulaStep("Mesh TensorFlow vs Hugging Face float32 edge", "Mesh TensorFlow multiplies by float32 reciprocals "
                "where Hugging Face divides; at a bucket edge the result lands on the other side.",
                lambda n, s: t5_bucket_mesh_tf(torch.as_tensor(n), **_kwargs(s)).numpy(), harmless=True,
                options={"wide": True}),
    FormulaStep("rounded instead of truncated", "The logarithmic bucket is rounded to the nearest integer; T5 "
                "truncates toward zero.", _t5_step(rounded=True), options={"rounded": True}),
    FormulaStep("max_exact taken before halving", "max_exact is num_buckets // 2 even in bidirectional mode; T5 takes "
                "half of one direction's buckets.",
                lambda n, s: t5_bucket_variant(n, s.num_buckets, s.max_distance, s.bidirectional,
                                               max_exact_before_halving=True) if s.bidirectional else None,
                options={"before_halving": True}),
    FormulaStep("no clamp to the last bucket", "The logarithmic bucket is not clamped to num_buckets − 1 (per "
                "direction): distances beyond max_distance get buckets past the table (an index error, or another "
                "direction's bucket).", _t5_step(clamp=False), options={"clamp": False}),
    FormulaStep("no log buckets (every distance its own bucket, clamped)",
                "Every distance up to the last bucket has its own bucket: the logarithmic part is missing (plain "
                "clipping, as Shaw's).", _t5_step(log=False), options={"log": False}),
    FormulaStep("relative positions in bfloat16", "j − i was cast to bfloat16 before bucketing: beyond 256 the "
                "distances round to multiples of 2, 4, ... and neighbouring offsets collapse.",
                _t5_positions(torch.bfloat16), options={"wide": True},
                note=_t5_precision_note(_t5_positions(torch.bfloat16), torch.bfloat16)),
    FormulaStep("relative positions in float16",
                "j − i was cast to float16 before bucketing: beyond 2048 the distances round and neighbouring "
                "offsets collapse.", _t5_positions(torch.float16), options={"wide": True},
                note=_t5_precision_note(_t5_positions(torch.float16), torch.float16)),
)


def _log_bounds(dist: np.ndarray, t: np.ndarray, saturated: np.ndarray, width: int, me: int,
                rounded: bool) -> tuple[float, float]:
    """Bounds (lo, hi) on log(max_distance / max_exact) from the observed log-part buckets t at distances
    dist ≥ max_exact: truncation gives t ≤ log(dist/me)/L·width < t + 1 (rounding: ± 1/2); a bucket at the
    clamp only bounds from one side."""
    r = np.log(dist / me) * width
    off = 0.5 if rounded else 0.0
    lo, hi = 0.0, math.inf
    free = ~saturated
    if (t < 0).any():
        return 1.0, 0.0  # a bucket below max_exact at a distance beyond it: no max_distance gives that
    above = t[free] + 1 - off
    if above.size:
        lo = max(lo, float(np.max(r[free] / above)))
    below = t - off
    use = below > 0
    if use.any():
        hi = min(hi, float(np.min(r[use] / below[use])))
    return lo, hi


def _distances(lo: float, hi: float, me: int, given: int, wide: bool) -> list[int]:
    slack = 1.03 if wide else 1.0001
    low = max(me + 1, math.floor(me * math.exp(lo) / slack))
    if hi == math.inf:
        picks = [given] + [d for d in FIT_MAX_DISTANCES if d >= low] + [low]
        return [d for d in dict.fromkeys(picks) if d >= low]
    high = math.ceil(me * math.exp(hi) * slack) if hi < 50 else 1 << 24
    if high < low:
        return []
    if high - low < MAX_DISTANCE_TRIES:
        return sorted(range(low, high + 1), key=lambda d: (d != given, d not in FIT_MAX_DISTANCES))
    picks = [given] + [d for d in FIT_MAX_DISTANCES if low <= d <= high] + [low, low + 1, high - 1, high]
    return [d for d in dict.fromkeys(picks) if low <= d <= high]


def _t5_settings(n: np.ndarray, values: np.ndarray, given: Settings, step: FormulaStep) -> Iterator[Settings]:
    if not np.all(values == np.round(values)) or values.min() < 0:
        return
    v = values.astype(np.int64)
    top = int(v.max())
    for bidirectional in (given.bidirectional, not given.bidirectional):
        dist = np.abs(n) if bidirectional else np.maximum(-n, 0)
        future = n > 0
        if not bidirectional and (v[future] != 0).any():
            continue
        counts = [given.num_buckets] + list(range(max(2, top + 1), 2 * top + 5))
        for nb in dict.fromkeys(counts):
            per = nb // 2 if bidirectional else nb
            if per < 1:
                continue
            b = v - np.where(future, per, 0) if bidirectional else v
            clamp, log = step.options.get("clamp", True), step.options.get("log", True)
            if (b < 0).any() or (clamp and (b > per - 1).any()):
                continue
            me = (nb if step.options.get("before_halving") else per) // 2
            exact = dist < me
            if (b[exact] != dist[exact]).any():
                continue
            if not log or me < 1 or per - me < 1:
                distances = [given.max_distance] + [d for d in FIT_MAX_DISTANCES if d != given.max_distance]
            else:
                logged = ~exact
                saturated = (b[logged] == per - 1) & clamp
                lo, hi = _log_bounds(dist[logged].astype(np.float64), b[logged] - me, saturated, per - me, me,
                                     bool(step.options.get("rounded")))
                wide = bool(step.options.get("wide"))
                distances = _distances(lo, hi, me, given.max_distance, wide) if lo <= hi * 1.03 else []
                if wide and given.max_distance not in distances:
                    distances.insert(0, given.max_distance)  # rounding moves edges beyond any slack: try it
            for md in distances:
                if t5_ok(nb, md, bidirectional):
                    yield Settings(q_offset=given.q_offset, num_buckets=nb, max_distance=md,
                                   bidirectional=bidirectional)
                    if not log:
                        break


T5_SPACE = Space(T5_STEPS, _t5_settings, anchor=0.0, shift=True, why={
    "max_distance": "max_distance was not passed on: the code used another value than the config's "
                    "relative_attention_max_distance (older configs omit it, and code falls back to 128).",
    "num_buckets": "num_buckets was not passed on: the code used another value than the config's "
                   "relative_attention_num_buckets.",
    "bidirectional": "The direction is the other one: an encoder's buckets are bidirectional, a decoder's "
                     "unidirectional (bidirectional = not causal); the flag was not passed on, or swapped."})

# ---------------------------------------------------------------------------------------
# Shaw, the relative index


def _shaw_settings(n: np.ndarray, values: np.ndarray, given: Settings, step: FormulaStep) -> Iterator[Settings]:
    if not np.all(values == np.round(values)):
        return
    if not step.options.get("clip", True):
        yield given
        return
    low, high = int(values.min()), int(values.max())
    at_zero = [int(values[n == 0][0])] if (n == 0).any() else []
    ks = [given.k, given.k + 1, given.k - 1, (high - low) // 2] + [z - low for z in at_zero] \
        + [high - z for z in at_zero]
    for k in dict.fromkeys(ks):
        if 0 <= k <= 1 << 24:
            yield Settings(q_offset=given.q_offset, k=k)


SHAW_SPACE = Space((
    FormulaStep("", "", lambda n, s: _shaw(n, s.k)),
    FormulaStep("no clipping",
                "Your index is j − i + k without the clip to ±k: beyond ±k it runs past the table of 2k + 1 rows "
                "(an index error, or a wrapped negative index in numpy and PyTorch).",
                lambda n, s: n + s.k, options={"clip": False}),
), _shaw_settings, anchor=None, shift=True, why={
    "k": "The clipping distance differs: the table has 2k + 1 rows, and k was not passed on."})

def _rounded(dtype: torch.dtype) -> Callable[[np.ndarray, Settings], np.ndarray | None]:
    """j − i as a float of ``dtype`` holds it: beyond 256 (bfloat16) or 2048 (float16) offsets round."""
    return lambda n, s: torch.as_tensor(n).to(dtype).double().numpy()


RELATIVE_SPACE = Space((
    FormulaStep("", "", lambda n, s: n),
    FormulaStep("relative positions in bfloat16", "j − i was held in bfloat16 (a float tensor of the model's dtype): "
                "beyond ±256 the offsets round to multiples of 2, 4, ... and neighbouring offsets collapse.",
                _rounded(torch.bfloat16)),
    FormulaStep("relative positions in float16", "j − i was held in float16: beyond ±2048 the offsets round and "
                "neighbouring offsets collapse.", _rounded(torch.float16)),
), lambda n, v, given, step: [given], shift=True)

# ---------------------------------------------------------------------------------------
# ALiBi: one head's bias, its slope looked up among every rule's slopes


def _rule(rule: Callable[[int], np.ndarray], applies: Callable[[int], bool] = lambda n: True):
    def slopes(num_heads: int, bias_max: float) -> np.ndarray | None:
        return rule(num_heads) if applies(num_heads) else None
    return slopes


ALIBI_RULES: tuple[tuple[str, str, Callable[[int, float], np.ndarray | None], bool], ...] = (
    ("", "", lambda n, bias_max: _slopes(n, bias_max), False),
    ("non-power-of-2 slopes: 2^(−8h/n) for every n", "The slopes apply the power-of-2 formula to a head count "
     "that is not a power of 2.", _rule(_slopes_naive, lambda n: not _power_of_2(n)), False),
    ("non-power-of-2 slopes: the first n of the next power of 2", "The slopes are the first n of the next "
     "power of 2.", _rule(_slopes_truncated, lambda n: not _power_of_2(n)), False),
    (SORTED, SORTED_TEXT, _rule(_slopes_sorted, lambda n: not _power_of_2(n)),
     False),
    (EXTRA_FIRST, EXTRA_FIRST_TEXT,
     _rule(_slopes_extra_first, lambda n: not _power_of_2(n)), False),
    ("slopes' exponent counted from 0", FROM_0_TEXT, _rule(_slopes_from_0), False),
    ("slopes rounded to bfloat16", "The slopes are rounded to bfloat16 (as Falcon does).",
     lambda n, bias_max: _bf16(_slopes(n, bias_max)), True),
)


@functools.lru_cache(maxsize=4096)
def _rule_slopes(rule: int, num_heads: int, bias_max: float) -> np.ndarray | None:
    return ALIBI_RULES[rule][2](num_heads, bias_max)


def _alibi_build(rule: int) -> Callable[[np.ndarray, Settings], np.ndarray | None]:
    def build(n: np.ndarray, s: Settings) -> np.ndarray | None:
        slopes = _rule_slopes(rule, s.num_heads, float(s.alibi_bias_max))
        if slopes is None or not 0 <= s.head < len(slopes):
            return None
        return -float(slopes[s.head]) * np.abs(n).astype(np.float64)
    return build


ALIBI_STEPS = tuple(FormulaStep(name, text, _alibi_build(number), harmless)
                    for number, (name, text, _, harmless) in enumerate(ALIBI_RULES))
ALIBI_SCALES = (1.0, -1.0, 2.0, -2.0)


def _alibi_settings(n: np.ndarray, values: np.ndarray, given: Settings, step: FormulaStep) -> Iterator[Settings]:
    finite = np.isfinite(values) & (n != 0)
    if not finite.any():
        return
    observed = float(np.abs(values[finite][0]) / abs(n[finite][0]))
    rule = ALIBI_STEPS.index(step)
    counts = dict.fromkeys([given.num_heads, *ALIBI_HEADS])
    for bias_max in dict.fromkeys([float(given.alibi_bias_max), 8.0] if rule == 0 else [8.0]):
        for num_heads in counts:
            slopes = _rule_slopes(rule, num_heads, bias_max)
            if slopes is None:
                continue
            for scale in {abs(a) for a in ALIBI_SCALES}:
                for head in np.flatnonzero(np.isclose(slopes, observed / scale, rtol=1e-5, atol=0)):
                    yield Settings(q_offset=given.q_offset, num_heads=num_heads, head=int(head),
                                   causal=given.causal, alibi_bias_max=bias_max)


ALIBI_SPACE = Space(ALIBI_STEPS, _alibi_settings, anchor=0.0, scales=ALIBI_SCALES, flip=False, why={
    "num_heads": "The slopes were computed for another head count (e.g. one tensor-parallel shard's heads "
                 "instead of the model's).",
    "head": "This head got another head's slope (heads counted from 1, reversed, or a shard's heads numbered "
            "from 0 instead of from its offset among all heads).",
    "alibi_bias_max": "MPT's alibi_bias_max was not passed on."})

#: kind -> its search space (the kinds whose matrix is a function of j − i).
SPACES: dict[str, Space] = {"relative": RELATIVE_SPACE, "shaw": SHAW_SPACE, "t5": T5_SPACE, "alibi": ALIBI_SPACE}
