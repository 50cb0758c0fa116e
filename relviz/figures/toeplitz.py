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
:class:`ToeplitzImage`, :class:`ToeplitzOverviewImage`, relviz.ui.show_toeplitz): they travel as
per-offset slices, rows + cols − 1 values per field, and the hover is computed there, complete at
every size. The plotly figures stay for the notebook API and exports.
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

from relviz.figures.heatmap import (
    DISCRETE_PALETTE,
    KEY_AXIS,
    QUERY_AXIS,
    READABLE_FONT,
    READABLE_TITLE,
    _tick_step,
    discrete_colorscale,
    matrix_heatmap,
)
from relviz.views import DISPLAY_MAX, PooledView, display_block, toeplitz_pooled, toeplitz_window

#: The most cells per side the pooled overview sends (it sits beside the window, as an overview, in
#: half the page: ~450 px). Every move of the window redraws it (its rectangle moves), and Streamlit
#: re-reads a changed figure whole: 128 per side keeps that under 0.4 MB (256 took 1.26 MB).
OVERVIEW_MAX = 128
#: The most characters of JSON one figure may take (the app's target is 3 MB per figure).
FIGURE_BUDGET = 2_900_000
#: The budget of a window drawn as an image. A slider move redraws the window, and the browser's
#: work grows with the figure's size (Streamlit parses, re-themes and re-parses the whole JSON of a
#: changed chart), so optional hover fields are left out sooner; i, j, j − i and the value stay.
IMAGE_BUDGET = 1_000_000
#: Label of the offset field every hover shows.
OFFSET_LABEL = "j − i"
#: Windows of at least this many cells are drawn as an image (see _image_figure), smaller ones as
#: heatmap traces (which can write a label in every cell).
IMAGE_MIN_CELLS = 128 * 128


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


# ---------------------------------------------------------------------------------------
# Hover payload


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


def _b64_json_chars(array: np.ndarray) -> int:
    """Characters the array's base64 takes in plotly's JSON (each "/" is escaped as \\u002f)."""
    data = base64.b64encode(np.ascontiguousarray(array).tobytes())
    return len(data) + 5 * data.count(b"/")


def _exact_dtypes(values: list[np.ndarray]) -> list[np.dtype]:
    """The dtypes plotly decodes that hold every value exactly (integers up to 16 bits, float32)."""
    if not all(np.issubdtype(v.dtype, np.integer) for v in values):
        return [np.dtype(np.float32)]
    lo = min(int(v.min()) for v in values)
    hi = max(int(v.max()) for v in values)
    fits = [np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16)
            if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max]
    return fits + [np.dtype(np.float32) if max(-lo, hi) < 2**24 else np.dtype(np.float64)]


@dataclass(frozen=True)
class _Encoded:
    array: np.ndarray | None
    order: tuple[str, ...]  # labels in storage order (a zero pad is not listed)
    chars: int


def _encode(cells: list[tuple[str, np.ndarray]]) -> _Encoded:
    """The customdata array of minimum JSON size: dtype, field order and an optional zero pad.

    A zero pad makes a cell's record 6 bytes for two int16 fields, which puts the high byte of
    the first field where base64 rarely turns it into an escaped "/".
    """
    if not cells:
        return _Encoded(None, (), 0)
    labels = [label for label, _ in cells]
    values = [v for _, v in cells]
    shape = values[0].shape
    rows = shape[0]
    sample = slice(None, None, max(1, rows // 32))  # cost ranking on every ~32nd row
    best: tuple[int, np.dtype, tuple[int, ...]] | None = None
    for dtype in _exact_dtypes(values):
        pads = (0, 1) if dtype.itemsize == 2 and len(cells) == 2 else (0,)
        for pad in pads:
            for perm in itertools.permutations(range(len(cells) + pad)):
                stacked = np.stack([values[p][sample] if p < len(cells) else np.zeros_like(values[0][sample])
                                    for p in perm], axis=-1).astype(dtype)
                cost = _b64_json_chars(stacked)
                if best is None or cost < best[0]:
                    best = (cost, dtype, perm)
    _, dtype, perm = best
    array = np.stack([values[p] if p < len(cells) else np.zeros(shape, dtype=values[0].dtype) for p in perm],
                     axis=-1).astype(dtype)
    order = tuple(labels[p] if p < len(cells) else "" for p in perm)
    return _Encoded(array, order, _b64_json_chars(array) + 40)


def _unshifted_z(trace: go.Heatmap, values: np.ndarray, discrete_range: tuple[int, int] | None) -> bool:
    """Make %{z} show the true value when that costs no payload; True if it does.

    matrix_heatmap sends discrete values shifted to start at 0. When the values fit one
    signed byte they can travel unshifted (same size) with the colour range shifted instead.
    Integer values on a continuous scale travel in the cheaper of int16 and float32.
    """
    if discrete_range is None:
        if np.issubdtype(values.dtype, np.integer) and values.size and \
                -2**15 <= int(values.min()) and int(values.max()) < 2**15:
            small = values.astype(np.int16)
            if _b64_json_chars(small) < _b64_json_chars(values.astype(np.float32)):
                trace.z = small
        return True
    lo, hi = discrete_range
    if lo == 0:
        return True
    if -128 <= lo and hi <= 127:
        trace.z = values.astype(np.int8)
        trace.zmin, trace.zmax = lo - 0.5, hi + 0.5
        bar = trace.colorbar
        step = bar.tickvals[1] - bar.tickvals[0] if len(bar.tickvals) > 1 else 1
        ticks = [v for v in range(lo, hi + 1) if v % step == 0]  # round numbers of the true values
        bar.tickvals, bar.ticktext = ticks, [str(v).replace("-", "−") for v in ticks]
        return True
    return False


def _checked(per_offset: np.ndarray, q_len: int, k_len: int, window: Window | None) -> tuple[np.ndarray, Window]:
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
) -> ToeplitzFigure:
    """Exact heatmap of rows/cols ``window`` (default: the whole matrix, if it fits the display).

    Rows are labelled by the query's position i = q_offset + row, so that j − i is the offset
    itself. Hover on every cell: i, j, j − i, the value, then ``hover`` fields in order
    (``value_last=True``: the value after them).
    """
    per_offset, window = _checked(per_offset, q_len, k_len, window)

    def cells(vector: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(toeplitz_window(np.asarray(vector), q_len, k_len, row0=window.row0,
                                                    col0=window.col0, rows=window.rows, cols=window.cols))

    values = cells(per_offset)
    x = np.arange(window.col0, window.col0 + window.cols)
    y = q_offset + np.arange(window.row0, window.row0 + window.rows)
    figure = matrix_heatmap(values, x=x, y=y, hover={}, value_label=value_label, title=title,
                            discrete_range=discrete_range, colorscale=colorscale, zmid=zmid, height=height)

    image = window.cells >= IMAGE_MIN_CELLS and _image_figure(figure, values, discrete_range, zmid,
                                                               x0=int(x[0]), y0=int(y[0]))
    if image:
        figure = image
        budget = min(budget, IMAGE_BUDGET)
    trace = figure.data[0]
    integer_values = np.issubdtype(values.dtype, np.integer)
    # An image holds colours: the value itself travels in the hover data.
    value_in_z = False if image else _unshifted_z(trace, values, discrete_range)
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
        smallest = min(_exact_dtypes([np.asarray(f.per_offset) for f in kept]), key=lambda t: t.itemsize) \
            if kept else None
        too_big = smallest is not None and base_chars + window.cells * len(kept) * smallest.itemsize * 4 // 3 > budget
        if not (too_big and optional):
            encoded = _encode([(f.label, cells(f.per_offset)) for f in kept])
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


# ---------------------------------------------------------------------------------------
# Large windows drawn in the browser


def _hex_palette(colours: Sequence[tuple[int, int, int]]) -> str:
    """Colours as one string of 6-digit hex triples (the compact form the canvas component reads)."""
    return "".join(f"{r:02x}{g:02x}{b:02x}" for r, g, b in colours)


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
    field instead of rows · cols (relviz.ui.show_toeplitz draws it on a canvas and computes the hover
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
            "palette": _hex_palette(self.palette), "colour": self.colour,
            "fields": [{"label": label, "format": fmt, "values": _json_numbers(values)}
                       for label, fmt, values in self.fields],
            "lines": list(self.lines), "value_label": self.value_label, "title": self.title,
            "height": self.height, "x_title": self.x_title, "y_title": self.y_title,
            "font": READABLE_FONT, "title_font": READABLE_TITLE,
        }


def _continuous_range(values: np.ndarray, zmid: float | None) -> tuple[float, float]:
    """The colour range of continuous values: their min and max, made symmetric about ``zmid`` if given."""
    zmin, zmax = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    if zmid is not None:
        half = max(zmax - zmid, zmid - zmin)
        zmin, zmax = zmid - half, zmid + half
    return zmin, zmax


def _palette_256(colorscale: str | Sequence) -> list[tuple[int, int, int]]:
    """256 colours sampled evenly along a plotly colour scale (a name or [[fraction, colour], ...])."""
    key = colorscale if isinstance(colorscale, str) else tuple((float(f), str(c)) for f, c in colorscale)
    return list(_sampled_palette(key))


@functools.lru_cache(maxsize=32)
def _sampled_palette(colorscale: str | tuple) -> tuple[tuple[int, int, int], ...]:
    """:func:`_palette_256`, cached: plotly's sampling takes ~10-40 ms, a slider move pays it otherwise."""
    scale = plotly.colors.get_colorscale(colorscale) if isinstance(colorscale, str) else colorscale
    return tuple(_rgb(c) for c in plotly.colors.sample_colorscale([list(p) for p in scale],
                                                                  list(np.linspace(0.0, 1.0, 256))))


def _band_colours(scale: Sequence, count: int) -> list[tuple[int, int, int]]:
    """The solid colour of each band of a discrete_colorscale of ``count`` values (the PNG's palette)."""
    return [_rgb(scale[2 * v][1]) for v in range(count)] if count > 1 else [_rgb(scale[0][1])]


def _levels(values: np.ndarray, zmin: float, zmax: float) -> np.ndarray:
    """Continuous values as 256 colour levels over [zmin, zmax]: round((value − zmin) / (zmax − zmin) · 255)."""
    span = zmax - zmin
    levels = np.rint((values.astype(np.float64) - zmin) / span * 255) if span > 0 else np.zeros(values.shape)
    return np.clip(levels, 0, 255).astype(np.uint8)


def _image_colours(strip: np.ndarray, discrete_range: tuple[int, int] | None, colorscale: str | list,
                   zmid: float | None) -> tuple[np.ndarray, list[tuple[int, int, int]], dict] | None:
    """(colour index per offset, palette, colour-bar description), as :func:`_image_figure` colours a
    window; None when a discrete range needs more than 256 colours."""
    if discrete_range is not None:
        lo, hi = discrete_range
        count = hi - lo + 1
        if count > 256:
            return None
        palette_name = colorscale if isinstance(colorscale, str) else DISCRETE_PALETTE
        palette = _band_colours(discrete_colorscale(count, palette_name), count)
        step = _tick_step(count - 1)
        ticks = [v for v in range(lo, hi + 1) if v % step == 0]  # round numbers of the true values
        colour = {"kind": "discrete", "lo": int(lo), "hi": int(hi), "tickvals": ticks,
                  "ticktext": [str(v).replace("-", "−") for v in ticks]}
        return (strip.astype(np.int64) - lo).astype(np.uint8), palette, colour
    zmin, zmax = _continuous_range(strip, zmid)
    return _levels(strip, zmin, zmax), _palette_256(colorscale), {"kind": "continuous", "zmin": zmin, "zmax": zmax}


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
    per_offset, window = _checked(per_offset, q_len, k_len, window)
    toeplitz_window(per_offset, q_len, k_len, row0=window.row0, col0=window.col0, rows=window.rows,
                    cols=window.cols)  # checks the window lies inside the matrix
    first = window.col0 - (window.row0 + window.rows - 1) + q_len - 1  # offset index of the bottom-left cell
    part = slice(first, first + window.rows + window.cols - 1)
    strip = np.ascontiguousarray(per_offset[part])
    colours = _image_colours(strip, discrete_range, colorscale, zmid)
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


def toeplitz_view(per_offset: np.ndarray, q_len: int, k_len: int, **options) -> ToeplitzFigure | ToeplitzImage:
    """What the app draws: a :class:`ToeplitzImage` for a window of at least IMAGE_MIN_CELLS cells whose
    colours fit 256 levels (drawn in the browser from its per-offset slices), else the plotly heatmap.

    Takes :func:`toeplitz_heatmap`'s arguments; only one of the two is built."""
    _, window = _checked(per_offset, q_len, k_len, options.get("window"))
    if window.cells >= IMAGE_MIN_CELLS:
        image = toeplitz_image(per_offset, q_len, k_len, **{k: v for k, v in options.items() if k != "budget"})
        if image is not None:
            return image
    return toeplitz_heatmap(per_offset, q_len, k_len, **options)


# ---------------------------------------------------------------------------------------
# Large windows as images


def _rgb(colour: str) -> tuple[int, int, int]:
    """'#rrggbb' or 'rgb(r, g, b)' (plotly's two spellings) as three 0..255 integers."""
    if colour.startswith("#"):
        return plotly.colors.hex_to_rgb(colour)
    return tuple(int(round(float(c))) for c in plotly.colors.unlabel_rgb(colour))


def _png(indices: np.ndarray, palette: list[tuple[int, int, int]]) -> str:
    """A palette PNG (one byte per cell, lossless) as a data URI."""
    from PIL import Image

    rows, cols = indices.shape
    picture = Image.frombytes("P", (cols, rows), np.ascontiguousarray(indices, dtype=np.uint8).tobytes())
    picture.putpalette([channel for colour in palette for channel in colour])
    out = io.BytesIO()
    picture.save(out, format="PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def decode_image_indices(source: str) -> np.ndarray:
    """The palette indices of an image trace's ``source`` PNG, [rows, cols] (tests and downloads)."""
    from PIL import Image

    data = base64.b64decode(source.split(",", 1)[1])
    picture = Image.open(io.BytesIO(data))
    if picture.mode != "P":
        raise ValueError(f"source must be a palette PNG; got mode {picture.mode}")
    return np.asarray(picture)


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
        palette = _band_colours(heat.colorscale, count)
        indices = (values.astype(np.int64) - lo).astype(np.uint8)
        bar = dict(z=[[0]], zmin=heat.zmin, zmax=heat.zmax)
        meta = {"image": {"kind": "discrete", "lo": int(lo)}}
    else:
        zmin, zmax = _continuous_range(values, zmid)
        palette = _palette_256(heat.colorscale)
        indices = _levels(values, zmin, zmax)
        bar = dict(z=[[zmin]], zmin=zmin, zmax=zmax)
        meta = {"image": {"kind": "continuous", "zmin": zmin, "zmax": zmax, "levels": 256}}
    image = go.Image(source=_png(indices, palette), x0=x0, dx=1, y0=y0, dy=1, meta=meta)
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
    encoded = _encode([("d_lo", d_lo), ("d_hi", d_hi), ("min", vmin), ("max", vmax)])
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
            "palette": _hex_palette(self.palette),
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
    per_offset, _ = _checked(per_offset, q_len, k_len, None)
    block = display_block(q_len, k_len, max_cells)
    pooled = toeplitz_pooled(per_offset, q_len, k_len, block)
    # block means lie within the values' range
    zmin, zmax = (float(v) for v in value_range) if value_range is not None else _continuous_range(per_offset, zmid)
    palette = _palette_256(colorscale)
    return ToeplitzOverviewImage(pooled, bool(np.issubdtype(per_offset.dtype, np.integer)), q_len, k_len, q_offset,
                                 window, tuple(palette), zmin, zmax, value_label, title, height)
