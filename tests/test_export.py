"""Figures for papers: the camera button exports PNG or SVG, and heatmaps read in greyscale.

- The app's sidebar picks the format of plotly's camera button (plotly.js has one image button):
  PNG at twice the size by default, SVG on request; every chart of the page follows it.
- Every heatmap the app and relviz.show draw uses a colour scale whose lightness (CIE L*) is
  monotone, so a greyscale print keeps the order of the values; or a diverging scale (light in
  the middle, darker towards both ends) on data whose sign matters (centred on 0). A categorical
  map (the prediction strip's not counted / correct / wrong) needs its categories' greys apart.
"""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from relviz.app.display import EXPORT_KEY
from test_requirements import ROOT
from test_show import _monotone, _scale_lightness


def _export_formats(at) -> list[dict]:
    return [json.loads(chart.proto.config)["toImageButtonOptions"] for chart in at.get("plotly_chart")]


def _app(**params) -> AppTest:
    """The app (app.py draws the sidebar control), on the Shaw page, with URL ``params``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page("pages/shaw.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_camera_button_exports_png_by_default_and_svg_on_request():
    at = _app()
    png = _export_formats(at)
    assert len(png) >= 4 and all(options == {"format": "png", "scale": 2} for options in png)
    at.button_group(key=EXPORT_KEY).set_value("SVG").run()
    svg = _export_formats(at)
    assert len(svg) == len(png) and all(options == {"format": "svg"} for options in svg)
    linked = _export_formats(_app(**{EXPORT_KEY: "SVG"}))  # a shared link carries the format
    assert linked and all(options == {"format": "svg"} for options in linked)


@pytest.mark.parametrize("scale, ok", [("Viridis", True), ("Cividis", True), ("Greys", True), ("Turbo", False),
                                       ("Jet", False), ("Rainbow", False)])
def test_the_lightness_check_tells_monotone_scales_from_rainbows(scale, ok):
    assert _monotone(_scale_lightness(scale)) is ok
