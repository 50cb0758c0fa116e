"""Fit, then explain: a mismatch gets the smallest set of differences that reproduces every compared cell, or
no cause at all (a partial fit says it is partial; the difference is described by its structure)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import relviz.check as C
from relviz.check import matrix_kinds as MK
from relviz.check.rope import rope_settings, variant_cache
from relviz.positions import alibi_slopes, t5_bucket_map


def offsets(q_len: int, k_len: int | None = None) -> np.ndarray:
    k_len = q_len if k_len is None else k_len
    return np.arange(k_len)[None, :] - np.arange(q_len)[:, None]                    # [q, k] j − i


def cli_json(capsys, tmp_path, array: np.ndarray, *args: str) -> dict:
    """``python -m relviz check FILE --json ...`` as a user runs it (relviz.__main__.main, in process)."""
    from relviz.__main__ import main

    path = tmp_path / "upload.npy"
    np.save(path, array)
    code = main(["check", str(path), "--json", *args])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["ok"] else 1)
    return report


@pytest.mark.parametrize("settings", [C.Settings(k=3), None], ids=["given k", "searched"])
def test_shaw_without_clipping_is_named_and_never_read_as_a_sign_flip(settings):
    result = C.check("shaw", offsets(12) + 3, settings)  # j − i + k, no clip: the wrong verdict
    assert result.cause.name == "no clipping"
    assert all("sign" not in c.name for c in result.causes) and result.closest is None


def test_a_setting_not_passed_on_is_the_cause_in_json(capsys, tmp_path):
    report = cli_json(capsys, tmp_path, t5_bucket_map(200, 200, max_distance=128, device="cpu").numpy(), "--kind", "t5",
                      "--max-distance", "64")
    assert report["cause"]["name"] == "max_distance = 128, not 64"
    assert "max_distance was not passed on" in report["cause"]["explanation"] and report["cause"]["explains"] == 1.0
    assert report["closest"] is None


@pytest.mark.parametrize("kind, got, settings, cause", [
    # two differences at once: no list of mistakes holds these
    ("t5", MK.t5_bucket_variant(-offsets(60), 32, 20, True), C.Settings(),
     "max_distance = 20, not 128 + sign flipped: i − j instead of j − i"),
    ("t5", MK.t5_bucket_variant(offsets(100), 32, 64, False), C.Settings(),
     "max_distance = 64, not 128 + bidirectional = False, not True"),
    ("t5", MK.t5_bucket_variant(offsets(150), 32, 128, True, clamp=False), C.Settings(),
     "no clamp to the last bucket"),
    ("alibi", 2 * MK._slopes(12)[3] * np.abs(offsets(20)), C.Settings(num_heads=12, head=3),
     "bias sign flipped and added twice"),
    ("alibi", -MK._slopes_naive(12)[4] * np.abs(offsets(20)), C.Settings(num_heads=12, head=3),
     "head = 4, not 3 + non-power-of-2 slopes: 2^(−8h/n) for every n"),
    ("relative", offsets(20).T + 2, C.Settings(), "sign flipped: i − j instead of j − i + values off by +2"),
    ("shaw", np.clip(offsets(20), -5, 5) + 5, C.Settings(k=3), "k = 5, not 3"),
])
def test_composed_differences_are_found_by_the_search(kind, got, settings, cause):
    result = C.check(kind, got, settings)
    assert not result.ok and result.cause.name == cause and result.cause.explains == 1.0


def test_settings_beyond_the_grid_are_found_by_the_search():
    result = C.check("t5", t5_bucket_map(300, 300, num_buckets=32, max_distance=300, device="cpu").numpy())
    assert result.ok and result.settings.max_distance == 300  # 300 is on no grid: read from the bucket edges


RNG = np.random.default_rng(31)


def _noise(x: np.ndarray) -> np.ndarray:
    return x + RNG.normal(0, 1e-3 * (np.abs(x).max() + 1), x.shape)


def _cells(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    compared = np.flatnonzero(np.tril(np.ones_like(x)) if x.ndim == 2 else np.ones_like(x))  # the skew: j ≤ i
    picked = RNG.choice(compared, max(1, x.size // 50), replace=False)
    y.flat[picked] += RNG.integers(1, 5, picked.size)
    return y


def _rows(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    rows = RNG.choice(x.shape[0], max(1, x.shape[0] // 10), replace=False)
    y[rows] = RNG.permutation(y[rows].ravel()).reshape(y[rows].shape) + RNG.integers(0, 3, y[rows].shape)
    return y


ROPE = rope_settings(head_dim=32, base=500000.0)
CLEAN = {
    "t5": (C.reference("t5", (40, 40), C.Settings()), C.Settings()),
    "shaw": (C.reference("shaw", (30, 30), C.Settings(k=4)), C.Settings(k=4)),
    "relative": (C.reference("relative", (20, 20), C.Settings()), C.Settings()),
    "alibi": (C.reference("alibi", (20, 20), C.Settings(num_heads=12, head=5)), C.Settings(num_heads=12, head=5)),
    "alibi_slopes": (alibi_slopes(12, device="cpu").double().numpy(), C.Settings()),
    "skew": (C.reference("skew", (12, 12), C.Settings()), C.Settings()),
    "rope_cos": (variant_cache("rope_cos", "", (96, 32), ROPE), ROPE),
    "rope_sin": (variant_cache("rope_sin", "", (96, 32), ROPE), ROPE),
}
CORRUPT = [(kind, how) for kind in CLEAN for how in (_noise, _cells, _rows)
           if not (how is _rows and CLEAN[kind][0].ndim == 1)]


@pytest.mark.parametrize("kind, corrupt", CORRUPT, ids=[f"{k}-{c.__name__[1:]}" for k, c in CORRUPT])
@pytest.mark.parametrize("searched", [False, True], ids=["given", "searched"])
def test_no_cause_is_named_for_random_corruption(kind, corrupt, searched):
    """Noise, random cells, random rows: nothing systematic, so no cause, no partial fit passed off as one, and the
    difference described by where it is."""
    clean, settings = CLEAN[kind]
    got = corrupt(np.asarray(clean, dtype=np.float64))
    result = C.check(kind, got, None if searched else settings)
    assert not result.ok and result.cause is None and not result.causes, result.verdict()
    assert result.closest is None or result.closest.explains < 1.0
    assert result.difference.startswith("The difference:") and "no cause is named" in result.verdict()


def test_a_partial_fit_says_so_and_is_never_the_cause():
    flipped = MK.t5_bucket_variant(-offsets(64), 32, 128, True)
    flipped[3, 40] += 1  # one cell nothing systematic explains
    result = C.check("t5", flipped, C.Settings())
    assert result.cause is None and result.closest.explains > 0.99 and "sign flipped" in result.closest.name
    assert "Partial:" in result.verdict() and "not the cause" in result.closest.explanation


def test_the_difference_names_rows_offsets_and_how():
    got = t5_bucket_map(30, 30, device="cpu").numpy()
    got[[4, 9]] += 2
    assert "every compared cell of i = 4, 9" in C.check("t5", got, C.Settings()).difference
    assert "a constant shift" in C.check("t5", got, C.Settings()).difference
    slopes = alibi_slopes(8, device="cpu").double().numpy()[[1, 0, 2, 3, 4, 5, 6, 7]]
    assert "permutation" in C.check("alibi_slopes", slopes, C.Settings()).difference


def test_a_closed_pipe_ends_the_output_quietly(tmp_path):
    """`python -m relviz check ... | head` where head has gone: no BrokenPipeError traceback, the exit status kept."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "bad.npy"
    got = t5_bucket_map(40, 40, device="cpu").numpy()
    got[::3] += 1
    np.save(path, got)
    for extra in ([],):  # one run (a fresh interpreter costs seconds); --json writes through the same _write
        child = subprocess.Popen([sys.executable, "-m", "relviz", "check", str(path), "--kind", "t5", *extra],
                                 cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        child.stdout.close()  # the reader is gone before relviz writes a byte
        err = child.stderr.read()
        assert child.wait(timeout=300) == 1
        assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()


def test_rope_settings_that_differ_are_found_with_a_named_mistake():
    s = rope_settings(head_dim=64, base=500000.0)
    swapped = variant_cache("rope_cos", "pair layout swapped (interleaved vs half-split)", (300, 64), s)
    result = C.check("rope_cos", swapped, rope_settings(head_dim=64))       # the user says base 10^4, half-split
    assert result.cause.name == "base = 500000, not 10000 + layout interleaved, not half"
    assert "rope_theta was not passed on" in result.cause.explanation
    bf16 = variant_cache("rope_cos", "angles computed in bfloat16", (600, 64), s)
    assert C.check("rope_cos", bf16, rope_settings(head_dim=64)).cause.name == \
        "base = 500000, not 10000 + angles computed in bfloat16"


def test_a_low_precision_step_says_how_large_the_error_is_and_where_positions_collapse():
    s = rope_settings(head_dim=64, base=500000.0)
    bf16 = variant_cache("rope_cos", "angles computed in bfloat16", (600, 64), s)
    reference = variant_cache("rope_cos", "", (600, 64), s)
    text = C.check("rope_cos", bf16, s).cause.explanation
    assert f"largest difference from the float32 reference is {np.abs(bf16 - reference).max():.3g}" in text
    assert "From position 256 on, neighbouring positions round to the same bfloat16 value" in text
    angles = variant_cache("rope_angles", "angles computed in bfloat16", (600, 32), s)
    np.testing.assert_array_equal(angles[256], angles[257])  # what the sentence says: 257 rounds to 256


def _cache_with(settings, rows: int, **recipe_changes) -> np.ndarray:
    """The cos cache at ``settings`` with the recipe changed (θ or the attention factor), as the mistake builds it."""
    from dataclasses import replace

    from relviz.check.rope import ROPE_KINDS, reference_recipe

    recipe = replace(reference_recipe(settings, rows), **recipe_changes)
    return ROPE_KINDS["rope_cos"].build(recipe, np.arange(rows), settings.head_dim).double().numpy()


def test_rope_scaling_parameters_are_read_from_the_data_or_varied():
    from dataclasses import replace

    from relviz.rope import RopeScaling, rope_parameters

    yarn = rope_settings(head_dim=64, base=1e6, max_position_embeddings=131072,
                         scaling=RopeScaling("yarn", factor=32.0, original_max_position_embeddings=4096))
    assert C.check("rope_cos", _cache_with(yarn, 200, scale=1.2345), yarn).cause.name == \
        "attention factor 1.2345, not 1.34657"
    betas = replace(yarn.config, scaling=replace(yarn.config.scaling, beta_fast=16.0))
    got = _cache_with(yarn, 200, inv_freq=rope_parameters(betas, 200, device="cpu")[0])
    assert C.check("rope_cos", got, yarn).cause.name.startswith("YaRN with beta_fast 16")
    dynamic = rope_settings(head_dim=64, base=1e4, max_position_embeddings=128, scaling=RopeScaling("dynamic", factor=2.0))
    got = _cache_with(dynamic, 300, inv_freq=rope_parameters(dynamic.config, 512, device="cpu")[0])
    assert C.check("rope_cos", got, dynamic).cause.name == "dynamic NTK evaluated at length 512, not 300"


def test_the_testing_asserts_carry_the_same_explanation():
    from relviz.testing import assert_matches, assert_t5_buckets_match

    with pytest.raises(AssertionError) as raised:
        assert_matches("shaw", offsets(12) + 3, C.Settings(k=3))
    expected = C.check("shaw", offsets(12) + 3, C.Settings(k=3))
    assert expected.verdict() in str(raised.value) and expected.cause.explanation in str(raised.value)

    def bucket_without_max_distance(relative_position, bidirectional, num_buckets, max_distance):
        from relviz.positions import t5_bucket

        return t5_bucket(relative_position, num_buckets=num_buckets, bidirectional=bidirectional)  # 128 always

    with pytest.raises(AssertionError, match="max_distance = 128, not 64"):
        assert_t5_buckets_match(bucket_without_max_distance, max_distance=64)
    noisy = _cells(np.asarray(CLEAN["t5"][0], dtype=np.float64))
    with pytest.raises(AssertionError, match="no cause is named.*The difference:"):
        assert_matches("t5", noisy, C.Settings())


def test_relative_positions_held_in_low_precision_are_named():
    import torch

    got = torch.as_tensor(offsets(4, 600)).to(torch.bfloat16).double().numpy()   # j − i up to 599, rounded
    assert C.check("relative", got, C.Settings()).cause.name == "relative positions in bfloat16"


@pytest.mark.parametrize("kind,layout,rotary", [("rope_cos", "half", 64), ("rope_sin", "interleaved", 64),
                                                ("rope_angles", "half", 64), ("rope_cos", "half", 48)])
def test_rope_base_rotary_dims_and_first_position_beyond_the_grid_are_read_from_the_data(capsys, tmp_path, kind,
                                                                                         layout, rotary):
    s = rope_settings(head_dim=64, base=31337.0, rotary_dim=rotary, layout=layout, q_offset=7)
    got = variant_cache(kind, "", (384, rotary // 2 if kind == "rope_angles" else 64), s)
    report = cli_json(capsys, tmp_path, got, "--kind", kind, "--head-dim", "64", "--base", "10000",
                      *(["--rotary-dim", str(rotary)] if kind == "rope_angles" else []))
    expected = ["base = 31337, not 10000"]
    expected += [f"rotary_dim = {rotary}, not 64"] if rotary != 64 and kind != "rope_angles" else []
    expected += ["layout interleaved, not half"] if layout == "interleaved" else []
    assert report["cause"]["name"] == " + ".join(expected + ["first position 7, not 0"])


def test_llama3_and_longrope_factors_beyond_the_grid_are_read_from_the_data():
    from relviz.rope import RopeScaling

    llama3 = RopeScaling("llama3", factor=16.0, original_max_position_embeddings=8192, low_freq_factor=2.0,
                         high_freq_factor=6.0)   # the grid holds factors 8 and 32 with low 1, high 4 only
    s = rope_settings(head_dim=128, base=500000.0, max_position_embeddings=8192, scaling=llama3)
    for kind, width in (("rope_angles", 64), ("rope_cos", 128)):
        got = variant_cache(kind, "", (4096, width), s)
        name = C.check(kind, got, rope_settings(head_dim=128, base=500000.0)).cause.name
        assert name == "scaling llama3 ×16 over 8192 (low_freq_factor 2, high_freq_factor 6), not none", kind
    factors = tuple(float(x) for x in np.linspace(1.0, 9.0, 32).round(3))
    longrope = RopeScaling("longrope", factor=1.0, original_max_position_embeddings=512, short_factor=factors,
                           long_factor=factors)
    s = rope_settings(head_dim=64, max_position_embeddings=4096, scaling=longrope)
    name = C.check("rope_angles", variant_cache("rope_angles", "", (512, 32), s), rope_settings(head_dim=64)).cause.name
    assert name.startswith("scaling longrope ×1 over 512 (factors per pair 1, 1.258, 1.516, 1.774, …), not none")


@pytest.mark.parametrize("got, cause", [
    (alibi_slopes(32, device="cpu").double().numpy()[8:16], "slopes of heads 8–15 of 32"),  # a shard's slice, 8 heads given
    (alibi_slopes(16, device="cpu").double().numpy()[:8], "slopes of heads 0–7 of 16"),
    (np.asarray([2.0 ** (-16 * h / 8) for h in range(1, 9)]), "alibi_bias_max = 16, not 8"),
    (alibi_slopes(12, float32_powers=True, device="cpu").double().numpy()[::-1] * -1,
     "heads in reverse order + slopes negated"),
], ids=["shard", "global count", "bias max", "reversed and negated"])
def test_alibi_slope_vectors_are_fit_then_explained(capsys, tmp_path, got, cause):
    report = cli_json(capsys, tmp_path, got, "--kind", "alibi_slopes")
    assert report["cause"]["name"] == cause


@pytest.mark.parametrize("flags, cause", [
    (dict(pad_right=True, drop_last=False, flip=True), "pad on the right + E_r in the opposite order"),
    (dict(pad_right=False, drop_last=True, transpose=True), "dropped the last row + transposed"),
    (dict(pad_right=False, drop_last=False, shift=1.0), "values off by +1"),
])
def test_skew_outputs_are_fit_then_explained(flags, cause):
    flags = dict(flags)
    shift, transpose = flags.pop("shift", 0.0), flags.pop("transpose", False)
    got = MK._skew_like(12, **flags) + shift
    got = got.T.copy() if transpose else got
    assert C.check("skew", got, C.Settings(full=True)).cause.name == cause


def test_t5_low_precision_steps_say_how_large_the_error_is_and_where_offsets_collapse():
    import torch

    from relviz.positions import t5_bucket
    from relviz.precision import t5_bucket_in_dtype

    n = torch.arange(-39, 100)                                                     # every j − i of a 40 × 100 map
    low, ref = t5_bucket_in_dtype(n, torch.bfloat16).numpy(), t5_bucket(n).numpy()
    wrong = np.flatnonzero(low != ref)
    assert wrong.size  # the step changes some buckets here, or the sentence below says nothing
    got = t5_bucket_in_dtype(torch.as_tensor(offsets(40, 100)), torch.bfloat16).numpy()
    text = C.check("t5", got, C.Settings()).cause.explanation
    nearest = int(n[wrong][np.argmin(np.abs(n[wrong].numpy()))])
    assert (f"{wrong.size} of your {n.numel()} offsets land in another bucket, by at most "
            f"{int(np.abs(low - ref).max())}; the nearest to 0 is j − i = {nearest}.") in text
    merged = [int(a) for a, lo0, lo1, r0, r1 in zip(n[:-1], low[:-1], low[1:], ref[:-1], ref[1:])
              if lo0 == lo1 and r0 != r1]
    first = min(merged, key=lambda a: min(abs(a), abs(a + 1)))
    assert f"share one bucket where float32 gives them two are j − i = {first} and {first + 1}." in text


def test_transformers_proportional_rope_is_said_to_be_right_for_its_models():
    """transformers' rope_type 'proportional' (Gemma 4's global layers): θ over head_dim for the first
    partial_rotary_factor · head_dim / 2 pairs, zero-padded, pairs (i, i + head_dim/2). relviz has no such rule: the
    cause it names says that this is the proportional rule and right for such a model."""
    import torch

    head_dim, base, angles = 512, 1e6, 64
    inv_freq = 1.0 / (base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).float() / head_dim))
    inv_freq = torch.cat([inv_freq, torch.zeros(head_dim // 2 - angles)])                  # as transformers pads it
    freqs = torch.outer(torch.arange(64).float(), inv_freq)
    cause = C.check("rope_cos", torch.cat([freqs, freqs], 1).cos().double().numpy(),
                    rope_settings(head_dim=head_dim, rotary_dim=2 * angles, base=base)).cause
    assert "'proportional' RoPE" in cause.explanation and "your cache is right" in cause.explanation


def test_a_searched_fit_lists_no_cause_that_only_adds_a_setting_changing_nothing_here():
    """The Check page's example 'T5 map, sign flipped' (16 × 16, settings searched) listed seven more causes, each
    'sign flipped' plus a max_distance (200, 103, 205) or num_buckets (33) that gives the same buckets at offsets
    ±15; the cause with the fewest differences stands alone."""
    got = C.kind_of("t5").variant("sign flipped: i − j instead of j − i", (16, 16), C.Settings())
    result = C.check("t5", got, None)
    assert [c.name for c in result.causes] == ["sign flipped: i − j instead of j − i"]
    from relviz.check.search import fewest

    a, b = (C.Cause(name, "", False, 1.0) for name in ("x", "x + y"))
    assert fewest([b, a]) == (a,) and fewest([a, C.Cause("y", "", False, 1.0)]) == (a, C.Cause("y", "", False, 1.0))


def test_a_negative_shift_is_written_with_a_true_minus():
    """The checker's words write a negative number as every number the app shows, with U+2212: "values off by −1"
    (it printed "-1"). A skew's output shifted down by one; a relative matrix shifted down by two."""
    skewed = C.check("skew", MK._skew_like(12, pad_right=False, drop_last=False) - 1.0, C.Settings(full=True)).cause
    assert skewed.name == "values off by −1" and "Every value is −1 from the skew's" in skewed.explanation
    relative = C.check("relative", offsets(20) - 2, C.Settings()).cause
    assert "values off by −2" in relative.name and "-2" not in relative.name + relative.explanation
