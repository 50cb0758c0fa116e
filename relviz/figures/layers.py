"""Figures of a real model layer by layer: the strip (one cell per layer per row) and a layer's views.

``view_figure`` dispatches on the kind of data (relviz.layer_strip), never on a mechanism, scheme or
family name; the strip picks colours by a mechanism's ``legend`` (its colour group), one shade per
distinct label in that group (two RoPE bases: two blues).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from relviz.figures.attention import structure_heatmap
from relviz.figures.heatmap import AXIS_LINE_PX, READABLE_FONT, legend_below_axis, wrap_words
from relviz.figures.parameters import bias_curve_figure
from relviz.figures.parameters import view_figure as parameter_figure
from relviz.figures.parameters import view_parts as parameter_parts
from relviz.figures.rope import wavelength_figure
from relviz.layer_strip import Strip
from relviz.mechanisms.view_kinds import KeysSeen, Note, SinkShare, TemperatureCurve, Wavelengths
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, SimilarityMatrix, VectorNorms

__all__ = ["strip_figure", "selected_bars", "view_figure", "side_by_side", "PALETTES",
           "STRIP_ROW_HEIGHT", "COMPARE_LEGEND_CHARS", "log_decades"]

#: legend (a mechanism's colour group) -> shades for its distinct labels
PALETTES: dict[str, tuple[str, ...]] = {
    "mixer": ("#d9d9d9", "#969696"),
    "no_attention": ("#e7298a", "#7570b3", "#d95f02", "#66a61e", "#a6761d"),
    "rotation": ("#1f77b4", "#6baed6", "#08306b", "#9ecae1", "#3182bd"),
    "none": ("#bdbdbd",),
    "bias": ("#ff7f0e", "#fdae6b", "#a63603"),
    "absolute": ("#9467bd", "#c5b0d5"),
    "pattern": ("#c7e9c0", "#2ca02c", "#00441b", "#74c476", "#238b45"),
    "sinks": ("#d62728", "#fc9272"),
    "scale": ("#bcbd22", "#dbdb8d"),
}
_OTHER = ("#8c564b", "#c49c94", "#e377c2", "#7f7f7f")
STRIP_ROW_HEIGHT = 26


def _shade(legend: str, index: int) -> str:
    palette = PALETTES.get(legend, _OTHER)
    return palette[index % len(palette)]


def strip_figure(strip: Strip, *, selected: int | None = None, title: str = "") -> go.Figure:
    """One bar per layer per row, coloured by what the layer applies; hover says it in words.

    Bars (not a heatmap) so that a click selects a layer (Streamlit's point selection), and so that
    126 layers and 2 layers both fill the width."""
    figure = go.Figure()
    if strip.caveat:       # never a silent claim: a strip read from config fields alone says so on its face
        title = f"{title} · {strip.caveat}" if title else strip.caveat
    rows = list(strip.rows)
    n = strip.layers
    shades: dict[tuple[str, str], str] = {}
    per_legend: dict[str, int] = {}
    for cell in strip.cells:
        key = (cell.row, cell.label)
        if key not in shades:
            shades[key] = _shade(cell.legend, per_legend.get(cell.legend, 0))
            per_legend[cell.legend] = per_legend.get(cell.legend, 0) + 1
    for (row, label), colour in shades.items():
        cells = [c for c in strip.cells if c.row == row and c.label == label]
        base = len(rows) - 1 - rows.index(row)
        types = [strip.layer_types[c.layer] if c.layer < len(strip.layer_types) and strip.layer_types[c.layer]
                 else "" for c in cells]
        figure.add_trace(go.Bar(
            x=[c.layer for c in cells], y=[0.9] * len(cells), base=[base + 0.05] * len(cells),
            width=[1.0 if n > 64 else 0.88] * len(cells),
            marker=dict(color=colour, line=dict(width=0)), name=f"{row}: {label}", legendgroup=row,
            customdata=np.array([[c.describe, t] for c, t in zip(cells, types)], dtype=object),
            hovertemplate="layer %{x} %{customdata[1]}<br>%{customdata[0]}<extra>" + label + "</extra>"))
    if selected is not None and 0 <= selected < n:
        figure.add_shape(_selected_shape(selected, len(rows)))
    # the legend sits above the bars: at 1280 px about 3 short entries a line, 2 long ones
    per_line = 3 if max(len(f"{r}: {lab}") for r, lab in shades) <= 24 else 2
    top = 14 + 20 * -(-len(shades) // per_line) + (22 if title else 0)
    step = 1 if n <= 40 else (2 if n <= 64 else (8 if n <= 160 else 16))
    figure.update_xaxes(range=[-0.5, n - 0.5], tickmode="array", tickvals=list(range(0, n, step)),
                        title_text=f"{strip.stack} layer (of {n})", showgrid=False, fixedrange=True)
    figure.update_yaxes(range=[0, len(rows)], tickmode="array", tickvals=[len(rows) - 0.5 - k for k in range(len(rows))],
                        ticktext=rows, showgrid=False, fixedrange=True)
    figure.update_layout(barmode="overlay", bargap=0.12 if n <= 64 else 0.0, height=70 + top + STRIP_ROW_HEIGHT * len(rows),
                         margin=dict(l=80, r=10, t=top, b=34), clickmode="event+select",
                         title=dict(text=title, x=0, xref="container", y=1, yref="container", yanchor="top",
                                    pad=dict(t=4, l=4), font=dict(size=13)) if title else None,
                         # the legend is a key, not a switch: a hidden trace would also shift the bars the page
                         # outlines by their place in the drawing (selected_bars)
                         legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, font=dict(size=11),
                                     itemclick=False, itemdoubleclick=False),
                         dragmode=False)
    return figure


def _selected_shape(layer: int, rows: int) -> dict:
    """The outline of the selected layer's column (``strip_figure(selected=)``, the notebook's; the page outlines
    its layer in the browser instead: ``selected_bars``)."""
    return dict(type="rect", x0=layer - 0.5, x1=layer + 0.5, y0=0, y1=rows, xref="x", yref="y",
                line=dict(color="#111", width=2), fillcolor="rgba(0,0,0,0)", layer="above")


def selected_bars(strip: dict, layer: int) -> list[tuple[int, int]]:
    """(trace, point) of each of ``layer``'s cells in a strip figure's dict (``Figure.to_dict()``): plotly.js draws
    trace t's point p as the p-th bar of the t-th bar group, so the page can outline the layer in the browser while
    the figure it sends stays the same for every layer (an unchanged figure is not drawn again)."""
    return [(t, p) for t, trace in enumerate(strip["data"]) for p, x in enumerate(trace["x"]) if x == layer]


# ---------------------------------------------------------------------------------------
# A layer's views


def _wavelengths(view: Wavelengths) -> go.Figure:
    return wavelength_figure(view.inv_freq, view.plain, length=view.length, original=view.original,
                             rule=view.rule, height=340)


def _keys_seen(view: KeysSeen) -> go.Figure:
    """Left: keys seen against the query position (log–log, the whole context). Right: the band of offsets
    j − i the first queries may use (linear), where windows and chunks show their edges."""
    # two panels side by side, laid out by hand (make_subplots costs ~30 ms a figure; a layer move rebuilds it)
    figure = go.Figure(layout=dict(
        xaxis=dict(domain=[0, 0.47], anchor="y"), yaxis=dict(anchor="x"),
        xaxis2=dict(domain=[0.6, 1], anchor="y2"), yaxis2=dict(anchor="x2"),
        # each panel's title starts at its panel's left edge: centred, the two ran into each other in half a page
        # (Your model's compare mode)
        annotations=[dict(text=text, x=x, xref="paper", xanchor="left", y=1.0, yref="paper", yanchor="bottom",
                          showarrow=False, font=dict(size=13)) for text, x in (("keys seen per query", 0.0),
                                                                               # "allowed offsets j − i" ran 18 px
                                                                               # off the right in half of 1024 px
                                                                               ("allowed j − i", 0.6))]))
    x = view.positions + 1
    figure.add_trace(go.Scatter(
        x=x, y=view.count, mode="lines", line=dict(color="#2ca02c", width=2), name="keys seen",
        customdata=np.stack([view.positions, view.back, view.ahead], -1), xaxis="x", yaxis="y",
        hovertemplate="query i = %{customdata[0]:,}<br>keys seen = %{y:,}<br>offsets %{customdata[1]:,} … "
                      "%{customdata[2]:,}<extra></extra>"))
    figure.add_trace(go.Scatter(x=[1, view.length], y=[1, view.length], mode="lines", name="causal, no limit",
                                line=dict(color="#bbb", dash="dot", width=1), hoverinfo="skip", xaxis="x", yaxis="y"))
    shapes = []
    most = view.cap if view.cap is not None else None if view.reach is None else view.reach + 1   # keys, at most
    if most is not None:
        shapes.append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=most, y1=most,
                           line=dict(color="#555", dash="dash", width=1)))
    # the band: exact edges between breakpoints, over the first queries
    span = view.reach * 4 if view.reach else 64
    shown = int(min(view.length, max(span, 16)))
    i = np.arange(shown, dtype=np.int64)
    if view.sampled or _sawtooth(view):
        back, ahead = _band_exact(view, i)
    else:
        back, ahead = np.interp(i, view.positions, view.back), np.interp(i, view.positions, view.ahead)
    # only the corners travel: the lines through them are the band at every query (a chunk of 8192 sent 32,768
    # points per edge, 0.4 MB, for four teeth: the browser parsed and filled them on every layer move)
    i, back, ahead = (values[corners(back, ahead)] for values in (i, back, ahead))
    figure.add_trace(go.Scatter(x=i, y=ahead, mode="lines", line=dict(color="#2ca02c", width=1), xaxis="x2",
                                yaxis="y2", hovertemplate="query %{x}<br>farthest ahead %{y}<extra></extra>"))
    figure.add_trace(go.Scatter(x=i, y=back, mode="lines", line=dict(color="#2ca02c", width=1), fill="tonexty",
                                fillcolor="rgba(44,160,44,0.35)", name="allowed offsets", xaxis="x2", yaxis="y2",
                                hovertemplate="query %{x}<br>farthest back %{y}<extra></extra>"))
    figure.update_layout(
        # powers of ten only: under three decades (a 64-position model) plotly labels 2 … 9 as well, and the
        # labels by 1 ran into each other; past five decades every hundredfold across half a panel
        xaxis=dict(type="log", title_text="query position i + 1", dtick=2 if view.length > 10 ** 5 else 1),
        yaxis=dict(type="log", title_text="keys seen", dtick=1),
        # the right panel's y axis has no title: its panel title says j − i, and beside tick labels like −8000 a
        # title sat over the left panel's curve in half a page (Your model's compare mode)
        # two lines: on one, it ran 15 px off either side of its panel in half of 1024 px (the compare mode)
        xaxis2=dict(title_text="query i<br>(the first ones)"), yaxis2=dict(title_text=""),
        shapes=shapes, height=340 + AXIS_LINE_PX, margin=dict(l=60, r=10, t=40, b=45 + AXIS_LINE_PX), showlegend=False)
    return figure


def _sawtooth(view: KeysSeen) -> bool:
    """Whether the band has jumps (chunks): linear interpolation between breakpoints would draw ramps."""
    return bool(np.any(np.diff(view.positions) == 1))


def corners(*series: np.ndarray) -> np.ndarray:
    """Indices of the points a straight-line plot of ``series`` (over evenly spaced x) needs: the ends and every
    point where one of them bends. The points left out lie exactly on the segment between the kept neighbours
    (their second difference is 0), so the lines drawn are the same; hover then names the corners only."""
    count = len(series[0])
    keep = np.zeros(count, dtype=bool)
    if count:
        keep[[0, -1]] = True
    for values in series:
        keep[1:-1] |= np.diff(np.asarray(values), 2) != 0
    return np.flatnonzero(keep)


def _band_exact(view: KeysSeen, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band at every query in ``i`` from the chunk breakpoints (each chunk restarts at offset 0)."""
    starts = view.positions[view.back == 0]
    start = starts[np.searchsorted(starts, i, side="right") - 1]
    return -(i - start), np.zeros_like(i)


def _temperature(view: TemperatureCurve) -> go.Figure:
    figure = go.Figure(go.Scatter(
        x=view.positions + 1, y=view.factors, mode="lines", line=dict(color="#bcbd22", width=2, shape="hv"),
        name="factor", customdata=view.positions,
        hovertemplate="from query position %{customdata:,}<br>factor ×%{y:.4f}<extra></extra>"))
    figure.add_hline(y=1.0, line=dict(color="#999", dash="dot", width=1))
    figure.update_xaxes(type="log", title_text="query position + 1")
    figure.update_yaxes(title_text="factor on the query")
    figure.update_layout(height=320, margin=dict(l=60, r=10, t=10, b=45), showlegend=False)
    return figure


def _sink_share(view: SinkShare) -> go.Figure:
    figure = go.Figure()
    for k, label in enumerate(view.labels):
        figure.add_trace(go.Scatter(
            x=view.positions + 1, y=view.share[k], mode="lines", name=label,
            line=dict(width=2 if view.illustrative else 1, dash="dash" if view.illustrative else "solid"),
            customdata=view.keys, hovertemplate="query position %{x:,}<br>keys seen %{customdata:,}<br>"
                                                "sink share %{y:.3f}<extra>" + label + "</extra>"))
    figure.update_xaxes(type="log", title_text="query position + 1")
    figure.update_yaxes(range=[0, 1], title_text="share of the row the sink takes")
    # the legend under the axis title, two entries a row: four entries at 10 px above the plot crowded it
    shown = len(view.labels) <= 8
    rows = -(-len(view.labels) // 2) if shown else 0
    figure.update_layout(**legend_below_axis(dict(height=320 + SINK_LEGEND_ROW_PX * rows,
                                                  margin=dict(l=60, r=10, t=10, b=45),
                                                  legend=dict(font=dict(size=READABLE_FONT - 1))), rows=rows),
                         showlegend=shown)
    return figure


#: The sink chart grows by this much per row of legend entries (px), so the plot keeps its height.
SINK_LEGEND_ROW_PX = 24


_FIGURES: dict[type, Callable[..., go.Figure]] = {
    Wavelengths: _wavelengths, KeysSeen: _keys_seen, TemperatureCurve: _temperature, SinkShare: _sink_share,
    PositionStructure: structure_heatmap,     # its first head (the Live attention page picks the head)
}
#: the kinds whose figure shades what training never reached, when the training length is known
_TRAINED: dict[type, Callable[..., go.Figure]] = {
    BiasCurve: bias_curve_figure, VectorNorms: parameter_figure, SimilarityMatrix: parameter_figure,
}


def view_figure(view, *, train_length: int | None = None) -> go.Figure | None:
    """The figure of one layer view; None for a Note (words only). ``train_length``: a toy model's training length
    (the Live attention page), shaded where a kind of view can show it; None for a read model (Your model)."""
    if isinstance(view, Note):
        return None
    for kind, build in _FIGURES.items():
        if isinstance(view, kind):
            return build(view)
    for kind, build in _TRAINED.items():
        if isinstance(view, kind):
            return build(view, train_length=train_length)
    raise ValueError(f"no figure for a {type(view).__name__}")


def view_parts(view, *, train_length: int | None = None) -> tuple[list[dict], dict] | None:
    """:func:`view_figure`'s trace and layout dicts where the kind is drawn from dicts (the trained kinds,
    relviz.figures.parameters), for a page that sends them as they are (Live attention); None for the others."""
    if isinstance(view, tuple(_TRAINED)):
        return parameter_parts(view, train_length=train_length)
    return None



# ---------------------------------------------------------------------------------------
# Two models side by side (Your model's compare mode: half a page each)

#: A legend entry in half a page wraps after about this many characters (11 px text, ~560 px wide).
COMPARE_LEGEND_CHARS = 44


def side_by_side(left: list, right: list) -> tuple[list, list]:
    """[(view, figure or None)] of two models, made comparable: a view of one kind on both sides gets the
    same y range on each of its axes (the union of both sides' data), log axes tick at powers of ten only,
    and a legend moves under the plot, its long entries wrapped, so half a page holds it.

    The figures are copies (the page caches the originals); views of a kind only one side has, and
    figures that are not line charts (heatmaps), keep their own axes."""
    left = [(v, None if f is None else go.Figure(f)) for v, f in left]
    right = [(v, None if f is None else go.Figure(f)) for v, f in right]
    for _, figure in left + right:
        if figure is not None:
            _fit_half_page(figure)
    for view, figure in left:
        twins = [f for v, f in right if type(v) is type(view) and f is not None]
        if figure is not None and len(twins) == 1 and _line_chart(figure) and _line_chart(twins[0]):
            _share_y(figure, twins[0])
    return left, right


def _line_chart(figure: go.Figure) -> bool:
    return all(trace.type == "scatter" for trace in figure.data)


def _y_axes(figure: go.Figure) -> list[str]:
    """The y axes that carry data, as trace references ('y', 'y2')."""
    return sorted({trace.yaxis or "y" for trace in figure.data})


def _y_values(figure: go.Figure, axis: str, log: bool) -> np.ndarray:
    """Every finite y on ``axis``: the traces' data and the horizontal lines drawn across it."""
    values = [np.asarray(trace.y, dtype=np.float64).ravel() for trace in figure.data
              if (trace.yaxis or "y") == axis and trace.y is not None]
    values += [np.array([shape.y0, shape.y1], dtype=np.float64) for shape in figure.layout.shapes
               if shape.yref == axis and shape.y0 is not None and shape.y1 is not None]
    joined = np.concatenate(values) if values else np.zeros(0)
    joined = joined[np.isfinite(joined)]
    return joined[joined > 0] if log else joined


def _axis(figure: go.Figure, name: str) -> dict:
    return figure.layout.to_plotly_json().get(name, {})


def _share_y(one: go.Figure, other: go.Figure) -> None:
    """The same y range on both figures' matching axes (changes both)."""
    for axis in set(_y_axes(one)) & set(_y_axes(other)):
        name = "yaxis" + axis[1:]
        mine, theirs = _axis(one, name), _axis(other, name)
        if mine.get("range") is not None and list(mine.get("range")) == list(theirs.get("range") or []):
            continue  # already fixed and equal (a share of the row: 0 … 1)
        log = "log" in (mine.get("type"), theirs.get("type"))
        values = np.concatenate([_y_values(one, axis, log), _y_values(other, axis, log)])
        if values.size == 0:
            continue
        low, high = (np.log10(values.min()), np.log10(values.max())) if log else (values.min(), values.max())
        pad = 0.06 * (high - low) if high > low else (0.3 if log else max(abs(high) * 0.1, 0.5))
        for figure in (one, other):
            figure.update_layout({name: dict(range=[float(low - pad), float(high + pad)], autorange=False)})


def _fit_half_page(figure: go.Figure) -> None:
    """Powers of ten on log axes (1, 2, 5 between them crowded half a page); the legend under the plot."""
    for name, axis in figure.layout.to_plotly_json().items():
        if name.startswith(("xaxis", "yaxis")) and axis.get("type") == "log":
            # a panel a third of half a page wide holds about five labels: every hundredfold past that
            step = 2 if name.startswith("x") and log_decades(figure, name) > 5 else 1
            figure.update_layout({name: dict(dtick=step, tickangle=0, exponentformat="SI",
                                             minor=dict(ticks="", showgrid=False))})
    if figure.layout.showlegend is False:
        return
    entries = [trace for trace in figure.data if trace.name and trace.showlegend is not False]
    if not entries or (figure.layout.showlegend is None and len(entries) < 2):
        return
    for trace in entries:
        trace.name = wrap_words(trace.name, COMPARE_LEGEND_CHARS)
    if figure.layout.legend.y is not None and figure.layout.legend.y < 0:
        return  # already under the plot (the sink share's)
    rows = sum(trace.name.count("<br>") + 1 for trace in entries)
    layout = figure.layout.to_plotly_json()
    layout.setdefault("legend", {})["orientation"] = "v"
    legend_below_axis(layout, rows=rows)
    layout["legend"]["orientation"] = "v"
    figure.update_layout(height=layout["height"], margin=layout["margin"], legend=layout["legend"])


def log_decades(figure: go.Figure, name: str) -> float:
    """How many powers of ten the positive data on axis ``name`` ('xaxis', 'yaxis2') spans."""
    ref, coordinate = name[0] + name[5:], name[0]
    values = [np.asarray(getattr(trace, coordinate), dtype=np.float64).ravel() for trace in figure.data
              if (getattr(trace, coordinate + "axis") or coordinate) == ref and getattr(trace, coordinate) is not None]
    joined = np.concatenate(values) if values else np.zeros(0)
    joined = joined[np.isfinite(joined) & (joined > 0)]
    return float(np.log10(joined.max() / joined.min())) if joined.size else 0.0
