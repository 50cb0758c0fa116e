"""relviz.hf.inspect against tiny random models that transformers builds and saves (no network).

Each family's structure must equal what transformers itself computes: T5/mT5/UMT5 compute_bias,
BLOOM/Falcon/MPT alibi tensors, every Llama rope_scaling's rotary embedding, GPT-2/BERT tables.
"""
from __future__ import annotations

import json
import logging
import sys

import pytest
import torch

from relviz.mechanisms.t5_bias import T5Bias
from relviz.hf import SUPPORTED, inspect

transformers = pytest.importorskip("transformers", reason="the hf tests build models with transformers "
                                                           "(pip install 'relviz[hf]')")
logging.getLogger("transformers").setLevel(logging.ERROR)


def save(model, path, **kwargs):
    torch.manual_seed(0)
    for p in model.parameters():  # random, not zero: a wrong gather shows
        torch.nn.init.normal_(p)
    model.save_pretrained(path, **kwargs)
    return model


def t5_like(kind: str, tmp_path, **extra):
    from transformers import MT5Config, MT5Model, T5Config, T5Model, UMT5Config, UMT5Model

    cls, model_cls = {"t5": (T5Config, T5Model), "mt5": (MT5Config, MT5Model), "umt5": (UMT5Config, UMT5Model)}[kind]
    config = cls(vocab_size=32, d_model=16, d_kv=4, d_ff=8, num_heads=3, num_layers=2, num_decoder_layers=3,
                 relative_attention_num_buckets=extra.pop("num_buckets", 8),
                 relative_attention_max_distance=extra.pop("max_distance", 20), **extra)
    model = save(model_cls(config).eval(), tmp_path / kind, **({"max_shard_size": "4KB"} if kind == "mt5" else {}))
    return model, inspect(tmp_path / kind)


@pytest.mark.parametrize("kind", ["t5", "mt5"])
def test_t5_bias_equals_compute_bias(kind, tmp_path):
    model, positions = t5_like(kind, tmp_path)
    assert positions.scheme == "t5" and positions.model_type == kind
    assert positions.config["relative_attention_num_buckets"] == 8
    assert positions.config["relative_attention_max_distance"] == 20
    for stack, block in (("encoder", model.encoder.block[0]), ("decoder", model.decoder.block[0])):
        for q_len, k_len in ((1, 1), (7, 7), (5, 40), (40, 5)):
            expected = block.layer[0].SelfAttention.compute_bias(q_len, k_len)[0]   # [H, q, k]
            assert torch.equal(positions.bias(q_len, k_len, stack=stack, layer=1 if stack == "encoder" else 2),
                               expected)
    shared = positions.layer(1, stack="encoder").find(T5Bias)
    assert not shared.per_layer and "shared by the stack" in shared.describe()
    assert "shared by every layer" in shared.views(64, 1)[0].caption
    # the Your model page's bias map, per offset: entry j − i + q_len − 1 is compute_bias's diagonal
    expected = model.encoder.block[0].layer[0].SelfAttention.compute_bias(6, 9)[0]         # [H, 6, 9]
    per_offset = shared.bias_per_offset(6, 9)                                                # [H, 14]
    offsets = torch.arange(9)[None, :] - torch.arange(6)[:, None] + 5                        # [6, 9]
    assert torch.equal(per_offset[:, offsets], expected)
    assert shared.curve(30).caption == shared.views(31, 1)[0].caption and "layer 0" in shared.map_caption(2, "x")
    # Only the two tables were read, not the other weights (mt5 is sharded: read through the index).
    assert sorted(positions.tensors_read) == [
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    if kind == "mt5":
        assert (tmp_path / kind / "model.safetensors.index.json").exists()


def test_umt5_has_a_table_per_layer(tmp_path):
    model, positions = t5_like("umt5", tmp_path)
    assert positions.layers("encoder") == [0, 1] and positions.layers("decoder") == [0, 1, 2]
    for stack, blocks in (("encoder", model.encoder.block), ("decoder", model.decoder.block)):
        for layer, block in enumerate(blocks):
            expected = block.layer[0].SelfAttention.compute_bias(6, 9)[0]
            assert torch.equal(positions.bias(6, 9, stack=stack, layer=layer), expected)
    assert not torch.equal(positions.bias_table(stack="encoder", layer=0), positions.bias_table(stack="encoder", layer=1))
    # its words say so, layer 0 included (whose table sits where T5's shared one does)
    first = positions.layer(0, stack="encoder").find(T5Bias)
    assert first.per_layer and "layer 0's own table" in first.describe()
    curve, = first.views(64, 0)
    assert "this layer's own table" in curve.caption and "shared by every layer" not in curve.caption
    with pytest.raises(ValueError, match="layer must be an integer from 0 to 1"):
        positions.bias(3, 3, stack="encoder", layer=2)


@pytest.mark.parametrize("heads", [1, 4, 6, 12, 16])
def test_bloom_and_falcon_slopes_equal_their_alibi_tensors(heads, tmp_path):
    from transformers import BloomConfig, FalconConfig
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi

    mask = torch.ones(1, 3, dtype=torch.long)
    BloomConfig(n_head=heads, hidden_size=heads * 4, n_layer=1).save_pretrained(tmp_path / "bloom")
    slopes = inspect(tmp_path / "bloom").alibi_slopes()
    assert torch.equal(slopes, bloom_alibi(mask, heads, torch.float32)[:, 0, 1])   # position 1: 1 × slope
    FalconConfig(num_attention_heads=heads, hidden_size=heads * 4, num_hidden_layers=1, alibi=True,
                 new_decoder_architecture=False, multi_query=False).save_pretrained(tmp_path / "falcon")
    falcon = inspect(tmp_path / "falcon")
    assert falcon.alibi_slopes().dtype == torch.bfloat16
    assert torch.equal(falcon.alibi_slopes(), falcon_alibi(mask, heads, torch.bfloat16)[:, 0, 1])
    assert falcon.config["divided_by_sqrt_head_dim"]


@pytest.mark.parametrize("heads, bias_max", [(8, 8), (6, 8), (12, 16), (1, 8)])
def test_mpt_slopes_equal_the_alibi_tensor_its_forward_builds(heads, bias_max, tmp_path):
    """transformers 5.23's MptModel.forward builds ALiBi without the config's alibi_bias_max (always 8):
    relviz reports what runs, and a note says what the config asked for."""
    from transformers import MptConfig, MptModel

    config = MptConfig(n_heads=heads, d_model=heads * 4, n_layers=1, vocab_size=16, max_seq_len=4,
                       attn_config={"alibi": True, "alibi_bias_max": bias_max})
    model = MptModel(config).eval()
    built = []
    original = model.build_mpt_alibi_tensor
    model.build_mpt_alibi_tensor = lambda *a, **k: built.append(original(*a, **k)) or built[-1]
    with torch.no_grad():
        model(torch.zeros(1, 4, dtype=torch.long))
    model.save_pretrained(tmp_path)
    positions = inspect(tmp_path)
    expected = -built[0][:, 0, -2]          # key 1 before the query: −1 × slope
    assert torch.equal(positions.alibi_slopes(), expected)
    assert any("alibi_bias_max" in note for note in positions.notes) == (bias_max != 8)


LLAMA_SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 3.0},
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "beta_fast": 16.0},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 32},
    {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 4.0, 8.0, 9.0],
     "original_max_position_embeddings": 32, "factor": 4.0},
]


@pytest.mark.parametrize("scaling", LLAMA_SCALINGS, ids=lambda s: (s or {}).get("rope_type", "default"))
def test_llama_rope_equals_its_rotary_embedding(scaling, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=8, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                         rope_theta=5000.0, rope_scaling=scaling)
    model = save(LlamaForCausalLM(config), tmp_path)
    positions = inspect(tmp_path)
    assert positions.scheme == "rope" and positions.tensors_read == []        # RoPE has no weights to read
    rotary = model.model.rotary_emb
    assert torch.equal(positions.rope_inv_freq(), rotary.inv_freq)
    assert positions.rope_attention_scaling() == rotary.attention_scaling
    for seq_len in (100, 200):  # dynamic and longrope change with the length of a forward
        fresh = type(rotary)(model.config)
        fresh(torch.zeros(1, 1, 8), torch.tensor([[seq_len - 1]]))
        assert torch.equal(positions.rope_inv_freq(seq_len), fresh.inv_freq), seq_len


def test_gpt2_and_bert_position_embeddings(tmp_path):
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    gpt2 = save(GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=8, n_layer=1, n_head=2, n_positions=40)),
                tmp_path / "gpt2")
    assert torch.equal(inspect(tmp_path / "gpt2").position_embeddings(), gpt2.transformer.wpe.weight.detach())
    bert = save(BertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=8, max_position_embeddings=24)), tmp_path / "bert")
    table = inspect(tmp_path / "bert").position_embeddings()
    assert table.shape == (24, 8) and torch.equal(table, bert.embeddings.position_embeddings.weight.detach())


def test_pickles_are_refused_naming_the_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "num_heads": 2}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"cos\nsystem\n(S'echo pwned'\ntR.")  # would run if unpickled
    with pytest.raises(ValueError, match="pytorch_model.bin: relviz never opens pickled"):
        inspect(tmp_path)


def test_unknown_model_type_lists_what_is_supported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "unseen_family"}))
    with pytest.raises(ValueError, match=r"'unseen_family' is not supported: .* no RoPE settings .*Supported: .*bert, .*"
                                         r"bloom.*, llama"):
        inspect(tmp_path, observe=False)          # the table alone (the observer reads it: tests/test_observe_position)
    assert {"t5", "llama4_text", "gpt_oss", "deberta-v2"} <= set(SUPPORTED)
    assert not {"xlnet", "doge"} & set(SUPPORTED)       # entries that refuse every config of their family


@pytest.mark.parametrize("content, message", [
    (b"{not json", "config.json is not valid JSON"),
    (b"[1, 2]", "must hold a JSON object"),
    (b"\xff\xfe\x00", "not valid JSON"),
])
def test_corrupt_config_is_refused(tmp_path, content, message):
    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        inspect(tmp_path)


def test_corrupt_safetensors_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        inspect(tmp_path)


def test_index_may_not_point_outside_the_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"transformer.wpe.weight": "../../etc/passwd"}}))
    with pytest.raises(ValueError, match="only .safetensors files in the same directory"):
        inspect(tmp_path)


def test_hub_id_without_huggingface_hub_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ValueError, match="pip install 'relviz\\[hf\\]'"):
        inspect("someone/some-model")


def test_hub_id_offline_says_so(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    def offline(*args, **kwargs):
        raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)  # never the network
    with pytest.raises(ValueError, match="no internet connection"):
        inspect("someone/some-model")
    with pytest.raises(ValueError, match="not a model directory \\(and Hub ids are disabled here\\)"):
        inspect("someone/some-model", allow_hub=False)


def test_json_summary_holds_the_small_tables(tmp_path):
    _, positions = t5_like("t5", tmp_path)
    summary = json.loads(json.dumps(positions.to_json()))
    assert summary["scheme"] == "t5" and set(summary["bias_tables"]) == {"encoder.0", "decoder.0"}
    assert torch.equal(torch.tensor(summary["bias_tables"]["encoder.0"]), positions.bias_table().float())


def test_command_line_prints_each_family(tmp_path, capsys):
    from transformers import BloomConfig, LlamaConfig

    from relviz.__main__ import main

    t5_like("t5", tmp_path)
    BloomConfig(n_head=4, hidden_size=16, n_layer=1).save_pretrained(tmp_path / "bloom")
    LlamaConfig(hidden_size=16, num_attention_heads=2, rope_theta=500.0,
                rope_scaling={"rope_type": "linear", "factor": 2.0}).save_pretrained(tmp_path / "llama")
    assert main(["inspect", str(tmp_path / "t5")]) == 0
    text = capsys.readouterr().out
    assert "model_type t5" in text and "encoder: 2 layers" in text and "layers 0-1: T5 bias 8/20 · full" in text
    assert main(["inspect", str(tmp_path / "bloom"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["alibi_slopes"] == [0.25, 0.0625, 0.015625, 0.00390625]
    assert main(["inspect", str(tmp_path / "llama"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["config"]["rope_type"] == "linear" and summary["rope_inv_freq"][0] == 0.5
    assert main(["inspect", str(tmp_path / "bloom"), "--time", "2"]) == 0
    assert "inspect: median" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "missing"), "--no-hub"]) == 2
    assert "is not a model directory" in capsys.readouterr().err


@pytest.mark.parametrize("attention", ["local", "transient-global"])
def test_longt5_block_bias_and_decoder_bias_equal_compute_bias(attention, tmp_path):
    from transformers import LongT5Config, LongT5Model

    config = LongT5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=8, num_heads=2, num_layers=1, num_decoder_layers=1,
                          relative_attention_num_buckets=8, relative_attention_max_distance=20, local_radius=5,
                          global_block_size=4, encoder_attention_type=attention)
    model = save(LongT5Model(config).eval(), tmp_path)
    positions = inspect(tmp_path)
    assert positions.config["window"] == {"encoder": 5, "decoder": None}   # the decoder has no window: per stack
    layer = model.encoder.block[0].layer[0]
    local = layer.LocalSelfAttention if attention == "local" else layer.TransientGlobalSelfAttention
    assert torch.equal(positions.local_block_bias(), local.compute_bias(6)[0, 0])
    expected = model.decoder.block[0].layer[0].SelfAttention.compute_bias(9, 9)[0]
    assert torch.equal(positions.bias(9, 9, stack="decoder"), expected)
    if attention == "local":
        with pytest.raises(ValueError, match="global_bias_table needs LongT5 with encoder_attention_type"):
            positions.global_bias_table()
        return
    assert torch.equal(positions.global_bias_table(), local.global_relative_attention_bias.weight.detach())
    from transformers.models.longt5.modeling_longt5 import _make_global_fixed_block_ids
    for length in (4, 9, 14):                      # one block; orphan tokens after the last full block
        mask = torch.ones(1, length)
        _, segments = _make_global_fixed_block_ids(mask, 4)
        side = local.compute_side_bias(mask, segments)[0]
        ours = positions.layer(0, stack="encoder").find(T5Bias).global_side_bias(length)
        assert torch.equal(ours, side), length


def test_falcon_eager_path_adds_alibi_twice_as_the_plan_notes(tmp_path):
    """Falcon with alibi: transformers' eager attention (taken with output_attentions=True) adds the bias in
    the mask (slope/√d) and again to the scores before scaling (another slope/√d). relviz reports the slopes
    the model builds, once, and says so in a note; this test measures both paths on one layer."""
    from transformers import FalconConfig, FalconModel

    torch.manual_seed(0)
    config = FalconConfig(vocab_size=32, hidden_size=16, num_attention_heads=4, num_hidden_layers=1, alibi=True,
                          new_decoder_architecture=False, multi_query=False, bias=True)
    model = FalconModel(config).eval()
    model.save_pretrained(tmp_path)
    plan = inspect(tmp_path)
    assert any("twice" in note for note in plan.notes)
    attention = model.h[0].self_attention
    fused = []
    hook = attention.query_key_value.register_forward_hook(lambda m, a, o: fused.append(o))
    length = 6
    with torch.no_grad():
        probs = model(torch.arange(length)[None], output_attentions=True).attentions[0][0]       # [H, L, L]
    hook.remove()
    q, k, _ = attention._split_heads(fused[0])                                                      # [1, L, H, d]
    scores = torch.einsum("qhd,khd->hqk", q[0], k[0]) / 2                                           # / √d, d = 4
    slopes = plan.alibi_slopes().float()
    bias = slopes[:, None, None] * torch.arange(length)[None, None, :] / 2                          # per key, / √d
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    once = torch.softmax((scores + bias).masked_fill(~causal, -torch.inf), -1)
    twice = torch.softmax((scores + 2 * bias).masked_fill(~causal, -torch.inf), -1)
    assert torch.allclose(probs, twice, atol=1e-5) and not torch.allclose(probs, once, atol=1e-3)


def test_llama3_scaling_with_equal_freq_factors_is_a_step_as_in_transformers(tmp_path):
    """Llama 4 Scout's published config sets low_freq_factor = high_freq_factor = 1: transformers warns and
    computes (a step at the original context instead of a ramp); relviz computes the same."""
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(vocab_size=8, hidden_size=64, num_attention_heads=2, num_hidden_layers=1,
                         intermediate_size=8, max_position_embeddings=65536, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 1.0, "original_max_position_embeddings": 8192})
    LlamaModel(config).save_pretrained(tmp_path)
    held = LlamaModel(config).rotary_emb.inv_freq
    ours = inspect(tmp_path).rope_inv_freq()
    assert torch.equal(ours, held)
    assert not torch.isnan(ours).any() and (ours < 1.0 / (500000.0 ** (torch.arange(0, 32, 2) / 32))).any()


def test_inspect_json_gives_each_layers_own_settings(tmp_path, capsys):
    """Issue 30: a researcher reads per layer what differs by layer type (Gemma 3's θ 10k on its sliding layers and
    1M on its full ones, the window on the sliding ones only) and Gemma's query_pre_attn_scalar, as transformers'
    config class lays them out."""
    from transformers import Gemma3TextConfig

    from relviz.__main__ import main

    config = Gemma3TextConfig(num_hidden_layers=6, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                              head_dim=16, sliding_window=16, query_pre_attn_scalar=168, intermediate_size=16,
                              vocab_size=16)
    config.save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json", "--no-hub"]) == 0
    layers = json.loads(capsys.readouterr().out)["layers"]["decoder"]
    assert [layer["layer_type"] for layer in layers] == config.layer_types
    for layer, kind in zip(layers, config.layer_types):
        settings = {m["mechanism"]: m for m in layer["mechanisms"]}
        assert settings["rotation"]["rope_theta"] == config.rope_parameters[kind]["rope_theta"]
        assert settings["pattern"].get("window") == (config.sliding_window if kind == "sliding_attention" else None)
        assert settings["query_scalar"]["query_pre_attn_scalar"] == 168
        assert settings["query_scalar"]["softmax_scale"] == pytest.approx(168 ** -0.5)
    assert {layer["mechanisms"][0]["rope_theta"] for layer in layers} == {1e4, 1e6}
