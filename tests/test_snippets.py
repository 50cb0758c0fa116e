"""Code for this view: every page shows a snippet; executed, it reproduces what the page draws."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
import torch

from page_support import run_page
from plotly_data import canvas_data, canvas_values, charts, decode, find, heatmap_values, is_canvas
from relviz import snippets


def _open_code(at, *keys: str):
    """Open the page's lazy "Code for this view" expanders (``keys``), as a visitor would, and rerun.

    Closed, they send no code: the test first checks that, so the page's first paint stays free of
    Streamlit's syntax highlighter."""
    assert not [c for c in at.code if "result =" in c.value], "a closed 'Code for this view' sends no code"
    for key in keys:
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _code(at) -> str:
    blocks = [c.value for c in at.code if "result =" in c.value]
    assert len(blocks) == 1, "one 'Code for this view' block per view"
    return blocks[0]


def _picture(at, key: str) -> dict:
    """The picture drawn under ``key``: a plotly chart's JSON, or a canvas component's data (relviz draws the large
    or often redrawn maps on a canvas: Absolute's maps, the Skew steps)."""
    drawn = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    drawn += [canvas_data(c.proto.json) for c in at.get("bidi_component") if c.proto.id.endswith(key)]
    assert len(drawn) == 1, (key, len(drawn))
    return drawn[0]


def _step(at, key: str, name: str) -> dict:
    """The Skew step picture named ``name`` (its payload's name ends with it and the length) among the steps the
    element ``key`` draws (relviz.figures.skew_canvas.steps_json: a tab's steps are one element)."""
    pictures = [panel["picture"] for panel in _picture(at, key)["panels"] if panel["kind"] == "step"
                and re.search(rf"_{name}_L\d+_", panel["picture"]["name"])]
    assert len(pictures) == 1, (key, name, len(pictures))
    return pictures[0]


def _shown_values(picture: dict) -> np.ndarray:
    """The values a map shows: a plotly heatmap's z, a canvas map's values (checked against its colours), or a Skew
    step canvas's cells (relviz.figures.skew_canvas.step_payload: float32, row-major)."""
    if "z" in picture and "rows" in picture:
        cells = np.frombuffer(base64.b64decode(picture["z"]), dtype="<f4")
        return cells.reshape(picture["rows"], picture["cols"]).astype(np.float64)
    if is_canvas(picture):
        return canvas_values(picture).astype(np.float64)
    return decode(picture["data"][0]["z"]).astype(np.float64)


def _run_code(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<snippet>", "exec"), namespace)  # noqa: S102 - the test runs the shown code
    return namespace


def test_shaw_page_snippet_reproduces_the_lookup_index():
    at = _open_code(run_page("shaw", sh_q="7", sh_k="12", sh_off="3", sh_clip="2"), "sh_code")
    result = _run_code(_code(at))["result"].numpy()
    np.testing.assert_array_equal(result, heatmap_values(find(charts(at), "index: clipped +")))


def test_t5_page_snippet_reproduces_the_map_and_its_score_mod_is_t5_attention():
    at = _open_code(run_page("t5", t5_nb="20", t5_md="40", t5_bi="false", t5_q="6", t5_k="9", t5_off="2"),
                    "t5_code")
    ns = _run_code(_code(at))
    np.testing.assert_array_equal(ns["result"].numpy(), heatmap_values(find(charts(at), "T5 bucket")))
    # the score_mod adds table[bucket(j - i), h] to the raw q·k
    q, k, v = (torch.randn(1, 8, n, 4, generator=torch.Generator().manual_seed(n)) for n in (6, 9, 9))
    out = ns["flex_attention"](q, k, v, score_mod=ns["score_mod"], scale=1.0)
    bias = ns["table"][ns["result"]].permute(2, 0, 1)  # [heads, 6, 9]
    expected = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1) @ v
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tab", [None, "Bidirectional skew (encoder)"])
def test_skew_page_snippet_reproduces_the_result(tab):
    params = dict(skew_L="7", skew_seed="5")
    if tab:
        params["skew_tab"] = tab
    at = _open_code(run_page("skew", **params), "skew_code_bidir" if tab else "skew_code_causal")
    blocks = [c.value for c in at.code if "result =" in c.value]
    ns = _run_code(blocks[0])
    # the bidirectional result / the causal sliced step (S_rel before the mask)
    values = _shown_values(_step(at, "skew_fig_bi_result", "result") if tab else _step(at, "skew_fig_skewed", "skewed"))
    np.testing.assert_allclose(ns["result"].numpy(), values, rtol=0, atol=1e-6)


@pytest.mark.parametrize("projected", [False, True])
def test_absolute_page_snippets_reproduce_the_similarity_and_the_alibi_bias(projected):
    params = dict(abs_L="24", abs_d="16", abs_heads="6", abs_head="5")
    if projected:
        params["abs_proj"] = "true"
    at = _open_code(run_page("absolute", **params), "abs_code_pe", "abs_code_alibi")
    blocks = [c.value for c in at.code if "result =" in c.value]
    assert len(blocks) == 2
    # the similarity map and the ALiBi bias, as the page draws them
    sim = _run_code(blocks[0])["result"].numpy()
    np.testing.assert_array_equal(sim, _shown_values(_picture(at, "abs_fig_sim")))
    ns = _run_code(blocks[1])
    np.testing.assert_array_equal(ns["result"].numpy(), _shown_values(_picture(at, "abs_fig_alibi")))
    q, k, v = (torch.randn(1, 6, 24, 4, generator=torch.Generator().manual_seed(s)) for s in range(3))
    out = ns["flex_attention"](q, k, v, score_mod=ns["score_mod"])
    slopes = ns["slopes"]
    i, j = torch.arange(24)[:, None], torch.arange(24)[None, :]
    bias = (-slopes[:, None, None] * (j - i).abs()).masked_fill(j > i, float("-inf"))
    expected = torch.softmax(q @ k.transpose(-1, -2) / 2 + bias, dim=-1) @ v
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_home_page_snippet_reproduces_the_relative_matrix():
    from streamlit.testing.v1 import AppTest
    from page_support import REPO

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()  # home links into app.py's pages
    assert not at.exception
    _open_code(at, "home_code")
    result = _run_code(_code(at))["result"].numpy()
    np.testing.assert_array_equal(result, heatmap_values(charts(at)[0]))


def test_snippets_refuse_bad_settings():
    with pytest.raises(ValueError, match="head"):
        snippets.alibi_snippet(8, 4, 5)
    with pytest.raises(ValueError, match="k"):
        snippets.shaw_snippet(4, 4, -1)
