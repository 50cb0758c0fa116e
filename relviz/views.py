"""What part of a relative matrix to send to the screen, computed per offset.

A browser cannot show more than ~512 cells per side in a heatmap beside another one, and
a 8192 × 8192 matrix is 67 M cells. Two views answer that without ever building the full
matrix:

- ``toeplitz_window``: an exact, full-resolution block (the user moves and zooms it);
- ``toeplitz_pooled``: an overview where each displayed cell covers an s × s block and
  carries that block's exact mean, min and max. Pooling keeps every boundary visible
  (a block that straddles one shows a blend and its min..max), unlike striding, which
  shows only every s-th offset and hides the exact band near the diagonal.

Both take the per-offset vector ``per_offset`` (entry t is the value at j − i = t − (q_len − 1),
as built by ``positions.offset_range``) and are exact for every block, edge blocks included.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relviz._checks import check_int

#: The most cells per side a heatmap view sends to the browser.
DISPLAY_MAX = 512
#: Longest side these views accept (far beyond any page's limit; keeps index arithmetic small).
MAX_SIDE = 2**24


def _check_sides(q_len: object, k_len: object) -> tuple[int, int]:
    return (check_int("q_len", q_len, minimum=1, maximum=MAX_SIDE),
            check_int("k_len", k_len, minimum=1, maximum=MAX_SIDE))


def _check_per_offset(per_offset: object, q_len: int, k_len: int, *, vector: bool) -> np.ndarray:
    """A real-valued array whose last dimension holds the q_len + k_len − 1 per-offset values."""
    values = np.asarray(per_offset)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"per_offset must hold real numbers; got dtype {values.dtype}")
    expected = (q_len + k_len - 1,)
    if (values.shape != expected) if vector else (values.ndim < 1 or values.shape[-1] != expected[0]):
        raise ValueError(f"per_offset must have q_len + k_len - 1 = {expected[0]} values"
                         f"{'' if vector else ' in its last dimension'}; got shape {values.shape}")
    return values


@dataclass(frozen=True)
class PooledView:
    """An overview of a q_len × k_len Toeplitz matrix on a grid of block × block cells.

    ``mean``/``vmin``/``vmax`` are [rows, cols]; ``row_start``/``col_start`` give the first
    query/key index each displayed cell covers (its last is start + block − 1, clipped).
    """

    mean: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    row_start: np.ndarray
    col_start: np.ndarray
    block: int


def display_block(q_len: int, k_len: int, max_cells: int = DISPLAY_MAX) -> int:
    """The smallest block size that fits the longer side into max_cells (1 = no pooling)."""
    q_len, k_len = _check_sides(q_len, k_len)
    max_cells = check_int("max_cells", max_cells, minimum=1)
    return max(1, math.ceil(max(q_len, k_len) / max_cells))


def toeplitz_window(per_offset: np.ndarray, q_len: int, k_len: int, *, row0: int, col0: int,
                    rows: int, cols: int) -> np.ndarray:
    """Exact values of rows row0..row0+rows−1 and cols col0..col0+cols−1, as a [rows, cols] view."""
    q_len, k_len = _check_sides(q_len, k_len)
    per_offset = _check_per_offset(per_offset, q_len, k_len, vector=False)
    row0, col0 = check_int("row0", row0), check_int("col0", col0)
    rows, cols = check_int("rows", rows), check_int("cols", cols)
    if not (0 <= row0 and rows >= 1 and row0 + rows <= q_len):
        raise ValueError(f"row window must lie within 0..{q_len - 1}; got row0={row0}, rows={rows}")
    if not (0 <= col0 and cols >= 1 and col0 + cols <= k_len):
        raise ValueError(f"column window must lie within 0..{k_len - 1}; got col0={col0}, cols={cols}")
    first = col0 - (row0 + rows - 1) + q_len - 1  # offset index of the bottom-left cell
    strip = per_offset[..., first:first + rows + cols - 1]
    windows = np.lib.stride_tricks.sliding_window_view(strip, cols, axis=-1)
    return windows[..., ::-1, :]


def toeplitz_pooled(per_offset: np.ndarray, q_len: int, k_len: int, block: int) -> PooledView:
    """Exact block mean, min and max of the Toeplitz matrix, from the per-offset vector alone.

    Block sums use a double prefix sum over offsets (O(1) per block); min and max use a
    sparse table over offsets, since each block's offsets form one contiguous range.
    """
    q_len, k_len = _check_sides(q_len, k_len)
    block = check_int("block", block, minimum=1)
    values = _check_per_offset(per_offset, q_len, k_len, vector=True).astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError("per_offset must hold finite numbers (no NaN or infinity): the block means use "
                         "prefix sums, where one infinity would turn every later block into NaN")
    # Block sums come from a double prefix sum of magnitude up to (q_len + k_len)^2 · max|v|:
    # beyond 2^53 float64 stops being exact, and the view promises exact means.
    if values.size and float(np.abs(values).max()) * float(q_len + k_len) ** 2 > 2.0**53:
        raise ValueError(f"per_offset values are too large for exact block means at {q_len} x {k_len}: "
                         f"max |value| x (q_len + k_len)^2 must stay below 2^53")
    row_start = np.arange(0, q_len, block)
    col_start = np.arange(0, k_len, block)
    row_end = np.minimum(row_start + block, q_len)  # exclusive
    col_end = np.minimum(col_start + block, k_len)

    # Sum over i in [r0, r1) and j in [c0, c1) of v[j - i + q_len - 1].
    prefix = np.concatenate([[0.0], np.cumsum(values)])           # prefix[m] = sum v[:m]
    prefix2 = np.concatenate([[0.0], np.cumsum(prefix)])          # prefix2[m] = sum prefix[:m]

    def rows_sum(col_edge: np.ndarray) -> np.ndarray:
        # sum_{i=r0}^{r1-1} prefix[col_edge - i + q_len - 1], for every (row block, col edge)
        x = col_edge[None, :] + q_len - 1
        hi = x - row_start[:, None] + 1
        lo = x - row_end[:, None] + 1
        return prefix2[hi] - prefix2[lo]

    sums = rows_sum(col_end) - rows_sum(col_start)
    counts = (row_end - row_start)[:, None] * (col_end - col_start)[None, :]
    mean = sums / counts

    lo_index = col_start[None, :] - (row_end[:, None] - 1) + q_len - 1
    hi_index = (col_end[None, :] - 1) - row_start[:, None] + q_len - 1
    vmin = _range_reduce(values, lo_index, hi_index, np.minimum)
    vmax = _range_reduce(values, lo_index, hi_index, np.maximum)
    return PooledView(mean=mean, vmin=vmin, vmax=vmax, row_start=row_start, col_start=col_start,
                      block=block)


def _range_reduce(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, op: np.ufunc) -> np.ndarray:
    """op over values[lo..hi] (inclusive) for arrays of ranges, with a sparse table."""
    table = [values]
    width = 1
    while 2 * width <= len(values):
        prev = table[-1]
        table.append(op(prev[:-width], prev[width:]))
        width *= 2
    length = hi - lo + 1
    level = np.floor(np.log2(length)).astype(int)
    out = np.empty(lo.shape, dtype=values.dtype)
    for k in np.unique(level):
        sel = level == k
        span = 1 << k
        out[sel] = op(table[k][lo[sel]], table[k][hi[sel] - span + 1])
    return out
