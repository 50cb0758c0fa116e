"""Families without RoPE, read by the observer from what transformers runs (relviz.observe_position): the input
side (learned with its offset, sinusoidal, none), layers that apply no position themselves (checked, not
assumed), the mask, and layers that do not attend. One tiny family per kind; the whole zoo is
``python -m relviz bench --only zoo``."""
from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402
from device_support import default_device_holds_no_values  # noqa: E402

from relviz.absolute import sinusoidal_encoding, tensor2tensor_timing_signal  # noqa: E402
from relviz.mechanisms import families  # noqa: E402
from relviz.mechanisms.absolute import LearnedAbsolute  # noqa: E402
from relviz.mechanisms.none import NoPosition  # noqa: E402
from relviz.mechanisms.pattern import AttentionPattern  # noqa: E402
from relviz.mechanisms.rotation import Rotation  # noqa: E402
from relviz.mechanisms.sinusoidal import SinusoidalAbsolute  # noqa: E402
from relviz.observe import observe, shrink, verified_plan  # noqa: E402
from relviz.observe_differences import differences  # noqa: E402
from relviz.model_plan import OBSERVED, read_plan  # noqa: E402


def _config(model_type: str, **fields) -> dict:
    return {**transformers.CONFIG_MAPPING[model_type](**fields).to_dict(), "model_type": model_type}


def test_opt_reads_its_table_two_rows_on_found_from_the_rows_it_returns():
    config = _config("opt", num_hidden_layers=2, hidden_size=32, num_attention_heads=2, ffn_dim=32,
                     word_embed_proj_dim=32, vocab_size=64, max_position_embeddings=40)
    plan = verified_plan(config)
    assert plan.observed_entry["mechanisms"]["learned_absolute"] == {"tensor": "decoder.embed_positions.weight",
                                                                    "offset": 2}
    layers = plan.all_layers()
    assert [p.read_from for p in layers] == [OBSERVED] * 2 and all(p.find(Rotation) is None for p in layers)
    assert layers[0].find(AttentionPattern).causal and layers[0].find(LearnedAbsolute).offset == 2
    seen = observe(shrink(config))
    assert seen.inputs.found.offset == 2 and seen.inputs.rows == 42    # max_position_embeddings + the 2 rows
    assert all(o.probe.qk_position_free and o.probe.weights_uniform for o in seen.layers)
    # with the table: position p is row p + 2 of what transformers' module holds
    model = transformers.AutoModel.from_config(transformers.OPTConfig(**{k: v for k, v in config.items()
                                                                          if k != "model_type"}))
    table = model.decoder.embed_positions.weight.detach()
    absolute = LearnedAbsolute("decoder.embed_positions.weight", table=table, offset=2)
    assert torch.equal(absolute.positions()[5], model.decoder.embed_positions(
        torch.ones(1, 8, dtype=torch.long))[0, 5])


def test_gpt2_in_the_table_is_held_to_its_input_side(monkeypatch):
    """The table's GPT-2 entry read without its learned table: the observer says what the input adds."""
    config = _config("gpt2", n_layer=2, n_embd=32, n_head=2, vocab_size=64)
    assert verified_plan(config).first(LearnedAbsolute).tensor_name == "wpe.weight"
    entry = {**families.FAMILIES["gpt2"], "mechanisms": {"pattern": {}}}
    monkeypatch.setitem(families.FAMILIES, "gpt2", entry)
    found = differences(read_plan(shrink(config)), observe(shrink(config)))
    assert found == ["the input: relviz reads no absolute positions; transformers adds learned absolute positions "
                     "(wpe.weight) added to the input embeddings (from wpe.weight)"]


def test_an_encoder_used_as_a_causal_lm_family_reads_full_attention_and_roberta_offset():
    plan = verified_plan(_config("roberta", num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                 intermediate_size=32, vocab_size=64))
    (stack,) = plan.plans
    assert stack == "encoder" and not plan.layer(0).find(AttentionPattern).causal
    assert plan.layer(0).find(LearnedAbsolute).offset == 2               # after its padding index 1


def test_xglm_sinusoidal_equals_relvizs_tensor2tensor_table_in_float32():
    """XGLM's position p adds the sinusoid of p + 2, computed in float32: found by the rows its module returns."""
    config = _config("xglm", num_layers=2, d_model=16, attention_heads=2, ffn_dim=16, vocab_size=64)
    assert observe(shrink(config)).inputs.found == SinusoidalAbsolute(16, "tensor2tensor", True, 2)
    model = transformers.AutoModel.from_config(transformers.XGLMConfig(**{k: v for k, v in config.items()
                                                                           if k != "model_type"}))
    held, rows = model.embed_positions.weights, model.embed_positions.weights.shape[0]
    assert torch.equal(held[2:], SinusoidalAbsolute(16, "tensor2tensor", True, 2).table(rows, device="cpu")[2:])
    assert not torch.equal(held[2:], tensor2tensor_timing_signal(rows, 16, device="cpu")[2:])  # float64: not it
    assert not torch.equal(held[2:], sinusoidal_encoding(rows, 16, interleaved=False, device="cpu")[2:])
    entry = {"stacks": families.DECODER, "mechanisms": {"sinusoidal": {
        "variant": "tensor2tensor", "float32": True, "offset": 2, "width_field": "d_model"}, "pattern": {}}}
    read = read_plan({**config, "num_hidden_layers": 2}, family=entry).layer(1).find(SinusoidalAbsolute)
    assert read == SinusoidalAbsolute(16, "tensor2tensor", True, 2)


def test_the_input_probe_compares_on_the_cpu_whatever_the_default_device(monkeypatch):
    """On a GPU machine relviz's sinusoid was built on CUDA beside the model's CPU table: torch.equal raised and
    every absolute-position model was refused ('the probe failed'). The default device here holds no values."""
    default_device_holds_no_values(monkeypatch)
    xglm = _config("xglm", num_layers=2, d_model=16, attention_heads=2, ffn_dim=16, vocab_size=64)
    assert observe(shrink(xglm)).inputs.found == SinusoidalAbsolute(16, "tensor2tensor", True, 2)


def test_mamba_only_every_layer_a_state_space_no_position_mechanism():
    plan = verified_plan(_config("mamba", num_hidden_layers=2, hidden_size=16, state_size=8, vocab_size=64))
    assert [plan.mixer(layer=i).kinds for i in range(2)] == [("state_space",)] * 2
    assert "order reaches it through the selective scan" in plan.layer(0).describe()
    with pytest.raises(ValueError, match="does not attend: its token mixer is state-space"):
        plan.attention_pattern(8, layer=1)
    assert observe(shrink(_config("mamba", num_hidden_layers=2, hidden_size=16, state_size=8,
                                  vocab_size=64))).inputs.found == NoPosition()


def test_a_rotation_by_no_recorded_function_is_caught(monkeypatch):
    """A rotary family read as NoPE, its rotary function hidden from the recorder: the probe sees q and k move."""
    import relviz.observe as observe_module

    config = _config("llama", num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=32,
                     vocab_size=64)
    wrap = observe_module._Recorder._wrap
    monkeypatch.setattr(observe_module._Recorder, "_wrap",
                        lambda self, name, fn: wrap(self, name, fn) if name == "eager_attention_forward" else None)
    observe_module._observe.cache_clear()
    try:
        seen = observe(shrink(config))
    finally:
        observe_module._observe.cache_clear()
    plan = read_plan(shrink(config), family={"stacks": families.DECODER, "mechanisms": {"pattern": {}}})
    assert plan.layer(0).find(NoPosition) is not None and not seen.layers[0].rotations
    assert differences(plan, seen)[:2] == [f"layer {k}: q or k changes with position inside the layer, by no rotary "
                                           "function relviz records and no mechanism it reads" for k in (0, 1)]


def test_a_config_naming_only_its_model_type_is_read_with_its_classs_layer_count(tmp_path):
    """config.json with model_type alone: transformers' defaults decide, and so does the derived entry."""
    import json

    from relviz.hf import inspect

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "falcon_mamba", "hidden_size": 16,
                                                      "state_size": 8, "vocab_size": 64}))
    plan = inspect(tmp_path)
    layers = transformers.CONFIG_MAPPING["falcon_mamba"]().num_hidden_layers
    assert plan.observed_entry["stacks"]["decoder"]["layers_default"] == layers == len(plan.all_layers())
    assert {p.mixer.kinds for p in plan.all_layers()} == {("state_space",)}


@pytest.mark.parametrize("model_type, fields", [
    ("bloom", {"n_layer": 1, "hidden_size": 96, "n_head": 12, "vocab_size": 64}),
    ("mpt", {"n_layers": 1, "d_model": 96, "n_heads": 12, "vocab_size": 64, "max_seq_len": 32,
             "attn_config": {"alibi": True}}),
    ("falcon", {"num_hidden_layers": 1, "hidden_size": 96, "num_attention_heads": 12, "vocab_size": 64,
                "alibi": True, "new_decoder_architecture": False, "multi_query": True})])
def test_alibi_the_layer_is_handed_is_relvizs_slopes_times_positions(model_type, fields):
    """12 heads (not a power of 2): the table's slope rule and dtype, torch.equal; another dtype or rule is not."""
    import dataclasses

    from relviz.mechanisms.alibi import Alibi
    from relviz.observe_position import alibi_handed

    config = _config(model_type, **fields)
    alibi = read_plan(config).layer(0).find(Alibi)
    probe = observe(config).layers[0].probe
    assert alibi.heads == 12 and alibi_handed(alibi, probe)
    assert not alibi_handed(dataclasses.replace(alibi, heads=11), probe)
    assert not alibi_handed(dataclasses.replace(alibi, rule="max", alibi_bias_max=4.0), probe)
    if alibi.dtype == "bfloat16":                                       # Falcon rounds its slopes
        assert not alibi_handed(dataclasses.replace(alibi, dtype="float32"), probe)


def test_a_window_wider_than_the_short_probes_is_seen_by_the_long_one(monkeypatch):
    """GPT-Neo's local layers see 256 keys. Without its table entry the short probes cannot tell them from causal,
    the long one (as many positions as its table holds, on a model no forward has touched) can, so the family is
    refused, not misread; with it, window_size is cut for the probes and the family reads exactly."""
    config = _config("gpt_neo", num_layers=2, attention_types=[[["global", "local"], 1]], window_size=256,
                     hidden_size=32, num_heads=2, intermediate_size=32, vocab_size=64, max_position_embeddings=300)
    plan = verified_plan(config)
    assert [p.find(AttentionPattern).label() for p in plan.plans["decoder"]] == ["causal", "window 256"]
    assert plan.layer(1).layer_type == "sliding_attention" and plan.layer(0).read_from == OBSERVED
    monkeypatch.delitem(families.FAMILIES, "gpt_neo")
    with pytest.raises(ValueError, match="layer 1: at 300 positions the keys each query sees differ from relviz's "
                                         "causal"):
        verified_plan(config)
    seen = observe(shrink(config))
    assert torch.equal(seen.layers[0].probe.long_mask, AttentionPattern(causal=True).mask(300))
    assert torch.equal(seen.layers[1].probe.long_mask, AttentionPattern(causal=True, window=256).mask(300))


def test_a_recurrent_layer_that_lets_a_later_token_reach_back_is_refused(monkeypatch):
    """A layer read as a recurrence carries order forward only: changing the last position must leave every earlier
    output where it was (probe d). Mamba's mixer made to add its last position's output to every position fails it."""
    import relviz.observe as observe_module
    from transformers.models.mamba import modeling_mamba

    config = _config("mamba", num_hidden_layers=2, hidden_size=16, state_size=8, vocab_size=64)
    original = modeling_mamba.MambaMixer.forward

    def reaching_back(self, *args, **kwargs):
        out = original(self, *args, **kwargs)                                       # [B, L, D]
        return out + out[..., -1:, :]
    observe_module._observe.cache_clear()
    try:
        assert all(o.probe.causal for o in observe(shrink(config)).layers)
        observe_module._observe.cache_clear()
        monkeypatch.setattr(modeling_mamba.MambaMixer, "forward", reaching_back)
        seen = observe(shrink(config))
    finally:
        observe_module._observe.cache_clear()
    plan = read_plan(shrink(config), family={"stacks": families.DECODER, "mechanisms": {
        "mixer": {"linear_kind": "state_space"}}, "derive": [
        {"field": "layer_types", "constant": "mamba", "always": True}]})
    assert [o.probe.causal for o in seen.layers] == [False, False]
    assert "layer 0: relviz reads state-space (Mamba), no attention, which carries order forward only; in " \
           "transformers a change at the last position moved an earlier output" in differences(plan, seen)
