"""RoPE kinds of the checker: every named cause is planted in an independent transcription and named;
correct implementations pass; --fit finds the settings at every common base.

The transcriptions below are written from the papers and the reference code (numpy, float64), not from
relviz: a correct one must pass relviz's float32 reference within its tolerance.
"""
from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import relviz.check as C
from relviz.check import rope_causes as RC
from relviz.check.rope import rope_settings
from relviz.check.rope_model import settings_from_args, settings_from_config
from relviz.check.rope_fit import BASES
from relviz.rope import RopeScaling
from relviz.rope.config import PerLayerTypeRope, rope_config_from_hf


def theta(base: float, rotary_dim: int, denominator: float | None = None) -> np.ndarray:
    """θ_i = base^(−2i/d), i = 0..d/2 − 1 (Su et al.)."""
    return base ** (-np.arange(0, rotary_dim, 2) / (denominator or rotary_dim))


def cache(seq_len: int, head_dim: int, inv: np.ndarray, *, layout: str = "half", first: int = 0,
          scale: float = 1.0, start: int = 0, stride: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) [seq_len, head_dim] as a model multiplies them; pass-through dims hold cos 1, sin 0."""
    angle = np.arange(first, first + seq_len)[:, None] * inv[None, :]                  # [L, P]
    pairs = len(inv)
    cos, sin = np.ones((seq_len, head_dim)), np.zeros((seq_len, head_dim))
    for i in range(pairs):
        if layout == "half":
            a, b = start + i, start + i + (stride or pairs)
        else:
            a, b = start + 2 * i, start + 2 * i + 1
        cos[:, a] = cos[:, b] = np.cos(angle[:, i]) * scale
        sin[:, a] = sin[:, b] = np.sin(angle[:, i]) * scale
    return cos, sin


def yarn(base: float, dim: int, factor: float, original: int, beta_fast: float = 32, beta_slow: float = 1):
    """YaRN (Peng et al. 2023) as transformers' _compute_yarn_parameters: (θ [dim/2], attention factor)."""
    def correction_dim(turns):
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation = theta(base, dim)
    interpolation = extrapolation / factor
    return interpolation * ramp + extrapolation * (1 - ramp), 0.1 * math.log(factor) + 1


def named(kind: str, got: np.ndarray, settings) -> list[str]:
    result = C.check(kind, got, settings)
    assert not result.ok, result.verdict()
    return [c.name for c in result.causes]


# ---------------------------------------------------------------------------------------
# Correct implementations pass


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary", [64, 16])
def test_correct_caches_match(layout, rotary):
    cos, sin = cache(300, 64, theta(10000.0, rotary), layout=layout, first=5)
    s = rope_settings(head_dim=64, rotary_dim=rotary, layout=layout, q_offset=5)
    assert C.check("rope_cos", cos, s).ok and C.check("rope_sin", sin, s).ok
    angles = np.arange(5, 305)[:, None] * theta(10000.0, rotary)[None, :]
    assert C.check("rope_angles", angles, s).ok


def test_float64_at_long_positions_passes_and_a_bfloat16_stored_cache_is_named():
    """A float64 implementation differs from transformers' float32 angles by ~1e-3 at position 16k: still a match.
    "Matches" is the float32 reference within float32 rounding: a cache stored in bfloat16 is named (harmless:
    transformers casts cos and sin to a bfloat16 model's dtype), with its error and where positions collapse."""
    cos, _ = cache(16384, 8, theta(10000.0, 8))
    assert C.check("rope_cos", cos, rope_settings(head_dim=8)).ok
    ref = torch.as_tensor(cache(300, 32, theta(5e5, 32))[0]).float().bfloat16().double().numpy()
    for settings in (rope_settings(head_dim=32, base=5e5), None):
        result = C.check("rope_cos", ref, settings)
        assert not result.ok and result.cause.name == "stored in bfloat16" and result.cause.harmless
        assert "largest difference from the float32 reference is" in result.cause.explanation
        assert "neighbouring positions share one stored value" in result.cause.explanation


def test_scaled_configs_match_and_read_from_config_json():
    inv, attention = yarn(150000.0, 64, 32.0, 4096)
    cos, sin = cache(128, 64, inv, scale=attention)
    config = {"model_type": "gpt_oss", "head_dim": 64, "num_attention_heads": 64, "hidden_size": 2880,
              "num_hidden_layers": 2, "rope_theta": 150000, "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                               "beta_fast": 32.0, "beta_slow": 1.0}}
    s = settings_from_config(json.dumps(config))
    assert C.check("rope_cos", cos, s).ok and C.check("rope_sin", sin, s).ok
    gptj = settings_from_config({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_layer": 2,
                                 "n_positions": 2048})  # read through the model's plan: its layout is the plan's
    assert (gptj.layout, gptj.rotary_dim, gptj.head_dim) == ("interleaved", 64, 256)


# ---------------------------------------------------------------------------------------
# Every named cause, planted in an independent transcription


def test_layout_swapped_sin_cos_swapped_and_tables():
    s = rope_settings(head_dim=32)
    cos, sin = cache(40, 32, theta(10000.0, 32), layout="interleaved")
    assert RC.LAYOUT in named("rope_cos", cos, s)
    half_cos, half_sin = cache(40, 32, theta(10000.0, 32))
    assert RC.SWAP in named("rope_cos", half_sin, s)
    angle = np.arange(40)[:, None] * theta(10000.0, 32)[None, :]
    gptj_table = np.concatenate([np.sin(angle), np.cos(angle)], axis=1)  # GPT-J create_sinusoidal_positions
    assert RC.SINCOS in named("rope_cos", gptj_table, s)
    complex_real = np.stack([np.cos(angle), np.sin(angle)], axis=-1).reshape(40, 32)  # view_as_real(freqs_cis)
    assert RC.COMPLEX in named("rope_cos", complex_real, rope_settings(head_dim=32, layout="interleaved"))


def test_positions_from_1_and_base_off():
    s = rope_settings(head_dim=32, base=500000.0)
    cos, _ = cache(50, 32, theta(500000.0, 32), first=1)
    assert RC.FROM_1 in named("rope_cos", cos, s)
    cos, _ = cache(50, 32, theta(10000.0, 32))
    assert RC.base_off(10000.0, 500000.0) in named("rope_cos", cos, s)
    angles = np.arange(50)[:, None] * theta(10000.0, 32)[None, :]
    assert RC.base_off(10000.0, 500000.0) in named("rope_angles", angles, s)


def test_exponent_over_the_wrong_denominator():
    partial = rope_settings(head_dim=64, rotary_dim=16)
    cos, _ = cache(60, 64, theta(10000.0, 16, denominator=64))  # a GPT-NeoX port dividing by head_dim
    assert RC.DENOM_HEAD in named("rope_cos", cos, partial)
    s = rope_settings(head_dim=32)
    cos, _ = cache(60, 32, theta(10000.0, 32, denominator=30))
    assert RC.DENOM_MINUS_2 in named("rope_cos", cos, s)
    inv = 10000.0 ** (-np.arange(16) / 32)  # arange(d/2) / d: the pair index not doubled
    cos, _ = cache(60, 32, inv)
    assert RC.DENOM_NOT_DOUBLED in named("rope_cos", cos, s)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_angles_or_inv_freq_in_half_precision(dtype):
    s = rope_settings(head_dim=32)
    inv = (1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32))).to(dtype)
    t = torch.arange(300, dtype=dtype)                       # transformers' Llama before 4.32: t in inv_freq's dtype
    freqs = torch.einsum("i,j->ij", t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    assert RC.angles_in(dtype) in named("rope_cos", emb.float().cos().numpy(), s)
    assert RC.angles_in(dtype) in named("rope_sin", emb.sin().float().numpy(), s)  # sin in half, stored so
    freqs = torch.arange(300).float()[:, None] * inv.float()[None, :]  # θ cast with the model, positions float32
    emb = torch.cat((freqs, freqs), dim=-1)
    assert RC.inv_freq_in(dtype) in named("rope_cos", emb.cos().numpy(), s)


def test_scaling_missing_or_wrong_and_yarn_attention_factor():
    s = rope_settings(head_dim=64, base=150000.0, max_position_embeddings=131072,
                      scaling=RopeScaling("yarn", factor=32.0, original_max_position_embeddings=4096))
    inv, attention = yarn(150000.0, 64, 32.0, 4096)
    assert RC.SCALING_MISSING in named("rope_cos", cache(80, 64, theta(150000.0, 64))[0], s)
    assert RC.wrong_rule("linear") in named("rope_cos", cache(80, 64, theta(150000.0, 64) / 32)[0], s)
    assert RC.ATTN_MISSING in named("rope_cos", cache(80, 64, inv)[0], s)
    assert RC.ATTN_TWICE in named("rope_sin", cache(80, 64, inv, scale=attention ** 2)[1], s)
    assert C.check("rope_angles", np.arange(80)[:, None] * inv[None, :], s).ok  # angles carry no factor
    llama3 = rope_settings(head_dim=64, base=500000.0, scaling=RopeScaling(
        "llama3", factor=8.0, original_max_position_embeddings=8192, low_freq_factor=1.0, high_freq_factor=4.0))
    assert RC.wrong_rule("linear") in named("rope_cos", cache(80, 64, theta(500000.0, 64) / 8)[0], llama3)


def test_partial_rotary_over_the_wrong_dims():
    s = rope_settings(head_dim=64, rotary_dim=16)
    assert RC.PARTIAL_IGNORED in named("rope_cos", cache(50, 64, theta(10000.0, 64))[0], s)
    assert RC.PARTIAL_AT_END in named("rope_cos", cache(50, 64, theta(10000.0, 16), start=48)[0], s)
    assert RC.PARTIAL_SPLIT in named("rope_sin", cache(50, 64, theta(10000.0, 16), stride=32)[1], s)


def test_named_causes_are_all_exercised():
    """Each fixed cause name of rope_causes has a test here, in test_testing.py or test_check_public_mistakes.py."""
    here = __import__("pathlib").Path(__file__).parent
    text = "".join((here / name).read_text(encoding="utf-8") for name in ("test_check_rope.py", "test_testing.py",
                                                                                 "test_check_public_mistakes.py"))
    fixed = [name for name in dir(RC) if name.isupper() and isinstance(getattr(RC, name), str)]
    assert len(fixed) >= 13
    assert all(f"RC.{name}" in text for name in fixed)


# ---------------------------------------------------------------------------------------
# Finding the settings


@pytest.mark.parametrize("base", BASES)
def test_fit_finds_a_correct_cache_at_every_common_base(base):
    layout = "interleaved" if base > 1e6 else "half"
    cos, _ = cache(64, 32, theta(base, 32), layout=layout)
    result = C.check("rope_cos", cos)
    assert result.ok and result.fitted
    assert (result.settings.base, result.settings.layout, result.settings.rotary_dim) == (base, layout, 32)


def test_fit_finds_partial_rotary_scaling_and_named_mistakes():
    cos, _ = cache(100, 80, theta(10000.0, 32), layout="interleaved")  # Phi-2 style: 32 of 80 dims
    found = C.check("rope_cos", cos)
    assert found.ok and (found.settings.rotary_dim, found.settings.layout) == (32, "interleaved")
    inv, attention = yarn(10000.0, 32, 8.0, 2048)
    found = C.check("rope_cos", cache(100, 32, inv, scale=attention)[0])
    assert found.ok and found.settings.scaling == "yarn ×8 over 2048"
    found = C.check("rope_cos", cache(100, 32, theta(500000.0, 32), first=1)[0])
    assert found.cause.name == RC.FROM_1 and found.settings.base == 500000.0
    # Angles are large numbers: almost no cell of the right settings matches, so the mistakes are tried on the
    # candidates closest in mean |difference| (ranked by matching cells, a wrong base matching a few came first).
    angles = np.arange(1, 2049)[:, None] * theta(500000.0, 128)[None, :]
    found = C.check("rope_angles", angles)
    assert found.cause.name == RC.FROM_1 and found.settings.base == 500000.0


# ---------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize("got, settings, message", [
    (np.full((4, 8), np.nan), rope_settings(head_dim=8), "NaN"),
    (np.zeros((4, 6)), rope_settings(head_dim=8), "8 columns"),
    (np.zeros((4, 8)), C.Settings(), "RopeSettings"),
    (np.zeros(8), rope_settings(head_dim=8), "2-D"),
])
def test_bad_caches_are_refused(got, settings, message):
    with pytest.raises(ValueError, match=message):
        C.check("rope_cos", got, settings)


def test_bad_settings_and_configs_are_refused():
    with pytest.raises(ValueError, match="layout must be one of"):
        rope_settings(head_dim=8, layout="rotate_half")
    with pytest.raises(ValueError, match="rope_type must be one of"):
        settings_from_config({"head_dim": 8, "rope_scaling": {"rope_type": "magic", "factor": 2.0}})
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        rope_settings(head_dim=8, rotary_dim=5)
    with pytest.raises(ValueError, match="rows of the cache"):
        C.check("rope_cos", np.broadcast_to(np.ones(2), (100_000, 2)), rope_settings(head_dim=2))


# ---------------------------------------------------------------------------------------
# The command line


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    from relviz.__main__ import main

    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_rope_flags_config_fit_and_exit_codes(tmp_path, capsys):
    cos, sin = cache(128, 64, theta(500000.0, 64))
    np.save(tmp_path / "cos.npy", cos.astype(np.float32))
    code, out, _ = run_cli(capsys, str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--base", "500000")
    assert code == 0 and "Matches" in out
    code, out, _ = run_cli(capsys, str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--json")  # base 10^4
    report = json.loads(out)
    assert code == 1 and report["cause"]["name"] == RC.base_off(500000.0, 10000.0)
    assert report["first_mismatches"][0]["offset"] >= 0  # the frequency pair of the column
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 64,
                                  "num_hidden_layers": 2,
                                  "rope_theta": 500000.0}))
    code, out, _ = run_cli(capsys, str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--config", str(config))
    assert code == 0, out
    code, out, _ = run_cli(capsys, str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--fit")
    assert code == 0 and "base = 500000.0" in out and "settings found by search" in out
    config.write_text(json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "magic", "factor": 2}}))
    code, _, err = run_cli(capsys, str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--config", str(config))
    assert code == 2 and "rope_type must be one of" in err
    np.save(tmp_path / "nan.npy", np.full((4, 8), np.nan))
    code, _, err = run_cli(capsys, str(tmp_path / "nan.npy"), "--kind", "rope_cos")
    assert code == 2 and "NaN" in err


def test_a_sign_folded_sin_cache_is_named_harmless_and_compact_caches_get_a_hint():
    """Some implementations keep rotate_half's sign in the cache: sin = cat(−sin, sin) (half-split) or
    (−sin, sin) per adjacent pair; an equivalent convention if the rotation does not negate again."""
    angle = np.arange(30)[:, None] * theta(10000.0, 16)[None, :]
    signed = np.concatenate([-np.sin(angle), np.sin(angle)], axis=1)
    result = C.check("rope_sin", signed, rope_settings(head_dim=16))
    assert result.cause.name == RC.SIGNED_SIN and result.cause.harmless
    pairs = np.stack([-np.sin(angle), np.sin(angle)], axis=-1).reshape(30, 16)
    assert RC.SIGNED_SIN in named("rope_sin", pairs, rope_settings(head_dim=16, layout="interleaved"))
    with pytest.raises(ValueError, match="one column per pair"):
        C.check("rope_cos", np.cos(angle), rope_settings(head_dim=16))
    with pytest.raises(ValueError, match="give the layer"):
        settings_from_config({"model_type": "gemma3_text", "head_dim": 16, "num_hidden_layers": 6,
                              "num_attention_heads": 2, "hidden_size": 32, "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "default", "rope_theta": 1e6}}})


def test_a_bare_rope_block_nested_per_layer_type_asks_for_the_layer():
    """Without a model_type the RoPE reader raises its own type for parameters nested per layer type, and the
    checker turns that type, not the message's words, into "give the layer"; another bad field keeps its message."""
    nested = {"head_dim": 16, "rope_parameters": {"sliding_attention": {"rope_theta": 1e4},
                                                  "full_attention": {"rope_theta": 1e6}}}
    with pytest.raises(PerLayerTypeRope):
        rope_config_from_hf(nested)
    with pytest.raises(ValueError, match="nested per layer type.*: give the layer"):
        settings_from_config(nested)
    with pytest.raises(ValueError, match="rope_scaling must be a mapping") as info:
        settings_from_config({"head_dim": 16, "rope_scaling": 3})
    assert "give the layer" not in str(info.value)


def test_a_config_file_is_parsed_once_for_both_paths(tmp_path):
    """--config with and without --layer, and a config's text, go through relviz.hf's one parse: the same words."""
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    for layer in (None, 0):
        args = SimpleNamespace(config=str(path), layer=layer, layout=None, q_offset=0)
        with pytest.raises(ValueError, match=rf"^--config {re.escape(str(path))} must hold a JSON object; got list$"):
            settings_from_args(None, args, None)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="--config .* is not valid JSON"):
        settings_from_args(None, SimpleNamespace(config=str(path), layer=0, layout=None, q_offset=0), None)
    with pytest.raises(ValueError, match="^config must hold a JSON object; got list$"):
        settings_from_config("[1, 2]")
    assert settings_from_config(json.dumps({"head_dim": 16, "rope_theta": 500.0})).config.base == 500.0


def test_per_layer_settings_from_the_models_plan():
    """Gemma 3: sliding layers θ 10^4, the full layer θ 10^6 with linear ×8 (the README's plan example)."""
    from relviz.check.rope_model import settings_for_model

    gemma3 = {"model_type": "gemma3_text", "num_hidden_layers": 6, "num_attention_heads": 8, "head_dim": 32,
              "hidden_size": 256, "sliding_window": 1024, "max_position_embeddings": 131072,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                  "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
    local, full = settings_for_model(gemma3, 0), settings_for_model(gemma3, 5)
    assert (local.base, local.scaling, full.base, full.scaling) == (10000.0, "none", 1e6, "linear ×8")
    cos_full = cache(40, 32, theta(1e6, 32) / 8)[0]
    assert C.check("rope_cos", cos_full, full).ok
    assert RC.SCALING_MISSING in named("rope_cos", cache(40, 32, theta(1e6, 32))[0], full)


# ---------------------------------------------------------------------------------------
# Every cause is found wherever it applies (relviz's own builds; the transcriptions above are independent)

from hypothesis import HealthCheck, given, settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from relviz.check.rope import ROPE_KINDS, variant_cache  # noqa: E402
from relviz.check.rope_causes import variants  # noqa: E402


@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(ROPE_KINDS)), head=st.sampled_from([8, 16, 32]), partial=st.booleans(),
       layout=st.sampled_from(["half", "interleaved"]), base=st.sampled_from(BASES[:6]), q_offset=st.integers(0, 5),
       rows=st.integers(8, 48), rule=st.sampled_from(["none", "linear", "yarn"]))
def test_every_cause_that_changes_the_cache_is_named(kind, head, partial, layout, base, q_offset, rows, rule):
    scaling = {"none": None, "linear": RopeScaling("linear", factor=4.0),
               "yarn": RopeScaling("yarn", factor=8.0, original_max_position_embeddings=16)}[rule]
    s = rope_settings(head_dim=head, rotary_dim=head // 2 if partial else head, layout=layout, base=base,
                      q_offset=q_offset, scaling=scaling, max_position_embeddings=64)
    width = ROPE_KINDS[kind].width_of(s)
    for cause in dict.fromkeys(c.name for c, _ in variants(ROPE_KINDS[kind], s, rows)):
        planted = variant_cache(kind, cause, (rows, width), s)
        result = C.check(kind, planted, s)
        assert result.ok or cause in [c.name for c in result.causes], (cause, result.verdict())


def test_fit_refuses_a_shape_no_setting_gives_with_a_message():
    """A width that no head_dim or pair count gives (found by the page's control sweep: an IndexError)."""
    import numpy as np

    from relviz.check.rope_fit import fit

    for shape in [(1, 33), (3, 1)]:
        with pytest.raises(ValueError, match="no RoPE settings on the search grid"):
            fit("rope_sin", np.random.default_rng(0).random(shape))


def test_every_cache_layout_the_checker_compares_has_its_words():
    from relviz.rope.math import CACHE_LAYOUT_WORDS, CACHE_LAYOUTS
    assert tuple(CACHE_LAYOUT_WORDS) == CACHE_LAYOUTS
    assert "(i, i + d/2)" in CACHE_LAYOUT_WORDS["half"] and "(2i, 2i + 1)" in CACHE_LAYOUT_WORDS["interleaved"]
