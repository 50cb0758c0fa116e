"""Figures for Shaw et al.'s clipped relative positions: the three matrices, the table strip,
the k ablation, and the parameter count.

Everything is computed per offset (q_len + k_len − 1 values) and drawn with the Toeplitz
helper, so lengths up to 8192 never build an L × L matrix.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import plotly.graph_objects as go

from relviz._words import minus
from relviz.figures.heatmap import (
    AXIS_LINE_PX,
    COLOUR_BAR_BELOW,
    DISCRETE_PALETTE,
    FULL_TITLE_CHARS,
    THIRD_TITLE_CHARS,
    X_AXIS_BELOW,
    colour_bar_below,
    diagonal_counts,
    discrete_colorscale,
    narrow_title,
    readable_layout,
)
from relviz.figures.toeplitz import ToeplitzFigure, ToeplitzOverview, toeplitz_heatmap, toeplitz_overview, toeplitz_view
from relviz.figures.toeplitz_canvas import ToeplitzImage, ToeplitzOverviewImage, toeplitz_overview_image
from relviz.figures.toeplitz_window import HoverField, Window
from relviz.positions import offset_range, shaw_clip_offsets

#: Shaw et al. 2018, Table 2: EN-DE newstest2013 BLEU of the base model by clipping distance k.
K_ABLATION: tuple[tuple[int, float], ...] = ((0, 12.5), (1, 25.5), (2, 25.8), (4, 25.9), (16, 25.8),
                                             (64, 25.9), (256, 25.8))
PALETTE = DISCRETE_PALETTE


@dataclass(frozen=True)
class ShawOffsets:
    """Per-offset vectors (entry t is the diagonal j − i = offset[t]) of the three matrices."""

    offset: np.ndarray   # j − (q_offset + i)
    clipped: np.ndarray  # clip(j − i, −k, k)
    index: np.ndarray    # clip(j − i, −k, k) + k
    k: int

    @cached_property
    def bounds(self) -> tuple[int, int, int, int]:
        """(lowest, highest offset, lowest, highest clipped offset) of this matrix. Once per matrix (the object is
        cached read-only), not on every window move: four passes over 2M values at 2^20 positions."""
        return (int(self.offset.min()), int(self.offset.max()), int(self.clipped.min()),
                int(self.clipped.max()))


def shaw_offsets(q_len: int, k_len: int, *, k: int, q_offset: int = 0) -> ShawOffsets:
    """The library's per-offset values (validated there: a bad argument raises ValueError)."""
    offsets = offset_range(q_len, k_len, q_offset=q_offset, device="cpu")
    index = shaw_clip_offsets(offsets, k=k)
    return ShawOffsets(offset=offsets.numpy(), clipped=(index - k).numpy(), index=index.numpy(), k=k)


def clip_formula(k: int) -> str:
    """'clip(j − i, −3, 3)', or 'clip(j − i, 0, 0)' for k = 0 (no "−0")."""
    return f"clip(j − i, −{k}, {k})" if k else "clip(j − i, 0, 0)"


def vectors_text(count: int) -> str:
    return f"{count} learned vector{'' if count == 1 else 's'}"


# ---------------------------------------------------------------------------------------
# The Shaw page's sentences, with this k's numbers (k = 0: the table has one row, no position information)


def matrix_captions(k: int) -> tuple[str, str, str]:
    """What the relative, clipped and lookup-index matrices show at clipping distance ``k``."""
    relative = ("**j − i** grows by one per step right and shrinks by one per step down: the matrix depends only on "
                "the diagonal (it is Toeplitz), so it is computed once per diagonal, never per cell.")
    clipped = ((f"**Clipped to ±{k}**: inside |j − i| < {k} every diagonal keeps a value of its own; the diagonals "
                f"±{k} share theirs with everything beyond, so the two corners are flat. A single layer cannot tell "
                f"offset {k} from offset {k + 100}.") if k else
               "**Clipped to 0**: every offset becomes 0, so every pair reads the same vector: the relative term "
               "carries no position information at all (the paper's k = 0 row).")
    index = ((f"**Lookup index** = clipped + {k}, in 0…{2 * k}: the row of the table each pair (i, j) reads. "
              "Same picture as the clipped matrix, shifted to start at 0.") if k else
             "**Lookup index** = 0 for every pair: the table has one row.")
    return relative, clipped, index


def unclipped_caption(values: ShawOffsets) -> str | None:
    """When k reaches the matrix's longest offset nothing is clipped, and the colours span rows the matrix
    never reads: why the heatmaps then look uniform. None when something is clipped (or the matrix is 1 × 1)."""
    lowest, highest = values.bounds[:2]
    k, longest = values.k, max(-lowest, highest)
    if not k >= longest > 0:
        return None
    lowest, highest = minus(lowest), minus(highest)
    return (f"**k = {k} ≥ {longest}, the longest offset of this matrix: nothing is clipped.** Every offset "
            f"keeps its own table row, so the clipped matrix equals j − i. The colours span the whole table "
            f"(−{k} … {k}) and this matrix uses only {values.offset.size} of its {2 * k + 1} rows, those of "
            f"offsets {lowest} … {highest}: "
            "neighbouring values get nearly the same colour, and the heatmaps look uniform. Hover shows "
            "each value; a longer sequence or a smaller k brings the flat corners back.")


def table_caption(k: int) -> str:
    """What the strip of the table's 2k + 1 vectors shows."""
    if k:
        return (f"**The table itself**: {2 * k + 1} vectors, coloured like the lookup index above. The two end rows "
                f"(offset ≤ −{k} and ≥ {k}) serve every far-away key; hover shows how many cells of this matrix "
                "read each row. w^K and w^V are two such tables.")
    return ("**The table itself**: 1 vector, w[0], read by every pair: with k = 0 the relative term adds the same "
            "vector to every key and value, so it carries no position information. w^K and w^V are two such tables.")


def depth_text(k: int) -> str:
    """What one layer cannot see at clipping distance ``k``, and how depth gets it back."""
    if not k:
        return ("With k = 0 no layer sees any offset through this table: every key gets the same a^K and "
                "a^V. The paper's Table 2 shows the cost: 12.5 BLEU against 25.5 at k = 1.")
    return (f"With k = {k}, one attention layer gives the same a^K and a^V to every key farther than {k} "
            "positions: it is blind to the difference between 'far' and 'very far'. Shaw et al. argue this is "
            "fine, and their ablation agrees: a later layer can combine exact short offsets into longer ones "
            f"(a token {k} positions back that itself attended {k} positions back carries information from "
            f"{2 * k} back). T5's buckets make the same trade with a logarithmic resolution instead of a hard cut.")


def shaw_matrices(values: ShawOffsets, q_len: int, k_len: int, *, q_offset: int = 0,
                  window: Window | None = None, height: int = 400, browser: bool = False,
                  validate: bool = True) -> tuple[ToeplitzFigure | ToeplitzImage, ...]:
    """Relative j − i, clipped offset, lookup index: same window, same hover fields everywhere.

    ``browser=True``: large windows come back as ToeplitzImages (drawn in the browser, relviz.app.display).
    ``validate=False``: the heatmaps without plotly's per-property validation (as :func:`embedding_strip`)."""
    k = values.k
    clipped = HoverField("clipped offset", values.clipped)
    index = HoverField("index", values.index)
    common = dict(q_offset=q_offset, window=window, height=height, validate=validate)
    build = toeplitz_view if browser else toeplitz_heatmap
    # the colours span the values this matrix holds, not ±k: at k = 64 on a 10 × 10 matrix (offsets ±9) a
    # scale over ±64 painted every cell nearly one colour
    lo, hi = values.bounds[2:]
    relative = build(values.offset, q_len, k_len, value_label="j − i", colorscale="RdBu",
                     zmid=0, hover=[clipped, index], title="relative position j − i", **common)
    clip = build(values.clipped, q_len, k_len, value_label="clipped offset",
                 discrete_range=(lo, hi), colorscale=PALETTE, hover=[index],
                 title=clip_formula(k), **common)
    lookup = build(values.index, q_len, k_len, value_label="index", discrete_range=(lo + k, hi + k),
                   colorscale=PALETTE, hover=[clipped], value_last=True,
                   title=f"index: clipped + {k}", **common)
    # titles no longer than "relative position j − i", which fits a third of 1024 px: "lookup index: clipped + 3"
    # and "clipped: clip(j − i, −64, 64)" were cut there
    return tuple(_square_cells(view, height) for view in (relative, clip, lookup))


def _square_cells(view: ToeplitzFigure | ToeplitzImage, height: int) -> ToeplitzFigure | ToeplitzImage:
    """A small window's heatmap with square-ish cells: its colour bar under the plot (an upright one
    took ~70 of the ~260 px a third of the page has, leaving a 10 × 10 matrix ~110 px wide and 284 tall),
    ``height`` for a square window (less for a wider one), and square cells when the window is no more
    than 3:1."""
    if not isinstance(view, ToeplitzFigure):
        return view
    figure = view.figure
    rows, cols = view.window.rows, view.window.cols
    # in a third of the page: "relative position j − i" ran 4 px off its chart at 819 px. Wrapped here, on plotly's
    # figure only (a canvas draws its title itself), with two lines' room on all three (their plots stay level).
    hung = narrow_title({"title": {"text": figure.layout.title.text or ""}, "margin": {"t": figure.layout.margin.t}},
                        chars=THIRD_TITLE_CHARS)
    if "title" in hung:
        for name, value in hung["title"].items():   # each set directly, the title's font kept
            setattr(figure.layout.title, name, value)
        figure.layout.margin.t = hung["margin"]["t"]
    bottom = X_AXIS_BELOW + COLOUR_BAR_BELOW
    square = max(90, height - (figure.layout.margin.t or 0) - bottom)  # the plot's height for a square window
    height = (figure.layout.margin.t or 0) + bottom + int(np.clip(square * rows / cols, 90, square))
    # Each property set directly: plotly's update_layout / add_annotation walk the whole layout (~3 ms each on a
    # figure that holds annotations), the bulk of building the three matrices on a move.
    layout = figure.layout
    for trace in figure.data:
        if trace.type == "heatmap" and trace.showscale is not False:
            trace.colorbar, title = colour_bar_below(trace.colorbar.to_plotly_json(), height=height)
            layout.annotations = (*layout.annotations, title)
    # margins fixed: a flat colour bar would push the bottom one and move the plot over its title
    layout.height = height
    layout.margin.b, layout.margin.autoexpand = bottom, False
    if 1 / 3 <= rows / cols <= 3:
        layout.yaxis.scaleanchor, layout.yaxis.constrain, layout.xaxis.constrain = "x", "domain", "domain"
    return view


def shaw_overview(values: ShawOffsets, q_len: int, k_len: int, *, q_offset: int = 0,
                  window: Window | None = None, height: int = 400,
                  browser: bool = False) -> ToeplitzOverview | ToeplitzOverviewImage:
    """Pooled overview of the lookup index, coloured like the index heatmap, window marked
    (``browser=True``: described for the browser to draw, relviz.app.display)."""
    build = toeplitz_overview_image if browser else toeplitz_overview
    return build(values.index, q_len, k_len, value_label="index", q_offset=q_offset,
                 window=window, value_range=(0, 2 * values.k), colorscale=PALETTE,
                 title="overview of the lookup index (block means)", height=height)



def embedding_strip(values: ShawOffsets, q_len: int, k_len: int, *, height: int = 170,
                    validate: bool = True) -> go.Figure:
    """The 2k + 1 rows of the table w (for a^K and a^V alike), coloured like the lookup index.

    Hover: the offsets each row stands for and how many cells of the matrix use it. ``validate=False``: the
    same figure without plotly's per-property validation (most of a move's CPU on the Shaw page; tests build
    both and compare them).
    """
    k = values.k
    rows = np.arange(2 * k + 1)
    used = np.bincount(values.index, weights=diagonal_counts(q_len, k_len), minlength=2 * k + 1).astype(np.int64)
    offsets = rows - k
    stands = [f"j − i ≤ −{k}" if r == 0 and k > 0 else f"j − i ≥ {k}" if r == 2 * k and k > 0
              else "every j − i" if k == 0 else f"j − i = {minus(o)}" for r, o in zip(rows, offsets)]
    short = [("≤" if r == 0 and k > 0 else "≥" if r == 2 * k and k > 0 else "") + minus(o)
             for r, o in zip(rows, offsets)]
    trace = dict(type="heatmap", z=rows[None, :].astype(np.uint8), x=rows, y=["w"],
                 zmin=-0.5, zmax=2 * k + 0.5, colorscale=discrete_colorscale(2 * k + 1, PALETTE), showscale=False,
                 customdata=[[[s, int(u)] for s, u in zip(stands, used)]], text=[short],
                 textfont=dict(size=13 if 2 * k + 1 <= 17 else 10), xgap=1,
                 hovertemplate="table row w[%{x}]<br>stands for %{customdata[0]}<br>"
                               "used by %{customdata[1]} cells of this matrix<extra></extra>")
    if 2 * k + 1 <= 33:
        trace["texttemplate"] = "%{text}"
    layout = dict(height=height, margin=dict(l=60, r=10, t=40, b=45),
                  # across the page: 89 px of it ran off the chart at 819 px on one line (wrapped below)
                  title=dict(text=f"the table: {vectors_text(2 * k + 1)} "
                                  + (f"w[0] … w[{2 * k}] (text: the offset each row stands for)" if k
                                     else "w[0]: every pair reads it"), x=0, xanchor="left"),
                  xaxis=dict(title=dict(text="table row = lookup index"), dtick=max(1, (2 * k + 1) // 16) if k else 1),
                  yaxis=dict(title=dict(), showticklabels=True))
    narrow_title(layout, lines=1, chars=FULL_TITLE_CHARS)
    return go.Figure({"data": [trace], "layout": readable_layout(layout)}, _validate=validate)


def k_ablation_figure(k: int, *, height: int = 300, validate: bool = True) -> go.Figure:
    """Shaw et al.'s Table 2 as bars on a categorical k axis, the current k marked (``validate``: as
    :func:`embedding_strip`)."""
    labels = [str(kk) for kk, _ in K_ABLATION]
    bleu = [b for _, b in K_ABLATION]
    exact = next((n for n, (kk, _) in enumerate(K_ABLATION) if kk == k), None)
    colours = ["#e4572e" if n == exact else "#8aa2c8" for n in range(len(labels))]
    bars = dict(type="bar", x=labels, y=bleu, marker=dict(color=colours), text=[f"{b:.1f}" for b in bleu],
                textposition="outside", cliponaxis=False, hovertemplate="k = %{x}<br>BLEU %{y}<extra></extra>")
    # in 3/5 of the page: on one line each, the title ran 128 px and the axis's 7 px off the chart at 819 px
    layout = dict(height=height + AXIS_LINE_PX, margin=dict(l=60, r=10, t=40, b=45 + AXIS_LINE_PX), showlegend=False,
                  title=dict(text="Shaw et al. (2018), Table 2: BLEU by clipping distance k", x=0, xanchor="left"),
                  xaxis=dict(title=dict(text="clipping distance k<br>(the paper's values)"), type="category"),
                  yaxis=dict(title=dict(text="BLEU, EN-DE newstest2013"), range=[0, 33]))
    if exact is None:
        # Between two measured k: place the marker at the log-interpolated category position.
        ks = [kk for kk, _ in K_ABLATION]
        n = max(p for p, kk in enumerate(ks) if kk < k)
        frac = (np.log1p(k) - np.log1p(ks[n])) / (np.log1p(ks[n + 1]) - np.log1p(ks[n]))
        position = n + float(frac)
        layout["shapes"] = [dict(type="line", x0=position, x1=position, xref="x", y0=0, y1=1, yref="y domain",
                                 line=dict(color="#e4572e", dash="dash", width=2))]
        layout["annotations"] = [dict(x=position, y=29, text=f"your k = {k} (not measured)", showarrow=False,
                                      font=dict(color="#e4572e"), yanchor="bottom", bgcolor="white")]
    else:
        # x as the category's index: a label such as "64" would be read as position 64 on this axis
        layout["annotations"] = [dict(x=exact, y=bleu[exact] + 2.2, text=f"your k = {k}", showarrow=False,
                                      font=dict(color="#e4572e"), yanchor="bottom")]
    return go.Figure({"data": [bars], "layout": readable_layout(narrow_title(layout))}, _validate=validate)


@dataclass(frozen=True)
class ParameterCount:
    per_table: int   # (2k + 1) · d: one of a^K, a^V
    per_layer: int   # a^K and a^V
    total: int       # all layers


def parameter_count(k: int, d: int, layers: int = 1) -> ParameterCount:
    per_table = (2 * k + 1) * d
    return ParameterCount(per_table, 2 * per_table, 2 * per_table * layers)


def compare_caption(k: int) -> str:
    """Shaw's side of the comparison with T5: 2k + 1 rows, exact inside ±k, a hard cut beyond."""
    return (f"**Shaw, k = {k}:** {2 * k + 1} table rows. Exact inside |j − i| ≤ {k}, then a hard cut: every "
            f"key farther than {k} reads the same end row. The tables hold vectors (size d), one pair per "
            "layer, shared across heads.")


def seed_table_caption(k: int) -> str:
    """Why a seed notebook's "T5 encoder" that clips to ±k is Shaw's clipping, with its unread rows."""
    return (f"**Not T5: a \"T5 encoder\" that clips.** A seed notebook's \"T5RelativePositionalEncoder\" "
            f"clips j − i to ±max_position (here {k}) and looks it up in a table of max_position² "
            f"rows: Shaw-style clipping, the picture on the left, with {k * k - (2 * k + 1)} rows "
            "that are never read. T5 buckets (right) are logarithmic and scalar.")


#: What a relative scheme asks of a pair, and Shaw et al.'s answer.
WHAT_SHAW_LEARNS = (
    "Every query *i* looks at every key *j*. A relative scheme does not ask *where* the key is, only **how far and "
    "in which direction**: the offset j − i. Shaw et al. (2018) clip that offset to ±k and use it to pick one of "
    "**2k + 1 learned vectors**, added to the key (a^K) and to the value (a^V).")

#: The paper's clipping ablation, beside its chart (k_ablation_figure).
ABLATION_CAPTION = (
    "From the paper's Table 2 (base model, EN-DE newstest2013). k = 0 (no position information at all, as the model "
    "has no absolute encoding either) collapses to 12.5 BLEU; from k = 2 on the score is flat: the exact offset of "
    "distant words barely matters for translation.")

#: How Shaw's tables are shared, against T5's.
SHARING = (
    "The tables are **shared across the heads** of a layer (d is the per-head size d_z) and **distinct per layer**. "
    "T5 does the opposite: one scalar per bucket and head, shared by all layers.")


def offset_rows_caption(q_offset: int) -> str:
    """Why the rows are labelled from ``q_offset``: query i sits at key position q_offset + row."""
    return (f"Rows are labelled by the query's position among the keys, i = {q_offset} + row, so that j − i is "
            "exactly the offset each cell uses.")
