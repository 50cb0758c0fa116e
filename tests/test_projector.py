"""Projector: every figure on the teaching pages uses fonts readable at the back of a room (≥ 15 px text,
≥ 17 px titles); plotly's 12 px default is not."""
from __future__ import annotations

import json

import pytest

from page_support import run_page
from plotly_data import canvas_data, charts, is_canvas
from relviz.figures.heatmap import READABLE_FONT, READABLE_TITLE

#: the Skew page's steps (relviz.app.display.show_steps), which plotly_data.charts leaves out
STEP_COMPONENT = "relviz_step_canvas"


def _pictures(at) -> list[dict]:
    return charts(at) + [panel["picture"] for element in at.get("bidi_component")
                         if element.proto.component_name == STEP_COMPONENT
                         for panel in canvas_data(element.proto.json)["panels"] if panel["kind"] == "step"]


PAGES = [("shaw", {}), ("t5", {}), ("t5", {"t5_tab": "Precision & references"}), ("skew", {}),
         ("skew", {"skew_tab": "Bidirectional skew (encoder)"}), ("absolute", {})]


@pytest.mark.parametrize("page,params", PAGES)
def test_every_figure_has_readable_fonts(page, params):
    figures = _pictures(run_page(page, **params))
    assert figures
    for figure in figures:
        if is_canvas(figure):   # relviz's canvases draw text, ticks and titles at their payload's sizes
            assert figure["font"] >= READABLE_FONT, figure["kind"]
            assert figure.get("tick_font", figure["font"] - 1) >= READABLE_FONT - 1, figure["kind"]
            assert not figure.get("title") or figure.get("title_font", 0) >= READABLE_TITLE, figure["title"]
            continue
        layout = figure["layout"]
        assert layout.get("font", {}).get("size", 0) >= READABLE_FONT, layout.get("title")
        title = layout.get("title")
        if isinstance(title, dict) and title.get("text"):
            assert title.get("font", {}).get("size", 0) >= READABLE_TITLE, title["text"]


@pytest.mark.parametrize("page,params", PAGES[:4])
def test_axis_ticks_and_titles_are_set_explicitly(page, params):
    """Streamlit's chart theme draws axes at 12 px unless the figure sets their fonts itself."""
    for figure in charts(run_page(page, **params)):
        layout = figure["layout"]
        for name, axis in layout.items():
            if name.startswith(("xaxis", "yaxis")) and axis.get("visible", True) is not False \
                    and axis.get("showticklabels", True):
                assert axis.get("tickfont", {}).get("size", 0) >= READABLE_FONT - 1, (layout.get("title"), name)
