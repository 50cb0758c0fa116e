"""The RoPE page in AppTest: presets, every scaling rule, the Toeplitz score matrix, bad settings."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from page_support import run_page
from plotly_data import decode, figure_json
from relviz.rope import RopeConfig, RopeScaling, rope_parameters, rope_presets, score_matrix


def charts(at) -> list[dict]:
    return [figure_json(c) for c in at.get("plotly_chart")]


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_default_page_shows_rotation_scores_and_decay():
    at = run_page("rope")
    assert not at.error
    assert len(charts(at)) == 4                 # no scaling rule: no ratio chart; the pair picture
    assert metric(at, "pairs that complete a turn").endswith("of 64")
    assert metric(at, "attention scaling") == "1.0000"
    assert not [w for w in at.select_slider if w.key == "rp_orig"]   # no rule: no training length to set


def test_llama31_preset_shows_its_source_and_exact_frequency_ratio():
    at = run_page("rope", rp_preset="Llama-3.1 8B", rp_len=131072)
    assert not at.error
    assert any("meta-llama/Llama-3.1-8B" in c.value for c in at.caption)
    figures = charts(at)
    assert len(figures) == 5
    ratio = decode(figures[1]["data"][0]["y"])
    config = rope_presets()["llama-3.1-8b"][1]
    scaled = rope_parameters(config, 131072, device="cpu")[0].double()
    plain = rope_parameters(RopeConfig(head_dim=128, base=500000.0), device="cpu")[0].double()
    assert np.allclose(ratio, (scaled / plain).numpy())
    assert ratio[0] == 1.0 and ratio[-1] == pytest.approx(1 / 8)
    # Wavelength 2π/θ of every pair, against the context: pairs with a turn inside it are counted.
    wave = 2 * math.pi / scaled.numpy()
    assert metric(at, "pairs that complete a turn") == f"{int((wave <= 131071).sum())} of 64"


def test_yarn_shows_its_attention_factor():
    at = run_page("rope", rp_rule="yarn", rp_factor=8.0, rp_orig=4096)
    assert not at.error
    assert metric(at, "attention scaling") == f"{0.1 * math.log(8.0) + 1:.4f}"


def _linear_scores(window: int) -> torch.Tensor:
    """Per-offset scores of the pages' linear-scaling setting below (seed 5, 32 dims), by rotating q and k."""
    config = RopeConfig(head_dim=32, max_position_embeddings=4096, scaling=RopeScaling("linear", factor=2.0))
    inv_freq = rope_parameters(config, 8192, device="cpu")[0]
    generator = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 32, dtype=torch.float64, generator=generator)
    return score_matrix(q / q.norm(), k / k.norm(), inv_freq, window)[1]


def test_score_matrix_is_the_toeplitz_expansion_of_the_per_offset_scores():
    window = 24
    at = run_page("rope", rp_rule="linear", rp_factor=2.0, rp_L=window, rp_same=False, rp_seed=5, rp_dim=32)
    heat = next(f for f in charts(at) if f["data"][0]["type"] == "heatmap")
    z = decode(heat["data"][0]["z"]).astype(np.float64)
    assert z.shape == (window, window)
    for offset in range(-(window - 1), window):
        diagonal = np.diagonal(z, offset)
        assert np.ptp(diagonal) == 0, offset  # constant along every diagonal j − i
    expected = _linear_scores(window)
    assert np.allclose(z[0, :], expected.numpy()[window - 1:], atol=1e-6)   # row i = 0: offsets 0 … L − 1
    assert any("Checked" in s.value for s in at.success)


def test_gemma2_preset_with_head_dim_256_draws_at_the_longest_length():
    """One page run; tests/test_rope.py computes every preset at this length without the page."""
    at = run_page("rope", rp_preset="Gemma 2 9B", rp_len=1048576)
    assert not at.error and len(charts(at)) == 4
    assert metric(at, "pairs that complete a turn").endswith("of 128")


def test_phi3_mini_preset_uses_its_own_long_factors_past_the_original_length():
    at = run_page("rope", rp_preset="Phi-3-mini 128k (LongRoPE)", rp_len=1048576)
    assert not at.error
    assert any("microsoft/Phi-3-mini-128k-instruct" in c.value for c in at.caption)
    ratio = decode(charts(at)[1]["data"][0]["y"])
    long_factor = rope_presets()["phi-3-mini-128k"][1].scaling.long_factor
    assert np.allclose(ratio, 1 / np.array(long_factor, dtype=np.float32), rtol=1e-6)


def test_dynamic_ntk_depends_on_the_length():
    short = run_page("rope", rp_rule="dynamic", rp_factor=4.0, rp_orig=4096, rp_len=4096)
    long = run_page("rope", rp_rule="dynamic", rp_factor=4.0, rp_orig=4096, rp_len=65536)
    assert metric(short, "longest wavelength") != metric(long, "longest wavelength")


def test_invalid_llama3_factors_show_an_error_not_a_traceback():
    at = run_page("rope", rp_rule="llama3", rp_low=2.0, rp_high=1.0)
    assert [e.value for e in at.error] == ["high_freq_factor must be ≥ low_freq_factor (2); got 1"]


def test_junk_in_the_link_falls_back_to_defaults():
    at = run_page("rope", rp_preset="../../etc/passwd", rp_len="1e999", rp_base="abc")
    assert not at.error and len(charts(at)) == 4


def test_largest_score_matrix_is_drawn_in_the_browser_from_its_per_offset_scores():
    """At 256 positions the score matrix travels as its 2W − 1 per-offset scores (a canvas picture),
    which are the rotated scores, every cell exact."""
    from plotly_data import canvases, heatmap_values

    window = 256
    at = run_page("rope", rp_rule="linear", rp_factor=2.0, rp_L=window, rp_same=False, rp_seed=5, rp_dim=32)
    (picture,) = [c for c in canvases(at) if c["value_label"] == "score"]
    assert (picture["rows"], picture["cols"]) == (window, window)
    assert len(picture["fields"][0]["values"]) == 2 * window - 1
    z = heatmap_values(picture).astype(np.float64)   # checks the colours follow the values too
    expected = _linear_scores(window)
    assert np.allclose(z[0, :], expected.numpy()[window - 1:], atol=1e-6)   # row i = 0: offsets 0 … L − 1
    assert np.allclose(z[:, 0], expected.numpy()[window - 1::-1], atol=1e-6)  # column j = 0: offsets 0 … −(L − 1)
    assert picture["lines"] == ["i = {i}", "j = {j}", "j − i = {d}", "score = {0}"]


def test_one_pair_turns_with_position_and_its_score_depends_on_the_offset_alone():
    """Section 2 opens on one frequency pair: arrows q at m and k at n, their angle and dot product; the
    same offset at other positions gives the same score; the pair's θ is this model's."""
    from relviz.rope.pair import rotate_pair

    at = run_page("rope", rp_pair=10, rp_m=3, rp_n=40)
    assert not at.error
    theta = 10000.0 ** (-2 * 10 / 128)                              # default head: d = 128, base 10000
    pair = rotate_pair((1.0, 0.25), (0.6, 0.8), theta, query_position=3, key_position=40)
    assert metric(at, "q_m · k_n") == f"{pair.dot:.4f}"
    figure = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("pair 10"))
    heads = [(a["x"], a["y"]) for a in figure["layout"]["annotations"] if a.get("showarrow")]
    assert heads[2] == pytest.approx(pair.query) and heads[3] == pytest.approx(pair.key)
    shifted = run_page("rope", rp_pair=10, rp_m=103, rp_n=140)
    assert metric(shifted, "q_m · k_n") == metric(at, "q_m · k_n")
    assert metric(shifted, "angle from q to k") == metric(at, "angle from q to k")


@pytest.mark.parametrize("rule", ["default", "linear", "yarn", "llama3"])
def test_a_hand_set_rules_controls_are_its_table_entrys_fields(rule):
    """The custom head shows the controls HAND_SET_RULES' entry names (a factor and an original context for a
    rule, then its own fields), and the config it draws carries the values set in them."""
    from relviz.rope import HAND_SET_RULES

    entry = HAND_SET_RULES[rule]
    at = run_page("rope", rp_rule=rule)
    shown = {s.label.split(" (")[0] for s in at.select_slider} - {"head dim d", "base", "context length L"}
    expected = set() if entry is None else {"original context", "factor", *entry.fields}
    assert shown == expected
    if entry is not None:   # each field's control reaches the config drawn: the ratio chart is its θ over plain θ
        from relviz.rope import hand_set_config

        values = {}
        for name in entry.fields:
            slider = next(s for s in at.select_slider if s.label.split(" (")[0] == name)
            values[name] = float(next(v for v in slider.options if float(v) != float(slider.value)))
            slider.set_value(slider.options[[float(v) for v in slider.options].index(values[name])])
        at.run()
        assert not at.exception and not at.error
        config = hand_set_config(128, 10000.0, rule, factor=4.0, original=4096, **values)
        scaled = rope_parameters(config, 8192, device="cpu")[0].double()
        plain = rope_parameters(RopeConfig(head_dim=128, base=10000.0), device="cpu")[0].double()
        assert np.allclose(decode(charts(at)[1]["data"][0]["y"]), (scaled / plain).numpy())


def test_the_rope_page_asks_the_table_not_the_rules_name():
    """No comparison of a rule's name with a string on the page: which controls and notes show is data."""
    import ast
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "pages" / "rope.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = [getattr(s, "id", getattr(s, "attr", None)) for s in sides]
            literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides)
            assert not (literal and {"rule", "rope_type"} & set(names)), f"line {node.lineno}"
