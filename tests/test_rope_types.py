"""Every RoPE rule transformers 5.23 has, read exactly: the proportional rule (Gemma 4, LFM3), Hunyuan's NTK-alpha,
Mistral's llama_4_scaling_beta query scale, per-layer nesting (rope_parameters by layer type, per_layer_config),
each against transformers' own function (torch.equal) or its tiny model through the observer."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from relviz.mechanisms.rotation import Rotation  # noqa: E402
from relviz.observe import verified_plan  # noqa: E402
from relviz.model_plan import read_plan  # noqa: E402
from relviz.rope.config import ROPE_TYPES, RopeConfig, RopeScaling  # noqa: E402
from relviz.rope.math import ROPE_RULES, llama4_query_scale, rope_parameters  # noqa: E402
from relviz.zoo import tiny_config  # noqa: E402


def test_every_rule_transformers_registers_has_one_in_relviz():
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} <= set(ROPE_RULES) == set(ROPE_TYPES)


@pytest.mark.parametrize("head_dim, partial, base, factor", [(512, 0.25, 1e6, None), (128, 0.5, 1e6, 2.0),
                                                           (256, 1.0, 10000.0, None), (96, 0.3, 5e5, 4.0)])
def test_proportional_inv_freq_equals_transformers(head_dim, partial, base, factor):
    from transformers import LlamaConfig

    params = {"rope_type": "proportional", "rope_theta": base, "partial_rotary_factor": partial,
              **({"factor": factor} if factor else {})}
    theirs, their_scale = ROPE_INIT_FUNCTIONS["proportional"](
        LlamaConfig(head_dim=head_dim, hidden_size=64, num_attention_heads=4, rope_parameters=params), "cpu")
    rope = RopeConfig(head_dim=head_dim, base=base, partial_rotary_factor=partial,
                      scaling=RopeScaling("proportional", factor=factor))
    ours, our_scale = rope_parameters(rope, device="cpu")
    assert torch.equal(ours, theirs) and our_scale == their_scale == 1.0
    assert rope.rotary_dim == head_dim
    assert int(ours.count_nonzero()) == rope.turning_pairs == int(partial * head_dim // 2)


def test_ntk_alpha_equals_hunyuans_rotary_module():
    from transformers import HunYuanDenseV1Config
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding

    config = HunYuanDenseV1Config(head_dim=128, rope_parameters={"rope_type": "dynamic", "alpha": 1000.0,
                                                                 "rope_theta": 10000.0, "factor": 1.0})
    module = HunYuanDenseV1RotaryEmbedding(config)
    assert module.rope_type == "ntk_alpha"
    ours, scale = rope_parameters(RopeConfig(head_dim=128, scaling=RopeScaling("ntk_alpha", alpha=1000.0)), device="cpu")
    assert torch.equal(ours, module.inv_freq) and scale == module.attention_scaling == 1.0


def test_llama4_query_scale_equals_mistrals():
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    positions = torch.cat([torch.arange(0, 40), torch.arange(16380, 16390), torch.arange(0, 1 << 20, 4093)])
    theirs = get_llama_4_attn_scale(positions[None], 0.1, 16384)[0, 0, :, 0]
    ours = llama4_query_scale(positions, 0.1, 16384)
    assert torch.equal(ours, theirs)
    assert torch.equal(ours[:40], torch.ones(40)) and float(ours.max()) > 1.3


def _hunyuan_alpha() -> dict:
    config = {**tiny_config("hunyuan_v1_dense"), "head_dim": 128}   # (its NTK-alpha rule reads head_dim: null fails)
    config["rope_parameters"] = {"type": "dynamic", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32, "mscale": 1.0,
                                 "rope_theta": 10000.0}      # as Hunyuan's published configs carry it
    return config


def _hunyuan_alpha_named() -> dict:
    return {**_hunyuan_alpha(), "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 1000.0, "rope_theta": 1e4}}


def _olmo3_flat_yarn() -> dict:
    config = {k: v for k, v in tiny_config("olmo3").items() if k != "rope_parameters"}
    return {**config, "rope_theta": 500000.0, "max_position_embeddings": 65536, "rope_scaling": {
        "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192, "attention_factor": 1.2}}


@pytest.mark.parametrize("make", [lambda: tiny_config("gemma4_text"), lambda: tiny_config("lfm3"),
                                  lambda: tiny_config("ministral3"), lambda: tiny_config("mistral4"), _hunyuan_alpha,
                                  _hunyuan_alpha_named, _olmo3_flat_yarn],
                         ids=["gemma4", "lfm3", "ministral3", "mistral4", "hunyuan-alpha", "hunyuan-ntk_alpha",
                              "olmo3-yarn"])
def test_the_observer_finds_each_family_exact(make):
    """Built tiny by transformers and run: every layer's rotation torch.equal, pairs, inv_freq, mask and scale."""
    plan = verified_plan(make())
    assert all(p.verified for p in plan.all_layers())


def test_gemma4_full_layers_are_proportional_and_wider():
    plan = read_plan(tiny_config("gemma4_text"))
    full = plan.layer(5)
    assert full.layer_type == "full_attention" and full.find(Rotation).rope.turning_pairs == 64
    assert plan.config["head_dim"] == {"sliding_attention": 256, "full_attention": 512}
    assert plan.config["rope_type"] == {"sliding_attention": "default", "full_attention": "proportional"}
    assert plan.config["softmax_scale"] == 1.0
    from relviz.layer_strip import layer_views

    wavelengths = layer_views(full, 4096)[0]
    assert len(wavelengths.inv_freq) == 64 and "scaling (from" not in wavelengths.caption   # θ = 0: no wavelength


def test_the_summary_never_shows_one_layers_value_as_the_models():
    plan = read_plan(_olmo3_flat_yarn())
    assert plan.config["rope_type"] == {"sliding_attention": "default", "full_attention": "yarn"}
    assert plan.config["rope_theta"] == 500000.0       # every layer agrees: one value
    config = {**tiny_config("llama"), "num_hidden_layers": 3,
              "per_layer_config": {"01": {"head_dim": 64}}}        # transformers writes the keys zero-padded
    assert read_plan(config).config["head_dim"] == {"decoder": {"per_layer": [128, 64, 128]}}


@pytest.mark.parametrize("change, message", [
    ({"per_layer_config": {"1": 64}}, "per_layer_config.1 must be a JSON object"),
    ({"per_layer_config": [1]}, "per_layer_config must map layer indices"),
    ({"rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.001}},
     "partial_rotary_factor"),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "alpha": 10.0}}, "alpha belongs to"),
    ({"rope_parameters": {"rope_type": "ntk_alpha", "alpha": 10.0}}, "'ntk_alpha': a rule only Hunyuan's rotary"),
])
def test_bad_rope_settings_are_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        read_plan({**tiny_config("llama"), **change})


def test_mistrals_query_scale_needs_its_beta():
    config = tiny_config("ministral3")
    config["rope_parameters"] = {k: v for k, v in config["rope_parameters"].items() if k != "llama_4_scaling_beta"}
    with pytest.raises(ValueError, match="rope_parameters.llama_4_scaling_beta is required"):
        read_plan(config)


@pytest.mark.parametrize("model_type, quoted", [("ministral3", "Field 'head_dim' expected int"),
                                                ("ministral", "unsupported operand type")])
def test_a_null_head_dim_transformers_cannot_build_is_refused_quoting_it(model_type, quoted):
    """Shrinking fills a null head_dim with what a class would derive: never where the class itself keeps it null."""
    with pytest.raises(ValueError, match=f"(?s)transformers .* could not build a '{model_type}' model.*{quoted}"):
        verified_plan({**tiny_config(model_type), "head_dim": None})


def test_exaones_lllg_pattern_reads_three_sliding_rope_layers_to_one_global_nope_layer():
    from relviz.mechanisms.none import NoPosition
    from relviz.model_presets import preset_plan

    plan = preset_plan("models/exaone-4.0-32b")
    layers = plan.all_layers()
    assert [p.layer_type for p in layers[:4]] == ["sliding_attention"] * 3 + ["full_attention"]
    assert sum(p.find(NoPosition) is not None for p in layers) == 16 == sum(p.find(Rotation) is None for p in layers)
    config = {k: v for k, v in tiny_config("exaone4").items() if k != "layer_types"}
    derived = read_plan({**config, "num_hidden_layers": 6, "sliding_window_pattern": "LLLG"})   # no layer_types
    assert [p.layer_type[0] for p in derived.all_layers()] == list("sssfsf")        # L L L G L, the last global
    with pytest.raises(ValueError, match="sliding_window_pattern must be a non-empty string of L, G; got 'LLX'"):
        read_plan({**config, "sliding_window_pattern": "LLX"})


def test_gemma4_and_falcon_h1_presets():
    from relviz.model_presets import preset_plan

    gemma = preset_plan("models/gemma-4-e2b")
    full = [p.index for p in gemma.all_layers() if p.layer_type == "full_attention"]
    assert full == [5, 11, 17, 23, 29, 34]                      # the last layer forced full, as Gemma4TextConfig does
    assert all(gemma.layer(i).find(Rotation).rope.proportional for i in full)
    falcon = preset_plan("models/falcon-h1-7b")
    assert all(p.mixer.kinds == ("softmax_attention", "state_space") and p.find(Rotation) for p in falcon.all_layers())
    assert "RoPE θ 1e+11" in falcon.layer(0).label()                # (was "100000M")


@pytest.mark.parametrize("types, words", [
    (None, "'heavily_compressed_attention', a layer type relviz refuses: each query attends to its last sliding_window "
           "keys and to compressed keys, one per compress_rates' 128 tokens"),
    (["compressed_sparse_attention"] * 8, "a learned indexer keeps the top index_topk"),
    (["sliding_attention"] * 8, "refuses in this family: its sliding layers use one tensor as key and value")])
def test_deepseek_v4s_layer_types_are_refused_by_name_with_what_they_run(types, words):
    config = tiny_config("deepseek_v4")
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        read_plan({**config, **({"layer_types": types} if types else {})})


@pytest.mark.parametrize("layout", ["half", "interleaved", "complex", "deinterleave"])
def test_a_backwards_rotation_turns_each_pair_by_minus_theta(layout):
    """In every layout, the rotation by −θ·p is the forward one at −p (to float rounding: sin(−x) and −sin(x) may
    round apart), and it keeps each vector's length."""
    rope = RopeConfig(head_dim=16, base=100.0)
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(0))
    back = Rotation(rope, layout=layout, backwards=True).rotate(x, torch.arange(9))
    forward = Rotation(rope, layout=layout)
    assert torch.allclose(back, forward.turn(x, forward._angles(-torch.arange(9)[None], 9)), atol=1e-6)
    assert not torch.allclose(back, forward.rotate(x, torch.arange(9)), atol=1e-3)
    assert torch.allclose(back.norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_nanochats_rotation_is_relvizs_backwards_rotation_bit_for_bit():
    """NanoChat's rotate_half is cat(x2, −x1): each pair turns by −θ·p. The family table says so (rotation option
    ``backwards``), and relviz's rotation equals transformers' apply_rotary_pos_emb with NanoChat's rotary module."""
    from transformers import NanoChatConfig
    from transformers.models.nanochat import modeling_nanochat as nanochat

    config = NanoChatConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=2)
    module = nanochat.NanoChatRotaryEmbedding(config)
    q = torch.randn(1, 2, 30, 32, generator=torch.Generator().manual_seed(1))
    cos, sin = module(q, torch.arange(30)[None])
    theirs, _ = nanochat.apply_rotary_pos_emb(q, q, cos, sin)
    plan = read_plan(tiny_config("nanochat") | {"hidden_size": 64, "num_attention_heads": 2,
                                                 "num_key_value_heads": 2})
    rotation = plan.layer(0).find(Rotation)
    assert rotation.backwards and "by −θ" in rotation.label()
    assert torch.equal(rotation.rotate(q, torch.arange(30)), theirs)


def test_beams_query_scale_equals_transformers_and_a_wrong_one_is_refused(monkeypatch):
    """Beam's full layers run without RoPE and scale q by (1 + (pos + 1)/2048)^0.1: relviz's factors equal
    transformers' compute_attention_scaling bit for bit up to position 1M, the observer finds them in the queries
    it ran (exact family), and a table entry with another exponent is refused naming the layer."""
    from transformers.models.beam.modeling_beam import compute_attention_scaling

    from relviz.mechanisms import families
    from relviz.mechanisms.scale import QueryPowerScale

    positions = torch.cat([torch.arange(0, 4100), torch.arange(0, 1 << 20, 4093)])
    theirs = compute_attention_scaling(positions[None])[0, 0, :, 0]
    assert torch.equal(QueryPowerScale(0.1, 2048.0).factors(positions), theirs)
    config = tiny_config("beam")
    plan = verified_plan(config, causal_lm=True)
    full = [p for p in plan.plans["decoder"] if p.layer_type == "full_attention"]
    assert full and all(p.find(QueryPowerScale) and not p.find(Rotation) for p in full)
    assert all(p.find(Rotation) and not p.find(QueryPowerScale) for p in plan.plans["decoder"]
               if p.layer_type == "sliding_attention")
    monkeypatch.setitem(families.FAMILIES, "beam", {**families.FAMILIES["beam"], "mechanisms": {
        **families.FAMILIES["beam"]["mechanisms"], "query_power_scale": {"exponent": 0.11, "length": 2048.0}}})
    with pytest.raises(ValueError, match=rf"layer {full[0].index}: relviz reads queries scaled by "
                                         r"\(1 \+ \(pos \+ 1\)/2,048\)\^0.11"):
        verified_plan(config, causal_lm=True)


def test_roformers_rotation_is_read_exactly_from_its_sinusoidal_table():
    """RoFormer rotates inside its attention class (a static method the recorder wraps), interleaved pairs with the
    angles of its sinusoidal table: p / 10000^(2i/d) in float64, sin and cos rounded to float32 once. relviz's
    rotation in that arithmetic equals it at all 1,536 positions bit for bit (float32 angles differ by ~2e-4); the
    observer finds the family exact, causal as a decoder; with rotary_value the values turn too: refused."""
    from transformers.models.roformer import modeling_roformer as roformer

    from relviz.mechanisms.pattern import AttentionPattern
    from relviz.observe import observe, shrink

    table = roformer.RoFormerSinusoidalPositionalEmbedding(1536, 64)
    with torch.no_grad():
        table.weight.copy_(table.create_weight())
    q = torch.randn(1, 2, 1536, 64, generator=torch.Generator().manual_seed(2))
    sinusoidal = table(torch.Size([1, 1536]))[None, None]                                  # [1, 1, L, 64]
    theirs, _ = roformer.RoFormerSelfAttention.apply_rotary_position_embeddings(sinusoidal, q, q)
    config = {**tiny_config("roformer"), "hidden_size": 128, "num_attention_heads": 2, "num_hidden_layers": 2,
              "is_decoder": True}
    plan = verified_plan(config)
    rotation = plan.layer(0).find(Rotation)
    assert rotation.float64_angles and rotation.layout == "interleaved"
    assert torch.equal(rotation.rotate(q, torch.arange(1536)), theirs)
    plain = Rotation(rotation.rope, layout="interleaved")
    assert not torch.equal(plain.rotate(q, torch.arange(1536)), theirs)
    assert plan.layer(0).find(AttentionPattern).label() == "causal"
    assert observe(shrink(config)).layers[0].rotations
    assert verified_plan({**config, "is_decoder": False}).layer(0).find(AttentionPattern).label() == "full"
    with pytest.raises(ValueError, match="relviz says it does not rotate; transformers rotates q and k"):
        verified_plan({**config, "rotary_value": True})
