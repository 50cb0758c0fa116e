"""relviz.check and `python -m relviz check`: reading uploads, comparing, naming causes by computing them."""
from __future__ import annotations

import io
from dataclasses import replace
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relviz.check import matrix as C, matrix_kinds as MK
from relviz.check import MAX_BYTES, SIGN, Settings, check, load_matrix, reference, variant_matrix
from relviz.positions import alibi_bias, alibi_slopes, relative_positions, shaw_clip_index, t5_bucket, t5_bucket_map
from relviz.skew import skew

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


# ---------------------------------------------------------------------------------------
# References are relviz's own functions


def test_references_are_the_library_matrices():
    s = Settings(q_offset=2, k=3, num_buckets=16, max_distance=40, bidirectional=False, num_heads=12, head=7)
    np.testing.assert_array_equal(reference("relative", (5, 9), s),
                                  relative_positions(5, 9, q_offset=2, device="cpu").numpy())
    np.testing.assert_array_equal(reference("shaw", (5, 9), s),
                                  shaw_clip_index(5, 9, k=3, q_offset=2, device="cpu").numpy())
    np.testing.assert_array_equal(
        reference("t5", (5, 9), s),
        t5_bucket_map(5, 9, num_buckets=16, max_distance=40, bidirectional=False, q_offset=2, device="cpu").numpy())
    np.testing.assert_allclose(reference("alibi", (5, 9), s),
                               alibi_bias(5, 9, num_heads=12, q_offset=2, device="cpu")[7].numpy(), rtol=1e-6)
    np.testing.assert_allclose(reference("alibi_slopes", (12,), s), alibi_slopes(12, device="cpu").numpy(), rtol=1e-6)
    qer = torch.arange(36.0).reshape(6, 6)
    np.testing.assert_array_equal(reference("skew", (6, 6), s), skew(qer).numpy())


@settings(max_examples=25, deadline=None)
@given(nb=st.integers(2, 128), md=st.integers(1, 1024), bidir=st.booleans())
def test_t5_variant_with_no_flag_is_hugging_face(nb, md, bidir):
    if not MK.t5_ok(nb, md, bidir):
        return
    n = torch.arange(-1100, 1101)
    np.testing.assert_array_equal(MK.t5_bucket_variant(n.numpy(), nb, md, bidir),
                                  t5_bucket(n, num_buckets=nb, max_distance=md, bidirectional=bidir).numpy())


def test_t5_causes_use_the_documented_edges():
    """Mesh TensorFlow's reciprocals and the bfloat16 log (relviz.precision) are named where they differ."""
    edge = Settings(num_buckets=34, max_distance=27)
    mesh = variant_matrix("t5", "Mesh TensorFlow vs Hugging Face float32 edge", (1, 40), replace(edge, q_offset=18))
    assert mesh[0, 0] == 14 and reference("t5", (1, 40), replace(edge, q_offset=18))[0, 0] == 13  # j − i = −18
    bf16 = variant_matrix("t5", "log in bfloat16", (1, 401), Settings(q_offset=200))
    changed = np.flatnonzero(bf16[0] != reference("t5", (1, 401), Settings(q_offset=200))[0]) - 200
    assert sorted(set(np.abs(changed).tolist())) == [16, 32, 90]


# ---------------------------------------------------------------------------------------
# Every named cause is found when it is the mistake (property test)

SHAPES = st.tuples(st.integers(2, 24), st.integers(2, 24))


def _settings_for(kind: str, data, shape) -> Settings:
    q_len, k_len = shape
    q_offset = data.draw(st.sampled_from(sorted({0, k_len - q_len})))
    if kind == "shaw":
        return Settings(q_offset=q_offset, k=data.draw(st.integers(0, 12)))
    if kind == "t5":
        bidir = data.draw(st.booleans())
        nb = data.draw(st.integers(4, 64))
        md = data.draw(st.integers(nb // (4 if bidir else 2) + 1, 200))
        return Settings(q_offset=q_offset, num_buckets=nb, max_distance=md, bidirectional=bidir)
    if kind == "alibi":
        heads = data.draw(st.integers(1, 24))
        return Settings(q_offset=q_offset, num_heads=heads, head=data.draw(st.integers(0, heads - 1)),
                        causal=data.draw(st.booleans()))
    return Settings(q_offset=q_offset)


CASES = [(kind, variant.name) for kind, variants in MK.VARIANTS.items() for variant in variants]


@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}:{n[:30]}" for k, n in CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_named_cause_is_found_by_computing_it(kind, name, data):
    shape = data.draw(SHAPES)
    if kind == "skew":
        shape = (shape[0], shape[0])
    if kind == "alibi_slopes":
        shape = (data.draw(st.integers(1, 40)),)
    s = Settings() if kind in ("skew", "alibi_slopes") else _settings_for(kind, data, shape)
    if name == MK.SEED_NOTEBOOK:
        s = Settings(q_offset=s.q_offset, k=data.draw(st.integers(1, 40)))  # max_position
    faulty = variant_matrix(kind, name, shape, s)
    if faulty is None:
        return  # the mistake does not exist here (e.g. the other alignment when q_len == k_len)
    result = check(kind, faulty, s)
    if np.array_equal(np.asarray(faulty, dtype=float)[result.compared], result.expected[result.compared]):
        assert result.ok  # the mistake makes no difference at these settings
        return
    if kind == "t5" and name != MK.SEED_NOTEBOOK:
        faulty = faulty.astype(np.int64)
    result = check(kind, faulty, s)
    assert not result.ok
    assert name in [cause.name for cause in result.causes], (result.verdict(), s)
    assert result.first and all(m.expected != m.got for m in result.first)


def test_first_mismatches_carry_i_j_offset_expected_got():
    faulty = variant_matrix("t5", "log in bfloat16", (40, 100), Settings())
    result = check("t5", faulty, Settings())
    first = result.first[0]
    assert (first.i, first.j, first.offset, first.expected, first.got) == (0, 16, 16, 26, 25)
    assert result.mismatches == int((faulty != t5_bucket_map(40, 100, device="cpu").numpy()).sum())
    assert result.cause.name == "log in bfloat16" and not result.cause.harmless


def test_causal_alibi_ignores_the_masked_triangle():
    bias = alibi_bias(6, 6, num_heads=8, device="cpu")[3].numpy()
    bias[np.triu_indices(6, 1)] = -np.inf
    assert not check("alibi", bias, Settings(num_heads=8, head=3)).ok
    assert check("alibi", bias, Settings(num_heads=8, head=3, causal=True)).ok


# ---------------------------------------------------------------------------------------
# Finding the settings


def test_fit_recovers_settings_and_causes():
    result = check("t5", t5_bucket_map(20, 20, num_buckets=16, max_distance=64, bidirectional=False,
                                       device="cpu").numpy())
    assert result.ok and result.fitted
    assert (result.settings.num_buckets, result.settings.max_distance, result.settings.bidirectional) == \
        (16, 64, False) or np.array_equal(result.expected, result.got)
    flipped = variant_matrix("t5", SIGN, (24, 24), Settings())
    result = check("t5", flipped)
    assert result.cause.name == SIGN and (result.settings.num_buckets, result.settings.max_distance) == (32, 128)
    shaw = check("shaw", shaw_clip_index(9, 9, k=4, device="cpu").numpy())
    assert shaw.ok and shaw.settings.k == 4
    slopes = check("alibi_slopes", MK._slopes_naive(12))
    assert slopes.cause.name.startswith("non-power-of-2 slopes: 2^(−8h/n)")
    last = check("relative", relative_positions(4, 10, q_offset=6, device="cpu").numpy())
    assert last.ok and last.settings.q_offset == 6


class _Counted:
    """Counts what the settings search really builds: references, named mistakes, full comparisons."""

    def __init__(self, monkeypatch, kind: str):
        self.references = self.variants = self.compares = 0
        reference_of, variants_of, compare_of = C.MATRIX_KINDS[kind].reference, C._variants, C.compare

        def counted_reference(*args):
            self.references += 1
            return reference_of(*args)

        def counted_variants(*args):
            for item in variants_of(*args):
                self.variants += 1
                yield item

        def counted_compare(*args, **kwargs):
            self.compares += 1
            return compare_of(*args, **kwargs)

        monkeypatch.setitem(C.MATRIX_KINDS, kind, replace(C.MATRIX_KINDS[kind], reference=counted_reference))
        monkeypatch.setattr(C, "_variants", counted_variants)
        monkeypatch.setattr(C, "compare", counted_compare)


def _toeplitz(values: np.ndarray, q_len: int, k_len: int) -> np.ndarray:
    return values[np.arange(k_len)[None, :] - np.arange(q_len)[:, None] + q_len - 1]


def test_settings_search_is_bounded_by_work_on_the_worst_input(monkeypatch):
    # Worst case: a non-square matrix that is Toeplitz (so an exact fit cannot be ruled out) with T5-like
    # values reaching bucket 61 (the widest num_buckets range), but no setting or named mistake fits.
    rng = np.random.default_rng(0)
    junk = _toeplitz(rng.integers(0, 62, 6 + 9 - 1), 6, 9)
    monkeypatch.setattr(C, "FIT_MAX_EVALUATIONS", 400)  # the real bound, reached faster
    counted = _Counted(monkeypatch, "t5")
    work = C.FitWork()
    result = C.fit("t5", junk, work=work)
    built = counted.references + counted.variants
    assert work.capped and work.evaluations <= C.FIT_MAX_EVALUATIONS
    assert built <= C.FIT_MAX_EVALUATIONS + 1 + len(MK.VARIANTS["t5"])  # + the final comparison's own
    assert counted.compares <= 2 and not result.ok and "work bound" in result.note
    # Without the bound this input built every reference and every named mistake of ~3,000 settings.
    assert len(C.fit_candidates("t5", junk)) * len(MK.VARIANTS["t5"]) > 4 * C.FIT_MAX_EVALUATIONS


def test_settings_search_rejects_a_non_toeplitz_upload_before_building_mistakes(monkeypatch):
    junk = np.random.default_rng(1).integers(0, 64, (40, 40))
    assert not C.exact_fit_possible("t5", junk)
    counted = _Counted(monkeypatch, "t5")
    work = C.FitWork()
    result = C.fit("t5", junk, work=work)
    assert counted.variants <= 2 * len(MK.VARIANTS["t5"])  # the final comparison's own (seed table: 2 sizes)
    assert counted.compares == 1 and not work.capped and not result.ok  # only the final comparison
    assert counted.references - 1 == work.evaluations <= len(C.fit_candidates("t5", junk))  # − the final one
    assert not C.exact_fit_possible("shaw", np.full((3, 3), 0.5))  # an index holds integers


def _causal_alibi() -> np.ndarray:
    bias = alibi_bias(5, 8, num_heads=64, q_offset=3, device="cpu")[63].numpy()  # head 63 of 64: slope 2^−8
    return np.where(np.arange(8)[None, :] > np.arange(5)[:, None] + 3, -np.inf, bias)


@pytest.mark.parametrize("kind, matrix, found", [
    # Among the last settings each search reaches: q_offset = k_len − q_len, causal / unidirectional.
    ("alibi", _causal_alibi(), dict(q_offset=3, causal=True)),
    ("t5", t5_bucket_map(70, 75, num_buckets=64, max_distance=1024, bidirectional=False, q_offset=5,
                         device="cpu").numpy(), dict(q_offset=5, bidirectional=False)),
])
def test_settings_search_stays_exact_for_valid_uploads_within_its_bound(kind, matrix, found):
    work = C.FitWork()
    result = C.fit(kind, matrix, work=work)
    assert result.ok and not work.capped and work.evaluations > 100  # a long search, still inside the bound
    assert np.array_equal(result.expected[result.compared], matrix[result.compared])
    assert {name: getattr(result.settings, name) for name in found} == found


# ---------------------------------------------------------------------------------------
# Reading files


def test_reads_npy_csv_headers_and_pasted_prints():
    matrix = t5_bucket_map(5, 7, device="cpu").numpy()
    np.testing.assert_array_equal(load_matrix(npy(matrix)), matrix)
    csv_text = "\n".join(",".join(map(str, row)) for row in matrix)
    np.testing.assert_array_equal(load_matrix(csv_text.encode()), matrix)
    header = "," .join(f"j={j}" for j in range(7)) + "\n" + csv_text
    np.testing.assert_array_equal(load_matrix(header.encode()), matrix)
    labelled = "i\\j," + ",".join(map(str, range(7))) + "\n" + "\n".join(
        f"{i}," + ",".join(map(str, row)) for i, row in enumerate(matrix))
    np.testing.assert_array_equal(load_matrix(labelled.encode()), matrix)
    np.testing.assert_array_equal(load_matrix(str(torch.as_tensor(matrix)).encode()), matrix)
    np.testing.assert_array_equal(load_matrix(np.array2string(matrix).encode()), matrix)
    floats = load_matrix(b"0.5,-1\n-inf,2.25")
    assert floats.dtype == np.float64 and floats[1, 0] == -np.inf
    assert load_matrix(b"1.0 2.0\n3.0 4.0").dtype == np.int64


@pytest.mark.parametrize("data,message", [
    (b"", "empty"),
    (b"   \n ", "empty"),
    (npy(np.array([[1, 2]], dtype=object)), "Python objects"),
    (pickle.dumps(np.eye(3)), "never unpickles"),
    (npy(np.zeros((2, 3, 4))), "3 dimensions"),
    (npy(np.zeros((0, 3))), "empty"),
    (npy(np.array(3.0)), "0-D"),
    (npy(np.zeros((600, 2))), "at most 512"),
    (npy(np.array([[1 + 2j]])), "dtype complex"),
    (npy(np.array([[True]])), "dtype bool"),
    (npy(np.array([[1.0, np.nan]])), "NaN"),
    (npy(np.array([[np.inf]])), r"\+inf"),
    (b"1,2,3\n4,5\n", "ragged"),
    (b"1,2\nx,4\n", "not a number"),
    (b"1,2\n3,nan\n", "NaN"),
    (b"PK\x03\x04rest", "zip archive"),
    (b"\x93NUMPY\x01\x00garbage", "not a readable .npy"),
    (b"\xff\xfe1,2", "neither"),
    (b"1" * (MAX_BYTES + 1), "at most"),
    (("1," * 600 + "1\n").encode(), "at most 512"),
    (("9" * 30 + ",1").encode(), "±2\\^53"),
    (("9" * 300 + ",1").encode(), "not a number"),
    (("9" * 5000).encode(), "not a number"),
    (npy(np.array([[2**60]])), "±2\\^53"),
    (npy(np.array([[1e300]])), "±2\\^53"),
], ids=lambda value: value[:24].hex() if isinstance(value, bytes) else "")
def test_malformed_files_get_a_clear_message(data, message):
    with pytest.raises(ValueError, match=message):
        load_matrix(data)


def test_settings_and_shapes_are_validated():
    with pytest.raises(ValueError, match="kind must be one of"):
        check("rope", np.zeros((2, 2)), Settings())
    with pytest.raises(ValueError, match="num_buckets"):
        check("t5", np.zeros((2, 2), dtype=np.int64), Settings(num_buckets=3))
    with pytest.raises(ValueError, match="head must be"):
        check("alibi", np.zeros((2, 2)), Settings(num_heads=4, head=4))
    with pytest.raises(ValueError, match="square"):
        check("skew", np.zeros((2, 3)), Settings())
    with pytest.raises(ValueError, match="2-D matrix"):
        check("t5", np.zeros(4, dtype=np.int64), Settings())


# ---------------------------------------------------------------------------------------
# The command line


def run_cli(capsys, *args: str, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """The check subcommand through relviz.__main__.main, in process (a subprocess imports every
    subcommand's module: seconds per call)."""
    from relviz.__main__ import main

    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes_and_json(tmp_path, capsys, monkeypatch):
    good, bad = tmp_path / "good.npy", tmp_path / "bad.csv"
    np.save(good, t5_bucket_map(16, 16, device="cpu").numpy())
    faulty = variant_matrix("t5", "bidirectional vs unidirectional", (16, 16), Settings())
    bad.write_text("\n".join(",".join(map(str, row)) for row in faulty))
    code, out, _ = run_cli(capsys, str(good), "--kind", "t5", "--num-buckets", "32", "--max-distance", "128")
    assert code == 0 and "Matches" in out
    code, out, _ = run_cli(capsys, str(bad), "--kind", "t5", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["cause"]["name"] == "bidirectional vs unidirectional"
    assert report["first_mismatches"][0] == {"i": 0, "j": 1, "offset": 1, "expected": 17, "got": 0}
    code, out, _ = run_cli(capsys, "-", "--kind", "relative", "--fit", stdin=b"0,1\n-1,0\n", monkeypatch=monkeypatch)
    assert code == 0 and "Matches" in out
    code, _, err = run_cli(capsys, str(tmp_path / "missing.npy"), "--kind", "t5")
    assert code == 2 and "not a readable file" in err
    (tmp_path / "p.pkl").write_bytes(pickle.dumps([1, 2]))
    code, out, _ = run_cli(capsys, str(tmp_path / "p.pkl"), "--kind", "t5", "--json")
    assert code == 2 and "never unpickles" in json.loads(out)["error"]


def test_python_m_relviz_check_runs(tmp_path):
    """One real `python -m relviz check` run: the COMMANDS entry, the exit status, the cause on stdout."""
    path = tmp_path / "flipped.npy"
    np.save(path, variant_matrix("relative", SIGN, (4, 4), Settings()))
    done = subprocess.run([sys.executable, "-m", "relviz", "check", str(path), "--kind", "relative"], cwd=ROOT,
                          capture_output=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert b"likely cause: sign flipped" in done.stdout


# ---------------------------------------------------------------------------------------
# ALiBi causes added with the registry (independent transcriptions of each mistake)


def _press_slopes(n: int) -> list[float]:
    """Press et al.'s get_slopes, transcribed from the ALiBi repository (attention_with_linear_biases)."""
    def power_of_2(p):
        start = 2 ** (-2 ** -(np.log2(p) - 3))
        return [start * start ** i for i in range(p)]
    if np.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** int(np.floor(np.log2(n)))
    return power_of_2(closest) + _press_slopes(2 * closest)[0::2][: n - closest]


def test_alibi_added_twice_is_named():
    slope = _press_slopes(8)[2]
    i, j = np.arange(7)[:, None], np.arange(7)[None, :]
    doubled = -2 * slope * np.abs(j - i)
    result = check("alibi", doubled, Settings(num_heads=8, head=2))
    assert not result.ok and result.cause.name == MK.ALIBI_TWICE
    assert check("alibi", -slope * np.abs(j - i), Settings(num_heads=8, head=2)).ok


def test_alibi_bias_max_ignored_is_named():
    """MPT's config says alibi_bias_max 16; code that builds Press et al.'s slopes (max 8) ignores it."""
    def mpt_slopes(n, bias_max):  # MosaicML llm-foundry gen_slopes, power-of-2 case
        return [1 / 2 ** (bias_max * (h + 1) / n) for h in range(n)]
    assert check("alibi_slopes", np.array(mpt_slopes(16, 16.0)), Settings(alibi_bias_max=16.0)).ok
    result = check("alibi_slopes", np.array(mpt_slopes(16, 8.0)), Settings(alibi_bias_max=16.0))
    assert result.cause.name == MK.BIAS_MAX_IGNORED
    i, j = np.arange(5)[:, None], np.arange(5)[None, :]
    bias = -mpt_slopes(16, 8.0)[3] * np.abs(j - i)
    assert check("alibi", bias, Settings(num_heads=16, head=3, alibi_bias_max=16.0)).cause.name == MK.BIAS_MAX_IGNORED


@pytest.mark.parametrize("n", [6, 12, 20])
def test_non_power_of_2_slopes_in_the_wrong_order_are_named(n):
    right = _press_slopes(n)
    assert check("alibi_slopes", np.array(right)).ok
    assert check("alibi_slopes", np.array(sorted(right, reverse=True))).cause.name == MK.SORTED
    lower = 2 ** int(np.floor(np.log2(n)))
    assert check("alibi_slopes", np.array(right[lower:] + right[:lower])).cause.name == MK.EXTRA_FIRST


# ---------------------------------------------------------------------------------------
# The wrong kind is a mistake too


@pytest.mark.parametrize("checked_as, matrix, kind, found", [
    ("relative", t5_bucket_map(20, 20, device="cpu").numpy(), "t5", {"num_buckets": 32, "max_distance": 128}),
    ("relative", shaw_clip_index(10, 10, k=2, device="cpu").numpy(), "shaw", {"k": 2}),
    # slope 1/8: several heads
    ("relative", alibi_bias(6, 6, num_heads=8, device="cpu")[2].numpy(), "alibi", {"q_offset": 0}),
])
def test_an_upload_of_another_kind_says_which(checked_as, matrix, kind, found):
    result = check(checked_as, matrix, Settings())
    assert not result.ok and not result.causes and result.other_kind == kind
    assert f"--kind {kind}" in result.note and "another kind" in result.verdict()
    other = check(kind, matrix)
    assert other.ok and all(getattr(other.settings, name) == value for name, value in found.items())


def test_no_other_kind_is_claimed_for_junk():
    junk = np.random.default_rng(3).integers(0, 30, (24, 24))
    result = check("t5", junk, Settings())
    assert result.other_kind is None and "another kind" not in result.verdict()
