"""Mistakes people made in public code, each transcribed independently here (written from the bug report or
the fixed pull request, not from relviz) and checked: relviz must name the cause the report describes.

Each docstring names its source. The settings are the model's where the report gives them; otherwise
common ones (the mistake does not depend on them), said so in the test. Every check runs
``python -m relviz check FILE --kind KIND --json`` with the flags (or the config.json) a user would give, through
relviz.__main__.main in this process, and reads the cause from the JSON.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

import relviz.check as C
from relviz.check import matrix_kinds as MK
from relviz.check import rope_causes as RC
from relviz.check.rope import rope_settings
from relviz.rope import RopeScaling


def _flags(settings, folder: Path) -> list[str]:
    """The command-line flags a user types for ``settings`` (a RoPE scaling rule: a config.json, as a model has)."""
    if isinstance(settings, C.Settings):
        return ["--q-offset", str(settings.q_offset), "--k", str(settings.k), "--num-buckets",
                str(settings.num_buckets), "--max-distance", str(settings.max_distance),
                "--bidirectional" if settings.bidirectional else "--unidirectional", "--num-heads",
                str(settings.num_heads), "--head", str(settings.head), "--alibi-bias-max", str(settings.alibi_bias_max),
                *(["--causal"] if settings.causal else [])]
    config, flags = settings.config, ["--layout", settings.layout, "--q-offset", str(settings.q_offset)]
    if config.scaling.rope_type == "default":
        return flags + ["--head-dim", str(config.head_dim), "--base", repr(config.base), "--rotary-dim",
                        str(settings.rotary_dim)]
    scaling = {k: v for k, v in asdict(config.scaling).items() if v is not None}
    path = folder / "config.json"
    path.write_text(json.dumps({"head_dim": config.head_dim, "num_attention_heads": 1, "hidden_size": config.head_dim,
                                "rope_theta": config.base, "partial_rotary_factor": config.partial_rotary_factor,
                                "max_position_embeddings": config.max_position_embeddings, "rope_scaling": scaling}))
    return flags + ["--config", str(path)]


def cli(kind: str, got, flags: list[str] | None = None, *, settings=None, config: dict | None = None) -> dict:
    """``python -m relviz check upload.npy --kind KIND --json FLAGS`` as a user runs it (relviz.__main__.main, in
    this process): the JSON report. ``settings``: the flags for them; ``config``: written as config.json and given
    with --config. The upload is saved as a user would (float32 where float64 would pass the 3 MiB limit)."""
    from relviz.__main__ import main

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        flags = list(flags or []) + (_flags(settings, folder) if settings is not None else [])
        if config is not None:
            (folder / "model.json").write_text(json.dumps(config))
            flags += ["--config", str(folder / "model.json")]
        array = np.asarray(got, dtype=np.float64)
        array = array.astype(np.float32) if array.nbytes > 3 * 1024 * 1024 - 1024 else array
        np.save(folder / "upload.npy", array)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["check", str(folder / "upload.npy"), "--kind", kind, "--json", *flags])
    report = json.loads(out.getvalue())
    assert code == 1 and not report["ok"], report
    return report


def causes(report: dict) -> list[str]:
    return [c["name"] for c in ([report["cause"]] if report["cause"] else []) + report["also_consistent_with"]]


def names(kind: str, got, settings) -> list[str]:
    """The causes ``python -m relviz check --json`` names for ``got`` checked at ``settings`` (cause first)."""
    return causes(cli(kind, got, settings=settings))


def neox_inv_freq(dim: int, base: float) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))


def half_split(freqs: torch.Tensor) -> torch.Tensor:
    return torch.cat((freqs, freqs), dim=-1)


def test_gpt_neox_positions_in_bfloat16():
    """EleutherAI/gpt-neox PR #1016 (https://github.com/EleutherAI/gpt-neox/pull/1016): after
    model.bfloat16() the inv_freq buffer is bf16 and t = torch.arange(seq_len).type_as(inv_freq) puts the
    positions in bf16 too ("we cannot distinguish 256.0 and 257.0"). Rotary dims 32, θ 10^4."""
    inv_freq = neox_inv_freq(32, 10000.0).bfloat16()
    t = torch.arange(600).type_as(inv_freq)
    emb = half_split(torch.einsum("i,j->ij", t, inv_freq))
    assert RC.angles_in(torch.bfloat16) in names("rope_cos", emb.cos().float(), rope_settings(head_dim=32))


def test_sglang_jax_inv_freq_cast_before_the_phase():
    """sgl-project/sglang-jax issue #1472 (https://github.com/sgl-project/sglang-jax/issues/1472), fixed by PR
    #1473: RotaryEmbedding keeps inv_freq in float32 but casts it to the model dtype (bfloat16) before
    einsum("n,d->nd", positions.astype(float32), inv_freq); the result is promoted back to float32. Head 128,
    positions 0..4095 (the report's failing position), θ 10^4, neox (half-split) style."""
    inv_freq = (1.0 / (10000.0 ** (np.arange(0, 128, 2, dtype=np.float32) / 128))).astype(np.float32)
    inv_bf16 = torch.as_tensor(inv_freq).bfloat16().float().numpy()
    freqs = np.arange(4096, dtype=np.float32)[:, None] * inv_bf16[None, :]
    cos = np.cos(np.concatenate([freqs, freqs], axis=1))
    assert RC.inv_freq_in(torch.bfloat16) in names("rope_cos", cos, rope_settings(head_dim=128))


def test_uni_d2_positions_inherit_a_float16_buffer():
    """nkalyanv99/UNI-D2 PR #6 (https://github.com/nkalyanv99/UNI-D2/pull/6): "the old code made RoPE
    positions inherit the dtype of inv_freq: torch.arange(...).type_as(self.inv_freq)", a registered buffer
    that a model-level cast turns into bf16/fp16. Here the float16 cast; head 64, θ 10^4."""
    inv_freq = neox_inv_freq(64, 10000.0).half()
    t = torch.arange(400).type_as(inv_freq)
    freqs = torch.outer(t, inv_freq)
    assert RC.angles_in(torch.float16) in names("rope_sin", half_split(freqs).float().sin(), rope_settings(head_dim=64))


def test_transformers_llama_rope_under_bfloat16_autocast():
    """huggingface/transformers PR #29285 (https://github.com/huggingface/transformers/pull/29285): "when one
    uses bfloat16, the RoPE embeddings get autocast to bfloat16": Llama/Gemma's inv_freq @ position_ids ran
    in bf16 under autocast (the fix disables autocast around it). Head 128, θ 10^4."""
    inv_freq = neox_inv_freq(128, 10000.0)
    positions = torch.arange(512)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        freqs = (inv_freq[:, None].float() @ positions[None, :].float()).transpose(0, 1)
        emb = half_split(freqs)
        cos = emb.cos()
    assert cos.dtype == torch.bfloat16  # autocast did run it in bf16
    assert RC.angles_in(torch.bfloat16) in names("rope_cos", cos.float(), rope_settings(head_dim=128))


def test_mlx_alibi_slopes_for_a_head_count_not_a_power_of_2():
    """ml-explore/mlx issue #343 (https://github.com/ml-explore/mlx/issues/343), fixed by PR #3071: "the old
    create_alibi_slope used x = (2**8) ** (1 / num_heads), slopes x ** −arange(1, num_heads + 1)", right only
    for a power of 2. 12 heads."""
    x = (2**8) ** (1 / 12)
    slopes = x ** -np.arange(1, 13, dtype=np.float64)
    assert names("alibi_slopes", slopes, C.Settings())[0].startswith("non-power-of-2 slopes: 2^(−8h/n)")


def test_aprender_alibi_exponent_from_zero():
    """paiml/aprender PR #2143 (https://github.com/paiml/aprender/pull/2143): compute_slopes used 2^(−8h/n)
    with h from 0, "so head 0 had slope 1.0"; for n = 8 slopes[7] was 0.0078125 instead of 0.00390625."""
    slopes = [2.0 ** (-8.0 * h / 8) for h in range(8)]
    assert names("alibi_slopes", slopes, C.Settings()) == [MK.FROM_0]


def yarn_inv_freq(base: float, dim: int, factor: float, original: int) -> np.ndarray:
    """YaRN's θ as transformers' _compute_yarn_parameters (beta_fast 32, beta_slow 1, truncate)."""
    def correction_dim(turns):
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))
    low, high = max(math.floor(correction_dim(32)), 0), min(math.ceil(correction_dim(1)), dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    theta = base ** (-np.arange(0, dim, 2) / dim)
    return theta / factor * ramp + theta * (1 - ramp)


def yarn_cos(rows: int, dim: int, inv: np.ndarray, scale: float) -> np.ndarray:
    angle = np.arange(rows)[:, None] * inv[None, :]
    return np.concatenate([np.cos(angle), np.cos(angle)], axis=1) * scale


def test_sglang_yarn_mscale_applied_twice():
    """sgl-project/sglang PR #33558 (https://github.com/sgl-project/sglang/pull/33558): "HF's
    attention_factor is the final YaRN mscale, but SGLang's YaRN treats attn_factor as a multiplier on its
    own yarn_get_mscale_simple(factor), so copying it straight in squares the scale (factor 128: 1.4852 ->
    2.2058)". Factor 128 as reported; θ 10^6, head 128, original context 4096 chosen for the test."""
    mscale = 0.1 * math.log(128) + 1  # 1.4852
    cos = yarn_cos(64, 128, yarn_inv_freq(1e6, 128, 128.0, 4096), mscale * mscale)
    s = rope_settings(head_dim=128, base=1e6, max_position_embeddings=524288,
                      scaling=RopeScaling("yarn", factor=128.0, original_max_position_embeddings=4096))
    assert RC.ATTN_TWICE in names("rope_cos", cos, s)


def test_vllm_ignores_an_explicit_attention_factor():
    """vllm-project/vllm PR #46280 (https://github.com/vllm-project/vllm/pull/46280): get_rope's YaRN branch did
    not forward attention_factor; poolside/Laguna-XS.2 "sets factor=64 and attention_factor=1.0, so vLLM uses
    mscale=1.4158883 where the config asks for 1.0". θ 10^6, head 128, original 4096 chosen for the test."""
    cos = yarn_cos(64, 128, yarn_inv_freq(1e6, 128, 64.0, 4096), 0.1 * math.log(64) + 1)
    s = rope_settings(head_dim=128, base=1e6, max_position_embeddings=262144,
                      scaling=RopeScaling("yarn", factor=64.0, original_max_position_embeddings=4096,
                                          attention_factor=1.0))
    assert RC.ATTN_DEFAULT in names("rope_cos", cos, s)


def test_sglang_ignores_mscale_and_mscale_all_dim():
    """sgl-project/sglang PR #22711 (https://github.com/sgl-project/sglang/pull/22711): for Ministral3
    (mscale 1.0, mscale_all_dim 1.0, factor 16) transformers computes attention_factor = get_mscale(16, 1) /
    get_mscale(16, 1) = 1.0, but the SRT engine used yarn_get_mscale_simple(16) ≈ 1.277. θ 10^6, head 128,
    original 16384 chosen for the test."""
    cos = yarn_cos(80, 128, yarn_inv_freq(1e6, 128, 16.0, 16384), 0.1 * math.log(16) + 1)
    s = rope_settings(head_dim=128, base=1e6, max_position_embeddings=262144,
                      scaling=RopeScaling("yarn", factor=16.0, original_max_position_embeddings=16384,
                                          mscale=1.0, mscale_all_dim=1.0))
    assert RC.ATTN_DEFAULT in names("rope_cos", cos, s)


def test_pie_partial_rope_over_the_head_width():
    """pie-project/pie issue #602 (https://github.com/pie-project/pie/issues/602), fixed by PR #603:
    rope_partial "rotates the first rotary_dim/2 pairs of a head with frequencies theta^(−2i/head_dim) and
    pairs (i, i + head_dim/2)" where transformers uses theta^(−2i/rotary_dim) and (i, i + rotary_dim/2). The
    PR's test shape: head_dim 256, rotary_dim 64; θ 10^7."""
    head, rotary, pairs = 256, 64, 32
    theta = 1e7 ** (-2 * np.arange(pairs) / head)
    angle = np.arange(100)[:, None] * theta[None, :]
    cos = np.ones((100, head))
    cos[:, :pairs] = np.cos(angle)
    cos[:, head // 2:head // 2 + pairs] = np.cos(angle)
    assert names("rope_cos", cos, rope_settings(head_dim=head, rotary_dim=rotary, base=1e7)) == \
        [RC.PARTIAL_AS_FULL_HEAD]


LLAMA3 = RopeScaling("llama3", factor=8.0, original_max_position_embeddings=8192, low_freq_factor=1.0,
                     high_freq_factor=4.0)


def test_mlx_vlm_llama_3_2_vision_ignores_rope_scaling():
    """Blaizzy/mlx-vlm PR #1710 (https://github.com/Blaizzy/mlx-vlm/pull/1710): mllama's language model built
    nn.RoPE(..., scale=1) although meta-llama/Llama-3.2-11B-Vision-Instruct ships rope_scaling llama3 (factor
    8, low 1, high 4, original 8192); θ 500000, head 128."""
    freqs = np.arange(200)[:, None] * (500000.0 ** (-np.arange(0, 128, 2) / 128))[None, :]
    cos = np.cos(np.concatenate([freqs, freqs], axis=1))
    s = rope_settings(head_dim=128, base=500000.0, max_position_embeddings=131072, scaling=LLAMA3)
    assert names("rope_cos", cos, s)[0] == RC.SCALING_MISSING


def test_unsloth_llama_3_1_rope_scaling_dropped():
    """unslothai/unsloth PR #6197 (https://github.com/unslothai/unsloth/pull/6197): the replacement
    LlamaRotaryEmbedding "computed vanilla inv_freq and never read config.rope_scaling", so Llama-3.1 ran with
    unscaled RoPE at θ 500000 (config.json of Llama-3.1-8B: head 128, llama3 ×8 over 8192)."""
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128))
    emb = half_split(torch.outer(torch.arange(300).float(), inv_freq))
    s = rope_settings(head_dim=128, base=500000.0, max_position_embeddings=131072, scaling=LLAMA3)
    assert names("rope_sin", emb.sin(), s)[0] == RC.SCALING_MISSING


def test_aidotnet_interleaved_rope_on_hugging_face_weights():
    """ooples/AiDotNet PR #2074 (https://github.com/ooples/AiDotNet/pull/2074): raw Hugging Face safetensors
    store q/k for the half-split (rotate_half) convention, "but AiDotNet applies interleaved (GPT-J) RoPE"
    without permuting q/k rows. SmolLM2-360M's head 64, θ 100000: its cos cache as AiDotNet laid it out."""
    theta = 100000.0 ** (-np.arange(0, 64, 2) / 64)
    cos = np.repeat(np.cos(np.arange(128)[:, None] * theta[None, :]), 2, axis=1)   # pairs (2i, 2i + 1)
    assert RC.LAYOUT in names("rope_cos", cos, rope_settings(head_dim=64, base=100000.0))


def test_prime_rl_position_ids_from_one():
    """PrimeIntellect-ai/prime-rl PR #3466 (https://github.com/PrimeIntellect-ai/prime-rl/pull/3466), flagged in
    PR #1545: the LM-head wrapper's fallback position_ids were torch.arange(1, seq_len + 1) instead of
    arange(seq_len). Llama-style head 128, θ 500000."""
    position_ids = torch.arange(1, 65)
    freqs = torch.outer(position_ids.float(), neox_inv_freq(128, 500000.0))
    assert RC.FROM_1 in names("rope_cos", half_split(freqs).cos(), rope_settings(head_dim=128, base=500000.0))


def test_transformers_falcon_eager_adds_alibi_twice():
    """huggingface/transformers 5.23, models/falcon/modeling_falcon.py: FalconModel folds alibi / sqrt(head_dim)
    into the causal mask, and the eager attention path (also taken with output_attentions=True) adds
    alibi.view(...) to the scores again before multiplying by inv_norm_factor: 2·alibi/√d, where the SDPA
    path adds it once. The symptom was reported as issue #29946 (https://github.com/huggingface/transformers/
    issues/29946). Falcon's alibi is slope · key position (bfloat16 slopes; 8 heads: exact). Head 3 of 8."""
    slope = 2.0 ** (-8 * 4 / 8)
    j = np.arange(10)[None, :] + 0 * np.arange(10)[:, None]
    bias = 2 * slope * j                                                  # alibi in the mask + alibi in the scores
    bias = np.where(j > np.arange(10)[:, None], -np.inf, bias)           # causal
    assert names("alibi", bias, C.Settings(num_heads=8, head=3, causal=True)) == [MK.ALIBI_TWICE]


def test_transformers_mpt_ignores_alibi_bias_max():
    """huggingface/transformers, models/mpt/modeling_mpt.py: MptModel.forward calls
    self.build_mpt_alibi_tensor(self.num_heads, self.config.max_seq_len, device=...) without the config's
    attn_config.alibi_bias_max, so the slopes always use 8; MosaicML's own code passes the config's value.
    A config with alibi_bias_max 16 and 16 heads."""
    n2 = 16
    base = torch.arange(1, n2 + 1, dtype=torch.int64).float() * (8 / n2)   # the default 8, not the config's 16
    slopes = (1.0 / torch.pow(2, base)).numpy()
    assert names("alibi_slopes", slopes, C.Settings(alibi_bias_max=16.0)) == [MK.BIAS_MAX_IGNORED]


# ---------------------------------------------------------------------------------------
# Reports no earlier test used (issue 31). Each builds the upload as the buggy code did, from the report's
# description, and asserts what `python -m relviz check --json` names. The closing note of issue 31 says which
# the general search (relviz.check.search) named and which needed new code.


def llama_cos(rows: int, head: int, base: float, *, divide: float = 1.0) -> np.ndarray:
    """A half-split cos cache as Hugging Face's Llama builds it in float32 (θ divided by ``divide``)."""
    inv_freq = neox_inv_freq(head, base) / divide
    return half_split(torch.outer(torch.arange(rows).float(), inv_freq)).cos().numpy()


def test_airllm_mlx_llama_path_drops_rope_theta():
    """lyogavin/airllm PR #369 (https://github.com/lyogavin/airllm/pull/369), fixing issue #368: the MLX Llama path
    copied every config field but rope_theta, and sanitize_config filled in 10000; Llama 3.x ships 500000 (output
    degrades past ~1k tokens). Head 128."""
    cos = llama_cos(2048, 128, 10000.0)
    assert names("rope_cos", cos, rope_settings(head_dim=128, base=500000.0))[0] == RC.base_off(10000.0, 500000.0)


def test_penzai_llama_conversion_hardcodes_rope_wavelength():
    """google-deepmind/penzai PR #102 (https://github.com/google-deepmind/penzai/pull/102): converting Llama models
    hard-coded the RoPE wavelength 10k "while the new Llama models set 500k". Head 64 (Llama 3.2 1B), sin cache."""
    sin = half_split(torch.outer(torch.arange(300).float(), neox_inv_freq(64, 10000.0))).sin().numpy()
    assert names("rope_sin", sin, rope_settings(head_dim=64, base=500000.0))[0] == RC.base_off(10000.0, 500000.0)


def test_specforge_draft_model_ignores_qwen_rope_theta():
    """sgl-project/SpecForge issue #265 (https://github.com/sgl-project/SpecForge/issues/265): rope_theta is not
    pulled from the config, "so all the rotary embeddings are using the default base=10000"; the report trains for
    Qwen2.5-VL-7B (rope_theta 1,000,000, head 128)."""
    assert names("rope_cos", llama_cos(512, 128, 10000.0), rope_settings(head_dim=128, base=1e6))[0] == \
        RC.base_off(10000.0, 1e6)


def test_deepspeed_reads_rope_theta_where_transformers_5_no_longer_puts_it():
    """deepspeedai/DeepSpeed PR #8345 (https://github.com/deepspeedai/DeepSpeed/pull/8345), after #8341: rope_theta
    moved into config.rope_parameters in transformers 5, so getattr(config, "rope_theta", default) "silently returns
    the default for every checkpoint". A transformers 5 style config.json (Llama 3: θ 500000 inside rope_parameters,
    head 128) read by relviz, checked against the cache the default 10000 gives."""
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128, "num_hidden_layers": 2,
              "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
    report = cli("rope_cos", llama_cos(1024, 128, 10000.0), config=config)
    assert causes(report)[0] == RC.base_off(10000.0, 500000.0)


def test_vllm_phi_rope_theta_not_read():
    """vllm-project/vllm PR #9503 (https://github.com/vllm-project/vllm/pull/9503), fixing #9502: phi.py did not take
    rope_theta from the config file (it used 10000). Phi's partial rotary: head 80, partial_rotary_factor 0.4 (32
    rotary dims); a fine-tune with rope_theta 1,000,000 (the report's model is not named: the value is chosen here)."""
    rotary = 32
    angle = torch.outer(torch.arange(256).float(), neox_inv_freq(rotary, 10000.0))
    cos = torch.ones(256, 80)
    cos[:, :rotary] = half_split(angle).cos()
    settings = rope_settings(head_dim=80, rotary_dim=rotary, base=1e6)
    assert names("rope_cos", cos.numpy(), settings)[0] == RC.base_off(10000.0, 1e6)


def test_ipex_llm_llama_ignores_config_rope_theta():
    """intel/ipex-llm PR #10787 (https://github.com/intel/ipex-llm/pull/10787), "use config rope_theta in llama": the
    optimized Llama rotary used the default base. A Llama 3 8B config (θ 500000, head 128); its angles."""
    angles = torch.outer(torch.arange(400).float(), neox_inv_freq(128, 10000.0)).numpy()
    assert names("rope_angles", angles, rope_settings(head_dim=128, base=500000.0))[0] == RC.base_off(10000.0, 500000.0)


def test_slime_glm_rope_theta_from_rope_parameters():
    """THUDM/slime PR #1720 (https://github.com/THUDM/slime/pull/1720): GLM-4.6V keeps rope_theta in the
    rope_parameters dict, and config.rope_theta returned the class default 10000 instead of 500000. The cache that
    default builds (head 128, half-split), checked against the config's."""
    assert names("rope_cos", llama_cos(700, 128, 10000.0), rope_settings(head_dim=128, base=500000.0))[0] == \
        RC.base_off(10000.0, 500000.0)


GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 64, "num_hidden_layers": 6, "intermediate_size": 512, "vocab_size": 100,
          "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 1024,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "max_position_embeddings": 131072}


def test_mlxcel_gemma3_global_layers_ignore_the_linear_factor():
    """lablup/mlxcel issue #1340 (https://github.com/lablup/mlxcel/issues/1340), fixed by PR #1386: Gemma 3 (4B and
    up) declares rope_scaling linear ×8 for its global layers; mlxcel parsed it and rotated every layer with scale
    1.0. Layer 5 (global, θ 10^6) of a Gemma 3 config, read through the model's plan (--config, --layer)."""
    report = cli("rope_cos", llama_cos(512, 64, 1e6), ["--layer", "5"], config=GEMMA3)
    assert causes(report)[0] == RC.SCALING_MISSING


def test_mlx_vlm_gemma3_global_layers_run_unscaled():
    """Blaizzy/mlx-vlm PR #1709 (https://github.com/Blaizzy/mlx-vlm/pull/1709): TextConfig declares rope_scaling but
    Attention built a plain nn.RoPE, "so global layers run unscaled positions (effective scale=1.0 where the model
    expects 1/8)". Gemma 3's layer 5, sin cache."""
    sin = half_split(torch.outer(torch.arange(400).float(), neox_inv_freq(64, 1e6))).sin().numpy()
    report = cli("rope_sin", sin, ["--layer", "5"], config=GEMMA3)
    assert causes(report)[0] == RC.SCALING_MISSING


def test_ferrox_gemma3_scales_the_sliding_layers_too():
    """antonellof/ferrox issue #39 (https://github.com/antonellof/ferrox/issues/39): the base varies per layer but the
    linear factor is global, "so Gemma-3 4B/12B/27B rotate their sliding-window layers at scaled positions where
    llama.cpp rotates them unscaled". Layer 0 (sliding, θ 10^4) with θ / 8."""
    report = cli("rope_cos", llama_cos(512, 64, 10000.0, divide=8.0), ["--layer", "0"], config=GEMMA3)
    assert causes(report)[0] == RC.scaling_where_none(8.0)


def t5_hf(n: np.ndarray, num_buckets: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    """Hugging Face's _relative_position_bucket, transcribed (n = memory − context position)."""
    n = torch.as_tensor(n)
    buckets = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        buckets += (n > 0).long() * num_buckets
        n = n.abs()
    else:
        n = -torch.min(n, torch.zeros_like(n))
    exact = num_buckets // 2
    large = exact + (torch.log(n.float() / exact) / math.log(max_distance / exact) * (num_buckets - exact)).long()
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return (buckets + torch.where(n < exact, n, large)).numpy()


def grid(length: int) -> np.ndarray:
    return np.arange(length)[None, :] - np.arange(length)[:, None]                       # [L, L] j − i


def test_transformers_t5_max_distance_fixed_at_128():
    """huggingface/transformers PR #16155 (https://github.com/huggingface/transformers/pull/16155): "it has fixed max
    distance and can't be configured" (128) although long-sequence users need another; a model trained with
    max_distance 512 (the PR's use case is protein sequences; the value is chosen here) run by the old code."""
    buckets = t5_hf(grid(300), 32, 128, True)
    assert names("t5", buckets, C.Settings(max_distance=512)) == ["max_distance = 128, not 512"]


def test_x_transformers_t5_num_buckets_fixed_at_32():
    """lucidrains/x-transformers PR #11 (https://github.com/lucidrains/x-transformers/pull/11): the T5 relative bias
    fixed max_distance at 128 and the bucket count at 32; the author "used 32 and 64" buckets at seq_len 512. A
    64-bucket model's map as the fixed code builds it (32)."""
    buckets = t5_hf(grid(200), 32, 128, True)
    assert names("t5", buckets, C.Settings(num_buckets=64))[0] == "num_buckets = 32, not 64"


def test_gluon_nlp_relative_position_as_query_minus_memory():
    """dmlc/gluon-nlp PR #1470 (https://github.com/dmlc/gluon-nlp/pull/1470): aligning with Mesh TensorFlow, it
    defines the relative position as mem_i − query_j "in lieu of previous query_i − mem_j". The previous sign, with
    T5's buckets (32, 128), over 64 positions."""
    buckets = t5_hf(-grid(64), 32, 128, True)
    assert names("t5", buckets, C.Settings())[0] == MK.SIGN


def test_flashinfer_alibi_slopes_from_the_local_head_count():
    """flashinfer-ai/flashinfer issue #1606 (https://github.com/flashinfer-ai/flashinfer/issues/1606) and PR #5101
    (https://github.com/flashinfer-ai/flashinfer/pull/5101): slopes come from get_alibi_slopes(num_qo_heads) of the
    local heads, "indexing heads from 0", so under tensor parallelism every rank but the first uses the wrong
    slopes. 32 heads over 4 ranks: rank 2's local head 1 is global head 17."""
    local = 2.0 ** (-8.0 * (1 + 1) / 8)                          # get_alibi_slopes(8)[1]
    bias = -local * np.abs(grid(24)).astype(np.float64)
    report = cli("alibi", bias, settings=C.Settings(num_heads=32, head=17))
    assert causes(report)[0] == "head = 7, not 17"  # the same slope as global head 7: one difference, not two
    assert "a shard's heads numbered from 0" in report["cause"]["explanation"]


def test_vllm_paged_attention_alibi_distance_off_by_one():
    """vllm-project/vllm PR #945 (https://github.com/vllm-project/vllm/pull/945): the decode kernel added
    alibi_slope * (token_idx - context_len) where the fix adds (token_idx - context_len + 1): the query is the last
    token, at context_len − 1. One decode row over 16 keys, 8 heads, head 0 (slope 1/2)."""
    keys = np.arange(16)
    row = 0.5 * (keys - 16).astype(np.float64)[None, :]
    assert names("alibi", row, C.Settings(num_heads=8, head=0, q_offset=15, causal=True))[0] == \
        "positions off by +1 (q_offset = 16, not 15)"


def test_coreai_models_partial_rotary_with_the_proportional_frequencies():
    """apple/coreai-models issue #66 (https://github.com/apple/coreai-models/issues/66): porting Gemma 4 (global
    layers: head_dim 512, partial_rotary_factor 0.25), a recipe folds the proportional factor into the composite
    RoPE as RoPE(base ** prf, dims=2 * rope_angles): its θ_i are base^(−2i/head_dim), the proportional rope's, but its
    pairs (i, i + dims/2) sit contiguously inside the first dims, passing the rest through. Checked against the
    settings a user gives relviz (head 512, 128 rotary dims, θ 10^6; relviz's partial rotary is the contiguous one,
    θ over the rotary dims: it has no proportional rope type), the difference is the exponent's denominator. Gemma 4's
    rope_theta for global layers is 10^6; 256 positions."""
    head_dim, prf, base = 512, 0.25, 1e6
    rope_angles = int(prf * head_dim // 2)                                         # 64 pairs
    inv_freq = 1.0 / (torch.tensor(base ** prf) ** (torch.arange(0, 2 * rope_angles, 2).float() / (2 * rope_angles)))
    cos = torch.ones(256, head_dim)
    cos[:, :2 * rope_angles] = half_split(torch.outer(torch.arange(256).float(), inv_freq)).cos()
    s = rope_settings(head_dim=head_dim, rotary_dim=2 * rope_angles, base=base)
    assert names("rope_cos", cos, s)[0] == RC.DENOM_HEAD
