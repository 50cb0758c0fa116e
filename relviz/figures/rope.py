"""Figures of RoPE: wavelengths against the context, what a scaling rule does per pair, the decay.

The score matrix itself is a Toeplitz matrix: ``score_figure`` draws a ContentScores with
figures.toeplitz.toeplitz_heatmap.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from relviz.figures.heatmap import readable, wrap_words
from relviz.figures.toeplitz import toeplitz_heatmap, toeplitz_view
from relviz.figures.toeplitz_canvas import ToeplitzImage
from relviz.rope.pair import PairAtPositions
from relviz.rope.scores import ContentScores, DecayCurves

PLAIN_COLOUR = "#9e9e9e"
SCALED_COLOUR = "#1f77b4"
TURN_COLOUR = "#2ca02c"
NO_TURN_COLOUR = "#d62728"
#: A legend entry of the wavelength chart, wrapped to the ~36 characters (14 px) its 3/5 of the page holds at a
#: projector's 819 px
LEGEND_CHARS = 36


def _log_hline(figure: go.Figure, y: float, text: str, *, dash: str = "dash", colour: str = "#444",
               yanchor: str = "bottom") -> None:
    """A labelled horizontal line on a log y axis (plotly's hline annotation misplaces its text there)."""
    figure.add_hline(y=y, line=dict(dash=dash, color=colour, width=1.5))
    figure.add_annotation(x=0, xref="paper", xanchor="left", y=math.log10(y), yref="y", yanchor=yanchor,
                          text=text, showarrow=False, font=dict(size=11, color=colour))


def wavelength_figure(inv_freq: np.ndarray, plain: np.ndarray, *, length: int, original: int | None,
                      rule: str, height: int = 380) -> go.Figure:
    """Wavelength 2π/θ_i of every pair (log axis), scaled and unscaled, against the context length.

    A pair whose wavelength is at most length − 1 completes a full turn inside the context (green);
    the others never do (red): their angle only sweeps part of the circle.
    """
    pairs = np.arange(len(inv_freq))
    wave = 2 * math.pi / inv_freq.astype(np.float64)
    wave_plain = 2 * math.pi / plain.astype(np.float64)
    turns = (length - 1) / wave
    turns_plain = (length - 1) / wave_plain
    figure = go.Figure()
    if not np.array_equal(inv_freq, plain):            # a rule that moved some θ: the unscaled ones beside them
        figure.add_trace(go.Scatter(
            x=pairs, y=wave_plain, mode="markers", marker=dict(color=PLAIN_COLOUR, size=6, symbol="circle-open"),
            name="unscaled θ_i = base^(−2i/d)", customdata=np.stack([plain, turns_plain], -1),
            hovertemplate="pair i = %{x}<br>unscaled θ = %{customdata[0]:.4g} rad/position<br>"
                          "wavelength = %{y:.4g} positions<br>turns in the context = %{customdata[1]:.3g}"
                          "<extra></extra>"))
    colours = np.where(wave <= length - 1, TURN_COLOUR, NO_TURN_COLOUR)
    figure.add_trace(go.Scatter(
        x=pairs, y=wave, mode="markers", marker=dict(color=colours.tolist(), size=7),
        # wrapped: on one line the legend ran off the chart in 3/5 of the page at 1024 px ("…positions, rec")
        name=wrap_words(f"{rule}: green = at least one full turn in {length:,} positions, red = less than one turn",
                        LEGEND_CHARS),
        customdata=np.stack([inv_freq, turns], -1),
        hovertemplate="pair i = %{x}<br>θ = %{customdata[0]:.4g} rad/position<br>wavelength = %{y:.4g} "
                      "positions<br>turns in the context = %{customdata[1]:.3g}<extra></extra>"))
    _log_hline(figure, length, f"context length {length:,}")
    if original is not None and original != length:
        _log_hline(figure, original, f"original context {original:,}", dash="dot", colour="#8c564b",
                   yanchor="top" if original > length else "bottom")
    # powers of ten only: the 2 and 5 plotly adds between them crowded the axis, at 64 positions over the
    # context line's label (seen on Your model at 1280 × 720)
    figure.update_yaxes(type="log", title_text="wavelength 2π/θ_i (positions)", dtick=1)
    figure.update_xaxes(title_text="dimension pair i")
    figure.update_layout(height=height, margin=dict(l=60, r=10, t=10, b=45), showlegend=True,
                         legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return figure


def ratio_figure(inv_freq: np.ndarray, plain: np.ndarray, *, factor: float | None, rule: str,
                 height: int = 300) -> go.Figure:
    """θ_scaled / θ_unscaled per pair: 1 = untouched (extrapolated), 1/factor = interpolated."""
    pairs = np.arange(len(inv_freq))
    ratio = inv_freq.astype(np.float64) / plain.astype(np.float64)
    figure = go.Figure(go.Scatter(
        x=pairs, y=ratio, mode="lines+markers", line=dict(color=SCALED_COLOUR), marker=dict(size=5),
        name=rule, hovertemplate="pair i = %{x}<br>θ_scaled / θ = %{y:.4g}<extra></extra>"))
    _log_hline(figure, 1.0, "1: unchanged", dash="dot", colour=PLAIN_COLOUR)
    lowest = min(float(ratio.min()), 1.0)
    if factor and factor != 1:
        _log_hline(figure, 1 / factor, f"1/factor = 1/{factor:g}", dash="dot", colour="#8c564b", yanchor="top")
        lowest = min(lowest, 1 / factor)
    ticks = [2.0 ** -k for k in range(0, 31) if 2.0 ** -k >= lowest / 1.01]
    figure.update_yaxes(type="log", title_text="θ_scaled / θ_unscaled", tickvals=ticks,
                        ticktext=["1" if t == 1 else f"1/{1 / t:g}" for t in ticks],
                        range=[math.log10(lowest) - 0.15, math.log10(max(float(ratio.max()), 1.0)) + 0.15])
    figure.update_xaxes(title_text="dimension pair i")
    figure.update_layout(height=height, margin=dict(l=60, r=10, t=10, b=45), showlegend=False)
    return figure


def decay_lines(curves: DecayCurves) -> dict[str, np.ndarray]:
    """The curves of a DecayCurves under their legend names (the unscaled bound only with a scaling rule)."""
    lines = {"RoFormer bound / its value at 0": curves.bound.numpy()}
    if curves.bound_unscaled is not None:
        lines["RoFormer bound / its value at 0, unscaled θ"] = curves.bound_unscaled.numpy()
    lines["measured: q = k (mean score / d)"] = curves.identical.numpy()
    lines["measured: independent q, k (mean |score| / d)"] = curves.independent.numpy()
    return lines


#: One colour per kind of decay curve, whatever curves a figure has.
DECAY_COLOURS = {"RoFormer bound / its value at 0": SCALED_COLOUR,
                 "RoFormer bound / its value at 0, unscaled θ": PLAIN_COLOUR,
                 "measured: q = k (mean score / d)": "#ff7f0e",
                 "measured: independent q, k (mean |score| / d)": TURN_COLOUR}


def _log_vline(figure: go.Figure, x: float, text: str, *, dash: str, colour: str, yanchor: str) -> None:
    """A labelled vertical line on a log x axis (plotly's vline annotation takes x as log10(x) there,
    which stretched the axis to 10^length)."""
    figure.add_vline(x=x, line=dict(dash=dash, color=colour, width=1.5))
    figure.add_annotation(x=math.log10(x), xref="x", xanchor="right", y=1 if yanchor == "top" else 0, yref="paper",
                          yanchor=yanchor, text=text, showarrow=False, font=dict(size=11, color=colour))


def decay_figure(curves: DecayCurves, *, length: int, original: int | None = None,
                 height: int = 380) -> go.Figure:
    """Score or bound against |j − i| (log x axis): one line per curve, the context marked."""
    offsets = curves.distances.numpy()
    figure = go.Figure()
    for name, values in decay_lines(curves).items():
        dash = "dot" if "unscaled" in name else "solid"
        figure.add_trace(go.Scatter(
            x=offsets, y=values, mode="lines", name=name, line=dict(color=DECAY_COLOURS[name], dash=dash),
            hovertemplate="|j − i| = %{x}<br>" + name.split(":")[0] + " = %{y:.4g}<extra></extra>"))
    _log_vline(figure, length, f"context {length:,} ", dash="dash", colour="#444", yanchor="top")
    if original is not None and original != length:
        _log_vline(figure, original, f"original {original:,} ", dash="dot", colour="#8c564b", yanchor="bottom")
    # a tick a decade: over a few decades plotly adds "2" and "5" between them at 3/4 of the tick font (9 px, too
    # small for a projector: the control sweep at 1440 × 900)
    figure.update_xaxes(type="log", title_text="relative distance |j − i| (log axis)", dtick=1,
                        range=[0, math.log10(max(length, original or 0, 2)) + 0.02])
    figure.update_yaxes(title_text="relative to distance 0")
    figure.update_layout(height=height, margin=dict(l=60, r=10, t=10, b=45),
                         legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return figure


def score_figure(scores: ContentScores, *, height: int = 460, browser: bool = False) -> go.Figure | ToeplitzImage:
    """The W × W score matrix of fixed content (hover i, j, j − i, score), drawn from its per-offset scores.

    ``browser=True``: a large matrix comes back as a ToeplitzImage (drawn in the browser, relviz.app.display)."""
    w = scores.window
    options = dict(value_label="score", colorscale="RdBu_r", zmid=0.0, title="", height=height)
    per_offset = scores.per_offset.numpy().astype(np.float32)
    if browser:
        return toeplitz_view(per_offset, w, w, **options)
    return toeplitz_heatmap(per_offset, w, w, **options).figure


#: The pair picture's colours: the query's arrow, the key's, and where each started (position 0).
QUERY_COLOUR = "#1f77b4"
KEY_COLOUR = "#d62728"


@readable
def pair_figure(pair: PairAtPositions, start: PairAtPositions, *, pair_index: int, height: int = 420) -> go.Figure:
    """One frequency pair as two arrows on the plane: q rotated to position m, k to position n (faint: both at
    position 0, ``start``), the arc of the angle between them and their dot product."""
    figure = go.Figure()
    t = np.linspace(0, 2 * math.pi, 121)
    radius = max(math.hypot(*start.query), math.hypot(*start.key))
    figure.add_trace(go.Scatter(x=radius * np.cos(t), y=radius * np.sin(t), mode="lines", hoverinfo="skip",
                                line=dict(color="#cccccc", width=1, dash="dot"), showlegend=False))
    span = pair.angle_difference
    arc = pair.query_angle + np.linspace(0, span, 40)
    figure.add_trace(go.Scatter(x=0.35 * radius * np.cos(arc), y=0.35 * radius * np.sin(arc), mode="lines",
                                line=dict(color="#555555", width=2), hoverinfo="skip", showlegend=False))
    mid = pair.query_angle + span / 2
    figure.add_annotation(x=0.6 * radius * math.cos(mid), y=0.6 * radius * math.sin(mid), showarrow=False,
                          text=f"{math.degrees(span):.0f}°", font=dict(size=14, color="#333333"))
    arrows = [(start.query, f"q (position 0)", QUERY_COLOUR, 0.3), (start.key, "k (position 0)", KEY_COLOUR, 0.3),
              (pair.query, f"q at m = {pair.query_position}", QUERY_COLOUR, 1.0),
              (pair.key, f"k at n = {pair.key_position}", KEY_COLOUR, 1.0)]
    for (x, y), label, colour, alpha in arrows:
        figure.add_annotation(x=x, y=y, ax=0, ay=0, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                              arrowhead=2, arrowsize=1.2, arrowwidth=3 if alpha == 1.0 else 2, arrowcolor=colour,
                              opacity=alpha, text="")
        if alpha == 1.0:
            figure.add_annotation(x=1.3 * x, y=1.3 * y, text=label, showarrow=False,  # clear of the tip
                                  font=dict(size=14, color=colour))
    figure.add_trace(go.Scatter(x=[pair.query[0], pair.key[0]], y=[pair.query[1], pair.key[1]], mode="markers",
                                marker=dict(size=8, color=[QUERY_COLOUR, KEY_COLOUR]), showlegend=False,
                                customdata=[[pair.query_position, math.degrees(pair.query_angle)],
                                            [pair.key_position, math.degrees(pair.key_angle)]],
                                hovertemplate="position %{customdata[0]}: angle %{customdata[1]:.1f}°"
                                              "<extra></extra>"))
    figure.add_annotation(x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="bottom", showarrow=False,
                          text="faint: q and k at position 0", font=dict(size=12, color="#777777"))
    reach = 1.6 * radius
    figure.update_layout(
        height=height, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white",
        title=dict(text=f"pair {pair_index}: θ = {pair.theta:.4g} rad per position", x=0, xanchor="left"),
        xaxis=dict(range=[-reach, reach], visible=False),
        yaxis=dict(range=[-reach, reach], visible=False, scaleanchor="x"))
    return figure
