"""AppTest for the T5 page: defaults, every control at both ends, invalid settings, figure data."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from page_support import run_page
from plotly_data import charts, customdata_field, decode, find, heatmap_values, block_stats, overview_stats, trace
from relviz.figures.toeplitz_window import OVERVIEW_MAX
from relviz.toeplitz_display import display_block
from relviz.positions import shaw_clip_index, t5_bucket, t5_bucket_map, t5_bucket_ranges
from relviz.rope import load_presets


def run(**params) -> AppTest:
    return run_page("t5", **params)


def check_map(at: AppTest, q_len, k_len, nb, md, bidir, q_offset, title="T5 bucket") -> None:
    """The heatmap equals the library's buckets for the cells it shows; hover j − i and ranges agree."""
    figure = find(charts(at), title)
    t = trace(figure)
    row0, col0 = t["meta"]["row0"], t["meta"]["col0"]
    rows, cols = heatmap_values(figure).shape
    i = q_offset + np.arange(row0, row0 + rows)[:, None]
    j = np.arange(col0, col0 + cols)[None, :]
    expected = t5_bucket(torch.from_numpy(j - i), num_buckets=nb, max_distance=md, bidirectional=bidir).numpy()
    assert np.array_equal(heatmap_values(figure), expected)
    assert np.array_equal(customdata_field(figure, "j − i"), j - i)
    if "bucket first j − i" in t["meta"]["customdata"]:
        first = customdata_field(figure, "bucket first j − i")
        last = customdata_field(figure, "bucket last j − i")
        assert np.all(first <= j - i) and np.all(j - i <= last)
        extent = max(md, q_len - 1 + abs(q_offset) + k_len)
        ranges = {r.bucket: r for r in t5_bucket_ranges(num_buckets=nb, max_distance=md, bidirectional=bidir,
                                                         max_offset=max(md, extent))}
        for b in np.unique(expected)[:40]:
            r = ranges[int(b)]
            sel = expected == b
            if not (r.open_low or r.open_high):
                assert set(first[sel]) == {r.first} and set(last[sel]) == {r.last}


def test_defaults_match_t5_and_show_the_pitfalls():
    at = run()
    assert not at.error
    check_map(at, 32, 32, 32, 128, True, 0)
    figure = find(charts(at), "T5 bucket")
    assert np.array_equal(heatmap_values(figure), t5_bucket_map(32, 32, device="cpu").numpy())
    for part in ("i = %{y}", "j = %{x}", "j − i = ", "bucket = %{z", "bucket holds j − i = "):
        assert part in trace(figure)["hovertemplate"]
    curve = find(charts(at), "bucket vs distance")
    past = decode(trace(curve, 0)["y"])
    assert int(past[91]) == 15 and int(past[90]) == 14  # distance n = x, x starts at 0
    table = at.dataframe[0].value
    assert len(table) == 32
    assert table.loc[table["bucket"] == 16, "kind"].item() == "unused"
    assert table.loc[table["bucket"] == 15, "j − i"].item() == "≤ −91"
    assert table.loc[table["bucket"] == 31, "offsets"].item() == "∞"
    assert table["cells here"].sum() == 32 * 32
    warnings = " ".join(w.value for w in at.warning)
    assert "never used" in warnings and "91" in warnings
    text = " ".join(m.value for m in at.markdown)
    for phrase in ("16 per direction", "8 exact + 8 logarithmic", "max_exact = 8", "cross-attention",
                   "One layer is blind inside a bucket"):
        assert phrase in text
    assert any("Sign convention" in info.value for info in at.info)
    assert len(at.get("download_button")) == 2


@pytest.mark.parametrize("kind, key, value", [
    ("slider", "t5_nb", 128), ("slider", "t5_md", 1024), ("toggle", "t5_bi", False),
    ("number_input", "t5_q", 1), ("number_input", "t5_q", 8192),
    ("number_input", "t5_k", 1), ("number_input", "t5_k", 8192),
    ("slider", "t5_off", -32), ("slider", "t5_off", 32), ("toggle", "t5_logx", True),
])
def test_each_control_at_its_extremes(kind, key, value):
    at = run()
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    s = {"t5_q": 32, "t5_k": 32, "t5_nb": 32, "t5_md": 128, "t5_bi": True, "t5_off": 0, key: value}
    if key in ("t5_q", "t5_k"):
        s["t5_off"] = at.slider(key="t5_off").value
    check_map(at, s["t5_q"], s["t5_k"], s["t5_nb"], s["t5_md"], s["t5_bi"], s["t5_off"])
    if key == "t5_bi":
        assert "Every future offset" in " ".join(w.value for w in at.warning)
    if key == "t5_logx":
        assert find(charts(at), "bucket vs distance")["layout"]["xaxis"]["type"] == "log"


INVALID = [  # (num_buckets, max_distance, bidirectional): every way the formula fails, at the slider ends (the
    # num_buckets slider starts at the smallest value each direction takes: max_exact = 0 cannot be set)
    (128, 1, True), (128, 32, True), (4, 1, True), (33, 8, True),      # max_distance <= max_exact
    (2, 1, False), (128, 64, False), (5, 2, False),
]


@pytest.mark.parametrize("bidir, fewest", [(True, 4), (False, 2)])
def test_the_num_buckets_slider_starts_at_the_smallest_value_its_direction_takes(bidir, fewest):
    """Issue 33, defect 3: the slider went down to 2 bidirectional, which the formula refuses (max_exact = 0)."""
    at = run(t5_bi=str(bidir).lower(), t5_nb=fewest)
    assert at.slider(key="t5_nb").min == fewest and at.slider(key="t5_nb").value == fewest
    assert not at.error and not at.exception
    if bidir:                                      # a link below the range opens inside it, with a notice
        at = run(t5_bi="true", t5_nb=2)
        assert at.slider(key="t5_nb").value >= 4 and not at.exception
        assert any("t5_nb=2" in w.value for w in at.warning)


@pytest.mark.parametrize("nb, md, bidir", INVALID)
def test_invalid_settings_show_the_library_message_and_nearest_valid_never_a_traceback(nb, md, bidir):
    at = run(t5_nb=nb, t5_md=md, t5_bi=str(bidir).lower())
    assert at.slider(key="t5_nb").value == nb and at.slider(key="t5_md").value == md
    assert at.toggle(key="t5_bi").value == bidir
    errors = [e.value for e in at.error]
    assert errors and ("num_buckets must be at least" in errors[0] or "max_distance must be greater" in errors[0])
    assert any("Nearest valid setting" in w.value for w in at.warning)
    assert any("Sign convention" in info.value for info in at.info)  # the rest of the page still renders
    assert not [f for f in charts(at) if "T5 bucket" in str(f.get("layout", {}).get("title"))]
    at.button(key="t5_fix").click().run()
    assert not at.exception and not at.error
    check_map(at, 32, 32, at.slider(key="t5_nb").value, at.slider(key="t5_md").value, bidir, 0)


def test_invalid_setting_keeps_the_compare_view_with_shaw():
    at = run(t5_nb=128, t5_md=32, t5_tab="Compare with Shaw")
    assert [e.value for e in at.error][-1].startswith("No T5 map for this setting")
    shaw = find(charts(at), "index: clipped +")
    assert np.array_equal(heatmap_values(shaw), shaw_clip_index(32, 32, k=8, device="cpu").numpy())


def test_compare_view_puts_shaw_beside_t5_for_the_same_lengths():
    at = run(t5_tab="Compare with Shaw", t5_q=20, t5_k=24, t5_off=2)
    at.slider(key="t5_ck").set_value(5).run()
    assert not at.exception
    shaw = find(charts(at), "index: clipped +")
    assert np.array_equal(heatmap_values(shaw), shaw_clip_index(20, 24, k=5, q_offset=2, device="cpu").numpy())
    check_map(at, 20, 24, 32, 128, True, 2)
    assert "blind" in " ".join(m.value for m in at.markdown)


def test_map_equals_t5_bucket_map_for_chosen_settings():
    at = run(t5_nb=20, t5_md=50, t5_bi="false", t5_q=40, t5_k=30, t5_off=-5)
    figure = find(charts(at), "T5 bucket")
    expected = t5_bucket_map(40, 30, num_buckets=20, max_distance=50, bidirectional=False, q_offset=-5,
                             device="cpu").numpy()
    assert np.array_equal(heatmap_values(figure), expected)
    check_map(at, 40, 30, 20, 50, False, -5)


def test_large_lengths_overview_is_exact_and_figures_stay_small():
    q_len, k_len, q_offset = 1300, 1500, -40
    at = run(t5_q=q_len, t5_k=k_len, t5_off=q_offset, t5_nb=24, t5_md=300)
    # The overview is drawn in the browser from the block statistics per class of blocks
    # (tests/test_browser.py hovers them): exactly the full matrix's block means, minima and maxima.
    overview = find(charts(at), "overview")
    block = display_block(q_len, k_len, OVERVIEW_MAX)
    assert overview["kind"] == "overview" and overview["block"] == block
    full = t5_bucket_map(q_len, k_len, num_buckets=24, max_distance=300, q_offset=q_offset, device="cpu").numpy()
    for got, expected in zip(overview_stats(overview), block_stats(full, block)):
        np.testing.assert_allclose(got, expected, rtol=1e-7)
    assert overview["window"] == {"row0": 0, "col0": 0, "rows": 256, "cols": 256}
    assert len(json.dumps(overview)) < 30_000   # 12 · (rows + cols − 1) numbers at most, whatever the length
    check_map(at, q_len, k_len, 24, 300, True, q_offset)

    at = run(t5_q=8192, t5_k=8192, t5_nb=128, t5_md=1024, t5_ws=512, t5_r0=7000, t5_c0=6900)
    check_map(at, 8192, 8192, 128, 1024, True, 0)
    for element in at.get("plotly_chart"):
        assert len(element.proto.spec) <= 3_000_000
    assert len(at.get("download_button")) == 4
    assert any("per-offset vector" in m.value for m in at.markdown)


def test_curve_region_labels_sit_above_the_plot_not_on_the_lines():
    curve = find(charts(run()), "bucket vs distance")
    regions = [a for a in curve["layout"]["annotations"] if a["text"].startswith(("exact", "logarithmic", "last bucket")) and "from n" not in a["text"]]
    assert len(regions) == 3
    for a in regions:
        assert a["yref"] == "paper" and a["y"] >= 1 and a["yanchor"] == "bottom"


def test_curve_caption_colours_match_the_figure():
    """The caption's colour words name the lines (legend), and the bands use hues no line uses."""
    at = run()
    curve = find(charts(at), "bucket vs distance")
    lines = {trace(curve, k)["line"]["color"] for k in range(2)}
    bands = {s["fillcolor"] for s in curve["layout"]["shapes"] if s["type"] == "rect"}
    assert len(bands) == 3

    def rgb(colour):
        colour = colour.strip()
        if colour.startswith("#"):
            return tuple(int(colour[k:k + 2], 16) for k in (1, 3, 5))
        return tuple(int(float(v)) for v in colour[colour.index("(") + 1:].split(",")[:3])

    for band in bands:
        for line in lines:
            assert sum(abs(a - b) for a, b in zip(rgb(band), rgb(line))) > 120, (band, line)
    caption = next(c.value for c in at.caption if "Bucket vs distance" in c.value)
    assert "Blue: exact" not in caption and "Orange: logarithmic" not in caption
    assert "blue line" in caption.lower() and "red" in caption.lower()


def test_unidirectional_hover_stops_bucket_0_at_this_matrix_edge():
    at = run(t5_bi="false")
    figure = find(charts(at), "T5 bucket")
    last = customdata_field(figure, "bucket last j − i")
    first = customdata_field(figure, "bucket first j − i")
    assert first[0, 31] == 0 and last[0, 31] == 31  # bucket 0 holds 0 and every future offset: here 0 … 31
    assert last.max() == 31  # a 32 × 32 matrix: offsets −31 … 31


def test_precision_tab_lists_mesh_tf_edges_and_low_precision_moves():
    at = run(t5_nb="34", t5_md="27", t5_tab="Precision & references")
    tables = [d.value for d in at.dataframe]
    edges = next(t for t in tables if "Mesh TensorFlow" in t.columns)
    row = edges[edges["j − i"] == -18].iloc[0]
    assert (row["Hugging Face (relviz)"], row["Mesh TensorFlow"], row["exact arithmetic"]) == (13, 14, 14)
    figure = find(charts(at), "float32, bfloat16 and float16")
    assert -18 in list(decode(trace(figure, 3)["x"]))
    at = run(t5_tab="Precision & references")
    changes = next(d.value for d in at.dataframe if "precision" in d.value.columns)
    bf16 = set(changes.loc[changes["precision"] == "bfloat16", "j − i"].abs())
    assert {16, 32, 90} <= bf16
    assert any("None for this setting" in m.value for m in at.markdown)


def test_confusion_pictures_sit_with_the_map():
    at = run()
    figures = charts(at)
    budget = find(figures, "where the 32 buckets go")
    labels = [t["text"][0] for t in budget["data"]]
    notes = [a["text"] for a in budget["layout"].get("annotations", [])]
    assert "past exact<br>0…7" in labels and "future logarithmic<br>24…31" in labels and "16: unused" in notes
    sharing = find(figures, "bias table each layer adds")
    text = sharing["data"][0]["text"]
    assert set(text[0]) == {"1"} and text[1] == [str(n) for n in range(1, len(text[1]) + 1)]
    composition = find(figures, "told apart exactly")
    z = decode(trace(composition)["z"])
    assert z[0, 7] == 1 and z[0, 8] == 0 and z[1, 14] == 1  # one layer: 0…7 exact; two: up to 14
    captions = " ".join(c.value for c in at.caption)
    assert "8 exact + 8" in captions and "UMT5" in captions


def test_compare_tab_shows_the_seed_notebook_table():
    at = run(t5_tab="Compare with Shaw", t5_ck="8")
    seed = find(charts(at), "max_position² = 64 rows")
    assert seed["data"][0]["x"] == [17] and seed["data"][1]["x"] == [47]


def test_sidebar_lists_the_published_bucket_settings():
    at = run()
    text = " ".join(c.value for c in at.sidebar.caption)
    for entry in load_presets()["t5"]:
        c = entry["config"]
        assert f"{entry['label']} {c['relative_attention_num_buckets']} / {c['relative_attention_max_distance']}" in text
    assert "LongT5 TGlobal base 32 / 128, 12 heads, encoder sees ±127 only" in text


def test_a_million_positions_per_side_is_drawn_per_offset_with_an_exact_overview():
    """2^20 × 2^20 (2^40 cells, never built): the window is exact, the overview's blocks of 8192² entries
    carry their exact mean, min and max (checked on blocks at the corner, on the diagonal and off it), the
    page says what the pooling hides, and the overview stays a few thousand numbers."""
    from relviz.toeplitz_display import toeplitz_window
    n = 2**20
    at = run_page("t5", timeout=120, t5_q=n, t5_k=n, t5_ws=512, t5_r0=n - 600, t5_c0=n - 700, t5_bi="False")
    assert not at.error, [e.value for e in at.error]
    check_map(at, n, n, 32, 128, False, 0)
    overview = find(charts(at), "overview")
    block = overview["block"]
    assert block == display_block(n, n, OVERVIEW_MAX) == 8192
    per_offset = t5_bucket(torch.arange(-(n - 1), n), num_buckets=32, max_distance=128, bidirectional=False).numpy()
    mean, low, high = overview_stats(overview)
    for a, b in ((0, 0), (5, 5), (9, 3), (127, 127)):
        cells = toeplitz_window(per_offset, n, n, row0=a * block, col0=b * block, rows=block, cols=block)
        assert mean[a, b] == pytest.approx(cells.mean(dtype=np.float64), rel=1e-7)
        assert (low[a, b], high[a, b]) == (cells.min(), cells.max())
    assert len(json.dumps(overview)) < 30_000
    assert any("What it hides" in m.value and "8,192" in m.value for m in at.markdown)


VALIDATED_FIGURES = '''
import streamlit as st
from relviz.figures.t5 import bucket_budget_figure, bucket_curve, composition_figure, sharing_figure
nb, md, bidir, log_x = {setting}
for n, figure in enumerate((bucket_curve(nb, md, bidir, log_x=log_x, height=470), bucket_budget_figure(nb, md, bidir),
                            sharing_figure(), composition_figure(nb, md, bidir))):
    st.plotly_chart(figure, key=f"built_{{n}}")
'''


@pytest.mark.parametrize("setting", [(32, 128, True, False), (20, 300, False, True)])
def test_the_figures_held_as_sent_dicts_equal_the_validated_figures(setting):
    """The curve and the three confusions are cached as the dicts they send (display.prepared_spec, built without
    plotly's validation): the page sends exactly what st.plotly_chart sends for the figures built with it."""
    nb, md, bidir, log_x = setting
    page = run(t5_nb=nb, t5_md=md, t5_bi=str(bidir), t5_logx=str(log_x))
    reference = AppTest.from_string(VALIDATED_FIGURES.format(setting=setting), default_timeout=60)
    reference.run()
    assert not reference.exception
    sent = [json.loads(chart.proto.spec) for chart in page.get("plotly_chart")]
    for chart in reference.get("plotly_chart"):
        assert json.loads(chart.proto.spec) in sent
