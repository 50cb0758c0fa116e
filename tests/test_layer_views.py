"""Layer views of real models (relviz.layer_strip, the mechanisms' views): each against an independent
computation, per offset or position, and the published presets against transformers' own config classes."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from relviz import layer_strip as lv
from relviz.figures.layers import strip_figure, view_figure
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.scale import QueryTemperature
from relviz.mechanisms import view_kinds as vk
from relviz.mechanisms.sinks import Sinks
from relviz.model_presets import model_presets, preset_config, preset_plan
from relviz.model_plan import LayerPlan
from relviz.rope import load_presets
from relviz.schemes.view_kinds import BiasCurve


@pytest.mark.parametrize("causal,window,chunk", [(True, None, None), (True, 5, None), (False, 3, None),
                                                 (False, None, None), (True, None, 4), (True, 1, None)])
@pytest.mark.parametrize("length", [1, 2, 7, 16, 23])
def test_keys_seen_is_the_mask_per_query(causal, window, chunk, length):
    mask = AttentionPattern(causal=causal, window=window, chunk=chunk).mask(length).numpy()   # [L, L]
    positions, back, ahead, sampled = vk.keys_seen(length, causal=causal, window=window, chunk=chunk)
    assert not sampled
    i = np.arange(length)
    # between breakpoints the edges are linear, except across a chunk boundary (a jump: both ends are points)
    if chunk is None:
        lo, hi = np.interp(i, positions, back), np.interp(i, positions, ahead)
    else:
        start = positions[back == 0]
        lo, hi = -(i - start[np.searchsorted(start, i, side="right") - 1]), np.zeros(length)
    for q in range(length):
        seen = np.flatnonzero(mask[q]) - q
        assert (seen.min(), seen.max()) == (lo[q], hi[q])
        assert len(seen) == hi[q] - lo[q] + 1          # a band: no holes
    counts = vk.keys_at(i, length, causal=causal, window=window, chunk=chunk)
    assert np.array_equal(counts, mask.sum(1))


def test_keys_seen_samples_chunks_beyond_the_limit():
    positions, back, ahead, sampled = vk.keys_seen(10_485_760, causal=True, chunk=8192, max_points=64)
    assert sampled and len(positions) <= 64
    starts = positions[back == 0]
    assert np.all(starts % 8192 == 0)
    ends = positions[back != 0]
    assert np.all(-back[back != 0] == ends - (ends // 8192) * 8192)


def test_query_temperature_curve_is_transformers_formula_at_every_step():
    mech = QueryTemperature(attn_scale=0.1, floor_scale=8192)
    (view,) = mech.views(10_485_760, None)
    expected = 1 + 0.1 * np.log(np.floor((view.positions + 1) / 8192) + 1)       # Llama4TextAttention
    assert np.allclose(view.factors, expected, rtol=1e-6)
    # a step curve: between two listed positions the factor does not change
    probe = np.arange(0, 40_000)
    dense = mech.factors(torch.from_numpy(probe)).double().numpy()
    shown = view.factors[np.searchsorted(view.positions, probe, side="right") - 1]
    assert np.allclose(dense, shown)


def test_sink_share_matches_the_softmax_with_the_sink_column():
    logits = torch.tensor([0.5, 3.0])
    sinks = Sinks(heads=2, logits=logits)
    layer = LayerPlan("decoder", 0, "sliding_attention", (AttentionPattern(window=8), sinks))
    (view,) = sinks.views(64, layer)
    for k, position in enumerate(view.positions[:20]):
        n = min(int(position) + 1, 8)
        row = torch.zeros(2, n)                                   # equal key logits (0)
        assert np.allclose(view.share[:, k], sinks.share(row).numpy(), atol=1e-6)
        assert view.keys[k] == n
    assert not view.illustrative
    (config_only,) = Sinks(heads=2).views(64, layer)
    assert config_only.illustrative and "illustrative" in config_only.caption


def test_wavelengths_of_a_scaled_layer():
    plan = preset_plan("models/gpt-oss-20b")
    (view,) = [v for v in lv.layer_views(plan.layer(1), 131072) if isinstance(v, vk.Wavelengths)]
    assert np.array_equal(view.inv_freq, plan.rope_inv_freq(131072, layer=1).numpy())
    base = 150000.0 ** (-np.arange(0, 64, 2) / 64)
    assert np.allclose(view.plain, base, rtol=1e-6)
    assert view.original == 4096 and view.rule == "yarn"
    assert view.attention_scaling == pytest.approx(0.1 * math.log(32) + 1)
    assert np.allclose(view.turns, 131071 * view.inv_freq / (2 * math.pi))


def test_alibi_view_is_the_bias_line_of_each_head():
    plan = preset_plan("alibi/bloom-560m")
    (curve,) = [v for v in lv.layer_views(plan.layer(0), 2048) if isinstance(v, BiasCurve)]
    slopes = plan.alibi_slopes().double().numpy()
    assert curve.offsets[0] == -2047 and curve.offsets[-1] == 0
    assert np.allclose(curve.bias, -slopes[:, None] * np.abs(curve.offsets)[None, :], rtol=1e-6)


def test_deberta_view_reads_transformers_buckets():
    plan = preset_plan("models/deberta-v3-base")
    (curve,) = [v for v in lv.layer_views(plan.layer(0), 512) if isinstance(v, BiasCurve)]
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    rel = build_relative_position(torch.zeros(1, 1, 1), torch.zeros(1, 512, 1), bucket_size=256, max_position=512)
    rel = rel.reshape(-1, 512)[0].numpy()                             # query 0: i − j for j = 0..511
    at = {int(o): float(b) for o, b in zip(curve.offsets, curve.bias[0])}
    for j in range(0, 512, 7):
        assert at[j] == -rel[j]           # the curve reads bucketed j − i; transformers holds i − j


def test_strip_rows_and_cells_follow_the_plan():
    plan = preset_plan("models/llama-4-scout")
    strip = lv.strip(plan)
    assert strip.layers == 48 and strip.rows == ("position", "keys seen", "softmax")
    nope = {c.layer for c in strip.cells if c.row == "position" and c.legend == "none"}
    assert nope == {3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47}
    assert {c.layer for c in strip.cells if c.row == "softmax"} == nope
    figure = strip_figure(strip, selected=3)
    bars = [t for t in figure.data if t.type == "bar"]
    assert sum(len(t.x) for t in bars) == len(strip.cells)
    assert [(s.x0, s.x1, s.y1) for s in figure.layout.shapes] == [(2.5, 3.5, 3)]


def test_every_preset_reads_and_draws_at_both_ends_of_its_context():
    for key, entry in model_presets().items():
        plan = preset_plan(key)
        own = lv.context_length(plan, preset_config(entry)) or 4096
        for stack in plan.stack_names:
            for first, _, layer in plan.runs(stack):
                for length in (lv.MIN_LENGTH, own):
                    for view in lv.layer_views(layer, length):
                        figure = view_figure(view)
                        assert figure is None or figure.data, (key, first, type(view).__name__)


def test_view_kinds_match_the_tour_links():
    from relviz.app.link_schema import YOUR_MODEL_VIEWS

    assert tuple(lv.VIEW_KINDS) == YOUR_MODEL_VIEWS


def test_presets_derived_fields_are_what_transformers_builds():
    pytest.importorskip("transformers")
    from transformers import CONFIG_MAPPING

    for entry in load_presets()["models"]:
        config = entry["config"]
        built = CONFIG_MAPPING[config["model_type"]](**{k: v for k, v in config.items() if k != "model_type"})
        made = built.to_dict()
        made = made.get("text_config", made) if "text_config" in made and "layer_types" not in made else made
        for field, value in entry.get("derived", {}).items():
            assert made[field] == value, (entry["id"], field)
        assert set(entry.get("unconfirmed", [])) <= set(config) | {"no_rope_layer_interval"}, entry["id"]


def test_show_has_a_function_per_layer_view():
    import relviz.show as show

    strip = show.layer_strip("models/llama-4-scout", layer=3)
    assert sum(len(t.x) for t in strip.data) == 48 * 3 - 36          # softmax row on the 12 NoPE layers only
    assert show.layer_wavelengths("models/gemma-3-27b", 5).data
    assert show.layer_pattern("models/llama-4-scout", 0, length=100_000).data
    assert show.layer_bias("alibi/bloom-560m").data
    assert show.layer_temperature("models/llama-4-scout", 3).data
    assert show.layer_sinks("models/gpt-oss-20b", 0).data
    assert len(show.atlas()) == 2 and show.layer_views("models/gpt-oss-20b", 1)
    with pytest.raises(ValueError, match="no temperature view"):
        show.layer_temperature("models/gemma-3-27b", 0)


def test_layer_lines_say_where_a_layer_is_drawn():
    plan = preset_plan("models/llama-4-scout")
    strip = lv.strip(plan)
    lines = lv.runs_list(strip).split("\n")
    assert len(lines) == len(strip.runs)
    assert lines[0] == f"- layers 0–2: {strip.runs[0][2]}" and lines[1] == f"- layer 3: {strip.runs[1][2]}"
    layer = plan.layer(3)
    line = lv.layer_caption(layer, 1024, 10_485_760, names_length=True)
    assert line.startswith("**decoder layer 3** · full_attention · at 1,024 positions (its own context: 10,485,760): ")
    assert line.endswith(layer.describe().split(": ", 1)[-1])
    assert "(the model's own context)" in lv.layer_caption(layer, 4096, 4096, names_length=True)
    t5 = preset_plan("t5/t5-small").layer(0, stack="encoder")
    assert "at 4,096 positions (its config.json names no context length): " in \
        lv.layer_caption(t5, 4096, 4096, names_length=False)
    assert lv.side_heading("T5", t5, 512) == "**T5** · layer 0 at 512 positions"
    vision = preset_plan("models/qwen2.5-vl-7b").layer(0, stack="vision")
    assert lv.extent(vision) in lv.layer_caption(vision, 512, 128000, names_length=True)
    assert "positions" not in lv.layer_caption(vision, 512, 128000, names_length=True).split(": ", 1)[0]
    assert lv.side_heading("VL", vision, 512) == "**VL** · layer 0 (patches of an image)"


def test_the_outlined_bars_are_the_chosen_layers_cells():
    """Your model outlines its chosen layer by CSS over a strip figure that stays the same (selected_bars,
    display.outline_css): the bars named are exactly that layer's cells, one per row, and the legend cannot hide a
    trace (a hidden trace's bars leave the drawing and every later trace's place shifts)."""
    from relviz.app.display import outline_css
    from relviz.figures.layers import selected_bars

    plan = preset_plan("models/llama-4-scout")
    strip = lv.strip(plan)
    spec = strip_figure(strip).to_dict()
    for layer in range(strip.layers):
        bars = selected_bars(spec, layer)
        assert [spec["data"][t]["x"][p] for t, p in bars] == [layer] * len(bars)
        assert len(bars) == sum(c.layer == layer for c in strip.cells) == len({t for t, _ in bars})
    assert len(selected_bars(spec, 3)) == 3 and selected_bars(spec, strip.layers) == []
    assert spec["layout"]["legend"]["itemclick"] is False and spec["layout"]["legend"]["itemdoubleclick"] is False
    css = outline_css("ym_strip", [(0, 2), (3, 0)])
    assert css.count(".st-key-ym_strip .barlayer > .trace:nth-child(") == 2
    assert ".trace:nth-child(1) .point:nth-child(3) path" in css and ".trace:nth-child(4) .point:nth-child(1) path" in css
    assert outline_css("ym_strip", []) == ""



def test_no_view_title_repeats_a_word():
    """Every preset's layers (one per distinct set of mechanisms): a view's title never repeats a word ("Softmax
    scale scale ×1.87" was DeepSeek-V3.2's softmax note: its prefix and the mechanism's label both said "scale")."""
    import re

    doubled = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)
    titles, done = set(), set()
    for key in model_presets():
        plan = preset_plan(key)
        for stack in plan.stack_names:
            for layer in plan.plans[stack]:
                if layer.mechanisms in done:
                    continue
                done.add(layer.mechanisms)
                for view in lv.layer_views(layer, 64):
                    title = getattr(view, "title", "") or ""
                    assert not doubled.search(title), (key, layer.index, title)
                    titles.add(title)
    assert any(t.startswith("Softmax scale ×") for t in titles)


def test_llama4_temperature_caption_names_the_positions_the_factors_step_at():
    """Llama 4's NoPE query temperature, 1 + 0.1·ln(⌊(pos + 1)/8192⌋ + 1), first steps at position 8,191: the caption
    said "flat at 1 for the first 8,192 positions" (one too many)."""
    for floor_scale, first in ((8192.0, 8191), (100.5, 100), (1.0, 0)):
        mech = QueryTemperature(attn_scale=0.1, floor_scale=floor_scale)
        factors = mech.factors(torch.tensor([max(first - 1, 0), first])).tolist()
        assert factors[1] > 1.0 and (first == 0 or factors[0] == 1.0)
        caption = mech.views(4 * first + 16, None)[0].caption
        assert f"first step is at position {first:,} " in caption, caption
        assert (f"Flat at 1 for positions 0 to {first - 1:,};" in caption) == (first > 0)


def test_a_vector_table_legend_counts_layers_as_the_page_does():
    """shaw-shift on Your model: the strip counts layers 0 and 1, so the norms legend does too (it said "layer 1",
    "layer 2"); the Live attention page counts from 1 and keeps its legend."""
    from relviz.figures.layers import view_figure
    from relviz.inspection import parameter_views
    from relviz.schemes.view_kinds import VectorNorms
    from relviz.toy_plan import toy_plan
    from relviz.training import load_checkpoint

    model = load_checkpoint("shaw-shift").model
    norms, = [v for v in lv.layer_views(toy_plan(model, source="test").layer(1), 64) if isinstance(v, VectorNorms)]
    assert [t.name for t in view_figure(norms).data] == ["layer 0: ‖a^K‖", "layer 0: ‖a^V‖", "layer 1: ‖a^K‖",
                                                         "layer 1: ‖a^V‖"]
    live, = [v for v in parameter_views(model, length=64, train_length=64, layer=1) if isinstance(v, VectorNorms)]
    assert [t.name for t in view_figure(live).data][::2] == ["layer 1: ‖a^K‖", "layer 2: ‖a^K‖"]
