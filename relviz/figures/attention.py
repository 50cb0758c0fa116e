"""Figures of the live attention page: prediction strip, attention heatmaps (a grid of every
layer and head, and one head up close), the scheme's position structure, mean attention by
offset, and each scheme's position parameters (drawn by the kind of data: a bias curve, vector
norms, a similarity matrix; never by scheme name).

Payload: weights travel as float32, hover fields in the smallest exact type; a
grid above ``GRID_SIDE`` cells per side is mean-pooled (and says so), the close-up is exact.
Every figure is built from plain dicts; ``validate=False`` skips plotly's per-property
validation (the page's rerun time), tests build with it on.

The position-parameter figures are relviz.figures.parameters and the head colours
relviz.figures.dict_figures: import their names from there.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from relviz.figures.dict_figures import figure_parts, head_colour, hover_data, parts_figure
from relviz.figures.heatmap import (
    KEY_AXIS,
    QUERY_AXIS,
    compact_ints,
    discrete_colorscale,
    heatmap_parts,
    matrix_heatmap_parts,
    named_colorscale,
    narrow_title,
)
from relviz.inspection import OffsetProfile, RunView
from relviz.schemes.view_kinds import PositionStructure

__all__ = [
    "ATTENTION_SCALE", "GRID_SIDE", "MASKED_BG", "STRIP_COLOURS", "STRIP_TEXT_MAX", "TOKEN_TICKS", "attention_grid",
    "attention_grid_parts", "attention_heatmap", "attention_heatmap_parts", "colour_rows", "colour_top", "grid_block",
    "offset_profile_figure", "offset_profile_parts", "prediction_strip", "prediction_strip_parts", "structure_heatmap",
    "structure_heatmap_parts",
]

#: The most cells per side of each head in the grid; longer sequences are mean-pooled.
GRID_SIDE = 64
#: The most token labels per axis in the grid (more would overlap at a head's size).
TOKEN_TICKS = 16
#: Prediction strip colours: not counted, correct, wrong, input (with its characters), input (hover only).
STRIP_COLOURS = ["#e3e3e3", "#9ecae1", "#f16913", "#ffffff", "#f4f4f4"]
#: The strip writes the characters in its cells up to this many positions.
STRIP_TEXT_MAX = 128
MASKED_BG = "rgba(0,0,0,0)"  # masked cells are left blank
ATTENTION_SCALE = "Viridis"


def colour_rows(length: int) -> int:
    """First row that sets a head's colour range: rows before it see only a few keys."""
    return min(length - 1, max(1, length // 8))


def colour_top(weights: np.ndarray) -> float:
    """Top of a head's colour range: its largest weight in rows i ≥ colour_rows(L).

    A causal model's first rows see only i + 1 keys, so their weights are large by necessity
    (row 0 is always exactly 1); letting them set the range would wash out the pattern of
    every later row. Larger weights are drawn in the top colour; hover shows exact values.
    """
    weights = np.asarray(weights)
    length = weights.shape[-1]
    return float(max(weights[..., colour_rows(length):, :].max(), 1e-6))


# ---------------------------------------------------------------------------------------
# Prediction against target


def prediction_strip(view: RunView, *, train_length: int | None = None, validate: bool = True) -> go.Figure:
    """:func:`prediction_strip_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(prediction_strip_parts(view, train_length=train_length), validate)


def prediction_strip_parts(view: RunView, *, train_length: int | None = None) -> tuple[list[dict], dict]:
    """Three rows — input, target, prediction — one column per position; wrong predictions in orange.

    Status colours: grey = no answer counts here (too early for the task), blue = correct,
    orange = wrong. Characters are written in the cells up to STRIP_TEXT_MAX positions; longer
    sequences show the input row in light grey (hover gives every character).
    """
    length = view.length
    with_text = length <= STRIP_TEXT_MAX
    status = np.where(view.mask, np.where(view.correct, 1, 2), 0)
    z = np.stack([np.full(length, 3 if with_text else 4), status, status]).astype(np.uint8)
    rows = [list(view.text), list(view.target_text), list(view.predicted_text)]
    verdict = np.where(view.mask, np.where(view.correct, "✓ correct", "✗ wrong"), "not counted")
    hover = np.array([[f"i = {i}<br>input {view.text[i]}<br>target {view.target_text[i]}<br>"
                       f"predicted {view.predicted_text[i]}<br>{verdict[i]}" for i in range(length)]] * 3)
    bands = len(STRIP_COLOURS)
    scale = []
    for value, colour in enumerate(STRIP_COLOURS):  # one solid band per value
        scale += [[value / bands, colour], [(value + 1) / bands, colour]]
    trace = dict(type="heatmap", z=z, x=np.arange(length), y=["input", "target", "predicted"], zmin=-0.5,
                 zmax=bands - 0.5, colorscale=scale, showscale=False, xgap=1, ygap=2, hovertext=hover,
                 hovertemplate="%{hovertext}<extra></extra>")
    if with_text:
        size = 15 if length <= 48 else 11 if length <= 80 else 8
        trace.update(text=np.array(rows), texttemplate="%{text}", textfont=dict(size=size, family="monospace"))
    layout = dict(height=190, margin=dict(l=80, r=10, t=30, b=40),
                  xaxis=dict(title=dict(text="position i"), showgrid=False, range=[-0.5, length - 0.5]),
                  yaxis=dict(autorange="reversed", showgrid=False), plot_bgcolor="white")
    if train_length is not None and length > train_length:
        layout["shapes"] = [dict(type="line", x0=train_length - 0.5, x1=train_length - 0.5, y0=-0.5, y1=2.5,
                                 xref="x", yref="y", line=dict(color="black", width=2, dash="dash"))]
        layout["annotations"] = [dict(x=train_length - 0.5, y=-0.5, yref="y", xref="x", yanchor="bottom",
                                      text=f" trained on length {train_length}: beyond is extrapolation",
                                      showarrow=False, xanchor="left", font=dict(size=12))]
    return figure_parts([trace], layout)


# ---------------------------------------------------------------------------------------
# Attention heatmaps


def _offsets(length: int) -> np.ndarray:
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    return (j - i).astype(np.int16)


def attention_heatmap(weights: np.ndarray, *, layer: int, head: int,
                      structure: PositionStructure | None = None, train_length: int | None = None,
                      height: int = 470, validate: bool = True) -> go.Figure:
    """:func:`attention_heatmap_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(attention_heatmap_parts(weights, layer=layer, head=head, structure=structure,
                                                train_length=train_length, height=height), validate)


def attention_heatmap_parts(weights: np.ndarray, *, layer: int, head: int,
                            structure: PositionStructure | None = None, train_length: int | None = None,
                            height: int = 470) -> tuple[list[dict], dict]:
    """One head's weights [L, L], exact; hover: i, j, j − i, the scheme's value for the cell, weight. Dotted
    white lines at the training length when the sequence is longer."""
    weights = np.asarray(weights, dtype=np.float32)
    length = weights.shape[-1]
    hover: dict[str, np.ndarray] = {"j − i": _offsets(length)}
    if structure is not None:
        hover.update(structure.hover_fields(head))
    trace, frame = matrix_heatmap_parts(weights, x=np.arange(length), y=np.arange(length), hover=hover,
                                        value_label="weight", hover_value=True, colorscale=ATTENTION_SCALE,
                                        title=f"layer {layer + 1}, head {head + 1}: attention weights",
                                        height=height)
    trace.update(zmin=0.0, zmax=colour_top(weights), meta={"customdata": list(hover), "layer": layer, "head": head})
    data, layout = heatmap_parts(trace, **frame)
    narrow_title(layout)                           # beside the structure, in half the page
    if train_length is not None and length > train_length:
        edge = train_length - 0.5
        layout["shapes"] = [dict(type="line", xref="x", yref="y", line=dict(color="white", width=1, dash="dot"),
                                 **shape)
                            for shape in (dict(x0=edge, x1=edge, y0=-0.5, y1=length - 0.5),
                                          dict(x0=-0.5, x1=length - 0.5, y0=edge, y1=edge))]
    return data, layout


def _pool(weights: np.ndarray, block: int) -> np.ndarray:
    """Mean over block × block cells of [..., L, L] (edge blocks average the cells they have), summed in float64.
    Zero padding and the cells' count per block: the same sums and quotients as a NaN-padded np.nanmean, in a
    third of its time (~5 ms of a move at length 256 with 6 layers)."""
    length = weights.shape[-1]
    n = math.ceil(length / block)
    if n * block == length:
        padded = weights.astype(np.float64)
    else:
        padded = np.zeros(weights.shape[:-2] + (n * block, n * block), dtype=np.float64)
        padded[..., :length, :length] = weights
    sums = padded.reshape(weights.shape[:-2] + (n, block, n, block)).sum(axis=(-3, -1))
    sides = np.minimum(block, length - np.arange(n) * block)  # [n] cells of each block along one side
    return (sums / (sides[:, None] * sides[None, :])).astype(np.float32)


def _tick_text(token: str, limit: int = 10) -> str:
    """A token as an axis label: its text, cut to ``limit`` characters."""
    return token if len(token) <= limit else token[:limit - 1] + "…"


def grid_block(length: int) -> int:
    """Cells per side of one displayed grid cell (1 = exact)."""
    return max(1, math.ceil(length / GRID_SIDE))


def grid_caption(length: int, *, causal: bool, structure_label: str | None = None) -> str:
    """How to read the grid of every layer and head at ``length``: rows, the colour range (from
    colour_rows), the hover (with the scheme's quantity ``structure_label``), the downsampling (grid_block)."""
    block = grid_block(length)
    return ("Row i is query i; its colours are how much it attends to each key j (rows sum to 1"
            + (", and a causal model gives future keys j > i exactly 0" if causal else "") + "). "
            f"Each head has its own colour range, up to its largest weight from row {colour_rows(length)} on "
            "(the first rows see only a few keys, so their weights are large by necessity: they show in the top "
            "colour). Hover for the exact weight, j − i"
            + (f" and the scheme's {structure_label}" if structure_label is not None else "") + ". "
            + (f"**Downsampled:** each cell is the mean of a {block} × {block} block (hover gives its ranges); the "
               "close-up above is exact." if block > 1 else "A diagonal stripe = one fixed offset j − i."))


def attention_grid(weights: np.ndarray, *, structure: PositionStructure | None = None,
                   tokens: Sequence[str] | None = None, shared_scale: bool = False, titled: bool = True,
                   validate: bool = True) -> go.Figure:
    """:func:`attention_grid_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    data, layout = attention_grid_parts(weights, structure=structure, tokens=tokens, shared_scale=shared_scale,
                                        titled=titled)
    return go.Figure({"data": data, "layout": layout}, _validate=validate)


def attention_grid_parts(weights: np.ndarray, *, structure: PositionStructure | None = None,
                         tokens: Sequence[str] | None = None, shared_scale: bool = False,
                         titled: bool = True) -> tuple[list[dict], dict]:
    """Every layer (rows) and head (columns) as small heatmaps, each with its own colour range.

    Up to GRID_SIDE positions every cell is exact, with the full hover (i, j, j − i, the
    scheme's value, weight). Longer sequences are mean-pooled to at most GRID_SIDE cells per
    side; hover then gives the block's ranges of i and j and its mean weight.
    ``tokens`` (one per position) label the axes in place of numbers (at most TOKEN_TICKS of
    them, evenly spaced); ``shared_scale`` gives every head one colour range with a colour bar,
    so heads compare by colour. ``titled=False`` leaves the title to the page's heading.
    """
    weights = np.asarray(weights, dtype=np.float32)
    n_layers, n_heads, length, _ = weights.shape
    block = grid_block(length)
    gap_x, gap_y = 0.04, 0.10 / max(n_layers, 1) + 0.02
    width = (1 - gap_x * (n_heads - 1)) / n_heads
    height = (1 - gap_y * (n_layers - 1)) / n_layers
    data, annotations = [], []
    layout: dict = {}
    shown = _pool(weights, block) if block > 1 else weights
    side = shown.shape[-1]
    starts = np.arange(side) * block
    top = colour_top(weights)  # the shared range: every head's largest weight from row colour_rows(L) on
    ticks: dict = {}
    # the parts are exactly what validation makes of them: the scale expanded (plotly.js reads a name with its
    # own stops), no None titles
    scale = named_colorscale(ATTENTION_SCALE)
    if tokens is not None and block == 1:
        if len(tokens) != length:
            raise ValueError(f"tokens must have one entry per position ({length}), got {len(tokens)}")
        shown_at = starts[::-(-length // TOKEN_TICKS)]
        ticks = dict(tickmode="array", tickvals=shown_at.tolist(),
                     ticktext=[_tick_text(tokens[k]) for k in shown_at])
    for layer in range(n_layers):
        for head in range(n_heads):
            n = layer * n_heads + head + 1
            suffix = "" if n == 1 else str(n)
            x0 = head * (width + gap_x)
            y1 = 1 - layer * (height + gap_y)
            z = shown[layer, head]
            trace = dict(type="heatmap", z=z, x=starts, y=starts, xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                         name=f"layer {layer + 1}, head {head + 1}")
            trace.update(dict(coloraxis="coloraxis") if shared_scale else
                         dict(colorscale=scale, showscale=False, zmin=0.0, zmax=colour_top(z)))
            if block == 1:
                fields: dict[str, np.ndarray] = {"j − i": _offsets(length)}
                if structure is not None:
                    fields.update(structure.hover_fields(head))
                custom, lines = hover_data(fields, (length, length))
                trace["customdata"] = custom
                trace["meta"] = {"customdata": list(fields), "layer": layer, "head": head}
                trace["hovertemplate"] = "<br>".join(
                    [f"layer {layer + 1}, head {head + 1}", "i = %{y}", "j = %{x}"] + lines
                    + ["weight = %{z:.4g}"]) + "<extra></extra>"
            else:
                ends = np.minimum(starts + block - 1, length - 1)
                custom = np.stack(np.broadcast_arrays(ends[:, None], ends[None, :]), axis=-1)
                trace["customdata"] = compact_ints(custom)
                trace["meta"] = {"customdata": ["i last", "j last"], "layer": layer, "head": head, "block": block}
                trace["hovertemplate"] = "<br>".join(
                    [f"layer {layer + 1}, head {head + 1}", "i = %{y}…%{customdata[0]}",
                     "j = %{x}…%{customdata[1]}", f"mean weight of the {block}×{block} block = %{{z:.4g}}"]
                ) + "<extra></extra>"
            data.append(trace)
            layout[f"xaxis{suffix}"] = dict(domain=[x0, x0 + width], anchor=f"y{suffix}", showgrid=False,
                                            constrain="domain", ticks="", showticklabels=layer == n_layers - 1,
                                            **(dict(title=dict(text="key j")) if layer == n_layers - 1 else {}),
                                            **ticks)
            layout[f"yaxis{suffix}"] = dict(domain=[y1 - height, y1], anchor=f"x{suffix}", autorange="reversed",
                                            showgrid=False, scaleanchor=f"x{suffix}", constrain="domain",
                                            showticklabels=head == 0,
                                            **(dict(title=dict(text="query i")) if head == 0 else {}), **ticks)
            annotations.append(dict(text=f"<b>layer {layer + 1}</b>, head {head + 1}", x=x0 + width / 2, y=y1,
                                    xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                                    showarrow=False, font=dict(size=13)))
    title = "attention of every layer and head" + (f" (mean-pooled {block}×{block})" if block > 1 else "")
    height_px = 40 + 250 * n_layers
    layout.update(height=height_px, margin=dict(l=60, r=10, t=50 if titled else 30, b=40), annotations=annotations,
                  plot_bgcolor="white")
    if titled:
        layout["title"] = dict(text=title, x=0, xanchor="left", y=0.995, yanchor="top")
    if shared_scale:
        layout["coloraxis"] = dict(colorscale=scale, cmin=0.0, cmax=top,
                                   colorbar=dict(title=dict(text="weight"), len=min(1.0, 320 / height_px),
                                                 y=1.0, yanchor="top"))
    return figure_parts(data, layout)


# ---------------------------------------------------------------------------------------
# The scheme's position structure


def structure_heatmap(structure: PositionStructure, *, head: int = 0, height: int = 470,
                      validate: bool = True) -> go.Figure:
    """:func:`structure_heatmap_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(structure_heatmap_parts(structure, head=head, height=height), validate)


def structure_heatmap_parts(structure: PositionStructure, *, head: int = 0,
                            height: int = 470) -> tuple[list[dict], dict]:
    """The scheme's value of every cell (index, bias or similarity) at this length.

    A causal model's future cells (j > i) are left blank: they receive no attention.
    """
    values = structure.head_values(head)
    length = values.shape[-1]
    z = values.astype(np.float32)
    if structure.masked_future:
        z = np.where(np.triu(np.ones((length, length), dtype=bool), 1), np.nan, z).astype(np.float32)
    hover = {"j − i": _offsets(length)}
    hover.update({label: v for label, v in structure.hover_fields(head).items() if label != structure.label})
    custom, lines = hover_data(hover, (length, length))
    value_fmt = "" if structure.discrete is not None else ":.4g"
    trace: dict = dict(type="heatmap", z=z, x=np.arange(length), y=np.arange(length), customdata=custom,
                       hoverongaps=False,
                       hovertemplate="<br>".join(["i = %{y}", "j = %{x}"] + lines
                                                 + [f"{structure.label} = %{{z{value_fmt}}}"]) + "<extra></extra>")
    trace["meta"] = {"customdata": list(hover), "head": head}
    if structure.discrete is not None:
        lo, hi = structure.discrete
        if structure.masked_future and lo < 0:
            lo = 0  # the −1 "future" marker is left blank, not coloured
        count = hi - lo + 1
        step = max(1, math.ceil(count / 12))
        ticks = list(range(lo, hi + 1, step))
        trace.update(zmin=lo - 0.5, zmax=hi + 0.5, colorscale=discrete_colorscale(count),
                     colorbar=dict(title=dict(text=structure.label, side="right"), tickvals=ticks,
                                   ticktext=[str(t) for t in ticks], thickness=14))
    else:
        finite = z[np.isfinite(z)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if lo >= -1.0001 and hi <= 1.0001 and lo < 0 < hi:
            trace.update(colorscale=named_colorscale("RdBu"), zmid=0.0)  # expanded: plotly.js's 'RdBu' is reversed
        else:
            trace.update(colorscale=named_colorscale("Cividis"))
        trace["colorbar"] = dict(title=dict(text=structure.label, side="right"), thickness=14)
    title = structure.title + (f" — head {head + 1}" if structure.per_head else "")
    layout = dict(height=height, margin=dict(l=60, r=10, t=40, b=50), plot_bgcolor=MASKED_BG,
                  title=dict(text=title, x=0, xanchor="left"),
                  xaxis=dict(title=dict(text=KEY_AXIS), constrain="domain", showgrid=False, zeroline=False,
                             range=[-0.5, length - 0.5]),
                  yaxis=dict(title=dict(text=QUERY_AXIS), showgrid=False, zeroline=False,
                             range=[length - 0.5, -0.5]))
    return figure_parts([trace], narrow_title(layout))      # beside the head's weights, in half the page


# ---------------------------------------------------------------------------------------
# Mean attention by offset


def offset_profile_figure(profile: OffsetProfile, *, causal: bool, answer_offset: int | None = None,
                          window: tuple[int, int] | None = None, validate: bool = True) -> go.Figure:
    """:func:`offset_profile_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(offset_profile_parts(profile, causal=causal, answer_offset=answer_offset, window=window),
                        validate)


def offset_profile_parts(profile: OffsetProfile, *, causal: bool, answer_offset: int | None = None,
                         window: tuple[int, int] | None = None) -> tuple[list[dict], dict]:
    """Mean weight against j − i, one panel per layer, one line per head.

    ``answer_offset`` draws a dashed line where the task's answer sits (shift: −s);
    ``window`` shades an offset range (window_max: −(w − 1)..0).
    """
    mean = np.asarray(profile.mean)
    n_layers, n_heads, _ = mean.shape
    keep = profile.offsets <= 0 if causal else np.ones_like(profile.offsets, dtype=bool)
    x = profile.offsets[keep]
    counts = profile.counts[keep]
    # At most three panels side by side (six in a row squeezed titles and labels into each other).
    cols = min(n_layers, 3)
    rows = -(-n_layers // cols)
    gap_x, gap_y = 0.07, 0.32 / rows
    width = (1 - gap_x * (cols - 1)) / cols
    panel_height = (1 - gap_y * (rows - 1)) / rows
    data, layout, shapes, annotations = [], {}, [], []
    top = float(mean[..., keep].max()) if mean.size else 1.0
    for layer in range(n_layers):
        suffix = "" if layer == 0 else str(layer + 1)
        row, col = divmod(layer, cols)
        x0 = col * (width + gap_x)
        y1 = 1 - row * (panel_height + gap_y)
        for head in range(n_heads):
            data.append(dict(
                type="scatter", mode="lines+markers", x=x, y=mean[layer, head, keep].astype(np.float32),
                customdata=counts.astype(np.uint16), xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                name=f"head {head + 1}", legendgroup=f"head {head + 1}", showlegend=layer == 0,
                line=dict(color=head_colour(head), width=2), marker=dict(size=4),
                hovertemplate=(f"layer {layer + 1}, head {head + 1}<br>j − i = %{{x}}<br>mean weight = %{{y:.3f}}"
                               "<br>over %{customdata} cells<extra></extra>")))
        layout[f"xaxis{suffix}"] = dict(domain=[x0, x0 + width], anchor=f"y{suffix}",
                                        title=dict(text="j − i", standoff=12), automargin=True, zeroline=False)
        layout[f"yaxis{suffix}"] = dict(anchor=f"x{suffix}", range=[0, top * 1.08 + 1e-9],
                                        domain=[max(y1 - panel_height, 0.0), y1],
                                        **(dict(title=dict(text="mean weight")) if col == 0 else {}))
        annotations.append(dict(x=x0, y=y1, xref="paper", yref="paper", text=f"layer {layer + 1}",
                                showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=14)))
        if answer_offset is not None and x.min() <= answer_offset <= x.max():
            shapes.append(dict(type="line", xref=f"x{suffix}", yref=f"y{suffix} domain", x0=answer_offset,
                               x1=answer_offset, y0=0, y1=1, line=dict(color="black", dash="dash", width=1.5)))
            if layer == 0:  # once: the dashed line in every panel is the same offset
                annotations.append(dict(x=answer_offset, y=1, xref="x", yref="y domain",
                                        text=f"answer: j − i = {answer_offset}", showarrow=False, xanchor="right",
                                        yanchor="top", font=dict(size=12)))
        if window is not None:
            shapes.append(dict(type="rect", xref=f"x{suffix}", yref=f"y{suffix} domain", x0=window[0] - 0.5,
                               x1=window[1] + 0.5, y0=0, y1=1, fillcolor="rgba(0,0,0,0.08)", line=dict(width=0),
                               layer="below"))
    height = 90 + 250 * rows
    plot_px = height - 60 - 110
    layout.update(height=height + 40, margin=dict(l=60, r=10, t=60, b=110), annotations=annotations,
                  title=dict(text="mean attention by offset j − i", x=0, xanchor="left"),
                  legend=dict(orientation="h", y=-70 / plot_px, x=0, xanchor="left", yanchor="top"),
                  hovermode="closest", **(dict(shapes=shapes) if shapes else {}))
    return figure_parts(data, layout)
