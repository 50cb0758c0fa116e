"""Relative position matrices: relative index, Shaw clip index, T5 buckets, ALiBi.

Every matrix here is Toeplitz: its value depends only on the offset j − (q_offset + i).
So each function computes one value per offset (q_len + k_len − 1 of them) and expands
that vector to the full matrix in a single copy, instead of running per-cell math over
q_len × k_len cells.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from relviz._checks import check_bool, check_int, check_tensor, resolve_device

#: Largest matrix (q_len · k_len cells) a function here will build: 2^30 int64 cells are 8 GiB.
MAX_CELLS = 2**30
#: Offsets beyond this magnitude lose exactness in float32 and are refused.
MAX_ABS_OFFSET = 2**24


# ---------------------------------------------------------------------------------------
# Offsets and the Toeplitz expansion


def _check_lengths(q_len: int, k_len: int | None, q_offset: int) -> tuple[int, int, int]:
    """Lengths of a per-offset vector (q_len + k_len − 1 values): any, as long as offsets stay exact."""
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=1)
    q_offset = check_int("q_offset", q_offset, minimum=-MAX_ABS_OFFSET, maximum=MAX_ABS_OFFSET)
    if q_len + abs(q_offset) > MAX_ABS_OFFSET or k_len + abs(q_offset) > MAX_ABS_OFFSET:
        raise ValueError(f"q_len, k_len and |q_offset| must keep every offset within ±{MAX_ABS_OFFSET}")
    return q_len, k_len, q_offset


def _check_cells(q_len: int, k_len: int | None, q_offset: int) -> tuple[int, int, int]:
    """A function that builds the whole [q_len, k_len] matrix refuses more than MAX_CELLS cells (the
    per-offset functions take any length: 2^20 positions are 2^21 values, not 2^40 cells)."""
    q_len, k_len, q_offset = _check_lengths(q_len, k_len, q_offset)
    if q_len * k_len > MAX_CELLS:
        raise ValueError(
            f"q_len * k_len must be at most {MAX_CELLS} cells; got {q_len} * {k_len} = {q_len * k_len}")
    return q_len, k_len, q_offset


def _offsets(q_len: int, k_len: int, q_offset: int, device: torch.device | str | None) -> torch.Tensor:
    """offset_range for checked lengths."""
    lowest = -(q_len - 1) - q_offset
    return torch.arange(lowest, lowest + q_len + k_len - 1, device=device, dtype=torch.long)


#: The most bytes one flip of the Toeplitz expansion writes. A larger matrix is built in blocks of rows:
#: on an H100 (torch 2.11) one flip of a [65536, 65536] int64 unfold view (34 GB) raised "an illegal
#: memory access" (tensors past 2^31 bytes are split into 32-bit-indexed kernels, and the unfold view
#: overlaps itself), so no single kernel here writes more than this.
EXPAND_BLOCK_BYTES = 2**30


def _expand(per_offset: torch.Tensor, q_len: int, k_len: int) -> torch.Tensor:
    """expand_toeplitz for a per-offset vector this module built (its length is right).

    Rows i0..i1 − 1 of the result are per_offset[..., q_len − i1 : q_len − i0 + k_len − 1] unfolded
    and flipped: the unfold view's row r is query i1 − 1 − r.
    """
    row_bytes = k_len * per_offset.element_size() * math.prod(per_offset.shape[:-1])
    rows_per_block = max(1, EXPAND_BLOCK_BYTES // max(1, row_bytes))
    if q_len <= rows_per_block:
        return per_offset.unfold(-1, k_len, 1).flip(-2)
    out = per_offset.new_empty((*per_offset.shape[:-1], q_len, k_len))          # [..., q_len, k_len]
    for start in range(0, q_len, rows_per_block):
        stop = min(q_len, start + rows_per_block)
        window = per_offset[..., q_len - stop: q_len - start + k_len - 1]      # [..., (stop − start) + k_len − 1]
        out[..., start:stop, :] = window.unfold(-1, k_len, 1).flip(-2)
    return out


def offset_range(q_len: int, k_len: int | None = None, *, q_offset: int = 0,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Every offset j − (q_offset + i) the matrix contains, ascending: q_len + k_len − 1 values.

    Entry t of the result is the offset of the cells with j − i = t − (q_len − 1); this is the
    per-offset vector that :func:`expand_toeplitz` turns into the full matrix.
    """
    q_len, k_len, q_offset = _check_lengths(q_len, k_len, q_offset)
    return _offsets(q_len, k_len, q_offset, resolve_device(device))


def expand_toeplitz(per_offset: torch.Tensor, q_len: int, k_len: int) -> torch.Tensor:
    """Expand per-offset values [..., q_len + k_len − 1] to [..., q_len, k_len].

    out[..., i, j] = per_offset[..., j − i + q_len − 1]. unfold gives a view whose rows run
    in reverse query order; the flip is the one copy the full matrix costs.
    """
    per_offset = check_tensor("per_offset", per_offset, min_ndim=1)
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = check_int("k_len", k_len, minimum=1)
    if per_offset.shape[-1] != q_len + k_len - 1:
        raise ValueError(
            f"per_offset must have q_len + k_len - 1 = {q_len + k_len - 1} values in its last "
            f"dimension; got {per_offset.shape[-1]}")
    return _expand(per_offset, q_len, k_len)


# ---------------------------------------------------------------------------------------
# Relative index and Shaw et al.'s clip index


def relative_positions(q_len: int, k_len: int | None = None, *, q_offset: int = 0,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """The relative position j − (q_offset + i) of every (query i, key j): LongTensor [q_len, k_len]."""
    q_len, k_len, q_offset = _check_cells(q_len, k_len, q_offset)
    return _expand(_offsets(q_len, k_len, q_offset, resolve_device(device)), q_len, k_len)


def shaw_clip_offsets(offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    """clip(offset, −k, k) + k: the row of Shaw's (2k + 1)-row embedding table each offset uses.

    ``offsets`` must be an integer tensor; the result is a LongTensor (computed in int64, so a
    narrow input dtype such as int8 cannot overflow into a negative index).
    """
    offsets = check_tensor("offsets", offsets)
    if offsets.is_floating_point() or offsets.is_complex() or offsets.dtype == torch.bool:
        raise ValueError(f"offsets must be an integer tensor; got dtype {offsets.dtype}")
    k = check_int("k", k, minimum=0, maximum=MAX_ABS_OFFSET)
    return _shaw_clip(offsets, k)


def _shaw_clip(offsets: torch.Tensor, k: int) -> torch.Tensor:
    return offsets.to(torch.long).clamp(-k, k) + k


def shaw_clip_index(q_len: int, k_len: int | None = None, *, k: int, q_offset: int = 0,
                    device: torch.device | str | None = None) -> torch.Tensor:
    """Shaw et al.'s lookup index clip(j − i, −k, k) + k, values in 0..2k: LongTensor [q_len, k_len]."""
    k = check_int("k", k, minimum=0, maximum=MAX_ABS_OFFSET)
    q_len, k_len, q_offset = _check_cells(q_len, k_len, q_offset)
    return _expand(_shaw_clip(_offsets(q_len, k_len, q_offset, resolve_device(device)), k), q_len, k_len)


# ---------------------------------------------------------------------------------------
# T5 relative position buckets


@dataclass(frozen=True)
class T5Limits:
    """T5's limits, in one table: every reader of a T5 setting takes its bounds from here."""

    #: buckets a T5 setting may have: the bucket formula, a real model's relative_attention_num_buckets and
    #: the checker (2^16; the published T5 presets use 32)
    num_buckets: int = 1 << 16
    #: buckets the toy model may learn ([buckets, heads] parameters): its ModelConfig, training flag and guard
    trained_num_buckets: int = 4096
    #: the largest max_distance (the longest offset relviz computes)
    max_distance: int = MAX_ABS_OFFSET


T5_LIMITS = T5Limits()


# The steps of T5's bucket formula (T5Config.bucket), unchecked: T5Config.bucket is the formula, and
# relviz.precision (other arithmetic) and relviz.check (the mistakes code makes) vary one step of it.

def t5_direction(offsets: torch.Tensor, bidirectional: bool, per_direction: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the first bucket of each offset's direction, the distance n ≥ 0 the formula buckets): LongTensors."""
    if bidirectional:
        return (offsets > 0).to(torch.long) * per_direction, offsets.abs()
    return torch.zeros_like(offsets), (-offsets).clamp(min=0)


def t5_log_part(n: torch.Tensor, max_exact: int, max_distance: int, per_direction: int,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """log(n / max_exact) / log(max_distance / max_exact) · (per_direction − max_exact) in ``dtype``, each
    operation rounded to it, at n ≥ max_exact (smaller n are clamped up: their bucket is n itself)."""
    return (torch.log(n.clamp(min=max_exact).to(dtype) / max_exact) / math.log(max_distance / max_exact)
            * (per_direction - max_exact))


def t5_finish(first: torch.Tensor, n: torch.Tensor, large: torch.Tensor, max_exact: int, per_direction: int, *,
              clamp: bool = True) -> torch.Tensor:
    """The bucket: n itself below max_exact, else max_exact + the log part truncated (clamped to the direction's
    last bucket unless ``clamp`` is False), after the direction's first bucket."""
    if_large = max_exact + large.to(torch.long)
    if_large = if_large.clamp(max=per_direction - 1) if clamp else if_large
    return first + torch.where(n < max_exact, n, if_large)
#: Integer dtypes whose every value converts to int64 exactly (wider unsigned ones may not).
_EXACT_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def smallest_num_buckets(bidirectional: bool) -> int:
    """The fewest buckets T5's formula can use in a direction: max_exact = num_buckets (// 2 when bidirectional)
    // 2 must be at least 1, so 4 bidirectional, 2 unidirectional (the T5 page's slider starts there)."""
    return 4 if bidirectional else 2


@dataclass(frozen=True)
class T5Config:
    """A valid T5 bucket configuration, the quantities derived from it, and its bucket function.

    Made by :func:`t5_config` (or ``T5Config(...)``), which refuses what the reference formula cannot
    serve; a T5Config is the proof of that check, so code that holds one calls :meth:`bucket` and
    the functions below with no second check.
    """

    num_buckets: int
    max_distance: int
    bidirectional: bool

    def __post_init__(self) -> None:
        # The reference divides by log(max_distance / max_exact): max_exact = 0 divides by zero, and
        # max_distance <= max_exact gives a zero or negative log, hence garbage or negative buckets.
        num_buckets = check_int("num_buckets", self.num_buckets, minimum=1, maximum=T5_LIMITS.num_buckets)
        max_distance = check_int("max_distance", self.max_distance, minimum=1, maximum=T5_LIMITS.max_distance)
        bidirectional = check_bool("bidirectional", self.bidirectional)
        for name, value in (("num_buckets", num_buckets), ("max_distance", max_distance),
                            ("bidirectional", bidirectional)):
            object.__setattr__(self, name, value)           # numpy integers become ints
        if self.max_exact < 1:
            smallest = smallest_num_buckets(bidirectional)
            mode = "bidirectional" if bidirectional else "unidirectional"
            raise ValueError(
                f"num_buckets must be at least {smallest} when {mode}: max_exact = "
                f"num_buckets{' // 2' if bidirectional else ''} // 2 = {self.max_exact}, and the T5 "
                f"formula divides by log(max_distance / max_exact); got num_buckets={num_buckets}")
        if max_distance <= self.max_exact:
            raise ValueError(
                f"max_distance must be greater than max_exact = {self.max_exact} for num_buckets="
                f"{num_buckets} ({'bidirectional' if bidirectional else 'unidirectional'}); got "
                f"max_distance={max_distance}. The T5 formula needs log(max_distance / max_exact) > 0.")

    @property
    def buckets_per_direction(self) -> int:
        return self.num_buckets // 2 if self.bidirectional else self.num_buckets

    @property
    def max_exact(self) -> int:
        """Offsets below this magnitude get a bucket of their own (half of one direction's buckets)."""
        return self.buckets_per_direction // 2

    def bucket(self, offsets: torch.Tensor) -> torch.Tensor:
        """T5's bucket of each offset (key − query; a LongTensor within ±MAX_ABS_OFFSET, not checked:
        :func:`t5_bucket` is the checked entry for a caller's values). Same shape, LongTensor.

        The float32 operations of transformers' ``T5Attention._relative_position_bucket``, in the
        same order (it divides: n / max_exact, then / log(max_distance / max_exact)), so the
        truncation lands on the same side at every bucket edge. The log is only evaluated where it
        is used (the reference takes log(0) and discards it). Its three steps are the functions
        below, which relviz.precision (other arithmetic) and relviz.check (coding mistakes) reuse."""
        per_direction, max_exact = self.buckets_per_direction, self.max_exact
        first, n = t5_direction(offsets, self.bidirectional, per_direction)
        large = t5_log_part(n, max_exact, self.max_distance, per_direction)
        return t5_finish(first, n, large, max_exact, per_direction)

    def bias_offsets(self, bias_table: torch.Tensor, q_len: int, k_len: int, q_offset: int = 0) -> torch.Tensor:
        """bias_table [num_buckets, H] per offset -> [H, q_len + k_len − 1], for a table and lengths the
        caller has checked (:func:`t5_bias_offsets` is the checked entry)."""
        buckets = self.bucket(_offsets(q_len, k_len, q_offset, bias_table.device))   # [q_len + k_len − 1]
        return bias_table.transpose(0, 1)[:, buckets]                                   # [H, q_len + k_len − 1]


def t5_config(num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> T5Config:
    """Validate a T5 configuration (ValueError for the ones the reference formula cannot serve)."""
    return T5Config(num_buckets, max_distance, bidirectional)


def t5_nearest_valid(num_buckets: int, max_distance: int, bidirectional: bool) -> tuple[int, int]:
    """The closest (num_buckets, max_distance) the T5 formula can serve, for an error message's advice.

    Takes any integers (typically an invalid setting) and returns a pair that
    :func:`t5_config` accepts.
    """
    num_buckets = check_int("num_buckets", num_buckets)
    max_distance = check_int("max_distance", max_distance)
    bidirectional = check_bool("bidirectional", bidirectional)
    num_buckets = min(max(num_buckets, 4 if bidirectional else 2), T5_LIMITS.num_buckets)
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    return num_buckets, min(max(max_distance, max_exact + 1), T5_LIMITS.max_distance)


def t5_bucket(relative_position: torch.Tensor | int, *, num_buckets: int = 32,
              max_distance: int = 128, bidirectional: bool = True) -> torch.Tensor:
    """T5's bucket for each relative position (key − query), identical to Hugging Face's T5.

    See :meth:`T5Config.bucket`. Mesh TensorFlow, the original T5 code, multiplies by float32
    reciprocals instead, and at a few float32 edges lands on the other side (num_buckets 34,
    max_distance 27, bidirectional, j − i = −18: Hugging Face 13, Mesh TensorFlow 14);
    relviz.precision computes that variant and lists those offsets.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    if not isinstance(relative_position, torch.Tensor):
        relative_position = torch.as_tensor(check_int("relative_position", relative_position))
    if relative_position.dtype not in _EXACT_INT_DTYPES:
        raise ValueError(f"relative_position must be an integer tensor (int8, int16, int32, int64 or uint8); "
                         f"got dtype {relative_position.dtype}")
    n = relative_position.to(torch.long)
    # min and max, not abs().max(): abs(−2^63) overflows to −2^63 and would pass the check.
    if n.numel() and (int(n.min()) < -MAX_ABS_OFFSET or int(n.max()) > MAX_ABS_OFFSET):
        raise ValueError(f"relative_position values must lie within ±{MAX_ABS_OFFSET}")
    return config.bucket(n)


def t5_bucket_map(q_len: int, k_len: int | None = None, *, num_buckets: int = 32,
                  max_distance: int = 128, bidirectional: bool = True, q_offset: int = 0,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """T5 bucket of every (query i, key j): LongTensor [q_len, k_len], computed per offset."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    q_len, k_len, q_offset = _check_cells(q_len, k_len, q_offset)
    offsets = _offsets(q_len, k_len, q_offset, resolve_device(device))
    return _expand(config.bucket(offsets), q_len, k_len)


def _check_bias_table(bias_table: torch.Tensor, config: T5Config) -> torch.Tensor:
    bias_table = check_tensor("bias_table", bias_table, ndim=2, floating=True)
    if bias_table.shape[0] != config.num_buckets:
        raise ValueError(f"bias_table must have shape [num_buckets, H] = [{config.num_buckets}, H]; "
                         f"got {tuple(bias_table.shape)}")
    return bias_table


def t5_bias_offsets(bias_table: torch.Tensor, q_len: int, k_len: int | None = None, *, num_buckets: int = 32,
                    max_distance: int = 128, bidirectional: bool = True, q_offset: int = 0) -> torch.Tensor:
    """T5's bias per offset: bias_table[bucket(offset), h] -> float [H, q_len + k_len − 1].

    bias_table: [num_buckets, H] (the learned relative_attention_bias). One bucket per offset,
    one table lookup per (offset, head): :func:`expand_toeplitz` turns it into the full bias.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    bias_table = _check_bias_table(bias_table, config)
    q_len, k_len, q_offset = _check_lengths(q_len, k_len, q_offset)
    return config.bias_offsets(bias_table, q_len, k_len, q_offset)


def t5_bias(bias_table: torch.Tensor, q_len: int, k_len: int | None = None, *, num_buckets: int = 32,
            max_distance: int = 128, bidirectional: bool = True, q_offset: int = 0) -> torch.Tensor:
    """T5's position bias [H, q_len, k_len] (Hugging Face's ``compute_bias`` without the batch
    dimension), built per offset and expanded once: no int64 bucket map, no L × L gather."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    bias_table = _check_bias_table(bias_table, config)
    q_len, k_len, q_offset = _check_cells(q_len, k_len, q_offset)
    return _expand(config.bias_offsets(bias_table, q_len, k_len, q_offset), q_len, k_len)


@dataclass(frozen=True)
class BucketRange:
    """The key − query offsets one T5 bucket covers, within ±max_offset.

    ``first``/``last`` are None for an unused bucket. ``open_low``/``open_high`` say that the
    bucket goes on past −max_offset / +max_offset (the saturated end buckets do, forever).
    """

    bucket: int
    first: int | None
    last: int | None
    count: int
    open_low: bool
    open_high: bool

    @property
    def used(self) -> bool:
        return self.count > 0


def t5_bucket_ranges(*, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True,
                     max_offset: int | None = None) -> list[BucketRange]:
    """For every bucket, the offsets it covers (first, last, count) or that it is unused.

    max_offset defaults to max_distance: every bucket has begun by then (the last one
    begins before max_distance), so nothing is missed.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    max_offset = config.max_distance if max_offset is None else check_int(
        "max_offset", max_offset, minimum=1, maximum=MAX_ABS_OFFSET)
    offsets = torch.arange(-max_offset, max_offset + 1, device="cpu")
    buckets = config.bucket(offsets)
    counts = torch.bincount(buckets, minlength=config.num_buckets).tolist()
    big = torch.iinfo(torch.long).max
    firsts = torch.full((config.num_buckets,), big).scatter_reduce(0, buckets, offsets, "amin").tolist()
    lasts = torch.full((config.num_buckets,), -big).scatter_reduce(0, buckets, offsets, "amax").tolist()
    low_bucket, high_bucket = int(buckets[0]), int(buckets[-1])
    return [
        BucketRange(
            bucket=b,
            first=firsts[b] if counts[b] else None,
            last=lasts[b] if counts[b] else None,
            count=counts[b],
            open_low=b == low_bucket,
            open_high=b == high_bucket,
        )
        for b in range(config.num_buckets)
    ]


# ---------------------------------------------------------------------------------------
# ALiBi


def alibi_power_of_two(num_heads: int) -> int:
    """The nearest power of two at or below ``num_heads``: the heads that take Press et al.'s geometric
    sequence; the rest take every other slope of twice as many (:func:`press_slope_powers`)."""
    return 1 << (num_heads.bit_length() - 1)


def press_slope_powers(num_heads: int) -> tuple[list[float], list[int]]:
    """Press et al.'s slope rule as (base, exponent) per head, slope_h = base_h ** exponent_h.

    A power of two n: base 2^(−8/n), exponents 1 … n. Otherwise the nearest lower power of two p's n
    slopes, then every other slope of 2p (base 2^(−4/p), exponents 1, 3, 5, …) until there are n. The
    rule is written here once; :func:`alibi_slopes` evaluates it in either arithmetic.
    """
    lower = alibi_power_of_two(num_heads)
    extra = num_heads - lower
    bases = [2.0 ** (-8.0 / lower)] * lower + [2.0 ** (-4.0 / lower)] * extra
    return bases, list(range(1, lower + 1)) + list(range(1, 2 * extra, 2))


def alibi_slopes(num_heads: int, *, device: torch.device | str | None = None,
                 float32_powers: bool = False) -> torch.Tensor:
    """ALiBi's head slopes (float32 [num_heads]), Press et al.'s rule (:func:`press_slope_powers`).

    ``float32_powers=False``: the reference code's arithmetic (Python floats, rounded once to float32;
    the toy model's). True: BLOOM's and Falcon's code in transformers (base rounded to float32, then
    ``torch.pow`` in float32): the same for 1–10 heads; from 11 some slopes differ, by up to 32 float32
    ulps at 256 heads (the rounded base's error grows with the power).
    """
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=4096)
    device = resolve_device(device)
    bases, exponents = press_slope_powers(num_heads)
    if float32_powers:
        return torch.pow(torch.tensor(bases, dtype=torch.float32, device=device),
                         torch.tensor(exponents, dtype=torch.int32, device=device))
    return torch.tensor([b ** e for b, e in zip(bases, exponents)], dtype=torch.float32, device=device)


def mpt_alibi_slopes(num_heads: int, alibi_bias_max: float = 8.0) -> torch.Tensor:
    """[H] float32, MPT's rule (MosaicML's gen_slopes, as transformers' MPT computes it): 2^(−max·h/n₂)
    over the next power of two n₂, and for a head count that is not one its even-numbered slopes first."""
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=4096)
    n2 = 1 << (num_heads - 1).bit_length()
    slopes = 1.0 / torch.pow(2, torch.arange(1, n2 + 1, dtype=torch.int64).float() * (alibi_bias_max / n2))
    if n2 != num_heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def alibi_slopes_geometric(num_heads: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """2^(−8h/n) for h = 1..n (float32 [n]): what some codebases use for every head count.

    Equal to :func:`alibi_slopes` (the reference) when n is a power of two; for other n it is
    not, and a model trained with the reference slopes would get the wrong ones.
    """
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=4096)
    h = torch.arange(1, num_heads + 1, dtype=torch.float64, device=resolve_device(device))
    return (2.0 ** (-8.0 * h / num_heads)).to(torch.float32)


def alibi_bias(q_len: int, k_len: int | None = None, *, num_heads: int, q_offset: int = 0,
               device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's bias −slope_h · |j − (q_offset + i)|: float32 [num_heads, q_len, k_len].

    At most MAX_CELLS values in all (num_heads · q_len · k_len): the result is one dense tensor.
    """
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=4096)
    q_len, k_len, q_offset = _check_lengths(q_len, k_len, q_offset)
    if num_heads * q_len * k_len > MAX_CELLS:
        raise ValueError(f"num_heads * q_len * k_len must be at most {MAX_CELLS} values; got {num_heads} * "
                         f"{q_len} * {k_len} = {num_heads * q_len * k_len}")
    return _expand(_alibi_offsets(num_heads, q_len, k_len, q_offset, resolve_device(device)), q_len, k_len)


def alibi_bias_offsets(q_len: int, k_len: int | None = None, *, num_heads: int, q_offset: int = 0,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's bias per offset, −slope_h · |offset|: float32 [num_heads, q_len + k_len − 1]."""
    num_heads = check_int("num_heads", num_heads, minimum=1, maximum=4096)
    q_len, k_len, q_offset = _check_lengths(q_len, k_len, q_offset)
    return _alibi_offsets(num_heads, q_len, k_len, q_offset, resolve_device(device))


def _alibi_offsets(num_heads: int, q_len: int, k_len: int, q_offset: int, device: torch.device) -> torch.Tensor:
    slopes = alibi_slopes(num_heads, device=device)                                             # [H]
    offsets = _offsets(q_len, k_len, q_offset, device)                                          # [q_len + k_len − 1]
    return -slopes[:, None] * offsets.abs().to(torch.float32)[None, :]
