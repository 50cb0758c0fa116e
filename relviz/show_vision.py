"""``relviz.show``'s pictures of position in images and video (the Images and video page draws the same).

Each function computes its numbers with :mod:`relviz.vision` (per offset, never per patch pair; the seeded
content and the page's sequence are :mod:`relviz.vision.score_maps`) and draws them with :mod:`relviz.figures.vision`.

    >>> import relviz.show as show
    >>> show.rope2d_scores(64, 64, rope="pixtral")        # doctest: +SKIP  (4,096 patches, 127 × 127 offsets)
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from relviz._checks import check_int
from relviz._words import article, counted
from relviz.figures import vision as figures
from relviz.figures.heatmap import narrow_figure_title
from relviz.figures.toeplitz_canvas import GridImage
from relviz.rope.math import default_inv_freq
from relviz.vision.grid import PatchGrid, offset_window, query_offsets, relative_index_2d
from relviz.vision.mrope import check_section, mrope_pair_axes, mrope_position_ids
from relviz.vision.score_maps import ROPES_2D, make_rope2d, mixed_sequence, mrope_plane, rope2d_plane, rule_named
from relviz.vision.swin import swin_bias, swin_bias_per_offset, swin_index_per_offset, swinv2_coordinates

CPU = "cpu"
#: The axis a relative-index view draws, by name.
AXES_2D = {"h": 0, "w": 1}
#: Grids up to this many patches get the full pair matrix (256² cells); larger ones only per offset.
PAIR_MATRIX_MAX = 256
KIND_NAMES = ("text", "image", "video")


def _grid(rows: int, cols: int, query_row: int, query_col: int) -> PatchGrid:
    grid = PatchGrid(rows, cols)
    grid.patch(query_row, query_col)
    return grid


def _axis(axis: str) -> int:
    if axis not in AXES_2D:
        raise ValueError(f"axis must be one of {', '.join(AXES_2D)}; got {axis!r}")
    return AXES_2D[axis]


# ---------------------------------------------------------------------------------------
# The 2-D relative index


def patch_row(rows: int = 8, cols: int = 8, *, query_row: int = 3, query_col: int = 2, axis: str = "h",
              validate: bool = True, browser: bool = False) -> go.Figure | GridImage:
    """One query patch's row of the 2-D relative index, laid out as the image: Δh (``axis="h"``) or Δw.
    ``browser=True``: a GridImage (drawn in the browser, relviz.app.display.show_toeplitz).

    Example: ``show.patch_row(64, 64, query_row=10, query_col=40, axis="w")``
    """
    a = _axis(axis)
    grid = _grid(rows, cols, query_row, query_col)
    dh, dw = (t.numpy() for t in query_offsets(grid, query_row, query_col, device=CPU))
    values = (dh, dw)[a]
    side = (grid.rows, grid.cols)[a]
    name = ("Δh", "Δw")[a]
    title = f"{name} of every key patch from query ({query_row}, {query_col})"
    if browser and (image := figures.image_map_canvas(values, query=(query_row, query_col), title=title,
                                                      value_label=name, discrete_range=(-(side - 1), side - 1))):
        return image
    return figures.image_map_figure(values, dh, dw, query=(query_row, query_col), validate=validate, title=title,
                                    value_label=name, discrete_range=(-(side - 1), side - 1))


def patch_pairs(rows: int = 4, cols: int = 4, *, query_row: int = 1, query_col: int = 2, axis: str = "w",
                validate: bool = True) -> go.Figure:
    """Δh or Δw of every (query patch, key patch) of a grid of at most 256 patches: a grid of Toeplitz blocks.

    Example: ``show.patch_pairs(4, 4, axis="h")``
    """
    a = _axis(axis)
    grid = _grid(rows, cols, query_row, query_col)
    if grid.patches > PAIR_MATRIX_MAX:
        raise ValueError(f"rows × cols must be at most {PAIR_MATRIX_MAX} patches for the pair matrix; got "
                         f"{grid.patches}: patch_row and the per-offset maps draw larger grids")
    dh, dw = (t.numpy() for t in relative_index_2d(grid, device=CPU))
    side = (grid.rows, grid.cols)[a]
    name = ("Δh", "Δw")[a]
    return figures.pair_matrix_figure((dh, dw)[a], dh, dw, title=f"{name} of every patch pair ({grid.rows} × "
                                      f"{grid.cols} patches, {counted(grid.patches ** 2, 'pair')})", value_label=name,
                                      query=grid.patch(query_row, query_col), validate=validate,
                                      discrete_range=(-(side - 1), side - 1))


# ---------------------------------------------------------------------------------------
# Swin and Swin v2


def _swin_table(window: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, maximum=2**31 - 1))
    return torch.randn((2 * window - 1) ** 2, 1, generator=generator)


#: The title lines Swin's two maps side by side make room for: the index's name and its formula on two.
SWIN_TITLE_LINES = 3


def swin_index(window: int = 7, *, query_row: int | None = None, query_col: int | None = None,
               validate: bool = True) -> go.Figure:
    """The table row each offset (Δh, Δw) reads: (δh + M − 1)(2M − 1) + (δw + M − 1), δ = query − key = −Δ.

    Example: ``show.swin_index(7)``
    """
    index = swin_index_per_offset(window, device=CPU).numpy()
    m = (index.shape[0] + 1) // 2
    window_box = None
    if query_row is not None and query_col is not None:
        PatchGrid(m, m).patch(query_row, query_col)
        window_box = (-query_row, -query_col, m, m)
    figure = figures.offset_plane_figure(index, title=f"Swin's table row per offset<br><sup>M = {m}: row = "
                                         f"(δh + {m - 1})·{2 * m - 1} + (δw + {m - 1}),</sup><br>"
                                         "<sup>δ = query − key = −Δ</sup>",
                                         value_label="table row", window=window_box, colorscale="Viridis",
                                         validate=validate)
    # in half the page, beside one query's bias (SWIN_TITLE_LINES too, so the two plots stay level): with M on the
    # first line and the formula on one, the title ran 16 px off the chart at 819 px
    return narrow_figure_title(figure, lines=SWIN_TITLE_LINES)


def swin_bias_matrix(window: int = 7, *, seed: int = 0, query_row: int = 0, query_col: int = 0,
                     validate: bool = True) -> go.Figure:
    """The M² × M² bias a window's logits get from a random (seeded) table, one head: the table gathered per pair.

    Example: ``show.swin_bias_matrix(4)``
    """
    table = _swin_table(window, seed)
    m = int(round(((table.shape[0]) ** 0.5 + 1) / 2))
    grid = _grid(m, m, query_row, query_col)
    bias = swin_bias(table, m)[0].numpy()
    dh, dw = (t.numpy() for t in relative_index_2d(grid, device=CPU))
    return figures.pair_matrix_figure(bias, dh, dw, title=f"the bias {article(m)} {m} × {m} window adds<br><sup>{m * m} × "
                                      f"{m * m}, random table, seed {seed}</sup>", value_label="bias", colorscale="RdBu_r",
                                      zmid=0.0, query=grid.patch(query_row, query_col), validate=validate)


def swin_query_bias(window: int = 7, *, seed: int = 0, query_row: int = 0, query_col: int = 0,
                    validate: bool = True) -> go.Figure:
    """One query patch's bias over its window, laid out as the window (a window of the per-offset plane).

    Example: ``show.swin_query_bias(7, query_row=3, query_col=3)``
    """
    table = _swin_table(window, seed)
    m = int(round(((table.shape[0]) ** 0.5 + 1) / 2))
    grid = _grid(m, m, query_row, query_col)
    values = offset_window(swin_bias_per_offset(table, m), grid, query_row, query_col)[0].numpy()
    dh, dw = (t.numpy() for t in query_offsets(grid, query_row, query_col, device=CPU))
    # beside the index formula, in half the page: on one line, the title ran 36 px off the chart at 1024 px
    return narrow_figure_title(figures.image_map_figure(
        values, dh, dw, query=(query_row, query_col), validate=validate,
        title=f"bias of query patch ({query_row}, {query_col}) over its window", value_label="bias",
        colorscale="RdBu_r", zmid=0.0), lines=SWIN_TITLE_LINES)


def swinv2_coords(window: int = 8, *, pretrained_window: int = 0) -> go.Figure:
    """Swin v2's log-spaced MLP input against the offset, one axis.

    Example: ``show.swinv2_coords(16, pretrained_window=8)``
    """
    coords = swinv2_coordinates(window, pretrained_window=pretrained_window, device=CPU)
    m = int(round((coords.shape[0] ** 0.5 + 1) / 2))
    axis = coords.view(2 * m - 1, 2 * m - 1, 2)[:, 0, 0].numpy()
    return figures.swinv2_coordinates_figure(np.arange(-(m - 1), m), axis, window=m, pretrained=pretrained_window)


# ---------------------------------------------------------------------------------------
# 2-D RoPE


def rope2d_scores(rows: int = 16, cols: int = 16, *, rope: str = "pixtral", head_dim: int = 64,
                  base: float | None = None, seed: int = 0, same: bool = True, query_row: int | None = None,
                  query_col: int | None = None, validate: bool = True) -> go.Figure:
    """The score of q at a query patch against k at every offset (Δh, Δw), one map for every query.

    Example: ``show.rope2d_scores(64, 64, rope="dinov3")``
    """
    plane = rope2d_plane(rows, cols, rope=rope, head_dim=head_dim, base=base, seed=seed, same=same)
    box = None
    if query_row is not None and query_col is not None:
        _grid(rows, cols, query_row, query_col)
        box = (-query_row, -query_col, rows, cols)
    label = make_rope2d(rope, head_dim, base).label.split(" (")[0]
    return figures.offset_plane_figure(plane.astype(np.float32), window=box, value_label="q·k", zmid=0.0,
                                       title=f"{label}: score per (Δh, Δw)<br><sup>{rows} × {cols} patches, "
                                             f"{counted(plane.size, 'offset')}</sup>",
                                       validate=validate)


def rope2d_query_scores(rows: int = 16, cols: int = 16, *, rope: str = "pixtral", head_dim: int = 64,
                        base: float | None = None, seed: int = 0, same: bool = True, query_row: int = 0,
                        query_col: int = 0, validate: bool = True, browser: bool = False) -> go.Figure | GridImage:
    """One query patch's scores against every key patch, laid out as the image (``browser=True``: a GridImage).

    Example: ``show.rope2d_query_scores(64, 64, query_row=20, query_col=40)``
    """
    grid = _grid(rows, cols, query_row, query_col)
    plane = rope2d_plane(rows, cols, rope=rope, head_dim=head_dim, base=base, seed=seed, same=same)
    values = offset_window(plane, grid, query_row, query_col).astype(np.float32)      # a slice of the numpy plane
    title = f"query ({query_row}, {query_col}) against every key patch"
    if browser and (image := figures.image_map_canvas(values, query=(query_row, query_col), title=title,
                                                      value_label="q·k", colorscale="RdBu_r", zmid=0.0)):
        return image
    dh, dw = (t.numpy() for t in query_offsets(grid, query_row, query_col, device=CPU))
    return figures.image_map_figure(values, dh, dw, query=(query_row, query_col), validate=validate, title=title,
                                    value_label="q·k", colorscale="RdBu_r", zmid=0.0)


def rope2d_pairs(head_dim: int = 64, rows: int = 16, cols: int = 16) -> go.Figure:
    """The wavelength (patches per turn) of each frequency pair, by the axis it turns with, in the three 2-D RoPEs.

    Example: ``show.rope2d_pairs(64, 32, 32)``
    """
    grid = PatchGrid(rows, cols)
    ropes = [make_rope2d(name, head_dim) for name in ROPES_2D]
    return figures.pair_axes_figure({r.label.split(" (")[0]: r.pair_axis.numpy() + 1 for r in ropes},
                                    {r.label.split(" (")[0]: r.step(grid).numpy() for r in ropes},
                                    title=f"each pair's wavelength and axis (head_dim {head_dim}, {rows} × {cols} "
                                          "patches)", step="patch", units="patches")


# ---------------------------------------------------------------------------------------
# M-RoPE


def mrope_ids(rule: str = "qwen2_5_vl", rows: int = 4, cols: int = 6, frames: int = 3, *,
              tokens_per_second: int = 2, seconds_per_grid: float = 1.0) -> go.Figure:
    """The three rows of position ids (t, h, w) of text, an image, text, a video, text, as get_rope_index.

    Example: ``show.mrope_ids("qwen3_vl", 4, 4, 8)``
    """
    r = rule_named(rule)
    ids, kinds = mrope_position_ids(mixed_sequence(rule, rows, cols, frames, seconds_per_grid=seconds_per_grid), r,
                                    tokens_per_second=tokens_per_second, device=CPU)
    return figures.mrope_ids_figure(ids.numpy(), kinds.numpy(), KIND_NAMES,
                                    # two lines: on one, "(1,296 tokens)" was cut at 1024 × 768
                                    title=f"{r.label}: position ids of {ids.shape[1]:,} tokens",
                                    subtitle=f"text, {article(rows)} {rows} × {cols} image, text, "
                                             f"{article(frames)} {frames}-frame video, text")


def mrope_pairs(section: tuple[int, int, int] = (16, 24, 24)) -> go.Figure:
    """Which frequency pairs turn with t, h and w: sectioned (Qwen2-VL, 2.5-VL) and interleaved (Qwen3-VL).

    Example: ``show.mrope_pairs((24, 20, 20))``
    """
    pairs = sum(check_section(section, sum(section) if all(isinstance(v, int) for v in section) else 0))
    theta = default_inv_freq(2 * pairs, 10000.0, CPU).double().numpy()           # [P]
    rows = {"sectioned": mrope_pair_axes(section, interleaved=False).numpy(),
            "interleaved": mrope_pair_axes(section, interleaved=True).numpy()}
    return figures.pair_axes_figure(rows, {name: theta for name in rows},
                                    title=f"mrope_section {list(section)}<br><sup>each pair's wavelength and axis,</sup>"
                                          # on one line, the note ran 2 px off the chart in half of 819 px
                                          "<br><sup>base 10,000</sup>", step="position id", units="position ids")


def mrope_scores(rule: str = "qwen2_5_vl", rows: int = 16, cols: int = 16, frames: int = 8, *, dt: int = 0,
                 head_dim: int = 128, seed: int = 0, same: bool = True, tokens_per_second: int = 2,
                 seconds_per_grid: float = 1.0, validate: bool = True, browser: bool = False) -> go.Figure | GridImage:
    """The score between two video tokens per (Δh, Δw) at one frame offset Δt (key − query, in frames).
    ``browser=True``: a GridImage (drawn in the browser, relviz.app.display.show_toeplitz).

    Example: ``show.mrope_scores("qwen2_vl", 64, 64, 8, dt=2)``
    """
    plane = mrope_plane(rule, rows, cols, frames, head_dim=head_dim, seed=seed, same=same,
                        tokens_per_second=tokens_per_second, seconds_per_grid=seconds_per_grid)
    dt = check_int("dt", dt, minimum=-(frames - 1), maximum=frames - 1)
    title = f"{rule_named(rule).label}: video tokens {counted(dt, 'frame', spec='+d')} apart"
    subtitle = f"score per (Δh, Δw){', k = q' if same else ''}"
    values = plane[dt + frames - 1].astype(np.float32)
    if browser and (image := figures.offset_plane_canvas(values, value_label="q·k", zmid=0.0, title=title,
                                                         subtitle=subtitle)):
        return image
    return figures.offset_plane_figure(values, window=None, value_label="q·k", zmid=0.0,
                                       title=f"{title}<br><sup>{subtitle}</sup>", validate=validate)
