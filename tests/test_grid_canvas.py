"""relviz.figures.grid_canvas and the Experiments overview drawn with it: the canvas shows what its plotly twin
(figures.experiments.offset_overview) shows, cell for cell (colour value, ✓ mark, hover numbers), at every threshold
the slider takes; a panel that does not cover its grid is refused."""
from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from plotly_data import decode
from relviz import experiments as ex
from relviz.figures.experiments import offset_overview, offset_overview_canvas
from relviz.figures.grid_canvas import GridPanel, GridPanels
from relviz.figures.toeplitz_colours import hex_palette, palette_256


@pytest.fixture(scope="module")
def section():
    return ex.load_results()["experiments"]["offset_resolution"]


def unpacked(b64: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype=np.uint8)


@pytest.mark.parametrize("threshold", [round(0.5 + 0.05 * k, 2) for k in range(11)])  # the slider's steps
def test_the_canvas_shows_what_the_plotly_overview_shows(section, threshold):
    twin = offset_overview(section, threshold).to_dict()
    payload = offset_overview_canvas(section, threshold).payload()
    heatmaps = [t for t in twin["data"] if t["type"] == "heatmap"]
    marks = [t for t in twin["data"] if t["type"] == "scatter"]
    assert payload["title"] == twin["layout"]["title"]["text"]
    assert payload["palette"] == hex_palette(palette_256("Viridis")) and heatmaps[0]["colorscale"][0][1] == "#440154"
    assert len(payload["panels"]) == len(heatmaps) == len(marks)
    for panel, heatmap, mark in zip(payload["panels"], heatmaps, marks):
        z = decode(heatmap["z"])                   # [rows, cols] as plotly draws it
        assert list(heatmap["y"]) == payload["rows"] and list(heatmap["x"]) == panel["columns"]
        assert (heatmap["zmin"], heatmap["zmax"]) == (payload["colour"]["zmin"], payload["colour"]["zmax"]) == (0, 1)
        assert np.array_equal(unpacked(panel["levels"]), np.rint(z.ravel().astype(np.float64) * 255))
        rows, cols = z.shape
        ticked = {(x, y) for x, y in zip(mark["x"], mark["y"])}
        flags = unpacked(panel["marks"]).reshape(rows, cols)
        assert ticked == {(panel["columns"][c], payload["rows"][r]) for r, c in zip(*np.nonzero(flags))}
        # the hover's numbers are plotly's: the cell's mean (float32 z) and its customdata
        custom = decode(heatmap["customdata"])
        assert z.dtype == custom.dtype == np.float32
        for r in range(rows):
            for c in range(cols):
                lines = panel["hover"][r * cols + c]
                assert lines[0].startswith(f"{payload['rows'][r]}, {panel['title']}, s = {panel['columns'][c]} ")
                assert f"mean accuracy {float(z[r, c]):.1%} (3 seeds: {float(custom[r, c, 0]):.1%}–" in lines[1]
                assert re.fullmatch(r"most steps taken: \d+", lines[2]) and int(lines[2].split()[-1]) == \
                    round(float(custom[r, c, 3]))


def test_a_panel_that_does_not_cover_its_grid_is_refused():
    panel = GridPanel("p", ("1", "2"), np.zeros((2, 2)), np.zeros((2, 3), dtype=bool), (("",),) * 4)
    with pytest.raises(ValueError, match="values, marks and hover must cover 2 rows × 2 columns"):
        GridPanels(("a", "b"), (panel,), 0.0, 1.0, "accuracy", (0.0, 1.0), ("0%", "100%"))
