"""Figures for T5's relative position buckets: the bucket map, the bucket-versus-distance
curve, and the ranges table's rows.

All computed per offset with relviz.positions (the reference semantics, float32 log);
invalid settings raise the library's ValueError before anything is drawn.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import plotly.graph_objects as go
import torch

from relviz._words import minus
from relviz.figures.heatmap import DISCRETE_PALETTE as PALETTE
from relviz.figures.heatmap import (
    AXIS_LINE_PX,
    diagonal_counts,
    legend_below_axis,
    narrow_figure_title,
    narrow_title,
    readable,
    readable_layout,
)
from relviz.figures.toeplitz import ToeplitzFigure, ToeplitzOverview, toeplitz_heatmap, toeplitz_overview, toeplitz_view
from relviz.figures.toeplitz_canvas import ToeplitzImage, ToeplitzOverviewImage, toeplitz_overview_image
from relviz.figures.toeplitz_window import HoverField, Window
from relviz.positions import BucketRange, offset_range, t5_bucket, t5_bucket_ranges, t5_config
from relviz.t5_notes import last_bucket_start

#: Background bands of the curve: hues no line uses (the lines are blue = past, red = future).
EXACT_COLOUR = "rgba(60, 170, 90, 0.16)"
LOG_COLOUR = "rgba(150, 90, 200, 0.13)"
LAST_COLOUR = "rgba(120, 120, 120, 0.15)"
PAST_COLOUR = "#2e86ab"
FUTURE_COLOUR = "#c73e1d"


@dataclass(frozen=True)
class T5Offsets:
    """Per-offset buckets of one matrix, and the bucket ranges that describe them."""

    offset: np.ndarray           # j − (q_offset + i), one per diagonal
    bucket: np.ndarray           # T5 bucket of each diagonal
    ranges: list[BucketRange]    # every bucket's offsets within ±extent
    extent: int                  # max(max_distance, longest |j − i| in the matrix)
    num_buckets: int
    max_distance: int
    bidirectional: bool

    @cached_property
    def bucket_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per offset, the first and last j − i its bucket holds, each (q_len + k_len − 1,): the map's hover.
        An end bucket goes on forever: its range stops at this matrix's edge, not at ±extent. Computed once per
        matrix (the object is cached read-only), not per window move: 2 × 2M values at 2^20 positions."""
        lowest, highest = int(self.offset.min()), int(self.offset.max())
        first = np.array([(max(r.first, lowest) if r.open_low else r.first) if r.used else 0
                          for r in self.ranges])[self.bucket]
        last = np.array([(min(r.last, highest) if r.open_high else r.last) if r.used else 0
                         for r in self.ranges])[self.bucket]
        return first, last


#: The narrowest plot the bucket curve's band labels are laid out for (px): half of a 1280 px page.
LABEL_PLOT_PX = 300
#: The budget's title's longest line (it was drawn in 3/5 of the page, ~285 px at 819 px; now the page's width).
BUDGET_TITLE_CHARS = 32

def t5_offsets(q_len: int, k_len: int, *, num_buckets: int, max_distance: int, bidirectional: bool,
               q_offset: int = 0) -> T5Offsets:
    config = t5_config(num_buckets, max_distance, bidirectional)
    offsets = offset_range(q_len, k_len, q_offset=q_offset, device="cpu")
    buckets = config.bucket(offsets)
    extent = max(config.max_distance, int(offsets.abs().max()))
    ranges = t5_bucket_ranges(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
                              max_offset=extent)
    return T5Offsets(offsets.numpy(), buckets.numpy(), ranges, extent, num_buckets, max_distance, bidirectional)


def bucket_map(values: T5Offsets, q_len: int, k_len: int, *, q_offset: int = 0, window: Window | None = None,
               height: int = 430, title: str | None = None, browser: bool = False) -> ToeplitzFigure | ToeplitzImage:
    """The bucket of every cell, discrete colours; hover adds the bucket's range of j − i.

    ``browser=True``: a large window comes back as a ToeplitzImage (drawn in the browser, relviz.app.display)."""
    first, last = values.bucket_bounds
    hover = [HoverField("bucket first j − i", first, group="range", line="bucket holds j − i = {}"),
             HoverField("bucket last j − i", last, group="range", line="… {}")]
    label = ("bidirectional" if values.bidirectional else "unidirectional")
    build = toeplitz_view if browser else toeplitz_heatmap
    view = build(
        values.bucket, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
        discrete_range=(0, values.num_buckets - 1), colorscale=PALETTE, hover=hover, height=height,
        title=title or f"T5 bucket: {values.num_buckets} / {values.max_distance}, {label}")
    if isinstance(view, ToeplitzFigure):   # in half the page, beside the curve or Shaw's map: cut at 819 px
        narrow_figure_title(view.figure)
    return view


def bucket_overview(values: T5Offsets, q_len: int, k_len: int, *, q_offset: int = 0,
                    window: Window | None = None, height: int = 430,
                    browser: bool = False) -> ToeplitzOverview | ToeplitzOverviewImage:
    """Pooled overview of the bucket map (``browser=True``: described for the browser to draw, relviz.app.display)."""
    build = toeplitz_overview_image if browser else toeplitz_overview
    return build(values.bucket, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
                 value_range=(0, values.num_buckets - 1), colorscale=PALETTE, height=height,
                 title="overview of the bucket map (block means)")


@dataclass(frozen=True)
class Regions:
    """Per direction, in distance n = |j − i|: exact for n < max_exact, logarithmic up to the
    start of the last bucket, which then holds every longer distance."""

    max_exact: int
    last_start: int           # first distance in the last bucket of a direction
    max_distance: int


def regions(num_buckets: int, max_distance: int, bidirectional: bool) -> Regions:
    config = t5_config(num_buckets, max_distance, bidirectional)
    return Regions(config.max_exact, last_bucket_start(num_buckets, max_distance, bidirectional),
                   config.max_distance)


def bucket_curve(num_buckets: int, max_distance: int, bidirectional: bool, *, log_x: bool = False,
                 longest: int | None = None, height: int = 400, validate: bool = True) -> go.Figure:
    """Bucket versus distance |j − i|, one step line per direction, regions shaded and marked. ``validate=False``:
    the same figure without plotly's per-property validation (a move to a new setting builds it)."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    reg = regions(num_buckets, max_distance, bidirectional)
    top = max((6 if log_x else 2) * config.max_distance, 16, longest or 0)
    distances = np.arange(1 if log_x else 0, top + 1)
    n = torch.from_numpy(distances)
    past, future = config.bucket(-n).numpy(), config.bucket(n).numpy()
    traces = [
        dict(type="scatter", x=distances, y=past.astype(np.float32), mode="lines",
             name="past: j − i = −n", line=dict(color=PAST_COLOUR, width=3, shape="hv"),
             hovertemplate="n = %{x}: j − i = −%{x} → bucket %{y}<extra>past</extra>"),
        dict(type="scatter", x=distances, y=future.astype(np.float32), mode="lines",
             name="future: j − i = +n" + ("" if bidirectional else " (all bucket 0)"),
             line=dict(color=FUTURE_COLOUR, width=3, dash="solid" if bidirectional else "dot", shape="hv"),
             hovertemplate="n = %{x}: j − i = +%{x} → bucket %{y}<extra>future</extra>"),
    ]
    lo = 0.8 if log_x else -0.5
    hi = top * (1.15 if log_x else 1.02)
    spans = [(lo, reg.max_exact - 0.5, EXACT_COLOUR, f"exact n < {reg.max_exact}"),
             (reg.max_exact - 0.5, reg.last_start - 0.5, LOG_COLOUR, "logarithmic"),
             (reg.last_start - 0.5, hi, LAST_COLOUR, "last bucket")]

    def at(x: float) -> float:  # annotation x in axis units (log10 on a log axis)
        return float(np.log10(x)) if log_x else x

    def roomier_side(x: float) -> dict:
        """A line's note goes on the side of the plot with more room: in a narrow column a note left of
        n = 91 (32 / 128) ran over the y axis's tick labels, one right of a line near the end off the plot."""
        right = (at(x) - at(lo)) / (at(hi) - at(lo)) < 0.5
        return dict(xanchor="left", xshift=4) if right else dict(xanchor="right", xshift=-4)

    note = dict(showarrow=False, yref="paper", bgcolor="rgba(255,255,255,0.75)")
    shapes, annotations = [], []
    # Region labels sit just above the plot, over their band, where no line can run through them; a
    # narrow band's label is pushed up a row so neighbouring labels do not overlap.
    row = 0
    for x0, x1, colour, text in spans:
        x0 = max(x0, lo)
        if x1 > x0:
            shapes.append(dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1, fillcolor=colour,
                               line=dict(width=0), layer="below"))
            annotations.append(dict(x=at(x0), y=1.0, text=text, xanchor="left", yanchor="bottom", align="left",
                                    xshift=2, yshift=2 + 18 * row, font=dict(size=13, color="#333"),
                                    bgcolor=colour.replace("0.1", "0.3"), showarrow=False, yref="paper"))
            width = (float(np.log10(x1)) - float(np.log10(x0))) / (float(np.log10(hi)) - float(np.log10(lo))) \
                if log_x else (x1 - x0) / (hi - lo)
            # the label's own width, as a share of a plot in half of a 1280 px page (~300 px, 7 px per
            # character at 13 px): "exact n < 32" at 128 buckets ran into "logarithmic" behind a 12 % band
            row = 1 if width < len(text) * 7 / LABEL_PLOT_PX and row == 0 else 0
    shapes.append(dict(type="line", xref="x", yref="paper", x0=reg.max_distance, x1=reg.max_distance, y0=0, y1=1,
                       line=dict(color="black", dash="dash", width=1.5)))
    annotations.append(dict(x=at(reg.max_distance), y=0.02, text=f"max_distance<br>= {reg.max_distance}",
                            font=dict(size=12), **note, **roomier_side(reg.max_distance)))
    shapes.append(dict(type="line", xref="x", yref="paper", x0=reg.last_start, x1=reg.last_start, y0=0, y1=1,
                       line=dict(color="#555", dash="dot", width=1.5)))
    annotations.append(dict(x=at(reg.last_start), y=0.22, text=f"last bucket<br>from n = {reg.last_start}",
                            font=dict(size=12), **note, **roomier_side(reg.last_start)))
    xaxis = dict(title=dict(text="distance n = |j − i|" + (" (log scale; n = 0 → bucket 0)" if log_x else ""),
                            standoff=4),
                 type="log" if log_x else "linear",
                 range=[float(np.log10(lo)), float(np.log10(hi))] if log_x else [lo, hi])
    layout = legend_below_axis(dict(
        height=height - 16, margin=dict(l=60, r=10, t=78, b=80), shapes=shapes, annotations=annotations,
        title=dict(text="bucket vs distance n = |j − i|", x=0, xanchor="left", y=0.98, yanchor="top"), xaxis=xaxis,
        yaxis=dict(title=dict(text="bucket"), range=[-1, num_buckets], dtick=max(1, num_buckets // 8))),
        rows=len(traces))  # two entries, one a row: at a third of 1280 px they do not fit side by side
    return go.Figure({"data": traces, "layout": readable_layout(layout)}, _validate=validate)


def _offset_text(r: BucketRange) -> str:
    if not r.used:
        return "unused"
    if r.open_low and r.open_high:
        return "every j − i"
    if r.open_low:
        return f"≤ {minus(r.last)}"
    if r.open_high:
        return f"≥ {minus(r.first)}"
    return minus(r.first) if r.first == r.last else f"{minus(r.first)} … {minus(r.last)}"


def ranges_rows(values: T5Offsets, q_len: int, k_len: int) -> list[dict]:
    """One row per bucket: its offsets, how many, its kind, and how many cells of this matrix use it."""
    config = t5_config(values.num_buckets, values.max_distance, values.bidirectional)
    cells = np.bincount(values.bucket, weights=diagonal_counts(q_len, k_len),
                        minlength=values.num_buckets).astype(np.int64)
    rows = []
    for r in values.ranges:
        local = r.bucket % config.buckets_per_direction
        if not r.used:
            kind = "unused"
        elif not values.bidirectional and r.bucket == 0:
            kind = "0 and the future"  # short: a projector shows ~20 characters of it
        elif r.open_low or r.open_high:
            kind = "last: all farther"
        elif local < config.max_exact:
            kind = "exact"
        else:
            kind = "logarithmic"
        rows.append({
            "bucket": r.bucket,
            "j − i": _offset_text(r),
            "offsets": "∞" if r.open_low or r.open_high else str(r.count),
            "kind": kind,
            "cells here": int(cells[r.bucket]),
        })
    return rows


# ---------------------------------------------------------------------------------------
# Precision and references: which offsets move with the arithmetic


@readable
def precision_figure(num_buckets: int, max_distance: int, bidirectional: bool, *,
                     changes: list, edges: list, max_offset: int, height: int = 380) -> go.Figure:
    """Bucket of every offset j − i in float32 (the line), with the offsets whose bucket moves in
    bfloat16 / float16 (markers at the low-precision bucket) and where Mesh TensorFlow differs from
    Hugging Face (relviz). ``changes``: relviz.precision.PrecisionChange; ``edges``: EdgeOffset."""
    offsets = np.arange(-max_offset, max_offset + 1)
    buckets = t5_bucket(torch.from_numpy(offsets), num_buckets=num_buckets, max_distance=max_distance,
                        bidirectional=bidirectional).numpy()
    traces = [go.Scatter(x=offsets, y=buckets.astype(np.float32), mode="lines", line_shape="hvh",
                         name="float32 (relviz = Hugging Face)", line=dict(color="#444444", width=2),
                         hovertemplate="j − i = %{x}: bucket %{y} in float32<extra></extra>")]
    styles = {"bfloat16": dict(color="#d62728", symbol="circle"), "float16": dict(color="#1f77b4",
                                                                                 symbol="diamond")}
    for name, style in styles.items():
        hits = [c for c in changes if c.dtype == name]
        traces.append(go.Scatter(
            x=[c.offset for c in hits], y=[float(c.got) for c in hits], mode="markers",
            name=f"{name}: {len(hits)} offset{'s' if len(hits) != 1 else ''} change bucket",
            marker=dict(size=9, line=dict(width=1, color="white"), **style),
            customdata=[[c.float32] for c in hits],
            hovertemplate=f"j − i = %{{x}}: bucket %{{y}} in {name} (float32: %{{customdata[0]}})<extra></extra>"))
    traces.append(go.Scatter(
        x=[e.offset for e in edges], y=[float(e.mesh_tf) for e in edges], mode="markers",
        name=f"Mesh TensorFlow ≠ Hugging Face: {len(edges)} offset{'s' if len(edges) != 1 else ''}",
        marker=dict(size=14, symbol="x-thin", line=dict(width=3, color="#9467bd")),
        customdata=[[e.hf, e.exact] for e in edges],
        hovertemplate="j − i = %{x}: Mesh TF bucket %{y}, Hugging Face %{customdata[0]}, "
                      "exact arithmetic %{customdata[1]}<extra></extra>"))
    return go.Figure(data=traces, layout=dict(
        height=height, margin=dict(l=60, r=10, t=40, b=100),
        title=dict(text="T5 buckets in float32, bfloat16 and float16", x=0, xanchor="left"),
        xaxis=dict(title=dict(text="relative position j − i", standoff=4)),
        yaxis=dict(title=dict(text="bucket"), range=[-1, num_buckets]),
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0)))


# ---------------------------------------------------------------------------------------
# Pictures for the usual confusions


def bucket_budget_figure(num_buckets: int, max_distance: int, bidirectional: bool, *,
                         height: int = 190, validate: bool = True) -> go.Figure:
    """Where the num_buckets go: per direction, max_exact exact buckets then the logarithmic ones
    (bidirectional halves first, then halves again: "16 close + 16 far" is really 8 + 8 per direction).
    ``validate=False``: the same figure without plotly's validation."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    per_dir, me = config.buckets_per_direction, config.max_exact
    parts = []  # (label, first bucket, count, colour)
    if bidirectional:
        for name, start in (("past", 0), ("future", per_dir)):
            exact_first = start + (1 if name == "future" else 0)
            if name == "future":
                parts.append((f"{start}: unused", start, 1, "#bbbbbb"))
            parts.append((f"{name} exact", exact_first, me - (exact_first - start), "#3caa5a"))
            parts.append((f"{name} logarithmic", start + me, per_dir - me, "#9a5ac8"))
        if num_buckets % 2:
            parts.append(("odd: unused", 2 * per_dir, 1, "#bbbbbb"))
    else:  # one direction: bucket 0 holds j − i = 0 and every future offset, the rest the past
        parts.append(("exact: j − i ≥ 0, then past", 0, me, "#3caa5a"))
        parts.append(("past logarithmic", me, per_dir - me, "#9a5ac8"))
    # A one-bucket part is too narrow for its label inside (plotly shrank and turned it, tiny and vertical):
    # its label sits above the bar instead. The others' labels take two lines, the part's name over its buckets:
    # on one line plotly shrank them to fit a quarter of the bar, to ~8 px at 819 px (the page draws the bar across
    # its width, where "future logarithmic" fits a quarter at 13 px).
    traces = [dict(type="bar", x=[count], y=["buckets"], base=[first - 0.5], orientation="h", name=label,
                   marker=dict(color=colour, line=dict(color="white", width=2)),
                   text=[f"{label}<br>{first}…{first + count - 1}" if count > 1 else ""],
                   textposition="inside" if count > 1 else "none", insidetextanchor="middle",
                   textfont=dict(size=13),
                   hovertemplate=f"{label}: buckets {first}…{first + count - 1} ({count})<extra></extra>",
                   showlegend=False)
              for label, first, count, colour in parts if count > 0]
    # the last bucket's note ends at its bar's right edge: centred there, half of "odd: unused" ran off the chart
    notes = [dict(x=first + 0.5 if first == num_buckets - 1 else first, xanchor="right" if first == num_buckets - 1
                  else "center", y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False, text=label,
                  font=dict(size=13, color="#555555")) for label, first, count, _ in parts if count == 1]
    # two lines, broken where the sentence breaks: on one, it ran 115 px off the chart in 3/5 of 819 px
    title = (f"where the {num_buckets} buckets go:<br>max_exact = {me} per direction" if bidirectional else
             f"where the {num_buckets} buckets go<br>(one direction): max_exact = {me}")
    layout = dict(
        height=height, barmode="overlay", margin=dict(l=10, r=10, t=60 if notes else 40, b=40),
        title=dict(text=title, x=0,
                   xanchor="left", y=0.98, yanchor="top"), **({"annotations": notes} if notes else {}),
        xaxis=dict(title=dict(text="bucket"), range=[-0.5, num_buckets - 0.5]), yaxis=dict(visible=False, title={}))
    # hung from the top; a third line's room keeps the notes above one-bucket parts clear of its second line
    narrow_title(layout, lines=3 if notes else 2, chars=BUDGET_TITLE_CHARS)
    return go.Figure({"data": traces, "layout": readable_layout(layout)}, _validate=validate)


@readable
def sharing_figure(layers: int = 6, *, height: int = 200) -> go.Figure:
    """Which bias table each layer reads: T5 (one table, shared) against UMT5 (one per layer)."""
    z = np.array([np.zeros(layers), np.arange(1, layers + 1)], dtype=np.float32)
    # each cell says only the table's number: "table 1" was wider than a cell in half of 819 px (the texts ran into
    # each other, the end cells' cut at the plot's edge)
    text = np.array([["1"] * layers, [str(n) for n in range(1, layers + 1)]])
    return go.Figure(go.Heatmap(
        z=z, x=[f"layer {n}" for n in range(1, layers + 1)], y=["T5", "UMT5"], text=text,
        texttemplate="%{text}", textfont=dict(size=13), colorscale="Turbo", showscale=False, xgap=3, ygap=3,
        hovertemplate="%{y}, %{x}: reads table %{text}<extra></extra>"), layout=dict(
        height=height, margin=dict(l=60, r=10, t=40, b=30),
        title=dict(text="bias table each layer adds", x=0, xanchor="left"),
        yaxis=dict(autorange="reversed")))


def composition_figure(num_buckets: int, max_distance: int, bidirectional: bool, *, depth: int = 3,
                       height: int = 230, validate: bool = True) -> go.Figure:
    """Distances one layer tells apart (its own bucket) against what stacked layers can resolve:
    with d layers, hops of up to max_exact − 1 exact positions each reach d · (max_exact − 1) exactly.
    ``validate=False``: the same figure without plotly's validation."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    me = config.max_exact
    top = max(depth * (me - 1) + max(4, me), 12)
    n = np.arange(0, top + 1)
    buckets = config.bucket(torch.from_numpy(-n)).numpy()
    shared = np.bincount(buckets, minlength=num_buckets)[buckets] > 1
    rows = []
    for d in range(1, depth + 1):
        rows.append(np.where(n <= d * (me - 1), 1.0, np.where(shared, 0.0, 1.0)) if d > 1 else
                    np.where(shared, 0.0, 1.0))
    z = np.array(rows, dtype=np.float32)
    custom = np.broadcast_to(buckets, z.shape)
    trace = dict(
        type="heatmap", z=z, x=n, y=[f"{d} layer{'s' if d > 1 else ''}" for d in range(1, depth + 1)], zmin=0, zmax=1,
        colorscale=[[0, "#f2c14e"], [0.5, "#f2c14e"], [0.5, "#3caa5a"], [1, "#3caa5a"]], showscale=False,
        customdata=custom, xgap=1, ygap=2,
        hovertemplate="distance %{x} (j − i = −%{x}), %{y}: bucket %{customdata}<br>"
                      "green: told apart exactly; yellow: shares its bucket, blind<extra></extra>")
    layout = dict(
        height=height + AXIS_LINE_PX, margin=dict(l=70, r=10, t=40, b=40 + AXIS_LINE_PX),
        title=dict(text="told apart exactly (green) or blind (yellow)", x=0, xanchor="left"),
        # in half the page, two lines: on one, the title ran 85 px and the axis's 12 px off the chart at 819 px
        xaxis=dict(title=dict(text="distance into the past<br>n = i − j")),
        yaxis=dict(autorange="reversed", title={}))   # no title; its font as every readable figure's
    return go.Figure({"data": [trace], "layout": readable_layout(narrow_title(layout))}, _validate=validate)


@readable
def seed_table_figure(max_position: int, *, height: int = 200) -> go.Figure:
    """The seed notebook's "T5" encoder: offsets clipped to ±max_position index a table of
    max_position² rows, of which only 2·max_position + 1 are ever read (Shaw clipping, not T5 buckets)."""
    return narrow_figure_title(_seed_table(max_position, height=height))   # in half the page: 168 px cut at 819 px


def _seed_table(max_position: int, *, height: int) -> go.Figure:
    p = max(int(max_position), 1)
    rows = p * p
    used = min(2 * p + 1, rows)
    # the two parts named in a legend under the axis: inside the bars, plotly shrank "read: 2·8 + 1 = 17" to fit
    # 17 of 64 rows, 9.7 px at 819 px (the read part is (2p + 1) / p² of the bar: thinner as p grows)
    layout = legend_below_axis(dict(height=height, barmode="overlay", margin=dict(l=10, r=10, t=40, b=40),
                                    title=dict(text=f"a “T5” table of max_position² = {rows} rows, clipped at ±{p}",
                                               x=0, xanchor="left"),
                                    xaxis=dict(title=dict(text="table row")), yaxis=dict(visible=False)), rows=2)
    return go.Figure(data=[
        go.Bar(x=[used], y=["rows"], orientation="h", marker_color="#3caa5a", name=f"read: 2·{p} + 1 = {used}",
               hovertemplate=f"rows 0…{used - 1}: read by clip(j − i, −{p}, {p}) + {p}<extra></extra>"),
        go.Bar(x=[rows - used], y=["rows"], base=[used], orientation="h", marker_color="#bbbbbb",
               name=f"never read: {rows - used}", hovertemplate=f"rows {used}…{rows - 1}: never read<extra></extra>")],
        layout=layout)
