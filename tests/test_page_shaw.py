"""AppTest for the Shaw page: defaults, every control at both ends, the data inside the figures."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from page_support import run_page
from plotly_data import charts, customdata_field, decode, find, heatmap_values, block_stats, overview_stats, trace
from relviz.figures.toeplitz_window import OVERVIEW_MAX
from relviz.toeplitz_display import display_block
from relviz.positions import relative_positions, shaw_clip_index


def run(**params) -> AppTest:
    return run_page("shaw", **params)


def expected_index(q_len, k_len, k, q_offset, row0=0, col0=0, rows=None, cols=None) -> np.ndarray:
    rows = q_len if rows is None else rows
    cols = k_len if cols is None else cols
    i = q_offset + np.arange(row0, row0 + rows)[:, None]
    j = np.arange(col0, col0 + cols)[None, :]
    return np.clip(j - i, -k, k) + k


def check_figures(at: AppTest, q_len: int, k_len: int, k: int, q_offset: int) -> None:
    """The three matrices hold exactly what the library computes, for the window they show."""
    figures = charts(at)
    index_fig = find(figures, "index: clipped +")
    t = trace(index_fig)
    row0, col0 = t["meta"]["row0"], t["meta"]["col0"]
    rows, cols = heatmap_values(index_fig).shape
    expected = expected_index(q_len, k_len, k, q_offset, row0, col0, rows, cols)
    assert np.array_equal(heatmap_values(index_fig), expected)
    assert np.array_equal(heatmap_values(find(figures, "clip(j − i")), expected - k)
    relative = find(figures, "relative position")
    assert np.array_equal(heatmap_values(relative), expected_index(q_len, k_len, 10**6, q_offset, row0, col0,
                                                                    rows, cols) - 10**6)
    offsets = (np.arange(col0, col0 + cols)[None, :] - (q_offset + np.arange(row0, row0 + rows)[:, None]))
    assert np.array_equal(customdata_field(index_fig, "j − i"), offsets)
    for figure in figures:
        assert len(str(figure)) < 3_500_000  # decoded dict; the JSON bound is checked in test_large_lengths


def test_defaults_show_the_three_matrices_the_strip_and_the_ablation():
    at = run()
    check_figures(at, 10, 10, 3, 0)
    figures = charts(at)
    index_fig = find(figures, "index: clipped +")
    assert np.array_equal(heatmap_values(index_fig), shaw_clip_index(10, 10, k=3, device="cpu").numpy())
    assert list(heatmap_values(index_fig)[0]) == [3, 4, 5, 6, 6, 6, 6, 6, 6, 6]  # FACTS: row 0, k = 3
    assert np.array_equal(heatmap_values(find(figures, "relative position")),
                          relative_positions(10, 10, device="cpu").numpy())
    for part in ("i = %{y}", "j = %{x}", "j − i = ", "clipped offset = ", "index = "):
        for name in ("index: clipped +", "clip(j − i", "relative position"):
            assert part in trace(find(figures, name))["hovertemplate"]
    strip = trace(find(figures, "7 learned vectors"))
    assert list(decode(strip["z"])[0]) == list(range(7))
    assert sum(row[1] for row in strip["customdata"][0]) == 100  # every cell reads exactly one row
    ablation = trace(find(figures, "Table 2"))
    assert ablation["y"] == [12.5, 25.5, 25.8, 25.9, 25.8, 25.9, 25.8]
    assert any("Sign convention" in info.value for info in at.info)
    assert [m.value for m in at.metric][:3] == ["448", "896", "5,376"]  # (2·3 + 1)·64, ×2, ×6 layers
    assert len(at.get("download_button")) == 2


def test_strip_counts_cells_per_table_row():
    at = run(sh_q=10, sh_k=10, sh_clip=3)
    strip = trace(find(charts(at), "learned vectors"))
    used = [row[1] for row in strip["customdata"][0]]
    matrix = shaw_clip_index(10, 10, k=3, device="cpu").numpy()
    assert used == [int((matrix == r).sum()) for r in range(7)]


@pytest.mark.parametrize("kind, key, value", [
    ("slider", "sh_clip", 0), ("slider", "sh_clip", 64),
    ("number_input", "sh_q", 1), ("number_input", "sh_q", 8192),
    ("number_input", "sh_k", 1), ("number_input", "sh_k", 8192),
    ("slider", "sh_off", -10), ("slider", "sh_off", 10),
    ("select_slider", "sh_d", 8), ("select_slider", "sh_d", 1024),
    ("slider", "sh_layers", 1), ("slider", "sh_layers", 48),
])
def test_each_control_at_its_minimum_and_maximum(kind, key, value):
    at = run()
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    state = {"sh_q": 10, "sh_k": 10, "sh_clip": 3, "sh_off": 0, key: value}
    if key in ("sh_q", "sh_k"):
        state["sh_off"] = at.slider(key="sh_off").value
    check_figures(at, state["sh_q"], state["sh_k"], state["sh_clip"], state["sh_off"])
    if key == "sh_d":
        assert at.metric[0].value == f"{7 * value:,}"
    if key == "sh_layers":
        assert at.metric[2].value == f"{2 * 7 * 64 * value:,}"


def test_presets_align_queries_with_first_or_last_keys():
    at = run(sh_q=4, sh_k=10)
    at.button(key="sh_last").click().run()
    assert at.slider(key="sh_off").value == 6  # tensor2tensor: queries are the last 4 keys
    check_figures(at, 4, 10, 3, 6)
    index_fig = find(charts(at), "index: clipped +")
    assert list(decode(trace(index_fig)["y"])) == [6, 7, 8, 9]
    assert np.array_equal(heatmap_values(index_fig), shaw_clip_index(4, 10, k=3, q_offset=6, device="cpu").numpy())
    at.button(key="sh_first").click().run()
    assert at.slider(key="sh_off").value == 0
    check_figures(at, 4, 10, 3, 0)


def test_offset_is_pulled_back_inside_when_lengths_shrink():
    at = run(sh_q=20, sh_k=30, sh_off=25)
    assert at.slider(key="sh_off").value == 25
    at.number_input(key="sh_k").set_value(12).run()
    assert not at.exception
    assert at.slider(key="sh_off").value == 12  # the new maximum, k_len
    check_figures(at, 20, 12, 3, 12)


def test_a_shared_link_restores_the_view():
    at = run(sh_q=12, sh_k=7, sh_clip=5, sh_off=-2, sh_d=256, sh_layers=12)
    assert at.slider(key="sh_clip").value == 5 and at.number_input(key="sh_k").value == 7
    check_figures(at, 12, 7, 5, -2)
    assert at.metric[2].value == f"{2 * 11 * 256 * 12:,}"


def test_large_lengths_show_an_exact_overview_and_window_under_three_megabytes():
    at = run(sh_q=8192, sh_k=8192, sh_clip=64, sh_ws=512, sh_r0=4000, sh_c0=3800)
    check_figures(at, 8192, 8192, 64, 0)
    index_fig = find(charts(at), "index: clipped +")
    t = trace(index_fig)
    assert (t["meta"]["row0"], t["meta"]["col0"]) == (4000, 3800)
    # large windows are drawn in the browser from their per-offset slices: O(rows + cols) numbers
    assert t["type"] == "canvas" and heatmap_values(index_fig).shape == (512, 512)
    assert len(json.dumps(index_fig)) < 40_000
    overview = find(charts(at), "overview")
    assert overview["kind"] == "overview" and overview["block"] == 64   # 128 × 128 blocks
    assert overview["window"] == {"row0": 4000, "col0": 3800, "rows": 512, "cols": 512}
    for element in at.get("plotly_chart"):
        assert len(element.proto.spec) <= 3_000_000
    assert any("64 × 64" in m.value for m in at.markdown)  # says what a downsampled cell means
    assert any("per-offset vector" in m.value for m in at.markdown)
    assert len(at.get("download_button")) == 4
    at.button(key="sh_centre").click().run()
    t = trace(find(charts(at), "index: clipped +"))
    assert t["meta"]["col0"] == 4000  # j − i = 0 through the middle of the window


def test_pooled_overview_carries_the_exact_block_statistics_for_the_browser():
    """The browser draws them (tests/test_browser.py hovers blocks); the page sends the full matrix's exact
    block mean, min and max, compactly (per class of blocks)."""
    q_len, k_len, q_offset, k = 1500, 1400, 30, 5
    at = run(sh_q=q_len, sh_k=k_len, sh_off=q_offset, sh_clip=k)
    overview = find(charts(at), "overview")
    assert overview["block"] == display_block(q_len, k_len, OVERVIEW_MAX)
    full = shaw_clip_index(q_len, k_len, k=k, q_offset=q_offset, device="cpu").numpy()
    for got, expected in zip(overview_stats(overview), block_stats(full, overview["block"])):
        np.testing.assert_allclose(got, expected, rtol=1e-7)
    assert (overview["colour"]["zmin"], overview["colour"]["zmax"]) == (0, 2 * k)
    assert len(json.dumps(overview)) < 30_000
    check_figures(at, q_len, k_len, k, q_offset)


@pytest.mark.parametrize("key, end", [("sh_ws", "min"), ("sh_ws", "max"), ("sh_r0", "min"), ("sh_r0", "max"),
                                      ("sh_c0", "min"), ("sh_c0", "max")])
def test_window_sliders_at_both_ends(key, end):
    at = run(sh_q=8192, sh_k=3000, sh_off=-100, sh_ws=128, sh_r0=50, sh_c0=70)
    slider = at.slider(key=key)
    slider.set_value(slider.min if end == "min" else slider.max).run()
    assert not at.exception, [e.value for e in at.exception]
    check_figures(at, 8192, 3000, 3, -100)
    index_fig = find(charts(at), "index: clipped +")
    t = trace(index_fig)
    rows, cols = heatmap_values(index_fig).shape
    assert t["meta"]["row0"] + rows <= 8192 and t["meta"]["col0"] + cols <= 3000


def _all_text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [str(f.get("layout", {}).get("title", "")) for f in charts(at)]
    return " ".join(parts)


def test_k_zero_reads_naturally():
    """k = 0: no "−0", no "1 vectors", no "≤ −0 and ≥ 0"."""
    at = run(sh_clip="0")
    check_figures(at, 10, 10, 0, 0)
    text = _all_text(at)
    for bad in ("−0", "1 vectors", "≥ 0)", "±0"):
        assert bad not in text, bad
    assert "1 learned vector" in text and "no position information" in text


def test_k_at_least_the_longest_offset_says_nothing_is_clipped():
    at = run(sh_clip="64")
    check_figures(at, 10, 10, 64, 0)
    text = " ".join(c.value for c in at.caption)
    assert "nothing is clipped" in text and "19 of its 129" in text
    short = " ".join(c.value for c in run(sh_clip="5").caption)
    assert "nothing is clipped" not in short
    # keys all in the past (query offset 10): offsets −19 … −1 use 19 rows, not 2 · 19 + 1
    past = " ".join(c.value for c in run(sh_clip="64", sh_off="10").caption)
    assert "k = 64 ≥ 19" in past and "19 of its 129 rows, those of offsets −19 … −1" in past


def test_a_million_positions_per_side_shows_exact_windows_of_the_relative_index():
    """2^20 × 2^20: the relative index, clipped offset and lookup index windows are exact (never the whole
    matrix), and the overview's block statistics are exact on the diagonal block, where the band |j − i| ≤ k
    is only a blend."""
    from relviz.toeplitz_display import toeplitz_window
    n, k = 2**20, 64
    at = run_page("shaw", timeout=120, sh_q=n, sh_k=n, sh_ws=512, sh_r0=123_456, sh_c0=123_000, sh_clip=k)
    assert not at.error, [e.value for e in at.error]
    check_figures(at, n, n, k, 0)
    overview = find(charts(at), "overview")
    block = overview["block"]
    index = np.clip(np.arange(-(n - 1), n), -k, k) + k
    mean, low, high = overview_stats(overview)
    cells = toeplitz_window(index, n, n, row0=3 * block, col0=3 * block, rows=block, cols=block)
    assert mean[3, 3] == pytest.approx(cells.mean(dtype=np.float64), rel=1e-7)
    assert (low[3, 3], high[3, 3]) == (0, 2 * k)
