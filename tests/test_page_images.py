"""AppTest for the Images and video page: each view draws what relviz.vision computes, at the largest grid too."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from page_support import run_page
from plotly_data import charts, decode, find, heatmap_values, is_canvas, title, trace
from relviz.vision.grid import PatchGrid, offset_window
from relviz.vision.mrope import MROPE_RULES, mrope_position_ids
from relviz.vision.rope2d import pixtral_rope, score_map_2d
from relviz.vision.swin import swin_index_per_offset
from relviz.vision import score_maps as sv


def test_relative_index_view_draws_the_query_row_and_every_pair():
    at = run_page("images", im_rows=3, im_cols=4, im_qr=1, im_qc=2)
    figures = charts(at)
    assert len(figures) == 4
    dh = heatmap_values(find(figures, "Δh of every key patch"))
    dw = heatmap_values(find(figures, "Δw of every key patch"))
    assert np.array_equal(dh, np.arange(3)[:, None].repeat(4, 1) - 1)
    assert np.array_equal(dw, np.arange(4)[None, :].repeat(3, 0) - 2)
    pairs = heatmap_values(find(figures, "Δw of every patch pair"))
    w = np.arange(12) % 4
    assert np.array_equal(pairs, w[None, :] - w[:, None])
    assert any("Sign convention" in info.value for info in at.info)
    assert any("Learned patch tables (ViT, DeiT, DINOv2)" in c.value for c in at.caption)


def test_swin_view_draws_the_index_formula_the_bias_and_v2_coordinates():
    at = run_page("images", im_view="Swin's bias table", im_win=5, im_pre=8, im_qr=6, im_qc=2)
    figures = charts(at)
    index = heatmap_values(find(figures, "Swin's table row per offset"))
    assert np.array_equal(index, swin_index_per_offset(5, device="cpu").numpy())
    assert index[4, 4] == 4 * 9 + 4                                     # Δ = 0: (0 + M − 1)(2M − 1) + (0 + M − 1)
    bias = heatmap_values(find(figures, "the bias a 5 × 5 window adds"))
    query = heatmap_values(find(figures, "bias of query patch (1, 2)"))  # grid patch (6, 2) is (1, 2) of its window
    assert bias.shape == (25, 25) and np.array_equal(query.flatten(), bias[1 * 5 + 2])
    v2 = find(figures, "Swin v2")
    assert "pretrained window 8" in title(v2)
    assert np.allclose(decode(trace(v2, 1)["y"])[-1], np.log2(8 * 4 / 7 + 1) / 3, atol=1e-6)


def test_rope_view_at_4096_patches_is_the_per_offset_score():
    at = run_page("images", im_view="2-D RoPE", im_rows=64, im_cols=64, im_qr=10, im_qc=40, im_dim=64)
    figures = charts(at)
    plane = heatmap_values(find(figures, "score per (Δh, Δw) <sup>64 × 64 patches"))
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(64, generator=generator, dtype=torch.float64)
    expected = score_map_2d(q, q.clone(), pixtral_rope(64), PatchGrid(64, 64), device="cpu").float().numpy()
    assert plane.shape == (127, 127) and np.array_equal(plane, expected)
    query = heatmap_values(find(figures, "query (10, 40) against every key patch"))
    assert np.array_equal(query, offset_window(torch.from_numpy(expected), PatchGrid(64, 64), 10, 40).numpy())
    assert find(figures, "each pair's wavelength and axis (head_dim 64, 64 × 64")
    for figure in figures:
        assert len(str(figure)) < 400_000


def test_mrope_view_ids_are_get_rope_index_and_the_slice_moves_with_dt():
    at = run_page("images", im_view="M-RoPE (video)", im_rows=4, im_cols=6, im_frames=3, im_dt=2, im_tps=2,
                  im_sec="1.5", im_rule="Qwen2.5-VL")
    figures = charts(at)
    ids_figure = find(figures, "Qwen2.5-VL: position ids")
    shown = np.stack([decode(trace(ids_figure, a)["y"]) for a in range(3)])
    expected, _ = mrope_position_ids(sv.mixed_sequence("qwen2_5_vl", 4, 6, 3, seconds_per_grid=1.5),
                                     MROPE_RULES["qwen2_5_vl"], tokens_per_second=2, device="cpu")
    assert np.array_equal(shown, expected.numpy())
    scores = heatmap_values(find(figures, "video tokens +2 frames apart"))
    plane = sv.mrope_plane("qwen2_5_vl", 4, 6, 3, tokens_per_second=2, seconds_per_grid=1.5)
    assert np.array_equal(scores, plane[4].astype(np.float32))
    assert find(figures, "mrope_section [16, 24, 24]")
    assert any("Why text is plain RoPE" in m.value for m in at.markdown)


@pytest.mark.parametrize("rule", ["Qwen2-VL", "Qwen3-VL"])
def test_mrope_view_at_8_frames_of_4096_patches(rule):
    at = run_page("images", im_view="M-RoPE (video)", im_rows=64, im_cols=64, im_frames=8, im_dt=-7, im_rule=rule)
    figures = charts(at)
    assert heatmap_values(find(figures, "video tokens -7 frames apart")).shape == (127, 127)
    ids = find(figures, "position ids")
    assert len(decode(trace(ids)["y"])) == 4 + 4096 + 3 + 8 * 4096 + 2 + (16 if rule == "Qwen3-VL" else 0)


def _colour_span(figure_trace: dict, values: np.ndarray) -> float:
    """The share of a continuous heatmap's colour range its values cover: plotly spans zmid ± the largest
    distance from it when zmid is set, zmin..zmax when given, else the values' own min..max."""
    lo, hi = float(values.min()), float(values.max())
    if "zmid" in figure_trace:
        half = max(hi - figure_trace["zmid"], figure_trace["zmid"] - lo)
        low, high = figure_trace["zmid"] - half, figure_trace["zmid"] + half
    else:
        low, high = figure_trace.get("zmin", lo), figure_trace.get("zmax", hi)
    return (hi - lo) / (high - low) if high > low else 1.0


@pytest.mark.parametrize("view", ["2-D RoPE", "M-RoPE (video)", "Swin's bias table"])
def test_every_score_maps_colours_fit_the_values_it_shows(view):
    """M-RoPE's k = q map at its defaults holds 129-133: on a scale of ±133 it was one flat dark red. A map whose
    values keep one sign spans their own range; a map with both signs stays centred on 0."""
    at = run_page("images", im_view=view)
    maps = [f for f in charts(at) if trace(f).get("type") == "heatmap" and "ticktext" not in trace(f).get("colorbar", {})]
    grids = [f for f in charts(at) if is_canvas(f) and f["colour"]["kind"] == "continuous"]
    assert maps or grids, [title(f) for f in charts(at)]
    for grid in grids:  # drawn in the browser: its colour range is the plotly map's zmin..zmax (symmetric: zmid 0)
        values = heatmap_values(grid).astype(np.float64)
        lo, hi = grid["colour"]["zmin"], grid["colour"]["zmax"]
        if values.min() < 0 < values.max():
            assert lo == -hi, title(grid)
        else:
            assert (lo, hi) == (values.min(), values.max()), title(grid)
            assert grid["palette"][:6] != grid["palette"][-6:], title(grid)
    for figure in maps:
        values = heatmap_values(figure).astype(np.float64)
        t = trace(figure)
        if values.min() < 0 < values.max():
            assert t.get("zmid") == 0, title(figure)
        else:
            assert "zmid" not in t and _colour_span(t, values) == 1.0, title(figure)
            ends = [colour for _, colour in t["colorscale"]][:: len(t["colorscale"]) - 1]
            assert ends[0] != ends[-1], title(figure)


def test_counts_of_one_are_singular_at_one_patch_and_one_frame():
    at = run_page("images", im_view="M-RoPE (video)", im_rows=1, im_cols=1, im_frames=1)
    said = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "1 × 1 = 1 patch, 1 pair, 1 offset." in said and "1 value for 1 pair." in said
    assert "1 values" not in said and "1 pairs" not in said
    at = run_page("images", im_view="M-RoPE (video)", im_rows=1, im_cols=2, im_frames=2, im_dt=1)
    said = " ".join(c.value for c in at.caption)
    assert "Two video tokens +1 frame apart" in said and "9 values for 16 pairs." in said
    assert find(charts(at), "video tokens +1 frame apart")


def test_the_index_colour_bar_ticks_at_round_values():
    at = run_page("images", im_rows=64, im_cols=64, im_qr=0, im_qc=0)
    figure = find(charts(at), "Δh of every key patch")
    bar = figure["colour"] if is_canvas(figure) else trace(figure)["colorbar"]   # the canvas's bar: the same ticks
    ticks = [int(v.replace("−", "-")) for v in bar["ticktext"]]
    step = ticks[1] - ticks[0]
    assert step in (10, 20, 25) and all(v % step == 0 for v in ticks) and -60 in ticks and 60 in ticks


def test_a_one_row_grid_keeps_its_one_row():
    """At 1 × 64 patches the square cells used to grow the y range to ±60 rows that do not exist (one tick per
    whole number smeared into a grey bar): the short side's domain shrinks instead, its range stays the data's."""
    at = run_page("images", im_view="2-D RoPE", im_rows=1, im_cols=64, im_same="false")
    layout = find(charts(at), "score per (Δh, Δw)")["layout"]
    assert layout["yaxis"]["scaleanchor"] == "x" and layout["yaxis"]["constrain"] == "domain"
    assert layout["xaxis"]["constrain"] == "domain"
    # long and thin: plotly draws the query's map too (the canvas's colour bar would be a few pixels tall) ...
    layout = find(charts(at), "against every key patch")["layout"]
    assert layout["yaxis"]["scaleanchor"] == "x" and layout["yaxis"]["constrain"] == "domain"
    # ... and the browser draws a grid at most twice as long as it is wide
    at = run_page("images", im_view="2-D RoPE", im_rows=32, im_cols=64, im_same="false")
    grid = find(charts(at), "against every key patch")
    assert (grid["kind"], grid["rows"], grid["cols"]) == ("grid", 32, 64)


@pytest.mark.parametrize("name, args, kwargs", [
    ("rope2d_query_scores", (64, 64), dict(head_dim=128, query_row=20, query_col=10)),
    ("rope2d_query_scores", (5, 3), dict(rope="dinov3", head_dim=32, query_row=4, query_col=0, same=False)),
    ("mrope_scores", ("qwen2_5_vl", 64, 64, 8), dict(dt=-7)),
    ("mrope_scores", ("qwen3_vl", 4, 6, 3), dict(dt=0)),
    ("patch_row", (64, 64), dict(query_row=63, query_col=0, axis="h")),
    ("patch_row", (3, 5), dict(query_row=1, query_col=4, axis="w")),
])
def test_a_map_drawn_in_the_browser_is_its_plotly_twin(name, args, kwargs):
    """The page draws these maps with the canvas component (browser=True): the same values, exactly, the same
    colour scale and range, the same query outline and title as the plotly figure a notebook gets."""
    import relviz.show_vision as sv
    from relviz.figures.toeplitz_colours import continuous_range, hex_palette, palette_256

    figure = getattr(sv, name)(*args, **kwargs).to_plotly_json()
    grid = getattr(sv, name)(*args, browser=True, **kwargs).payload()
    assert grid["kind"] == "grid"
    values = heatmap_values(grid)
    assert np.array_equal(values, heatmap_values(figure)) and values.dtype == heatmap_values(figure).dtype
    t = figure["data"][0]
    if grid["colour"]["kind"] == "continuous":
        assert grid["palette"] == hex_palette(palette_256(list(map(tuple, t["colorscale"]))))
        zmin, zmax = continuous_range(values, t.get("zmid"))
        assert (grid["colour"]["zmin"], grid["colour"]["zmax"]) == (zmin, zmax)
    else:
        assert [v.replace("−", "-") for v in grid["colour"]["ticktext"]] == t["colorbar"]["ticktext"]
    words = grid["title"] + (f"<br><sup>{grid['subtitle']}</sup>" if grid["subtitle"] else "")
    assert words == figure["layout"]["title"]["text"]
    shapes = figure["layout"].get("shapes", [])
    if grid["outline"] is None:
        assert not shapes
    else:
        o = grid["outline"]
        assert [(s["x0"], s["y0"], s["x1"], s["y1"]) for s in shapes] == [
            (o["col"] - 0.5, o["row"] - 0.5, o["col"] + o["cols"] - 0.5, o["row"] + o["rows"] - 0.5)]
    # the axes' labels: the plotly figure's x and y of the first cell
    assert (grid["x_first"], grid["y_first"]) == (decode(t["x"])[0], decode(t["y"])[0])


def test_swin_view_says_what_transformers_does_with_a_window_larger_than_the_grid():
    at = run_page("images", im_view="Swin's bias table", im_rows=3, im_cols=5, im_win=7)
    said = " ".join(i.value for i in at.info)
    assert "smaller than the window (7)" in said and "a 3 × 5 window" in said and "refuses both" in said
    at = run_page("images", im_view="Swin's bias table", im_rows=8, im_cols=9, im_win=7)
    assert not any("smaller than the window" in i.value for i in at.info)


def test_mrope_view_names_the_families_whose_ids_relviz_reads():
    at = run_page("images", im_view="M-RoPE (video)")
    words = next(m.value for m in at.markdown if "Which families relviz reads" in m.value)
    for rule in MROPE_RULES.values():
        assert rule.label in words
    assert "ERNIE-4.5-VL" in words and "no text between them" in words
