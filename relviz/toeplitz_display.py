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

    The grid is itself Toeplitz but for its last row and column (the only blocks that may be
    clipped): block (R, C) has the statistics of its class ``block_class(R, C)`` = ((C − R + rows − 1)
    · 2 + [R is the last row]) · 2 + [C is the last column]. ``class_mean``/``class_min``/``class_max``
    hold them per class (NaN for a class no block has): 4 · (rows + cols − 1) numbers describe the grid.
    """

    mean: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    row_start: np.ndarray
    col_start: np.ndarray
    block: int
    class_mean: np.ndarray
    class_min: np.ndarray
    class_max: np.ndarray


def block_class(rows: int, cols: int, R: np.ndarray | int, C: np.ndarray | int) -> np.ndarray | int:
    """The class of block (R, C) on a rows × cols grid (see :class:`PooledView`)."""
    return ((C - R + rows - 1) * 2 + (R == rows - 1)) * 2 + (C == cols - 1)


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

    Only 4 · (rows + cols − 1) blocks can differ (:class:`PooledView`): each is computed from its own
    offsets, a contiguous range of at most 2 · block − 1 values, weighted by how many of the block's
    cells lie on each diagonal. Memory stays O(q_len + k_len) at any length (2^20 positions: no
    prefix table, no sparse table); integer values are summed in int64, so their block means are
    exact; float values in float64.
    """
    q_len, k_len = _check_sides(q_len, k_len)
    block = check_int("block", block, minimum=1)
    values = _check_per_offset(per_offset, q_len, k_len, vector=True)
    integer = values.dtype.kind in "biu"
    values = values.astype(np.int64 if integer else np.float64)
    if not integer and not np.isfinite(values).all():
        raise ValueError("per_offset must hold finite numbers (no NaN or infinity): a block's mean would be NaN")
    row_start = np.arange(0, q_len, block)
    col_start = np.arange(0, k_len, block)
    rows, cols = len(row_start), len(col_start)
    size = 4 * (rows + cols - 1)
    class_mean, class_min, class_max = np.full(size, np.nan), np.full(size, np.nan), np.full(size, np.nan)
    for R, C in _class_representatives(rows, cols):
        r0, c0 = R * block, C * block
        r1, c1 = min(r0 + block, q_len), min(c0 + block, k_len)
        first, last = c0 - (r1 - 1), c1 - 1 - r0                    # the block's offsets j − i
        t = np.arange(first, last + 1)
        counts = np.minimum(c1 - 1, r1 - 1 + t) - np.maximum(c0, r0 + t) + 1    # its cells on diagonal t
        strip = values[first + q_len - 1:last + q_len]
        index = block_class(rows, cols, R, C)
        class_mean[index] = float(np.dot(counts, strip)) / ((r1 - r0) * (c1 - c0))
        class_min[index], class_max[index] = strip.min(), strip.max()
    grid = block_class(rows, cols, np.arange(rows)[:, None], np.arange(cols)[None, :])     # [rows, cols]
    return PooledView(mean=class_mean[grid], vmin=class_min[grid], vmax=class_max[grid], row_start=row_start,
                      col_start=col_start, block=block, class_mean=class_mean, class_min=class_min,
                      class_max=class_max)


def _class_representatives(rows: int, cols: int):
    """One block (R, C) of every class that occurs on a rows × cols grid."""
    for d in range(-(rows - 1), cols):
        candidates = {(rows - 1, rows - 1 + d), (cols - 1 - d, cols - 1)}
        top = max(0, -d)
        candidates.add((top, top + d))
        if top + 1 < rows and top + 1 + d < cols:
            candidates.add((top + 1, top + 1 + d))                  # an interior block, where the first is an edge
        for R, C in candidates:
            if 0 <= R < rows and 0 <= C < cols:
                yield R, C
