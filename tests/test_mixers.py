"""Layers that do not attend, and never a silent claim: the plan's token mixer per layer against transformers'
config classes, the refusals, and the marks on a reading no one verified."""
from __future__ import annotations

import json

import pytest
import torch

from relviz import layer_strip as lv
from relviz.figures.layers import strip_figure
from relviz.hf import from_config
from relviz.mechanisms.mixer import LAYER_TYPES, MIXER_KINDS, TokenMixer
from relviz.mechanisms.rotation import Rotation
from relviz.model_plan import UNVERIFIED

#: hybrid families as their config classes build them: (fields, the mixer kind of transformers' linear_attention)
HYBRIDS = {
    "qwen3_next": ({"num_hidden_layers": 8}, "linear_attention"),
    "bamba": ({"num_hidden_layers": 6, "attn_layer_indices": [2, 5]}, "state_space"),
    "jamba": ({"num_hidden_layers": 10, "attn_layer_period": 4, "attn_layer_offset": 1}, "state_space"),
    "falcon_h1": ({"num_hidden_layers": 3}, "state_space"),
    "recurrent_gemma": ({"num_hidden_layers": 5}, "recurrence"),
    "lfm2": ({"num_hidden_layers": 6, "full_attn_idxs": [1, 4]}, None),
    "granitemoehybrid": ({"num_hidden_layers": 4, "layer_types": ["linear_attention", "full_attention",
                                                                  "linear_attention", "full_attention"]},
                         "state_space"),
    "minimax": ({"num_hidden_layers": 4}, "linear_attention"),
}


@pytest.mark.parametrize("model_type", sorted(HYBRIDS))
def test_mixer_per_layer_is_what_the_config_class_builds(model_type):
    transformers = pytest.importorskip("transformers")
    fields, linear = HYBRIDS[model_type]
    reference = transformers.CONFIG_MAPPING[model_type](**fields)
    types = list(reference.layer_types)              # transformers' convention (a property on some classes)
    plan = from_config({**reference.to_dict(), "model_type": model_type})       # what its config.json holds
    assert [p.layer_type for p in plan.all_layers()] == types
    for k, p in enumerate(plan.all_layers()):
        expected = {"full_attention": ("softmax_attention",), "sliding_attention": ("softmax_attention",),
                    "linear_attention": (linear,), "conv": ("short_convolution",),
                    "hybrid": ("softmax_attention", linear)}[types[k]]
        assert plan.mixer(layer=k).kinds == expected, (model_type, k)
        assert (p.find(Rotation) is None) or plan.mixer(layer=k).attends
    assert any(not p.mixer.attends for p in plan.all_layers()) or model_type == "falcon_h1"


def test_attention_pattern_on_a_layer_that_does_not_attend_names_its_mixer():
    # rope_parameters written out as Qwen3NextConfig fills them: left out, relviz refuses the config
    plan = from_config({"model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 64,
                        "num_attention_heads": 4, "head_dim": 16, "max_position_embeddings": 64,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.25}})
    assert plan.attention_pattern(8, layer=3).shape == (8, 8)
    assert plan.rope_inv_freq(layer=0) is None and plan.rope_inv_freq(layer=3) is not None
    for call in (lambda: plan.attention_pattern(8, layer=0),
                 lambda: plan.rotate(torch.zeros(1, 8, 16), torch.arange(8), layer=1)):
        try:
            call()
        except ValueError as error:
            assert "does not attend" in str(error) and "linear attention" in str(error)
        else:
            raise AssertionError("a layer without attention answered as if it attended")
    views = lv.layer_views(plan.layer(0), 64)
    assert len(views) == 1 and views[0].title == "Token mixer: linear attention" and "no attention on this layer" in views[0].text.lower()
    assert "delta rule" in views[0].text


@pytest.mark.parametrize("value", ["compressed_sparse_attention", "hybrid_sliding", "Full_Attention"])
def test_an_unknown_layer_type_is_refused_by_name_never_read_as_attention(value):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
              "layer_types": ["full_attention", value]}
    # (DeepSeek-V4's compressed types: known, refused with what transformers runs there)
    with pytest.raises(ValueError, match=rf"layer_types\[1\] is '{value}'(: a layer type relviz does not read|, a "
                                         r"layer type relviz refuses: each query attends)"):
        from_config(config)


def test_every_listed_layer_type_maps_to_known_kinds():
    for kinds in LAYER_TYPES.values():
        assert all(k is None or k in MIXER_KINDS for k in kinds)
    with pytest.raises(ValueError, match="linear_kind"):
        TokenMixer.read(type("Ctx", (), {"config": None, "index": 0, "layer_type": "mamba"})(),
                        {"linear_kind": "softmax_attention"})


def test_a_model_type_outside_the_table_is_marked_unverified_everywhere():
    config = {"model_type": "olmo2", "num_hidden_layers": 3, "hidden_size": 32, "num_attention_heads": 2,
              "rope_theta": 10000.0, "max_position_embeddings": 64}
    plan = from_config(config)
    assert not plan.in_family_table and all(not p.verified for p in plan.all_layers())
    data = json.loads(json.dumps(plan.to_json()))
    assert all(layer["read_from"] == UNVERIFIED for layer in data["layers"]["decoder"])
    assert "rope_theta" in plan.notes[0] and UNVERIFIED in plan.notes[0]
    strip = lv.strip(plan)
    assert UNVERIFIED in strip.caveat and all(UNVERIFIED in c.describe for c in strip.cells)
    assert UNVERIFIED in strip_figure(strip).layout.title.text
    assert UNVERIFIED in plan.layer(1).describe()
    table = from_config({**config, "model_type": "llama"})
    assert all(p.verified for p in table.all_layers()) and not lv.strip(table).caveat


@pytest.mark.parametrize("field, value", [("attn_layer_indices", [1]), ("block_types", ["recurrent", "attention"]),
                                          ("full_attention_interval", 2), ("mamba_d_state", 16)])
def test_a_hybrid_outside_the_table_is_refused_not_read_as_all_attention(field, value):
    config = {"model_type": "some_new_hybrid", "num_hidden_layers": 3, "hidden_size": 32, "num_attention_heads": 2,
              "rope_theta": 10000.0, field: value}
    with pytest.raises(ValueError, match=rf"config field {field} says which layers attend"):
        from_config(config)


def test_the_strip_draws_layers_that_do_not_attend_in_their_own_colour_with_words():
    plan = from_config({"model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 32, "num_attention_heads": 2})
    strip = lv.strip(plan)
    assert strip.rows[0] == "token mixer"
    mixers = {c.layer: c for c in strip.cells if c.row == "token mixer"}
    assert mixers[4].legend == "mixer" and mixers[0].legend == "no_attention"
    assert mixers[0].label == "state-space (Mamba), no attention"
    assert "order reaches it through the selective scan" in mixers[0].describe
    assert {c.layer for c in strip.cells if c.row == "keys seen"} == {4}
    colours = {t.name: t.marker.color for t in strip_figure(strip).data}
    assert colours["token mixer: state-space (Mamba), no attention"] != colours["token mixer: softmax attention"]
    assert plan.to_json()["layers"]["decoder"][0]["mixer"] == ["state_space"]


def test_to_json_gives_each_layers_settings_with_gemmas_query_scalar():
    """inspect --json prints to_json: θ and window per layer type, and query_pre_attn_scalar on every layer."""
    plan = from_config({"model_type": "gemma3_text", "num_hidden_layers": 6, "hidden_size": 64, "head_dim": 16,
                        "num_attention_heads": 4, "sliding_window": 512, "query_pre_attn_scalar": 144,
                        "rope_theta": 1e6, "rope_local_base_freq": 1e4})
    layers = json.loads(json.dumps(plan.to_json()))["layers"]["decoder"]
    settings = [{k: v for m in layer["mechanisms"] for k, v in m.items()} for layer in layers]
    assert [s["rope_theta"] for s in settings] == [1e4] * 5 + [1e6]
    assert [s.get("window") for s in settings] == [512] * 5 + [None]
    assert all(s["query_pre_attn_scalar"] == 144 and s["softmax_scale"] == 144 ** -0.5 for s in settings)
