"""AppTest of the Check page with the RoPE kinds: uploads only (the page never runs a visitor's code)."""
from __future__ import annotations

import json

import numpy as np
from plotly_data import decode

from page_support import run_page

COS = "rope_cos"  # the command line's kind name


def csv(matrix: np.ndarray) -> str:
    return "\n".join(",".join(f"{v:.9g}" for v in row) for row in np.atleast_2d(matrix))


def cos_cache(rows: int, head_dim: int, base: float, *, interleaved: bool = False) -> np.ndarray:
    theta = base ** (-np.arange(0, head_dim, 2) / head_dim)
    cos = np.cos(np.arange(rows)[:, None] * theta[None, :])
    return np.repeat(cos, 2, axis=1) if interleaved else np.concatenate([cos, cos], axis=1)


def test_a_correct_cache_matches_with_the_sidebar_settings():
    at = run_page("check", ck_kind=COS, ck_base="500,000")
    assert at.selectbox(key="ck_layout").value == "half" and at.number_input(key="ck_hd").value == 0
    at.text_area(key="ck_paste").set_value(csv(cos_cache(24, 16, 500000.0))).run()
    assert not at.exception
    assert at.success and "Matches: all 384 compared cells" in at.success[0].value


def test_a_swapped_layout_is_named_and_drawn_by_pair():
    at = run_page("check", ck_kind=COS)
    at.text_area(key="ck_paste").set_value(csv(cos_cache(24, 16, 10000.0, interleaved=True))).run()
    assert not at.exception
    assert any("Likely cause: pair layout swapped" in w.value for w in at.warning)
    (chart,) = at.get("plotly_chart")
    trace = json.loads(chart.proto.spec)["data"][0]
    assert "pair = %{customdata[0]}" in trace["hovertemplate"]
    pairs = decode(trace["customdata"])[..., 0]
    np.testing.assert_array_equal(pairs[0], np.tile(np.arange(8), 2))   # half-split: column c is pair c mod 8
    assert list(at.dataframe[0].value.columns) == ["row", "column", "pair", "expected", "got"]


def test_the_rope_example_loads_and_the_search_names_its_cause():
    at = run_page("check")
    at.selectbox(key="ck_example").set_value("RoPE sin cache, angles in bfloat16").run()
    at.button(key="ck_load").click().run()
    assert not at.exception
    assert any("Likely cause: angles computed in bfloat16" in w.value for w in at.warning)
    settings = at.dataframe[1].value
    assert "500000.0" in settings["value"].tolist()


def test_a_wrong_width_gets_a_message():
    at = run_page("check", ck_kind=COS, ck_hd="32")
    at.text_area(key="ck_paste").set_value(csv(cos_cache(8, 16, 10000.0))).run()
    assert not at.exception
    assert any("has 32 columns; got 16" in e.value for e in at.error)
