"""relviz.rope: the rotation, its Toeplitz scores, the decay, and every scaling rule against transformers.

The exactness tests build the config.json a real checkpoint would carry, let transformers turn it
into its own config and rotary embedding module (LlamaRotaryEmbedding; Phi3RotaryEmbedding for
partial rotary and Phi-3's top-level original_max_position_embeddings), and require relviz's
inv_freq to be bit-identical and its attention scaling equal. Only that comparison is skipped
when transformers is absent.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.rope import (
    RopeConfig,
    RopeScaling,
    content_scores,
    decay_bound,
    decay_curves,
    decay_distances,
    load_presets,
    measured_decay,
    random_content,
    rope_config_from_hf,
    rope_parameters,
    rope_presets,
    rotate,
    rotated_scores,
    score_matrix,
    score_per_offset,
    turns_in_context,
    wavelengths,
    yarn_correction_range,
)
from relviz.rope.math import default_inv_freq

try:
    import transformers  # noqa: F401
    HAVE_TRANSFORMERS = True
except ImportError:  # the optional extra: only the comparisons below need it
    HAVE_TRANSFORMERS = False
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS,
                                        reason="transformers not installed (pip install 'relviz[hf]')")

EXAMPLES = 40  # per rule; the closing note quotes EXAMPLES × len(RULES) + PHI3_EXAMPLES
PHI3_EXAMPLES = 40
RULES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")

head_dims = st.sampled_from([4, 8, 16, 32, 64, 80, 96, 128, 256])
bases = st.one_of(st.sampled_from([10000.0, 500000.0, 1000000.0, 10000000.0]),
                  st.floats(min_value=2.0, max_value=1e7, allow_nan=False))
factors = st.one_of(st.sampled_from([1.0, 2.0, 4.0, 8.0, 32.0]), st.floats(min_value=1.0, max_value=64.0))
max_positions = st.sampled_from([16, 512, 2048, 4096, 8192, 32768, 131072])


@st.composite
def hf_configs(draw, rule: str, *, phi3: bool = False) -> tuple[dict, int | None]:
    """(a config.json dict, seq_len of a forward) for one scaling rule.

    ``phi3``: a partial rotary factor (Phi-3 for default/longrope, GPT-NeoX for the other rules)
    and, for longrope, Phi-3's top-level original_max_position_embeddings.
    """
    head_dim = draw(head_dims)
    heads = draw(st.sampled_from([1, 2, 4]))
    mpe = draw(max_positions)
    config: dict = {"hidden_size": head_dim * heads, "num_attention_heads": heads, "num_key_value_heads": heads,
                    "head_dim": head_dim, "max_position_embeddings": mpe, "rope_theta": draw(bases),
                    "intermediate_size": 8, "num_hidden_layers": 1, "vocab_size": 16}
    rotary = head_dim
    if phi3:
        config["partial_rotary_factor"] = draw(st.sampled_from([1.0, 0.5, 0.75, 0.25, 0.4]))
        rotary = int(head_dim * config["partial_rotary_factor"])
        if rotary < 4 or rotary % 2:
            config["partial_rotary_factor"] = 1.0
            rotary = head_dim
        config["rotary_pct"] = config["partial_rotary_factor"]  # GPT-NeoX's names for these two
        config["rotary_emb_base"] = config["rope_theta"]
    scaling: dict = {"rope_type": rule}
    seq_len = None
    if rule != "default":
        scaling["factor"] = draw(factors)
    if rule == "dynamic":
        seq_len = draw(st.integers(1, 4 * mpe))
    if rule == "yarn":
        if draw(st.booleans()):
            scaling["original_max_position_embeddings"] = draw(st.integers(16, mpe))
        for name, values in (("beta_fast", st.sampled_from([32, 16.0, 64])), ("beta_slow", st.sampled_from([1, 0.5, 2.0])),
                             ("attention_factor", st.floats(0.5, 2.0)), ("truncate", st.booleans())):
            if draw(st.booleans()):
                scaling[name] = draw(values)
        if draw(st.booleans()):
            scaling["mscale"] = draw(st.sampled_from([0.707, 1.0, 1.5]))
            scaling["mscale_all_dim"] = draw(st.sampled_from([0.707, 1.0, 0.0]))
    if rule == "llama3":
        low = draw(st.sampled_from([1.0, 0.5, 2.0]))
        scaling.update(low_freq_factor=low, high_freq_factor=low * draw(st.sampled_from([2.0, 4.0, 8.0])),
                       original_max_position_embeddings=draw(st.integers(16, mpe)))
    if rule == "longrope":
        del scaling["factor"]
        if draw(st.booleans()):
            scaling["factor"] = draw(factors)
        if draw(st.booleans()):
            scaling["attention_factor"] = draw(st.floats(0.5, 2.0))
        original = draw(st.integers(16, mpe))
        if phi3:
            config["original_max_position_embeddings"] = original
        else:
            scaling["original_max_position_embeddings"] = original
        factor_lists = st.lists(st.floats(1.0, 100.0), min_size=rotary // 2, max_size=rotary // 2)
        scaling.update(short_factor=draw(factor_lists), long_factor=draw(factor_lists))
        seq_len = draw(st.one_of(st.none(), st.integers(1, 2 * mpe)))
    if rule != "default" or draw(st.booleans()):
        config["rope_scaling"] = scaling
    return config, seq_len


def transformers_module(config: dict, *, phi3: bool):
    """transformers' own rotary embedding for this config.json, after a forward over seq_len positions."""
    import logging

    from transformers import GPTNeoXConfig, LlamaConfig, Phi3Config
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    logging.getLogger("transformers").setLevel(logging.ERROR)
    if phi3:
        rule = config.get("rope_scaling", {}).get("rope_type", "default")
        if rule in ("default", "longrope"):  # Phi-3's config accepts only these
            return Phi3RotaryEmbedding(Phi3Config.from_dict(copy.deepcopy(config)))
        return GPTNeoXRotaryEmbedding(GPTNeoXConfig.from_dict(copy.deepcopy(config)))
    return LlamaRotaryEmbedding(LlamaConfig.from_dict(copy.deepcopy(config)))


def check_against_transformers(config: dict, seq_len: int | None, *, phi3: bool = False) -> None:
    module = transformers_module(config, phi3=phi3)
    if seq_len is not None:
        x = torch.zeros(1, 1, 2)
        module(x, torch.tensor([[seq_len - 1]]))  # dynamic/longrope update inv_freq from max(position) + 1
    inv_freq, scaling = rope_parameters(rope_config_from_hf(config), seq_len, device="cpu")
    assert inv_freq.dtype == module.inv_freq.dtype == torch.float32
    assert torch.equal(inv_freq, module.inv_freq), (inv_freq - module.inv_freq).abs().max()
    assert scaling == pytest.approx(module.attention_scaling, rel=1e-15, abs=0)


@needs_transformers
@pytest.mark.parametrize("rule", RULES)
def test_inv_freq_and_attention_scaling_equal_transformers(rule):
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(hf_configs(rule))
    def check(case):
        check_against_transformers(*case)

    check()


@needs_transformers
@settings(max_examples=PHI3_EXAMPLES, deadline=None)
@given(st.sampled_from(RULES).flatmap(lambda r: hf_configs(r, phi3=True)))
def test_partial_rotary_and_phi3_original_length_equal_transformers(case):
    check_against_transformers(*case, phi3=True)


@needs_transformers
def test_rotate_matches_transformers_apply_rotary_pos_emb():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    config = RopeConfig(head_dim=16, base=500.0, scaling=RopeScaling("yarn", factor=4.0))
    inv_freq, scaling = rope_parameters(config, device="cpu")
    q, k = torch.randn(2, 1, 3, 7, 16, generator=torch.Generator().manual_seed(0)).unbind(0)  # [B, H, L, D]
    positions = torch.arange(7)
    freqs = positions[None, :, None].float() * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, emb.cos() * scaling, emb.sin() * scaling)
    assert torch.equal(rotate(q, positions, inv_freq, attention_scaling=scaling), q_ref)
    assert torch.equal(rotate(k, positions, inv_freq, attention_scaling=scaling), k_ref)


def test_default_frequencies_are_base_to_the_minus_2i_over_d():
    inv_freq, scaling = rope_parameters(RopeConfig(head_dim=8, base=10000.0), device="cpu")
    assert scaling == 1.0
    assert torch.allclose(inv_freq.double(), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64), rtol=1e-6)
    assert torch.allclose(wavelengths(inv_freq), 2 * math.pi / inv_freq)
    turns = turns_in_context(inv_freq, 2 * 314 + 1)  # positions 0..628: pair 1 (θ = 0.1) turns 10 times
    assert turns[1].item() == pytest.approx(628 * 0.1 / (2 * math.pi), rel=1e-6)


def test_partial_rotary_leaves_the_rest_unrotated():
    config = RopeConfig(head_dim=16, partial_rotary_factor=0.5)
    inv_freq = rope_parameters(config, device="cpu")[0]
    assert config.rotary_dim == 8 and inv_freq.shape == (4,)
    x = torch.randn(5, 16)
    out = rotate(x, torch.arange(5), inv_freq)
    assert torch.equal(out[:, 8:], x[:, 8:])
    assert not torch.allclose(out[1:, :8], x[1:, :8])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 24), st.sampled_from([8, 10, 16]), st.sampled_from([1.0, 0.5]), st.integers(0, 1000))
def test_scores_depend_only_on_the_offset(length, head_dim, partial, seed):
    """The brute-force L × L score matrix of rotated q, k equals the per-offset scores at j − i."""
    config = RopeConfig(head_dim=head_dim, base=50.0, partial_rotary_factor=partial)
    inv_freq = rope_parameters(config, device="cpu")[0]
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, head_dim, dtype=torch.float64, generator=generator)
    positions = torch.arange(length)
    rq = rotate(q.expand(length, head_dim).clone(), positions, inv_freq)
    rk = rotate(k.expand(length, head_dim).clone(), positions, inv_freq)
    brute = rq @ rk.T                                                                  # [L, L]
    offsets, per_offset = score_matrix(q, k, inv_freq, length)
    i, j = torch.meshgrid(positions, positions, indexing="ij")
    assert torch.equal(offsets, torch.arange(-(length - 1), length))
    assert torch.allclose(brute, per_offset[j - i + length - 1], atol=1e-5)  # cos/sin in float32, as in HF


def test_attention_scaling_multiplies_scores_by_its_square():
    inv_freq = rope_parameters(RopeConfig(head_dim=8), device="cpu")[0]
    q, k = torch.randn(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    offsets = torch.arange(-5, 6)
    plain = score_per_offset(q, k, inv_freq, offsets)
    assert torch.allclose(score_per_offset(q, k, inv_freq, offsets, attention_scaling=1.5), 2.25 * plain)


def test_decay_bound_starts_at_its_maximum_and_decays():
    inv_freq = rope_parameters(RopeConfig(head_dim=128), device="cpu")[0]
    offsets = torch.arange(0, 4096)
    bound = decay_bound(inv_freq, offsets)
    assert bound[0].item() == pytest.approx((64 + 1) / 2)  # mean of |S_j| = j over j = 1..64
    assert bound.argmax().item() == 0
    assert bound[1024:].mean() < 0.25 * bound[0]           # the long-term decay RoFormer plots (it oscillates)
    assert bound[1024:].max() < 0.5 * bound[0]


def test_measured_decay_identical_starts_at_one_random_stays_flat():
    inv_freq = rope_parameters(RopeConfig(head_dim=64), device="cpu")[0]
    offsets = torch.tensor([0, 1000, 2000])
    same = measured_decay(inv_freq, offsets, identical=True, samples=512)
    assert same[0].item() == pytest.approx(1.0, abs=0.05) and same[1:].abs().max() < 0.3
    independent = measured_decay(inv_freq, offsets, samples=512)
    assert (independent.max() - independent.min()) < 0.15 * independent.mean()


@pytest.mark.parametrize("preset, length, same", [("llama-3.1-8b", 131072, True), ("phi-3-mini-128k", 8192, False),
                                                   ("gemma-2-9b", 4096, False)])
def test_content_scores_are_toeplitz_and_equal_brute_force_rotation(preset, length, same):
    config = rope_presets()[preset][1]
    scores = content_scores(config, length, 40, same=same, seed=7)
    assert scores.per_offset.shape == (79,) and scores.window == 40
    inv_freq, scaling = rope_parameters(config, length, device="cpu")
    q, k = random_content(config.head_dim, same=same, seed=7)
    assert torch.equal(q, k) == same and q.norm().item() == pytest.approx(1.0)
    brute = rotated_scores(q, k, inv_freq, 40, attention_scaling=scaling)            # rotate at every position
    assert (brute - scores.matrix()).abs().max().item() == pytest.approx(scores.spread, abs=0)
    assert scores.spread < 1e-5                                                         # float32 cos/sin
    matrix = scores.matrix()
    for offset in (-39, -3, 0, 5, 39):
        assert torch.unique(torch.diagonal(matrix, offset)).numel() == 1
    if same:
        assert scores.per_offset[39].item() == pytest.approx(scaling ** 2)              # cos = 1 at j − i = 0


def test_a_smaller_window_is_the_top_left_block_with_its_own_check():
    """The page computes the largest window once and shows smaller ones as its head."""
    config = rope_presets()["phi-3-mini-128k"][1]
    full = content_scores(config, 8192, 64, same=False, seed=3)
    for window in (1, 2, 17, 64):
        direct, head = content_scores(config, 8192, window, same=False, seed=3), full.head(window)
        assert head.window == window
        assert (head.per_offset - direct.per_offset).abs().max().item() < 1e-12    # float64 sums' rounding
        assert head.spread == pytest.approx(direct.spread, abs=1e-12)      # same check, same block
        assert torch.equal(head.matrix(), full.matrix()[:window, :window])
    assert bool((full.spreads[1:] >= full.spreads[:-1]).all())
    with pytest.raises(ValueError, match="window"):
        full.head(65)


def test_every_preset_computes_the_pages_views_at_the_longest_length():
    longest = 1 << 20
    for preset_id, (_, config, _) in rope_presets().items():
        inv_freq, scaling = rope_parameters(config, longest, device="cpu")
        assert inv_freq.shape == (config.pairs,) and bool(torch.isfinite(inv_freq).all()) and scaling > 0
        scores = content_scores(config, longest, 16)
        assert scores.spread < 1e-5, preset_id
        curves = decay_curves(config, longest, points=64)
        assert all(bool(torch.isfinite(c).all()) for c in (curves.bound, curves.identical, curves.independent))


def test_decay_curves_start_at_one_and_mark_the_unscaled_bound_only_with_a_rule():
    llama31 = rope_presets()["llama-3.1-8b"][1]
    curves = decay_curves(llama31, 131072, points=50)
    assert torch.equal(curves.distances, decay_distances(131072, 50))
    assert curves.distances[:64].tolist() == list(range(1, 65)) and curves.distances[-1].item() == 131071
    assert bool((curves.distances.diff() > 0).all())
    for values in (curves.bound, curves.bound_unscaled, curves.identical, curves.independent):
        assert values.shape == curves.distances.shape
    assert 0.9 < curves.bound[0].item() <= 1.0 and curves.identical[0].item() == pytest.approx(1.0, abs=0.05)
    # Llama-3.1's low frequencies are divided by 8: its bound decays later than the unscaled one.
    assert curves.bound[-200:].mean() > curves.bound_unscaled[-200:].mean()
    plain = decay_curves(rope_presets()["qwen2.5-7b-instruct"][1], 64)
    assert plain.bound_unscaled is None and plain.distances.tolist() == list(range(1, 64))


@pytest.mark.parametrize("make, message", [
    (lambda: content_scores(RopeConfig(), 4096, 0), "window must be an integer"),
    (lambda: content_scores(RopeConfig(), 4096, 2000), "window must be an integer"),
    (lambda: content_scores("llama", 4096, 8), "config must be a RopeConfig"),
    (lambda: random_content(64, seed=-1), "seed must be an integer"),
    (lambda: random_content(1), "head_dim must be an integer"),
    (lambda: decay_distances(0), "length must be an integer"),
    (lambda: decay_distances(4096, points=1), "points must be an integer"),
    (lambda: decay_curves(RopeConfig(), 10 ** 9), "length must be an integer"),
])
def test_page_computations_refuse_bad_input_naming_the_parameter(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_llama31_preset_numbers():
    """Llama-3.1's rule keeps wavelengths below 8192/4 = 2048 and divides those above 8192 by 8."""
    config = RopeConfig(head_dim=128, base=500000.0, max_position_embeddings=131072,
                        scaling=RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                            original_max_position_embeddings=8192))
    scaled = rope_parameters(config, device="cpu")[0]
    plain = rope_parameters(RopeConfig(head_dim=128, base=500000.0), device="cpu")[0]
    wave = wavelengths(plain)
    assert torch.equal(scaled[wave < 2048], plain[wave < 2048])
    assert torch.allclose(scaled[wave > 8192], plain[wave > 8192] / 8)


def test_yarn_default_attention_factor():
    config = RopeConfig(head_dim=64, max_position_embeddings=4096, scaling=RopeScaling("yarn", factor=4.0))
    assert rope_parameters(config, device="cpu")[1] == pytest.approx(0.1 * math.log(4.0) + 1)
    low, high = yarn_correction_range(config)
    assert 0 <= low < high <= 63


@pytest.mark.parametrize("make, message", [
    (lambda: RopeConfig(head_dim=3), "head_dim"),
    (lambda: RopeConfig(base=1.0), "base must be a finite number > 1"),
    (lambda: RopeConfig(base=float("nan")), "base"),
    (lambda: RopeConfig(partial_rotary_factor=1.5), "partial_rotary_factor"),
    (lambda: RopeConfig(head_dim=4, partial_rotary_factor=0.25), "rotary dimensions"),
    (lambda: RopeScaling("ntk"), "rope_type must be one of"),
    (lambda: RopeScaling("linear"), "factor is required"),
    (lambda: RopeScaling("linear", factor=-2), "factor must be a finite number > 0"),
    (lambda: RopeScaling("llama3", factor=8, low_freq_factor=4, high_freq_factor=1,
                         original_max_position_embeddings=8192), "high_freq_factor must be ≥ low_freq_factor"),
    (lambda: RopeScaling("longrope", short_factor=[1.0], long_factor=None), "long_factor is required"),
    (lambda: RopeConfig(head_dim=8, scaling=RopeScaling("longrope", short_factor=[1.0] * 3,
                                                        long_factor=[1.0] * 4)), "short_factor must have"),
    (lambda: rope_parameters(RopeConfig(), 0), "seq_len must be an integer"),
    (lambda: rope_config_from_hf({"hidden_size": 64, "num_attention_heads": 4,
                                  "rope_scaling": {"type": "linear", "factor": 2, "bogus": 1}}), "bogus"),
])
def test_invalid_parameters_raise_value_error_naming_them(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_presets_read_and_match_the_published_settings():
    presets = rope_presets()
    label, llama31, source = presets["llama-3.1-8b"]
    assert "meta-llama/Llama-3.1-8B" in source
    assert (llama31.head_dim, llama31.base, llama31.scaling.rope_type, llama31.scaling.factor) == (128, 500000.0, "llama3", 8.0)
    assert llama31.original_max_position_embeddings == 8192
    for phi3_id in ("phi-3-mini-128k", "phi-3-vision-128k"):
        _, phi3, _ = presets[phi3_id]
        assert phi3.scaling.rope_type == "longrope" and len(phi3.scaling.long_factor) == phi3.pairs == 48
        assert phi3.original_max_position_embeddings == 4096 and phi3.max_position_embeddings == 131072
    # Phi-3-mini's June 2024 lists differ from the first release's (which Phi-3-vision kept)
    assert presets["phi-3-mini-128k"][1].scaling.long_factor[0] == 1.0700000524520874
    assert presets["phi-3-vision-128k"][1].scaling.long_factor[0] == 1.0299999713897705
    assert presets["qwen2.5-7b-instruct"][1].base == 1e6
    every = load_presets()
    assert all(entry["source"] and entry["model_id"] in entry["source"]
               for group in ("rope", "t5", "alibi") for entry in every[group])


@needs_transformers
@pytest.mark.parametrize("preset_id", ["phi-3-mini-128k", "phi-3-vision-128k"])
def test_phi3_presets_equal_transformers(preset_id):
    """The LongRoPE presets against transformers' Phi-3, short and long factors.

    transformers 5 refuses the published ``"type": "su"`` spelling (KeyError: it validates before it
    copies original_max_position_embeddings in), so transformers gets ``rope_type: longrope``.
    """
    entry = next(e for e in load_presets()["rope"] if e["id"] == preset_id)
    config = dict(entry["config"], num_hidden_layers=1, intermediate_size=8, vocab_size=16)
    scaling = {k: v for k, v in config["rope_scaling"].items() if k != "type"}
    config["rope_scaling"] = dict(scaling, rope_type="longrope")
    assert rope_config_from_hf(entry["config"]) == rope_config_from_hf(config)
    for seq_len in (None, 4096, 4097):
        check_against_transformers(config, seq_len, phi3=True)


def test_scaled_from_is_the_original_context_only_with_a_scaling():
    assert RopeConfig(max_position_embeddings=4096).scaled_from is None
    yarn = RopeConfig(max_position_embeddings=4096, scaling=RopeScaling("yarn", factor=4.0))
    assert yarn.scaled_from == 4096
    llama3 = RopeConfig(max_position_embeddings=131072, scaling=RopeScaling(
        "llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192))
    assert llama3.scaled_from == 8192


@needs_transformers
@pytest.mark.parametrize("d_model,n_heads,base", [(64, 4, 10000.0), (96, 2, 500.0), (32, 4, 1e6)])
def test_the_toy_models_rotation_is_transformers_llama_rotation_bit_for_bit(d_model, n_heads, base):
    """The toy model's RoPE runs relviz.mechanisms.rotation's Rotation, the mechanism a Llama's plan holds: in
    transformers' arithmetic of θ it turns q and k exactly as LlamaRotaryEmbedding and apply_rotary_pos_emb do (the
    same cos, sin and rotate_half); the toy keeps the arithmetic it was trained with (the next test)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from relviz.model import ModelConfig, build_model

    length = 40
    position = build_model(ModelConfig(d_model=d_model, n_heads=n_heads, scheme="rope", rope_base=base)).position
    rotation = dataclasses.replace(position.mechanism(0), reciprocal=True)
    head_dim = d_model // n_heads
    q, k = torch.randn(2, 3, n_heads, length, head_dim, generator=torch.Generator().manual_seed(1)).unbind(0)
    module = transformers_module({"hidden_size": d_model, "num_attention_heads": n_heads, "rope_theta": base,
                                  "max_position_embeddings": 64}, phi3=False)
    cos, sin = module(q, torch.arange(length)[None])                                  # [1, L, D_head] each
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    shared = rotation.prepare(length, q)
    assert torch.equal(rotation.turn(q, shared), q_ref)
    assert torch.equal(rotation.turn(k, shared), k_ref)


def test_the_two_arithmetics_of_theta_differ_by_one_ulp_and_the_toy_keeps_its_own(monkeypatch):
    """θ's default rule is written once (relviz.rope.math.default_inv_freq) in two arithmetics: transformers'
    1 / base^(2i/d) and base^(−2i/d), which relviz's toy rope was trained with. They differ by at most one float32
    ulp, in about a quarter of the pairs; on the shipped rope-shift checkpoint that moves the logits by ~1e-5, so
    the toy runs its own arithmetic and its outputs stay bit-identical (tests/test_shipped_outputs.py)."""
    from relviz.training.checkpoints import load_checkpoint

    differing = 0
    for dim in range(2, 258, 2):
        for base in (10.0, 500.0, 1e4, 5e5, 1e6):
            ours = default_inv_freq(dim, base, reciprocal=False)                       # [dim/2]
            transformers = default_inv_freq(dim, base)
            assert (ours.view(torch.int32) - transformers.view(torch.int32)).abs().max() <= 1, (dim, base)
            differing += int((ours != transformers).sum())
    assert differing > 1000
    model = load_checkpoint("rope-shift").model
    assert not model.position.mechanism(0).reciprocal
    tokens = torch.randint(0, model.config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        own, _ = model(tokens)                                                          # [1, L, V]
        toy = model.position.mechanism
        monkeypatch.setattr(model.position, "mechanism", lambda layer: dataclasses.replace(toy(layer), reciprocal=True))
        other, _ = model(tokens)
    moved = (own - other).abs().max().item()
    assert 0 < moved < 1e-4


def test_turning_in_context_counts_pairs_whose_wavelength_fits():
    from relviz.rope import turning_in_context
    inv_freq = torch.tensor([2 * math.pi / 10, 2 * math.pi / 100], dtype=torch.float64)  # wavelengths 10, 100
    turning, pairs, longest = turning_in_context(inv_freq, 11)   # positions 0..10: the first pair turns once
    assert (turning, pairs) == (1, 2) and longest == pytest.approx(100.0)
    assert turning_in_context(inv_freq, 10)[0] == 0 and turning_in_context(inv_freq, 101)[0] == 2
    with pytest.raises(ValueError, match="length"):
        turning_in_context(inv_freq, 0)


def test_every_rule_has_its_words_and_a_preset_its_line():
    from relviz.rope import ROPE_TYPES, RULE_TEXT, preset_caption, rope_presets
    assert set(RULE_TEXT) == set(ROPE_TYPES) and all(len(RULE_TEXT[r]) > 20 for r in ROPE_TYPES)
    for label, config, source in rope_presets().values():
        line = preset_caption(label, config, source)
        assert line.startswith(f"**{label}** — head dim {config.head_dim}, rotary dims {config.rotary_dim}")
        assert f"rule **{config.scaling.rope_type}**. Source: {source}." in line


def test_hand_set_config_follows_each_rules_table_entry():
    from relviz.rope import HAND_SET_RULES, hand_set_config
    plain = hand_set_config(64, 10000.0, "default", factor=8.0, original=2048)
    assert plain.scaling.rope_type == "default" and plain.max_position_embeddings == 2048
    linear = hand_set_config(64, 10000.0, "linear", factor=4.0, original=2048)
    assert (linear.scaling.factor, linear.max_position_embeddings) == (4.0, 2048)
    yarn = hand_set_config(64, 10000.0, "yarn", factor=4.0, original=2048, beta_fast=16.0, beta_slow=2.0,
                           low_freq_factor=9.0)
    assert (yarn.max_position_embeddings, yarn.scaling.original_max_position_embeddings) == (8192, 2048)
    assert (yarn.scaling.beta_fast, yarn.scaling.beta_slow) == (16.0, 2.0)
    llama3 = hand_set_config(64, 10000.0, "llama3", factor=8.0, original=1024, low_freq_factor=1.0,
                             high_freq_factor=4.0)
    assert (llama3.scaling.low_freq_factor, llama3.scaling.high_freq_factor) == (1.0, 4.0)
    assert llama3.scaled_from == 1024 and "longrope" not in HAND_SET_RULES
    with pytest.raises(ValueError, match="rule must be one of default, linear, dynamic, yarn, llama3"):
        hand_set_config(64, 10000.0, "longrope")


def test_the_wavelength_chart_draws_unscaled_markers_only_where_a_rule_moved_a_frequency():
    """Decided by the frequencies, not by the rule's name: a rule that leaves every θ as it was (dynamic NTK inside
    its original context) draws one set of markers; one that moves any θ draws the unscaled ones beside them."""
    import numpy as np

    from relviz.figures.rope import wavelength_figure
    plain = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    moved = plain.copy()
    moved[-4:] /= 8
    for inv_freq, rule, traces in ((plain, "default", 1), (plain.copy(), "dynamic", 1), (moved, "yarn", 2)):
        figure = wavelength_figure(inv_freq, plain, length=4096, original=2048, rule=rule)
        markers = [t for t in figure.data if t.mode == "markers"]
        assert len(markers) == traces, rule
