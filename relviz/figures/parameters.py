"""Figures of what a scheme learned about positions, drawn by the kind of data (a bias curve per head,
the norms of learned vectors, a similarity matrix), never by scheme name.

``view_figure`` draws these kinds; relviz.figures.layers' view_figure, which both the Your model and the Live
attention pages call on a mechanism's views, hands them to it. A new kind of view adds its figure here.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from relviz.figures.dict_figures import HEAD_COLOURS, HEAD_SCALE, figure_parts, head_colours, hover_data, parts_figure
from relviz.figures.heatmap import legend_below_axis, named_colorscale
from relviz.schemes.view_kinds import BiasCurve, SimilarityMatrix, VectorNorms, View


# ---------------------------------------------------------------------------------------
# Learned position parameters


def _unseen_band(xref: str, lo: float, hi: float) -> dict:
    return dict(type="rect", xref=xref, yref="paper", x0=lo, x1=hi, y0=0, y1=1, fillcolor="rgba(0,0,0,0.07)",
                line=dict(width=0), layer="below")


def bias_curve_figure(curve: BiasCurve, *, train_length: int | None = None, validate: bool = True) -> go.Figure:
    """:func:`bias_curve_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(bias_curve_parts(curve, train_length=train_length), validate)


def bias_curve_parts(curve: BiasCurve, *, train_length: int | None = None) -> tuple[list[dict], dict]:
    """A bias per head against j − i: steps with dotted edges (buckets) or smooth lines, an
    optional shaded band, and grey where the offsets were never seen in training."""
    data = []
    custom, lines = hover_data(curve.hover, (len(curve.offsets),))
    heads = curve.bias.shape[0]
    colours, legend = head_colours(heads), heads <= len(HEAD_COLOURS)
    for head in range(heads):
        label = curve.head_labels[head] if curve.head_labels else f"head {head + 1}"
        trace = dict(type="scatter", mode="lines", x=curve.offsets, y=curve.bias[head].astype(np.float32),
                     name=label, line=dict(color=colours[head], width=2.5 if legend else 1.8,
                                           **(dict(shape="hvh") if curve.steps else {})), showlegend=legend,
                     hovertemplate="<br>".join([f"head {head + 1}", "j − i = %{x}"] + lines + [f"{curve.value_name} = %{{y:.3f}}"])
                     + "<extra></extra>")
        if custom is not None:
            trace["customdata"] = custom
        data.append(trace)
    shapes = [dict(type="line", xref="x", yref="paper", x0=e, x1=e, y0=0, y1=1,
                   line=dict(color="rgba(0,0,0,0.25)", width=1, dash="dot")) for e in (curve.edges if curve.edges
                                                                                      is not None else [])]
    annotations = []
    if curve.learned and train_length is not None and -(train_length - 1) > curve.offsets.min():
        shapes.append(_unseen_band("x", float(curve.offsets.min()) - 0.5, -(train_length - 1) - 0.5))
        annotations.append(dict(x=-(train_length - 1) - 0.5, y=1, xref="x", yref="paper", xanchor="right",
                                yanchor="top", showarrow=False,
                                text=f"never seen in training (|j − i| ≥ {train_length}) ", font=dict(size=12)))
    if curve.band is not None:
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=curve.band[0], x1=curve.band[1], y0=0, y1=1,
                           fillcolor="rgba(46, 134, 171, 0.10)", line=dict(width=0), layer="below"))
        # The band's label sits just above the plot, over the band, where no curve can run through it;
        # it grows from the band's edge toward the middle of the plot, so it stays inside the figure.
        right = sum(curve.band) / 2 > (float(curve.offsets.min()) + float(curve.offsets.max())) / 2
        annotations.append(dict(x=curve.band[1] if right else curve.band[0], y=1.0, xref="x", yref="paper",
                                xanchor="right" if right else "left", yanchor="bottom", xshift=-2 if right else 2,
                                yshift=2, showarrow=False, text=curve.band_label,
                                font=dict(size=13, color="#333"), bgcolor="rgba(46, 134, 171, 0.30)"))
    if not legend:  # the head index as a colour bar (an invisible trace carries it)
        data.append(dict(type="scatter", mode="markers", x=[None], y=[None], showlegend=False, hoverinfo="skip",
                         marker=dict(color=[1, heads], colorscale=HEAD_SCALE, cmin=1, cmax=heads, showscale=True,
                                     colorbar=dict(title=dict(text="head"), thickness=14, len=0.9))))
    top = 64 if curve.band is not None else 40
    layout = dict(height=420 + top - 40, margin=dict(l=60, r=10, t=top, b=80),
                  title=dict(text=curve.title, x=0, xanchor="left", y=0.99, yanchor="top"),
                  xaxis=dict(title=dict(text="offset j − i"), zeroline=False),
                  yaxis=dict(title=dict(text=curve.value_label)), **_marks(shapes, annotations))
    if legend:  # below the axis title: the long title fills the top
        legend_below_axis(layout, rows=math.ceil(heads / 4))
    return figure_parts(data, layout)


def _marks(shapes: list[dict], annotations: list[dict]) -> dict:
    """The layout's shapes and annotations, each only when there are any (as validation leaves an empty list)."""
    return {key: marks for key, marks in (("shapes", shapes), ("annotations", annotations)) if marks}


def vector_norms_figure(tables: VectorNorms, *, train_length: int | None = None,
                        validate: bool = True) -> go.Figure:
    """:func:`vector_norms_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(vector_norms_parts(tables, train_length=train_length), validate)


def vector_norms_parts(tables: VectorNorms, *, train_length: int | None = None) -> tuple[list[dict], dict]:
    """Norm of each learned relative vector against the offset it stands for, one line per layer
    (a second table, e.g. Shaw's a^V, dashed)."""
    data = []
    for layer in range(tables.norms.shape[0]):
        colour = HEAD_COLOURS[layer % len(HEAD_COLOURS)]
        number = layer + tables.first_layer                   # as the page counts layers
        data.append(dict(type="scatter", mode="lines+markers", x=tables.offsets,
                         y=tables.norms[layer].astype(np.float32), name=f"layer {number}: ‖{tables.name}‖",
                         line=dict(color=colour, dash="solid"),
                         hovertemplate=f"layer {number}<br>j − i = %{{x}}<br>‖{tables.name}‖ = %{{y:.3f}}"
                                       "<extra></extra>"))
        if tables.second is not None:
            name, norms = tables.second
            data.append(dict(type="scatter", mode="lines", x=tables.offsets, y=norms[layer].astype(np.float32),
                             name=f"layer {number}: ‖{name}‖", line=dict(color=colour, dash="dash"),
                             hovertemplate=f"layer {number}<br>j − i = %{{x}}<br>‖{name}‖ = %{{y:.3f}}"
                                           "<extra></extra>"))
    shapes, annotations = [], []
    unused = tables.offsets[~tables.used]
    if unused.size:
        shapes.append(_unseen_band("x", float(unused.min()) - 0.5, float(unused.max()) + 0.5))
        annotations.append(dict(x=float(unused.mean()), y=1, xref="x", yref="paper", yanchor="top", showarrow=False,
                                text="future: masked,<br>never trained", font=dict(size=12)))
    if train_length is not None and -(train_length - 1) > tables.offsets.min():
        shapes.append(_unseen_band("x", float(tables.offsets.min()) - 0.5, -(train_length - 1) - 0.5))
        annotations.append(dict(x=-(train_length - 1) - 0.5, y=1, xref="x", yref="paper", xanchor="right",
                                yanchor="top", showarrow=False, text="never seen in training ", font=dict(size=12)))
    layout = dict(height=380, margin=dict(l=60, r=10, t=40, b=50), title=dict(text=tables.title, x=0, xanchor="left"),
                  xaxis=dict(title=dict(text="offset j − i the vector stands for")),
                  yaxis=dict(title=dict(text="vector norm"), rangemode="tozero"),
                  legend=dict(orientation="h", y=-0.25, x=0), **_marks(shapes, annotations))
    return figure_parts(data, layout)


def cosine_heatmap(cosine: np.ndarray, labels: np.ndarray, *, title: str, axis: str, height: int = 380,
                   validate: bool = True) -> go.Figure:
    """:func:`cosine_heatmap_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(cosine_heatmap_parts(cosine, labels, title=title, axis=axis, height=height), validate)


def cosine_heatmap_parts(cosine: np.ndarray, labels: np.ndarray, *, title: str, axis: str,
                         height: int = 380) -> tuple[list[dict], dict]:
    """Cosine similarity between learned vectors (rows and columns labelled by ``labels``). The scale is
    expanded as validation expands it: plotly.js's own 'RdBu' runs the other way."""
    cosine = np.asarray(cosine, dtype=np.float32)
    trace = dict(type="heatmap", z=cosine, x=np.asarray(labels), y=np.asarray(labels),
                 colorscale=named_colorscale("RdBu"),
                 zmin=-1.0, zmax=1.0, colorbar=dict(title=dict(text="cosine", side="right"), thickness=14),
                 hovertemplate=f"{axis} = %{{y}}<br>{axis} = %{{x}}<br>cosine = %{{z:.3f}}<extra></extra>")
    layout = dict(height=height, margin=dict(l=60, r=10, t=40, b=50), title=dict(text=title, x=0, xanchor="left"),
                  xaxis=dict(title=dict(text=axis), constrain="domain"),
                  yaxis=dict(title=dict(text=axis), autorange="reversed", scaleanchor="x", constrain="domain"))
    return figure_parts([trace], layout)


def similarity_figure(matrix: SimilarityMatrix, *, validate: bool = True) -> go.Figure:
    """:func:`similarity_parts` as a go.Figure (``validate=False``: without plotly's validation)."""
    return parts_figure(similarity_parts(matrix), validate)


def similarity_parts(matrix: SimilarityMatrix) -> tuple[list[dict], dict]:
    """A similarity matrix; its outlined block (e.g. the trained positions) framed in black."""
    outlined = matrix.outline is not None
    data, layout = cosine_heatmap_parts(matrix.cosine, matrix.labels, axis=matrix.axis, title=matrix.title,
                                        height=420 if outlined else 380)
    if outlined:
        n = matrix.outline
        layout["shapes"] = [dict(type="rect", x0=-0.5, y0=-0.5, x1=n - 0.5, y1=n - 0.5,
                                 line=dict(color="black", width=2))]
        layout["annotations"] = [dict(x=n - 0.5, y=n - 0.5, text=matrix.outline_label, showarrow=False,
                                      xanchor="left", yanchor="bottom")]
    return data, layout


# ---------------------------------------------------------------------------------------
# Every position-parameter picture of a model (its caption is its mechanism's, carried in the view)


def view_figure(view: View, *, train_length: int | None = None, validate: bool = True) -> go.Figure:
    """The figure of one parameter view, chosen by the kind of data."""
    parts = view_parts(view, train_length=train_length)
    if parts is None:
        raise ValueError(f"no figure for a parameter view of kind {type(view).__name__}")
    return parts_figure(parts, validate)


def view_parts(view, *, train_length: int | None = None) -> tuple[list[dict], dict] | None:
    """:func:`view_figure`'s trace and layout dicts (what the Live attention page sends as they are), chosen by
    the kind of data; None for a kind this module does not draw (relviz.figures.layers draws the others)."""
    if isinstance(view, BiasCurve):
        return bias_curve_parts(view, train_length=train_length)
    if isinstance(view, VectorNorms):
        return vector_norms_parts(view, train_length=train_length)
    if isinstance(view, SimilarityMatrix):
        return similarity_parts(view)
    return None

