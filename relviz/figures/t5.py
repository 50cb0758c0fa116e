"""Figures for T5's relative position buckets: the bucket map, the bucket-versus-distance
curve, and the ranges table's rows.

All computed per offset with relviz.positions (the reference semantics, float32 log);
invalid settings raise the library's ValueError before anything is drawn.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from relviz.figures.shaw import PALETTE, diagonal_counts
from relviz.figures.toeplitz import (
    HoverField,
    ToeplitzFigure,
    ToeplitzOverview,
    Window,
    toeplitz_heatmap,
    toeplitz_overview,
)
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


def t5_offsets(q_len: int, k_len: int, *, num_buckets: int, max_distance: int, bidirectional: bool,
               q_offset: int = 0) -> T5Offsets:
    config = t5_config(num_buckets, max_distance, bidirectional)
    offsets = offset_range(q_len, k_len, q_offset=q_offset, device="cpu")
    buckets = t5_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance,
                        bidirectional=bidirectional)
    extent = max(config.max_distance, int(offsets.abs().max()))
    ranges = t5_bucket_ranges(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
                              max_offset=extent)
    return T5Offsets(offsets.numpy(), buckets.numpy(), ranges, extent, num_buckets, max_distance, bidirectional)


def bucket_map(values: T5Offsets, q_len: int, k_len: int, *, q_offset: int = 0, window: Window | None = None,
               height: int = 430, title: str | None = None) -> ToeplitzFigure:
    """The bucket of every cell, discrete colours; hover adds the bucket's range of j − i."""
    # An end bucket goes on forever: its hover range stops at this matrix's edge, not at ±extent.
    lowest, highest = int(values.offset.min()), int(values.offset.max())
    first = np.array([(max(r.first, lowest) if r.open_low else r.first) if r.used else 0
                      for r in values.ranges])[values.bucket]
    last = np.array([(min(r.last, highest) if r.open_high else r.last) if r.used else 0
                     for r in values.ranges])[values.bucket]
    hover = [HoverField("bucket first j − i", first, group="range", line="bucket holds j − i = {}"),
             HoverField("bucket last j − i", last, group="range", line="… {}")]
    label = ("bidirectional" if values.bidirectional else "unidirectional")
    return toeplitz_heatmap(
        values.bucket, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
        discrete_range=(0, values.num_buckets - 1), colorscale=PALETTE, hover=hover, height=height,
        title=title or f"T5 bucket ({values.num_buckets} buckets, max_distance {values.max_distance}, {label})")


def bucket_overview(values: T5Offsets, q_len: int, k_len: int, *, q_offset: int = 0,
                    window: Window | None = None, height: int = 430) -> ToeplitzOverview:
    return toeplitz_overview(values.bucket, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
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
                 longest: int | None = None, height: int = 400) -> go.Figure:
    """Bucket versus distance |j − i|, one step line per direction, regions shaded and marked."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    reg = regions(num_buckets, max_distance, bidirectional)
    top = max((6 if log_x else 2) * config.max_distance, 16, longest or 0)
    distances = np.arange(1 if log_x else 0, top + 1)
    n = torch.from_numpy(distances)
    past = t5_bucket(-n, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional).numpy()
    future = t5_bucket(n, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional).numpy()
    traces = [
        go.Scatter(x=distances, y=past.astype(np.float32), mode="lines", line_shape="hv",
                   name="past: j − i = −n", line=dict(color=PAST_COLOUR, width=3),
                   hovertemplate="n = %{x}: j − i = −%{x} → bucket %{y}<extra>past</extra>"),
        go.Scatter(x=distances, y=future.astype(np.float32), mode="lines", line_shape="hv",
                   name="future: j − i = +n" + ("" if bidirectional else " (all bucket 0)"),
                   line=dict(color=FUTURE_COLOUR, width=3, dash="solid" if bidirectional else "dot"),
                   hovertemplate="n = %{x}: j − i = +%{x} → bucket %{y}<extra>future</extra>"),
    ]
    lo = 0.8 if log_x else -0.5
    hi = top * (1.15 if log_x else 1.02)
    spans = [(lo, reg.max_exact - 0.5, EXACT_COLOUR, f"exact n < {reg.max_exact}"),
             (reg.max_exact - 0.5, reg.last_start - 0.5, LOG_COLOUR, "logarithmic"),
             (reg.last_start - 0.5, hi, LAST_COLOUR, "last bucket")]

    def at(x: float) -> float:  # annotation x in axis units (log10 on a log axis)
        return float(np.log10(x)) if log_x else x

    note = dict(showarrow=False, yref="paper", bgcolor="rgba(255,255,255,0.75)")
    shapes, annotations = [], []
    # Region labels sit just above the plot, over their band, where no line can run through them; a
    # narrow band's label is pushed up a row so neighbouring labels do not overlap.
    row = 0
    for x0, x1, colour, text in spans:
        x0 = max(x0, lo)
        if x1 > x0:
            shapes.append(dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1, fillcolor=colour,
                               line_width=0, layer="below"))
            annotations.append(dict(x=at(x0), y=1.0, text=text, xanchor="left", yanchor="bottom", align="left",
                                    xshift=2, yshift=2 + 18 * row, font=dict(size=13, color="#333"),
                                    bgcolor=colour.replace("0.1", "0.3"), showarrow=False, yref="paper"))
            width = (float(np.log10(x1)) - float(np.log10(x0))) / (float(np.log10(hi)) - float(np.log10(lo))) \
                if log_x else (x1 - x0) / (hi - lo)
            row = 1 if width < 0.12 and row == 0 else 0
    shapes.append(dict(type="line", xref="x", yref="paper", x0=reg.max_distance, x1=reg.max_distance, y0=0, y1=1,
                       line=dict(color="black", dash="dash", width=1.5)))
    annotations.append(dict(x=at(reg.max_distance), y=0.02, text=f"max_distance = {reg.max_distance}",
                            xanchor="left", xshift=4, font=dict(size=12), **note))
    shapes.append(dict(type="line", xref="x", yref="paper", x0=reg.last_start, x1=reg.last_start, y0=0, y1=1,
                       line=dict(color="#555", dash="dot", width=1.5)))
    annotations.append(dict(x=at(reg.last_start), y=0.12, text=f"last bucket from n = {reg.last_start}",
                            xanchor="right", xshift=-4, font=dict(size=12), **note))
    xaxis = dict(title=dict(text="distance n = |j − i|" + (" (log scale; n = 0 → bucket 0)" if log_x else ""),
                            standoff=4),
                 type="log" if log_x else "linear",
                 range=[float(np.log10(lo)), float(np.log10(hi))] if log_x else [lo, hi])
    return go.Figure(data=traces, layout=dict(
        height=height, margin=dict(l=60, r=10, t=78, b=80), shapes=shapes, annotations=annotations,
        legend=dict(orientation="h", yanchor="top", y=-0.17, x=0, xanchor="left"),
        title=dict(text="bucket vs distance n = |j − i|", x=0, xanchor="left", y=0.98, yanchor="top"), xaxis=xaxis,
        yaxis=dict(title=dict(text="bucket"), range=[-1, num_buckets], dtick=max(1, num_buckets // 8))))


def _num(v: int | None) -> str:
    return str(v).replace("-", "−")


def _offset_text(r: BucketRange) -> str:
    if not r.used:
        return "unused"
    if r.open_low and r.open_high:
        return "every j − i"
    if r.open_low:
        return f"≤ {_num(r.last)}"
    if r.open_high:
        return f"≥ {_num(r.first)}"
    return _num(r.first) if r.first == r.last else f"{_num(r.first)} … {_num(r.last)}"


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
            kind = "0 and every future offset"
        elif r.open_low or r.open_high:
            kind = "last: every longer distance"
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
