"""Large Toeplitz windows, pooled overviews and small maps described for the browser to draw.

A window travels as its per-offset slices, rows + cols − 1 values per field, and a pooled overview as
its block statistics per class of blocks; relviz.app.display.show_toeplitz draws them on a canvas and computes
the hover there, complete at every size (a plotly figure would send one value per cell). A :class:`GridImage`
(a map that is not Toeplitz: the Images page's) sends one value per cell, and is drawn in place on a move.
"""
from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relviz.figures.heatmap import KEY_AXIS, QUERY_AXIS, READABLE_FONT, READABLE_TITLE
from relviz.figures.toeplitz_colours import continuous_range, hex_palette, image_colours, palette_256
from relviz.figures.toeplitz_window import OFFSET_LABEL, OVERVIEW_MAX, HoverField, Window, checked_per_offset
from relviz.toeplitz_display import PooledView, display_block, toeplitz_pooled, toeplitz_window


def _json_numbers(values: np.ndarray) -> list:
    """Plain Python numbers for JSON: integers stay integers, floats keep float32's exact value."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_:
        return values.astype(np.int64).tolist()
    return [float(v) for v in values.astype(np.float64)]


@dataclass(frozen=True)
class ToeplitzImage:
    """A large window of a Toeplitz matrix described by its per-offset slices, for the browser to draw.

    Every cell of the window, and every hover field, is a function of the offset: cell (r, c) of
    the window holds ``strip[c − r + rows − 1]``, so the window travels as rows + cols − 1 values per
    field instead of rows · cols (relviz.app.display.show_toeplitz draws it on a canvas and computes the hover
    in the browser). The app uses it where :func:`toeplitz_heatmap` would send a plotly image.
    """

    window: Window
    q_offset: int
    strip: np.ndarray                     # the window's slice of the per-offset vector, rows + cols − 1
    pixels: np.ndarray                    # colour index of each entry of strip (uint8)
    palette: tuple[tuple[int, int, int], ...]
    colour: dict                          # {"kind": "discrete", lo, tickvals, ticktext} or continuous zmin/zmax
    fields: tuple[tuple[str, str, np.ndarray], ...]  # (label, format "d"/".4g", per-offset slice); 0: the value
    lines: tuple[str, ...]                # hover lines: {i}, {j}, {d} = j − i, {n} = field n
    value_label: str
    title: str = ""
    height: int = 430
    x_title: str = KEY_AXIS
    y_title: str = QUERY_AXIS
    bar_below: bool = False               # the colour bar under the picture (a map in a third of the page)

    @property
    def values(self) -> np.ndarray:
        """The exact values shown, [rows, cols] (a view of the strip)."""
        w = self.window
        windows = np.lib.stride_tricks.sliding_window_view(self.strip, w.cols)
        return windows[::-1, :]

    def payload(self) -> dict:
        """The JSON the canvas component reads: O(rows + cols) numbers, never one per cell."""
        w = self.window
        return {
            "kind": "window", "row0": w.row0, "col0": w.col0, "rows": w.rows, "cols": w.cols,
            "q_offset": self.q_offset, "pixels": self.pixels.astype(np.int64).tolist(),
            "palette": hex_palette(self.palette), "colour": self.colour,
            "fields": [{"label": label, "format": fmt, "values": _json_numbers(values)}
                       for label, fmt, values in self.fields],
            "lines": list(self.lines), "value_label": self.value_label, "title": self.title,
            "height": self.height, "x_title": self.x_title, "y_title": self.y_title,
            "font": READABLE_FONT, "title_font": READABLE_TITLE,
        } | ({"bar_below": True} if self.bar_below else {})


def toeplitz_image(
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
    value_last: bool = False,
) -> ToeplitzImage | None:
    """The window as a :class:`ToeplitzImage` (same arguments and hover as :func:`toeplitz_heatmap`);
    None when its colours do not fit 256 levels exactly (then draw it with toeplitz_heatmap)."""
    per_offset, window = checked_per_offset(per_offset, q_len, k_len, window)
    toeplitz_window(per_offset, q_len, k_len, row0=window.row0, col0=window.col0, rows=window.rows,
                    cols=window.cols)  # checks the window lies inside the matrix
    first = window.col0 - (window.row0 + window.rows - 1) + q_len - 1  # offset index of the bottom-left cell
    part = slice(first, first + window.rows + window.cols - 1)
    strip = np.ascontiguousarray(per_offset[part])
    colours = image_colours(strip, discrete_range, colorscale, zmid)
    if colours is None:
        return None
    pixels, palette, colour = colours
    integer = np.issubdtype(strip.dtype, np.integer)
    fields: list[tuple[str, str, np.ndarray]] = [(value_label, "d" if integer else ".4g", strip)]
    lines = ["i = {i}", "j = {j}", f"{OFFSET_LABEL} = {{d}}"]
    # the window's own offsets (rows + cols − 1 of them: never the whole vector, 2^21 values at 2^20)
    value_is_offset = value_label == OFFSET_LABEL and np.array_equal(
        strip, np.arange(part.start, part.stop, dtype=np.int64) - (q_len - 1) - q_offset)
    value_line = [] if value_is_offset else [f"{value_label} = {{0}}"]
    if not value_last:
        lines += value_line
    for f in hover:
        values = np.ascontiguousarray(np.asarray(f.per_offset)[part])
        fmt = f.fmt.lstrip(":") or ("d" if np.issubdtype(values.dtype, np.integer) else ".4g")
        fields.append((f.label, fmt, values))
        text = (f.line or f"{f.label} = {{}}").replace("{}", f"{{{len(fields) - 1}}}")
        if text.startswith("…") and len(lines) > 2:
            lines[-1] += " " + text
        else:
            lines.append(text)
    if value_last:
        lines += value_line
    return ToeplitzImage(window, q_offset, strip, pixels, tuple(palette), colour, tuple(fields), tuple(lines),
                         value_label, title, height)


def _class_numbers(values: np.ndarray, integer: bool) -> list:
    """Per-class statistics for JSON: None where no block has the class; integers stay integers; other
    values to 8 significant digits (the hover shows 4, the colour 256 levels)."""
    return [None if not math.isfinite(v) else int(v) if integer else float(f"{v:.8g}") for v in values.tolist()]


@dataclass(frozen=True)
class ToeplitzOverviewImage:
    """The pooled overview described for the browser: the block statistics per class of blocks
    (views.PooledView: the grid is Toeplitz but for its last row and column, so 4 · (rows + cols − 1)
    numbers per statistic describe it at any length), the block size and the window's rectangle. The
    canvas component colours each block by its exact mean and shows its min and max on hover.
    :meth:`with_window` moves the rectangle without pooling again."""

    pooled: PooledView
    integer: bool
    q_len: int
    k_len: int
    q_offset: int
    window: Window | None
    palette: tuple[tuple[int, int, int], ...]
    zmin: float
    zmax: float
    value_label: str
    title: str = ""
    height: int = 430

    @property
    def block(self) -> int:
        return self.pooled.block

    def with_window(self, window: Window | None) -> "ToeplitzOverviewImage":
        return dataclasses.replace(self, window=window)

    def payload(self) -> dict:
        p, w = self.pooled, self.window
        return {
            "kind": "overview", "q_len": self.q_len, "k_len": self.k_len, "q_offset": self.q_offset,
            "block": self.block,
            "pooled": {"mean": _class_numbers(p.class_mean, False), "min": _class_numbers(p.class_min, self.integer),
                       "max": _class_numbers(p.class_max, self.integer)},
            "window": None if w is None else {"row0": w.row0, "col0": w.col0, "rows": w.rows, "cols": w.cols},
            "palette": hex_palette(self.palette),
            "colour": {"kind": "continuous", "zmin": self.zmin, "zmax": self.zmax,
                       "title": f"{self.value_label} (block mean)"},
            "format": "d" if self.integer else ".4g", "value_label": self.value_label, "title": self.title,
            "height": self.height, "x_title": f"{KEY_AXIS} (blocks of {self.block})",
            "y_title": f"{QUERY_AXIS} (blocks of {self.block})", "font": READABLE_FONT,
            "title_font": READABLE_TITLE,
        }


def toeplitz_overview_image(
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
) -> ToeplitzOverviewImage:
    """:func:`toeplitz_overview` (same arguments, same picture and hover) for the browser to draw:
    12 · (rows + cols − 1) numbers at most (~3,000 at 128 blocks a side), whatever the length, the same for
    every window position but the rectangle's four."""
    per_offset, _ = checked_per_offset(per_offset, q_len, k_len, None)
    block = display_block(q_len, k_len, max_cells)
    pooled = toeplitz_pooled(per_offset, q_len, k_len, block)
    # block means lie within the values' range
    zmin, zmax = (float(v) for v in value_range) if value_range is not None else continuous_range(per_offset, zmid)
    palette = palette_256(colorscale)
    return ToeplitzOverviewImage(pooled, bool(np.issubdtype(per_offset.dtype, np.integer)), q_len, k_len, q_offset,
                                 window, tuple(palette), zmin, zmax, value_label, title, height)


#: The longest side of a GridImage, in multiples of its short side (see grid_image).
GRID_MAX_ASPECT = 2


@dataclass(frozen=True)
class GridImage:
    """Any [rows, cols] map described for the browser to draw (the canvas component's kind "grid"): one colour
    index per cell, the exact values for the hover (float32, base64), an optional outlined block of cells.

    Why: a changed plotly figure is a new chart to Streamlit's frontend (its element id includes the spec), so a
    query slider's move mounted the Images page's 64 × 64 map anew and plotly drew it from scratch, 60-80 ms in
    Chromium; the canvas component redraws in place. Built by relviz.figures.vision's ``*_canvas`` functions,
    which colour the cells as their plotly twins do (tests compare the two)."""

    values: np.ndarray                    # [rows, cols] the values shown
    pixels: np.ndarray                    # [rows, cols] uint8 colour index of each cell
    palette: tuple[tuple[int, int, int], ...]
    colour: dict                          # {"kind": "discrete", lo, hi, tickvals, ticktext} or continuous zmin/zmax
    value_label: str
    lines: tuple[str, ...]                # hover lines: {y} the row's label, {x} the column's, {v} the value
    x_first: int = 0                      # the label of column 0 (a Δ axis starts below 0)
    y_first: int = 0
    x_title: str = KEY_AXIS
    y_title: str = QUERY_AXIS
    title: str = ""
    subtitle: str = ""
    outline: tuple[int, int, int, int] | None = None   # (row, col, rows, cols) of the outlined cells
    height: int = 420
    bar_below: bool = False               # the colour bar under the picture (a map in a third of the page)

    def payload(self) -> dict:
        """The JSON the canvas component reads: rows · cols colour indices and values, base64."""
        rows, cols = self.values.shape
        values = np.ascontiguousarray(self.values, dtype="<f4")
        return {
            "kind": "grid", "rows": rows, "cols": cols, "x_first": self.x_first, "y_first": self.y_first,
            "pixels": base64.b64encode(np.ascontiguousarray(self.pixels, dtype=np.uint8).tobytes()).decode("ascii"),
            "values": base64.b64encode(values.tobytes()).decode("ascii"),
            "format": "d" if np.issubdtype(self.values.dtype, np.integer) else ".4g",
            "palette": hex_palette(self.palette), "colour": self.colour, "lines": list(self.lines),
            "outline": None if self.outline is None else dict(zip(("row", "col", "rows", "cols"), self.outline)),
            "value_label": self.value_label, "title": self.title, "subtitle": self.subtitle, "height": self.height,
            "x_title": self.x_title, "y_title": self.y_title, "font": READABLE_FONT, "title_font": READABLE_TITLE,
        } | ({"bar_below": True} if self.bar_below else {})


def grid_image(values: np.ndarray, *, value_label: str, lines: Sequence[str], discrete_range: tuple[int, int] | None,
               colorscale: str | list, zmid: float | None, **options) -> GridImage | None:
    """[rows, cols] ``values`` as a :class:`GridImage` coloured as a plotly heatmap with the same colour scale
    and ``zmid`` (256 levels; a discrete range one colour per value); None when a discrete range needs more
    than 256 colours, or the grid is long and thin (more than GRID_MAX_ASPECT times as long as it is wide: the
    canvas's colour bar is as tall as the picture, a 1 × 64 grid's a few pixels; plotly's keeps its height).
    ``options``: GridImage's labels, titles, outline and height."""
    if max(values.shape) > GRID_MAX_ASPECT * min(values.shape):
        return None
    colours = image_colours(values, discrete_range, colorscale, zmid)
    if colours is None:
        return None
    pixels, palette, colour = colours
    return GridImage(values, pixels, tuple(palette), colour, value_label, tuple(lines), **options)
