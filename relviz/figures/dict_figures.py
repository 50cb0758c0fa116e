"""What the figures of a trained model share: one colour per head, figures built from plain dicts,
and hover data in the smallest exact type.

Used by the attention figures (relviz.figures.attention) and the position-parameter figures
(relviz.figures.parameters), so that head 3 has one colour on every figure of a page.
``validate=False`` skips plotly's per-property validation (the page's rerun time); tests build with
it on.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from relviz.figures.heatmap import compact_ints, readable_layout, whole_number_ticks

#: One colour per head (Okabe–Ito: distinguishable with colour-vision deficiencies).
HEAD_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


def head_colour(head: int) -> str:
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


#: Beyond this many heads a curve per head gets a sequential colour by head index and a colour bar instead
#: of a legend: eight distinct colours repeated made head 1 and head 9 look alike, and a 32-entry legend
#: covered the axis title.
HEAD_SCALE = "Viridis"


def head_colours(heads: int) -> list[str]:
    """One colour per head: the eight distinct ones up to eight heads, else the head index on HEAD_SCALE."""
    if heads <= len(HEAD_COLOURS):
        return HEAD_COLOURS[:heads]
    from plotly.colors import sample_colorscale

    return sample_colorscale(HEAD_SCALE, [h / (heads - 1) for h in range(heads)])


def parts_figure(parts: tuple[list[dict], dict], validate: bool = True) -> go.Figure:
    """A go.Figure from a builder's ``*_parts`` (trace and layout dicts). The parts are what plotly's validation
    makes of them (named colour scales expanded, no None, no magic underscores), so the Live attention page
    sends them as they are (relviz.app.display.prepared); tests/test_figures_unvalidated.py holds them to that."""
    data, layout = parts
    return go.Figure({"data": data, "layout": layout}, _validate=validate)


def figure_parts(data: list[dict], layout: dict) -> tuple[list[dict], dict]:
    """The trace and layout dicts :func:`parts_figure` builds a figure from (projector fonts, whole-number
    ticks): what the app may send without building a go.Figure (relviz.app.display.prepared)."""
    return data, whole_number_ticks(data, readable_layout(layout))


def hover_data(fields: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> tuple[np.ndarray | None, list[str]]:
    """customdata (smallest exact type) and the hover lines for ``fields``."""
    if not fields:
        return None, []
    arrays = [np.broadcast_to(np.asarray(v), shape) for v in fields.values()]
    all_ints = all(np.issubdtype(a.dtype, np.integer) for a in arrays)
    stacked = np.stack(arrays, axis=-1)
    data = compact_ints(stacked) if all_ints else stacked.astype(np.float32)
    lines = []
    for k, (label, values) in enumerate(zip(fields, arrays)):
        fmt = "" if np.issubdtype(values.dtype, np.integer) else ":.4g"
        lines.append(f"{label} = %{{customdata[{k}]{fmt}}}")
    return data, lines
