"""Figures the pages build without plotly's validation (``validate=False``, a move's CPU) are the same figures:
the JSON a page sends equals the validated figure's, every data array holding the same values, so a wrong
property or a colour scale expanded differently fails here.

Arrays compare by value, not by encoding: relviz.figures.toeplitz_payload.unshifted_z sends whole-number j − i as
int16 where that is shorter than float32, which an unvalidated figure does; a validated one keeps float32,
because plotly skips setting an array equal in value to the one it holds."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from plotly_data import decode
from relviz.figures.heatmap import named_colorscale
from relviz.figures.shaw import embedding_strip, k_ablation_figure, shaw_matrices, shaw_offsets
from relviz.figures.toeplitz_window import Window


def spec(figure: go.Figure) -> dict:
    """The figure's JSON with every typed array decoded to its values."""
    def values(node):
        if isinstance(node, dict):
            return decode(node).tolist() if "bdata" in node else {key: values(v) for key, v in node.items()}
        return [values(v) for v in node] if isinstance(node, list) else node

    return values(json.loads(figure.to_json()))


@pytest.mark.parametrize("name", ["RdBu", "Viridis", "PuOr", "Viridis_r"])
def test_a_named_scale_is_expanded_as_validation_expands_it(name):
    assert spec(go.Figure(go.Heatmap(z=[[0]], colorscale=name)))["data"][0]["colorscale"] == named_colorscale(name)


# k = 0 (one table row), k inside the matrix, k at and past its longest offset (the ablation's measured 4 and 64,
# and 5, between two measured values); a window at an offset query start, and one wider than 3:1
@pytest.mark.parametrize("k, q_len, k_len, q_offset", [(0, 10, 10, 0), (4, 7, 12, 3), (5, 10, 10, 0),
                                                       (64, 10, 10, 0), (3, 4, 20, 0)])
def test_the_shaw_figures_are_the_same_without_validation(k, q_len, k_len, q_offset):
    values = shaw_offsets(q_len, k_len, k=k, q_offset=q_offset)
    window = Window(0, 0, q_len, k_len)
    checked = shaw_matrices(values, q_len, k_len, q_offset=q_offset, window=window, browser=True)
    fast = shaw_matrices(values, q_len, k_len, q_offset=q_offset, window=window, browser=True, validate=False)
    for a, b in zip(checked, fast):
        assert spec(b.figure) == spec(a.figure)
    assert spec(embedding_strip(values, q_len, k_len, validate=False)) == spec(embedding_strip(values, q_len, k_len))
    assert spec(k_ablation_figure(k, validate=False)) == spec(k_ablation_figure(k))


@pytest.mark.parametrize("length, shared", [(1, False), (7, False), (40, False), (9, True)])
def test_the_attention_grid_is_sent_as_its_validated_figure(length, shared):
    """Live attention sends the grid's dicts as they are (relviz.app.display.prepared): they must be what
    plotly's validation makes of them (40 positions: mean-pooled blocks)."""
    import copy

    import numpy as np
    import plotly.io as pio
    import plotly.tools

    from relviz.app.display import prepared
    from relviz.figures.attention import attention_grid_parts

    def sent(figure) -> dict:  # what st.plotly_chart sends
        return json.loads(pio.to_json(plotly.tools.return_figure_from_figure_or_data(figure, True), validate=False))

    weights = np.random.default_rng(length).random((2, 3, length, length)).astype(np.float32)
    tokens = [str(n % 10) for n in range(length)] if shared else None
    data, layout = attention_grid_parts(weights, shared_scale=shared, tokens=tokens)
    validated = go.Figure({"data": copy.deepcopy(data), "layout": copy.deepcopy(layout)})
    assert sent(prepared(data, layout)) == sent(validated)


@pytest.mark.parametrize("preset, layer, chunk, window", [("models/llama-4-scout", 0, 8192, None),
                                                          ("models/gemma-3-27b", 0, None, 1024)])
def test_the_keys_seen_band_sends_its_corners_and_draws_every_query(preset, layer, chunk, window):
    """Your model's keys-seen band (right panel) travels as its corners only: the straight lines through them are
    the mask's band at every query shown (a chunk restarts at offset 0; a window reaches back window − 1 keys),
    with a few points instead of one per query."""
    import numpy as np

    from relviz.figures.layers import corners, view_figure
    from relviz.layer_strip import context_length, layer_views
    from relviz.model_presets import preset_config, preset_entry, preset_plan

    plan = preset_plan(preset)
    views = layer_views(plan.layer(layer), context_length(plan, preset_config(preset_entry(preset))))
    (figure,) = [view_figure(v) for v in views if type(v).__name__ == "KeysSeen"]
    ahead, back = [t for t in figure.data if t.xaxis == "x2"]
    shown = np.arange(int(back.x[-1]) + 1)                       # the first queries, about four reaches of them
    truth = -(shown % chunk) if chunk else -np.minimum(shown, window - 1)
    assert len(shown) >= 3 * (chunk or window) and len(back.x) <= 2 + 2 * 4 and back.x[0] == 0
    assert np.array_equal(np.interp(shown, back.x, back.y), truth)
    assert np.array_equal(np.interp(shown, ahead.x, ahead.y), np.zeros(len(shown)))
    assert corners(np.array([])).size == 0 and list(corners(np.array([5.0]))) == [0]


@pytest.mark.parametrize("name, length", [("learned-shift", 7), ("learned-shift", 40), ("t5-shift", 30),
                                          ("rope-shift", 65), ("shaw-shift", 30)])
def test_live_attentions_smaller_figures_are_sent_as_their_validated_figures(name, length):
    """Live attention sends its close-up, structure, strip, offset-profile and parameter-view parts (a bias curve
    with bucket edges, vector norms, a similarity matrix with its outline) as they are (display.prepared):
    the JSON must be what plotly's validation makes of the same dicts, every array in the same bytes (a named scale left as a
    name would be drawn by plotly.js's own scale: its 'RdBu' runs the other way). Lengths within and beyond the
    training length (the dotted lines, the strip's extrapolation line), a similarity structure (RdBu) and an index
    one, more than one layer and head."""
    import copy

    import plotly.io as pio
    import plotly.tools

    from relviz.app.display import prepared
    from relviz.figures.attention import (
        attention_heatmap_parts,
        offset_profile_parts,
        prediction_strip_parts,
        structure_heatmap_parts,
    )
    from relviz.figures.layers import view_parts
    from relviz.inspection import (
        LiveModel,
        mean_attention_by_offset,
        parameter_views,
        position_structure,
        random_text,
        run_view,
    )
    from relviz.training import load_checkpoint

    def sent(figure) -> dict:  # what st.plotly_chart sends (arrays as base64 strings: compared byte for byte)
        return json.loads(pio.to_json(plotly.tools.return_figure_from_figure_or_data(figure, True), validate=False))

    model = LiveModel.from_checkpoint(name, load_checkpoint(name))
    view = run_view(model.model, model.task, random_text(length, 1))
    structure = position_structure(model.model, length)
    last_layer, last_head = model.config.n_layers - 1, model.config.n_heads - 1
    builders = [lambda: attention_heatmap_parts(view.weights[last_layer, last_head], layer=last_layer, head=last_head,
                                                structure=structure, train_length=model.train_length),
                lambda: structure_heatmap_parts(structure, head=last_head),
                lambda: prediction_strip_parts(view, train_length=model.train_length),
                lambda: offset_profile_parts(mean_attention_by_offset(view.weights), causal=model.config.causal,
                                             answer_offset=model.task.answer_offset, window=model.task.answer_window)]
    views = parameter_views(model.model, length=length, train_length=model.train_length, layer=last_layer)
    builders += [lambda view=view: view_parts(view, train_length=model.train_length) for view in views
                 if view_parts(view, train_length=model.train_length) is not None]
    assert len(builders) > 4 or name == "rope-shift"   # RoPE's wavelengths are a go.Figure (its dict is sent)
    for build in builders:
        data, layout = build()
        validated = go.Figure({"data": copy.deepcopy(data), "layout": copy.deepcopy(layout)})
        assert sent(prepared(data, layout)) == sent(validated)
    assert length <= model.train_length or "shapes" in attention_heatmap_parts(
        view.weights[0, 0], layer=0, head=0, train_length=model.train_length)[1]


# T5's move (t5_nb, t5_md) builds its curve and two of its three confusion figures anew: the fewest buckets a
# direction takes, an odd count, the page's default, max_distance below, at and far above the exact buckets
@pytest.mark.parametrize("nb, md, bidir", [(2, 4, False), (4, 2, True), (5, 16, False), (32, 128, True),
                                           (33, 20, True), (128, 1024, False)])
def test_the_t5_figures_are_the_same_without_validation(nb, md, bidir):
    from relviz.figures.t5 import bucket_budget_figure, bucket_curve, composition_figure

    for log_x in (False, True):
        assert spec(bucket_curve(nb, md, bidir, log_x=log_x, height=470, validate=False)) == \
            spec(bucket_curve(nb, md, bidir, log_x=log_x, height=470))
    assert spec(bucket_budget_figure(nb, md, bidir, validate=False)) == spec(bucket_budget_figure(nb, md, bidir))
    fast = spec(composition_figure(nb, md, bidir, validate=False))
    assert fast == spec(composition_figure(nb, md, bidir))
    assert fast["layout"]["title"]["font"]["size"] == 17 and fast["layout"]["yaxis"]["tickfont"]["size"] == 14
