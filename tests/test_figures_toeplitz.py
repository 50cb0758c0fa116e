"""The Toeplitz figure helper: exact cells, exact pooled overview, honest hover, bounded payload."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plotly_data import cell_positions, customdata_field, decode, figure_json, heatmap_values, trace
from relviz.figures.toeplitz import FIGURE_BUDGET, IMAGE_BUDGET, IMAGE_MIN_CELLS, toeplitz_heatmap, toeplitz_overview
from relviz.figures.toeplitz_payload import encode_fields
from relviz.figures.toeplitz_window import (
    OVERVIEW_MAX,
    HoverField,
    diagonal_col0,
    fit_window,
    needs_window,
    offsets_per_offset,
)
from relviz.positions import expand_toeplitz, offset_range, relative_positions, shaw_clip_index, t5_bucket
from relviz.toeplitz_display import DISPLAY_MAX

import torch


def full(per_offset: np.ndarray, q_len: int, k_len: int) -> np.ndarray:
    return expand_toeplitz(torch.from_numpy(np.asarray(per_offset)), q_len, k_len).numpy()


def t5_per_offset(q_len, k_len, q_offset=0, **kw):
    return t5_bucket(offset_range(q_len, k_len, q_offset=q_offset, device="cpu"), **kw).numpy()


@settings(max_examples=25, deadline=None)
@given(q_len=st.integers(1, 40), k_len=st.integers(1, 40), q_offset=st.integers(-30, 30), k=st.integers(0, 12))
def test_full_resolution_heatmap_equals_the_matrix_and_hover_offsets(q_len, k_len, q_offset, k):
    offsets = offsets_per_offset(q_len, k_len, q_offset)
    index = np.clip(offsets, -k, k) + k
    made = toeplitz_heatmap(index, q_len, k_len, value_label="index", q_offset=q_offset,
                            discrete_range=(0, 2 * k), hover=[HoverField("clipped offset", index - k)])
    spec = figure_json(made.figure)
    expected = shaw_clip_index(q_len, k_len, k=k, q_offset=q_offset, device="cpu").numpy()
    assert np.array_equal(heatmap_values(spec), expected)
    assert np.array_equal(made.values, expected)
    relative = relative_positions(q_len, k_len, q_offset=q_offset, device="cpu").numpy()
    assert np.array_equal(customdata_field(spec, "j − i"), relative)
    assert np.array_equal(customdata_field(spec, "clipped offset"), np.clip(relative, -k, k))
    assert made.dropped == ()
    t = trace(spec)
    assert list(decode(t["y"])) == list(q_offset + np.arange(q_len))  # rows labelled by position i
    assert list(decode(t["x"])) == list(range(k_len))
    template = t["hovertemplate"]
    for line in ("i = %{y}", "j = %{x}", "j − i = %{customdata", "index = %{z", "clipped offset = %{customdata"):
        assert line in template


def test_discrete_values_below_zero_travel_unshifted_so_hover_shows_them():
    offsets = offsets_per_offset(9, 7, 2)
    clipped = np.clip(offsets, -3, 3)
    spec = figure_json(toeplitz_heatmap(clipped, 9, 7, value_label="clipped offset", q_offset=2,
                                        discrete_range=(-3, 3)).figure)
    t = trace(spec)
    assert np.array_equal(decode(t["z"]), full(clipped, 9, 7))
    assert t["zmin"] == -3.5 and t["zmax"] == 3.5
    assert "clipped offset = %{z" in t["hovertemplate"]
    assert [int(v) for v in t["colorbar"]["tickvals"]] == [int(s.replace("−", "-")) for s in t["colorbar"]["ticktext"]]


def test_the_relative_matrix_is_not_sent_twice():
    offsets = offsets_per_offset(20, 30, 0)
    spec = figure_json(toeplitz_heatmap(offsets, 20, 30, value_label="j − i", colorscale="RdBu", zmid=0).figure)
    t = trace(spec)
    assert "customdata" not in t or t["meta"]["customdata"] == []
    assert "j − i = %{z" in t["hovertemplate"]
    assert np.array_equal(decode(t["z"]), relative_positions(20, 30, device="cpu").numpy())


@pytest.mark.parametrize("row0, col0", [(0, 0), (5000, 4700), (300, 7000), (7680, 0)])
def test_window_is_the_exact_slice_and_its_hover_offsets_are_right(row0, col0):
    q_len, k_len, q_offset = 8192, 8000, 40
    per_offset = t5_per_offset(q_len, k_len, q_offset, num_buckets=32, max_distance=128)
    window = fit_window(q_len, k_len, row0=row0, col0=col0, size=384)
    made = toeplitz_heatmap(per_offset, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
                            discrete_range=(0, 31))
    spec = figure_json(made.figure)
    i = q_offset + np.arange(window.row0, window.row0 + window.rows)[:, None]
    j = np.arange(window.col0, window.col0 + window.cols)[None, :]
    expected = t5_bucket(torch.from_numpy(j - i), num_buckets=32, max_distance=128).numpy()
    assert np.array_equal(heatmap_values(spec), expected)
    assert np.array_equal(customdata_field(spec, "j − i"), j - i)
    assert cell_positions(spec, "x")[0] == window.col0 and cell_positions(spec, "y")[0] == q_offset + window.row0


@pytest.mark.parametrize("row0, col0", [(0, 0), (600, 0), (300, 0), (0, 4000), (4000, 0), (2000, 2300)])
def test_every_figure_stays_under_three_megabytes_at_8192_with_window_512(row0, col0):
    """The worst payloads: Shaw's index with two signed hover fields, T5 with a range per cell."""
    L = 8192
    window = fit_window(L, L, row0=row0, col0=col0, size=512)
    offsets = offsets_per_offset(L, L)
    for k in (3, 64):
        clipped = np.clip(offsets, -k, k)
        figures = [
            toeplitz_heatmap(clipped + k, L, L, value_label="index", window=window, discrete_range=(0, 2 * k),
                             hover=[HoverField("clipped offset", clipped)]),
            toeplitz_heatmap(clipped, L, L, value_label="clipped offset", window=window, discrete_range=(-k, k),
                             hover=[HoverField("index", clipped + k)]),
            toeplitz_heatmap(offsets, L, L, value_label="j − i", window=window,
                             hover=[HoverField("clipped offset", clipped), HoverField("index", clipped + k)]),
        ]
        expected_offsets = (np.arange(window.col0, window.col0 + 512)[None, :]
                            - np.arange(window.row0, window.row0 + 512)[:, None])
        for made in figures:
            assert len(made.figure.to_json()) <= 3_000_000
            spec = figure_json(made.figure)
            shown = (customdata_field(spec, "j − i") if "j − i" in trace(spec)["meta"]["customdata"]
                     else heatmap_values(spec))  # the relative matrix carries j − i as its value
            assert np.array_equal(shown, expected_offsets)
    buckets = t5_per_offset(L, L, num_buckets=128, max_distance=1024)
    first = np.array([offsets[buckets == b].min() if (buckets == b).any() else 0 for b in range(128)])[buckets]
    last = np.array([offsets[buckets == b].max() if (buckets == b).any() else 0 for b in range(128)])[buckets]
    made = toeplitz_heatmap(buckets, L, L, value_label="bucket", window=window, discrete_range=(0, 127),
                            hover=[HoverField("first", first, group="range"), HoverField("last", last, group="range")])
    assert len(made.figure.to_json()) <= 3_000_000
    assert made.dropped in ((), ("first", "last"))  # a range is kept or left out whole


@pytest.mark.parametrize("size", [127, 128, 512])
def test_large_windows_are_lossless_palette_images_with_exact_hover(size):
    """From IMAGE_MIN_CELLS cells a window is a palette PNG: decoding it gives back every index exactly,
    and the hover data still carry j − i and the value for every cell; smaller ones stay heatmaps."""
    L, k = 4096, 64
    offsets = offsets_per_offset(L, L, 7)
    window = fit_window(L, L, row0=1000, col0=950, size=size)
    made = toeplitz_heatmap(np.clip(offsets, -k, k) + k, L, L, value_label="index", q_offset=7, window=window,
                            discrete_range=(0, 2 * k), hover=[HoverField("clipped offset", np.clip(offsets, -k, k))])
    spec = figure_json(made.figure)
    t = trace(spec)
    i = 7 + np.arange(window.row0, window.row0 + window.rows)[:, None]
    j = np.arange(window.col0, window.col0 + window.cols)[None, :]
    expected = np.clip(j - i, -k, k) + k
    assert t["type"] == ("image" if window.cells >= IMAGE_MIN_CELLS else "heatmap")
    assert np.array_equal(heatmap_values(spec), expected)            # image: the PNG's palette indices + lo
    assert np.array_equal(customdata_field(spec, "j − i"), j - i)
    if window.cells >= IMAGE_MIN_CELLS and made.dropped:  # a large image keeps its figure light
        assert made.dropped == ("clipped offset",) and window.cells > 128 * 128
        assert "clipped offset" not in t["hovertemplate"] and IMAGE_BUDGET < FIGURE_BUDGET
    else:
        assert np.array_equal(customdata_field(spec, "clipped offset"), expected - k)
    if t["type"] == "image":
        assert t["source"].startswith("data:image/png;base64,")
        assert np.array_equal(customdata_field(spec, "index"), expected)
        for line in ("i = %{y}", "j = %{x}", "j − i = %{customdata", "index = %{customdata"):
            assert line in t["hovertemplate"]
        bar = trace(spec, 1)                                           # the invisible colour-bar carrier
        assert bar["type"] == "heatmap" and bar["opacity"] == 0 and bar["hoverinfo"] == "skip"
        assert bar["colorbar"]["ticktext"][0] == "0"
        assert len(made.figure.to_json()) <= 3_000_000


def test_a_continuous_large_window_is_an_image_whose_colours_follow_its_exact_values():
    L = 2048
    offsets = offsets_per_offset(L, L)
    score = np.cos(offsets / 7.0).astype(np.float32)
    made = toeplitz_heatmap(score, L, L, value_label="score", colorscale="RdBu_r", zmid=0.0,
                            window=fit_window(L, L, row0=100, col0=900, size=256))
    spec = figure_json(made.figure)
    assert trace(spec)["type"] == "image"
    i, j = np.arange(100, 356)[:, None], np.arange(900, 1156)[None, :]
    # image_values checks that every pixel's colour level is the exact value's level
    assert np.array_equal(heatmap_values(spec), np.cos((j - i) / 7.0).astype(np.float32))


def test_hover_fields_are_dropped_only_when_over_budget_and_are_reported():
    assert FIGURE_BUDGET < 3_000_000
    offsets = offsets_per_offset(64, 64)
    clipped = np.clip(offsets, -3, 3)
    roomy = toeplitz_heatmap(clipped + 3, 64, 64, value_label="index", discrete_range=(0, 6),
                             hover=[HoverField("clipped offset", clipped)])
    assert roomy.dropped == ()
    tight = toeplitz_heatmap(clipped + 3, 64, 64, value_label="index", discrete_range=(0, 6),
                             hover=[HoverField("clipped offset", clipped)], budget=1)
    assert tight.dropped == ("clipped offset",)
    spec = figure_json(tight.figure)
    assert "clipped offset" not in trace(spec)["hovertemplate"]
    assert np.array_equal(customdata_field(spec, "j − i"), relative_positions(64, 64, device="cpu").numpy())


@settings(max_examples=40, deadline=None)
@given(data=st.data(), fields=st.integers(1, 4), rows=st.integers(1, 20), cols=st.integers(1, 20))
def test_encoding_round_trips_every_field_exactly(data, fields, rows, cols):
    lo = data.draw(st.sampled_from([0, -5, -300, -40000]))
    hi = data.draw(st.sampled_from([7, 200, 70000]))
    arrays = [np.asarray(data.draw(st.lists(st.integers(lo, hi), min_size=rows * cols, max_size=rows * cols)))
              .reshape(rows, cols) for _ in range(fields)]
    encoded = encode_fields([(f"f{n}", a) for n, a in enumerate(arrays)])
    for n, a in enumerate(arrays):
        assert np.array_equal(encoded.array[..., encoded.order.index(f"f{n}")].astype(np.int64), a)


def test_pooled_overview_equals_exact_block_statistics():
    q_len, k_len, q_offset = 1100, 1300, -17
    per_offset = t5_per_offset(q_len, k_len, q_offset, num_buckets=24, max_distance=300)
    window = fit_window(q_len, k_len, row0=200, col0=640, size=256)
    made = toeplitz_overview(per_offset, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
                             value_range=(0, 23))
    spec = figure_json(made.figure)
    t = trace(spec)
    block = t["meta"]["block"]
    assert block == -(-1300 // OVERVIEW_MAX)
    matrix = full(per_offset, q_len, k_len).astype(np.float64)
    z = decode(t["z"])
    vmin, vmax = customdata_field(spec, "min"), customdata_field(spec, "max")
    d_lo, d_hi = customdata_field(spec, "d_lo"), customdata_field(spec, "d_hi")
    assert z.shape == (-(-q_len // block), -(-k_len // block))
    for a in range(z.shape[0]):
        for b in range(z.shape[1]):
            cells = matrix[a * block:(a + 1) * block, b * block:(b + 1) * block]
            assert z[a, b] == pytest.approx(cells.mean(), rel=1e-6)
            assert vmin[a, b] == cells.min() and vmax[a, b] == cells.max()
            rows = q_offset + np.arange(a * block, min((a + 1) * block, q_len))
            cols = np.arange(b * block, min((b + 1) * block, k_len))
            assert d_lo[a, b] == cols[0] - rows[-1] and d_hi[a, b] == cols[-1] - rows[0]
    assert t["y"][0] == f"{q_offset}–{q_offset + block - 1}" and t["x"][0] == f"0–{block - 1}"
    rect = spec["layout"]["shapes"][0]
    assert rect["x0"] == pytest.approx(640 / block - 0.5) and rect["y1"] == pytest.approx(456 / block - 0.5)
    assert len(made.figure.to_json()) <= 3_000_000


def test_overview_of_the_largest_matrix_is_small_and_never_builds_it():
    L = 8192
    per_offset = t5_per_offset(L, L, num_buckets=32, max_distance=128)
    made = toeplitz_overview(per_offset, L, L, value_label="bucket", window=fit_window(L, L, size=512))
    spec = figure_json(made.figure)
    assert decode(trace(spec)["z"]).shape == (OVERVIEW_MAX, OVERVIEW_MAX)
    assert len(made.figure.to_json()) <= 3_000_000


def test_window_geometry():
    assert not needs_window(DISPLAY_MAX, DISPLAY_MAX) and needs_window(DISPLAY_MAX + 1, 3)
    w = fit_window(8192, 100, row0=9000, col0=-5, size=4096)
    assert (w.row0, w.col0, w.rows, w.cols) == (8192 - DISPLAY_MAX, 0, DISPLAY_MAX, 100)
    col0 = diagonal_col0(8192, 8192, q_offset=0, row0=1000, rows=256, cols=256)
    assert col0 == 1000  # j − i = 0 runs through the window's centre
    assert diagonal_col0(8192, 8192, q_offset=0, row0=8000, rows=192, cols=256) == 8192 - 256


# ---------------------------------------------------------------------------------------
# Windows drawn in the browser (ToeplitzImage): per-offset slices instead of per-cell data


@settings(max_examples=30, deadline=None)
@given(data=st.data(), q_len=st.integers(1, 600), k_len=st.integers(1, 600), q_offset=st.integers(-50, 50))
def test_browser_window_slices_reproduce_the_window_and_every_hover_field(data, q_len, k_len, q_offset):
    from relviz.figures.toeplitz_canvas import toeplitz_image
    from relviz.toeplitz_display import toeplitz_window

    rows, cols = data.draw(st.integers(1, min(q_len, 512))), data.draw(st.integers(1, min(k_len, 512)))
    row0, col0 = data.draw(st.integers(0, q_len - rows)), data.draw(st.integers(0, k_len - cols))
    window = fit_window(q_len, k_len, row0=row0, col0=col0, size=max(rows, cols))
    window = type(window)(row0, col0, rows, cols)
    values = t5_per_offset(q_len, k_len, q_offset, num_buckets=32, max_distance=128, bidirectional=True)
    extra = np.arange(q_len + k_len - 1, dtype=np.int64) * 3 - 7
    image = toeplitz_image(values, q_len, k_len, value_label="bucket", q_offset=q_offset, window=window,
                           hover=[HoverField("extra", extra)], discrete_range=(0, 31))
    expected = toeplitz_window(values, q_len, k_len, row0=row0, col0=col0, rows=rows, cols=cols)
    assert np.array_equal(image.values, expected)
    payload = image.payload()
    from plotly_data import canvas_field, canvas_values
    assert np.array_equal(canvas_values(payload), expected)           # colours and values agree too
    assert np.array_equal(canvas_field(payload, "extra"),
                          toeplitz_window(extra, q_len, k_len, row0=row0, col0=col0, rows=rows, cols=cols))
    i = q_offset + np.arange(row0, row0 + rows)[:, None]
    j = np.arange(col0, col0 + cols)[None, :]
    assert np.array_equal(canvas_field(payload, "j − i"), j - i)
    assert all(len(f["values"]) == rows + cols - 1 for f in payload["fields"])
    assert len(payload["pixels"]) == rows + cols - 1


def test_browser_window_payload_grows_with_rows_plus_cols_not_their_product():
    import json

    from relviz.figures.toeplitz_canvas import toeplitz_image

    sizes = {}
    for size in (128, 256, 512):
        values = t5_per_offset(8192, 8192, num_buckets=128, max_distance=1024, bidirectional=True)
        first = HoverField("first", values * 2 - 100, group="range", line="range {}")
        last = HoverField("last", values * 2 + 100, group="range", line="… {}")
        image = toeplitz_image(values, 8192, 8192, value_label="bucket", hover=[first, last],
                               window=fit_window(8192, 8192, row0=3000, col0=3100, size=size),
                               discrete_range=(0, 127))
        sizes[size] = len(json.dumps(image.payload()))
        assert len(image.fields) == 3                   # hover is complete at every size: nothing dropped
    assert sizes[512] < 40_000                          # a 512² window: tens of KB, not MB
    # doubling the side doubles the per-offset part only (a 4× growth would mean per-cell data)
    assert sizes[512] - sizes[256] < 2.3 * (sizes[256] - sizes[128])


def test_browser_window_hover_lines_follow_the_plotly_hover():
    from relviz.figures.toeplitz import toeplitz_view
    from relviz.figures.toeplitz_canvas import ToeplitzImage, toeplitz_image

    q, k = 300, 300
    offsets = offsets_per_offset(q, k)
    index = np.clip(offsets, -4, 4) + 4
    window = fit_window(q, k, size=200)
    lookup = toeplitz_image(index, q, k, value_label="index", discrete_range=(0, 8), window=window,
                            hover=[HoverField("clipped offset", index - 4)], value_last=True)
    assert lookup.lines == ("i = {i}", "j = {j}", "j − i = {d}", "clipped offset = {1}", "index = {0}")
    relative = toeplitz_image(offsets, q, k, value_label="j − i", colorscale="RdBu", zmid=0, window=window,
                              hover=[HoverField("index", index)])
    assert relative.lines == ("i = {i}", "j = {j}", "j − i = {d}", "index = {1}")  # j − i is not shown twice
    assert relative.colour["kind"] == "continuous" and relative.colour["zmin"] == -relative.colour["zmax"]
    # what the app draws: small windows stay plotly heatmaps (cell labels, every cell a trace point)
    assert isinstance(toeplitz_view(index, q, k, value_label="index", window=window, discrete_range=(0, 8)),
                      ToeplitzImage)
    small = fit_window(q, k, size=64)
    assert not isinstance(toeplitz_view(index, q, k, value_label="index", window=small, discrete_range=(0, 8)),
                          ToeplitzImage)
    # more than 256 discrete colours cannot be exact in the palette: the plotly heatmap draws it
    assert toeplitz_image(offsets, q, k, value_label="j − i", discrete_range=(-299, 299), window=window) is None
