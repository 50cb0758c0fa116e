"""DeepSeek sparse attention (relviz.mechanisms.indexer): what relviz says a DSA layer runs, against transformers.

The indexer's rotation is transformers' own function's output, torch.equal; the keys each query attends are the
causal ones up to index_topk and exactly index_topk of them past it, chosen differently for other tokens; a table
that misreads any of it (the indexer's layout, index_topk, which layer's choice is reused) is refused by the
observer; a config with indexed_attention layers but no indexer in its family's entry is refused, never read as
plain attention."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from relviz.mechanisms.families import FAMILIES
from relviz.mechanisms.indexer import IndexedSelection, kept_per_query
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.view_kinds import KeysSeen
from relviz.model_plan import read_plan

V32 = {"model_type": "deepseek_v32", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2,
       "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "kv_lora_rank": 16, "q_lora_rank": 24,
       "index_topk": 2048, "index_n_heads": 4, "index_head_dim": 32, "rope_parameters": {"rope_theta": 10000.0,
       "rope_type": "default"}, "layer_types": ["indexed_attention"] * 4, "max_position_embeddings": 163840}


def test_a_dsa_plan_carries_the_real_index_topk_and_says_what_past_it_is_chosen_by():
    plan = read_plan(V32)
    selection = plan.layer(0).find(IndexedSelection)
    assert selection.topk == 2048 and selection.heads == 4 and selection.head_dim == 32
    assert (selection.rotation.rotary_dim, selection.rotation.rotary_offset, selection.rotation.layout) == (16, 0, "half")
    assert torch.equal(plan.attention_pattern(2048, layer=1), torch.ones(2048, 2048, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="past this layer's index_topk = 2,048.*by the tokens' content"):
        plan.attention_pattern(2049, layer=1)
    windowed = IndexedSelection(window=16, topk=20)                   # never more than 16 keys to choose from
    assert torch.equal(windowed.mask(100), AttentionPattern(window=16).mask(100))
    words = plan.layer(0).describe()
    assert "not by distance" in words and "index_topk = 2,048" in words and "first 16 dims" in words
    data = json.loads(json.dumps(plan.to_json()))
    assert "2048" in json.dumps(data) and "indexer_rotation" in json.dumps(data)


def test_the_view_counts_a_window_of_index_topk_keys_over_the_causal_band():
    selection = read_plan({**V32, "index_topk": 100}).layer(2).find(IndexedSelection)
    (view,) = selection.views(1000, None)
    assert isinstance(view, KeysSeen) and view.cap == 100
    i = torch.arange(1000)
    expected = torch.minimum(i + 1, torch.tensor(100))
    assert torch.equal(torch.from_numpy(view.count), expected[view.positions])      # the kink at 99 is a breakpoint
    assert 99 in view.positions and (view.back == -view.positions).all()           # any earlier key may be chosen
    assert "chosen by a lightning indexer" in view.caption and "depends on the tokens" in view.caption
    from relviz.figures.layers import view_figure

    figure = view_figure(view)
    assert [shape["y0"] for shape in figure.layout.shapes] == [100]          # the dashed line: at most 100 keys
    assert max(figure.data[0].y) == 100
    (short,) = selection.views(64, None)
    assert "exactly" in short.caption and torch.equal(torch.from_numpy(short.count), torch.arange(64)[short.positions] + 1)


def test_agrees_holds_for_what_transformers_builds_and_nothing_else():
    selection = IndexedSelection(topk=3)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    assert torch.equal(kept_per_query(causal, 3), torch.tensor([1, 2, 3, 3, 3, 3]))
    chosen = causal.clone()
    chosen[3, 1] = chosen[4, 0] = chosen[4, 2] = chosen[5, 0] = chosen[5, 1] = chosen[5, 4] = False   # 3 of them
    assert selection.agrees(chosen) is None
    assert "query 3 sees 4 keys" in selection.agrees(causal)                          # nothing chosen
    ahead = chosen.clone()
    ahead[0, 1] = True
    assert "outside the causal pattern" in selection.agrees(ahead)
    assert selection.chosen_by_content({6: chosen, 7: torch.nn.functional.pad(chosen, (0, 1, 0, 1))}) is False


def test_the_indexers_rotation_is_transformers_own_bit_for_bit():
    """DeepSeek-V3.2's indexer: apply_rotary_pos_emb (half-split) on its first qk_rope_head_dim dims; GLM-MoE-DSA's:
    apply_rotary_pos_emb_interleave; HY-V4's: half-split on its last dims. cos/sin from the family's rotary module."""
    pytest.importorskip("transformers")
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as v32
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as glm
    from transformers import DeepseekV32Config

    hf = DeepseekV32Config(**{k: v for k, v in V32.items() if k != "model_type"})
    length = 40
    cos, sin = v32.DeepseekV32RotaryEmbedding(hf)(torch.zeros(1, length, 64), torch.arange(length)[None])
    torch.manual_seed(0)
    q = torch.randn(1, length, 4, 32)                                                  # [B, S, H, index_head_dim]
    for model_type, apply, end in (("deepseek_v32", v32.apply_rotary_pos_emb, False),
                                   ("glm_moe_dsa", glm.apply_rotary_pos_emb_interleave, False),
                                   ("hy_v4", v32.apply_rotary_pos_emb, True)):
        rotation = read_plan({**V32, "model_type": model_type}).layer(0).find(IndexedSelection).rotation
        part, rest = (q[..., 16:], q[..., :16]) if end else (q[..., :16], q[..., 16:])
        theirs, _ = apply(part, part, cos, sin, unsqueeze_dim=2)
        ours = rotation.rotate(q.transpose(1, 2), torch.arange(length)).transpose(1, 2)   # [B, H, S, D] in and out
        turned, kept = (ours[..., 16:], ours[..., :16]) if end else (ours[..., :16], ours[..., 16:])
        assert torch.equal(turned, theirs), model_type
        assert torch.equal(kept, rest), model_type                                     # the other dims untouched


def test_a_shared_layer_reuses_the_last_full_layers_choice():
    plan = read_plan({**V32, "model_type": "hy_v4", "num_hidden_layers": 7, "layer_types": ["indexed_attention"] * 7})
    sources = [plan.layer(k).find(IndexedSelection).source for k in range(7)]
    assert sources == [None, None, 1, 1, 1, None, 5]              # HY-V4's config class: layer 0, then 1, 5, 9 ...
    assert "reuses layer 1's choice" in plan.layer(3).describe()
    assert plan.layer(3).find(IndexedSelection).label() == "causal, top 2,048 by layer 1's indexer"
    assert plan.layer(5).find(IndexedSelection).label() == "causal, top 2,048 by indexer"
    given = read_plan({**V32, "model_type": "glm_moe_dsa", "indexer_types": ["full", "shared", "full", "shared"]})
    assert [given.layer(k).find(IndexedSelection).source for k in range(4)] == [None, 0, None, 2]
    with pytest.raises(ValueError, match=r"indexer_types\[0\] is 'shared', but no layer before it"):
        read_plan({**V32, "model_type": "glm_moe_dsa", "indexer_types": ["shared", "full", "full", "full"]})
    with pytest.raises(ValueError, match=r"indexer_types\[1\] must be 'full' or 'shared'"):
        read_plan({**V32, "model_type": "glm_moe_dsa", "indexer_types": ["full", "half", "full", "full"]})


def test_indexed_layers_outside_an_indexer_entry_are_refused_never_read_as_attention():
    config = {**V32, "model_type": "llama", "num_attention_heads": 2, "head_dim": 16,
              "layer_types": ["full_attention", "indexed_attention", "full_attention", "full_attention"]}
    with pytest.raises(ValueError, match=r"layer_types\[1\] is 'indexed_attention': DeepSeek sparse attention.*"
                                         r"refused rather than read as plain attention"):
        read_plan(config)


@pytest.fixture
def table_edit():
    """Edit a family's entry for one test (the observer verifies the edited entry afresh), then restore it."""
    saved = {}

    def edit(model_type, change):
        saved.setdefault(model_type, copy.deepcopy(FAMILIES[model_type]))
        entry = copy.deepcopy(FAMILIES[model_type])
        change(entry["mechanisms"]["indexer"])
        FAMILIES[model_type] = entry
    yield edit
    FAMILIES.update(saved)


@pytest.mark.parametrize("model_type, change, words", [
    ("deepseek_v32", lambda e: e["rotation"].update(layout="deinterleave"), "the indexer's"),
    ("hy_v4", lambda e: e.update(shared_field="no_such_field", shared_default={"freq": 1}), "relviz reads an "
                                                                                            "indexer rotated"),
    ("hy_v4", lambda e: e.update(shared_field="no_such_field", shared_default={"freq": 2}), "layer 3: relviz reads"),
])
def test_a_misread_indexer_is_refused_by_the_observer(table_edit, model_type, change, words):
    """(Where the rotated dims sit in the indexer's head, HY-V4's last ones, is read from transformers' code: the
    observer sees only the rotated slice, and the scores do not depend on which dims hold it.)"""
    pytest.importorskip("transformers")
    from relviz.zoo import sweep

    table_edit(model_type, change)
    (outcome,) = sweep([model_type])
    assert not outcome.exact and words in outcome.reason, outcome.reason


def test_the_observer_sees_the_indexer_choose_past_a_shrunk_index_topk():
    """The probe cuts index_topk to 8 (the real value stays 2,048 in the plan): at 12 and 20 positions each query
    past the 8th attended exactly 8 keys, and other tokens at the same positions chose other keys."""
    pytest.importorskip("transformers")
    from relviz.observe import observe, shrink, verified_plan
    from relviz.zoo import tiny_config

    config = tiny_config("deepseek_v32")
    torch.manual_seed(0)
    seen = observe(shrink(config))
    layer = seen.layers[1]
    assert [m.sum(-1).tolist() for m in layer.masks.values()] == [[1, 2, 3, 4, 5, 6, 7] + [8] * 5,
                                                                  [1, 2, 3, 4, 5, 6, 7] + [8] * 13]
    assert layer.indexer_rotations and layer.rotations
    assert IndexedSelection(topk=8).chosen_by_content(layer.masks) is True
    plan = verified_plan(config)
    assert plan.layer(0).find(IndexedSelection).topk == config["index_topk"] == 2048
    assert any("index_topk cut to 8 in the probe" in note and "other tokens at the same positions chose other keys"
               in note for note in plan.notes)


def test_a_published_config_without_layer_types_is_read_as_its_config_class_derives_it():
    """DeepSeek-V3.2-Exp's config.json names no layer_types: DeepseekV32Config makes every layer indexed_attention (read
    as plain causal attention before, on a model directory). dots3's class derives its layers from fields relviz does
    not read: a config without them is refused, naming the field."""
    published = {k: v for k, v in V32.items() if k != "layer_types"}
    plan = read_plan(published)
    assert all(p.layer_type == "indexed_attention" and p.find(IndexedSelection) for p in plan.all_layers())
    dots3 = {**V32, "model_type": "dots3_note_text", "head_dim": 64, "rope_parameters": {"rope_theta": 8e7}}
    dots3.pop("layer_types")
    with pytest.raises(ValueError, match="config field layer_types is required for this family"):
        read_plan(dots3)


def test_deepseek_v4_runs_under_the_observer_and_is_refused_naming_what_it_runs():
    """Its compressors rotate pooled keys (one per 4 or 128 tokens), with no axis of the probe's positions: the
    observer keeps them apart from the attention's rotation (they run inside a Compressor module), so V4 is no longer
    refused for a rotation the observer could not read but for what its layer types run."""
    pytest.importorskip("transformers")
    from relviz.zoo import sweep

    (outcome,) = sweep(["deepseek_v4"])
    assert not outcome.exact and outcome.group == "relviz cannot read its config", outcome.reason
    assert "compressed keys, one per compress_rates'" in outcome.reason


def test_the_sink_share_counts_the_keys_the_indexer_keeps():
    """HY-V4 has sinks on its DSA layers: past index_topk keys a query attends index_topk of them, so the sink's share
    stops fading there."""
    from relviz.mechanisms.sinks import Sinks

    layer = read_plan({**V32, "model_type": "hy_v4", "index_topk": 100}).layer(0)
    (view,) = layer.find(Sinks).views(1000, layer)
    assert (view.keys == np.minimum(view.positions + 1, 100)).all() and view.keys.max() == 100
    assert "up to the 100 the indexer keeps" in view.caption


@pytest.mark.parametrize("model_type, fields", [
    ("glm_moe_dsa", {}), ("glm_moe_dsa", {"index_topk_freq": 4, "index_skip_topk_offset": 3}),     # GLM-5's
    ("glm_moe_dsa", {"index_topk_pattern": "FFSFSSFSFSSF"}), ("hy_v4", {})])
def test_which_layers_share_is_what_the_config_class_derives(model_type, fields):
    """A config without indexer_types: relviz derives it as transformers' config class does (GLM-MoE-DSA from
    index_topk_freq / index_skip_topk_offset or an F/S pattern, HY-V4 every 4th from layer 1, and layer 0)."""
    transformers = pytest.importorskip("transformers")
    config = {**V32, "model_type": model_type, "num_hidden_layers": 12, "layer_types": ["indexed_attention"] * 12,
              **fields}
    made = transformers.CONFIG_MAPPING[model_type](**{k: v for k, v in config.items() if k != "model_type"})
    plan = read_plan(config)
    ours = ["full" if plan.layer(k).find(IndexedSelection).source is None else "shared" for k in range(12)]
    assert ours == list(made.indexer_types)
