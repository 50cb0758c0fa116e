"""The one heatmap builder every page uses: readable colours, axis titles, hover on every cell.

Payload rules: colour values travel as float32 or unsigned integers (never
signed int64), hover fields as the smallest integer type that holds them, and no view
sends more than ``views.DISPLAY_MAX`` cells per side.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import plotly.colors
import plotly.graph_objects as go

if TYPE_CHECKING:  # imported where used: the landing page's figure (figures.intro) needs no numpy
    import numpy as np

#: Axis titles shared by every query × key matrix.
KEY_AXIS = "key position j"
QUERY_AXIS = "query position i"


#: Font sizes (px) that a projector at 1280 × 720 still shows readably at the back of a room.
READABLE_FONT = 15
READABLE_TITLE = 17


def readable(builder: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
    """Decorator for figure builders: applies :func:`make_readable` to the figure built."""
    @functools.wraps(builder)
    def build(*args, **kwargs) -> go.Figure:
        return make_readable(builder(*args, **kwargs))
    return build


def make_readable(figure: go.Figure) -> go.Figure:
    """Text at READABLE_FONT px, titles at READABLE_TITLE px, axis ticks and titles set explicitly
    (Streamlit's chart theme would otherwise draw them at 12 px, unreadable on a projector).
    Explicit larger sizes are kept. Changes and returns ``figure``."""
    if (figure.layout.font.size or 0) < READABLE_FONT:
        figure.layout.font.size = READABLE_FONT
    if figure.layout.title.text and (figure.layout.title.font.size or 0) < READABLE_TITLE:
        figure.layout.title.font.size = READABLE_TITLE
    figure.update_xaxes(tickfont_size=READABLE_FONT - 1, title_font_size=READABLE_FONT)
    figure.update_yaxes(tickfont_size=READABLE_FONT - 1, title_font_size=READABLE_FONT)
    figure.layout.legend.font.size = max(figure.layout.legend.font.size or 0, READABLE_FONT - 1)
    return figure


def readable_layout(layout: dict) -> dict:
    """:func:`make_readable` for a layout still held as a dict (figures built with ``_validate=False``,
    whose properties cannot be set afterwards). Explicit larger sizes are kept. Changes and returns ``layout``."""
    def at_least(holder: dict, size: int) -> None:
        font = holder.setdefault("font", {})
        font["size"] = max(font.get("size") or 0, size)

    at_least(layout, READABLE_FONT)
    title = layout.get("title")
    if isinstance(title, dict) and title.get("text"):
        at_least(title, READABLE_TITLE)
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            axis.setdefault("tickfont", {})["size"] = READABLE_FONT - 1
            axis_title = axis.get("title")
            if isinstance(axis_title, str):
                axis["title"] = axis_title = {"text": axis_title}
            if isinstance(axis_title, dict):
                axis_title.setdefault("font", {})["size"] = READABLE_FONT
    at_least(layout.setdefault("legend", {}), READABLE_FONT - 1)
    return layout


#: A chart in one of two columns at the narrowest screen the app is checked on (a projector's 1024 × 768 at 125 %:
#: 819 CSS px, a column ~235 px) holds ~30 characters of a READABLE_TITLE px bold title; one line of it takes
#: TITLE_LINE_PX. Plotly never wraps a title: longer ones ran off the chart ("…max_d") at 1024 × 768.
NARROW_TITLE_CHARS = 30
#: A chart in one of three columns there (~150 px) holds ~20 such characters, and a chart across the whole main area
#: (~490 px) ~48.
THIRD_TITLE_CHARS = 20
FULL_TITLE_CHARS = 48
TITLE_LINE_PX = 22
#: Plotly hangs a title of two or more lines ~15 px above the top edge it is anchored to (measured in Chromium:
#: anchored there with no pad its first line was cut off, and centred by plotly a third line fell on the plot):
#: this pad brings its top 6 px inside the figure.
TITLE_TOP_PAD = 21
#: One more line of an axis title at READABLE_FONT (px): what a figure grows by when an axis title too long for a
#: narrow column is written on two lines (plotly never wraps one either).
AXIS_LINE_PX = 20


#: Signs a line is never broken beside: "j − i" or "32 / 128" stays whole on one line.
_OPERATORS = frozenset("−-+=×·/≤≥<>…")


def wrap_words(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters, joined by plotly's ``<br>`` (a word
    longer than ``width`` keeps a line of its own; a lone sign keeps its neighbours on its line: "j<br>− i" read
    as two halves of nothing)."""
    words: list[str] = []
    for word in text.replace("<br>", " ").split(" "):
        if words and (word in _OPERATORS or words[-1].rsplit(" ", 1)[-1] in _OPERATORS):
            words[-1] += " " + word
        else:
            words.append(word)
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def narrow_title(layout: dict, *, lines: int = 2, chars: int = NARROW_TITLE_CHARS) -> dict:
    """The title of a chart drawn in a narrow column, wrapped to lines of at most ``chars`` characters and hung from
    the figure's top edge, in a top margin that holds at least ``lines`` lines (two charts side by side stay level;
    their titles start at one height); the height grows by what the margin grew, so the plot keeps its size.
    Changes and returns ``layout``."""
    title = layout.get("title")
    text = title.get("text", "") if isinstance(title, dict) else str(title or "")
    if not text:
        return layout
    # a line of its own already (a "<br><sup>" note) is wrapped alone; one with markup is kept whole
    wrapped = "<br>".join(line if "<" in line else wrap_words(line, chars) for line in text.split("<br>"))
    margin = layout.setdefault("margin", {})
    top = 16 + TITLE_LINE_PX * max(lines, wrapped.count("<br>") + 1)
    layout["height"] = layout.get("height", 450) + max(0, top - margin.get("t", 100))
    margin["t"] = top
    layout["title"] = {**(title if isinstance(title, dict) else {}), "text": wrapped, "x": 0, "xanchor": "left",
                       "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TITLE_TOP_PAD}}
    return layout


def narrow_figure_title(figure: go.Figure, **kwargs) -> go.Figure:
    """:func:`narrow_title` for a built figure. Changes and returns ``figure``."""
    layout = figure.layout
    figure.update_layout(narrow_title({"title": {"text": layout.title.text or ""}, "height": layout.height or 450,
                                       "margin": {"t": layout.margin.t if layout.margin.t is not None else 100}},
                                      **kwargs))
    return figure


#: Under a plot: what the x axis's tick labels and title take (px), and one row of a legend at READABLE_FONT − 1
#: (plotly spaces its entries ~31 px apart, measured in Chromium).
AXIS_BELOW_PX = 64
LEGEND_ROW_PX = 31


def legend_below_axis(layout: dict, *, rows: int, axis_lines: int = 1) -> dict:
    """A horizontal legend under the x axis's title, never over it: its top ``AXIS_BELOW_PX`` below the
    plot (and ``AXIS_LINE_PX`` more for each line of an axis title written on ``axis_lines``), in a bottom margin
    reserved for the axis and ``rows`` rows of entries.

    A legend at a fixed negative paper ``y`` sits a fraction of the plot's height below it, so on a short
    chart, or a narrow one whose entries wrap into more rows (plotly then grows the margin and shrinks the
    plot), it covered the axis title and scrolled. Here the margin already holds it, so the plot keeps
    its height and the fraction is exact. The figure grows by the rows. Changes and returns ``layout``."""
    margin = layout.setdefault("margin", {})
    axis = AXIS_BELOW_PX + (axis_lines - 1) * AXIS_LINE_PX
    bottom = axis + rows * LEGEND_ROW_PX + 8
    layout["height"] = layout.get("height", 450) + max(0, bottom - margin.get("b", 80))
    margin["b"] = bottom
    plot_px = layout["height"] - margin.get("t", 100) - bottom
    font = dict(layout.get("legend", {}).get("font", {}))
    layout["legend"] = dict(orientation="h", y=-axis / plot_px, yanchor="top", x=0, xanchor="left", font=font)
    return layout


#: An axis over at most this many whole-number positions gets a tick at each one (plotly's automatic
#: ticks would label −0.5, 0, 0.5: positions and offsets that do not exist).
WHOLE_TICKS_SPAN = 6


def _whole_number_run(values) -> bool:
    """Whether ``values`` (a list or a 1-D array) are whole numbers spanning at most WHOLE_TICKS_SPAN."""
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    whole = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v == round(v)
                for v in values)
    return bool(values) and whole and max(values) - min(values) <= WHOLE_TICKS_SPAN


def whole_number_ticks(data: Sequence[dict], layout: dict) -> dict:
    """Give each axis whose traces sit on a short run of whole numbers one tick per number.
    Changes and returns ``layout`` (a dict: figures built with ``_validate=False`` included)."""
    for trace in data:
        for letter in ("x", "y"):
            values = trace.get(letter)
            if values is None or isinstance(values, (dict, str)) or not _whole_number_run(values):
                continue
            name = letter + "axis" + str(trace.get(letter + "axis", letter))[1:]
            layout.setdefault(name, {}).update(tick0=0, dtick=1)
    return layout


#: Pixels a colour bar laid under the plot takes at the bottom of the figure (title, bar, ticks)...
COLOUR_BAR_BELOW = 66
#: ... under the x axis's ticks and title, which take this many pixels below the plot at the readable fonts.
X_AXIS_BELOW = 66


def colour_bar_below(colorbar: dict, *, height: int) -> tuple[dict, dict]:
    """``colorbar`` laid flat in the bottom COLOUR_BAR_BELOW pixels of a figure ``height`` px tall, and
    its title as an annotation just above it: (colorbar, annotation for layout.annotations). The
    figure's bottom margin must be X_AXIS_BELOW + COLOUR_BAR_BELOW, fixed (margin autoexpand off).

    In a narrow column (a third of the page) an upright bar and its labels take ~70 px of ~260 across,
    so a square matrix beside it is squeezed; under the plot the bar spans the plot's width instead.
    The title is an annotation because plotly.js set a flat bar's own title onto the bar itself
    (its gap depends on the fonts in play). Both are placed in pixels from the figure's bottom.
    """
    label = (colorbar.get("title") or {}).get("text", "")
    colorbar = colorbar | fewer_ticks(colorbar.get("tickvals"), colorbar.get("ticktext"))
    bar_top = COLOUR_BAR_BELOW - 24  # px above the figure's bottom; the title takes the 20 px above
    bar = colorbar | dict(orientation="h", x=0.5, xanchor="center", xref="paper", y=bar_top / height,
                          yanchor="top", yref="container", ypad=0, len=1.0, lenmode="fraction", thickness=10,
                          title=dict(text=""), tickfont=dict(size=READABLE_FONT - 1))
    title = dict(text=label, x=0.5, xref="paper", xanchor="center", y=0, yref="paper", yanchor="bottom",
                 yshift=bar_top - X_AXIS_BELOW - COLOUR_BAR_BELOW, showarrow=False, font=dict(size=READABLE_FONT))
    return bar, title


#: the narrowest flat colour bar: under a square matrix in a third of a 1024 px page (~87 px seen)
NARROW_BAR_PX = 85
#: a tick label's character at READABLE_FONT − 1 px (a digit or "−"); one more character's gap between labels
TICK_CHAR_PX = 8


def fewer_ticks(tickvals: Sequence | None, ticktext: Sequence | None) -> dict:
    """An integer colour bar's ticks thinned to fit NARROW_BAR_PX side by side: {tickvals, ticktext}, or {}
    where they fit already or are not integer labels. Seven labels −3 … 3 under a 10 × 10 matrix in a third
    of 1024 px overlapped; the ticks kept are the multiples of a coarser step, the first and last kept where a
    step that small allows (−3, 0, 3), so relviz.figures.toeplitz_payload's re-derivation (v % step) agrees."""
    if not tickvals or not ticktext or len(tickvals) != len(ticktext) or len(tickvals) < 3:
        return {}
    try:
        true = [int(str(t).replace("−", "-")) for t in ticktext]
    except ValueError:
        return {}

    def width(step: int) -> int:  # px the labels of the multiples of step take side by side
        return sum((len(str(t)) + 1) * TICK_CHAR_PX for t, v in zip(ticktext, true) if v % step == 0)

    step0 = true[1] - true[0]
    if width(step0) <= NARROW_BAR_PX:
        return {}
    fitting = [s for s in (m * step0 for m in range(2, len(true) + 1))
               if sum(v % s == 0 for v in true) >= 2 and width(s) <= NARROW_BAR_PX]
    if not fitting:
        return {}
    ends = [s for s in fitting if true[0] % s == 0 and true[-1] % s == 0 and s <= 2 * fitting[0]]
    step = (ends or fitting)[0]
    kept = [i for i, v in enumerate(true) if v % step == 0]
    return dict(tickvals=[tickvals[i] for i in kept], ticktext=[ticktext[i] for i in kept])


def diagonal_counts(q_len: int, k_len: int) -> np.ndarray:
    """How many cells each diagonal (entry t of a per-offset vector, offset −(q_len − 1) first) has."""
    import numpy as np

    t = np.arange(q_len + k_len - 1)
    return np.minimum.reduce([t + 1, np.full_like(t, q_len), np.full_like(t, k_len), q_len + k_len - 1 - t])


def compact_ints(values: np.ndarray) -> np.ndarray:
    """The smallest signed/unsigned integer dtype that holds ``values`` (payload size)."""
    import numpy as np

    values = np.asarray(values)
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return values.astype(dtype)
    return values.astype(np.float64)


#: The colours of integer maps (indices, buckets, offsets as classes): Viridis, whose lightness rises
#: steadily, so neighbouring values differ in colour on screen and stay in order in a greyscale print
#: (a rainbow such as Turbo is dark at both ends and loses the order).
DISCRETE_PALETTE = "Viridis"


def discrete_colorscale(num_values: int, palette: str = DISCRETE_PALETTE) -> list[list]:
    """A stepped colour scale: each integer 0..num_values−1 gets one solid colour band (a new list each call;
    the bands are computed once per palette and count, since plotly looks a named scale up afresh each time)."""
    return [list(stop) for stop in _discrete_stops(max(int(num_values), 1), palette)]


@functools.lru_cache(maxsize=256)
def _discrete_stops(num_values: int, palette: str) -> tuple[tuple[float, str], ...]:
    if num_values == 1:
        colour = plotly.colors.sample_colorscale(palette, [0.5])[0]
        return ((0.0, colour), (1.0, colour))
    colours = plotly.colors.sample_colorscale(palette, [v / (num_values - 1) for v in range(num_values)])
    scale: list[tuple[float, str]] = []
    for v, colour in enumerate(colours):
        scale.append((v / num_values, colour))
        scale.append(((v + 1) / num_values, colour))
    return tuple(scale)


def _tick_step(span: int, ticks: int = 12) -> int:
    """A 1-2-5 step that puts at most ~``ticks`` labels on an integer colour bar."""
    step, multipliers = 1, (2, 2.5, 2)  # 1, 2, 5, 10, 20, 50, ...
    k = 0
    while span / step > ticks:
        step = int(step * multipliers[k % 3])
        k += 1
    return step


def matrix_heatmap(
    z: np.ndarray,
    *,
    x: Sequence[int] | np.ndarray,
    y: Sequence[int] | np.ndarray,
    hover: Mapping[str, np.ndarray],
    value_label: str,
    title: str = "",
    discrete_range: tuple[int, int] | None = None,
    colorscale: str | list = "Viridis",
    zmid: float | None = None,
    x_title: str = KEY_AXIS,
    y_title: str = QUERY_AXIS,
    height: int = 430,
    text: np.ndarray | None = None,
    text_size: int | None = None,
    hover_value: bool = False,
    validate: bool = True,
) -> go.Figure:
    """A query × key heatmap with query 0 on top, a colour bar, and hover on every cell.

    ``hover`` maps a label to an array shaped like ``z``; every cell's hover shows i, j and
    those fields in order (put "j − i" first). ``discrete_range=(lo, hi)`` draws integer
    values lo..hi as solid colour bands (indices, buckets); z is then shifted to start at 0
    so it travels as unsigned integers.

    ``text`` (an array of strings shaped like ``z``) writes a label inside every cell: only
    for small matrices (the labels travel as JSON strings). ``hover_value=True`` adds the
    colour value itself to the hover (after the ``hover`` fields), so a float matrix need
    not be sent twice; it needs a continuous scale (discrete_range shifts z).

    ``validate=False`` skips plotly's per-property validation (10-20 ms per figure, the bulk
    of a rerun on a page with several heatmaps); the figure is the same, built from the same
    dicts. Tests build with validation on, so an invalid property still fails there.
    """
    trace, frame = matrix_heatmap_parts(z, x=x, y=y, hover=hover, value_label=value_label, title=title,
                                        discrete_range=discrete_range, colorscale=colorscale, zmid=zmid,
                                        x_title=x_title, y_title=y_title, height=height, text=text,
                                        text_size=text_size, hover_value=hover_value, expand=not validate)
    return heatmap_figure(trace, validate=validate, **frame)


def matrix_heatmap_parts(
    z: np.ndarray,
    *,
    x: Sequence[int] | np.ndarray,
    y: Sequence[int] | np.ndarray,
    hover: Mapping[str, np.ndarray],
    value_label: str,
    title: str = "",
    discrete_range: tuple[int, int] | None = None,
    colorscale: str | list = "Viridis",
    zmid: float | None = None,
    x_title: str = KEY_AXIS,
    y_title: str = QUERY_AXIS,
    height: int = 430,
    text: np.ndarray | None = None,
    text_size: int | None = None,
    hover_value: bool = False,
    expand: bool = True,
) -> tuple[dict, dict]:
    """:func:`matrix_heatmap`'s heatmap trace (a dict) and the keyword arguments of its frame
    (:func:`heatmap_figure` / :func:`heatmap_parts`): for a page that sends the figure's dicts as they are
    (relviz.app.display.prepared). ``expand``: a named colour scale as validation expands it."""
    import numpy as np

    z = np.asarray(z)
    trace_args: dict = {}
    if hover_value and discrete_range is not None:
        raise ValueError("hover_value needs a continuous colour scale: with discrete_range, z is shifted; "
                         "pass the value as a hover field instead")
    if discrete_range is not None:
        z_colour = compact_ints(z - discrete_range[0])
        trace_args.update(discrete_colour_args(discrete_range, colorscale, value_label))
    else:
        z_colour = z.astype(np.float32)
        if isinstance(colorscale, str) and expand:
            colorscale = named_colorscale(colorscale)  # what validation would expand it to
        trace_args.update(colorscale=colorscale, colorbar=dict(title=dict(text=value_label, side="right"),
                                                               thickness=14))
        if zmid is not None:
            trace_args["zmid"] = zmid

    fields = list(hover.items())
    lines = [f"{y_title.split()[-1]} = %{{y}}", f"{x_title.split()[-1]} = %{{x}}"]
    if fields:
        stacked = np.stack([np.broadcast_to(np.asarray(values), z.shape) for _, values in fields], axis=-1)
        all_ints = all(np.issubdtype(np.asarray(v).dtype, np.integer) for _, v in fields)
        trace_args["customdata"] = compact_ints(stacked) if all_ints else stacked.astype(np.float32)
        for k, (label, values) in enumerate(fields):
            fmt = "" if np.issubdtype(np.asarray(values).dtype, np.integer) else ":.4g"
            lines.append(f"{label} = %{{customdata[{k}]{fmt}}}")
    if hover_value:
        lines.append(f"{value_label} = %{{z:.4g}}")
    if text is not None:
        text = np.asarray(text)
        if text.shape != z.shape:
            raise ValueError(f"text must have the shape of z {z.shape}; got {text.shape}")
        trace_args.update(text=text.astype(str), texttemplate="%{text}")
        if text_size is not None:
            trace_args["textfont"] = dict(size=text_size)
    trace = dict(type="heatmap", z=z_colour, x=np.asarray(x), y=np.asarray(y),
                 hovertemplate="<br>".join(lines) + "<extra></extra>", **trace_args)
    return trace, dict(title=title, x_title=x_title, y_title=y_title, height=height)


def named_colorscale(name: str) -> list[list]:
    """A named colour scale ('RdBu', 'Viridis_r') as plotly's validation expands it, for figures built
    without validation: stop i at exactly i / (n − 1) (plotly.colors.get_colorscale's stops differ in the last
    bit, 0.30000000000000004 for 0.3). Never the name itself: plotly.js's 'RdBu' runs the other way."""
    colours = _named_colours(name)
    return [[i / (len(colours) - 1), colour] for i, colour in enumerate(colours)]


@functools.lru_cache(maxsize=64)
def _named_colours(name: str) -> tuple[str, ...]:
    return tuple(colour for _, colour in plotly.colors.get_colorscale(name))


def discrete_colour_args(discrete_range: tuple[int, int], colorscale: str | list, value_label: str) -> dict:
    """A heatmap trace's colour properties for integer values lo..hi drawn as solid bands; the trace's z
    must hold value − lo (0..hi − lo)."""
    lo, hi = discrete_range
    count = hi - lo + 1
    step = _tick_step(count - 1)
    # ticks at round values of the true values (−60, −40, …), not every step from lo (−63, −43, …); as z holds
    # value − lo, a tick's position is its value − lo
    ticks = [v - lo for v in range(lo, hi + 1) if v % step == 0]
    return dict(zmin=-0.5, zmax=count - 0.5,
                colorscale=discrete_colorscale(count, colorscale if isinstance(colorscale, str) else DISCRETE_PALETTE),
                colorbar=dict(title=dict(text=value_label, side="right"), tickvals=ticks,
                              ticktext=[str(t + lo) for t in ticks], thickness=14))


def heatmap_figure(trace: dict, *, title: str = "", x_title: str = KEY_AXIS, y_title: str = QUERY_AXIS,
                   height: int = 430, validate: bool = True) -> go.Figure:
    """A figure around one heatmap trace (a dict): query 0 on top, readable axis titles and fonts.
    :func:`matrix_heatmap` builds the trace from arrays; a small picture may build it from lists."""
    data, layout = heatmap_parts(trace, title=title, x_title=x_title, y_title=y_title, height=height)
    return go.Figure({"data": data, "layout": layout}, _validate=validate)


def heatmap_parts(trace: dict, *, title: str = "", x_title: str = KEY_AXIS, y_title: str = QUERY_AXIS,
                  height: int = 430) -> tuple[list[dict], dict]:
    """:func:`heatmap_figure`'s trace and layout dicts, without building the figure."""
    layout: dict = dict(
        height=height, margin=dict(l=60, r=10, t=40 if title else 10, b=50), font=dict(size=READABLE_FONT),
        xaxis=dict(title=dict(text=x_title, font=dict(size=READABLE_FONT)), side="bottom", constrain="domain",
                   tickfont=dict(size=READABLE_FONT - 1)),
        yaxis=dict(title=dict(text=y_title, font=dict(size=READABLE_FONT)), autorange="reversed",
                   tickfont=dict(size=READABLE_FONT - 1)),
    )
    if title:
        layout["title"] = dict(text=title, x=0, xanchor="left", font=dict(size=READABLE_TITLE))
    return [trace], whole_number_ticks([trace], layout)
