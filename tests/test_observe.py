"""The observer: transformers builds the shrunk model and runs it; relviz's plan must equal what ran, or be refused."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from relviz.mechanisms import families  # noqa: E402
from relviz.mechanisms.pattern import AttentionPattern  # noqa: E402
from relviz.mechanisms.rotation import Rotation  # noqa: E402
from relviz.observe import SMALL_WINDOW, observe, shrink, verified_plan  # noqa: E402
from relviz.observe_differences import differences  # noqa: E402
from relviz.model_plan import OBSERVED, read_plan  # noqa: E402


def _config(model_type: str, **fields) -> dict:
    return {**transformers.CONFIG_MAPPING[model_type](**fields).to_dict(), "model_type": model_type}


def test_shrink_keeps_what_position_depends_on():
    config = _config("exaone4", num_hidden_layers=8, sliding_window=4096, head_dim=64, hidden_size=1024,
                     num_attention_heads=16, num_key_value_heads=4)
    small = shrink(config)
    assert small["num_hidden_layers"] == 8 and small["layer_types"] == config["layer_types"]
    assert small["head_dim"] == 64 and small["num_attention_heads"] == 2 and small["num_key_value_heads"] == 1
    assert small["rope_parameters"] == config["rope_parameters"] and small["sliding_window"] == SMALL_WINDOW
    assert small["vocab_size"] == 64


def test_a_hybrid_is_observed_layer_by_layer_and_its_real_settings_kept():
    config = _config("exaone4", num_hidden_layers=4, sliding_window=4096)
    plan = verified_plan(config)
    assert all(p.read_from == OBSERVED for p in plan.all_layers())
    assert [p.find(Rotation) is not None for p in plan.all_layers()] == [True, True, True, False]
    assert plan.layer(0).find(AttentionPattern).window == 4096     # the real window, not the probe's
    seen = observe(shrink(config))
    assert [o.attends for o in seen.layers] == [True] * 4 and seen.layers[3].rotations == []
    qwen = verified_plan(_config("qwen3_next", num_hidden_layers=4))
    assert [p.mixer.kinds for p in qwen.all_layers()][:2] == [("linear_attention",), ("linear_attention",)]
    assert "Qwen3NextGatedDeltaNet" in observe(shrink(_config("qwen3_next", num_hidden_layers=4))).layers[0].modules


def test_a_wrong_reading_is_refused_naming_the_layer(monkeypatch):
    """EXAONE 4 read as a plain rotary decoder (its table entry gone) rotates its global layers: refused."""
    monkeypatch.delitem(families.FAMILIES, "exaone4")
    config = _config("exaone4", num_hidden_layers=4, sliding_window=4096)
    found = differences(read_plan(shrink(config)), observe(shrink(config)))
    assert found == ["layer 3: relviz says it rotates; transformers applies no rotation"]
    with pytest.raises(ValueError, match="differs from what transformers .* runs, so it is refused: layer 3"):
        verified_plan(config)


def test_a_config_transformers_cannot_build_is_refused_quoting_it():
    with pytest.raises(ValueError, match="could not build a 'llama' model from this config: .*"):
        verified_plan({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
                       "rope_parameters": {"rope_type": "no_such_rule", "rope_theta": 10000.0}})


@pytest.mark.parametrize("key", ["models/qwen3-next-80b-a3b", "models/jamba-v0.1", "models/gemma-3-27b"])
def test_the_hybrid_presets_and_gemmas_query_scalar(key):
    """Read from the config (the observer's check of these 48-62-layer presets takes ~40 s each under load: it is
    in python -m relviz bench --only zoo); the families' readings themselves are observed in tests/test_zoo.py."""
    from relviz.hf import from_config
    from relviz.mechanisms.scale import QueryScalar
    from relviz.model_presets import model_presets, preset_config

    config = preset_config(model_presets()[key])
    plan = from_config(config)
    kinds = [p.mixer.kinds for p in plan.all_layers()]
    if "qwen3" in key:
        assert kinds[:4] == [("linear_attention",)] * 3 + [("softmax_attention",)] and len(kinds) == 48
        reference = transformers.CONFIG_MAPPING["qwen3_next"](**{k: v for k, v in config.items() if k != "model_type"})
        assert [p.layer_type for p in plan.all_layers()] == reference.layer_types
    if "jamba" in key:
        assert [k == ("softmax_attention",) for k in kinds].count(True) == 4 and kinds[4] == ("softmax_attention",)
    if "gemma" in key:
        reference = transformers.CONFIG_MAPPING["gemma3_text"](query_pre_attn_scalar=168)
        assert plan.layer(0).find(QueryScalar).scale() == reference.query_pre_attn_scalar ** -0.5 == 168 ** -0.5


@pytest.mark.parametrize("bad, field", [({"head_dim": "x"}, "head_dim"), ({"hidden_size": 1e9}, "hidden_size"),
                                        ({"num_attention_heads": True}, "num_attention_heads"),
                                        ({"num_hidden_layers": 5000}, "num_hidden_layers")])
def test_a_hostile_config_is_refused_before_anything_large_is_built(bad, field):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, **bad}
    with pytest.raises(ValueError, match=field):
        verified_plan(config)


def test_shrink_reads_the_width_and_heads_by_the_config_class_names_and_keeps_positions():
    """BART names its width d_model and its heads encoder/decoder_attention_heads (its attribute_map); its
    max_position_embeddings equals its width (1024) and must stay, as must the learned table's offset."""
    config = _config("bart")
    small = shrink(config)
    assert small["d_model"] == 2 * config["d_model"] // config["encoder_attention_heads"] == 128
    assert small["encoder_attention_heads"] == small["decoder_attention_heads"] == 2
    assert small["encoder_ffn_dim"] == config["encoder_ffn_dim"] * 128 // config["d_model"] == 512
    assert small["max_position_embeddings"] == config["max_position_embeddings"] == config["d_model"]
    gptj = shrink(_config("gptj"))
    assert (gptj["n_embd"], gptj["n_head"], gptj["rotary_dim"]) == (2 * 4096 // 16, 2, 64)   # the head (256) kept


def test_shrink_keeps_what_a_state_space_layer_requires_of_its_sizes():
    """Mamba-2: expand × hidden = num_heads × head_dim, and n_groups divides num_heads (transformers checks both)."""
    config = _config("mamba2")
    small = shrink(config)
    assert small["expand"] * small["hidden_size"] == small["num_heads"] * small["head_dim"]
    assert small["num_heads"] % small["n_groups"] == 0 and small["head_dim"] == config["head_dim"]
    assert shrink(config, heads_to=4)["num_heads"] == 4


def test_attention_outside_eager_is_seen_at_its_softmax_and_a_bias_there_is_found():
    """Bloom and GPT-J compute attention in their own code: the observer reads the mask from the scores their
    softmax gets, and, with every projection zeroed (q = k = 0), whether anything else is added there: Bloom's
    ALiBi is, GPT-J adds nothing (its position is the rotation, checked at apply_rotary_pos_emb)."""
    bloom = observe(shrink(_config("bloom", n_layer=2)))
    gptj = observe(shrink(_config("gptj", n_layer=2)))
    assert all(o.at_softmax and o.attends for o in bloom.layers + gptj.layers)
    assert [o.softmax_bias for o in bloom.layers] == [True, True]
    assert [o.softmax_bias for o in gptj.layers] == [False, False]
    causal = AttentionPattern(causal=True)
    assert all(torch.equal(o.masks[n], causal.mask(n)) for o in gptj.layers for n in o.masks)
    assert gptj.layers[0].rotations and not bloom.layers[0].rotations


def test_a_finite_mask_fill_is_named_only_where_the_softmax_gave_it_exactly_zero_weight():
    """OpenAI GPT masks with −1e4: in float32 exp(−1e4 − m) underflows to exactly 0, so its weights are exactly a
    causal mask's, and the observer reads the fill from what the softmax returned. Where a row's largest score is
    below −10,000 + 103.97 the masked keys get weight, and the same scores are no fill (relviz then refuses)."""
    from relviz.mechanisms.pattern import AttentionPattern
    from relviz.observe_record import allowed_scores, masked_fill

    causal = AttentionPattern().mask(12)                                             # [L, L]
    scores = torch.randn(1, 2, 12, 12, generator=torch.Generator().manual_seed(0))
    filled = torch.where(causal, scores, torch.tensor(-1e4))
    weights = torch.softmax(filled, dim=-1)
    assert torch.equal(weights, torch.softmax(scores.masked_fill(~causal, -torch.inf), dim=-1))
    fill = masked_fill(filled, weights)
    assert fill == -1e4 and torch.equal(allowed_scores(filled, fill), causal)
    low = torch.where(causal, scores - 9_900.0, torch.tensor(-1e4))                  # largest scores near −9,900
    assert masked_fill(low, torch.softmax(low, dim=-1)) is None
    assert masked_fill(scores, torch.softmax(scores, dim=-1)) is None               # no mask: the lowest is a score
    pattern = AttentionPattern(fill=-1e4)
    assert pattern.label() == "causal, masked with −10,000" and "above −9,896" in pattern.describe()


def test_the_plan_states_the_softmax_scale_that_runs():
    """Granite's scale is attention_multiplier outright (1/64 here, not 1/√128): the plan says so, checked against
    the scaling transformers hands its attention; without that entry the same model is refused naming the scale.
    GPT-2 divides layer k's scores by k + 1 (scale_attn_by_inverse_layer_idx): its table entry says so; GPT-BigCode
    without scale_attn_weights scales by 1, which its derived entry does not say: refused naming layer 0. OPT scales
    q before its call (scaling=1.0 there): the observer proves the factor on q
    (torch.equal against its q projection × the module's scaling) and reads 1/√64, which the plan's silence means."""
    from relviz.mechanisms.scale import FieldScale, LayerIndexScale

    granite = _config("granite", num_hidden_layers=2, hidden_size=256, num_attention_heads=2, num_key_value_heads=2,
                      attention_multiplier=1 / 64)
    scale = verified_plan(granite).layer(1).find(FieldScale)
    assert scale.scale() == 1 / 64 and scale.settings()["attention_multiplier"] == 1 / 64
    assert "attention_multiplier = 0.015625" in scale.describe()
    monkeypatch = pytest.MonkeyPatch()
    try:
        monkeypatch.delitem(families.FAMILIES, "granite")
        with pytest.raises(ValueError, match=r"layer 0: transformers scales the scores by 0.015625, not 1/√128 = "
                                             r"0.0883883, and relviz's plan names no softmax scale"):
            verified_plan(granite)
    finally:
        monkeypatch.undo()
    gpt2 = verified_plan(_config("gpt2", n_layer=2, n_embd=64, n_head=2, scale_attn_by_inverse_layer_idx=True))
    assert [p.find(LayerIndexScale).scale() for p in gpt2.all_layers()] == [32 ** -0.5, 32 ** -0.5 / 2]
    assert verified_plan(_config("gpt2", n_layer=2, n_embd=64, n_head=2)).layer(0).find(LayerIndexScale) is None
    bigcode = _config("gpt_bigcode", n_layer=2, n_embd=64, n_head=2, scale_attn_weights=False)
    with pytest.raises(ValueError, match=r"refused: layer 0: transformers scales the scores by 1, not 1/√32"):
        verified_plan(bigcode)
    opt = observe(shrink(_config("opt", num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                                 ffn_dim=64, word_embed_proj_dim=128)))
    assert [o.scaling for o in opt.layers] == [64 ** -0.5] * 2


def test_zambas_softmax_scale_is_half_its_head_dim_to_the_minus_half_as_its_attention_sets_it():
    """Zamba's attention scales by (attention_head_dim / 2)^-0.5 (its input is twice the width): the table's
    QueryScalar reads that field with a divisor, equal to the module's own scaling (the zoo sweep checks it against
    what ran)."""
    from transformers.models.zamba.modeling_zamba import ZambaAttention

    from relviz.mechanisms.scale import QueryScalar

    config = _config("zamba", num_hidden_layers=4, hidden_size=64, num_attention_heads=2, attention_head_dim=48)
    scale = read_plan(config).layer(2).find(QueryScalar)
    module = ZambaAttention(transformers.ZambaConfig(**{k: v for k, v in config.items() if k != "model_type"}), 0)
    assert scale.scale() == module.scaling == 24 ** -0.5
    assert scale.describe().startswith("softmax scale (attention_head_dim / 2)^-0.5 = 1/√24")


@pytest.mark.parametrize("sliding", [False, True])
def test_a_published_config_without_the_fields_its_class_derives_is_observed(sliding):
    """A config.json as Qwen2 models publish it: no layer_types or rope_parameters (the class derives them from
    num_hidden_layers, max_window_layers and rope_theta). The observer used to fill them from the class's defaults,
    32 layer types for a 4-layer model, and then said transformers could not build it; transformers builds it."""
    config = dict(model_type="qwen2", vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1e6,
                  sliding_window=4096, max_window_layers=2, use_sliding_window=sliding)
    plan = verified_plan(config)
    assert all(p.read_from == OBSERVED for p in plan.all_layers())
    windows = [p.find(AttentionPattern).window for p in plan.all_layers()]
    assert windows == ([None, None, 4096, 4096] if sliding else [None] * 4)
    for i in range(4):                                                  # θ = rope_theta's 1e6, head_dim 16
        inv_freq = plan.rope_inv_freq(layer=i).double()
        assert torch.allclose(inv_freq, 1e6 ** (-torch.arange(0, 16, 2).double() / 16))


def test_an_encoder_decoder_read_as_its_causal_lm_is_built_as_that_alone(monkeypatch):
    """The zoo reads BART as BartForCausalLM: the base model is never built to be dropped (Marian's and Pegasus's
    100,000-row sinusoidal tables were computed twice more for it); whether to is decided on the meta device.
    Llama has no encoder: its base model is built, as without the flag."""
    from relviz import observe_build

    built = []
    real = observe_build.model_class

    def counting(hf_config, causal=False):
        found = real(hf_config, causal)
        built.append((torch.get_default_device().type, causal))
        return found

    monkeypatch.setattr(observe_build, "model_class", counting)
    _, model, _ = observe_build.build(shrink(_config("bart", decoder_layers=2, encoder_layers=2)),
                                      causal_if_encoder_decoder=True)
    assert type(model).__name__ == "BartForCausalLM" and built == [("meta", False), ("meta", True), ("cpu", True)]
    _, model, _ = observe_build.build(shrink(_config("llama", num_hidden_layers=2)), causal_if_encoder_decoder=True)
    assert type(model).__name__ == "LlamaModel"


def test_t5_scales_q_k_by_one_and_the_observer_agrees():
    """T5 folds 1/√d_kv into its query projection's initialisation and scales q·k by 1: with no softmax scale in
    its entry the observer refused T5 at its defaults, and the settings search counted the case as silent."""
    from relviz.mechanisms.scale import QueryScalar
    from relviz.zoo import tiny_config

    plan = verified_plan(tiny_config("t5"))
    layers = plan.all_layers()
    assert len(layers) > 1 and {p.find(QueryScalar).scale() for p in layers} == {1.0}
