"""AppTest of pages/skew.py: the figures hold exactly the library's tensors, the proofs and memory are live."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from page_support import run_page
from plotly_data import canvas_data, decode
from streamlit.testing.v1 import AppTest

from relviz.figures.skew import bidirectional_steps, causal_steps, demo_inputs, step_figure
from relviz.figures.skew_canvas import HATCHED, PAD
from relviz.skew import (causal_step_words, gather_relative, skew, skew_bidirectional, skew_source_index,
                         skew_steps)

BIDIRECTIONAL = "Bidirectional skew (encoder)"
STEP_COMPONENT = "relviz_step_canvas"   # relviz.app.display.show_step's component


def _run(**params) -> AppTest:
    return run_page("skew", **params)


# ---- decoding the figures AppTest saw ------------------------------------------------

def _panels(at: AppTest) -> list[dict]:
    """The steps component's panels (relviz.figures.skew_canvas.steps_json: steps and check panels), in page
    order."""
    return [panel for element in at.get("bidi_component") if element.proto.component_name == STEP_COMPONENT
            for panel in canvas_data(element.proto.json)["panels"]]


def _steps(at: AppTest) -> list[dict]:
    """The step canvases' payloads (relviz.figures.skew_canvas.step_payload), in page order."""
    return [panel["picture"] for panel in _panels(at) if panel["kind"] == "step"]


def _captions(at: AppTest) -> list[str]:
    """Every caption the page shows: Streamlit's, and the steps' under their pictures."""
    return [c.value for c in at.caption] + [p["caption"] for p in _panels(at) if p["kind"] == "step"]


def _check(at: AppTest, style: str) -> list[str]:
    """The check panels' lines of one look (success, warning, caption, text) as their text, in page order."""
    return ["".join(text for text, _ in line["runs"]) for p in _panels(at) if p["kind"] == "check"
            for line in p["lines"] if line["style"] == style]


def _as_figure(payload: dict) -> dict:
    """A step canvas's payload read as its plotly twin's traces: "values" (z, the labels as text, the hover as
    customdata), "pad" (1 on the pad) and "garbage" (present where cells are hatched), and meta's labels flag."""
    shape = (payload["rows"], payload["cols"])
    looks = np.frombuffer(base64.b64decode(payload["looks"]), dtype=np.uint8).reshape(shape)
    data = [{"name": "values", "z": np.frombuffer(base64.b64decode(payload["z"]), dtype="<f4").reshape(shape),
             "text": np.array(payload["labels"]).reshape(shape), "customdata": np.array(payload["hover"]).reshape(shape)},
            {"name": "pad", "z": np.where(looks & PAD, 1.0, np.nan)}]
    if (looks & HATCHED).any():
        data.append({"name": "garbage"})
    return {"data": data, "layout": {"meta": {"labels": payload["labels_on"]}}}


def _figures(at: AppTest) -> list[dict]:
    """Every picture of the run in page order: the steps (canvases, read as their plotly twins), then the plotly
    charts (the encoder tab's unmasked-bug picture, after its steps)."""
    return [_as_figure(p) for p in _steps(at)] + [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _trace(figure: dict, name: str) -> dict | None:
    return next((t for t in figure["data"] if t.get("name") == name), None)


def _values(figure: dict) -> np.ndarray:
    return decode(_trace(figure, "values")["z"]).astype(np.float64)


def _number(text: str, after: str) -> float:
    match = re.search(re.escape(after) + r"\s*([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)", text)
    assert match, f"no number after {after!r} in {text!r}"
    return float(match.group(1))


# ---- the causal tab ------------------------------------------------------------------

def _check_causal(at: AppTest, length: int, seed: int) -> None:
    figures = _figures(at)
    assert len(figures) == 5
    qer_fig, padded_fig, reshaped_fig, sliced_fig, masked_fig = figures
    demo = demo_inputs(length, seed)
    qer = demo.qer
    steps = skew_steps(qer)

    shown_qer = _values(qer_fig)
    assert shown_qer.shape == (length, length)
    np.testing.assert_allclose(shown_qer, qer.numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(_values(padded_fig), steps.padded.numpy())
    np.testing.assert_array_equal(_values(reshaped_fig), steps.reshaped.numpy())
    np.testing.assert_array_equal(_values(sliced_fig), skew(qer).numpy())
    # The chain holds on the figure's own numbers, too: skew(shown QE_r^T) == shown sliced step.
    np.testing.assert_allclose(_values(sliced_fig), skew(torch.from_numpy(shown_qer)).numpy(), atol=1e-6)
    masked = _values(masked_fig)
    lower = np.tril(np.ones((length, length), dtype=bool))
    np.testing.assert_array_equal(masked[lower], skew(qer).numpy()[lower])
    assert np.isnan(masked[~lower]).all()

    # Labels: column m of QE_r^T stands for m - (L - 1); the sliced step's lower triangle says j - i.
    labels = np.array(_trace(qer_fig, "values")["text"])
    assert labels[0, 0] == f"−{length - 1}" and labels[-1, -1] == "0"
    sliced_labels = np.array(_trace(sliced_fig, "values")["text"])
    for i in range(length):
        for j in range(i + 1):
            expected = "0" if i == j else f"−{i - j}"
            assert sliced_labels[i, j] == expected

    # The pad overlay sits exactly where skew_source_index says the zeros went.
    source = skew_source_index(length, device="cpu")
    for figure, rows in ((padded_fig, source.row.padded), (reshaped_fig, source.row.reshaped),
                         (sliced_fig, source.row.skewed)):
        pad = ~np.isnan(decode(_trace(figure, "pad")["z"]).astype(np.float64))
        np.testing.assert_array_equal(pad, rows.numpy() < 0)

    # Garbage is hatched and its hover says where it came from.
    assert _trace(sliced_fig, "garbage") is not None
    hover = np.array(_trace(sliced_fig, "values")["customdata"])
    assert "garbage: from row 1, distance" in hover[0, 2]
    assert "pad" in hover[0, 1]
    assert "exact" in hover[length - 1, 0]


def test_defaults_show_every_step_and_the_proof():
    at = _run()
    assert at.slider(key="skew_L").value == 6
    _check_causal(at, 6, 0)
    proof = _check(at, "success")[0]
    assert "skew equals the naive gather on the lower triangle" in proof
    assert _number(proof, "max |difference| =") < 1e-5
    # the garbage is not small: the page says by how much it is wrong
    assert _number(_check(at, "warning")[0], "by up to") > 0.1
    assert not at.error  # nothing on the page is an error box
    assert "2L − 1 distances" in "".join(_check(at, "text"))
    titles = [p["title"] for p in _panels(at)]
    assert titles == [w.title for w in causal_step_words(6).values()] + ["Live check: naive gather"]
    assert any("j − i" in el.value for el in at.info)  # the sign convention


def test_memory_panel_reproduces_the_music_transformer_numbers():
    at = _run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Shaw: L × L × D per layer"] == "8.6 GB"
    assert metrics["skew: L × D per layer"] == "4.2 MB"
    assert metrics["Shaw per head (D_h = 64)"] == "1.1 GB"
    assert metrics["skew per head"] == "0.52 MB"
    assert "8.5 GB" in "".join(_captions(at))


@pytest.mark.parametrize("length", [3, 16])
def test_length_slider_at_its_limits(length):
    at = _run()
    at.slider(key="skew_L").set_value(length).run()
    assert not at.exception
    _check_causal(at, length, 0)


def test_seed_at_its_limits_changes_the_numbers():
    at = _run()
    first = _values(_figures(at)[0])
    at.number_input(key="skew_seed").set_value(99_999).run()
    assert not at.exception
    _check_causal(at, 6, 99_999)
    assert not np.allclose(_values(_figures(at)[0]), first)


def test_url_restores_the_view():
    at = _run(skew_L="9", skew_seed="7", skew_colour="distance")
    assert at.slider(key="skew_L").value == 9
    figures = _figures(at)
    # colour by distance: the sliced step's lower triangle is j - i
    z = decode(_trace(figures[3], "values")["z"]).astype(np.float64)
    i, j = np.indices((9, 9))
    lower = j <= i
    np.testing.assert_array_equal(z[lower], (j - i)[lower])


def test_colour_by_source_row_shows_where_the_garbage_came_from():
    at = _run(skew_colour="source row")
    z = decode(_trace(_figures(at)[3], "values")["z"]).astype(np.float64)
    length = 6
    for i in range(length):
        for j in range(length):
            if j <= i:
                assert z[i, j] == i
            elif j >= i + 2:
                assert z[i, j] == i + 1  # garbage: query i + 1's scores


def test_bidirectional_tab_is_exact_everywhere():
    at = _run(skew_tab=BIDIRECTIONAL, skew_L="16", skew_seed="3")
    figures = _figures(at)
    assert len(figures) == 4  # qer, window, result, the unmasked-bug picture
    demo = demo_inputs(16, 3)
    qer_all = demo.qer_all
    assert _values(figures[0]).shape == (16, 31)
    np.testing.assert_allclose(_values(figures[0]), qer_all.numpy(), atol=1e-6)
    result = _values(figures[2])
    np.testing.assert_array_equal(result, skew_bidirectional(qer_all).numpy())
    i, j = np.indices((16, 16))
    naive = gather_relative(demo.q, demo.e_all, torch.from_numpy(j - i + 15))
    np.testing.assert_allclose(result, naive.numpy(), atol=1e-5)
    labels = np.array(_trace(figures[2], "values")["text"])
    assert labels[0, 15] == "+15" and labels[15, 0] == "−15"
    proof = _check(at, "success")[0]
    assert "everywhere" in proof
    assert _number(proof, "max |difference| =") < 1e-5


@pytest.mark.parametrize("key,value", [("skew_mL", 1), ("skew_mL", 1_000_000), ("skew_mD", 1),
                                       ("skew_mD", 65_536), ("skew_mH", 1)])
def test_memory_inputs_at_their_limits(key, value):
    at = _run()
    at.number_input(key=key).set_value(value).run()
    assert not at.exception
    assert all("heads" in e.value for e in at.error)
    length = at.number_input(key="skew_mL").value
    dim = at.number_input(key="skew_mD").value
    heads = at.number_input(key="skew_mH").value
    if dim % heads == 0:
        metrics = {m.label: m.value for m in at.metric}
        from relviz.memory import format_bytes
        assert metrics["Shaw: L × L × D per layer"] == format_bytes(length * length * dim * 4)
        assert metrics["skew: L × D per layer"] == format_bytes(length * dim * 4)


def test_memory_panel_reports_bad_input_and_the_page_keeps_working():
    at = _run()
    at.number_input(key="skew_mH").set_value(1024).run()  # more heads than D = 512
    assert not at.exception
    messages = [e.value for e in at.error]
    assert any("heads" in m for m in messages)
    assert len(_figures(at)) == 5  # the rest of the page is still there
    at.number_input(key="skew_mH").set_value(3).run()  # 512 is not divisible by 3
    assert any("divisible" in e.value for e in at.error)


# ---- the figures themselves ----------------------------------------------------------

@pytest.mark.parametrize("colour_by", ["value", "distance", "row"])
def test_step_figures_pass_plotly_validation(colour_by):
    """step_figure skips plotly's validation for speed: rebuild each one with validation on."""
    cells = causal_steps(demo_inputs(5, 1))
    for step in cells.values():
        figure = step_figure(step, colour_by=colour_by, zmax=3.0, length=5)
        go.Figure(figure.to_dict())  # raises on any invalid property
    with pytest.raises(ValueError, match="colour_by"):
        step_figure(cells["qer"], colour_by="colour", length=5)


def test_figures_are_valid_and_small_at_the_largest_length():
    for params in ({"skew_L": "16"}, {"skew_L": "16", "skew_tab": BIDIRECTIONAL, "skew_colour": "distance"}):
        at = _run(**params)
        for chart in at.get("plotly_chart"):
            assert len(chart.proto.spec) < 3_000_000
            go.Figure(json.loads(chart.proto.spec))  # plotly's validation (the page builds without it)


def test_cell_labels_switch_off_when_cells_get_too_small_and_hover_stays():
    """From L ≈ 12 the labels of a third-of-a-page figure overlapped: they switch off, the hover stays."""
    small = causal_steps(demo_inputs(6, 0))["reshaped"]
    large = causal_steps(demo_inputs(12, 0))["reshaped"]
    on = step_figure(small, length=6).to_plotly_json()
    off = step_figure(large, length=12).to_plotly_json()
    assert on["data"][0]["texttemplate"] == "%{text}" and on["layout"]["meta"]["labels"] is True
    assert off["data"][0]["texttemplate"] == "" and off["layout"]["meta"]["labels"] is False
    assert not any(t.get("mode") == "text" for t in off["data"])
    assert "customdata" in off["data"][0] and "%{customdata}" in off["data"][0]["hovertemplate"]
    at = _run(skew_L="12")
    assert any("labels are off" in c.lower() for c in _captions(at))
    assert not any("labels are off" in c.lower() for c in _captions(_run()))


def test_bidirectional_step_2_gets_the_full_width():
    """Step 2 (L × (2L − 2) cells) was squeezed into half the page: at L = 10 its labels stay on."""
    at = _run(skew_tab=BIDIRECTIONAL, skew_L="10")
    window = _figures(at)[1]
    assert _values(window).shape == (10, 18)
    assert window["layout"]["meta"]["labels"] is True


def test_bidirectional_tab_pictures_the_unmasked_causal_skew_bug():
    at = _run(skew_tab=BIDIRECTIONAL, skew_L="7", skew_seed="2")
    bug = next(f for f in _figures(at) if "unmasked" in str(f["layout"].get("title")))
    error = decode(bug["data"][0]["z"]).astype(np.float64)
    demo = demo_inputs(7, 2)
    i, j = np.indices((7, 7))
    truth = gather_relative(demo.q, demo.e_all, torch.from_numpy(j - i + 6)).numpy()
    np.testing.assert_allclose(error, np.abs(skew(demo.qer).numpy() - truth), atol=1e-6)
    assert error[j <= i].max() < 1e-5 and error[j > i].min() >= 0 and error[j > i].max() > 0.1


def test_a_cached_step_picture_sends_what_the_fresh_one_sends_and_shows_its_plotly_twin():
    """The page caches each step's canvas payload: at the longest L, the first step's is step_payload built afresh
    with the page's arguments, and it shows what the plotly twin (step_figure) shows: the same z (NaN where no
    colour), labels, hover, cells switched to labels or not, the pad, the hatched cells, the height and margins."""
    from relviz.figures.skew import shared_zmax
    from relviz.figures.skew_canvas import step_payload

    for params, steps in (({"skew_L": "16", "skew_seed": "3"}, causal_steps),
                          ({"skew_L": "5", "skew_colour": "distance"}, causal_steps),
                          ({"skew_L": "7", "skew_tab": BIDIRECTIONAL, "skew_colour": "source row"},
                           bidirectional_steps)):
        at = _run(**params)
        length, seed = int(params["skew_L"]), int(params.get("skew_seed", 0))
        colour = {"distance": "distance", "source row": "row"}.get(params.get("skew_colour"), "value")
        cells = steps(demo_inputs(length, seed))
        options = dict(colour_by=colour, zmax=shared_zmax(cells["qer"].values), length=length,
                       x_title="column m", y_title="query i", show_scale=True,
                       width_budget=240 if steps is causal_steps else 520)
        shown = _steps(at)[0]
        fresh = step_payload(cells["qer"], name=shown["name"], **options)
        assert shown == json.loads(json.dumps(fresh))
        for name, payload in zip(cells, _steps(at)):
            budget = {"qer": 520, "window": 760, "result": 380}[name] if steps is bidirectional_steps else 240
            twin = step_figure(cells[name], length=length, colour_by=colour, zmax=options["zmax"],
                               show_scale=payload["bar"] is not None, width_budget=budget).to_plotly_json()
            values, picture = twin["data"][0], _as_figure(payload)["data"][0]
            np.testing.assert_array_equal(picture["z"], decode(values["z"]).astype(np.float32))
            np.testing.assert_array_equal(picture["customdata"], values["customdata"])
            shown_text = np.where(values["text"] == "", picture["text"], values["text"])
            np.testing.assert_array_equal(picture["text"], shown_text)         # overlaid cells keep their label
            pad = _trace(twin, "pad")
            np.testing.assert_array_equal(~np.isnan(_as_figure(payload)["data"][1]["z"]),
                                          np.zeros(picture["z"].shape, bool) if pad is None
                                          else ~np.isnan(decode(pad["z"]).astype(np.float64)))
            assert (_trace(twin, "garbage") is None) == (_trace(_as_figure(payload), "garbage") is None)
            assert payload["labels_on"] == twin["layout"]["meta"]["labels"]



def test_hover_values_carry_a_true_minus_sign():
    """Every number the app shows writes its minus as U+2212 (relviz._words.minus): the hovers' value lines did
    not ("value = -0.412"). Each value line reads back as the cell's float32 value to 3 decimals, its sign kept."""
    at = _run(skew_L="5", skew_seed="4")
    for figure in _figures(at):
        values = _values(figure)
        hover = np.array(_trace(figure, "values")["customdata"])
        for (r, c), text in np.ndenumerate(hover):
            lines = [part[len("value = "):] for part in text.split("<br>") if part.startswith("value = ")]
            if np.isnan(values[r, c]) or not lines:   # masked, or the pad (its hover says so, it has no value)
                assert np.isnan(values[r, c]) or "pad" in text
                continue
            line, = lines
            assert "-" not in line
            assert float(line.replace("−", "-")) == pytest.approx(values[r, c], abs=5e-4)
            assert line[0] == ("−" if round(float(values[r, c]), 3) < 0 else "+")
    # the seed draws negative scores: the test saw some
    assert any("value = −" in t for f in _figures(at) for t in np.array(_trace(f, "values")["customdata"]).flat)


def test_a_step_figures_datarevision_names_its_data():
    """layout.datarevision lets plotly.js skip the redraw Streamlit asks for after mounting a chart (the same figure
    re-themed): it must change with the cells shown, and stay for the same ones."""
    def revision(length, seed, colour_by="value"):
        cells = causal_steps(demo_inputs(length, seed))["skewed"]
        return step_figure(cells, colour_by=colour_by, length=length).to_plotly_json()["layout"]["datarevision"]

    assert revision(6, 0) == revision(6, 0)
    assert len({revision(6, 0), revision(7, 0), revision(6, 1), revision(6, 0, "row")}) == 4


def test_the_steps_words_reach_the_component_as_runs_of_plain_text_never_as_html():
    """The steps component (relviz/components/step_canvas.js) sets each run's text with textContent: the page's
    markdown marks become runs, and a tag-like text stays text."""
    from relviz.figures.skew_canvas import check_panel, inline_runs, steps_json

    assert inline_runs("**Do not** use `_rel_shift` per *distance*.") == [
        ["Do not", "b"], [" use ", ""], ["_rel_shift", "code"], [" per ", ""], ["distance", "i"], [".", ""]]
    assert inline_runs("<b>x</b> 2 * 3, an open ** mark") == [["<b>x</b> 2 * 3, an open ** mark", ""]]
    with pytest.raises(ValueError, match="look"):
        check_panel("t", [("error", "x")])
    panel = check_panel("Live check", [("success", "ok **1**")])
    grid = json.loads(steps_json([{"kind": "step", "title": "1", "caption": "c", "picture": '{"z":"AA=="}'}, panel],
                                 [2.2, 1], spans={0: 2}))
    assert grid["columns"] == [2.2, 1] and [p["span"] for p in grid["panels"]] == [2, 1]
    assert grid["panels"][0]["picture"] == {"z": "AA=="}
    assert grid["panels"][1]["lines"] == [{"style": "success", "runs": [["ok ", ""], ["1", "b"]]}]


def test_each_tab_draws_its_steps_and_check_as_one_element_in_the_layout_of_its_columns():
    """A row of a tab's steps and its check panel are one element (issue 34: Streamlit re-rendered a title, a canvas
    and a caption per step on every move): the causal tab's five steps and its check in two rows of three, the
    encoder tab's first step beside its check, then steps 2 and 3 alone."""
    at = _run(skew_L="8")
    grids = [canvas_data(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name == STEP_COMPONENT]
    assert [(g["columns"], [p["kind"] for p in g["panels"]]) for g in grids] == [
        ([1, 1, 1], ["step"] * 3), ([1, 1, 1], ["step", "step", "check"])]
    causal = _panels(at)
    assert [p["caption"] for p in causal[:5]] == [w.caption for w in causal_step_words(8).values()]
    assert "naive gather" in _check(at, "caption")[0]
    at = _run(skew_tab=BIDIRECTIONAL, skew_L="8")
    grids = [canvas_data(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name == STEP_COMPONENT]
    assert [(g["columns"], [(p["kind"], p["span"]) for p in g["panels"]]) for g in grids] == [
        ([2.2, 1], [("step", 1), ("check", 1)]), ([1], [("step", 1)]), ([1], [("step", 1)])]
    assert [p["title"][0] for p in _panels(at) if p["kind"] == "step"] == ["1", "2", "3"]
