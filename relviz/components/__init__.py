"""Browser-side drawing code shipped with relviz (package data, read by relviz.app.display).

``toeplitz_canvas.js``: a Streamlit component (st.components.v2) that draws a window of a Toeplitz
matrix, or its pooled overview, on a canvas from per-offset values, with hover computed in the
browser. A slider move then sends O(rows + cols) numbers instead of one hover record per cell.
``xy_canvas.js``: bars, lines and markers with their min … max against x, in panels (figures.xy_canvas.XYImage),
drawn in place when a slider changes them (a changed plotly figure is a new chart, drawn from scratch).
``grid_canvas.js``: labelled heatmaps in panels with a mark in chosen cells (figures.grid_canvas.GridPanels), drawn in
place: the Experiments page's overview, whose ✓ marks its threshold moves.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@cache
def toeplitz_canvas_js() -> str:
    """The component's JavaScript module (its default export draws; see the file's header)."""
    return (HERE / "toeplitz_canvas.js").read_text(encoding="utf-8")


@cache
def xy_canvas_js() -> str:
    """The xy component's JavaScript module (see the file's header)."""
    return (HERE / "xy_canvas.js").read_text(encoding="utf-8")


@cache
def grid_canvas_js() -> str:
    """The grid component's JavaScript module (see the file's header)."""
    return (HERE / "grid_canvas.js").read_text(encoding="utf-8")


@cache
def step_canvas_js() -> str:
    """The skew step component's JavaScript module (see the file's header)."""
    return (HERE / "step_canvas.js").read_text(encoding="utf-8")
