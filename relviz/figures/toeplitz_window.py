"""Which part of a Toeplitz matrix a figure shows, and what its hover says.

The window geometry (:class:`Window`, fitted, full or centred on the diagonal), the per-offset
vector's check and its offsets, and :class:`HoverField`: shared by the plotly figures
(relviz.figures.toeplitz) and the browser-drawn forms (relviz.figures.toeplitz_canvas), so that
both describe the same cells with the same fields.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relviz.toeplitz_display import DISPLAY_MAX

#: The most cells per side the pooled overview sends (it sits beside the window, as an overview, in
#: half the page: ~450 px). Every move of the window redraws it (its rectangle moves), and Streamlit
#: re-reads a changed figure whole: 128 per side keeps that under 0.4 MB (256 took 1.26 MB).
OVERVIEW_MAX = 128
#: Label of the offset field every hover shows.
OFFSET_LABEL = "j − i"


# ---------------------------------------------------------------------------------------
# Windows


@dataclass(frozen=True)
class Window:
    """Rows row0..row0+rows−1 and columns col0..col0+cols−1 of a q_len × k_len matrix."""

    row0: int
    col0: int
    rows: int
    cols: int

    @property
    def cells(self) -> int:
        return self.rows * self.cols


def needs_window(q_len: int, k_len: int, max_cells: int = DISPLAY_MAX) -> bool:
    """True when a side exceeds what one heatmap shows at full resolution."""
    return max(q_len, k_len) > max_cells


def fit_window(q_len: int, k_len: int, *, row0: int = 0, col0: int = 0,
               size: int = DISPLAY_MAX) -> Window:
    """A window of at most size × size cells (size ≤ DISPLAY_MAX), moved inside the matrix."""
    size = min(max(int(size), 1), DISPLAY_MAX)
    rows, cols = min(size, q_len), min(size, k_len)
    row0 = min(max(int(row0), 0), q_len - rows)
    col0 = min(max(int(col0), 0), k_len - cols)
    return Window(row0, col0, rows, cols)


def full_window(q_len: int, k_len: int) -> Window:
    return Window(0, 0, q_len, k_len)


def diagonal_col0(q_len: int, k_len: int, *, q_offset: int, row0: int, rows: int, cols: int) -> int:
    """The column start that puts j − i = 0 in the middle of a window (clamped to the matrix)."""
    centre_row = row0 + (rows - 1) / 2
    col0 = round(q_offset + centre_row - (cols - 1) / 2)
    return min(max(col0, 0), k_len - cols)


def offsets_per_offset(q_len: int, k_len: int, q_offset: int = 0) -> np.ndarray:
    """The offset j − (q_offset + i) for every entry of the per-offset vector (ascending)."""
    return np.arange(-(q_len - 1), k_len, dtype=np.int64) - q_offset


def checked_per_offset(per_offset: np.ndarray, q_len: int, k_len: int, window: Window | None) -> tuple[np.ndarray, Window]:
    """The per-offset vector as an array and the window to show (default: the whole matrix if it fits the
    display, else the first DISPLAY_MAX × DISPLAY_MAX cells); ValueError for a wrong length or window."""
    per_offset = np.asarray(per_offset)
    if per_offset.shape != (q_len + k_len - 1,):
        raise ValueError(f"per_offset must have q_len + k_len - 1 = {q_len + k_len - 1} values; "
                         f"got shape {per_offset.shape}")
    if window is None:
        window = fit_window(q_len, k_len) if needs_window(q_len, k_len) else full_window(q_len, k_len)
    if max(window.rows, window.cols) > DISPLAY_MAX:
        raise ValueError(f"a window shows at most {DISPLAY_MAX} cells per side; got {window.rows} × {window.cols}")
    return per_offset, window


# ---------------------------------------------------------------------------------------
# Hover fields


@dataclass(frozen=True)
class HoverField:
    """One hover line: ``label = value`` with the value given per offset (like the matrix).

    Optional fields may be left out when the figure would exceed its size budget; fields
    with the same ``group`` are kept or left out together (e.g. a range's two ends).
    """

    label: str
    per_offset: np.ndarray
    required: bool = False
    group: str | None = None
    fmt: str = ""
    #: The hover line, with {} where the value goes; default "label = {}". A line that starts
    #: with "…" continues the previous line (e.g. the second end of a range).
    line: str | None = None
