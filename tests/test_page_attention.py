"""AppTest for the live attention page: every shipped scheme, the figures' data against the model,
the random example, bad input, extrapolation limits, in-app training and its caps."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from page_support import run_page
from plotly_data import charts, customdata_field, decode, find, title, trace
from relviz.app import quotas
from relviz.inspection import random_text
from relviz.model import SCHEMES
from relviz.positions import alibi_bias, shaw_clip_index, t5_bucket_map
from relviz.training import load_checkpoint, shipped_name
from relviz.app.training_queue import CAPS, GATE


def grid_of(figures: list[dict]) -> dict:
    """The grid of every layer and head: untitled (the section heading names it), one heatmap per head."""
    hits = [f for f in figures if len(f["data"]) > 1
            and all(t["type"] == "heatmap" and "layer" in (t.get("meta") or {}) for t in f["data"])]
    assert len(hits) == 1, [title(f) for f in figures]
    assert not title(hits[0])                                  # the heading above it is not repeated
    return hits[0]


ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = random_text(32, 0)


def run(**params) -> AppTest:
    return run_page("attention", timeout=60, **params)


def weights_of(name: str, text: str) -> np.ndarray:
    run_ = load_checkpoint(name).run(text)
    return torch.stack(run_.attentions).numpy()


def strip_of(at: AppTest) -> dict:
    """The prediction strip (rows input, target, predicted)."""
    return next(f for f in charts(at) if list(trace(f).get("y") or []) == ["input", "target", "predicted"])


def error_text(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


def test_through_app_py_with_navigation():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/attention.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Live attention"
    assert any("Sign convention" in info.value for info in at.info)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_shipped_scheme_renders_the_model_s_own_weights(scheme):
    name = shipped_name(scheme)
    at = run(at_ck=name, at_layer=2, at_head=3)
    assert not at.error, error_text(at)
    figures = charts(at)
    expected = weights_of(name, DEFAULT_TEXT)
    # the close-up: exact weights of layer 2, head 3, and i, j, j − i in the hover
    close = find(figures, "layer 2, head 3: attention weights")
    z = decode(trace(close)["z"])
    assert z.dtype == np.float32 and np.array_equal(z, expected[1, 2])
    offsets = customdata_field(close, "j − i")
    assert np.array_equal(offsets, np.arange(32)[None, :] - np.arange(32)[:, None])
    for part in ("i = %{y}", "j = %{x}", "j − i = ", "weight = %{z"):
        assert part in trace(close)["hovertemplate"]
    # the grid: every layer and head, exact at this length
    grid = grid_of(figures)
    assert len(grid["data"]) == expected.shape[0] * expected.shape[1]   # layers × heads of this checkpoint
    for t in grid["data"]:
        layer, head = t["meta"]["layer"], t["meta"]["head"]
        assert np.array_equal(decode(t["z"]), expected[layer, head])
    # prediction strip, profile, and (except for none) the structure beside the close-up
    assert find(figures, "mean attention by offset")
    assert decode(trace(strip_of(at))["z"]).shape == (3, 32)
    # the first picture on the page is the close-up (the main picture, on the first screen)
    assert title(figures[0]) == "layer 2, head 3: attention weights"
    titles = [title(f) for f in figures]
    if scheme == "none":
        assert any("no position information" in i.value for i in at.info)
    else:
        assert len([t for t in titles if "attention" not in t and t]) >= 1
    assert at.button(key="at_train")  # the training section is there too


def test_scheme_index_in_the_hover_matches_the_positions_module():
    at = run(at_ck="t5-shift", at_head=2)
    close = find(charts(at), "layer 1, head 2: attention weights")
    assert np.array_equal(customdata_field(close, "bucket"),
                          t5_bucket_map(32, bidirectional=False, device="cpu").numpy())
    table = load_checkpoint("t5-shift").model.position.bias.detach().numpy()
    bias = customdata_field(close, "learned bias (this head)")
    assert np.allclose(bias, table[t5_bucket_map(32, bidirectional=False, device="cpu").numpy(), 1])
    structure = find(charts(at), "T5 bucket of j − i")
    z = decode(trace(structure)["z"])
    lower = np.tril(np.ones((32, 32), dtype=bool))
    assert np.array_equal(z[lower], t5_bucket_map(32, bidirectional=False, device="cpu").numpy()[lower])
    assert np.isnan(z[~lower]).all()  # future keys left blank

    at = run(at_ck="shaw-shift")
    close = find(charts(at), "attention weights")
    assert np.array_equal(customdata_field(close, "clip index"), shaw_clip_index(32, k=8, device="cpu").numpy())

    at = run(at_ck="alibi-shift", at_head=4)
    close = find(charts(at), "attention weights")
    assert np.allclose(customdata_field(close, "ALiBi bias"), alibi_bias(32, num_heads=4, device="cpu").numpy()[3])


def test_t5_learned_bias_curve_and_the_shift_teaching_moment():
    at = run(at_ck="t5-shift")
    curve = find(charts(at), "T5: learned bias per head vs offset")
    assert len(curve["data"]) == 4
    assert curve["layout"]["shapes"]  # bucket edges
    good = " ".join(s.value for s in at.success)
    assert "peak at j − i = −5 = −s" in good


def test_random_example_button_and_length_control():
    at = run()
    assert at.text_input(key="at_seq").value == DEFAULT_TEXT
    at.button(key="at_rand").click().run()
    assert not at.exception
    assert at.number_input(key="at_seed").value == 1
    assert at.text_input(key="at_seq").value == random_text(32, 1)
    at.slider(key="at_len").set_value(40).run()
    text = at.text_input(key="at_seq").value
    assert len(text) == 40 and text[:32] == random_text(32, 1)
    assert decode(trace(strip_of(at))["z"]).shape == (3, 40)
    # beyond the training length: the strip marks it, the summary splits the accuracy
    assert "beyond it" in " ".join(m.value for m in at.markdown)
    at.text_input(key="at_seq").set_value("0123456789").run()
    assert "has **10** tokens" in " ".join(c.value for c in at.caption)
    assert decode(trace(strip_of(at))["z"]).shape == (3, 10)
    at.slider(key="at_len").set_value(12).run()
    assert at.text_input(key="at_seq").value[:10] == "0123456789"
    assert len(at.text_input(key="at_seq").value) == 12


def test_a_link_with_length_and_seed_opens_that_random_example():
    at = run(at_len=40, at_seed=3)
    assert at.text_input(key="at_seq").value == random_text(40, 3)
    assert decode(trace(strip_of(at))["z"]).shape == (3, 40)


@pytest.mark.parametrize("text, message", [
    ("12ab34", "only the characters '0123456789' are allowed; found 'a' at position 2"),
    ("   ", "the sequence is empty"),
    ("1" * 300, "this page draws at most 256"),
], ids=["letters", "empty", "too-long"])
def test_bad_input_gives_an_error_and_the_rest_still_works(text, message):
    at = run(at_ck="t5-shift")
    at.text_input(key="at_seq").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    assert message in error_text(at)
    figures = charts(at)
    assert find(figures, "T5: learned bias per head vs offset")  # learned parameters still shown
    assert at.button(key="at_train") and not at.button(key="at_train").disabled
    # and a good sequence brings everything back
    at.text_input(key="at_seq").set_value("5" * 20).run()
    assert not at.error and grid_of(charts(at))


def test_learned_absolute_beyond_max_len_says_why():
    at = run(at_ck="learned-shift", at_len=100, at_seq=random_text(100, 2))
    assert "max_len=64" in error_text(at)
    assert find(charts(at), "learned absolute: cosine between position vectors")
    at = run(at_ck="rope-shift", at_len=100, at_seq=random_text(100, 2))
    assert not at.error
    grid = grid_of(charts(at))
    assert all(t["meta"]["block"] == 2 for t in grid["data"])              # mean-pooled 2×2
    close = find(charts(at), "attention weights")
    assert decode(trace(close)["z"]).shape == (100, 100)  # the close-up stays exact


def test_a_short_sequence_explains_the_task():
    at = run(at_seq="123", at_len=3)
    assert not at.error
    assert any("Too short for shift(s=5)" in i.value for i in at.info)


def test_in_app_training_adds_a_model_to_the_picker():
    at = run()
    before = at.selectbox(key="at_ck").options
    at.selectbox(key="at_tsch").set_value("shaw").run()
    at.slider(key="at_t_clip").set_value(3)
    at.slider(key="at_ts").set_value(2)
    at.slider(key="at_tl").set_value(1)
    at.slider(key="at_tsteps").set_value(CAPS.min_steps)
    at.slider(key="at_tlen").set_value(CAPS.min_length)
    at.run()
    assert not at.error, error_text(at)
    at.button(key="at_train").click().run()
    assert not at.exception, [e.value for e in at.exception]
    options = at.selectbox(key="at_ck").options
    assert len(options) == len(before) + 1
    new = [o for o in options if o not in before][0]
    assert new.startswith("yours-1: shaw, shift(s=2)")
    assert at.selectbox(key="at_ck").value == new
    assert any("Trained" in s.value for s in at.success)
    # the page now shows the new model: 1 layer, and its Shaw table (k = 3)
    grid = grid_of(charts(at))
    assert len(grid["data"]) == 4
    assert "clip(j − i, −3, 3)" in " ".join(title(f) for f in charts(at))


def test_training_caps_and_busy_server_give_clear_messages():
    at = run()
    at.slider(key="at_tsteps").set_value(CAPS.max_steps)
    at.slider(key="at_tlen").set_value(CAPS.max_length)
    at.slider(key="at_tl").set_value(CAPS.max_layers)
    at.run()
    assert "this run is too large for the app" in error_text(at)
    assert at.button(key="at_train").disabled

    at = run()
    at.slider(key="at_tsteps").set_value(CAPS.min_steps)
    at.slider(key="at_tlen").set_value(CAPS.min_length)
    at.run()
    with GATE.slot():  # someone else is training
        at.button(key="at_train").click().run()
    assert not at.exception
    assert "Another training is running" in error_text(at)
    assert len(at.selectbox(key="at_ck").options) == len(SCHEMES)

    at.session_state[quotas.SESSION_TRAININGS_KEY].started = CAPS.max_trainings_per_session
    at.run()
    assert "limit per session" in error_text(at) and at.button(key="at_train").disabled


def test_invalid_t5_setting_in_the_training_form():
    at = run(at_t_num_buckets=4, at_t_max_distance=1)
    assert "max_distance must be greater than max_exact" in error_text(at)
    assert at.button(key="at_train").disabled
    assert grid_of(charts(at))


def test_a_task_longer_than_the_training_length_is_refused_saying_which_controls_to_move():
    """The absolute task's p goes to 31 while the training length may be 24: no position would count. The sliders
    cannot bound each other (a moving bound resets a slider silently), so the page refuses and names both."""
    at = run(at_ttask="absolute", at_tp=31)
    assert "length must be at least 32 for absolute(p=31)" in error_text(at)
    assert "Set the training length to at least 32, or lower absolute position p." in error_text(at)
    assert at.button(key="at_train").disabled
    at.slider(key="at_tlen").set_value(32).run()
    assert not at.error and not at.button(key="at_train").disabled
