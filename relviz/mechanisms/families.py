"""The family table: which mechanisms each model_type applies, with which options. Data, not code.

Each entry: ``stacks`` (stack name -> the config field counting its layers, whether its self-attention is
causal; a stack with ``config`` is read from that nested config when the config has it, e.g. a vision tower's
``vision_config``, with its own ``mechanisms`` table) and ``mechanisms`` (mechanism name -> options that mechanism's ``read`` interprets; ``requires``
maps a config field, dotted for nested ones, to the value it must hold for the mechanism to apply;
the rotation's ``defaults`` are the family's config-class defaults for fields a config may omit).
``layers_default`` is transformers' default where a config may omit the layer count; a stack's ``causal_field``
is a config field that makes it causal (RoFormer's ``is_decoder``); ``derive`` lists how
the family's config class fills per-layer lists a published config may omit (``layer_types``,
``no_rope_layers``); ``refuse`` stops the reading with its ``reason`` (what transformers runs that relviz has no
mechanism for) wherever its ``when`` fields hold (always, without one); ``required`` lists groups of fields of which
a config must set one (``REQUIRED_FIELDS``: its config class fills them with defaults of its own that the table
does not hold), else it is refused naming the field.
A model_type missing here whose config has RoPE settings is read with ``ROPE_DECODER``: every family
built on transformers' standard rotary module needs no entry.
"""
from __future__ import annotations

from typing import Any

__all__ = ["FAMILIES", "READ", "ROPE_DECODER", "ROPE_ENCODER", "BIDIRECTIONAL", "HYBRID_FIELDS", "WINDOW_MASK",
           "check_family", "family_of"]

DECODER = {"decoder": {"layers_field": "num_hidden_layers", "causal": True}}
ENCODER = {"encoder": {"layers_field": "num_hidden_layers", "causal": False}}
ENCODER_DECODER = {"encoder": {"layers_field": "num_layers", "layers_default": 6, "causal": False},
                   "decoder": {"layers_field": "num_decoder_layers", "fallback_field": "num_layers",
                               "layers_default": 6, "causal": True}}

ROPE_DECODER: dict[str, Any] = {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {}}}


def _every(period: int, phase: int, period_field: str | None = None, *, field: str = "layer_types",
           then: Any = "sliding_attention", other: Any = "full_attention") -> dict[str, Any]:
    return {"field": field, "period": period, "period_field": period_field, "phase": phase, "then": then,
            "else": other}
_QWEN2_LAYER_TYPES = [
    {"field": "layer_types", "threshold_field": "max_window_layers", "then": "sliding_attention",
     "else": "full_attention", "requires": {"use_sliding_window": True}},
    {"field": "layer_types", "constant": "full_attention"}]
_GPTJ_FIELDS = {"hidden_size": "n_embd", "num_attention_heads": "n_head", "max_position_embeddings": "n_positions"}
# T5 and its kin scale q·k by 1, not 1/√d_kv (the scale is folded into the query projection's initialisation)
_T5 = {"stacks": ENCODER_DECODER, "mechanisms": {"t5_bias": {}, "pattern": {}, "query_scalar": {"family_scalar": 1.0}}}

_DEEPSEEK_V3: dict[str, Any] = {"stacks": DECODER, "derive": [  # DeepseekV3Config sets both, whatever the config says
    {"field": "qk_head_dim", "sum_of": ["qk_nope_head_dim", "qk_rope_head_dim"], "always": True},
    {"field": "head_dim", "sum_of": ["qk_rope_head_dim"], "always": True, "minimum": 2, "maximum": 4096,
     "even": True}], "mechanisms": {  # (4096: relviz.rope's MAX_HEAD_DIM)
    "rotation": {"layout_field": "rope_interleave", "layout_field_default": True, "layout_when_set": "deinterleave",
                 "pass_before_field": "qk_nope_head_dim"},
    "pattern": {}, "softmax_scale": {"head_dim_field": "qk_head_dim"}}}

def _without(table: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k != name}


_DSA_DERIVE = [*_DEEPSEEK_V3["derive"], {"field": "layer_types", "constant": "indexed_attention"}]

#: Mistral's llama_4_scaling_beta rides in rope_parameters (with a copy of max_position_embeddings): the rotation
#: leaves both to the query scale, as transformers' ignore_keys_at_rope_validation does
_LLAMA4_BETA = ["llama_4_scaling_beta", "max_position_embeddings"]

FAMILIES: dict[str, dict[str, Any]] = {
    # rotation, per layer type where the config nests it (Gemma 3, ModernBERT); windows from layer_types
    **{t: ROPE_DECODER for t in ("llama", "mistral", "mixtral", "gemma", "phi", "phi3", "olmo", "stablelm")},
    # Qwen2 (and Qwen2-VL's text side): sliding windows only with use_sliding_window, from max_window_layers
    # on; Qwen2-VL's config class reads rope type "mrope" as the default rule (the sections ride along)
    **{t: {"stacks": DECODER, "derive": _QWEN2_LAYER_TYPES, "mechanisms": {
        "rotation": {"type_aliases": {"mrope": "default"}}, "pattern": {}}}
       for t in ("qwen2", "qwen2_vl_text", "qwen2_5_vl_text")},
    # Qwen3: Qwen2's sliding layers where a config leaves layer_types out (Qwen3-MoE has no layer_types: its window,
    # with use_sliding_window, is on every layer, as the standard reading has it)
    "qwen3": {"stacks": DECODER, "derive": _QWEN2_LAYER_TYPES, "mechanisms": {"rotation": {}, "pattern": {}}},
    # Qwen2-MoE: where a config leaves layer_types out, its class makes every other layer sliding (0, 2, ...) below
    # max_window_layers, with use_sliding_window
    "qwen2_moe": {"stacks": DECODER, "derive": [
        {**_every(2, 1), "below_field": "max_window_layers", "requires": {"use_sliding_window": True}},
        {"field": "layer_types", "constant": "full_attention"}], "mechanisms": {"rotation": {}, "pattern": {}}},
    # Qwen2-VL and Qwen2.5-VL: the text side as Qwen2, then the vision tower (a stack read from vision_config when
    # the config has one): 2-D RoPE on every block; Qwen2.5-VL's blocks attend in windows but for fullatt_block_indexes
    **{t: {"stacks": {**DECODER, "vision": {"layers_field": "depth", "config": "vision_config", "causal": False,
                                            "mechanisms": vision}},
           "derive": _QWEN2_LAYER_TYPES, "mechanisms": {"rotation": {"type_aliases": {"mrope": "default"}},
                                                          "pattern": {}}}
       for t, vision in (("qwen2_vl", {"rope2d": {"variant": "qwen_vl", "width_field": "embed_dim"}}),
                         ("qwen2_5_vl", {"rope2d": {"variant": "qwen_vl"}, "vision_window": {}}))},
    # layer_types when a config omits them (published configs older than transformers 5), as its config class
    # derives them: type i is "then" when (i + phase) % period != 0, else "else"
    "gemma2": {"stacks": DECODER, "derive": [_every(2, 1)], "mechanisms": {"rotation": {}, "pattern": {},
                                                                          "query_scalar": {}}},
    "gemma3_text": {"stacks": DECODER, "derive": [_every(6, 1, "sliding_window_pattern")], "mechanisms": {
        "rotation": {"per_layer_type": {  # older configs: rope_theta (+ rope_scaling) global, rope_local_base_freq
            "full_attention": {"theta_field": "rope_theta", "theta": 1e6, "scaled": True},
            "sliding_attention": {"theta_field": "rope_local_base_freq", "theta": 1e4}}},
        "pattern": {}, "query_scalar": {}}},
    # Gemma 4: five sliding layers to one full, the last always full; the full layers' heads are global_head_dim wide
    # (per_layer_config) and rotate by the proportional rule (rope_parameters nested by layer type)
    **{t: {"stacks": DECODER, "derive": [
        _every(6, 1), {"field": "layer_types", "last": "full_attention", "always": True},
        {"field": "per_layer_config", "layer_type": "full_attention", "override": "head_dim",
         "source_field": "global_head_dim", "source_default": 512}],
        "mechanisms": {"rotation": {}, "pattern": {}, "query_scalar": {"family_scalar": 1.0}}}
       for t in ("gemma4_text", "gemma4_unified_text")},
    # OLMo 3: three sliding layers to one full; a flat rope_scaling (its long-context YaRN) applies to the full layers
    # only, as its config class nests it
    "olmo3": {"stacks": DECODER, "derive": [_every(4, 1)], "mechanisms": {"rotation": {"per_layer_type": {
        "full_attention": {"theta_field": "rope_theta", "theta": 500000.0, "scaled": True},
        "sliding_attention": {"theta_field": "rope_theta", "theta": 500000.0}}}, "pattern": {}}},
    # Ministral 3: Llama's rotation (YaRN by default), then every query scaled by position (llama_4_scaling_beta)
    "ministral3": {"stacks": DECODER, "mechanisms": {"rotation": {"consumed_fields": _LLAMA4_BETA}, "pattern": {},
                                                     "position_query_scale": {}}},
    # Mistral 4: MLA as DeepSeek-V3 (its config's head_dim is the whole q/k head, partial_rotary_factor the rotated
    # share: relviz reads the rotated qk_rope_head_dim alone, after qk_nope_head_dim), and Ministral 3's query scale
    "mistral4": {"stacks": DECODER, "derive": _DEEPSEEK_V3["derive"], "mechanisms": {
        "rotation": {**_DEEPSEEK_V3["mechanisms"]["rotation"],
                     "consumed_fields": [*_LLAMA4_BETA, "partial_rotary_factor"]},
        "pattern": {}, "softmax_scale": {"head_dim_field": "qk_head_dim"}, "position_query_scale": {}}},
    # DeepSeek-V4: every layer type refused with what it runs (its compressed ones: relviz.mechanisms.mixer)
    "deepseek_v4": {"stacks": DECODER, "mechanisms": {"mixer": {"refuse": {"sliding_attention": (
        "its sliding layers use one tensor as key and value, so RoPE turns the values too and the output is turned "
        "back at the query's position (by −θ): position reaches the output through the values as well, which "
        "relviz's plans do not hold")}}, "rotation": {}, "pattern": {}, "sinks": {}}},
    # Hunyuan: its configs say "dynamic" with an alpha, which its rotary module computes as NTK-alpha (a fixed base)
    **{t: {"stacks": DECODER, "mechanisms": {"rotation": {"type_when_field": {"alpha": {"dynamic": "ntk_alpha"}},
                                                         "type_aliases": {"ntk_alpha": "ntk_alpha"}},
                                            "pattern": {}}} for t in ("hunyuan_v1_dense", "hunyuan_v1_moe")},
    # GPT-NeoX: 1/4 of each head rotates unless the config says otherwise (its rotary_pct default)
    "gpt_neox": {"stacks": DECODER, "mechanisms": {"rotation": {"defaults": {"rotary_pct": 0.25}}, "pattern": {}}},
    "llama4_text": {"stacks": DECODER, "derive": [
        {**_every(4, 1, "no_rope_layer_interval", field="no_rope_layers", then=1, other=0), "when_empty": True},
        {"field": "layer_types", "from_field": "no_rope_layers", "then": "chunked_attention", "else": "full_attention"}],
        "mechanisms": {
        "rotation": {"layout": "complex", "skip_field": "no_rope_layers", "defaults": {"rope_theta": 5e5}},
        "pattern": {},
        "query_temperature": {"rope_flags_field": "no_rope_layers"}}},
    "smollm3": {"stacks": DECODER, "derive": [
        _every(4, 1, "no_rope_layer_interval", field="no_rope_layers", then=1, other=0),
        {"field": "layer_types", "from_field": "no_rope_layers", "then": "full_attention",
         "else": "sliding_attention", "requires": {"use_sliding_window": True}},
        {"field": "layer_types", "constant": "full_attention"}], "mechanisms": {
        "rotation": {"skip_field": "no_rope_layers", "defaults": {"rope_theta": 2e6}},
        # its model builds each layer's mask from layer_types alone (use_sliding_window only derives them)
        "pattern": {"window_by_layer_types": True}}},
    "cohere": {"stacks": DECODER, "mechanisms": {"rotation": {"layout": "interleaved"}, "pattern": {}}},
    # GLM and GLM-4: interleaved pairs on half of each head unless the config says otherwise
    **{t: {"stacks": DECODER, "mechanisms": {"rotation": {"layout": "interleaved", "defaults": {
        "partial_rotary_factor": 0.5}}, "pattern": {}}} for t in ("glm", "glm4")},
    "cohere2": {"stacks": DECODER, "derive": [_every(4, 1, "sliding_window_pattern")], "mechanisms": {
        "rotation": {"layout": "interleaved", "layer_types": ["sliding_attention"]}, "pattern": {}}},
    "gpt_oss": {"stacks": DECODER, "derive": [_every(2, 1)], "mechanisms": {
        "rotation": {"defaults": {"rope_theta": 150000.0, "rope_scaling": {
            "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
            "original_max_position_embeddings": 4096}}}, "pattern": {}, "sinks": {}}},
    "deepseek_v3": _DEEPSEEK_V3,
    **{t: {"stacks": {"decoder": {"layers_field": "n_layer", "causal": True}}, "mechanisms": {
        "rotation": {"layout": "interleaved", "rotary_dim_field": "rotary_dim", "theta": 10000.0,
                     "fields": _GPTJ_FIELDS}, "pattern": {}}} for t in ("gptj", "codegen")},
    "falcon": {"stacks": DECODER, "mechanisms": {
        "alibi": {"requires": {"alibi": True}, "heads_fields": ("num_attention_heads", "n_head"),
                  "dtype": "bfloat16", "scale_by_head_dim": True, "twice_in_eager": True},
        "rotation": {"requires": {"alibi": False}}, "pattern": {}}},
    "bloom": {"stacks": {"decoder": {"layers_field": "n_layer", "causal": True}}, "mechanisms": {
        "alibi": {"heads_fields": ("n_head", "num_attention_heads")}, "pattern": {}}},
    "mpt": {"stacks": {"decoder": {"layers_field": "n_layers", "causal": True}}, "mechanisms": {
        "alibi": {"requires": {"attn_config.alibi": True}, "heads_fields": ("n_heads",), "slopes": "max",
                  "bias_max_field": "attn_config.alibi_bias_max", "bias_max_ignored": True},
        "pattern": {}}},
    "modernbert": {"stacks": ENCODER, "derive": [_every(3, 0, "global_attn_every_n_layers")], "mechanisms": {
        "rotation": {"per_layer_type": {  # older configs: global_rope_theta, local_rope_theta (+ rope_scaling on both)
            "full_attention": {"theta_field": "global_rope_theta", "theta": 160000.0, "scaled": True},
            "sliding_attention": {"theta_field": "local_rope_theta", "theta": 10000.0, "scaled": True}}},
        "pattern": {"window_field": "local_attention", "window_is_width": True}}},
    "deberta-v2": {"stacks": ENCODER, "mechanisms": {
        "learned_absolute": {"tensor": "embeddings.position_embeddings.weight",
                             "switch_field": "position_biased_input"},
        "deberta": {}, "pattern": {}}},
    "gpt2": {"stacks": {"decoder": {"layers_field": "n_layer", "layers_default": 12, "causal": True}}, "mechanisms": {
        "learned_absolute": {"tensor": "wpe.weight"}, "pattern": {},
        "layer_index_scale": {"width_field": "n_embd", "heads_field": "n_head"}}},
    "bert": {"stacks": {"encoder": {**ENCODER["encoder"], "layers_default": 12}}, "mechanisms": {
        "learned_absolute": {"tensor": "embeddings.position_embeddings.weight"}, "pattern": {}}},
    # hybrids: layers that do not attend (relviz.mechanisms.mixer); "linear_kind" names what transformers'
    # layer type linear_attention runs in the family
    "qwen3_next": {"stacks": DECODER, "derive": [_every(4, 1, "full_attention_interval", then="linear_attention")],
                   "mechanisms": {"mixer": {"linear_kind": "linear_attention"},
                                  "rotation": {"defaults": {"partial_rotary_factor": 0.25}}, "pattern": {}}},
    "bamba": {"stacks": DECODER, "derive": [
        {"field": "layer_types", "indices_field": "attn_layer_indices", "then": "full_attention",
         "else": "linear_attention", "always": True}],
        "mechanisms": {"mixer": {"linear_kind": "state_space"}, "rotation": {"defaults": {
            "partial_rotary_factor": 0.5}}, "pattern": {}}},
    "jamba": {"stacks": DECODER, "derive": [
        {"field": "layer_types", "period_field": "attn_layer_period", "period": 8, "offset_field": "attn_layer_offset",
         "offset": 4, "then": "full_attention", "else": "linear_attention", "always": True}],
        "mechanisms": {"mixer": {"linear_kind": "state_space"}, "pattern": {}}},
    "falcon_h1": {"stacks": DECODER, "derive": [{"field": "layer_types", "constant": "hybrid", "always": True}],
                  "mechanisms": {"mixer": {"linear_kind": "state_space"}, "rotation": {}, "pattern": {}}},
    "recurrent_gemma": {"stacks": DECODER, "derive": [
        {"field": "layer_types", "cycle_field": "block_types", "cycle_default": ["recurrent", "recurrent", "attention"],
         "map": {"recurrent": "linear_attention", "attention": "sliding_attention"}, "always": True}],
        "mechanisms": {"mixer": {"linear_kind": "recurrence"}, "rotation": {"defaults": {"partial_rotary_factor": 0.5}},
                       "pattern": {"window_field": "attention_window_size"}}},
    **{t: {"stacks": DECODER, "derive": [
        {"field": "layer_types", "indices_field": "full_attn_idxs", "then": "full_attention", "else": "conv"}],
        "mechanisms": {"rotation": {}, "pattern": {}}} for t in ("lfm2", "lfm2_moe")},
    "granitemoehybrid": {"stacks": DECODER, "mechanisms": {
        "mixer": {"linear_kind": "state_space"}, "rotation": {"requires": {"position_embedding_type": "rope"}},
        "pattern": {}, "field_scale": {"field": "attention_multiplier", "default": 1.0}}},
    # Zamba2: Mamba-2 layers, and "hybrid" ones (a shared attention block before the Mamba layer), rotating only
    # with use_mem_rope (False by default); its heads are attention_head_dim wide (2 × width / heads: the block reads
    # the hidden state beside the first embeddings), its softmax scale Zamba's, (attention_head_dim / 2)^-0.5
    "zamba2": {"stacks": DECODER, "derive": [{"field": "head_dim", "sum_of": ["attention_head_dim"], "always": True,
                                              "minimum": 2, "maximum": 4096, "even": True}], "mechanisms": {
        "mixer": {"linear_kind": "state_space"}, "rotation": {"requires": {"use_mem_rope": True}}, "pattern": {},
        "query_scalar": {"field": "attention_head_dim", "divisor": 2.0}}},
    # Mllama's text model: the layers cross_attention_layers lists attend to the image only (skipped on text alone)
    "mllama_text_model": {"stacks": DECODER, "derive": [
        {"field": "layer_types", "indices_field": "cross_attention_layers", "then": "cross_attention",
         "else": "full_attention", "always": True}], "mechanisms": {"mixer": {}, "rotation": {}, "pattern": {}}},
    # (MiniMax: a sliding_window, where set, on every attention layer, typed full_attention)
    "minimax": {"stacks": DECODER, "mechanisms": {"mixer": {"linear_kind": "linear_attention"}, "rotation": {},
                                                  "pattern": {"window_layer_type": "full_attention"}}},
    # EXAONE 4: RoPE on the sliding layers only, the global ones without position (when there is a window). Its
    # published sliding_window_pattern is "LLLG" (L local, G global, from layer 0, the last layer global, as
    # Exaone4Config's docstring says; 5.23's class itself raises TypeError on a string without layer_types)
    **{t: {"stacks": DECODER, "derive": [
        {"field": "layer_types", "cycle_field": "sliding_window_pattern", "text": True, "last": "full_attention",
         "map": {"L": "sliding_attention", "G": "full_attention"}},
        _every(4, 1, "sliding_window_pattern")], "mechanisms": {
        "rotation": {"layer_types": ["sliding_attention"], "layer_types_when": "sliding_window"}, "pattern": {}}}
       for t in ("exaone4", "exaone_moe")},
    # AFMoE: RoPE on its local (sliding) layers only, whatever the window
    "afmoe": {"stacks": DECODER, "mechanisms": {"rotation": {"layer_types": ["sliding_attention"]}, "pattern": {}}},
    # Ernie 4.5: GLM-style interleaved pairs over the whole head
    **{t: {"stacks": DECODER, "mechanisms": {"rotation": {"layout": "interleaved"}, "pattern": {}}}
       for t in ("ernie4_5", "ernie4_5_moe")},
    # found by the zoo sweep (python -m relviz bench --only zoo): each refused as misread, each exact with its entry
    "cohere2_moe": {"stacks": DECODER, "mechanisms": {
        "rotation": {"layout": "interleaved", "layer_types": ["sliding_attention"]}, "pattern": {}}},
    "helium": {"stacks": DECODER, "mechanisms": {"rotation": {"layout": "interleaved"}, "pattern": {}}},
    # MLA as DeepSeek-V3 (the rotated dims after the unrotated ones); DeepSeek-V2 multiplies them as complex numbers
    **{t: _DEEPSEEK_V3 for t in ("glm4_moe_lite", "youtu", "axk1")},
    # Bailing hybrid (Ling): linear attention on most layers, MLA as DeepSeek-V3 on the others
    "bailing_hybrid": {**_DEEPSEEK_V3, "mechanisms": {"mixer": {"linear_kind": "linear_attention"},
                                                      **_DEEPSEEK_V3["mechanisms"]}},
    "deepseek_v2": {**_DEEPSEEK_V3, "mechanisms": {**_DEEPSEEK_V3["mechanisms"], "rotation": {
        "layout": "complex", "pass_before_field": "qk_nope_head_dim"}}},
    # DeepSeek sparse attention (relviz.mechanisms.indexer): MLA as DeepSeek-V3, and on each indexed_attention layer a
    # lightning indexer, rotated by the layer's RoPE on its own head: its first qk_rope_head_dim dims in half-split
    # pairs (DeepSeek-V3.2, AXK2) or interleaved (GLM-MoE-DSA: apply_rotary_pos_emb_interleave), or its last ones in
    # half-split pairs (HY-V4, whose attention rotates half-split too); indexer_types' "shared" layers reuse the
    # previous full layer's choice
    # (every layer indexed_attention when a config omits layer_types: DeepseekV32Config's __post_init__)
    **{t: {**_DEEPSEEK_V3, "derive": _DSA_DERIVE,
           "mechanisms": {**_without(_DEEPSEEK_V3["mechanisms"], "pattern"), "indexer": indexer}}
       for t, indexer in (
           ("deepseek_v32", {"rotation": {"layout": "half"}}), ("axk2", {"rotation": {"layout": "half"}}),
           ("glm_moe_dsa", {"rotation": {"layout": "deinterleave"}, "shared_field": "indexer_types", "shared_default": {
               "pattern_field": "index_topk_pattern", "freq_field": "index_topk_freq", "freq": 1,
               "offset_field": "index_skip_topk_offset", "offset": 2}}))},
    # dots3: MLA whose rotated part is partial_rotary_factor of head_dim (per layer type, per_layer_config for its
    # sliding layers), interleaved as DeepSeek-V3's, and GLM-MoE-DSA's indexer on its indexed_attention layers
    **{t: {"stacks": DECODER, "mechanisms": {
        "rotation": {"layout": "deinterleave", "pass_before_field": "qk_nope_head_dim"},
        "indexer": {"rotation": {"layout": "deinterleave"}, "required_fields": ["layer_types", "per_layer_config"]}}}
       for t in ("dots3_note_text",)},
    # HY-V4 also has a sink logit per head (s_aux)
    "hy_v4": {**_DEEPSEEK_V3, "derive": _DSA_DERIVE, "mechanisms": {
        **_without(_DEEPSEEK_V3["mechanisms"], "pattern"),
        "rotation": {"layout": "half", "pass_before_field": "qk_nope_head_dim"},
        "indexer": {"rotation": {"layout": "half"}, "rope_at": "end", "shared_field": "indexer_types",
                    "shared_default": {"freq": 4, "offset": 2}}, "sinks": {}}},
    # Granite: the softmax scale is attention_multiplier outright (µP), which transformers hands its attention
    # (Granite SWA: a θ per layer in layer_rope_theta, 0 for a layer without RoPE, over rope_parameters' own)
    **{t: {"stacks": DECODER, "mechanisms": {"rotation": {"theta_per_layer_field": "layer_rope_theta"} if sinks else {},
                                            "pattern": {}, **({"sinks": {}} if sinks else {}),
                                            "field_scale": {"field": "attention_multiplier", "default": 1.0}}}
       for t, sinks in (("granite", False), ("granitemoe", False), ("granitemoeshared", False), ("granite_swa", True),
                        ("granitemoe_swa", True))},
    # Zamba: Mamba layers, and a shared attention block on some (layers_block_type "hybrid"), no position of its own;
    # its softmax scale is (attention_head_dim / 2)^-0.5 (its attention's input is twice the width)
    "zamba": {"stacks": DECODER, "mechanisms": {"mixer": {"linear_kind": "state_space"}, "pattern": {},
                                                "query_scalar": {"field": "attention_head_dim", "divisor": 2.0}}},
    # VaultGemma: Gemma 2's softmax scale, query_pre_attn_scalar^-0.5
    "vaultgemma": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {}, "query_scalar": {}}},
    # HyperCLOVA X: attention_multiplier when set (its config class fills a null with 1/√head_dim)
    "hyperclovax": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {},
                                                      "field_scale": {"field": "attention_multiplier"}}},
    # Gemma 3n: q and k are RMS-normalised per head and the softmax scale is 1, set by its attention
    "gemma3n_text": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {}, "query_scalar": {"family_scalar": 1.0}}},
    "flint": {"stacks": DECODER, "mechanisms": {"rotation": {"layer_types": ["sliding_attention"]}, "pattern": {},
                                                "sinks": {}}},
    # JetMoE: its head is kv_channels wide (its config class's head_dim), not hidden_size / num_attention_heads
    "jetmoe": {"stacks": DECODER, "mechanisms": {"rotation": {"fields": {"head_dim": "kv_channels"}}, "pattern": {}}},
    # Moshi: transformers masks its text decoder causally whatever sliding_window its config holds
    "moshi": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {"window_on_all_layers": False}}},
    # MiMo-V2-Flash: sinks on its sliding layers only
    "mimo_v2_flash": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {},
                                                        "sinks": {"layer_types": ["sliding_attention"]}}},
    # GPT-Neo: a learned table; its layer types are runs of [types, count] in attention_types (its config class
    # expands them, whatever attention_layers says), and the local ones see the last window_size keys
    "gpt_neo": {"stacks": {"decoder": {"layers_field": "num_layers", "layers_default": 24, "causal": True}},
                "derive": [{"field": "layer_types", "runs_field": "attention_types", "always": True,
                            "map": {"global": "full_attention", "local": "sliding_attention"}}],
                "mechanisms": {"learned_absolute": {"tensor": "wpe.weight"},
                               "pattern": {"window_field": "window_size"}}},
    # Beam: RoPE on its sliding layers (rope_parameters nested by layer type, null for full_attention); its full layers
    # run without RoPE and scale each query by (1 + (pos + 1)/2048)^0.1 (constants of its modeling code)
    "beam": {"stacks": DECODER, "mechanisms": {"rotation": {}, "pattern": {},
                                               "query_power_scale": {"exponent": 0.1, "length": 2048.0}}},
    # RoFormer: the first RoPE model. Interleaved pairs on the whole head, θ from its sinusoidal table (float64 angles
    # p / 10000^(2i/d), sin and cos rounded to float32 once); causal only as a decoder (is_decoder); rotary_value
    # turns the values too, which relviz's plans do not hold (then no rotation is read, and the observer refuses it)
    "roformer": {"stacks": {"encoder": {"layers_field": "num_hidden_layers", "causal": False,
                                        "causal_field": "is_decoder"}},
                 "mechanisms": {"rotation": {"layout": "interleaved", "theta": 10000.0, "float64_angles": True,
                                             "requires": {"rotary_value": False}}, "pattern": {}}},
    # BigBird: BERT's learned table, causal as a decoder; its block_sparse attention is refused (original_full is read)
    "big_bird": {"stacks": {"encoder": {"layers_field": "num_hidden_layers", "causal": False,
                                        "causal_field": "is_decoder"}},
                 "refuse": {"when": {"attention_type": "block_sparse"}, "reason": (
                     "its attention_type block_sparse: past (5 + 2·num_random_blocks)·block_size tokens (704 at its "
                     "defaults) each query block sees the first and last blocks, three sliding blocks and "
                     "num_random_blocks random blocks, drawn per head in training and set to the first block in "
                     "eval; that is no mask relviz reads (attention_type original_full is read exactly)")},
                 "mechanisms": {"learned_absolute": {"tensor": "embeddings.position_embeddings.weight"},
                                "pattern": {}}},
    # XLNet and Doge: what their attention adds has no mechanism in relviz; refused, saying what it is
    "xlnet": {"stacks": {"decoder": {"layers_field": "n_layer", "causal": True}}, "mechanisms": {}, "refuse": {
        "reason": "XLNet's relative attention (Transformer-XL's): every logit adds a term from a sinusoidal embedding "
                  "of the offset with a learned bias (r_r_bias), and segment terms (r_s_bias, seg_embed), computed "
                  "inside its attention; relviz has no mechanism for it"}},
    "doge": {"stacks": DECODER, "mechanisms": {}, "refuse": {
        "reason": "Doge adds to every logit a bias per key computed from the key's value, exp(A·softplus(dt_proj(v))), "
                  "and past keep_window_size keys keeps only those with the largest bias: which keys a query sees "
                  "depends on the content, which no relviz mechanism reads"}},
    # OpenAI's privacy filter: RoPE settings and no row here, but not the standard decoder (the settings search saw
    # each of these where the standard reading had read it silently as one)
    "openai_privacy_filter": {"stacks": ENCODER, "mechanisms": {}, "refuse": {
        "reason": "OpenAI's privacy filter masks every layer with a bidirectional sliding window, adds attention sinks, "
                  "and its rotation and softmax scale are not the standard reading's (transformers' run differs from "
                  "it in each); relviz has no entry that reads them"}},
    # NanoChat: its rotate_half flips the signs, so every pair turns by −θ·p
    "nanochat": {"stacks": DECODER, "mechanisms": {"rotation": {"backwards": True}, "pattern": {}}},
    "kolibri1": {"stacks": DECODER, "mechanisms": {"rotation": {"layer_types": ["sliding_attention"]}, "pattern": {}}},
    # Qwen3-VL: the text side's M-RoPE interleaves the axes pair by pair ([24, 20, 20] unless the config says), and the
    # vision tower rotates by 2-D RoPE on every block
    **{t: {"stacks": {**DECODER, **({"vision": {"layers_field": "depth", "config": "vision_config", "causal": False,
                                                "mechanisms": {"rope2d": {"variant": "qwen_vl"}}}} if tower else {})},
           "mechanisms": {"rotation": {"sections_interleaved": True, "sections_default": [24, 20, 20]},
                          "pattern": {}}}
       for t, tower in (("qwen3_vl_text", False), ("qwen3_vl", True))},
    # Mistral 3, LightOnOCR: the text side as their text_config's family, the vision tower Pixtral's encoder (read
    # from vision_config)
    **{t: {**ROPE_DECODER, "stacks": {**DECODER, "vision": {
        "layers_field": "num_hidden_layers", "config": "vision_config", "causal": False,
        "mechanisms": {"rope2d": {"variant": "pixtral", "heads_field": "num_attention_heads"}, "pattern": {}}}}}
       for t in ("mistral3", "lighton_ocr")},
    # Qwen3.5 and Qwen3.5-MoE: the text side as their text_config's family; the vision tower as Qwen3-VL's (2-D RoPE,
    # the same θ for rows and columns, no windows): exact against their VisionRotaryEmbedding (relviz.vision_zoo)
    **{t: {**ROPE_DECODER, "stacks": {**DECODER, "vision": {"layers_field": "depth", "config": "vision_config",
                                                            "causal": False,
                                                            "mechanisms": {"rope2d": {"variant": "qwen_vl"}}}}}
       for t in ("qwen3_5", "qwen3_5_moe")},
    # vision encoders: 2-D RoPE on every layer, every patch sees every other (Pixtral's encoder, DINOv3's ViT)
    "pixtral": {"stacks": ENCODER, "mechanisms": {"rope2d": {"variant": "pixtral", "heads_field": "num_attention_heads"},
                                                  "pattern": {}}},
    "dinov3_vit": {"stacks": ENCODER, "mechanisms": {"rope2d": {"variant": "dinov3", "heads_field": "num_attention_heads",
                                                                "registers_field": "num_register_tokens"},
                                                     "pattern": {}}},
    # vision encoders with a learned absolute table, one vector per patch of a fixed grid (CLIP: + the CLS token)
    **{t: {"stacks": ENCODER, "mechanisms": {
        "learned_absolute": {"tensor": "embeddings.position_embedding.weight"}, "pattern": {}}}
       for t in ("clip_vision_model", "siglip_vision_model")},
    # ViT, DeiT, DINOv2: a learned vector per patch of the trained grid (image_size // patch_size per side) after the
    # CLS token (DeiT: and its distillation token), resized bicubically for another grid (DINOv2 in float32)
    **{t: {"stacks": ENCODER, "mechanisms": {"patch_table": {"tensor": "embeddings.position_embeddings",
                                                             "prefix": prefix, "float32": float32}, "pattern": {}}}
       for t, prefix, float32 in (("vit", 1, False), ("deit", 2, False), ("dinov2", 1, True))},
    # Swin and Swin v2: windows of window_size patches, a relative bias per (Δh, Δw) in each block, read from the
    # checkpoint (Swin: the learned table; v2: the MLP that makes it); the blocks are depths summed over the stages
    **{t: {"stacks": {"encoder": {"layers_field": "depths", "layers_sum": True, "causal": False}},
           "mechanisms": {"swin_bias": {"continuous": continuous, "shrinks_when_built": continuous}}}
       for t, continuous in (("swin", False), ("donut-swin", False), ("swinv2", True))},
    "t5": _T5, "mt5": _T5,
    "umt5": {"stacks": ENCODER_DECODER, "mechanisms": {"t5_bias": {"per_layer": True}, "pattern": {},
                                                   "query_scalar": {"family_scalar": 1.0}}},
    "longt5": {"stacks": ENCODER_DECODER, "mechanisms": {
        "t5_bias": {}, "pattern": {"local_radius_field": "local_radius"}, "query_scalar": {"family_scalar": 1.0}}},
    # MiniCPM3: DeepSeek-V3's MLA (head_dim is qk_rope_head_dim, the rotated dims close each head, YaRN's mscale²
    # on the softmax scale), its pairs rotate_half's
    "minicpm3": {**_DEEPSEEK_V3, "mechanisms": {"rotation": {"pass_before_field": "qk_nope_head_dim"}, "pattern": {},
                                                "softmax_scale": {"head_dim_field": "qk_head_dim"}}},
    # families on the standard rotary module whose own default rule reads partial_rotary_factor (below)
    **{t: ROPE_DECODER for t in ("persimmon", "nemotron", "glm4_moe", "laguna", "qwen3_5_text", "qwen3_5_moe_text",
                                 "zaya")},
}


def _with_rotation_option(entry: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``entry`` whose rotations (every stack's, and a DSA indexer's own) also have the option ``key``:
    ``value``."""
    def add(mechanisms: dict[str, Any]) -> dict[str, Any]:
        out = {**mechanisms, "rotation": {**mechanisms["rotation"], key: value}} if "rotation" in mechanisms \
            else dict(mechanisms)
        indexer = out.get("indexer")
        if isinstance(indexer, dict) and isinstance(indexer.get("rotation"), dict):
            out["indexer"] = {**indexer, "rotation": {**indexer["rotation"], key: value}}
        return out
    stacks = {name: ({**spec, "mechanisms": add(spec["mechanisms"])} if "mechanisms" in spec else spec)
              for name, spec in entry["stacks"].items()}
    return {**entry, "stacks": stacks, "mechanisms": add(entry["mechanisms"])}


#: under the default rule, a family's rotary module computes θ with its own compute_default_rope_parameters, and
#: transformers 5.23's differ: these read partial_rotary_factor (only the first dims turn), the others ignore it
#: (every dim of the head turns); the scaled rules (linear, yarn, ...) are modeling_rope_utils', which all read it.
#: A family in neither list with the field set under the default rule is refused (relviz.mechanisms.rotation)
DEFAULT_RULE_PARTIAL: dict[bool, tuple[str, ...]] = {
    True: ("phi", "phi3", "stablelm", "deepseek_v4", "gpt_neox", "glm", "glm4", "qwen3_next", "bamba",
           "recurrent_gemma", "glm4_moe_lite", "dots3_note_text", "mimo_v2_flash", "persimmon", "nemotron",
           "glm4_moe", "laguna", "qwen3_5_text", "qwen3_5_moe_text", "zaya"),
    False: ("llama", "mistral", "mixtral", "qwen3", "gemma", "olmo", "qwen2", "qwen2_vl_text", "qwen2_5_vl_text",
            "qwen2_vl", "qwen2_5_vl", "gemma2", "gemma3_text", "gemma4_text", "gemma4_unified_text", "olmo3",
            "ministral3", "mistral4", "hunyuan_v1_dense", "hunyuan_v1_moe", "llama4_text", "smollm3", "cohere",
            "cohere2", "gpt_oss", "deepseek_v3", "falcon", "modernbert", "falcon_h1", "lfm2", "lfm2_moe",
            "granitemoehybrid", "zamba2", "mllama_text_model", "minimax", "exaone4", "exaone_moe", "afmoe",
            "ernie4_5", "ernie4_5_moe", "cohere2_moe", "helium", "youtu", "axk1", "bailing_hybrid", "deepseek_v2",
            "deepseek_v32", "axk2", "glm_moe_dsa", "hy_v4", "granite", "granitemoe", "granitemoeshared",
            "granite_swa", "granitemoe_swa", "vaultgemma", "hyperclovax", "gemma3n_text", "flint", "jetmoe", "moshi",
            "beam", "nanochat", "kolibri1", "qwen3_vl_text", "qwen3_vl")}
FAMILIES.update({t: _with_rotation_option(FAMILIES[t], "default_rule_partial", reads)
                 for reads, types in DEFAULT_RULE_PARTIAL.items() for t in types})

#: how each family's modeling (transformers 5.23) builds its sliding-window mask, where it is not per layer type
#: (``causal_mask_mapping[config.layer_types[i]]``, the default): ``every_layer``: ``create_sliding_window_causal_mask``
#: on every layer whenever ``sliding_window`` is set, layer_types never read; ``never``: its modeling calls no
#: sliding-window mask (causal or bidirectional), so ``sliding_window``, ``use_sliding_window`` and sliding layer
#: types reach no mask (an eager forward masks as it always does whatever they say; a converted Mistral checkpoint
#: published as ``llama`` keeps its 4096).
#: Keyed by the model_type of the side relviz reads (a composite's text_config's); read from that family's
#: modeling_*.py in the zoo's families (tests/test_zoo_search.py reads them again); the settings search
#: (relviz.zoo_search) found both read the generic way where a config carries the fields its class does not define
WINDOW_MASK: dict[str, tuple[str, ...]] = {
    "every_layer": (
        "blt", "doge", "ministral3", "mistral", "mixtral", "phi3", "phi4_multimodal", "phimoe", "qwen3_moe",
        "starcoder2", "voxtral_realtime_text"),
    "never": (
        "albert", "apertus", "arcee", "aria_text", "axk1", "axk2", "bamba", "bart", "bert", "bert-generation",
        "big_bird", "bigbird_pegasus", "biogpt", "bitnet", "blenderbot", "blenderbot-small", "bloom", "bros",
        "camembert", "canine", "clip_text_model", "codegen", "cohere", "convbert", "cpmant", "ctrl", "data2vec-text",
        "dbrx", "deberta", "deberta-v2", "deepseek_v2", "deepseek_v3", "deepseek_v32", "diffllama", "distilbert",
        "electra", "emu3_text_model", "encoder-decoder", "ernie", "ernie4_5", "ernie4_5_moe", "esm", "esmc",
        "eurobert", "evolla", "falcon", "falcon_h1", "falcon_mamba", "flaubert", "flava_text_model", "flex_olmo",
        "fnet", "fsmt", "funnel", "gemma", "git", "glm", "glm4", "glm4_moe", "glm4_moe_lite",
        "glm_moe_dsa", "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese", "gptj", "granite",
        "granitemoe", "granitemoehybrid", "granitemoeshared", "gte", "helium", "hiera", "hrm_text", "hunyuan_v1_dense",
        "hunyuan_v1_moe", "hy_v3", "hy_v4", "hyperclovax", "ibert", "idefics", "internlm3", "iquestcoder", "jais2",
        "jetmoe", "jina_embeddings_v3", "layoutlm", "layoutlmv2", "layoutlmv3", "led", "lilt", "llama",
        "longcat_flash", "longformer", "longt5", "luke", "lxmert", "m2m_100", "mamba", "mamba2", "marian", "markuplm",
        "mbart", "megatron-bert", "minicpm3", "minimax_m2", "minimax_m3_vl_text", "mistral4", "mistral_large4_text",
        "mllama_text_model", "mobilebert", "molmo2_text", "moshi", "mpnet", "mpt", "mra", "mt5", "musicgen",
        "musicgen_melody", "mvp", "nanochat", "nemotron", "nemotron_h", "nllb-moe", "nomic_bert", "nystromformer",
        "olmo", "olmo2", "olmoe", "openai-gpt", "opt", "pegasus", "pegasus_x", "perceiver", "persimmon", "phi",
        "plbart", "prophetnet", "qwen4_exp_text", "reformer", "rembert", "roberta", "roberta-prelayernorm", "roc_bert",
        "roformer", "rwkv", "seamless_m4t", "seamless_m4t_v2", "seed_oss", "solar_open", "splinter", "squeezebert",
        "stablelm", "switch_transformers", "t5", "tapas", "tipsv2_text_model", "trocr", "umt5", "unispeech",
        "unispeech-sat", "videomae", "visual_bert", "vit_mae", "wav2vec2", "wav2vec2-conformer", "whisper", "xglm",
        "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xlstm", "xmod", "yoso", "youtu", "zamba", "zamba2"),
}


def _with_pattern_option(entry: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``entry`` whose text stack's pattern (the entry's own mechanisms) also has the option ``key``: value."""
    mechanisms = entry.get("mechanisms", {})
    if "pattern" not in mechanisms:
        return entry
    return {**entry, "mechanisms": {**mechanisms, "pattern": {**mechanisms["pattern"], key: value}}}


#: the model_types outside the table with RoPE settings whose modeling (transformers 5.23) masks bidirectionally only:
#: it calls ``create_bidirectional_mask`` and never ``create_causal_mask`` (tests/test_zoo_search.py reads them
#: again), so the standard reading of them is an encoder's, every key seen; the settings search found them read as
#: causal decoders, silently, once it walked the encoders transformers maps to a masked LM or an embedding model
BIDIRECTIONAL: tuple[str, ...] = ("esmc", "eurobert", "gte", "jina_embeddings_v3", "neomme", "nomic_bert", "ultrabert")
#: ... that standard reading: a rotation on every layer of one bidirectional stack
ROPE_ENCODER: dict[str, Any] = {"stacks": ENCODER, "mechanisms": {"rotation": {}, "pattern": {}}}
#: the standard reading of a family outside the table: (bidirectional, its window mask rule) -> its entry
_ROPE_READING = {(bidirectional, rule): _with_pattern_option(ROPE_ENCODER if bidirectional else ROPE_DECODER,
                                                             "window_mask", rule) if rule else
                 (ROPE_ENCODER if bidirectional else ROPE_DECODER)
                 for bidirectional in (False, True) for rule in (None, *WINDOW_MASK)}
_BIDIRECTIONAL = frozenset(BIDIRECTIONAL)
#: model_type -> its WINDOW_MASK rule
_MASK_RULE = {t: rule for rule, types in WINDOW_MASK.items() for t in types}
assert len(_MASK_RULE) == sum(map(len, WINDOW_MASK.values()))

_ROPE_FIELDS_ANY = ("rope_parameters", "rope_scaling", "rope_theta")
#: fields a family's config class fills with its own defaults where a config leaves them out (a head_dim of its own,
#: not hidden_size / heads; its θ; its layer pattern), which the table does not hold: each tuple names fields of which
#: the config must set one, or relviz.model_plan refuses it naming the field (the settings search, relviz.zoo_search,
#: found each: read without refusal while transformers ran the class's default)
REQUIRED_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    **{t: (("head_dim",),) for t in ("gemma", "gemma2", "gemma3_text")},
    **{t: (("head_dim",), _ROPE_FIELDS_ANY) for t in ("gemma4_text", "gemma4_unified_text", "ernie4_5")},
    "beam": (("head_dim",), _ROPE_FIELDS_ANY),
    "flint": (("head_dim",), ("layer_types",)),
    **{t: (_ROPE_FIELDS_ANY,) for t in ("cohere", "ernie4_5_moe", "gemma3n_text")},
    "bailing_hybrid": (_ROPE_FIELDS_ANY, ("layer_types",)),
    # (its class fills layer_types with DSA indexer layers where a config leaves it out)
    "mistral_large4_text": (("layer_types",),),
    **{t: (("layer_types",),) for t in ("afmoe", "cohere2_moe", "granite_swa", "granitemoe_swa", "granitemoehybrid",
                                        "kolibri1")},
    **{t: (_ROPE_FIELDS_ANY,) for t in ("helium", "lfm2", "mixtral", "mllama_text_model")},
    "qwen3": (("head_dim",),),
    "vaultgemma": (("head_dim",), ("layer_types",)),
    "solar_open": (("head_dim",), _ROPE_FIELDS_ANY),
    "olmo_hybrid": (("layer_types",), _ROPE_FIELDS_ANY),
    **{t: (("layer_types",), ("head_dim",), ("rope_parameters", "rope_scaling", "partial_rotary_factor"))
       for t in ("qwen3_5_text", "qwen3_5_moe_text")},
    "qwen3_next": (("head_dim",), ("rope_parameters", "rope_scaling", "partial_rotary_factor")),
    # a share of each head below 1 by default (their classes' partial_rotary_factor): a config must say it
    **{t: (("rope_parameters", "rope_scaling", "partial_rotary_factor"),) for t in (
        "phi", "persimmon", "glm4_moe", "nemotron", "stablelm", "bamba", "recurrent_gemma", "deepseek_v4")},
    # ... and a head_dim of their own (ZAYA's 128: the full sweep found it read as hidden / heads)
    **{t: (("head_dim",), ("rope_parameters", "rope_scaling", "partial_rotary_factor")) for t in (
        "dots3_note_text", "zaya")},
    # (families given an entry for a field above: relviz reads no θ of their own either)
    **{t: (("head_dim",), _ROPE_FIELDS_ANY) for t in ("mellum", "minimax_m2", "minimax_m3_vl_text")},
    "mimo_v2_flash": (("head_dim",), _ROPE_FIELDS_ANY),
    "minimax": (_ROPE_FIELDS_ANY, ("layer_types",)),
    "laguna": (("head_dim",), _ROPE_FIELDS_ANY),
    "hy_v3": (("head_dim",), _ROPE_FIELDS_ANY),
    "cwm": (_ROPE_FIELDS_ANY, ("layer_types",)),
}
FAMILIES.setdefault("cwm", ROPE_DECODER)
FAMILIES.update({t: FAMILIES.get(t, ROPE_DECODER) for t in ("hy_v3", "mellum", "minimax_m2", "minimax_m3_vl_text",
                                                             "olmo_hybrid", "solar_open", "mistral_large4_text")})
FAMILIES.update({t: {**FAMILIES[t], "required": [list(r) for r in required]} for t, required in REQUIRED_FIELDS.items()})

# (a family that windows by a field of its own, GPT-Neo's window_size, builds its own mask: not this rule's)
FAMILIES.update({t: _with_pattern_option(FAMILIES[t], "window_mask", rule) for t, rule in _MASK_RULE.items()
                 if t in FAMILIES and "window_field" not in FAMILIES[t].get("mechanisms", {}).get("pattern", {})})

#: the model_types the table reads (an entry that refuses every config of its family is no support)
READ: tuple[str, ...] = tuple(sorted(t for t, e in FAMILIES.items() if not (e.get("refuse") and "when" not in e["refuse"])))

ROPE_FIELDS = ("rope_parameters", "rope_scaling", "rope_theta")
#: config fields that say which layers attend in a family's own way (read only through a family entry's
#: ``derive``): a config outside the table that has one is refused rather than read as all-attention
HYBRID_FIELDS = ("attn_layer_indices", "attn_layer_period", "block_types", "full_attn_idxs", "full_attention_interval",
                 "hybrid_override_pattern", "hybrid_layer_ids", "linear_attn_config", "mamba_d_state", "ssm_cfg",
                 "attn_type_list")


# ---------------------------------------------------------------------------------------
# The table's keys, typed: a misspelt key ("layuot") is a ValueError naming it, never a silent default.
# Each mechanism declares its own options (Mechanism.option_types); the entry, stack and derive keys are here.

_ENTRY_KEYS = frozenset({"stacks", "mechanisms", "derive", "refuse", "required"})
_REFUSE_KEYS = frozenset({"reason", "when"})
_STACK_KEYS = frozenset({"layers_field", "causal", "layers_default", "fallback_field", "config", "mechanisms",
                         "layers_sum", "causal_field"})
_DERIVE_KEYS = frozenset({"field", "period", "period_field", "phase", "then", "else", "requires", "threshold_field",
                          "constant", "from_field", "when_empty", "sum_of", "always", "indices_field", "offset_field",
                          "offset", "cycle_field", "cycle_default", "map", "minimum", "maximum", "even", "last",
                          "override", "source_field", "source_default", "layer_type", "text", "runs_field",
                          "below_field"})


def _unknown(where: str, keys: Any, allowed: Any) -> None:
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise ValueError(f"family table: {where} has no key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}")


def check_family(model_type: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry, after every key in it is checked against the table's types (ValueError naming the key)."""
    where = f"FAMILIES[{model_type!r}]"
    _unknown(where, entry, _ENTRY_KEYS)
    if "refuse" in entry:
        refuse = entry["refuse"]
        _unknown(f"{where} refuse", refuse if isinstance(refuse, dict) else {}, _REFUSE_KEYS)
        if not isinstance(refuse, dict) or not isinstance(refuse.get("reason"), str) or \
                not isinstance(refuse.get("when", {}), dict):
            raise ValueError(f"family table: {where} refuse must be {{'reason': str, 'when': {{field: value}}}}")
    required = entry.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, list) and r and all(isinstance(f, str) for f in r)
                                                 for r in required):
        raise ValueError(f"family table: {where} required must be a list of lists of field names")
    for stack, spec in entry.get("stacks", {}).items():
        _unknown(f"{where} stack {stack!r}", spec, _STACK_KEYS)
    for rule in entry.get("derive", ()):
        _unknown(f"{where} derive rule", rule, _DERIVE_KEYS)
    from relviz.mechanisms.registry import MECHANISMS   # at call time: the registry imports this module

    tables = [("", entry.get("mechanisms", {}))] + [(f" stack {stack!r}", spec["mechanisms"])
                                                   for stack, spec in entry.get("stacks", {}).items()
                                                   if "mechanisms" in spec]
    for at, table in tables:
        _check_mechanisms(where + at, table, MECHANISMS)
    return entry


def _check_mechanisms(where: str, table: dict[str, Any], MECHANISMS: dict[str, Any]) -> None:
    """A mechanisms table (the entry's, or a stack's own): known names, each option of its declared type."""
    for name, options in table.items():
        if name not in MECHANISMS:
            raise ValueError(f"family table: {where} names mechanism {name!r}; known: {', '.join(sorted(MECHANISMS))}")
        types = {**MECHANISMS[name].option_types, "requires": dict}
        _unknown(f"{where} mechanism {name!r}", options, types)
        for key, value in options.items():
            kind = types[key]
            ok = value in kind if isinstance(kind, frozenset) else isinstance(value, kind) and not (
                kind in (float, int) and isinstance(value, bool))
            if not ok:
                allowed = ", ".join(sorted(kind)) if isinstance(kind, frozenset) else getattr(
                    kind, "__name__", " or ".join(t.__name__ for t in kind) if isinstance(kind, tuple) else kind)
                raise ValueError(f"family table: {where} mechanism {name!r} option {key!r} must be {allowed}; "
                                 f"got {value!r:.60}")


def family_of(model_type: str, config: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the family's entry, whether it came from the table) — the standard rotary reading for a model_type
    the table lacks whose config has RoPE settings (a causal decoder's; an encoder's for ``BIDIRECTIONAL``, with
    its ``WINDOW_MASK`` rule); ({}, False) when neither. The entry's keys are checked
    (:func:`check_family`) each time it is read, so an entry added or edited by hand fails at its first use."""
    if model_type in FAMILIES:
        return check_family(model_type, FAMILIES[model_type]), True
    if any(config.get(f) is not None for f in ROPE_FIELDS):
        return _ROPE_READING[model_type in _BIDIRECTIONAL, _MASK_RULE.get(model_type)], False
    return {}, False
