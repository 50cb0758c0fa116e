"""relviz.figures.attention: every figure builds with plotly validation on; payloads are exact."""
from __future__ import annotations

import json

import numpy as np
import pytest

from plotly_data import decode
from relviz.figures.attention import (
    GRID_SIDE,
    attention_grid,
    attention_heatmap,
    colour_rows,
    colour_top,
    offset_profile_figure,
    prediction_strip,
    structure_heatmap,
)
from relviz.figures.layers import view_figure as layer_figure
from relviz.inspection import mean_attention_by_offset, parameter_views, position_structure, random_text, run_view
from relviz.model import SCHEMES, ModelConfig, build_model
from relviz.tasks import make_task


def spec(figure) -> dict:
    return json.loads(figure.to_json())


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_figure_builds_validated(scheme):
    model = build_model(ModelConfig(scheme=scheme, clip=3, skew_distances=6), seed=0).eval()
    task = make_task("shift", s=2)
    view = run_view(model, task, random_text(20, 1))
    structure = position_structure(model, 20)
    figures = [prediction_strip(view, train_length=12), attention_grid(view.weights, structure=structure),
               attention_heatmap(view.weights[1, 2], layer=1, head=2, structure=structure, train_length=12),
               offset_profile_figure(mean_attention_by_offset(view.weights), causal=True, answer_offset=-2)]
    if structure is not None:
        figures.append(structure_heatmap(structure, head=1))
    drawn = (layer_figure(v, train_length=12) for v in parameter_views(model, length=20, train_length=12))
    figures += [figure for figure in drawn if figure is not None]     # a Note is words only
    for figure in figures:
        assert spec(figure)["data"]
    close = spec(figures[2])["data"][0]
    z = decode(close["z"])
    assert z.dtype == np.float32 and np.array_equal(z, view.weights[1, 2])
    assert close["zmax"] == pytest.approx(colour_top(view.weights[1, 2]))


def test_colour_range_ignores_the_first_rows_only():
    w = np.zeros((40, 40), dtype=np.float32)
    w[0, 0] = 1.0
    w[10, 3] = 0.4
    assert colour_rows(40) == 5
    assert colour_top(w) == pytest.approx(0.4)


@pytest.mark.parametrize("length, block", [(2 * GRID_SIDE + 3, 3), (4 * GRID_SIDE, 4)])
def test_grid_pools_long_sequences_by_block_means(length, block):
    rng = np.random.default_rng(0)
    weights = rng.random((1, 2, length, length)).astype(np.float32)
    figure = spec(attention_grid(weights))
    z = decode(figure["data"][1]["z"])
    side = -(-length // block)
    assert z.shape == (side, side)
    assert z[0, 0] == pytest.approx(weights[0, 1, :block, :block].mean(), rel=1e-5)
    edge = length - (side - 1) * block  # a partial edge block when the length is not a multiple of the block
    assert z[-1, -1] == pytest.approx(weights[0, 1, -edge:, -edge:].mean(), rel=1e-5)
    means = [[weights[0, 1, r:r + block, c:c + block].astype(np.float64).mean() for c in range(0, length, block)]
             for r in range(0, length, block)]
    assert np.allclose(z, np.array(means, dtype=np.float32), rtol=1e-6, atol=0)
    assert f"mean-pooled {block}×{block}" in figure["layout"]["title"]["text"]


def test_grid_token_labels_and_shared_scale():
    rng = np.random.default_rng(1)
    weights = rng.random((1, 2, 40, 40)).astype(np.float32)
    tokens = [f"tok{k}" for k in range(39)] + ["a_very_long_token"]
    figure = spec(attention_grid(weights, tokens=tokens, shared_scale=True, titled=False))
    assert figure["layout"]["xaxis"]["tickvals"] == list(range(0, 40, 3))    # at most 16 labels
    assert figure["layout"]["yaxis"]["ticktext"][:2] == ["tok0", "tok3"]
    assert figure["layout"]["coloraxis"]["cmax"] == pytest.approx(float(weights[..., 5:, :].max()))
    assert "title" not in figure["layout"] or not figure["layout"]["title"].get("text")
    with pytest.raises(ValueError, match="tokens"):
        attention_grid(weights, tokens=tokens[:3])


def test_t5_exact_band_label_sits_above_the_plot():
    """Inside the plot the label ran across the curves; above it, no curve can reach it."""
    model = build_model(ModelConfig(scheme="t5"), seed=0).eval()
    figures = [spec(layer_figure(v, train_length=32)) for v in parameter_views(model, length=64, train_length=32)]
    labels = [a for f in figures for a in f["layout"].get("annotations", []) if a.get("text", "").startswith("exact:")]
    assert labels and all(a["yref"] == "paper" and a["y"] == 1 and a["yanchor"] == "bottom" for a in labels)


def test_prediction_strip_marks_errors_and_the_training_length():
    model = build_model(ModelConfig(scheme="t5"), seed=0).eval()
    view = run_view(model, make_task("shift", s=2), "0123456789")
    figure = spec(prediction_strip(view, train_length=6))
    z = decode(figure["data"][0]["z"])
    status = np.where(view.mask, np.where(view.correct, 1, 2), 0)
    assert np.array_equal(z[1], status) and np.array_equal(z[2], status) and (z[0] == 3).all()
    assert "".join(figure["data"][0]["text"][0]) == "0123456789"
    assert figure["layout"]["shapes"][0]["x0"] == 5.5


@pytest.mark.parametrize("scheme, count, phrase", [
    ("t5", 1, "shaped by nothing"), ("shaw", 2, "most distinct"), ("skew", 2, "most distinct"),
    ("alibi", 1, "Nothing about position is learned"), ("learned", 1, "explained by j − i"),
    ("rope", 1, "pairs complete at least one turn"), ("none", 0, "depends on the content alone"),
    ("sinusoidal", 0, "nothing about position is learned"),
])
def test_parameter_panels_per_scheme(scheme, count, phrase):
    """Each scheme's panels (a Note is words without one), and the captions the Live attention page puts under
    them: its mechanism's."""
    from relviz.inspection import parameter_caption

    model = build_model(ModelConfig(scheme=scheme), seed=0).eval()
    views = parameter_views(model, length=40, train_length=32, layer=1)
    panels = [figure for figure in (layer_figure(view, train_length=32) for view in views) if figure is not None]
    assert views and len(panels) == count
    assert phrase in " ".join(parameter_caption(view) for view in views)
    for figure in panels:
        assert spec(figure)["data"]


def test_short_sequences_get_one_tick_per_position_not_fractions():
    """At length 1–7 plotly's automatic ticks label −0.5, 0, 0.5 (positions and offsets that do not exist)."""
    from relviz.figures.attention import attention_grid, attention_heatmap

    for length in (1, 3, 7):
        weights = np.full((length, length), 1.0 / length, dtype=np.float32)
        figure = attention_heatmap(weights, layer=0, head=0)
        assert (figure.layout.xaxis.dtick, figure.layout.yaxis.dtick) == (1, 1)
        grid = attention_grid(np.broadcast_to(weights, (2, 2, length, length)).copy())
        assert all(getattr(grid.layout, f"{a}axis{n}").dtick == 1 for a in "xy" for n in ("", "2", "3", "4"))
    long = attention_heatmap(np.full((32, 32), 1 / 32, dtype=np.float32), layer=0, head=0)
    assert long.layout.xaxis.dtick is None  # plotly's own ticks (0, 10, 20, 30)


def test_grid_caption_follows_length_mask_and_structure():
    from relviz.figures.attention import GRID_SIDE, grid_caption
    short = grid_caption(32, causal=True, structure_label="T5 bucket")
    assert "future keys j > i exactly 0" in short and "from row 4 on" in short
    assert "j − i and the scheme's T5 bucket. A diagonal stripe" in short
    long = grid_caption(GRID_SIDE * 2, causal=False)
    assert "future keys" not in long and "j − i. **Downsampled:** each cell is the mean of a 2 × 2 block" in long
