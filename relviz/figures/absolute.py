"""Figures for the "absolute vs relative" page: the sinusoidal encoding, its position
similarity, the relative index, and ALiBi's per-head bias and slopes (the landing page's
picture of j − i is figures.intro's): each from its arrays, and (the last section) from the page's
settings, which the page and ``relviz.show`` both call.

Heatmaps go through the shared ``matrix_heatmap`` (query 0 on top, hover on every cell,
float32 payloads); the colour value itself is shown in the hover (``hover_value``) so no
matrix travels twice. Nothing here imports streamlit.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import plotly.graph_objects as go
import torch

from relviz import positions
from relviz.absolute import (
    ShiftedSequence,
    diagonal_range,
    projected_similarity,
    shift_sequence,
    sinusoidal_encoding,
    sinusoidal_similarity,
    sinusoidal_similarity_per_offset,
)
from relviz.figures.heatmap import AXIS_LINE_PX, legend_below_axis, matrix_heatmap, readable
from relviz.figures.toeplitz_canvas import GRID_MAX_ASPECT, GridImage, ToeplitzImage, grid_image, toeplitz_image
from relviz.figures.toeplitz_colours import levels_256, palette_256
from relviz.figures.toeplitz_window import OFFSET_LABEL
from relviz.figures.xy_canvas import PANEL_TITLE_PX, XYImage, XYPanel, XYTrace, xy_image

CPU = "cpu"  # figures are drawn from CPU tensors whatever the default device is

#: Colours for the slope chart: slopes of the nearest lower power of 2, and the ones taken from 2p.
FROM_P_COLOUR = "#1f77b4"
FROM_2P_COLOUR = "#ff7f0e"
NAIVE_COLOUR = "#7f7f7f"
#: The slope bars' labels (px): readable at the back of a room.
SLOPE_LABEL_PX = 15


def _bar_below(figure: go.Figure) -> go.Figure:
    """The colour bar under the plot, as on the Shaw page: in a third of a 1280 px page a bar on the right took
    ~70 of ~260 px and left the map 100–180 px wide. Changes and returns ``figure``."""
    figure.data[0].colorbar.update(orientation="h", x=0.5, xanchor="center", y=-0.25, yanchor="top", len=0.9,
                                   thickness=12, title_side="top")
    margin = figure.layout.margin
    figure.update_layout(margin=dict(l=margin.l, r=10, t=margin.t, b=(margin.b or 40) + 80))
    return figure


@readable
def encoding_figure(pe: np.ndarray, *, height: int = 430) -> go.Figure:
    """Positions × dimensions heatmap of a sinusoidal encoding (values in [−1, 1])."""
    positions, dims = pe.shape
    figure = matrix_heatmap(
        pe, x=np.arange(dims), y=np.arange(positions), hover={}, hover_value=True, value_label="PE[p, d]",
        colorscale="RdBu_r", zmid=0.0, x_title="dimension d", y_title="position p", height=height, validate=False)
    figure.data[0].update(zmin=-1.0, zmax=1.0)
    return _bar_below(figure)


@readable
def similarity_figure(similarity: np.ndarray, relative: np.ndarray, *, value_label: str,
                      diverging: bool = False, height: int = 430) -> go.Figure:
    """Position × position similarity heatmap, hover: i, j, |j − i| and the similarity.

    The hover field is the distance |j − i| as unsigned integers: a signed int16 j − i is
    mostly 0xFF bytes, whose base64 is full of '/', which plotly's JSON escapes to six
    characters each (+75 % on the wire: the 512 × 512 figure would pass 3 MB).
    diverging=True centres the colours on 0 (scores of either sign); otherwise a sequential
    scale spans min..max (the normalised sinusoidal similarity is mostly positive).
    """
    n = similarity.shape[0]
    distance = np.abs(relative).astype(np.uint16)
    if diverging:
        limit = float(np.nanmax(np.abs(similarity))) or 1.0
        figure = matrix_heatmap(
            similarity, x=np.arange(n), y=np.arange(n), hover={"|j − i|": distance}, hover_value=True,
            value_label=value_label, colorscale="RdBu_r", zmid=0.0, x_title="position j",
            y_title="position i", height=height, validate=False)
        figure.data[0].update(zmin=-limit, zmax=limit)
    else:
        figure = matrix_heatmap(
            similarity, x=np.arange(n), y=np.arange(n), hover={"|j − i|": distance}, hover_value=True,
            value_label=value_label, colorscale="Viridis", x_title="position j", y_title="position i",
            height=height, validate=False)
    return _bar_below(figure)


@readable
def relative_figure(relative: np.ndarray, *, height: int = 430) -> go.Figure:
    """The relative index j − i (continuous diverging colours: at up to 1023 values a stepped scale blurs)."""
    q_len, k_len = relative.shape
    figure = matrix_heatmap(
        relative, x=np.arange(k_len), y=np.arange(q_len), hover={}, hover_value=True, value_label="j − i",
        colorscale="PuOr", zmid=0.0, height=height, validate=False)
    return _bar_below(figure)


# The three maps for the canvas component (relviz.figures.toeplitz_canvas), each its plotly twin's values, colours
# and hover: a move of L or d_model redraws them in place (a changed plotly heatmap is a new chart, drawn anew;
# at 512 × 512 two changed maps were 4.2 MB of plotly JSON), and the colour bar below keeps its labels level in a
# third of a 1024 px page (plotly tilted them there). None where the twin must draw (a map over twice as long as
# it is wide: square cells would leave it a sliver).


def encoding_canvas(pe: np.ndarray, *, height: int = 430) -> GridImage | None:
    """:func:`encoding_figure` for the canvas: RdBu_r over −1 … 1, hover p, d and the value."""
    if max(pe.shape) > GRID_MAX_ASPECT * min(pe.shape):
        return None
    return GridImage(pe, levels_256(pe, -1.0, 1.0), tuple(palette_256("RdBu_r")),
                     {"kind": "continuous", "zmin": -1.0, "zmax": 1.0}, "PE[p, d]",
                     ("p = {y}", "d = {x}", "PE[p, d] = {v}"), x_title="dimension d", y_title="position p",
                     height=height, bar_below=True)


def similarity_canvas(similarity: np.ndarray, *, value_label: str, diverging: bool = False,
                      height: int = 430) -> GridImage:
    """:func:`similarity_figure` for the canvas: Viridis over min … max, or RdBu_r symmetric about 0
    (``diverging``); hover i, j, |j − i| (computed in the browser) and the value."""
    image = grid_image(similarity, value_label=value_label,
                       lines=("i = {y}", "j = {x}", "|j − i| = {a}", f"{value_label} = {{v}}"), discrete_range=None,
                       colorscale="RdBu_r" if diverging else "Viridis", zmid=0.0 if diverging else None,
                       x_title="position j", y_title="position i", height=height)
    return dataclasses.replace(image, bar_below=True)


def relative_canvas(length: int, *, height: int = 430) -> ToeplitzImage:
    """:func:`relative_figure` of j − i at ``length`` for the canvas: one value per offset (2L − 1 numbers,
    not L²), PuOr symmetric about 0, hover i, j, j − i."""
    per_offset = np.arange(-(length - 1), length, dtype=np.int16)
    image = toeplitz_image(per_offset, length, length, value_label=OFFSET_LABEL, colorscale="PuOr", zmid=0.0,
                           height=height)
    return dataclasses.replace(image, bar_below=True)


@readable
def offset_curve_figure(offsets: np.ndarray, values: np.ndarray, *, projected: np.ndarray | None = None,
                        height: int = 300) -> go.Figure:
    """Similarity as a function of j − i (the closed form), optionally with the projected head's range."""
    figure = go.Figure()
    if projected is not None:
        lo, hi = projected
        figure.add_trace(go.Scatter(x=offsets, y=hi, mode="lines", line=dict(width=0), showlegend=False,
                                    hoverinfo="skip"))
        figure.add_trace(go.Scatter(
            x=offsets, y=lo, mode="lines", line=dict(width=0), fill="tonexty",
            fillcolor="rgba(255,127,14,0.3)", name="random head: min … max over each diagonal",
            hovertemplate="j − i = %{x}<br>min over the diagonal = %{y:.3f}<extra></extra>"))
    figure.add_trace(go.Scatter(
        x=offsets, y=values, mode="lines", line=dict(color="#1f77b4", width=2),
        name="PE_i · PE_j / (d/2) = mean of cos((j − i)·ω_k)",
        hovertemplate="j − i = %{x}<br>similarity = %{y:.4f}<extra></extra>"))
    figure.update_layout(height=height, margin=dict(l=50, r=10, t=10, b=45),
                         legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    figure.update_xaxes(title_text="relative position j − i", zeroline=True)
    figure.update_yaxes(title_text="similarity")
    return figure


@readable
def alibi_bias_figure(bias: np.ndarray, relative: np.ndarray, *, head: int, slope: float,
                      causal: bool, height: int = 430) -> go.Figure:
    """One head's ALiBi bias; with ``causal`` the masked cells (j > i) are blank (NaN, no hover).

    Hover: i, j, the distance |j − i| (unsigned, see similarity_figure) and the bias −m·|j − i|.
    """
    q_len, k_len = bias.shape
    z = np.where(relative > 0, np.nan, bias).astype(np.float32) if causal else bias.astype(np.float32)
    figure = matrix_heatmap(
        z, x=np.arange(k_len), y=np.arange(q_len), hover={"|j − i|": np.abs(relative).astype(np.uint16)},
        hover_value=True, value_label="bias", colorscale="Viridis", height=height, validate=False)
    figure.data[0].hoverongaps = False
    figure.update_layout(plot_bgcolor="#eeeeee")
    return figure


@readable
def alibi_slopes_figure(slopes: np.ndarray, *, from_p: int, naive: np.ndarray | None = None,
                        selected: int | None = None, height: int = 330) -> go.Figure:
    """Slopes per head on a log2 axis, coloured by where they come from (p or every other slope of 2p)."""
    n = len(slopes)
    heads = np.arange(1, n + 1)
    exponents = np.log2(slopes)
    colours = [FROM_P_COLOUR if h <= from_p else FROM_2P_COLOUR for h in heads]
    origin = [f"slope {h} of the {from_p}-head sequence" if h <= from_p
              else f"slope {2 * (h - from_p) - 1} of the {2 * from_p}-head sequence" for h in heads]
    figure = go.Figure()
    figure.add_trace(go.Bar(
        x=heads, y=-exponents, marker_color=colours, name="reference slopes",
        customdata=slopes.astype(np.float32), hovertext=origin,
        # the bar's height, −log2(slope), at a projector's size: "2^-0.5" at 10 px, shrunk by plotly to ~8 px to
        # fit a bar, was unreadable; the slope itself is in the hover
        text=[f"{-e:.3g}" for e in exponents] if n <= 12 else None, textposition="outside",
        textfont=dict(size=SLOPE_LABEL_PX), constraintext="none", cliponaxis=False,
        hovertemplate="head %{x}<br>slope m = %{customdata:.5g} = 2^-%{y:.4g}"
                      "<br>%{hovertext}<extra></extra>",
        marker_line=dict(width=[3 if h == selected else 0 for h in heads], color="black")))
    if naive is not None:
        figure.add_trace(go.Scatter(
            x=heads, y=-np.log2(naive), mode="markers", marker=dict(symbol="line-ew-open", size=18,
                                                                     color=NAIVE_COLOUR, line=dict(width=3)),
            name=f"naive 2^(−8h/{n}) (not the reference)",
            hovertemplate="head %{x}<br>naive slope = 2^-%{y:.4g}<extra></extra>"))
    figure.update_layout(height=height, margin=dict(l=50, r=10, t=30, b=45), bargap=0.25,
                         legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), showlegend=naive is not None)
    figure.update_xaxes(title_text="head h", dtick=1 if n <= 16 else 2)
    figure.update_yaxes(title_text="−log2(slope): bigger = flatter", rangemode="tozero")
    return figure


@readable
def alibi_lines_figure(slopes: np.ndarray, length: int, *, selected: int, height: int = 330) -> go.Figure:
    """Every head's bias −m_h·(i − j) against the distance i − j (grey), the selected head in red.

    All heads travel as one trace with gaps between them (32 separate traces cost more to build).
    """
    n = len(slopes)
    # Every line is straight: above 512 positions, 512 evenly spaced whole distances draw it exactly (2^20
    # points per head would send megabytes for the same picture); hover reads the bias at those distances.
    distance = (np.arange(length) if length <= 512 else np.unique(np.linspace(0, length - 1, 512).round())
                ).astype(np.float32)
    xs = np.concatenate([np.append(distance, np.nan) for _ in range(n)]).astype(np.float32)
    ys = np.concatenate([np.append(-float(m) * distance, np.nan) for m in slopes]).astype(np.float32)
    head_of_point = np.repeat(np.arange(1, n + 1, dtype=np.uint8), len(distance) + 1)
    m = float(slopes[selected - 1])
    figure = go.Figure([
        go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=1.2, color="#8c8c8c"), name="all heads",
                   customdata=head_of_point, connectgaps=False,
                   hovertemplate="head %{customdata}<br>i − j = %{x}<br>bias = %{y:.3f}<extra></extra>"),
        go.Scatter(x=distance, y=(-m * distance).astype(np.float32), mode="lines",
                   line=dict(width=3.5, color="#d62728"), name=f"head {selected}",
                   hovertemplate=f"head {selected} (m = {m:.4g})<br>i − j = %{{x}}<br>bias = %{{y:.3f}}"
                                 "<extra></extra>"),
    ])
    # the axis title on two lines: on one it ran 12 px past a third of the page at 819 px (a 125 % laptop);
    # the bottom margin and the height grow by that line, so the plot keeps its size
    figure.update_layout(height=height + AXIS_LINE_PX, margin=dict(l=50, r=10, t=10, b=45 + AXIS_LINE_PX),
                         showlegend=False)
    figure.update_xaxes(title_text="distance into the past i − j<br>(= −(j − i))")
    figure.update_yaxes(title_text="bias added to the logit")
    return figure


#: The shift figure's colours and the share of the width its left panel takes.
SHIFT_BAR_COLOUR = "#d62728"
SHIFT_BEFORE_COLOUR = "#1f77b4"
SHIFT_AFTER_COLOUR = "#ff7f0e"
SHIFT_LEFT_SHARE = 0.42


def _shift_parts(shifted: ShiftedSequence) -> dict:
    """What the shift figure draws, one place for its plotly and its canvas form: titles, names and the arrays
    (float64, as shift_sequence computes them)."""
    s = shifted.shift
    offsets = shifted.offsets.numpy()
    (lo0, hi0), (lo1, hi1) = [(lo.numpy(), hi.numpy()) for lo, hi in (shifted.before, shifted.after)]
    after = (lo1 + hi1) / 2
    return dict(
        titles=(f"absolute: PE(i + {s}) − PE(i)", "relative: PE_i · PE_j / (d/2)"),
        positions=np.arange(len(shifted.change)), change=shifted.change.numpy(), offsets=offsets,
        before=(lo0 + hi0) / 2, after=after, above=hi1 - after, below=after - lo1,
        change_name=f"‖PE(i + {s}) − PE(i)‖: how far each position's vector moved",
        after_name=f"shifted by {s}: each diagonal's min … max (largest change {shifted.largest_difference:.0e})")


@readable
def shift_figure(shifted: ShiftedSequence, *, height: int = 420) -> go.Figure:
    """Shift the whole sequence by s: left, how far each position's absolute vector moved; right, the dot
    products by offset j − i before (line) and after (markers, each diagonal's min…max): the same curve.
    The page draws :func:`shift_canvas` (the same values, on a canvas)."""
    from plotly.subplots import make_subplots

    parts = _shift_parts(shifted)
    figure = make_subplots(rows=1, cols=2, column_widths=[SHIFT_LEFT_SHARE, 1 - SHIFT_LEFT_SHARE],
                           horizontal_spacing=0.12, subplot_titles=parts["titles"])
    figure.add_trace(go.Bar(x=parts["positions"], y=parts["change"], marker_color=SHIFT_BAR_COLOUR,
                            name=parts["change_name"], hovertemplate="position i = %{x}<br>"
                            "‖PE(i + s) − PE(i)‖ = %{y:.3f}<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Scatter(x=parts["offsets"], y=parts["before"], mode="lines",
                                line=dict(color=SHIFT_BEFORE_COLOUR, width=3), name="positions 0 … L − 1",
                                hovertemplate="j − i = %{x}<br>%{y:.4f}<extra></extra>"), row=1, col=2)
    figure.add_trace(go.Scatter(
        x=parts["offsets"], y=parts["after"], mode="markers", marker=dict(color=SHIFT_AFTER_COLOUR, size=5),
        error_y=dict(type="data", symmetric=False, array=parts["above"], arrayminus=parts["below"], width=0),
        name=parts["after_name"], hovertemplate="j − i = %{x}<br>%{y:.4f}<extra></extra>"), row=1, col=2)
    figure.update_xaxes(title_text="position i", row=1, col=1)
    figure.update_yaxes(title_text="distance moved", rangemode="tozero", row=1, col=1)
    figure.update_xaxes(title_text="relative position j − i", row=1, col=2)
    # the right panel's title names its y axis: an axis title of its own sat over the left panel where the
    # gap between them is narrow (~50 px at 1024 × 768), whatever its standoff
    figure.update_layout(**legend_below_axis(dict(height=height, margin=dict(l=60, r=10, t=40, b=40)), rows=1))
    figure.update_annotations(font_size=PANEL_TITLE_PX)
    return figure


def shift_canvas(shifted: ShiftedSequence, *, height: int = 420) -> XYImage:
    """:func:`shift_figure` for the canvas component (relviz.figures.xy_canvas): the same arrays, titles and
    names, redrawn in place when the shift moves (a changed plotly figure is a new chart, drawn from scratch)."""
    parts = _shift_parts(shifted)
    left = XYPanel((XYTrace("bar", parts["positions"], parts["change"], SHIFT_BAR_COLOUR, parts["change_name"],
                            ("position i = {x}", "‖PE(i + s) − PE(i)‖ = {y:.3f}")),),
                   share=SHIFT_LEFT_SHARE, title=parts["titles"][0], x_title="position i",
                   y_title="distance moved", y_from_zero=True)
    offset_hover = ("j − i = {x}", "{y:.4f}")
    right = XYPanel((XYTrace("line", parts["offsets"], parts["before"], SHIFT_BEFORE_COLOUR, "positions 0 … L − 1",
                             offset_hover, size=3),
                     XYTrace("markers", parts["offsets"], parts["after"], SHIFT_AFTER_COLOUR, parts["after_name"],
                             offset_hover, size=5, below=parts["below"], above=parts["above"])),
                    share=1 - SHIFT_LEFT_SHARE, title=parts["titles"][1], x_title="relative position j − i")
    return xy_image((left, right), height=height)


# ---------------------------------------------------------------------------------------
# The page's pictures from its settings (relviz.show re-exports them for notebooks)


def sinusoidal_encoding_map(length: int = 128, d_model: int = 128) -> go.Figure:
    """The sinusoidal encoding PE[p, d] (Vaswani et al. 2017), positions × dimensions.

    Example: ``show.sinusoidal_encoding_map(64, 32)``
    """
    return encoding_figure(sinusoidal_encoding(length, d_model, device=CPU).numpy())


def _projected(length: int, d_model: int) -> torch.Tensor:
    """What one random head (d_head 64, seed 0, as on the page) makes of the positions alone."""
    return projected_similarity(length, d_model, d_head=64, seed=0, device=CPU)


def sinusoidal_similarity_map(length: int = 128, d_model: int = 128, *, projected: bool = False) -> go.Figure:
    """PE_i · PE_j / (d_model / 2): depends only on j − i. ``projected=True``: through a random head,
    (PE_i W_Q)·(PE_j W_K) / √64, which does not.

    Example: ``show.sinusoidal_similarity_map(64, 32, projected=True)``
    """
    rel = positions.relative_positions(length, device=CPU).numpy().astype(np.int16)
    if projected:
        return similarity_figure(_projected(length, d_model).numpy(), rel, value_label="score", diverging=True)
    matrix = sinusoidal_similarity(length, d_model, normalize=True, device=CPU).numpy()
    return similarity_figure(matrix, rel, value_label="similarity")


def sinusoidal_offset_curve(length: int = 128, d_model: int = 128, *, projected: bool = False) -> go.Figure:
    """The similarity against j − i (closed form); ``projected=True`` adds the random head's
    min … max along each diagonal.

    Example: ``show.sinusoidal_offset_curve(128, 64, projected=True)``
    """
    offsets = torch.arange(-(length - 1), length)
    curve = sinusoidal_similarity_per_offset(offsets, d_model, normalize=True).numpy()
    spread = None
    if projected:
        lo, hi = diagonal_range(_projected(length, d_model))
        spread = (lo.numpy(), hi.numpy())
    return offset_curve_figure(offsets.numpy(), curve, projected=spread)


def alibi_bias(length: int = 32, heads: int = 8, head: int = 1, *, causal: bool = True) -> go.Figure:
    """One head's ALiBi bias −m_h·|j − i| (Press et al. 2022); heads count from 1, as in the app.

    Example: ``show.alibi_bias(32, heads=8, head=3)``
    """
    slopes = positions.alibi_slopes(heads, device=CPU).numpy()
    if isinstance(head, bool) or not isinstance(head, int) or not 1 <= head <= len(slopes):
        raise ValueError(f"head must be an integer from 1 to {len(slopes)}; got {head!r}")
    bias = positions.alibi_bias(length, num_heads=heads, device=CPU)[head - 1].numpy()
    rel = positions.relative_positions(length, device=CPU).numpy().astype(np.int16)
    return alibi_bias_figure(bias, rel, head=head, slope=float(slopes[head - 1]), causal=causal)


def alibi_slopes(heads: int = 12, *, head: int = 1) -> go.Figure:
    """The slopes of every head (−log2 m), coloured by the reference rule's two sources; for a
    head count that is not a power of 2, grey marks show the common 2^(−8h/n) mistake.

    Example: ``show.alibi_slopes(12)``
    """
    slopes = positions.alibi_slopes(heads, device=CPU).numpy()
    p = positions.alibi_power_of_two(heads)
    naive = positions.alibi_slopes_geometric(heads, device=CPU).numpy() if p != heads else None
    return alibi_slopes_figure(slopes, from_p=p, naive=naive, selected=head)


def alibi_lines(length: int = 32, heads: int = 8, *, head: int = 1) -> go.Figure:
    """Every head's bias against the distance, ``head`` highlighted.

    Example: ``show.alibi_lines(64, heads=8, head=8)``
    """
    return alibi_lines_figure(positions.alibi_slopes(heads, device=CPU).numpy(), length, selected=head)


def sinusoidal_shift(length: int = 64, d_model: int = 64, shift: int = 16) -> go.Figure:
    """Shift the whole sequence by ``shift``: every sinusoidal vector PE(i) changes, the dot products by j − i
    do not (relviz.absolute.shift_sequence).

    Example: ``show.sinusoidal_shift(64, 64, shift=100)``
    """
    return shift_figure(shift_sequence(length, d_model, shift))
