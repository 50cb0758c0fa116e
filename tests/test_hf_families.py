"""Today's families, layer by layer, against what transformers 5.23 computes and applies.

For each family a tiny random model is built from a config by transformers, saved, and read back by
``relviz.hf.inspect``. Then one eager forward runs with three recorders around the family's own module
functions: the rotation it applies (its ``apply_rotary_*``: input and output), the mask and softmax
scale each layer's attention receives (its ``eager_attention_forward``), and the query it scales. relviz
must give the same, layer by layer: ``torch.equal`` on the rotation (same operations), on the mask and on
the sinks; the layers the model does not rotate are the ones relviz's plan says have no rotation.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

from relviz.hf import inspect  # noqa: E402
from relviz.model_plan import OBSERVED  # noqa: E402
from relviz.mechanisms.absolute import LearnedAbsolute  # noqa: E402
from relviz.mechanisms.pattern import AttentionPattern  # noqa: E402
from relviz.mechanisms.rotation import Rotation  # noqa: E402
from relviz.mechanisms.scale import QueryTemperature, SoftmaxScale  # noqa: E402
from relviz.mechanisms.sinks import Sinks  # noqa: E402

L = 12          # tokens in the forward: windows of 3 and chunks of 4 cut inside it
SMALL = dict(vocab_size=32, hidden_size=32, num_attention_heads=2, num_key_value_heads=2, intermediate_size=16,
             head_dim=16, max_position_embeddings=64)


@dataclass
class Family:
    model_type: str
    config: dict[str, Any]
    module: str                          # transformers.models.<module>.modeling_<module>
    model_class: str
    rotate_fns: tuple[str, ...] = ("apply_rotary_pos_emb",)
    seq_first: bool = False              # the rotated tensor is [B, L, H, D] (GPT-J, Llama 4), not [B, H, L, D]
    eager: bool = True                   # the family's attention goes through eager_attention_forward
    expect: dict[str, Any] = field(default_factory=dict)   # what the plan must say, beyond transformers' own


FAMILIES = [
    Family("llama", dict(SMALL, num_hidden_layers=2, rope_scaling={"rope_type": "llama3", "factor": 8.0,
           "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
           "llama", "LlamaModel"),
    Family("mistral", dict(SMALL, num_hidden_layers=2, sliding_window=3), "mistral", "MistralModel",
           expect={"windows": [3, 3]}),
    Family("gemma2", dict(SMALL, num_hidden_layers=2, sliding_window=3), "gemma2", "Gemma2Model",
           expect={"windows": [3, None]}),
    Family("gemma3_text", dict(SMALL, num_hidden_layers=6, sliding_window=3, rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}),
           "gemma3", "Gemma3TextModel", expect={"windows": [3, 3, 3, 3, 3, None], "bases": {0: 1e4, 5: 1e6}}),
    Family("llama4_text", dict(SMALL, num_hidden_layers=4, attention_chunk_size=4, floor_scale=4, attn_scale=0.5,
                               num_local_experts=2, intermediate_size_mlp=16, no_rope_layer_interval=2),
           "llama4", "Llama4TextModel", rotate_fns=("apply_rotary_emb",), seq_first=True,
           expect={"rotated": [True, False, True, False], "chunks": [4, None, 4, None]}),
    Family("smollm3", dict(SMALL, num_hidden_layers=4, no_rope_layer_interval=2), "smollm3", "SmolLM3Model",
           expect={"rotated": [True, False, True, False]}),
    Family("cohere2", dict(SMALL, num_hidden_layers=4, sliding_window=3, layer_types=[
        "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]),
           "cohere2", "Cohere2Model", expect={"rotated": [True, True, True, False], "windows": [3, 3, 3, None]}),
    Family("gpt_oss", dict(SMALL, num_hidden_layers=2, sliding_window=3, num_local_experts=2,
                           num_experts_per_tok=1), "gpt_oss", "GptOssModel", expect={"windows": [3, None]}),
    Family("deepseek_v3", dict(vocab_size=32, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                               intermediate_size=16, moe_intermediate_size=8, num_hidden_layers=2, q_lora_rank=None,
                               kv_lora_rank=8, qk_rope_head_dim=8, qk_nope_head_dim=4, v_head_dim=4,
                               n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1,
                               first_k_dense_replace=1, max_position_embeddings=64, rope_interleave=True,
                               rope_scaling={"rope_type": "yarn", "factor": 40.0, "mscale": 1.0,
                                             "mscale_all_dim": 1.0, "original_max_position_embeddings": 16,
                                             "beta_fast": 32, "beta_slow": 1}),
           "deepseek_v3", "DeepseekV3Model", rotate_fns=("apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb")),
    Family("phi3", dict(SMALL, num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                                      "partial_rotary_factor": 0.5}),
           "phi3", "Phi3Model"),
    Family("phi", dict(SMALL, num_hidden_layers=2, partial_rotary_factor=0.5), "phi", "PhiModel"),
    Family("gptj", dict(vocab_size=32, n_embd=32, n_head=2, n_layer=2, rotary_dim=8, n_positions=64),
           "gptj", "GPTJModel", seq_first=True, eager=False),
    Family("codegen", dict(vocab_size=32, n_embd=32, n_head=4, n_layer=2, rotary_dim=4, n_positions=64, n_ctx=64),
           "codegen", "CodeGenModel", seq_first=True, eager=False),
    Family("falcon", dict(vocab_size=32, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, alibi=False,
                          new_decoder_architecture=False, multi_query=False), "falcon", "FalconModel", eager=False),
    Family("gpt_neox", dict(vocab_size=32, hidden_size=32, num_attention_heads=2, intermediate_size=16,
                            num_hidden_layers=2, max_position_embeddings=64), "gpt_neox", "GPTNeoXModel"),
    Family("cohere", dict(SMALL, num_hidden_layers=2), "cohere", "CohereModel"),
    Family("glm", dict(SMALL, num_hidden_layers=2), "glm", "GlmModel"),
    Family("glm4", dict(SMALL, num_hidden_layers=2), "glm4", "Glm4Model"),
    Family("qwen2_vl_text", dict(SMALL, num_hidden_layers=2, rope_parameters={
        "rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}), "qwen2_vl", "Qwen2VLTextModel"),
    Family("qwen2_5_vl_text", dict(SMALL, num_hidden_layers=2, rope_parameters={
        "rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}), "qwen2_5_vl", "Qwen2_5_VLTextModel"),
    Family("modernbert", dict(vocab_size=32, hidden_size=32, num_attention_heads=2, intermediate_size=16,
                              num_hidden_layers=3, local_attention=4, global_attn_every_n_layers=3,
                              max_position_embeddings=64), "modernbert", "ModernBertModel",
           expect={"windows": [None, 2, 2], "causal": False, "bases": {0: 160000.0, 1: 10000.0}}),
]


def _config(family: Family):
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[family.model_type](**{"pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
                                                 **family.config})


class Recorder:
    """Wraps module-level functions of a modeling module and records their calls per attention layer."""

    def __init__(self, modeling, model, names) -> None:
        self.layer = -1
        self.rotations: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.attention: dict[int, dict[str, Any]] = {}
        self.restore: list[tuple[str, Any]] = []
        for name in names:
            if hasattr(modeling, name):
                self._wrap(modeling, name, self._rotation)
        if hasattr(modeling, "eager_attention_forward"):
            self._wrap(modeling, "eager_attention_forward", self._eager)
        self.modeling = modeling
        for module in model.modules():
            if type(module).__name__.endswith("Attention") and module is not model:
                module.register_forward_pre_hook(self._enter)

    def _wrap(self, modeling, name, record):
        original = getattr(modeling, name)
        self.restore.append((name, original))

        def wrapped(*args, **kwargs):
            out = original(*args, **kwargs)
            record(args, kwargs, out)
            return out
        setattr(modeling, name, wrapped)

    def _enter(self, module, args):
        self.layer += 1

    def _rotation(self, args, kwargs, out):
        first = out[0] if isinstance(out, tuple) else out
        self.rotations.append((self.layer, args[0].detach().clone(), first.detach().clone()))

    def _eager(self, args, kwargs, out):
        module, query = args[0], args[1]
        mask = kwargs.get("attention_mask", args[4] if len(args) > 4 else None)
        scaling = kwargs.get("scaling", args[5] if len(args) > 5 else None)
        self.attention[self.layer] = {"query": query.detach().clone(), "mask": mask, "scaling": scaling,
                                      "module": module}

    def close(self):
        for name, original in self.restore:
            setattr(self.modeling, name, original)


def _run(family: Family, tmp_path):
    module = importlib.import_module(f"transformers.models.{family.module}.modeling_{family.module}")
    torch.manual_seed(0)
    config = _config(family)
    config._attn_implementation = "eager"
    model = getattr(module, family.model_class)(config).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.5)
    model.save_pretrained(tmp_path)
    recorder = Recorder(module, model, family.rotate_fns)
    q_inputs: dict[int, torch.Tensor] = {}
    hooks = [m.register_forward_hook(lambda mod, a, o, k=k: q_inputs.__setitem__(k, o.detach().clone()))
             for k, m in enumerate(m for n, m in model.named_modules() if n.endswith("self_attn.q_proj"))]
    try:
        with torch.no_grad():
            model(input_ids=torch.randint(0, 32, (1, L)))
    finally:
        recorder.close()
        for h in hooks:
            h.remove()
    return model, inspect(tmp_path), recorder, q_inputs


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_type)
def test_plan_equals_what_transformers_applies_layer_by_layer(family, tmp_path):
    model, plan, recorder, q_inputs = _run(family, tmp_path)
    stack = plan.stack_names[0]
    layers = plan.plans[stack]
    positions = torch.arange(L)

    # the rotation: every call the model made equals relviz's rotate on the same layer, same input
    rotated_layers = sorted({layer for layer, _, _ in recorder.rotations})
    assert rotated_layers == [p.index for p in layers if p.find(Rotation)], "which layers rotate"
    for layer, x_in, x_out in recorder.rotations:
        rotation = layers[layer].find(Rotation)
        x = x_in.transpose(1, 2) if family.seq_first else x_in             # [B, H, L, d]
        start = rotation.rotary_offset
        full = torch.nn.functional.pad(x, (start, rotation.width - start - x.shape[-1]))
        ours = plan.rotate(full, positions, layer=layer, stack=stack)[..., start:start + x.shape[-1]]
        ours = ours.transpose(1, 2) if family.seq_first else ours
        assert torch.equal(ours, x_out), f"layer {layer}: max |Δ| {(ours - x_out).abs().max():.3g}"
    if "rotated" in family.expect:
        assert [p.find(Rotation) is not None for p in layers] == family.expect["rotated"]

    # the frequencies each layer's rotary module holds
    rotary = getattr(model, "rotary_emb", None)
    for p in layers:
        rotation = p.find(Rotation)
        if rotary is None or rotation is None:
            continue
        held = getattr(rotary, f"{p.layer_type}_inv_freq", None) if p.layer_type else None
        held = held if held is not None else rotary.inv_freq
        scaling = getattr(rotary, f"{p.layer_type}_attention_scaling", None) if p.layer_type else None
        scaling = scaling if scaling is not None else rotary.attention_scaling
        assert torch.equal(plan.rope_inv_freq(layer=p.index, stack=stack), held)
        assert plan.rope_attention_scaling(layer=p.index, stack=stack) == scaling
    for index, base in family.expect.get("bases", {}).items():
        assert layers[index].find(Rotation).rope.base == base

    # the mask and the softmax scale each layer's eager attention received
    if family.eager:
        assert sorted(recorder.attention) == [p.index for p in layers]
        for p in layers:
            seen = recorder.attention[p.index]
            mask = seen["mask"]
            if mask is None:                        # no mask at all: every query sees every key
                allowed = torch.ones(L, L, dtype=torch.bool)
            else:
                allowed = mask[0, 0] if mask.dtype == torch.bool else mask[0, 0] == 0
            assert torch.equal(plan.attention_pattern(L, layer=p.index, stack=stack), allowed), f"layer {p.index}"
            scale = p.find(SoftmaxScale)
            expected = seen["module"].scaling if hasattr(seen["module"], "scaling") else None
            if scale is not None:
                assert scale.scale() == seen["scaling"] == expected
    pattern = [p.find(AttentionPattern) for p in layers]
    if "windows" in family.expect:
        assert [x.window for x in pattern] == family.expect["windows"]
    if "chunks" in family.expect:
        assert [x.chunk for x in pattern] == family.expect["chunks"]
    assert all(x.causal == family.expect.get("causal", True) for x in pattern)


def test_gpt_oss_sinks_and_their_share(tmp_path):
    family = next(f for f in FAMILIES if f.model_type == "gpt_oss")
    model, plan, recorder, _ = _run(family, tmp_path)
    for k, layer in enumerate(model.layers):
        assert torch.equal(plan.sinks(layer=k), layer.self_attn.sinks.detach())
        assert plan.layer(k).find(Sinks).heads == 2
    assert any("sinks" in name for name in plan.tensors_read)
    # the sink's share of a row: what is missing from the weights the eager path returns
    seen = recorder.attention[0]
    module, query = seen["module"], seen["query"]
    logits = torch.zeros(2, 1, 5)
    share = plan.layer(0).find(Sinks).share(logits)
    expected = torch.softmax(torch.cat([logits, module.sinks.detach().reshape(2, 1, 1)], -1), -1)[..., -1]
    assert torch.equal(share, expected) and query.shape[1] == 2


def test_llama4_query_temperature_is_what_its_nope_layers_apply(tmp_path):
    family = next(f for f in FAMILIES if f.model_type == "llama4_text")
    model, plan, recorder, q_inputs = _run(family, tmp_path)
    for k, p in enumerate(plan.plans["decoder"]):
        temperature = p.find(QueryTemperature)
        assert (temperature is None) == (p.find(Rotation) is not None)
        if temperature is None:
            continue
        q = q_inputs[k].view(1, L, 2, 16)                                       # [B, L, H, D] before scaling
        factors = temperature.factors(torch.arange(L))
        expected = (q * factors.view(1, L, 1, 1)).to(q.dtype).transpose(1, 2)
        assert torch.equal(recorder.attention[k]["query"], expected)
        assert factors[2] == 1.0 and factors[3] > 1.0                           # ⌊(pos + 1)/4⌋ = 1 from pos 3


GENERIC = [  # not in relviz's family table: read from their configs as standard rotary decoders
    Family("olmo2", dict(SMALL, num_hidden_layers=2, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
           "olmo2", "Olmo2Model"),
    Family("starcoder2", dict(SMALL, num_hidden_layers=2, sliding_window=3, use_bias=True), "starcoder2",
           "Starcoder2Model", expect={"windows": [3, 3]}),
]


@pytest.mark.parametrize("family", GENERIC, ids=lambda f: f.model_type)
def test_a_family_missing_from_the_table_is_read_from_its_config(family, tmp_path):
    from relviz.mechanisms.families import FAMILIES as TABLE

    assert family.model_type not in TABLE
    test_plan_equals_what_transformers_applies_layer_by_layer(family, tmp_path)
    plan = inspect(tmp_path)
    assert not plan.in_family_table and "not in relviz's family table: observed" in plan.notes[0]
    assert all(p.read_from == OBSERVED for p in plan.all_layers())          # transformers was asked, not guessed


@pytest.mark.parametrize("buckets, max_relative, norm", [(8, 16, "layer_norm"), (-1, 6, "none")])
def test_deberta_v2_relative_positions_and_embeddings(buckets, max_relative, norm, tmp_path):
    from transformers import DebertaV2Config, DebertaV2Model
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    torch.manual_seed(0)
    config = DebertaV2Config(vocab_size=32, hidden_size=16, num_attention_heads=2, num_hidden_layers=2,
                             intermediate_size=8, relative_attention=True, position_buckets=buckets,
                             max_relative_positions=max_relative, pos_att_type=["p2c", "c2p"], norm_rel_ebd=norm,
                             position_biased_input=False, max_position_embeddings=64, pad_token_id=0)
    model = DebertaV2Model(config).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p)
    model.save_pretrained(tmp_path)
    plan = inspect(tmp_path)
    for q_len, k_len in ((5, 5), (40, 40), (7, 30)):
        q, k = torch.zeros(1, q_len, 4), torch.zeros(1, k_len, 4)
        expected = build_relative_position(q, k, bucket_size=buckets, max_position=max_relative)[0]
        assert torch.equal(plan.relative_positions(q_len, k_len), expected)
    with torch.no_grad():
        assert torch.equal(plan.relative_embeddings(), model.encoder.get_rel_embedding())
    layer = plan.layer(0)
    assert layer.find(LearnedAbsolute) is None and "DeBERTa p2c+c2p" in layer.label()
    assert "encoder.rel_embeddings.weight" in plan.tensors_read


OLD_FORMAT = {  # published configs written before transformers 5: no layer_types, flat rope fields
    "gemma3_text": dict(SMALL, num_hidden_layers=7, sliding_window=3, sliding_window_pattern=3, rope_theta=1e6,
                        rope_local_base_freq=1e4, rope_scaling={"rope_type": "linear", "factor": 8.0}),
    "modernbert": dict(vocab_size=32, hidden_size=32, num_attention_heads=2, num_hidden_layers=5,
                       global_rope_theta=160000.0, local_rope_theta=10000.0, global_attn_every_n_layers=2,
                       local_attention=4),
    "llama4_text": dict(SMALL, num_hidden_layers=5, no_rope_layers=[], no_rope_layer_interval=2,
                        attention_chunk_size=4),
    "smollm3": dict(SMALL, num_hidden_layers=5, no_rope_layer_interval=3),
    "gemma2": dict(SMALL, num_hidden_layers=3, sliding_window=3),
    "gpt_oss": dict(SMALL, num_hidden_layers=3, sliding_window=3),
    "cohere2": dict(SMALL, num_hidden_layers=5, sliding_window=3, sliding_window_pattern=2),
}


@pytest.mark.parametrize("model_type", sorted(OLD_FORMAT))
def test_an_older_config_is_read_as_its_config_class_reads_it(model_type):
    """The layer types, RoPE-less layers and per-type bases transformers' config class derives from an older
    config equal the plan's, layer by layer."""
    from transformers import CONFIG_MAPPING

    from relviz.hf import from_config

    fields = OLD_FORMAT[model_type]
    reference = CONFIG_MAPPING[model_type](**fields)
    plan = from_config({"model_type": model_type, **fields})
    layers = plan.all_layers()
    assert [p.layer_type for p in layers] == list(reference.layer_types)
    flags = getattr(reference, "no_rope_layers", None)
    if flags is not None:
        assert [p.find(Rotation) is not None for p in layers] == [bool(f) for f in flags]
    nested = isinstance(reference.rope_parameters.get("full_attention"), dict)
    for p in layers:
        rotation = p.find(Rotation)
        if rotation is None:
            continue
        params = reference.rope_parameters[p.layer_type] if nested else reference.rope_parameters
        assert rotation.rope.base == params["rope_theta"], p.index
        assert rotation.rope.scaling.rope_type == params["rope_type"], p.index


@pytest.mark.parametrize("module, model_class, model_type", [("qwen2_vl", "Qwen2VLTextModel", "qwen2_vl_text"),
                                                            ("qwen2_5_vl", "Qwen2_5_VLTextModel", "qwen2_5_vl_text")])
def test_mrope_sections_turn_each_axis_by_its_own_position(module, model_class, model_type, tmp_path):
    """M-RoPE with three different position ids per token (an image patch's time, row, column): relviz's
    rotate with positions [3, L] equals the model's rotary module and apply_rotary_pos_emb."""
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    family = next(f for f in FAMILIES if f.model_type == model_type)
    model = getattr(modeling, model_class)(_config(family)).eval()
    model.save_pretrained(tmp_path)
    plan = inspect(tmp_path)
    assert plan.layer(0).find(Rotation).sections == (2, 3, 3)
    torch.manual_seed(1)
    positions = torch.randint(0, 50, (3, L))
    q = torch.randn(1, 2, L, 16)
    cos, sin = model.rotary_emb(q, positions[:, None, :])
    expected, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.equal(plan.rotate(q, positions), expected)
    assert not torch.equal(plan.rotate(q, positions), plan.rotate(q, positions[0]))


def test_published_presets_read_raw_as_with_transformers_derived_fields():
    """Each published config in relviz/presets.json, read as published, gives the same plan, layer by layer,
    as the same config with the fields transformers' config class derives (its ``derived``, themselves
    checked against transformers in tests/test_layer_views.py)."""
    import json
    from pathlib import Path

    from relviz.hf import from_config

    presets = json.loads((Path(__file__).resolve().parents[1] / "relviz" / "presets.json").read_text())
    for entry in presets["models"]:
        raw = from_config(entry["config"])
        derived = from_config({**entry["config"], **entry.get("derived", {})})
        ours = [layer.to_json() for layer in raw.all_layers()]
        assert ours == [layer.to_json() for layer in derived.all_layers()], entry["id"]
