"""The 2-D relative index of a patch grid: every patch pair's (Δh, Δw), built per offset.

An image of H × W patches is read row by row (patch n sits at h = n // W, w = n % W, as every vision
transformer in transformers flattens it). A relative structure on it depends on the pair only through
(Δh, Δw) = (h_key − h_query, w_key − w_query): (2H − 1)(2W − 1) offsets, against (HW)² pairs. The pair
matrix is a grid of Toeplitz blocks: block (h_q, h_k) holds Δh = h_k − h_q everywhere and, inside it,
Δw = w_k − w_q is the 1-D relative index. So everything here is computed per offset, and the pair
matrix (only for small grids) is a broadcast view of the per-offset vectors.

Sign convention as everywhere in relviz: relative position = key − query.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from relviz._checks import check_int, resolve_device
from relviz._words import counted

if TYPE_CHECKING:
    import numpy as np

#: Patches per side a grid may have: 1024 is a 16,384-pixel side at 16 px; (2·1024 − 1)² offsets stay small.
MAX_SIDE = 1024
#: Frames (the temporal grid) a video may have.
MAX_FRAMES = 512
#: Pairs a function that builds the pair matrix itself will make: 2^24 (4,096 patches, or a 64 × 64 grid).
MAX_PAIRS = 1 << 24


@dataclass(frozen=True)
class PatchGrid:
    """H × W patches (``rows`` × ``cols``), checked once: each side 1..MAX_SIDE."""

    rows: int
    cols: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", check_int("rows", self.rows, minimum=1, maximum=MAX_SIDE))
        object.__setattr__(self, "cols", check_int("cols", self.cols, minimum=1, maximum=MAX_SIDE))

    @property
    def patches(self) -> int:
        return self.rows * self.cols

    def patch(self, row: int, col: int) -> int:
        """The flat index (row-major) of the patch at (row, col), after checking both lie in the grid."""
        row = check_int("query_row", row, minimum=0, maximum=self.rows - 1)
        col = check_int("query_col", col, minimum=0, maximum=self.cols - 1)
        return row * self.cols + col

    def check_fits(self, max_rows: int, max_cols: int, *, model: str) -> PatchGrid:
        """Refuse a grid larger than a model's: ``model`` names where the limit comes from (its config)."""
        if self.rows > max_rows or self.cols > max_cols:
            raise ValueError(f"rows × cols must fit {model}'s grid of {max_rows} × {max_cols} patches; "
                             f"got {self.rows} × {self.cols}")
        return self


def as_grid(grid: PatchGrid | tuple[int, int]) -> PatchGrid:
    """A PatchGrid from a PatchGrid or (rows, cols): the public functions' one check of a grid argument."""
    if isinstance(grid, PatchGrid):
        return grid
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise ValueError(f"grid must be a PatchGrid or (rows, cols); got {grid!r}")
    return PatchGrid(*grid)


def axis_offsets(length: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[2·length − 1] the offsets key − query along one axis, ascending: −(length − 1) .. length − 1."""
    length = check_int("length", length, minimum=1, maximum=max(MAX_SIDE, MAX_FRAMES))
    return torch.arange(-(length - 1), length, device=resolve_device(device))


def patch_coordinates(grid: PatchGrid | tuple[int, int], *, device: torch.device | str | None = None) -> torch.Tensor:
    """[H·W, 2] each patch's (h, w), row-major: the order the patches enter the sequence."""
    grid = as_grid(grid)
    device = resolve_device(device)
    h = torch.arange(grid.rows, device=device).repeat_interleave(grid.cols)    # [N]
    w = torch.arange(grid.cols, device=device).repeat(grid.rows)               # [N]
    return torch.stack((h, w), dim=-1)


def relative_index_2d(grid: PatchGrid | tuple[int, int], *,
                      device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(Δh, Δw), each LongTensor [N, N] (N = H·W): entry (query n, key m) is key − query along each axis.

    Built from the two per-axis index vectors by broadcasting (views, one copy each when reshaped):
    Δh is constant on each W × W block, Δw repeats one W × W Toeplitz block. Only for grids up to
    MAX_PAIRS pairs; larger grids are drawn from :func:`query_offsets` or per offset.
    """
    grid = as_grid(grid)
    if grid.patches ** 2 > MAX_PAIRS:
        raise ValueError(f"rows × cols must give at most {MAX_PAIRS:,} patch pairs for the full pair matrix; "
                         f"got {grid.rows} × {grid.cols} = {grid.patches:,} patches ({grid.patches ** 2:,} pairs): "
                         "use query_offsets (one query's row) or the per-offset views")
    device = resolve_device(device)
    h, w = torch.arange(grid.rows, device=device), torch.arange(grid.cols, device=device)
    dh = (h[None, :] - h[:, None])[:, None, :, None].expand(grid.rows, grid.cols, grid.rows, grid.cols)
    dw = (w[None, :] - w[:, None])[None, :, None, :].expand(grid.rows, grid.cols, grid.rows, grid.cols)
    n = grid.patches
    return dh.reshape(n, n), dw.reshape(n, n)


def query_offsets(grid: PatchGrid | tuple[int, int], query_row: int, query_col: int, *,
                  device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(Δh [H, W], Δw [H, W]): one query patch's row of the pair matrix, laid out as the image.

    Key patch (h, w) sits at Δh = h − query_row, Δw = w − query_col: a window of the offset plane,
    the (2H − 1) × (2W − 1) map every query reads its own H × W part of.
    """
    grid = as_grid(grid)
    grid.patch(query_row, query_col)
    device = resolve_device(device)
    dh = (torch.arange(grid.rows, device=device) - query_row)[:, None].expand(grid.rows, grid.cols)
    dw = (torch.arange(grid.cols, device=device) - query_col)[None, :].expand(grid.rows, grid.cols)
    return dh, dw


def offset_window(per_offset: torch.Tensor | np.ndarray, grid: PatchGrid, query_row: int,
                  query_col: int) -> torch.Tensor | np.ndarray:
    """[..., H, W] the values one query patch reads from a per-offset map [..., 2H − 1, 2W − 1] (Δh, Δw
    ascending; a tensor or a numpy array, returned as the same kind): a slice, no gather. Key (h, w) reads entry (h − query_row + H − 1, w − query_col + W − 1)."""
    grid.patch(query_row, query_col)
    if tuple(per_offset.shape[-2:]) != (2 * grid.rows - 1, 2 * grid.cols - 1):
        raise ValueError(f"per_offset must end in ({2 * grid.rows - 1}, {2 * grid.cols - 1}) offsets (Δh, Δw); "
                         f"got shape {tuple(per_offset.shape)}")
    r0, c0 = grid.rows - 1 - query_row, grid.cols - 1 - query_col
    return per_offset[..., r0:r0 + grid.rows, c0:c0 + grid.cols]


# ---------------------------------------------------------------------------------------
# The grid in words (the Images and video page)


def grid_words(rows: int, cols: int) -> str:
    """Why every view of an H × W patch grid is computed per offset (Δh, Δw), with this grid's counts."""
    return ("An image enters a vision transformer as a grid of **patches**, read row by row. Every structure on this "
            "page depends on a pair of patches only through **(Δh, Δw) = (key row − query row, key column − query "
            "column)**: a grid of H × W patches has (H·W)² pairs but only (2H − 1)(2W − 1) offsets, so each view "
            f"is computed per offset. Here: {rows} × {cols} = {counted(rows * cols, 'patch', 'patches')}, "
            f"{counted((rows * cols) ** 2, 'pair')}, {counted((2 * rows - 1) * (2 * cols - 1), 'offset')}.")


def offset_words(query_row: int, query_col: int) -> tuple[str, str]:
    """What the Δh and Δw maps of one query patch show."""
    return (f"**Δh** of every key patch from the query patch ({query_row}, {query_col}), outlined: constant along "
            "each image row.",
            "**Δw**: constant down each column. Another query patch sees the same two pictures shifted: the pair "
            "enters only through its offset.")


def pair_matrix_words(rows: int, cols: int, *, drawn_up_to: int) -> str:
    """What the matrix of every patch pair shows, or (past ``drawn_up_to`` patches) why it is not drawn."""
    if rows * cols > drawn_up_to:
        return (f"The pair matrix ({rows * cols:,} × {rows * cols:,}) is drawn for grids of at most {drawn_up_to} "
                "patches; the two pictures above are its outlined row.")
    return (f"**Every pair** (query patch × key patch, row-major). Δh is constant on each {cols} × {cols} block; "
            "inside every block Δw is the 1-D relative index j − i. A 2-D relative structure is a grid of Toeplitz "
            "blocks, described by its offsets like the 1-D ones. The outlined row is the query patch's, the two "
            "pictures above.")
