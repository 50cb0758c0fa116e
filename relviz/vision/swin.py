"""Swin's relative position bias: Shaw's clipped table in two dimensions, and Swin v2's continuous one.

Inside an M × M window, the pair (query, key) reads row (δh + M − 1)(2M − 1) + (δw + M − 1) of a
(2M − 1)² × heads table, where δ = query − key coordinates (Swin's code subtracts the key's from the
query's; relviz's j − i is −δ). The M² × M² bias a block adds to its logits is that table gathered per pair;
here it is gathered per offset first ((2M − 1)² values per head) and the pair matrix is a view of it.
Swin v2 replaces the learned table by a small MLP (2 → 512 → heads) over log-spaced coordinates
sign(x)·log2(1 + |x|)/log2(8), x = 8·δ/(M − 1), and bounds it by 16·sigmoid.

Exact against transformers 5.23 (``SwinRelativePositionBias``, ``Swinv2SelfAttention``): same integer
index, same float32 operations (tests/test_vision_transformers.py).
"""
from __future__ import annotations

import math

import torch

from relviz._checks import check_int, check_tensor, resolve_device
from relviz.vision.grid import PatchGrid, relative_index_2d

#: Largest window side: the M² × M² bias of a 32 × 32 window is 1024² per head (Swin uses 7 to 24).
MAX_WINDOW = 32
#: Swin v2's continuous position bias: hidden width of its MLP and the bound 16·sigmoid.
SWINV2_HIDDEN = 512
SWINV2_BOUND = 16


def check_window(window: int | tuple[int, int], name: str = "window") -> int:
    """The window side M: an int, or a pair of equal sides (transformers' Swin configs hold one window_size)."""
    if isinstance(window, (tuple, list)):
        if len(window) != 2:
            raise ValueError(f"{name} must be an integer or (M, M); got {window!r}")
        height = check_int(f"{name}[0]", window[0], minimum=1, maximum=MAX_WINDOW)
        width = check_int(f"{name}[1]", window[1], minimum=1, maximum=MAX_WINDOW)
        if height != width:
            raise ValueError(f"{name} must be square: Swin's index formula (Δh + M − 1)(2M − 1) + (Δw + M − 1) "
                             f"and transformers' Swin configs take one side M; got {height} × {width}")
        return height
    return check_int(name, window, minimum=1, maximum=MAX_WINDOW)


def window_on_grid(rows: int, cols: int, window: int, *, per_side: bool = False) -> tuple[int, int]:
    """(window rows, window cols) a Swin block uses on a stage of rows × cols patches, as transformers builds it:
    Swin shrinks the window to the grid's smaller side when that side is at most M (a square window, no shift);
    Swin v2 (``per_side``) shrinks each side to the grid's own (a 3 × 5 stage gets a 3 × 5 window, no shift)."""
    rows = check_int("rows", rows, minimum=1, maximum=1 << 16)
    cols = check_int("cols", cols, minimum=1, maximum=1 << 16)
    window = check_int("window", window, minimum=1, maximum=MAX_WINDOW)
    if per_side:
        return min(rows, window), min(cols, window)
    side = min(rows, cols)
    return (side, side) if side <= window else (window, window)


def _index_per_offset(m: int, device: torch.device) -> torch.Tensor:
    delta = torch.arange(-(m - 1), m, device=device)            # relviz's Δ = key − query, ascending
    swin = -delta + (m - 1)                                       # Swin's δ = query − key, shifted to 0..2M − 2
    return swin[:, None] * (2 * m - 1) + swin[None, :]            # [2M − 1, 2M − 1]


def swin_index_per_offset(window: int | tuple[int, int], *,
                          device: torch.device | str | None = None) -> torch.Tensor:
    """LongTensor [2M − 1, 2M − 1]: entry [Δh + M − 1, Δw + M − 1] (Δ = key − query) is the table row
    the pair reads, (δh + M − 1)(2M − 1) + (δw + M − 1) with Swin's δ = −Δ. Every row 0..(2M − 1)² − 1 once."""
    return _index_per_offset(check_window(window), resolve_device(device))


def swin_relative_position_index(window: int | tuple[int, int], *,
                                 device: torch.device | str | None = None) -> torch.Tensor:
    """LongTensor [M², M²]: the table row each (query patch, key patch) of a window reads, as transformers'
    ``relative_position_index`` (its buffer, unflattened); gathered from the per-offset index."""
    m = check_window(window)
    device = resolve_device(device)
    dh, dw = relative_index_2d(PatchGrid(m, m), device=device)                   # [M², M²] each, views
    return _index_per_offset(m, device)[dh + (m - 1), dw + (m - 1)]


def _check_table(table: torch.Tensor, m: int) -> torch.Tensor:
    table = check_tensor("table", table, ndim=2, floating=True)
    if table.shape[0] != (2 * m - 1) ** 2:
        raise ValueError(f"table must have (2M − 1)² = {(2 * m - 1) ** 2} rows for a window of {m}; "
                         f"got shape {tuple(table.shape)}")
    return table


def swin_bias(table: torch.Tensor, window: int | tuple[int, int]) -> torch.Tensor:
    """[heads, M², M²]: the bias one window's logits get, table [(2M − 1)², heads] gathered per pair
    (what ``SwinRelativePositionBias.forward`` returns, without its leading 1)."""
    m = check_window(window)
    table = _check_table(table, m)
    index = swin_relative_position_index(m, device=table.device).view(-1)
    return table[index].view(m * m, m * m, -1).permute(2, 0, 1).contiguous()


def swin_bias_per_offset(table: torch.Tensor, window: int | tuple[int, int]) -> torch.Tensor:
    """[heads, 2M − 1, 2M − 1]: the bias at each (Δh, Δw), Δ = key − query ascending; every pair of the
    window reads its entry. (2M − 1)² values per head describe the whole M² × M² bias."""
    m = check_window(window)
    table = _check_table(table, m)
    return table[_index_per_offset(m, table.device)].permute(2, 0, 1)


def swinv2_coordinates(window: int | tuple[int, int], *, pretrained_window: int = 0,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """float32 [(2M − 1)², 2]: the (δh, δw) input of Swin v2's MLP for each table row, log-spaced.

    δ/(P − 1) with P the pretrained window when given (> 0), else M (when M > 1), times 8, then
    sign(x)·log2(1 + |x|)/log2(8): the window's edge (x = ±8) maps to ±log2(9)/3 ≈ ±1.057, a window larger
    than the pretrained one reaches further; close offsets spread, far ones compress. Row order is the table's.
    """
    m = check_window(window)
    pretrained = check_int("pretrained_window", pretrained_window, minimum=0, maximum=MAX_WINDOW)
    if pretrained == 1:
        raise ValueError("pretrained_window must be 0 (use the window) or from 2 to "
                         f"{MAX_WINDOW}; got 1 (the coordinates divide by P − 1 = 0)")
    device = resolve_device(device)
    coords = torch.arange(-(m - 1), m, dtype=torch.int64).float()
    table = torch.stack(torch.meshgrid([coords, coords], indexing="ij")).permute(1, 2, 0).contiguous()  # [2M−1, 2M−1, 2]
    if pretrained > 0:
        table /= pretrained - 1
    elif m > 1:
        table /= m - 1
    table *= 8
    table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / math.log2(8)
    return table.reshape(-1, 2).to(device)


def swinv2_raw_table(coordinates: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """[(2M − 1)², heads]: W2·relu(W1·c + b1), Swin v2's MLP output before its bound (which transformers applies to
    the gathered M² × M² bias: :func:`swinv2_bias`)."""
    coordinates = check_tensor("coordinates", coordinates, ndim=2, floating=True)
    w1 = check_tensor("w1", w1, ndim=2, floating=True)
    b1 = check_tensor("b1", b1, ndim=1, floating=True)
    w2 = check_tensor("w2", w2, ndim=2, floating=True)
    if coordinates.shape[1] != 2 or w1.shape[1] != 2 or b1.shape[0] != w1.shape[0] or w2.shape[1] != w1.shape[0]:
        raise ValueError(f"coordinates [R, 2], w1 [hidden, 2], b1 [hidden], w2 [heads, hidden] must agree; got "
                         f"{tuple(coordinates.shape)}, {tuple(w1.shape)}, {tuple(b1.shape)}, {tuple(w2.shape)}")
    return torch.nn.functional.linear(torch.nn.functional.relu(torch.nn.functional.linear(coordinates, w1, b1)), w2)


def swinv2_bias(raw_table: torch.Tensor, window: int | tuple[int, int]) -> torch.Tensor:
    """[heads, M², M²]: 16·sigmoid of the MLP's table gathered per pair, in transformers' order (gather, then the
    bound on the contiguous gathered tensor): bit for bit its bias. The bound per offset first gives the same
    values up to the last bit, not always to it (the vectorised sigmoid rounds by lane)."""
    return SWINV2_BOUND * torch.sigmoid(swin_bias(raw_table, window))


def swinv2_table(coordinates: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """[(2M − 1)², heads]: 16·sigmoid(W2·relu(W1·c + b1)), the bias each table row gives (Swin v2's
    ``continuous_position_bias_mlp`` and its bound; the bound commutes with the gather)."""
    return SWINV2_BOUND * torch.sigmoid(swinv2_raw_table(coordinates, w1, b1, w2))


# ---------------------------------------------------------------------------------------
# Swin's table in words (the Images and video page), for the query patch at (in_row, in_col) of its window


def place_in_window(query_row: int, query_col: int, window: int) -> tuple[int, int]:
    """Where a grid patch sits inside its (unshifted) M × M window: the row and column the window's index reads."""
    return query_row % window, query_col % window


def index_words(window: int, in_row: int, in_col: int) -> str:
    """Swin's index formula, with its sign: δ = query − key."""
    return (f"**The index formula**: a window of {window} × {window} patches has (2M − 1)² = {(2 * window - 1) ** 2} "
            "offsets, one table row each. Swin's code writes δ = query − key (the negative of this page's Δ), so "
            "the row is (δh + M − 1)(2M − 1) + (δw + M − 1). The outline: the offsets the query patch "
            f"({in_row}, {in_col}) of its window reads.")


def query_bias_words(query_row: int, query_col: int, in_row: int, in_col: int) -> str:
    """One query's bias over its window, and why attention never crosses a window."""
    return (f"**One query's bias** over its window: the table read at the outlined offsets. The query patch "
            f"({query_row}, {query_col}) of the grid sits at ({in_row}, {in_col}) of its window; attention never "
            "crosses a window (the shifted windows of the next block move the borders).")


def gathered_bias_words(window: int) -> str:
    """The gathered M² × M² bias: Toeplitz blocks, clipped by the window itself."""
    return (f"**The gathered bias** {window * window} × {window * window}, what the block adds to each head's logits: "
            "the table (random values here, as a fresh model has; a checkpoint holds learned ones) gathered per "
            "pair. It repeats in Toeplitz blocks, like Shaw's clipped table in two dimensions, except that the "
            "window itself is the clip: no offset beyond ±(M − 1) exists. The outlined row is the query patch's: the "
            "map on the right above.")


#: Swin v2's continuous, log-spaced coordinates.
SWINV2_WORDS = (
    "**Swin v2** replaces the table by a small MLP (2 → 512 → heads, bounded by 16·sigmoid) that reads each offset "
    "as a continuous coordinate, log-spaced: sign(x)·log2(1 + |x|)/log2(8) with x = 8·δ/(P − 1). Near offsets stay "
    "apart, far ones crowd together, so a larger window at fine-tuning (P the pretrained window) asks the MLP for "
    "coordinates only a little beyond those it learned.")


def window_fit_words(rows: int, cols: int, window: int) -> str | None:
    """What transformers does with a window at least as large as the grid's short side (None when the grid holds
    several windows along both sides). Swin shrinks the window and drops the shift when the short side is at most M;
    Swin v2 shrinks each side and drops the shift along each side at most M."""
    if min(rows, cols) > window:
        return None
    v2 = window_on_grid(rows, cols, window, per_side=True)
    longer = rows > window or cols > window             # Swin v2 still shifts along a side longer than the window
    v2_shift = "shifted along its longer side only (its window and shift are per side)" if longer else "no shift"
    if min(rows, cols) == window:
        return (f"**The window covers the grid's short side** ({rows} × {cols} patches, window {window}): Swin "
                "keeps the window and drops the shift of alternate blocks, as in the last stage of Swin-T (7 × 7 "
                f"patches at 224 px, window 7); Swin v2 keeps a {v2[0]} × {v2[1]} window, {v2_shift}.")
    return (f"**The grid ({rows} × {cols} patches) is smaller than the window ({window})** along a side, and the "
            "drawings above still use the full window. In transformers 5.23 the two families differ here. Swin v2 "
            f"shrinks each side of the window to the grid's when it builds the block: a {v2[0]} × {v2[1]} window with "
            f"its own table, {v2_shift}. Swin builds its table for the window as configured and shrinks the window "
            "only when it runs, so the bias no longer fits and the forward fails. relviz "
            + ("reads Swin v2's square window and refuses Swin's failing one" if v2[0] == v2[1] else
               "refuses both: Swin v2's window is not square, Swin's fails")
            + ", naming the config fields.")
