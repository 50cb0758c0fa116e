"""Figures of position in images and video: maps laid out as the image (one query patch's row), maps
over the offset plane (Δh, Δw), a window's pair matrix, the pairs each axis owns, Swin v2's coordinates and
M-RoPE's three rows of ids.

Every builder takes plain arrays (relviz.show_vision computes them) and sends them as float32 or the
smallest unsigned integers (figures.heatmap's payload rules); no map here has more than 127 × 127 cells
except a window's pair matrix, which the callers bound (M² ≤ 256 per side).
"""
from __future__ import annotations

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from relviz.figures.heatmap import (
    READABLE_FONT,
    compact_ints,
    legend_below_axis,
    make_readable,
    matrix_heatmap,
    narrow_figure_title,
    narrow_title,
)
from relviz.figures.toeplitz_canvas import GridImage, grid_image

#: Colours of the axes a frequency pair turns with (t, h, w).
AXIS_COLOURS = ("#7b3294", "#1f77b4", "#e66101")
AXIS_NAMES = ("time t", "row h", "column w")
QUERY_OUTLINE = dict(type="rect", line=dict(color="#d62728", width=3), fillcolor="rgba(0,0,0,0)")


def fitted_colours(values: np.ndarray, colorscale: str | list, zmid: float | None) -> tuple[str | list, float | None]:
    """(colour scale, zmid) that fit the values a map shows. A diverging scale stays centred on ``zmid`` only
    when the values lie on both sides of it; values all on one side get that side's half of the scale over their
    own range (zmid None: plotly spans min..max). M-RoPE's k = q map at Δt = 0 holds 129-133: on ±133 centred
    on 0 every cell was one dark red."""
    if zmid is None or values.size == 0:
        return colorscale, zmid
    lo, hi = float(np.min(values)), float(np.max(values))
    if lo < zmid < hi:
        return colorscale, zmid
    stops = plotly.colors.get_colorscale(colorscale) if isinstance(colorscale, str) else list(colorscale)
    if lo >= zmid:   # all at or above the middle: the upper half, from the middle's colour up
        half = [[(float(f) - 0.5) * 2, c] for f, c in stops if float(f) >= 0.5]
    else:            # all below: the lower half, up to the middle's colour
        half = [[float(f) * 2, c] for f, c in stops if float(f) <= 0.5]
    return half, None


def _outline(figure: go.Figure, row: float, col: float, *, rows: float = 1, cols: float = 1) -> go.Figure:
    figure.add_shape(**QUERY_OUTLINE, x0=col - 0.5, x1=col + cols - 0.5, y0=row - 0.5, y1=row + rows - 0.5)
    return figure


def _square(figure: go.Figure) -> go.Figure:
    """Square cells: the long side fills the plot and the short side's domain shrinks (both axes constrain the
    domain). With only x constrained, a 1 × 64 grid's y range grew to ±60 rows that do not exist, and one tick
    per whole number over them smeared into a grey bar."""
    figure.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")
    return figure


def image_map_figure(values: np.ndarray, dh: np.ndarray, dw: np.ndarray, *, query: tuple[int, int], title: str,
                     value_label: str, discrete_range: tuple[int, int] | None = None, zmid: float | None = None,
                     colorscale: str = "Viridis", height: int = 420, validate: bool = True) -> go.Figure:
    """[H, W] one query patch's row laid out as the image: key patch (h, w) coloured by ``values``, the query patch
    outlined. Hover: h, w and the value (a discrete map's true value rides as a 2-D customdata; no per-cell Δh, Δw
    fields: a [H, W, 2] customdata made Chromium take ~2.5× as long to redraw a 64 × 64 map on a query move, and
    Δh = h − query row, Δw = w − query column are read off the axes)."""
    rows, cols = values.shape
    if discrete_range is None:
        colorscale, zmid = fitted_colours(values, colorscale, zmid)
    figure = matrix_heatmap(values, x=np.arange(cols), y=np.arange(rows), title=title, value_label=value_label,
                            hover={}, hover_value=discrete_range is None, discrete_range=discrete_range, zmid=zmid,
                            colorscale=colorscale, x_title="key patch column w", y_title="key patch row h",
                            height=height, validate=validate)
    if discrete_range is not None:
        trace = figure.data[0]
        trace.customdata = compact_ints(values)
        trace.hovertemplate = trace.hovertemplate.replace("<extra>", f"<br>{value_label} = %{{customdata}}<extra>")
    return _square(_outline(figure, *query))


def offset_plane_figure(plane: np.ndarray, *, title: str, value_label: str, window: tuple[int, int, int, int] | None,
                        zmid: float | None = None, colorscale: str = "RdBu_r", height: int = 420,
                        validate: bool = True) -> go.Figure:
    """[2H − 1, 2W − 1] a value per offset (Δh, Δw) = key − query, both ascending; ``window`` (Δh0, Δw0,
    rows, cols) outlines the offsets one query patch reads."""
    rows, cols = plane.shape
    colorscale, zmid = fitted_colours(plane, colorscale, zmid)
    dh = np.arange(rows) - rows // 2
    dw = np.arange(cols) - cols // 2
    figure = matrix_heatmap(plane, x=dw, y=dh, hover={}, hover_value=True, title=title, value_label=value_label,
                            zmid=zmid, colorscale=colorscale, x_title="Δw = key column − query column",
                            y_title="Δh = key row − query row", height=height, validate=validate)
    if window is not None:
        _outline(figure, window[0], window[1], rows=window[2], cols=window[3])
    return _square(figure)


def image_map_canvas(values: np.ndarray, *, query: tuple[int, int], title: str, value_label: str,
                     discrete_range: tuple[int, int] | None = None, zmid: float | None = None,
                     colorscale: str = "Viridis", height: int = 420) -> GridImage | None:
    """:func:`image_map_figure` (same arguments, colours, outline and hover) for the browser to draw: what the
    Images page shows, redrawn in place when its query slider moves. None: draw the figure."""
    if discrete_range is None:
        colorscale, zmid = fitted_colours(values, colorscale, zmid)
    return grid_image(values, value_label=value_label, lines=("h = {y}", "w = {x}", f"{value_label} = {{v}}"),
                      discrete_range=discrete_range, colorscale=colorscale, zmid=zmid, title=title,
                      x_title="key patch column w", y_title="key patch row h", outline=(*query, 1, 1),
                      height=height)


def offset_plane_canvas(plane: np.ndarray, *, title: str, value_label: str, subtitle: str = "",
                        zmid: float | None = None, colorscale: str = "RdBu_r", height: int = 420) -> GridImage | None:
    """:func:`offset_plane_figure` without a window (same colours and axes) for the browser to draw; the
    figure's ``<sup>`` line is ``subtitle``."""
    rows, cols = plane.shape
    colorscale, zmid = fitted_colours(plane, colorscale, zmid)
    return grid_image(plane, value_label=value_label, lines=("Δh = {y}", "Δw = {x}", f"{value_label} = {{v}}"),
                      discrete_range=None, colorscale=colorscale, zmid=zmid, title=title, subtitle=subtitle,
                      x_first=-(cols // 2), y_first=-(rows // 2), x_title="Δw = key column − query column",
                      y_title="Δh = key row − query row", height=height)


def pair_matrix_figure(values: np.ndarray, dh: np.ndarray, dw: np.ndarray, *, title: str, value_label: str,
                       query: int | None = None, discrete_range: tuple[int, int] | None = None,
                       colorscale: str = "Viridis", zmid: float | None = None, height: int = 460,
                       validate: bool = True) -> go.Figure:
    """[N, N] a value per (query patch, key patch) of a small grid or window; hover Δh, Δw; the row of
    ``query`` outlined. Its W × W blocks are Toeplitz: the 2-D index is a grid of 1-D ones."""
    n = values.shape[0]
    if discrete_range is None:
        colorscale, zmid = fitted_colours(values, colorscale, zmid)
    figure = matrix_heatmap(values, x=np.arange(n), y=np.arange(n), hover={"Δh": dh, "Δw": dw}, zmid=zmid,
                            hover_value=discrete_range is None, discrete_range=discrete_range, colorscale=colorscale,
                            title=title, value_label=value_label, x_title="key patch (row-major)",
                            y_title="query patch (row-major)", height=height, validate=validate)
    if query is not None:
        figure.add_shape(**QUERY_OUTLINE, x0=-0.5, x1=n - 0.5, y0=query - 0.5, y1=query + 0.5)
    # two side by side on the page: "Δh of every patch pair (16 × 16 patches, 65,536 pairs)" ran off its half at 1024 px
    return narrow_figure_title(_square(figure))


def pair_axes_figure(rows: dict[str, np.ndarray], steps: dict[str, np.ndarray], *, title: str, step: str,
                     units: str, height: int | None = None) -> go.Figure:
    """Each variant (``rows``: label → the axis of each pair, 0 t, 1 h, 2 w) as a row of markers at each pair's
    wavelength 2π/θ (``steps``: label → θ per pair, radians per ``step``, a patch or a position id; ``units`` its
    plural), log axis,
    coloured by the axis the pair turns with; each axis on its own line within the row, so shared wavelengths
    (the same θ for rows and columns) show as two markers one above the other."""
    labels = list(rows)
    axes_present = sorted(set(np.concatenate(list(rows.values())).tolist()))
    lift = {axis: (n - (len(axes_present) - 1) / 2) * 0.22 for n, axis in enumerate(axes_present)}
    data = []
    for axis in axes_present:
        xs, ys, custom = [], [], []
        for r, label in enumerate(labels):
            chosen = np.nonzero(rows[label] == axis)[0]
            theta = steps[label][chosen].astype(np.float64)
            xs += (2 * np.pi / theta).tolist()
            ys += [r + lift[axis]] * len(chosen)
            custom += np.stack([chosen, theta], -1).tolist()
        data.append(dict(type="scatter", x=xs, y=ys, mode="markers", name=f"turns with {AXIS_NAMES[axis]}",
                         marker=dict(symbol="square", size=9, color=AXIS_COLOURS[axis]), customdata=custom,
                         hovertemplate=f"pair %{{customdata[0]}}<br>θ = %{{customdata[1]:.4g}} rad per {step}<br>"
                                       f"wavelength = %{{x:.4g}} {units}<extra>{AXIS_NAMES[axis]}</extra>"))
    layout = dict(title=dict(text=title, x=0, xanchor="left"), height=height or 120 + 60 * len(labels),
                  margin=dict(l=10, r=10, t=50, b=10),
                  # two lines: on one, it ran 31 px off the chart in half of 1024 px (M-RoPE's pairs)
                  # a tick a decade: plotly's "2" and "5" between decades are drawn at 3/4 of the tick font
                  xaxis=dict(title=dict(text=f"wavelength 2π/θ<br>({units} per turn, log)"), type="log", dtick=1),
                  yaxis=dict(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed",
                             range=[len(labels) - 0.5, -0.5], showgrid=False))
    # hung from the top in a margin that holds its lines (M-RoPE's has three: its note is two), none wrapped here
    narrow_title(layout, lines=1, chars=len(title))
    return make_readable(go.Figure(data=data, layout=legend_below_axis(layout, rows=len(axes_present) - 1,
                                                                     axis_lines=2)))


def swinv2_coordinates_figure(delta: np.ndarray, coords: np.ndarray, *, window: int, pretrained: int,
                              height: int = 360) -> go.Figure:
    """Swin v2's MLP input against the offset δ (one axis): log-spaced, against the linear δ/(M − 1)."""
    reference = max(pretrained, window) if pretrained else window
    linear = 8 * delta / max(reference - 1, 1) / 3
    figure = go.Figure([
        go.Scatter(x=delta, y=linear, mode="lines", name="linear: 8·δ/(P − 1)/log2(8)", line=dict(dash="dash",
                                                                                                 color="#9e9e9e")),
        go.Scatter(x=delta, y=coords, mode="lines+markers", name="log-spaced: sign·log2(1 + |x|)/log2(8)",
                   line=dict(color="#1f77b4"),
                   hovertemplate="δ = %{x}<br>coordinate = %{y:.4f}<extra></extra>")])
    figure.update_layout(title=dict(text=f"Swin v2: the coordinate its MLP reads, window {window}"
                                         + (f", pretrained window {pretrained}" if pretrained else ""),
                                    x=0, xanchor="left"),
                         xaxis=dict(title="δ = query − key (one axis)"), yaxis=dict(title="MLP input"),
                         height=height, margin=dict(l=60, r=10, t=50, b=60),
                         legend=dict(orientation="h", y=-0.3, x=0))
    return make_readable(figure)


def mrope_ids_figure(ids: np.ndarray, kinds: np.ndarray, kind_names: tuple[str, ...], *, title: str,
                     subtitle: str = "", height: int = 460) -> go.Figure:
    """M-RoPE's three rows of ids against the token index, one panel each (t, h, w) sharing the token axis, the
    image and video spans shaded. A long video's w panel is a dense sawtooth: zoom in to see each row."""
    from plotly.subplots import make_subplots

    n = ids.shape[1]
    figure = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.04)
    for axis in range(3):  # x is implicit (x0 = 0, dx = 1), y the smallest unsigned integers: 2 bytes a token
        figure.add_trace(go.Scattergl(x0=0, dx=1, y=compact_ints(ids[axis]), mode="lines", name=AXIS_NAMES[axis],
                                      line=dict(color=AXIS_COLOURS[axis], width=1.5),
                                      hovertemplate="token %{x}<br>" + AXIS_NAMES[axis] + " id = %{y}<extra></extra>"),
                         row=axis + 1, col=1)
        figure.update_yaxes(title_text=AXIS_NAMES[axis].split()[-1], row=axis + 1, col=1)
    edges = np.flatnonzero(np.diff(kinds)) + 1
    starts, ends = np.concatenate([[0], edges]), np.concatenate([edges, [n]])
    for start, end in zip(starts, ends):
        kind = int(kinds[start])
        if kind:
            figure.add_vrect(x0=start - 0.5, x1=end - 0.5, fillcolor="#cccccc" if kind == 1 else "#fde0c5",
                             opacity=0.45, line_width=0, layer="below", row="all", col=1)
        if end - start >= n / 40:  # a label where the span is wide enough to hold it
            figure.add_annotation(x=(start + end - 1) / 2, y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                                  text=kind_names[kind], font=dict(size=READABLE_FONT - 2))
    # a subtitle, not "<br><sup>": plotly.js lifted a two-line title's first line above the figure's top edge
    figure.update_layout(title=dict(text=title, x=0, xanchor="left", y=0.98,
                                    subtitle=dict(text=subtitle, font=dict(size=READABLE_FONT - 2))), height=height,
                         margin=dict(l=60, r=10, t=90, b=50), showlegend=False)
    figure.update_xaxes(title_text="token index", row=3, col=1)
    return make_readable(figure)
