"""Figures for the skew page: every step of the Music Transformer skew as a labelled heatmap.

Each cell carries the distance its value stands for (as text), a hover line saying where
it came from, and a kind: an ordinary value, the zero pad (grey overlay), garbage above
the diagonal (hatched), masked (−∞, blank) or dropped. The colour trace always holds the
step's real numbers (the pad as 0), so the figure data equals the library's tensors.

Also the demo inputs (random Q and E_r for a length and a seed) and the cell bookkeeping
(labels, hover text, kinds) that the page and its tests share.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import torch

from relviz._words import minus, signed
from relviz.figures.heatmap import COLOUR_BAR_BELOW, X_AXIS_BELOW, colour_bar_below, narrow_figure_title, readable
from relviz.skew import gather_relative, skew, skew_bidirectional, skew_source_index, skew_steps

#: Width of the random query and distance vectors of the demo.
DEMO_DIM = 8

#: Cell kinds.
VALUE, PAD, GARBAGE, MASKED, DROPPED = 0, 1, 2, 3, 4

PAD_COLOUR = "#9e9e9e"
HATCH_COLOUR = "#111111"
VALUE_SCALE = "RdBu_r"  # diverging: negative blue, positive red, 0 white

#: Added to a step's caption where its figure has no cell labels (layout.meta["labels"] false).
NO_LABELS = (" (Cell labels are off at this size, they would overlap: hover a cell for its distance and source, "
             "or colour by distance.)")


@dataclass(frozen=True)
class DemoInputs:
    """Random Q [L, D] and distance embeddings: E_r [L, D] for distances −(L−1)..0 and
    E_all [2L − 1, D] for −(L−1)..+(L−1); E_all's first L rows are E_r, so both tabs agree
    on the past."""

    q: torch.Tensor
    e_past: torch.Tensor
    e_all: torch.Tensor

    @property
    def length(self) -> int:
        return self.q.shape[0]

    @property
    def qer(self) -> torch.Tensor:
        """Q E_rᵀ [L, L]: column m stands for distance m − (L − 1)."""
        return self.q @ self.e_past.T

    @property
    def qer_all(self) -> torch.Tensor:
        """Q E_allᵀ [L, 2L − 1]: column m stands for distance m − (L − 1)."""
        return self.q @ self.e_all.T


def demo_inputs(length: int, seed: int, dim: int = DEMO_DIM) -> DemoInputs:
    """Deterministic random inputs (float32, CPU) for the page: same length and seed, same numbers."""
    generator = torch.Generator().manual_seed(int(seed))
    q = torch.randn(length, dim, generator=generator)
    e_past = torch.randn(length, dim, generator=generator)
    e_future = torch.randn(length - 1, dim, generator=generator)
    return DemoInputs(q=q, e_past=e_past, e_all=torch.cat([e_past, e_future]))


@dataclass(frozen=True)
class StepCells:
    """One step, ready to draw: values [R, C] float32, and per cell the text label, hover
    text, kind (VALUE, PAD, ...), the distance it stands for and the query row it came from
    (−1 for the pad)."""

    values: np.ndarray
    labels: np.ndarray
    hover: np.ndarray
    kinds: np.ndarray
    distance: np.ndarray
    source_row: np.ndarray


def _cells(values: np.ndarray, src_row: np.ndarray, src_col: np.ndarray, length: int,
           describe) -> StepCells:
    """Shared bookkeeping: distance of each source column, labels, and describe(r, c) -> (kind, hover)."""
    rows, cols = values.shape
    distance = np.where(src_col >= 0, src_col - (length - 1), 0)
    labels = np.empty((rows, cols), dtype=object)
    hover = np.empty((rows, cols), dtype=object)
    kinds = np.zeros((rows, cols), dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            kind, text = describe(r, c)
            kinds[r, c] = kind
            if src_row[r, c] < 0:
                labels[r, c] = "pad"
            elif kind == MASKED:
                labels[r, c] = "−∞"
            else:
                labels[r, c] = signed(int(distance[r, c]))
            hover[r, c] = text
    return StepCells(values=values.astype(np.float32), labels=labels, hover=hover, kinds=kinds,
                     distance=distance, source_row=src_row)


def _value_line(v: float) -> str:
    """The hover's value line, its sign a true minus (U+2212) as every number the app shows."""
    return f"value = {minus(v, '+.3f')}"


def _from_line(r: int, c: int, length: int) -> str:
    d = c - (length - 1)
    return f"holds QE_rᵀ[{r}, {c}] = q_{r} · e({signed(d)}): query {r}, distance {signed(d)}"


def _qer_cells(qer: np.ndarray, length: int) -> StepCells:
    """QE_rᵀ [L, C] as the first step of either skew (C = L causal, 2L − 1 unmasked): column m stands for the
    distance m − (L − 1)."""
    rows, cols = np.meshgrid(np.arange(qer.shape[0]), np.arange(qer.shape[1]), indexing="ij")

    def describe_qer(r: int, c: int) -> tuple[int, str]:
        d = c - (length - 1)
        return VALUE, (f"query i = {r}, column m = {c}<br>column {c} stands for distance "
                       f"{c} − {length - 1} = {signed(d)}<br>q_{r} · e({signed(d)})"
                       f"<br>{_value_line(qer[r, c])}")

    return _cells(qer, rows, cols, length, describe_qer)


def causal_steps(demo: DemoInputs) -> dict[str, StepCells]:
    """The causal skew's steps: "qer", "padded", "reshaped", "skewed", "masked" (uses relviz.skew)."""
    length = demo.length
    qer = demo.qer
    steps = skew_steps(qer)
    src = skew_source_index(length, device="cpu")
    out: dict[str, StepCells] = {}
    out["qer"] = _qer_cells(qer.numpy(), length)

    padded = steps.padded.numpy()
    sr, sc = src.row.padded.numpy(), src.col.padded.numpy()

    def describe_padded(r: int, c: int) -> tuple[int, str]:
        if sr[r, c] < 0:
            return PAD, f"row {r}, column {c}<br>pad: the zero column added on the left"
        return VALUE, (f"row {r}, column {c} (was column {c - 1})<br>{_from_line(sr[r, c], sc[r, c], length)}"
                       f"<br>{_value_line(padded[r, c])}")

    out["padded"] = _cells(padded, sr, sc, length, describe_padded)

    reshaped = steps.reshaped.numpy()
    sr, sc = src.row.reshaped.numpy(), src.col.reshaped.numpy()

    def describe_reshaped(r: int, c: int) -> tuple[int, str]:
        flat = r * length + c
        where = f"row {r}, column {c} (flat position {flat} of the padded tensor)"
        if r == 0:
            where += "<br>row 0 is dropped in the next step"
        if sr[r, c] < 0:
            return PAD, f"{where}<br>pad: a zero from the added column"
        return VALUE, f"{where}<br>{_from_line(sr[r, c], sc[r, c], length)}<br>{_value_line(reshaped[r, c])}"

    out["reshaped"] = _cells(reshaped, sr, sc, length, describe_reshaped)

    skewed = steps.skewed.numpy()
    sr, sc = src.row.skewed.numpy(), src.col.skewed.numpy()

    def describe_skewed(i: int, j: int, masked: bool = False) -> tuple[int, str]:
        head = f"query i = {i}, key j = {j}, j − i = {signed(j - i)}"
        if j <= i:
            return VALUE, (f"{head}<br>{_from_line(sr[i, j], sc[i, j], length)}<br>exact: the distance "
                           f"matches j − i<br>{_value_line(skewed[i, j])}")
        if masked:
            return MASKED, f"{head}<br>masked: set to −∞ before the softmax (the causal mask)"
        if sr[i, j] < 0:
            return GARBAGE, (f"{head}<br>pad: a zero that came from the padded column of row {i + 1}"
                             f"<br>not q_{i} · e(+{j - i}): meaningless")
        d = int(sc[i, j]) - (length - 1)
        return GARBAGE, (f"{head}<br>garbage: from row {sr[i, j]}, distance {signed(d)} "
                         f"(q_{sr[i, j]} · e({signed(d)}))<br>not q_{i} · e(+{j - i}): "
                         f"the causal mask must hide it<br>{_value_line(skewed[i, j])}")

    out["skewed"] = _cells(skewed, sr, sc, length, describe_skewed)

    masked = np.where(steps.valid.numpy(), skewed, np.nan)
    out["masked"] = _cells(masked, np.where(steps.valid.numpy(), sr, 0), sc, length,
                           lambda i, j: describe_skewed(i, j, masked=True))
    return out


def bidirectional_steps(demo: DemoInputs) -> dict[str, StepCells]:
    """The unmasked skew's steps: "qer" [L, 2L−1], "window" [L, 2L−2] (the flat entries from
    L − 1 on, read in rows of 2L − 2), "result" [L, L] (uses relviz.skew.skew_bidirectional)."""
    length = demo.length
    width = 2 * length - 1
    qer = demo.qer_all.numpy()
    out: dict[str, StepCells] = {}
    out["qer"] = _qer_cells(qer, length)

    stride = max(2 * length - 2, 1)
    flat_index = (length - 1) + np.arange(length * stride).reshape(length, stride)
    if length == 1:
        flat_index = np.zeros((1, 1), dtype=int)
    wr, wc = np.divmod(flat_index, width)
    window = qer[wr, wc]

    def describe_window(r: int, c: int) -> tuple[int, str]:
        where = f"row {r}, column {c} (flat position {flat_index[r, c]} of QE_rᵀ)"
        text = f"{where}<br>{_from_line(wr[r, c], wc[r, c], length)}<br>{_value_line(window[r, c])}"
        if c >= length:
            return DROPPED, text + "<br>column ≥ L: cut off in the next step"
        return VALUE, text

    out["window"] = _cells(window, wr, wc, length, describe_window)

    result = skew_bidirectional(demo.qer_all).numpy()
    rr, rc = wr[:, :length], wc[:, :length]

    def describe_result(i: int, j: int) -> tuple[int, str]:
        return VALUE, (f"query i = {i}, key j = {j}, j − i = {signed(j - i)}<br>"
                       f"{_from_line(rr[i, j], rc[i, j], length)}<br>exact everywhere"
                       f"<br>{_value_line(result[i, j])}")

    out["result"] = _cells(result, rr, rc, length, describe_result)
    return out


def naive_reference(demo: DemoInputs, *, bidirectional: bool) -> torch.Tensor:
    """The naive gather q_i · e(j − i) for every (i, j) with relviz.skew.gather_relative.

    Causal: E_r covers only distances ≤ 0, so the index of j > i is clamped (those cells are
    not compared). Bidirectional: every cell is covered by E_all.
    """
    length = demo.length
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    index = j - i + length - 1
    if bidirectional:
        return gather_relative(demo.q, demo.e_all, index)
    return gather_relative(demo.q, demo.e_past, index.clamp(max=length - 1))


def proof_numbers(demo: DemoInputs) -> dict[str, float]:
    """Live checks: causal skew vs gather on j ≤ i ("causal_lower") and above it ("causal_upper":
    the garbage), and the bidirectional skew vs gather everywhere ("bidirectional")."""
    length = demo.length
    lower = torch.ones(length, length, dtype=torch.bool).tril()
    causal = skew(demo.qer)
    naive_past = naive_reference(demo, bidirectional=False)
    naive_all = naive_reference(demo, bidirectional=True)
    diff = (causal - naive_all).abs()
    upper = diff[~lower]
    return {
        "causal_lower": float((causal - naive_past).abs()[lower].max()),
        "causal_upper": float(upper.max()) if upper.numel() else 0.0,
        "bidirectional": float((skew_bidirectional(demo.qer_all) - naive_all).abs().max()),
    }


# ---------------------------------------------------------------------------------------
# Drawing


def _cell_polygons(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed squares around every True cell, separated by NaN gaps (one scatter trace fills them all)."""
    r, c = np.nonzero(mask)
    dx = np.array([-0.5, 0.5, 0.5, -0.5, -0.5, np.nan])
    dy = np.array([-0.5, -0.5, 0.5, 0.5, -0.5, np.nan])
    xs = (c[:, None] + dx[None, :]).reshape(-1)
    ys = (r[:, None] + dy[None, :]).reshape(-1)
    return xs.astype(np.float32), ys.astype(np.float32)


def _contrast_colours(values: np.ndarray, scale: dict) -> list[str]:
    """Black or white text for each value, whichever reads better on its cell colour."""
    lo, hi = float(scale["zmin"]), float(scale["zmax"])
    t = np.clip((np.nan_to_num(values.astype(np.float64), nan=lo) - lo) / ((hi - lo) or 1.0), 0.0, 1.0)
    colours = plotly.colors.sample_colorscale(scale["colorscale"], list(t), colortype="tuple")
    luminance = [0.299 * r + 0.587 * g + 0.114 * b for r, g, b in colours]
    return ["black" if lum > 0.55 else "white" for lum in luminance]


def trusted_figure(data: list[dict], layout: dict) -> go.Figure:
    """A go.Figure from plain dicts without plotly's per-property validation.

    Validation walks every string of the per-cell labels and hover texts and costs 20-50 ms
    per figure; these dicts are fixed by the code below (the tests rebuild every figure with
    validation on, so a typo still fails there).
    """
    return go.Figure({"data": data, "layout": layout}, _validate=False)


@readable
def step_figure(cells: StepCells, *, colour_by: str = "value", zmax: float = 1.0, length: int,
                x_title: str = "column", y_title: str = "row", height: int | None = None,
                show_scale: bool = True, width_budget: int = 240, scale_below: bool = True) -> go.Figure:
    """One skew step as a heatmap (:func:`step_parts`, which says what it draws), validated nowhere: the tests
    rebuild it with validation on."""
    return trusted_figure(*step_parts(cells, colour_by=colour_by, zmax=zmax, length=length, x_title=x_title,
                                      y_title=y_title, height=height, show_scale=show_scale,
                                      width_budget=width_budget, scale_below=scale_below))


def step_parts(cells: StepCells, *, colour_by: str = "value", zmax: float = 1.0, length: int,
               x_title: str = "column", y_title: str = "row", height: int | None = None,
               show_scale: bool = True, width_budget: int = 240, scale_below: bool = True) -> tuple[list[dict], dict]:
    """One skew step's traces and layout as dicts: labels in the cells, grey pad, hatched garbage, blank masked cells.
    The app sends them as a prepared figure (relviz.app.display.prepared, with heatmap.readable_layout: what
    :func:`step_figure`'s go.Figure and make_readable make of them, with no object tree built on a move).

    colour_by: "value" (the numbers, diverging around 0, range ±zmax shared by every step so a
    value keeps its colour as it moves), "distance" (the distance each value stands for) or
    "row" (the query row it came from: shows what moved from one row to the next).
    Trace 0 always holds the step's numbers in ``z`` when colour_by="value". ``width_budget``:
    roughly the pixels the plot may take across (sets the cell size, hence the height; 240 is a
    third of the page at 1280 px). Cell labels are drawn only where they fit in a cell; otherwise
    they are switched off (``layout.meta["labels"]`` says which) and the hover still tells each cell.
    ``show_scale``: a colour bar, under the plot (``height`` grows to make room for it), or beside it with
    ``scale_below=False`` (for a grid of panels, relviz.show, whose own layout places it).
    """
    rows, cols = cells.values.shape
    if colour_by == "value":
        z = cells.values
        scale = dict(colorscale=plotly.colors.get_colorscale(VALUE_SCALE), zmin=-zmax, zmax=zmax,
                     colorbar=dict(title=dict(text="value")))
    elif colour_by == "distance":
        hidden = (cells.kinds == MASKED) | (cells.source_row < 0)
        z = np.where(hidden, np.nan, cells.distance).astype(np.float32)
        scale = dict(colorscale=plotly.colors.get_colorscale("PuOr"), zmin=-(length - 1), zmax=max(length - 1, 1),
                     colorbar=dict(title=dict(text="distance")))
    elif colour_by == "row":
        hidden = (cells.kinds == MASKED) | (cells.source_row < 0)
        z = np.where(hidden, np.nan, cells.source_row).astype(np.float32)
        scale = dict(colorscale=plotly.colors.get_colorscale("Viridis"), zmin=0, zmax=max(length - 1, 1),
                     colorbar=dict(title=dict(text="from row")))
    else:
        raise ValueError(f"colour_by must be 'value', 'distance' or 'row'; got {colour_by!r}")
    below = show_scale and scale_below
    if show_scale and not scale_below:
        scale["colorbar"].update(thickness=12, len=0.9)
        width_budget -= 70  # the colour bar takes its share of the width
    cell_px = int(min(44, max(12, width_budget // max(rows, cols))))
    bottom = X_AXIS_BELOW + COLOUR_BAR_BELOW if below else 45
    height = (height or (70 + cell_px * rows)) + bottom - 45
    if below:  # under the plot: the cells keep the column's width
        scale["colorbar"], bar_title = colour_bar_below(scale["colorbar"], height=height)
    text_size = 14 if cell_px >= 40 else (12 if cell_px >= 30 else 10)
    widest = max((len(str(label)) for label in cells.labels.flat), default=1)
    labels_on = bool(width_budget / cols >= 0.62 * text_size * widest + 4)
    template = "%{text}" if labels_on else ""
    x, y = np.arange(cols), np.arange(rows)
    hover = cells.hover.astype(str)
    pad = cells.source_row < 0
    # Each cell's label is drawn once: the pad layer writes "pad", and hatched or dropped cells get theirs
    # again above the hatching. Written twice, the two copies sat a pixel apart ("−5" read "=5").
    overlaid = pad | np.isin(cells.kinds, (GARBAGE, DROPPED))
    data: list[dict] = [dict(
        type="heatmap", name="values", z=z, x=x, y=y,
        text=np.where(overlaid, "", cells.labels.astype(str)), texttemplate=template,
        textfont=dict(size=text_size), customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        xgap=1, ygap=1, showscale=show_scale, **scale)]

    if pad.any():
        data.append(dict(
            type="heatmap", name="pad", z=np.where(pad, 1.0, np.nan).astype(np.float32), x=x, y=y,
            colorscale=[[0, PAD_COLOUR], [1, PAD_COLOUR]], showscale=False, hoverongaps=False,
            text=np.where(pad, "pad", ""), texttemplate=template, textfont=dict(size=text_size, color="black"),
            customdata=hover, hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1))
    for kind, name in ((GARBAGE, "garbage"), (DROPPED, "dropped")):
        mask = cells.kinds == kind
        if mask.any():
            xs, ys = _cell_polygons(mask)
            if kind == GARBAGE:  # hatched and outlined
                style = dict(line=dict(width=1, color=HATCH_COLOUR), fillcolor="rgba(0,0,0,0)",
                             fillpattern=dict(shape="/", fgcolor="rgba(0,0,0,0.55)", bgcolor="rgba(0,0,0,0)",
                                              size=9, solidity=0.12))
            else:  # faded: about to be cut off
                style = dict(line=dict(width=1.5, color="#555555", dash="dot"), fillcolor="rgba(255,255,255,0.72)")
            data.append(dict(type="scatter", name=name, x=xs, y=ys, mode="lines", fill="toself",
                             hoverinfo="skip", showlegend=False, **style))
            # The labels again, on top of the hatching, so they stay readable.
            r, c = np.nonzero(mask & ~pad)
            if r.size and labels_on:
                data.append(dict(
                    type="scatter", name=f"{name} labels", x=c.astype(np.float32), y=r.astype(np.float32),
                    mode="text", text=cells.labels[r, c].astype(str), hoverinfo="skip", showlegend=False,
                    textfont=dict(size=text_size, color=_contrast_colours(z[r, c], scale) if kind == GARBAGE
                                  else "black"),  # dropped cells sit under a white veil
                    textposition="middle center"))
    # What plotly.js does in the browser for each of the page's five charts on every move (issue 34: a move drew
    # them in ~400 ms of Chromium's main thread): tick labels may overflow (its default, "hide past div", measures
    # every label's box, a forced layout of the whole page each); the margins are fixed unless a colour bar beside
    # the plot needs room (plotly drew the chart a second time when its automatic margins settled); datarevision
    # names the data, so the redraw Streamlit asks for after mounting a chart (the same figure, re-themed through a
    # JSON copy: new arrays) finds nothing changed instead of drawing it again.
    axis = dict(showgrid=False, zeroline=False, constrain="domain", ticklabeloverflow="allow")
    if show_scale:
        scale["colorbar"]["ticklabeloverflow"] = "allow"
    layout = dict(
        height=height,
        # margins fixed: a flat colour bar would push the bottom one and move the plot over its title
        margin=dict(l=50, r=10, t=10, b=bottom, autoexpand=show_scale and not below),
        annotations=[bar_title] if below else [],
        datarevision=_digest(z, hover, cells.labels.astype(str), cells.kinds),
        plot_bgcolor="#f4f4f4", showlegend=False, hoverlabel=dict(align="left"), meta=dict(labels=labels_on),
        xaxis=dict(title=dict(text=x_title), range=[-0.5, cols - 0.5], dtick=1 if cols <= 12 else 2, **axis),
        yaxis=dict(title=dict(text=y_title), range=[rows - 0.5, -0.5], dtick=1 if rows <= 12 else 2,
                   scaleanchor="x", **axis),
    )
    return data, layout


def _digest(*arrays: np.ndarray) -> str:
    """A short name for the step's data (plotly.js's layout.datarevision): the same cells, the same name."""
    digest = hashlib.blake2b(digest_size=8)
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def shared_zmax(*arrays: np.ndarray) -> float:
    """One symmetric colour range for every step (the largest |score|, 1 when all are 0), so a score keeps its
    colour as it moves."""
    return float(max(np.nanmax(np.abs(a)) for a in arrays)) or 1.0


def unmasked_error(demo: DemoInputs) -> np.ndarray:
    """|causal skew − true q_i · e(j − i)| per cell [L, L]: what an encoder that used the causal
    skew without a mask would feed its softmax. Zero on and below the diagonal (float32 rounding)."""
    return (skew(demo.qer) - naive_reference(demo, bidirectional=True)).abs().numpy().astype(np.float32)


@readable
def unmasked_error_figure(error: np.ndarray, *, height: int = 330) -> go.Figure:
    """The error of the unmasked causal skew: a picture of why an encoder must not use it."""
    length = error.shape[0]
    i, j = np.indices(error.shape)
    figure = go.Figure(go.Heatmap(
        z=error, x=np.arange(length), y=np.arange(length), colorscale="Reds", zmin=0,
        customdata=(j - i).astype(np.int16),
        hovertemplate="query i = %{y}, key j = %{x}<br>j − i = %{customdata}<br>|error| = %{z:.3g}<extra></extra>",
        colorbar=dict(title=dict(text="|error|"), thickness=12), xgap=1, ygap=1))
    figure.update_layout(height=height, margin=dict(l=50, r=10, t=40, b=45),
                         title=dict(text="causal skew used unmasked: |error| per cell", x=0, xanchor="left"),
                         xaxis=dict(title=dict(text="key j"), constrain="domain"),
                         yaxis=dict(title=dict(text="query i"), autorange="reversed", scaleanchor="x"))
    return narrow_figure_title(figure)   # in half the encoder tab: 54 px past its chart at 1024 px, 93 at 819
