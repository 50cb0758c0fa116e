"""Heatmaps of any Toeplitz matrix (relative index, Shaw index, T5 bucket ...) from its per-offset vector.

The full L × L matrix is never built. Up to ``views.DISPLAY_MAX`` cells per side the
figure shows every cell; above that, a page shows two figures:

- an overview (:func:`toeplitz_overview`): each displayed cell is a block of entries and
  carries the block's exact mean (colour) and min/max (hover). Pooling keeps every
  boundary: a block that straddles one shows a blend, never a skipped offset;
- a full-resolution window (:func:`toeplitz_heatmap` with a :class:`Window`) that the user
  moves and resizes; the overview marks it with a rectangle.

Payload: every hover field of a Toeplitz matrix is a function of the offset, but plotly
wants one value per cell. Hover data travel in the smallest encoding that holds them
exactly, chosen by measuring the encoded size (plotly escapes every "/" of its base64, so
small negative integers cost far more than their byte count). If the figure would still
exceed ``FIGURE_BUDGET`` characters of JSON, optional hover fields are left out, last
first, and reported in ``ToeplitzFigure.dropped`` so the page can say so.

The app draws large windows and overviews in the browser instead (:func:`toeplitz_view`,
:class:`ToeplitzImage`, :class:`ToeplitzOverviewImage`, relviz.app.display.show_toeplitz): they travel as
per-offset slices, rows + cols − 1 values per field, and the hover is computed there, complete at
every size. The plotly figures stay for the notebook API and exports.

The geometry and hover fields are relviz.figures.toeplitz_window, the payload encoding
relviz.figures.toeplitz_payload, the colours relviz.figures.toeplitz_colours and the browser-drawn
forms relviz.figures.toeplitz_canvas: import their names from there.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from relviz.figures.heatmap import KEY_AXIS, QUERY_AXIS, matrix_heatmap
from relviz.figures.toeplitz_canvas import ToeplitzImage, toeplitz_image
from relviz.figures.toeplitz_colours import (
    band_colours,
    continuous_range,
    levels_256,
    palette_256,
    palette_png,
)
from relviz.figures.toeplitz_payload import encode_fields, exact_dtypes, unshifted_z
from relviz.figures.toeplitz_window import (
    OFFSET_LABEL,
    OVERVIEW_MAX,
    HoverField,
    Window,
    checked_per_offset,
    offsets_per_offset,
)
from relviz.toeplitz_display import PooledView, display_block, toeplitz_pooled, toeplitz_window

__all__ = ["FIGURE_BUDGET", "IMAGE_BUDGET", "IMAGE_MIN_CELLS", "ToeplitzFigure", "ToeplitzOverview", "toeplitz_heatmap",
           "toeplitz_overview", "toeplitz_view"]

#: The most characters of JSON one figure may take (the app's target is 3 MB per figure).
FIGURE_BUDGET = 2_900_000
#: The budget of a window drawn as an image. A slider move redraws the window, and the browser's
#: work grows with the figure's size (Streamlit parses, re-themes and re-parses the whole JSON of a
#: changed chart), so optional hover fields are left out sooner; i, j, j − i and the value stay.
IMAGE_BUDGET = 1_000_000
#: Windows of at least this many cells are drawn as an image (see _image_figure), smaller ones as
#: heatmap traces (which can write a label in every cell).
IMAGE_MIN_CELLS = 128 * 128


@dataclass(frozen=True)
class ToeplitzFigure:
    """A heatmap of (a window of) a Toeplitz matrix and what it shows."""

    figure: go.Figure
    values: np.ndarray          # the exact values shown, [window.rows, window.cols]
    window: Window
    dropped: tuple[str, ...] = field(default=())  # hover fields left out to stay under the budget


def toeplitz_heatmap(
    per_offset: np.ndarray,
    q_len: int,
    k_len: int,
    *,
    value_label: str,
    q_offset: int = 0,
    window: Window | None = None,
    hover: Sequence[HoverField] = (),
    discrete_range: tuple[int, int] | None = None,
    colorscale: str | list = "Viridis",
    zmid: float | None = None,
    title: str = "",
    height: int = 430,
    budget: int = FIGURE_BUDGET,
    value_last: bool = False,
    validate: bool = True,
) -> ToeplitzFigure:
    """Exact heatmap of rows/cols ``window`` (default: the whole matrix, if it fits the display).

    Rows are labelled by the query's position i = q_offset + row, so that j − i is the offset
    itself. Hover on every cell: i, j, j − i, the value, then ``hover`` fields in order
    (``value_last=True``: the value after them). ``validate=False``: built without plotly's per-property
    validation, as relviz.figures.heatmap.matrix_heatmap says (the same figure; a window drawn as an image is
    validated either way).
    """
    per_offset, window = checked_per_offset(per_offset, q_len, k_len, window)

    def cells(vector: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(toeplitz_window(np.asarray(vector), q_len, k_len, row0=window.row0,
                                                    col0=window.col0, rows=window.rows, cols=window.cols))

    values = cells(per_offset)
    x = np.arange(window.col0, window.col0 + window.cols)
    y = q_offset + np.arange(window.row0, window.row0 + window.rows)
    figure = matrix_heatmap(values, x=x, y=y, hover={}, value_label=value_label, title=title,
                            discrete_range=discrete_range, colorscale=colorscale, zmid=zmid, height=height,
                            validate=validate)

    image = window.cells >= IMAGE_MIN_CELLS and _image_figure(figure, values, discrete_range, zmid,
                                                               x0=int(x[0]), y0=int(y[0]))
    if image:
        figure = image
        budget = min(budget, IMAGE_BUDGET)
    trace = figure.data[0]
    integer_values = np.issubdtype(values.dtype, np.integer)
    # An image holds colours: the value itself travels in the hover data.
    value_in_z = False if image else unshifted_z(trace, values, discrete_range)
    offsets = offsets_per_offset(q_len, k_len, q_offset)
    # The relative matrix itself (value_label "j − i"): its values are the offsets, sent once.
    value_is_offset = value_label == OFFSET_LABEL and np.array_equal(per_offset, offsets)
    fields: list[HoverField] = [] if value_is_offset and value_in_z else [HoverField(OFFSET_LABEL, offsets, True)]
    if not value_in_z and not value_is_offset:
        fields.append(HoverField(value_label, per_offset, True))
    fields.extend(hover)

    # Worst case, every base64 character escaped twice over: small figures skip the measuring.
    worst = 50_000 + window.cells * (1 + 4 * len(fields)) * 8 // 3
    base_chars = 0 if worst <= budget else len(pio.to_json(figure, validate=False))
    kept = list(fields)
    dropped: list[str] = []
    while True:
        optional = [f for f in kept if not f.required]
        # base64 takes at least 4/3 characters per byte: a set of fields whose smallest exact dtype
        # already overflows the budget is left without encoding it (a slider move pays for each encoding).
        smallest = min(exact_dtypes([np.asarray(f.per_offset) for f in kept]), key=lambda t: t.itemsize) \
            if kept else None
        too_big = smallest is not None and base_chars + window.cells * len(kept) * smallest.itemsize * 4 // 3 > budget
        if not (too_big and optional):
            encoded = encode_fields([(f.label, cells(f.per_offset)) for f in kept])
            if base_chars + encoded.chars + 400 <= budget or not optional:
                break
        last = optional[-1]
        leaving = [f for f in kept if not f.required and (f is last or (last.group and f.group == last.group))]
        dropped.extend(f.label for f in leaving)
        kept = [f for f in kept if all(f is not g for g in leaving)]

    position = {label: k for k, label in enumerate(encoded.order) if label}
    lines = ["i = %{y}", "j = %{x}"]
    if value_is_offset and value_in_z:
        lines.append(f"{OFFSET_LABEL} = %{{z:d}}")
    value_line = f"{value_label} = %{{z{':d' if integer_values else ':.4g'}}}"
    for f in fields:
        if f.label in position:
            fmt = f.fmt or (":d" if np.issubdtype(np.asarray(f.per_offset).dtype, np.integer) else ":.4g")
            text = (f.line or f"{f.label} = {{}}").replace("{}", f"%{{customdata[{position[f.label]}]{fmt}}}")
            if text.startswith("…") and len(lines) > 2:
                lines[-1] += " " + text
            else:
                lines.append(text)
        if f.label == OFFSET_LABEL and value_in_z and not value_last:
            lines.append(value_line)
    if value_in_z and value_last:
        lines.append(value_line)
    trace.hovertemplate = "<br>".join(lines) + "<extra></extra>"
    if encoded.array is not None:
        trace.customdata = encoded.array
    meta = {"customdata": list(encoded.order), "row0": window.row0, "col0": window.col0, "q_offset": q_offset}
    if image:  # how the picture encodes the value, and which hover field holds the value itself
        meta["image"] = trace.meta["image"] | {"value": OFFSET_LABEL if value_is_offset else value_label}
    trace.meta = meta
    return ToeplitzFigure(figure, values, window, tuple(dropped))


def toeplitz_view(per_offset: np.ndarray, q_len: int, k_len: int, **options) -> ToeplitzFigure | ToeplitzImage:
    """What the app draws: a :class:`ToeplitzImage` for a window of at least IMAGE_MIN_CELLS cells whose
    colours fit 256 levels (drawn in the browser from its per-offset slices), else the plotly heatmap.

    Takes :func:`toeplitz_heatmap`'s arguments; only one of the two is built."""
    _, window = checked_per_offset(per_offset, q_len, k_len, options.get("window"))
    if window.cells >= IMAGE_MIN_CELLS:
        image = toeplitz_image(per_offset, q_len, k_len,
                               **{k: v for k, v in options.items() if k not in ("budget", "validate")})
        if image is not None:
            return image
    return toeplitz_heatmap(per_offset, q_len, k_len, **options)


def _image_figure(heatmap: go.Figure, values: np.ndarray, discrete_range: tuple[int, int] | None,
                  zmid: float | None, *, x0: int, y0: int) -> go.Figure | None:
    """The heatmap as an image trace (a palette PNG) plus an invisible one-cell heatmap that carries
    the colour bar; None when the values need more than 256 colours to stay exact.

    plotly.js turns every cell of a heatmap (and of its hover data) into JavaScript objects: a
    512 × 512 window with hover took ~1 s to draw in Chromium, the same window as an image ~0.1 s.
    Discrete values (indices, buckets) are exact in the PNG: pixel = value − lo. Continuous values
    get 256 colour levels over [zmin, zmax] (pixel = round((value − zmin) / (zmax − zmin) · 255));
    their exact values travel in the hover data.
    """
    heat = heatmap.data[0]
    if discrete_range is not None:
        lo, hi = discrete_range
        count = hi - lo + 1
        if count > 256:
            return None
        palette = band_colours(heat.colorscale, count)
        indices = (values.astype(np.int64) - lo).astype(np.uint8)
        bar = dict(z=[[0]], zmin=heat.zmin, zmax=heat.zmax)
        meta = {"image": {"kind": "discrete", "lo": int(lo)}}
    else:
        zmin, zmax = continuous_range(values, zmid)
        palette = palette_256(heat.colorscale)
        indices = levels_256(values, zmin, zmax)
        bar = dict(z=[[zmin]], zmin=zmin, zmax=zmax)
        meta = {"image": {"kind": "continuous", "zmin": zmin, "zmax": zmax, "levels": 256}}
    image = go.Image(source=palette_png(indices, palette), x0=x0, dx=1, y0=y0, dy=1, meta=meta)
    colour_bar = go.Heatmap(x=[x0], y=[y0], colorscale=heat.colorscale, colorbar=heat.colorbar, opacity=0,
                            hoverinfo="skip", showscale=True, **bar)
    figure = go.Figure(data=[image, colour_bar], layout=heatmap.layout)
    figure.update_yaxes(autorange="reversed")
    return figure


# ---------------------------------------------------------------------------------------
# Pooled overview


@dataclass(frozen=True)
class ToeplitzOverview:
    figure: go.Figure
    pooled: PooledView

    @property
    def block(self) -> int:
        return self.pooled.block


def _range_label(start: int, stop: int) -> str:
    """'a–b' for the inclusive range start..stop−1 (a single index stays a number-like label)."""
    return f"{start}–{stop - 1}" if stop - start > 1 else str(start)


def toeplitz_overview(
    per_offset: np.ndarray,
    q_len: int,
    k_len: int,
    *,
    value_label: str,
    q_offset: int = 0,
    window: Window | None = None,
    value_range: tuple[float, float] | None = None,
    colorscale: str | list = "Viridis",
    zmid: float | None = None,
    max_cells: int = OVERVIEW_MAX,
    title: str = "",
    height: int = 430,
) -> ToeplitzOverview:
    """Exact pooled overview: each displayed cell is a block × block block of entries.

    Colour: the block's mean. Hover: the block's query and key ranges, its range of j − i,
    and the exact min and max. ``window`` is drawn as a rectangle. ``value_range`` fixes the
    colour range (pass the discrete range of indices/buckets so colours match the window).
    """
    per_offset = np.asarray(per_offset)
    block = display_block(q_len, k_len, max_cells)
    pooled = toeplitz_pooled(per_offset, q_len, k_len, block)
    row_end = np.minimum(pooled.row_start + block, q_len)
    col_end = np.minimum(pooled.col_start + block, k_len)
    y_labels = [_range_label(q_offset + int(a), q_offset + int(b)) for a, b in zip(pooled.row_start, row_end)]
    x_labels = [_range_label(int(a), int(b)) for a, b in zip(pooled.col_start, col_end)]

    mean = pooled.mean.astype(np.float32)
    figure = matrix_heatmap(mean, x=x_labels, y=y_labels, hover={}, value_label=f"{value_label} (block mean)",
                            title=title, colorscale=colorscale, zmid=zmid, height=height)
    trace = figure.data[0]
    if value_range is not None:
        trace.zmin, trace.zmax = value_range

    # j − i over a block runs from (first key − last query) to (last key − first query).
    d_lo = pooled.col_start[None, :] - (q_offset + row_end[:, None] - 1)
    d_hi = (col_end[None, :] - 1) - (q_offset + pooled.row_start[:, None])
    integer = np.issubdtype(per_offset.dtype, np.integer)
    vmin = pooled.vmin.astype(np.int64) if integer else pooled.vmin
    vmax = pooled.vmax.astype(np.int64) if integer else pooled.vmax
    encoded = encode_fields([("d_lo", d_lo), ("d_hi", d_hi), ("min", vmin), ("max", vmax)])
    at = {label: k for k, label in enumerate(encoded.order) if label}
    fmt = "" if integer else ":.4g"
    trace.customdata = encoded.array
    trace.hovertemplate = "<br>".join([
        "i = %{y}", "j = %{x}",
        f"{OFFSET_LABEL} = %{{customdata[{at['d_lo']}]:d}} … %{{customdata[{at['d_hi']}]:d}}",
        f"{value_label}: mean %{{z:.4g}}, min %{{customdata[{at['min']}]{fmt}}}, "
        f"max %{{customdata[{at['max']}]{fmt}}}",
    ]) + f"<extra>block {block} × {block}</extra>"
    trace.meta = {"customdata": list(encoded.order), "block": block, "q_offset": q_offset}

    def ticks(labels: list[str], starts: np.ndarray, shift: int) -> dict:
        step = max(1, math.ceil(len(labels) / 8))
        picked = range(0, len(labels), step)
        return dict(tickmode="array", tickvals=[labels[p] for p in picked],
                    ticktext=[str(int(starts[p]) + shift) for p in picked])

    figure.update_xaxes(**ticks(x_labels, pooled.col_start, 0), type="category",
                        title_text=f"{KEY_AXIS} (blocks of {block})")
    figure.update_yaxes(**ticks(y_labels, pooled.row_start, q_offset), type="category",
                        title_text=f"{QUERY_AXIS} (blocks of {block})")
    if window is not None:
        # The window as a rectangle in category units (block b spans b − 0.5 … b + 0.5), drawn twice
        # (white, then dotted black) so that it shows on dark and light colours alike.
        corners = dict(x0=window.col0 / block - 0.5, x1=(window.col0 + window.cols) / block - 0.5,
                       y0=window.row0 / block - 0.5, y1=(window.row0 + window.rows) / block - 0.5)
        for line in (dict(color="white", width=3), dict(color="black", width=1.5, dash="dot")):
            figure.add_shape(type="rect", xref="x", yref="y", line=line, fillcolor="rgba(0,0,0,0)", **corners)
    return ToeplitzOverview(figure, pooled)
