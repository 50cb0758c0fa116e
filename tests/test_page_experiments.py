"""AppTest for the Experiments page: renders from the shipped results, the threshold slider
redraws the overview, a broken or missing results file is an st.error (not a crash), and the
live cells overlay a rerun on the stored curves."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from page_support import run_page
from plotly_data import charts, decode, find
from relviz import experiments as ex
from relviz.app import quotas
from relviz.app.training_queue import CAPS, GATE

ENV = "RELVIZ_EXPERIMENTS_RESULTS"


def run(monkeypatch, results: Path | None = None, **params) -> AppTest:
    if results is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, str(results))
    return run_page("experiments", timeout=60, **params)


def traces(figure: dict, kind: str | None = None) -> list[dict]:
    return [t for t in figure["data"] if kind is None or t.get("type") == kind]


def overview(at: AppTest) -> dict:
    """The offset-resolution overview as the grid canvas component receives it (relviz.figures.grid_canvas)."""
    shown = [json.loads(c.proto.json) for c in at.get("bidi_component") if c.proto.component_name == "relviz_grid_canvas"]
    assert len(shown) == 1, len(shown)
    return json.loads(shown[0]["json"]) | {k: v for k, v in shown[0].items() if k != "json"}


def checks(payload: dict) -> int:
    """How many cells carry the ✓ mark, over every panel."""
    return sum(int(np.frombuffer(base64.b64decode(panel["marks"]), dtype=np.uint8).sum()) for panel in payload["panels"])


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    from test_experiments import tiny_results

    mp = pytest.MonkeyPatch()
    try:
        data = tiny_results(mp)
    finally:
        mp.undo()
    path = tmp_path_factory.mktemp("page") / "tiny.json"
    path.write_text(json.dumps(data))
    return path


def test_renders_the_shipped_results(monkeypatch):
    at = run(monkeypatch)
    assert not at.error
    data = ex.load_results()
    figures = charts(at)
    shown = overview(at)
    assert shown["title"].startswith("Offset resolution")
    offset = data["experiments"]["offset_resolution"]
    for panel, layers in zip(shown["panels"], offset["setup"]["layers"]):
        settings, shifts, rows = ex.offset_matrix(offset, layers)
        assert shown["rows"] == [s.label for s in settings] and panel["columns"] == [str(s) for s in shifts]
        levels = np.frombuffer(base64.b64decode(panel["levels"]), dtype=np.uint8)
        assert np.array_equal(levels, np.rint(np.array(rows, dtype=np.float32).ravel() * 255))   # colour over [0, 1]
    passing = sum(v >= 0.9 for n in offset["setup"]["layers"] for row in ex.offset_matrix(offset, n)[2] for v in row)
    assert checks(shown) == passing
    for title in ("Accuracy against shift s", "Accuracy against evaluation length", "The memory wall",
                  "Forward time", "Shaw et al., Table 2"):
        find(figures, title)
    text = " ".join(m.value for m in at.markdown)
    for sentence in ex.offset_reading(offset, 0.9) + ex.cost_reading(data["experiments"]["cost"]):
        assert sentence in text
    assert "Train Short, Test Long" in text  # the ALiBi headline as the published reference
    assert at.slider[0].label.startswith("accuracy that counts")


def test_threshold_slider_redraws_the_overview(monkeypatch):
    at = run(monkeypatch, ex_thr=0.5)
    low = checks(overview(at))
    at.slider(key="ex_thr").set_value(1.0).run()
    high = checks(overview(at))
    assert high < low
    assert "at least 100%" in overview(at)["title"]


def test_detail_chart_draws_bucket_edges_for_the_chosen_settings(monkeypatch):
    at = run(monkeypatch, ex_set="T5 8/32")  # the URL holds the labels the widget shows
    detail = find(charts(at), "Accuracy against shift s")
    bars = traces(detail, "bar")
    # T5 8/32 over s = 1..40: buckets {1}, {2}, {3}, {4-6}, {7-11}, {12-19}, {20+}
    assert [(b["base"][0] + 0.5, b["base"][0] + b["x"][0] - 0.5) for b in bars] == \
        [(1, 1), (2, 2), (3, 3), (4, 6), (7, 11), (12, 19), (20, 40)]


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("{ nope", "not valid JSON"),
    (json.dumps({"format": "relviz-experiments", "format_version": 1}), "missing key"),
])
def test_broken_results_file_is_an_error_message(monkeypatch, tmp_path, content, message):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    at = run(monkeypatch, path)
    assert at.error and message in at.error[0].value and str(path) in at.error[0].value
    assert not at.get("plotly_chart")


def test_live_offset_cell_overlays_a_rerun(monkeypatch, tiny_file):
    at = run(monkeypatch, tiny_file)
    at.slider(key="ex_lo_steps").set_value(5)
    at.button(key="ex_lo_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    detail = find(charts(at), "Accuracy against shift s")
    live = [t for t in traces(detail, "scatter") if str(t.get("name", "")).startswith("live:")]
    assert len(live) == 1 and list(decode(live[0]["x"])) == [1, 5]
    assert all(0 <= y <= 1 for y in decode(live[0]["y"]))
    assert "≤ 5 steps" in live[0]["name"]


def test_live_extrapolation_cell_overlays_a_rerun(monkeypatch, tiny_file):
    at = run(monkeypatch, tiny_file)
    at.selectbox(key="ex_le_set").set_value("learned")
    at.slider(key="ex_le_steps").set_value(10)
    at.button(key="ex_le_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    figure = find(charts(at), "Accuracy against evaluation length")
    live = [t for t in traces(figure, "scatter") if str(t.get("name", "")).startswith("live:")]
    # learned (max_len 64) trained at 32 runs at 1x and 2x only; 3x is "cannot run"
    assert len(live) == 1 and list(decode(live[0]["x"])) == [32, 64]
    assert any("3×: cannot run" in c.value for c in at.caption)


def test_live_cells_go_through_the_training_guard(monkeypatch, tiny_file):
    """A live cell takes the server's one training slot and counts against the session's quota
    (shared with Live attention): busy server or spent quota is an st.error, nothing runs."""

    at = run(monkeypatch, tiny_file)
    at.slider(key="ex_lo_steps").set_value(5)
    with GATE.slot():
        at.button(key="ex_lo_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Another training is running" in e.value for e in at.error)
    detail = find(charts(at), "Accuracy against shift s")
    assert not [t for t in traces(detail, "scatter") if str(t.get("name", "")).startswith("live:")]
    assert at.session_state[quotas.SESSION_TRAININGS_KEY].started == 0

    at.button(key="ex_lo_go").click().run()           # the slot is free again: it runs and counts
    assert not at.error and at.session_state[quotas.SESSION_TRAININGS_KEY].started == 1

    at.session_state[quotas.SESSION_TRAININGS_KEY].started = CAPS.max_trainings_per_session
    at.run()
    assert at.button(key="ex_lo_go").disabled and at.button(key="ex_le_go").disabled
    assert any("limit per session" in e.value for e in at.error)


def test_live_step_sliders_stop_at_the_work_cap(monkeypatch):
    at = run(monkeypatch)
    section = ex.load_results()["experiments"]["offset_resolution"]
    for layers in section["setup"]["layers"]:
        at.selectbox(key="ex_lo_lay").set_value(layers).run()
        slider = at.slider(key="ex_lo_steps")
        assert ex.live_offset_work(section, layers, slider.max) <= CAPS.max_cell_work
        slider.set_value(slider.max).run()
        assert not at.error and not at.button(key="ex_lo_go").disabled
