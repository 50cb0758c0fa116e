"""Browser-side drawing code shipped with relviz (package data, read by relviz.app.display).

``toeplitz_canvas.js``: a Streamlit component (st.components.v2) that draws a window of a Toeplitz
matrix, or its pooled overview, on a canvas from per-offset values, with hover computed in the
browser. A slider move then sends O(rows + cols) numbers instead of one hover record per cell.
``xy_canvas.js``: bars, lines and markers with their min … max against x, in panels (figures.xy_canvas.XYImage),
drawn in place when a slider changes them (a changed plotly figure is a new chart, drawn from scratch).
``grid_canvas.js``: labelled heatmaps in panels with a mark in chosen cells (figures.grid_canvas.GridPanels), drawn in
place: the Experiments page's overview, whose ✓ marks its threshold moves.
``step_canvas.js``: the steps of the Music Transformer skew (figures.skew_canvas.steps_json: each step's title,
picture and caption, and the check beside them) as one element, each picture drawn in place.
``canvas_common.js``: what the four share (served before each: :func:`component_js`).
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@cache
def component_js(file_name: str) -> str:
    """A component's JavaScript module as Streamlit gets it: ``canvas_common.js`` (what every canvas component
    shares: the font, the root with its canvas, tooltip and PNG button, the PNG download, the "relviz:drawn"
    announcement), then the component's own file, whose names it uses."""
    common = (HERE / "canvas_common.js").read_text(encoding="utf-8")
    return common + "\n" + (HERE / file_name).read_text(encoding="utf-8")


def toeplitz_canvas_js() -> str:
    """The Toeplitz component's module (its default export draws; see the file's header)."""
    return component_js("toeplitz_canvas.js")


def xy_canvas_js() -> str:
    """The xy component's module (see the file's header)."""
    return component_js("xy_canvas.js")


def grid_canvas_js() -> str:
    """The grid component's module (see the file's header)."""
    return component_js("grid_canvas.js")


def step_canvas_js() -> str:
    """The skew step component's module (see the file's header)."""
    return component_js("step_canvas.js")
