"""Rotary position embedding (RoPE) and its context-extension scalings, computed exactly.

RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding") rotates
dimension pair i of q and k at position m by the angle m·θ_i, θ_i = base^(−2i/d), so q_m · k_n
depends on n − m only. The scaling rules stretch it to longer contexts; their exact arithmetic
here follows Hugging Face transformers' ``modeling_rope_utils.py`` (``ROPE_INIT_FUNCTIONS``) and
its rotary embedding modules (e.g. ``LlamaRotaryEmbedding``), operation for operation, so the
float32 results are bit-identical:

- ``default``  θ_i = base^(−2i/d) (Su et al.);
- ``linear``   position interpolation (Chen et al. 2023): θ_i / factor;
- ``dynamic``  dynamic NTK (bloc97/emozilla): base raised with the current sequence length once
  it exceeds ``max_position_embeddings``;
- ``yarn``     YaRN (Peng et al. 2023): per dimension a ramp between interpolated and original
  θ_i set by beta_fast/beta_slow on the number of turns in the original context, and an
  attention factor 0.1·ln(factor) + 1 (or DeepSeek's mscale/mscale_all_dim ratio);
- ``llama3``   Llama 3.1: keep high frequencies, divide low ones by factor, smooth in between;
- ``longrope`` LongRoPE (Ding et al. 2024, Phi-3): wavelength × per-dimension short or long
  factor, attention factor sqrt(1 + ln(scale)/ln(original_max_position_embeddings));
- ``proportional`` Gemma 4's and LFM3's full layers: θ_i = base^(−2i/head_dim) for the first
  int(partial_rotary_factor · head_dim // 2) pairs, θ = 0 for the rest, all / factor; cos and sin
  span the whole head;
- ``ntk_alpha`` Hunyuan (its configs' "dynamic" with an ``alpha``): the base × alpha^(d/(d − 2)),
  fixed whatever the length.

``relviz.rope.math.ROPE_RULES`` holds one function per rule, as transformers' ``ROPE_INIT_FUNCTIONS``.

Layout: Hugging Face's rotate_half pairs (i, i + r/2) of the first r = rotary_dim dimensions;
the rest of the head is not rotated (partial rotary). Sign convention: offset = j − i = key
position − query position.

The package's modules: :mod:`relviz.rope.config` (the settings, read from a config.json or a preset),
:mod:`relviz.rope.math` (frequencies, rotation, scores, decay bound), :mod:`relviz.rope.pair` (one
frequency pair at two positions) and :mod:`relviz.rope.scores` (the RoPE page's content scores and
decay curves). ``from relviz.rope import ...`` gives the public names below; they load with their
module on first use (:mod:`relviz._lazy`), so this package's body imports nothing.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "config": ("HAND_SET_RULES", "HandSetRule", "MAX_HEAD_DIM", "MAX_POSITIONS", "PRESETS_PATH", "ROPE_TYPES", "RULE_TEXT",
               "RopeConfig", "RopeScaling", "hand_set_config", "load_presets", "preset_caption", "rope_config_from_hf",
               "rope_presets"),
    "math": ("decay_bound", "measured_decay", "rope_attention_scaling", "rope_inv_freq", "rope_parameters", "rotate",
             "score_matrix", "score_per_offset", "turning_in_context", "turns_in_context", "unscaled", "wavelengths",
             "yarn_correction_range"),
    "pair": ("pair_explanation", "rotate_pair", "shifted_caption"),
    "scores": ("MAX_DECAY_POINTS", "MAX_WINDOW", "ContentScores", "DecayCurves", "content_scores", "decay_curves",
               "decay_distances", "random_content", "rotated_scores"),
})
