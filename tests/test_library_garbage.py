"""The library refuses garbage: property tests over every public function.

Every public function of relviz.positions, relviz.skew, relviz.attention, relviz.toeplitz_display,
relviz.memory, relviz.tasks (parse_text, render_tokens), relviz.model (ModelConfig,
build_model) and relviz.training's checkpoint loading is fed garbage: negative, zero, huge,
float, bool, None, str, NaN arguments, wrong shapes, wrong dtypes, int overflow, corrupt files.
The outcome must be one of two things:

- a correct result: its invariants are checked (buckets in 0..num_buckets − 1, clip indices in
  0..2k, no NaNs, the right shapes and dtypes, the values the definition gives), or
- a ValueError whose message names the parameter (or, for a checkpoint, the checkpoint).

Any other exception type fails the test: a crash deep inside torch or numpy is a bug.

Every example is small (lengths up to a few dozen), and the module runs under an address-space
limit (RLIMIT_AS, Linux): if a bug lets a huge request through, the allocation fails inside this
process instead of taking the machine's memory from everyone else.
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from relviz import attention, memory, positions, skew, tasks, toeplitz_display
from relviz.model import ModelConfig, build_model
from relviz.training import CHECKPOINT_DIR, load_checkpoint, read_checkpoint_info

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])
FEW = settings(SETTINGS, max_examples=40)

#: Address space this module may add to what the process already holds (see the docstring).
HEADROOM = 2 << 30


@pytest.fixture(scope="module", autouse=True)
def bounded_memory():
    try:
        import resource
    except ImportError:  # not Linux: run without the guard
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/status") as status:
            vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        yield
        return
    limit = vm_kb * 1024 + HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ---------------------------------------------------------------------------------------
# Outcomes


class Refused:
    """The function raised a ValueError that names a parameter."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"Refused({self.message!r})"


def outcome(names, fn, *args, **kwargs):
    """fn(*args, **kwargs), or Refused when it raises a ValueError whose message names one of ``names``.

    Any other exception propagates and fails the test.
    """
    label = getattr(fn, "__name__", type(fn).__name__)
    try:
        result = fn(*args, **kwargs)
    except ValueError as error:
        message = str(error)
        assert message.strip(), f"{label}: a ValueError without a message"
        assert any(name in message for name in names), \
            f"{label}: the ValueError does not name a parameter {names}: {message!r}"
        _event(f"{label}: refused")
        return Refused(message)
    _event(f"{label}: result")
    return result


def _event(text: str) -> None:
    """Count outcomes in hypothesis's statistics (pytest --hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(text)


def refused(result) -> bool:
    return isinstance(result, Refused)


def as_ints(*values):
    """Accepted numpy integers as Python ints, for computing the expected result (None stays None)."""
    return tuple(None if v is None else int(v) for v in values)


# ---------------------------------------------------------------------------------------
# Strategies

HUGE = st.one_of(st.integers(min_value=2**31, max_value=2**80), st.integers(min_value=-2**80, max_value=-2**31))
NON_INTS = st.one_of(
    st.none(), st.booleans(), st.text(max_size=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([3.0, 2.5, float("nan"), float("inf"), -0.0, np.float32(3.0), Decimal("3"), Fraction(3, 1),
                     3 + 0j, b"3", "3", [3], (3,), {"n": 3}, torch.tensor(3), torch.tensor([3, 4]),
                     np.array([3]), object()]),
)
NUMPY_INTS = st.builds(lambda n, t: t(n), st.integers(1, 20), st.sampled_from([np.int8, np.int32, np.int64, np.uint16]))


def mostly(valid, garbage, tenths: int = 8):
    """``valid`` in ``tenths``/10 of the draws, else ``garbage``: with several arguments per call, most
    calls still get far enough to return a result whose invariants are checked (shrinks to valid)."""
    return st.integers(0, 9).flatmap(lambda n: valid if n < tenths else garbage)


INT_GARBAGE = st.one_of(st.integers(-8, 0), HUGE, NON_INTS, NUMPY_INTS)


def ints(lo: int, hi: int):
    """Mostly valid small integers, else garbage of every kind."""
    return mostly(st.integers(lo, hi), INT_GARBAGE)


def flags():
    return mostly(st.booleans(), st.sampled_from([0, 1, "True", None, np.bool_(True), torch.tensor(True), 1.0]))


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool, torch.complex64]
INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
              torch.uint64, torch.bool, torch.float32, torch.float64, torch.complex64]


@st.composite
def tensors(draw, shape=None, dtypes=DTYPES, finite: bool = True):
    """A tensor of a random (or given) small shape and dtype, with small finite values by default."""
    if shape is None:
        shape = draw(st.lists(st.integers(0, 5), min_size=0, max_size=4))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(tuple(shape), generator=generator, dtype=torch.float64) * 3
    if not finite and values.numel():
        flat = values.view(-1)
        flat[draw(st.integers(0, values.numel() - 1))] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    if dtype == torch.bool:
        return values > 0
    if dtype.is_complex:
        return values.to(dtype)
    if not dtype.is_floating_point:
        unsigned = dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
        return values.round().clamp(0 if unsigned else -100, 100).to(dtype)
    return values.to(dtype)


DEVICES = st.sampled_from([None, "cpu", torch.device("cpu"), "cpu:0", "cuda", "cuda:7", "mps", "gpu", "", 3, -1,
                           "meta", object(), b"cpu"])


def usable(tensor: torch.Tensor) -> bool:
    return tensor.device.type != "meta"


# ---------------------------------------------------------------------------------------
# relviz.positions


def expected_relative(q_len: int, k_len: int, q_offset: int) -> torch.Tensor:
    return torch.arange(k_len)[None, :] - (q_offset + torch.arange(q_len)[:, None])


@SETTINGS
@given(q_len=ints(1, 24), k_len=st.one_of(st.none(), ints(1, 24)), q_offset=ints(-30, 30))
def test_offsets_and_relative_positions(q_len, k_len, q_offset):
    names = ("q_len", "k_len", "q_offset")
    offsets = outcome(names, positions.offset_range, q_len, k_len, q_offset=q_offset, device="cpu")
    relative = outcome(names, positions.relative_positions, q_len, k_len, q_offset=q_offset, device="cpu")
    assert refused(offsets) == refused(relative)
    if refused(relative):
        return
    q_len, k_len, q_offset = as_ints(q_len, k_len, q_offset)
    k = q_len if k_len is None else k_len
    assert offsets.dtype == torch.long and offsets.shape == (q_len + k - 1,)
    assert relative.dtype == torch.long and relative.shape == (q_len, k)
    assert torch.equal(relative, expected_relative(q_len, k, q_offset))
    assert int(offsets[0]) == int(relative[-1, 0]) and int(offsets[-1]) == int(relative[0, -1])


@SETTINGS
@given(q_len=ints(1, 24), k_len=st.one_of(st.none(), ints(1, 24)), k=ints(0, 40), q_offset=ints(-30, 30))
def test_shaw_clip_index(q_len, k_len, k, q_offset):
    index = outcome(("q_len", "k_len", "k", "q_offset"), positions.shaw_clip_index, q_len, k_len, k=k,
                    q_offset=q_offset, device="cpu")
    if refused(index):
        return
    q_len, k_len, k, q_offset = as_ints(q_len, k_len, k, q_offset)
    kk = q_len if k_len is None else k_len
    assert index.dtype == torch.long and index.shape == (q_len, kk)
    assert int(index.min()) >= 0 and int(index.max()) <= 2 * k
    assert torch.equal(index, expected_relative(q_len, kk, q_offset).clamp(-k, k) + k)


@SETTINGS
@given(offsets=st.one_of(tensors(dtypes=INT_DTYPES), NON_INTS,
                         st.builds(lambda v, t: torch.tensor(v, dtype=t), st.lists(st.integers(-128, 127), max_size=6),
                                   st.sampled_from([torch.int8, torch.int16]))),
       k=ints(0, 300))
def test_shaw_clip_offsets(offsets, k):
    index = outcome(("offsets", "k"), positions.shaw_clip_offsets, offsets, k=k)
    if refused(index):
        return
    k = int(k)
    assert index.dtype == torch.long and index.shape == offsets.shape
    if index.numel():
        assert int(index.min()) >= 0 and int(index.max()) <= 2 * k
    assert torch.equal(index, offsets.to(torch.long).clamp(-k, k) + k)


def test_shaw_clip_offsets_of_narrow_dtypes_never_overflow():
    """int8 offset 127 with k = 100 must give index 200, not int8's wrapped −56."""
    index = positions.shaw_clip_offsets(torch.tensor([127, -128], dtype=torch.int8), k=100)
    assert index.tolist() == [200, 0]


@SETTINGS
@given(num_buckets=ints(1, 80), max_distance=ints(1, 300), bidirectional=flags())
def test_t5_config_and_nearest_valid(num_buckets, max_distance, bidirectional):
    names = ("num_buckets", "max_distance", "bidirectional")
    config = outcome(names, positions.t5_config, num_buckets, max_distance, bidirectional)
    if not refused(config):
        assert config.max_exact >= 1 and config.max_distance > config.max_exact
        assert config.num_buckets == num_buckets and config.max_distance == max_distance
    nearest = outcome(names, positions.t5_nearest_valid, num_buckets, max_distance, bidirectional)
    if refused(nearest):
        return
    num_buckets, max_distance = as_ints(num_buckets, max_distance)
    nb, md = nearest
    assert isinstance(nb, int) and isinstance(md, int)
    positions.t5_config(nb, md, bidirectional)  # the advice is itself a valid setting
    if not refused(config):
        assert (nb, md) == (num_buckets, max_distance)  # a valid setting is its own nearest


@SETTINGS
@given(relative=st.one_of(
           tensors(dtypes=INT_DTYPES[:5]), tensors(dtypes=INT_DTYPES[:5]), tensors(dtypes=INT_DTYPES),
           st.builds(lambda v: torch.tensor(v, dtype=torch.long),
                     st.lists(st.sampled_from([-2**63, 2**63 - 1, -2**24 - 1, 2**24 + 1, -2**24, 2**24, 0, 1, -1,
                                               -91, 91, 127, -128]), min_size=1, max_size=5)),
           st.integers(-2**70, 2**70), NON_INTS),
       num_buckets=ints(1, 80), max_distance=ints(1, 300), bidirectional=flags())
def test_t5_bucket_is_never_negative_nor_beyond_the_last(relative, num_buckets, max_distance, bidirectional):
    buckets = outcome(("relative_position", "num_buckets", "max_distance", "bidirectional"), positions.t5_bucket,
                      relative, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    if refused(buckets):
        return
    num_buckets, = as_ints(num_buckets)
    relative = int(relative) if isinstance(relative, (int, np.integer)) else relative
    assert buckets.dtype == torch.long
    assert buckets.shape == (relative.shape if isinstance(relative, torch.Tensor) else ())
    if buckets.numel():
        assert int(buckets.min()) >= 0, f"negative bucket {int(buckets.min())} for {relative}"
        assert int(buckets.max()) <= num_buckets - 1
    n = relative.to(torch.long) if isinstance(relative, torch.Tensor) else torch.tensor(relative)
    if bidirectional and buckets.numel():  # the future half of the buckets holds exactly the keys j > i
        assert torch.equal(buckets >= num_buckets // 2, n > 0)
    if not bidirectional:
        assert torch.all(buckets[n >= 0] == 0)


def test_t5_bucket_extreme_int64_is_refused_not_a_negative_bucket():
    """abs(−2^63) overflows to −2^63 in int64: the range check must not be fooled by it."""
    for value in (-2**63, 2**63 - 1):
        with pytest.raises(ValueError, match="relative_position"):
            positions.t5_bucket(torch.tensor([value]))


def test_t5_bucket_wide_unsigned_dtypes_do_not_wrap():
    """uint64 2^64 − 1 must not be read as −1 (a silently wrong bucket)."""
    for dtype in (torch.uint16, torch.uint32, torch.uint64):
        result = outcome(("relative_position",), positions.t5_bucket, torch.tensor([2**16 - 1], dtype=dtype))
        assert refused(result) or int(result) == int(positions.t5_bucket(torch.tensor([2**16 - 1])))
    result = outcome(("relative_position",), positions.t5_bucket, torch.tensor([2**64 - 1], dtype=torch.uint64))
    assert refused(result), f"uint64 2^64 − 1 gave bucket {result}"


@SETTINGS
@given(q_len=ints(1, 20), k_len=st.one_of(st.none(), ints(1, 20)), num_buckets=ints(1, 80),
       max_distance=ints(1, 300), bidirectional=flags(), q_offset=ints(-30, 30))
def test_t5_bucket_map(q_len, k_len, num_buckets, max_distance, bidirectional, q_offset):
    buckets = outcome(("q_len", "k_len", "num_buckets", "max_distance", "bidirectional", "q_offset"),
                      positions.t5_bucket_map, q_len, k_len, num_buckets=num_buckets, max_distance=max_distance,
                      bidirectional=bidirectional, q_offset=q_offset, device="cpu")
    if refused(buckets):
        return
    q_len, k_len, num_buckets, q_offset = as_ints(q_len, k_len, num_buckets, q_offset)
    kk = q_len if k_len is None else k_len
    assert buckets.shape == (q_len, kk) and buckets.dtype == torch.long
    assert int(buckets.min()) >= 0 and int(buckets.max()) < num_buckets
    reference = positions.t5_bucket(expected_relative(q_len, kk, q_offset), num_buckets=num_buckets,
                                    max_distance=max_distance, bidirectional=bidirectional)
    assert torch.equal(buckets, reference)


@SETTINGS
@given(num_buckets=ints(1, 80), max_distance=ints(1, 300), bidirectional=flags(),
       max_offset=st.one_of(st.none(), ints(1, 400)))
def test_t5_bucket_ranges(num_buckets, max_distance, bidirectional, max_offset):
    ranges = outcome(("num_buckets", "max_distance", "bidirectional", "max_offset"), positions.t5_bucket_ranges,
                     num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
                     max_offset=max_offset)
    if refused(ranges):
        return
    num_buckets, max_distance, max_offset = as_ints(num_buckets, max_distance, max_offset)
    extent = max_distance if max_offset is None else max_offset
    assert [r.bucket for r in ranges] == list(range(num_buckets))
    assert sum(r.count for r in ranges) == 2 * extent + 1
    for r in ranges:
        assert r.count >= 0
        if r.used:
            assert -extent <= r.first <= r.last <= extent
        else:
            assert r.first is None and r.last is None


@SETTINGS
@given(num_heads=ints(1, 70), device=st.sampled_from([None, "cpu"]))
def test_alibi_slopes(num_heads, device):
    slopes = outcome(("num_heads",), positions.alibi_slopes, num_heads, device=device)
    if refused(slopes):
        return
    num_heads, = as_ints(num_heads)
    assert slopes.shape == (num_heads,) and slopes.dtype == torch.float32
    assert torch.isfinite(slopes).all() and bool((slopes > 0).all()) and bool((slopes < 1).all())
    assert len(set(slopes.tolist())) == num_heads  # no head repeats another's slope


@SETTINGS
@given(q_len=ints(1, 16), k_len=st.one_of(st.none(), ints(1, 16)), num_heads=ints(1, 12), q_offset=ints(-20, 20))
def test_alibi_bias(q_len, k_len, num_heads, q_offset):
    bias = outcome(("q_len", "k_len", "num_heads", "q_offset"), positions.alibi_bias, q_len, k_len,
                   num_heads=num_heads, q_offset=q_offset, device="cpu")
    if refused(bias):
        return
    q_len, k_len, num_heads, q_offset = as_ints(q_len, k_len, num_heads, q_offset)
    kk = q_len if k_len is None else k_len
    assert bias.shape == (num_heads, q_len, kk) and bias.dtype == torch.float32
    assert torch.isfinite(bias).all() and bool((bias <= 0).all())
    slopes = positions.alibi_slopes(num_heads, device="cpu")
    expected = -slopes[:, None, None] * expected_relative(q_len, kk, q_offset).abs().to(torch.float32)
    assert torch.allclose(bias, expected)


def test_alibi_bias_refuses_a_tensor_too_large_to_build():
    """num_heads × q_len × k_len is one dense float32 tensor: 4096 heads of 2^15 × 2^15 would be 16 TB."""
    with pytest.raises(ValueError, match="num_heads"):
        positions.alibi_bias(2**15, 2**15, num_heads=4096, device="cpu")
    with pytest.raises(ValueError, match="num_heads"):
        positions.alibi_bias(2**14, 2**14, num_heads=8, device="cpu")


@st.composite
def toeplitz_inputs(draw):
    q_len, k_len = draw(ints(1, 6)), draw(ints(1, 6))
    fits = all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 6 for n in (q_len, k_len))
    size = q_len + k_len - 1 if fits else 3
    batch = draw(st.lists(st.integers(1, 2), max_size=2))
    per_offset = draw(mostly(tensors(shape=batch + [size]),
                             st.one_of(tensors(shape=batch + [size + draw(st.sampled_from([-1, 1]))]), tensors(),
                                       NON_INTS)))
    return per_offset, q_len, k_len


@SETTINGS
@given(inputs=toeplitz_inputs())
def test_expand_toeplitz(inputs):
    per_offset, q_len, k_len = inputs
    matrix = outcome(("per_offset", "q_len", "k_len"), positions.expand_toeplitz, per_offset, q_len, k_len)
    if refused(matrix):
        return
    q_len, k_len = as_ints(q_len, k_len)
    assert matrix.shape == per_offset.shape[:-1] + (q_len, k_len)
    for i in range(q_len):
        for j in range(k_len):
            assert torch.equal(matrix[..., i, j], per_offset[..., j - i + q_len - 1])


@FEW
@given(device=DEVICES)
def test_every_device_argument_is_a_usable_device_or_refused(device):
    for fn in (lambda: positions.relative_positions(3, device=device),
               lambda: positions.shaw_clip_index(3, k=1, device=device),
               lambda: positions.t5_bucket_map(3, device=device),
               lambda: positions.alibi_bias(3, num_heads=2, device=device),
               lambda: skew.skew_source_index(3, device=device)):
        result = outcome(("device",), fn)
        if refused(result):
            continue
        tensor = result if isinstance(result, torch.Tensor) else result.row.skewed
        assert tensor.device.type in ("cpu", "cuda", "meta")
        if usable(tensor):
            assert tensor.numel() > 0


# ---------------------------------------------------------------------------------------
# relviz.skew


@st.composite
def square_or_not(draw):
    length = draw(mostly(st.integers(1, 6), st.just(0), 9))
    batch = draw(st.lists(mostly(st.integers(1, 3), st.just(0), 9), max_size=2))
    cols = draw(st.sampled_from([length, max(2 * length - 1, 0), length, max(2 * length - 1, 0), length + 1, 0]))
    dtype = draw(mostly(st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
                        st.sampled_from(DTYPES)))
    return draw(tensors(shape=batch + [length, cols], dtypes=[dtype]))


@SETTINGS
@given(qer=mostly(square_or_not(), st.one_of(tensors(), NON_INTS)))
def test_skew_and_its_steps(qer):
    result = outcome(("qer",), skew.skew, qer)
    steps = outcome(("qer",), skew.skew_steps, qer)
    variant = outcome(("qer",), skew.skew_variant, qer)
    assert refused(result) == refused(steps) == refused(variant)
    if refused(result):
        return
    assert torch.equal(variant, result)   # its defaults are the skew itself
    length = qer.shape[-1]
    assert result.shape == qer.shape and result.dtype == qer.dtype
    assert steps.padded.shape == qer.shape[:-1] + (length + 1,)
    assert steps.reshaped.shape == qer.shape[:-2] + (length + 1, length)
    assert torch.equal(steps.skewed, result)
    assert not torch.isnan(result).any()
    for i in range(length):
        for j in range(i + 1):  # exact on and below the diagonal
            assert torch.equal(result[..., i, j], qer[..., i, j - i + length - 1])


@SETTINGS
@given(qer=mostly(square_or_not(), st.one_of(tensors(), NON_INTS)))
def test_skew_bidirectional(qer):
    result = outcome(("qer",), skew.skew_bidirectional, qer)
    if refused(result):
        return
    length = qer.shape[-2]
    assert result.shape == qer.shape[:-2] + (length, length) and result.dtype == qer.dtype
    assert not torch.isnan(result).any()
    for i in range(length):
        for j in range(length):  # exact everywhere
            assert torch.equal(result[..., i, j], qer[..., i, j - i + length - 1])


@SETTINGS
@given(length=ints(1, 12))
def test_skew_source_index(length):
    source = outcome(("length",), skew.skew_source_index, length, device="cpu")
    if refused(source):
        return
    length, = as_ints(length)
    for part in (source.row, source.col):
        for tensor in (part.padded, part.reshaped, part.skewed):
            assert int(tensor.min()) >= -1 and int(tensor.max()) <= length - 1
    assert source.row.skewed.shape == (length, length)


def test_skew_source_index_refuses_a_length_too_large_to_build():
    """length 10^6 would be four 10^12-cell tensors (16 TB): refuse it, do not ask the allocator."""
    with pytest.raises(ValueError, match="length"):
        skew.skew_source_index(10**6, device="cpu")


@st.composite
def gather_inputs(draw):
    lq, lk, d, m = (draw(mostly(st.integers(1, 5), st.just(0), 9)) for _ in range(4))
    dtype = draw(mostly(st.sampled_from([torch.float32, torch.float64]), st.sampled_from(DTYPES)))
    batch = draw(st.lists(st.integers(1, 2), max_size=2))
    q = draw(mostly(tensors(shape=batch + [lq, d], dtypes=[dtype]), st.one_of(tensors(), NON_INTS)))
    table = draw(mostly(tensors(shape=[m, d], dtypes=[dtype]), st.one_of(tensors(), NON_INTS)))
    if m and draw(mostly(st.just(True), st.just(False))):
        index_dtype = draw(mostly(st.sampled_from([torch.int64, torch.int32]), st.sampled_from(INT_DTYPES)))
        index = torch.randint(0, m, (lq, lk), generator=torch.Generator().manual_seed(draw(st.integers(0, 99))))
        if draw(mostly(st.just(False), st.just(True))) and index.numel():
            index.view(-1)[0] = draw(st.sampled_from([-1, m, 2**40, -2**63]))
        else:
            index = index.to(index_dtype)
    else:
        index = draw(st.one_of(tensors(shape=[lq, lk], dtypes=INT_DTYPES), tensors(), NON_INTS))
    return q, table, index


@SETTINGS
@given(inputs=gather_inputs())
def test_gather_relative(inputs):
    q, table, index = inputs
    result = outcome(("q", "table", "index"), skew.gather_relative, q, table, index)
    if refused(result):
        return
    assert result.shape == q.shape[:-1] + (index.shape[1],)
    assert not torch.isnan(result).any()
    expected = torch.einsum("...id,ijd->...ij", q, table[index.long()])
    assert torch.allclose(result, expected, equal_nan=False)


# ---------------------------------------------------------------------------------------
# relviz.attention

SCALES = mostly(st.sampled_from([None, 0.125, 0.5, 1.0, 2.0, 1]),
                st.sampled_from([0, -1.0, math.nan, math.inf, -math.inf, True, "1", [1.0], torch.tensor(1.0),
                                 Decimal("0.5")]))


@st.composite
def qkv(draw):
    shape = [draw(mostly(st.integers(1, 2), st.just(0), 9)), draw(mostly(st.integers(1, 3), st.just(0), 9)),
             draw(mostly(st.integers(1, 5), st.just(0), 9)), draw(mostly(st.integers(1, 6), st.just(0), 9))]
    dtype = draw(mostly(st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
                        st.sampled_from([torch.int64, torch.bool, torch.complex64])))
    q = draw(tensors(shape=shape, dtypes=[dtype]))
    k = draw(mostly(tensors(shape=shape, dtypes=[dtype]), st.one_of(tensors(), NON_INTS), 9))
    v = draw(mostly(tensors(shape=shape, dtypes=[dtype]), st.one_of(tensors(), NON_INTS), 9))
    return q, k, v


def check_attention(result, q: torch.Tensor) -> None:
    output, weights = result
    batch, heads, length, dim = q.shape
    assert output.shape == q.shape and not torch.isnan(output).any()
    if weights is None:  # the fused path (need_weights=False, the default)
        return
    assert weights.shape == (batch, heads, length, length) and not torch.isnan(weights).any()
    tolerance = 1e-2 if q.dtype in (torch.float16, torch.bfloat16) else 1e-4
    assert torch.allclose(weights.double().sum(-1), torch.ones(batch, heads, length, dtype=torch.float64),
                          atol=tolerance)


@SETTINGS
@given(inputs=qkv(), clip=ints(0, 8), causal=flags(), scale=SCALES, with_v=st.booleans(), data=st.data(),
       need_weights=st.booleans())
def test_shaw_attention(inputs, clip, causal, scale, with_v, data, need_weights):
    q, k, v = inputs
    dim = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() == 4 else 4
    rows = 2 * clip + 1 if isinstance(clip, int) and not isinstance(clip, bool) and 0 <= clip <= 8 else 3
    rel_k = data.draw(mostly(tensors(shape=[rows, dim], dtypes=[q.dtype]), st.one_of(tensors(), NON_INTS)))
    rel_v = data.draw(mostly(tensors(shape=[rows, dim], dtypes=[q.dtype]), st.one_of(tensors(), st.none()))) \
        if with_v else None
    result = outcome(("q", "k", "v", "rel_k", "rel_v", "clip", "causal", "scale"), attention.shaw_attention,
                     q, k, v, rel_k, rel_v, clip=clip, causal=causal, scale=scale, need_weights=need_weights)
    if not refused(result):
        check_attention(result, q)


@SETTINGS
@given(inputs=qkv(), num_buckets=ints(1, 40), max_distance=ints(1, 100), bidirectional=flags(), causal=flags(),
       scale=SCALES, data=st.data(), need_weights=st.booleans())
def test_t5_attention(inputs, num_buckets, max_distance, bidirectional, causal, scale, data, need_weights):
    q, k, v = inputs
    heads = q.shape[1] if isinstance(q, torch.Tensor) and q.dim() == 4 else 2
    rows = num_buckets if isinstance(num_buckets, int) and not isinstance(num_buckets, bool) \
        and 0 < num_buckets <= 40 else 8
    table = data.draw(mostly(tensors(shape=[rows, heads], dtypes=[q.dtype]), st.one_of(tensors(), NON_INTS)))
    result = outcome(("q", "k", "v", "bias_table", "num_buckets", "max_distance", "bidirectional", "causal",
                      "scale"), attention.t5_attention, q, k, v, table, num_buckets=num_buckets,
                     max_distance=max_distance, bidirectional=bidirectional, causal=causal, scale=scale,
                     need_weights=need_weights)
    if not refused(result):
        check_attention(result, q)


@SETTINGS
@given(inputs=qkv(), rows=st.integers(0, 8), scale=SCALES, data=st.data(), need_weights=st.booleans())
def test_skew_attention(inputs, rows, scale, data, need_weights):
    q, k, v = inputs
    dim = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() == 4 else 4
    e_r = data.draw(mostly(tensors(shape=[rows, dim], dtypes=[q.dtype]), st.one_of(tensors(), NON_INTS)))
    result = outcome(("q", "k", "v", "e_r", "scale"), attention.skew_attention, q, k, v, e_r, scale=scale,
                     need_weights=need_weights)
    if not refused(result):
        check_attention(result, q)
        assert result[1] is None or torch.all(result[1].triu(1) == 0)  # always causal


@SETTINGS
@given(inputs=qkv(), causal=flags(), scale=SCALES, need_weights=st.booleans())
def test_alibi_attention(inputs, causal, scale, need_weights):
    q, k, v = inputs
    result = outcome(("q", "k", "v", "causal", "scale"), attention.alibi_attention, q, k, v, causal=causal,
                     scale=scale, need_weights=need_weights)
    if not refused(result):
        check_attention(result, q)


def _attention_calls(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale):
    dim, heads = q.shape[-1], q.shape[1]
    table = torch.zeros(3, dim, dtype=q.dtype)
    for need in (True, False):  # the weights path and the fused path
        path = dict(scale=scale, need_weights=need)
        suffix = "" if need else " (fused)"
        yield "shaw" + suffix, lambda path=path: attention.shaw_attention(q, k, v, table, table, clip=1, **path)
        yield "shaw key-only" + suffix, lambda path=path: attention.shaw_attention(q, k, v, table, clip=1, **path)
        yield "t5" + suffix, lambda path=path: attention.t5_attention(
            q, k, v, torch.zeros(32, heads, dtype=q.dtype), num_buckets=32, max_distance=128, bidirectional=True,
            **path)
        yield "skew" + suffix, lambda path=path: attention.skew_attention(q, k, v, table, **path)
        yield "alibi" + suffix, lambda path=path: attention.alibi_attention(q, k, v, **path)


@pytest.mark.parametrize("case", ["scale 1e30", "scale 1e300", "inputs 1e20", "NaN in q", "inf in v"])
def test_attention_never_returns_nan(case):
    """Finite-looking arguments must not produce NaN weights, and non-finite inputs must be refused.

    scale = 1e300 is a "positive finite" scale, so it is accepted, but q · scale overflows float32 to
    inf, and inf − inf in the softmax is NaN; the same with large but finite inputs.
    """
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=generator) for _ in range(3))
    scale = None
    if case == "scale 1e30":
        scale = 1e30
    elif case == "scale 1e300":
        scale = 1e300
    elif case == "inputs 1e20":
        q, k = q * 1e20, k * 1e20
    elif case == "NaN in q":
        q[0, 0, 1, 2] = math.nan
    elif case == "inf in v":
        v[0, 1, 3, 0] = math.inf
    bad = []
    for name, call in _attention_calls(q, k, v, scale):
        result = outcome(("q", "k", "v", "scale", "finite"), call)
        if refused(result):
            continue
        output, weights = result
        if (weights is not None and torch.isnan(weights).any()) or torch.isnan(output).any():
            bad.append(name)
    assert not bad, f"{case}: NaN in the result of {', '.join(bad)}_attention (neither a result nor a ValueError)"


# ---------------------------------------------------------------------------------------
# relviz.toeplitz_display


@st.composite
def per_offset_vectors(draw, q_len, k_len):
    size = (q_len + k_len - 1) if isinstance(q_len, int) and isinstance(k_len, int) \
        and not isinstance(q_len, bool) and not isinstance(k_len, bool) and 0 < q_len < 50 and 0 < k_len < 50 else 5
    size = draw(mostly(st.just(size), st.sampled_from([max(size - 1, 0), size + 1, 0])))
    kind = draw(mostly(st.sampled_from(["int", "float", "int16", "uint8", "bool", "list", "2d"]),
                       st.sampled_from(["str", "object", "nan"])))
    values = np.arange(size) - size // 2
    if kind == "float":
        return values * 0.5
    if kind == "int16":
        return values.astype(np.int16)
    if kind == "uint8":
        return np.abs(values).astype(np.uint8)
    if kind == "bool":
        return values > 0
    if kind == "str":
        return values.astype(str)
    if kind == "object":
        return np.array([None] * size, dtype=object)
    if kind == "nan":
        out = values.astype(float)
        if size:
            out[draw(st.integers(0, size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return out
    if kind == "list":
        return list(values)
    if kind == "2d":
        return np.stack([values, values * 2])
    return values


@SETTINGS
@given(q_len=ints(1, 40), k_len=ints(1, 40), max_cells=st.one_of(st.just(toeplitz_display.DISPLAY_MAX), ints(1, 16)))
def test_display_block(q_len, k_len, max_cells):
    block = outcome(("q_len", "k_len", "max_cells"), toeplitz_display.display_block, q_len, k_len, max_cells)
    if refused(block):
        return
    q_len, k_len, max_cells = as_ints(q_len, k_len, max_cells)
    assert isinstance(block, int) and block >= 1
    assert math.ceil(max(q_len, k_len) / block) <= max_cells
    assert block == 1 or math.ceil(max(q_len, k_len) / (block - 1)) > max_cells  # the smallest such block


@SETTINGS
@given(q_len=ints(1, 12), k_len=ints(1, 12), data=st.data())
def test_toeplitz_window(q_len, k_len, data):
    per_offset = data.draw(per_offset_vectors(q_len, k_len))
    q_fit = q_len if isinstance(q_len, int) and not isinstance(q_len, bool) and 1 <= q_len <= 12 else 4
    k_fit = k_len if isinstance(k_len, int) and not isinstance(k_len, bool) and 1 <= k_len <= 12 else 4
    rows, cols = data.draw(mostly(st.integers(1, q_fit), ints(0, 13))), data.draw(mostly(st.integers(1, k_fit),
                                                                                         ints(0, 13)))
    row0 = data.draw(mostly(st.integers(0, max(q_fit - rows, 0)) if isinstance(rows, int) else st.just(0),
                            ints(-2, 13)))
    col0 = data.draw(mostly(st.integers(0, max(k_fit - cols, 0)) if isinstance(cols, int) else st.just(0),
                            ints(-2, 13)))
    window = outcome(("per_offset", "q_len", "k_len", "row0", "col0", "rows", "cols", "window"),
                     toeplitz_display.toeplitz_window, per_offset, q_len, k_len, row0=row0, col0=col0, rows=rows, cols=cols)
    if refused(window):
        return
    q_len, row0, col0, rows, cols = as_ints(q_len, row0, col0, rows, cols)
    values = np.asarray(per_offset)
    assert window.shape == values.shape[:-1] + (rows, cols), "the window lost rows or columns"
    for r in range(rows):
        for c in range(cols):
            i, j = row0 + r, col0 + c
            assert np.array_equal(window[..., r, c], values[..., j - i + q_len - 1])


@SETTINGS
@given(q_len=ints(1, 12), k_len=ints(1, 12), block=ints(1, 5), data=st.data())
def test_toeplitz_pooled(q_len, k_len, block, data):
    per_offset = data.draw(per_offset_vectors(q_len, k_len))
    pooled = outcome(("per_offset", "q_len", "k_len", "block"), toeplitz_display.toeplitz_pooled, per_offset, q_len, k_len,
                     block)
    if refused(pooled):
        return
    q_len, k_len, block = as_ints(q_len, k_len, block)
    values = np.asarray(per_offset, dtype=np.float64)
    full = values[np.arange(k_len)[None, :] - np.arange(q_len)[:, None] + q_len - 1]
    shape = (math.ceil(q_len / block), math.ceil(k_len / block))
    assert pooled.mean.shape == pooled.vmin.shape == pooled.vmax.shape == shape
    assert np.isfinite(pooled.mean).all()
    for r in range(shape[0]):
        for c in range(shape[1]):
            cells = full[r * block:(r + 1) * block, c * block:(c + 1) * block]
            assert math.isclose(pooled.mean[r, c], cells.mean(), rel_tol=1e-9, abs_tol=1e-9)
            assert pooled.vmin[r, c] == cells.min() and pooled.vmax[r, c] == cells.max()


def test_toeplitz_window_never_drops_a_row_silently():
    """One value short of q_len + k_len − 1 used to return 9 rows for a 10-row window."""
    with pytest.raises(ValueError, match="per_offset"):
        toeplitz_display.toeplitz_window(np.arange(18), 10, 10, row0=0, col0=0, rows=10, cols=10)


# ---------------------------------------------------------------------------------------
# relviz.memory


@SETTINGS
@given(length=ints(1, 5000), dim=ints(1, 600), heads=ints(1, 16), dtype_bytes=ints(1, 8))
def test_relative_term_bytes(length, dim, heads, dtype_bytes):
    mem = outcome(("length", "dim", "heads", "dtype_bytes"), memory.relative_term_bytes, length, dim, heads,
                  dtype_bytes)
    if refused(mem):
        return
    length, dim, heads, dtype_bytes = as_ints(length, dim, heads, dtype_bytes)
    assert mem.shaw_per_layer == length * length * dim * dtype_bytes
    assert mem.skew_per_layer == length * dim * dtype_bytes
    assert mem.shaw_per_head * heads == mem.shaw_per_layer and mem.skew_per_head * heads == mem.skew_per_layer
    assert mem.ratio == length


@SETTINGS
@given(n=st.one_of(st.integers(0, 10**20), st.floats(0, 1e20), st.integers(-10**6, -1), NON_INTS,
                   st.sampled_from([10**400, 2**1024, 1e300, 1e308, 5e-324]), NUMPY_INTS))
def test_format_bytes(n):
    text = outcome(("n",), memory.format_bytes, n)
    if refused(text):
        return
    assert isinstance(text, str) and text and text.split()[-1] in ("B", "kB", "MB", "GB", "TB", "PB")
    assert "nan" not in text.lower() and "inf" not in text.lower() and "-" not in text


# ---------------------------------------------------------------------------------------
# relviz.tasks: what a user types


@SETTINGS
@given(text=st.one_of(st.text(max_size=60), st.text(alphabet="0123456789 \t\n", max_size=60),
                      st.sampled_from(["١٢٣", "１２３", "𝟏𝟐", "1\u200b2", "12\x00", "²", "x" * 100_001,
                                       "7" * 100_000, "7" * 100_001]), NON_INTS))
def test_parse_text(text):
    tokens = outcome(("text", "sequence", "characters"), tasks.parse_text, text)
    if refused(tokens):
        return
    assert tokens.dtype == torch.long and tokens.shape == (len(text.strip()),) and len(text.strip()) >= 1
    assert int(tokens.min()) >= 0 and int(tokens.max()) <= 9
    assert tasks.render_tokens(tokens) == text.strip()


@FEW
@given(alphabet=st.one_of(st.text(max_size=5), NON_INTS))
def test_parse_text_alphabet(alphabet):
    tokens = outcome(("alphabet", "characters", "sequence"), tasks.parse_text, "0", alphabet)
    if not refused(tokens):
        assert tasks.render_tokens(tokens, alphabet) == "0"


@SETTINGS
@given(tokens=st.one_of(st.lists(st.one_of(st.integers(-3, 12), NON_INTS), max_size=6),
                        tensors(shape=[4], dtypes=INT_DTYPES), tensors(shape=[2, 3], dtypes=[torch.int64])))
def test_render_tokens(tokens):
    text = outcome(("tokens", "sequence"), tasks.render_tokens, tokens)
    if not refused(text):
        ids = tokens.tolist() if isinstance(tokens, torch.Tensor) else list(tokens)
        assert text == "".join(tasks.DIGITS[t] for t in ids)


# ---------------------------------------------------------------------------------------
# relviz.model

FIELDS = dict(vocab_size=ints(1, 12), d_model=st.one_of(st.sampled_from([4, 8, 16]), ints(1, 16)),
              n_layers=ints(1, 2), n_heads=st.one_of(st.sampled_from([1, 2, 4]), ints(1, 4)),
              d_ff=ints(1, 16), scheme=st.one_of(st.sampled_from(["none", "sinusoidal", "learned", "shaw", "t5", "skew",
                                                                  "alibi", "rope"]), NON_INTS),
              causal=flags(), max_len=ints(1, 40), clip=ints(0, 6), num_buckets=ints(1, 40),
              max_distance=ints(1, 100), skew_distances=ints(1, 12),
              rope_base=st.one_of(st.sampled_from([10000.0, 2.0, 1.0, 0.5, -3.0, math.inf, math.nan]), NON_INTS))


@SETTINGS
@given(fields=st.fixed_dictionaries({}, optional=FIELDS), seed=st.one_of(st.none(), ints(0, 100)),
       length=st.integers(1, 12))
def test_model_config_and_build_model(fields, seed, length):
    config = outcome(tuple(FIELDS), ModelConfig, **fields)
    if refused(config):
        return
    for name, value in fields.items():
        assert getattr(config, name) == value
    assert ModelConfig.from_json(config.to_json()) == config
    model = outcome(("seed",), build_model, config, seed=seed)
    if refused(model):
        return
    tokens = torch.randint(0, config.vocab_size, (2, length), generator=torch.Generator().manual_seed(0))
    run = outcome(("sequence length", "max_len", "tokens"), model, tokens, need_weights=True)
    if refused(run):
        assert config.scheme == "learned" and length > config.max_len
        return
    logits, attentions = run
    assert logits.shape == (2, length, config.vocab_size) and torch.isfinite(logits).all()
    assert len(attentions) == config.n_layers
    for weights in attentions:
        assert weights.shape == (2, config.n_heads, length, length) and not torch.isnan(weights).any()


def test_model_config_keeps_what_it_accepts_as_plain_ints():
    """numpy integers pass check_int, so they must come out as ints: the config is written as JSON."""
    config = outcome(tuple(FIELDS), ModelConfig, vocab_size=np.int64(10), d_model=np.int32(16), n_heads=np.uint16(2))
    if refused(config):
        return
    assert all(type(getattr(config, name)) is int for name in ("vocab_size", "d_model", "n_heads"))
    assert ModelConfig.from_json(config.to_json()) == config


@SETTINGS
@given(data=mostly(st.dictionaries(mostly(st.sampled_from(list(FIELDS)), st.text(max_size=5)),
                                   mostly(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, "t5", "shaw", True, False]),
                                          st.one_of(st.integers(-5, 70), NON_INTS, st.text(max_size=4))), max_size=4),
                   st.one_of(NON_INTS, st.lists(st.integers(), max_size=3))))
def test_model_config_from_dict(data):
    config = outcome(tuple(FIELDS) + ("model config",), ModelConfig.from_dict, data)
    if not refused(config):
        assert isinstance(config, ModelConfig)


JSON_TEXTS = {"deep array": "[" * 100_000 + "]" * 100_000, "deep object": '{"d_model": ' * 50_000, "None": None,
              "bytes": b"{}", "empty": "", "open brace": "{", "NaN": "NaN", "NaN rope_base": '{"rope_base": NaN}',
              "huge float": '{"d_model": 1e999}', "float d_model": '{"d_model": 64.0}', "lone surrogate": "\ud800"}


@pytest.mark.parametrize("text", list(JSON_TEXTS.values()), ids=list(JSON_TEXTS))
def test_model_config_from_json_garbage(text):
    config = outcome(("model config", "JSON", "rope_base", "d_model"), ModelConfig.from_json, text)
    if not refused(config):
        assert isinstance(config, ModelConfig)


@pytest.mark.parametrize("fields", [dict(vocab_size=1_000_000, d_model=8192),
                                    dict(d_model=8192, n_layers=64, d_ff=65536),
                                    dict(scheme="learned", max_len=4096, d_model=8192, n_layers=64)],
                         ids=["vocab 10^6 x width 8192", "64 layers of width 8192", "learned 4096 positions"])
def test_a_model_too_large_to_build_is_refused_up_front(fields):
    """The config's limits allow models of billions of parameters: building one must be a ValueError
    (named limit), not a multi-GB allocation that fails inside torch or takes the server's memory."""
    config = outcome(tuple(FIELDS) + ("parameters",), ModelConfig, **fields)
    if refused(config):
        return
    outcome(tuple(FIELDS) + ("parameters", "config"), build_model, config)
    pytest.fail(f"built a model of {fields}: it should have been refused")  # pragma: no cover


# ---------------------------------------------------------------------------------------
# relviz.training: checkpoints are loaded only from safetensors, their description validated

SHIPPED = "t5-shift"
SHIPPED_FILE = CHECKPOINT_DIR / f"{SHIPPED}.safetensors"


def _shipped_header() -> tuple[dict, dict]:
    """The shipped file's parsed header without its metadata (the tensor entries), and its description."""
    raw = SHIPPED_FILE.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    return header, json.loads(header.pop("__metadata__")["relviz"])


SHIPPED_JSON = _shipped_header()[1]


def load_outcome(directory: Path, name: str):
    """load_checkpoint's result, or Refused if its ValueError names the checkpoint."""
    return outcome((f"checkpoint {name!r}", "checkpoint name", f"no checkpoint named {name!r}"), load_checkpoint,
                   name, directory)


def check_loaded(checkpoint, data: dict) -> None:
    info = checkpoint.info
    assert info.model_config == ModelConfig.from_dict(data["model"])
    assert 0.0 <= info.accuracy <= 1.0 and info.train_length >= 1
    logits, attentions = checkpoint.model(torch.zeros(1, 6, dtype=torch.long), need_weights=True)
    assert torch.isfinite(logits).all() and all(not torch.isnan(w).any() for w in attentions)
    assert not any(p.requires_grad for p in checkpoint.model.parameters())


JSON_GARBAGE = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), HUGE, st.floats(allow_nan=True),
                         st.text(max_size=6), st.lists(st.integers(), max_size=2),
                         st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@st.composite
def mutated_checkpoint_json(draw):
    data = json.loads(json.dumps(SHIPPED_JSON))
    plausible = {"accuracy": st.floats(0, 1), "train_length": st.integers(1, 64), "steps": st.integers(1, 5000),
                 "seed": st.integers(0, 99), "train_seconds": st.floats(0, 100), "lr": st.floats(1e-5, 1),
                 "batch_size": st.integers(1, 64), "relviz_version": st.text(max_size=5), "extra": st.integers()}
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["plausible", "plausible", "top", "model", "task_params", "scheme_params",
                                      "delete"]))
        if where == "plausible":
            key = draw(st.sampled_from(sorted(plausible)))
            data[key] = draw(plausible[key])
        elif where == "top":
            data[draw(st.sampled_from(sorted(data) + ["extra"]))] = draw(JSON_GARBAGE)
        elif where == "delete":
            data.pop(draw(st.sampled_from(sorted(data))), None)
        elif isinstance(data.get(where), dict):
            key = draw(st.sampled_from(sorted(data[where]) + ["extra"])) if data[where] else "extra"
            data[where][key] = draw(JSON_GARBAGE)
    return data


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("checkpoints")


def _with_description(description: bytes) -> bytes:
    """The shipped file with ``description`` (raw bytes: not UTF-8 or a lone surrogate stay as they are)
    as its header's relviz metadata, written by hand as safetensors lays a file out."""
    raw = SHIPPED_FILE.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    entries, _ = _shipped_header()
    escaped = description.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    header = b'{"__metadata__":{"relviz":"' + escaped + b'"},' + json.dumps(entries).encode()[1:]
    return len(header).to_bytes(8, "little") + header + raw[8 + length:]


def _write(directory: Path, name: str, *, json_text: str | bytes | None = None, weights: bytes | None = None) -> None:
    """A checkpoint file: the shipped tensors with ``json_text`` as its description, or ``weights`` as is."""
    path = directory / f"{name}.safetensors"
    if weights is not None:
        path.write_bytes(weights)
    elif isinstance(json_text, bytes):
        path.write_bytes(_with_description(json_text))
    else:
        from safetensors.torch import load_file, save_file

        save_file(load_file(str(SHIPPED_FILE)), str(path), metadata={"relviz": json_text})


_counter = iter(range(10**9))


@SETTINGS
@given(data=mutated_checkpoint_json())
def test_checkpoint_json_garbage(checkpoint_dir, data):
    name = f"g{next(_counter)}"
    _write(checkpoint_dir, name, json_text=json.dumps(data))
    checkpoint = load_outcome(checkpoint_dir, name)
    info = outcome((f"checkpoint {name!r}",), read_checkpoint_info, checkpoint_dir / f"{name}.safetensors")
    assert refused(info) <= refused(checkpoint)  # a refused JSON never loads
    if not refused(checkpoint):
        check_loaded(checkpoint, data)


def _weights_variants() -> dict[str, bytes]:
    from safetensors.torch import load_file, save

    good = (CHECKPOINT_DIR / f"{SHIPPED}.safetensors").read_bytes()
    tensors_ = load_file(str(CHECKPOINT_DIR / f"{SHIPPED}.safetensors"))
    first = sorted(tensors_)[0]

    def variant(change) -> bytes:  # the shipped description, tensors changed
        copy = {k: v.clone() for k, v in tensors_.items()}
        change(copy)
        return save(copy, metadata={"relviz": json.dumps(SHIPPED_JSON)})

    return {
        "empty": b"",
        "random bytes": bytes(range(256)) * 4,
        "truncated": good[: len(good) // 2],
        "header only": good[:8],
        "huge header length": (2**62).to_bytes(8, "little") + b"{}",
        "float64 tensors": variant(lambda c: c.update({k: v.double() for k, v in c.items()})),
        "int tensors": variant(lambda c: c.update({first: c[first].long()})),
        "NaN": variant(lambda c: c[first].view(-1).__setitem__(0, math.nan)),
        "inf": variant(lambda c: c[first].view(-1).__setitem__(0, math.inf)),
        "wrong shape": variant(lambda c: c.update({first: torch.zeros(3, 3)})),
        "missing tensor": variant(lambda c: c.pop(first)),
        "extra tensor": variant(lambda c: c.update({"evil": torch.zeros(1)})),
    }


@pytest.mark.parametrize("variant", list(_weights_variants()))
def test_checkpoint_weights_garbage(checkpoint_dir, variant):
    name = "w" + "".join(ch for ch in variant if ch.isalnum())
    _write(checkpoint_dir, name, weights=_weights_variants()[variant])
    checkpoint = load_outcome(checkpoint_dir, name)
    assert refused(checkpoint), f"{variant}: loaded a checkpoint from corrupt weights"


METADATA = {"lr NaN": ("lr", math.nan), "lr -1": ("lr", -1.0), "lr 0": ("lr", 0), "train_length 10^400":
            ("train_length", 10**400), "train_length 10^6": ("train_length", 10**6), "steps 10^400": ("steps", 10**400),
            "batch_size 10^9": ("batch_size", 10**9), "seed -5": ("seed", -5)}


def test_checkpoint_metadata_that_training_cannot_write(checkpoint_dir):
    """A checkpoint's description must describe a run train() could have made (lr in (0, 1], steps ≤ 10^6,
    batch_size ≤ 4096, seed ≥ 0, train_length ≤ the model's 4096): anything else is refused."""
    loaded = []
    for label, (key, value) in METADATA.items():
        name = "m" + "".join(ch for ch in label if ch.isalnum())
        data = json.loads(json.dumps(SHIPPED_JSON))
        data[key] = value
        _write(checkpoint_dir, name, json_text=json.dumps(data))
        if not refused(load_outcome(checkpoint_dir, name)):
            loaded.append(label)
    assert not loaded, f"loaded checkpoints whose JSON says: {', '.join(loaded)}"


@pytest.mark.parametrize("case", ["deep nesting", "not UTF-8", "lone surrogate", "over 1 MB", "empty", "a list",
                                  "NaN accuracy", "giant model", "no weights file", "directory", "symlink name"])
def test_checkpoint_file_garbage(checkpoint_dir, case):
    name = "f" + "".join(ch for ch in case if ch.isalnum())
    data = json.loads(json.dumps(SHIPPED_JSON))
    text: str | bytes = json.dumps(data)
    weights = None
    if case == "deep nesting":
        text = '{"format": ' + "[" * 100_000 + "]" * 100_000 + "}"
    elif case == "not UTF-8":
        text = b"\xff\xfe" + json.dumps(data).encode()
    elif case == "lone surrogate":
        text = json.dumps(data).replace('"t5"', '"\ud800"', 1).encode("utf-8", "surrogatepass")
    elif case == "over 1 MB":
        data["padding"] = "x" * (1 << 20)
        text = json.dumps(data)
    elif case == "empty":
        text = ""
    elif case == "a list":
        text = "[]"
    elif case == "NaN accuracy":
        text = json.dumps(data).replace('"accuracy": 1.0', '"accuracy": NaN')
    elif case == "giant model":  # small weights, a JSON that describes a model of billions of parameters
        data["model"].update(d_model=8192, n_layers=64, d_ff=65536)
        text = json.dumps(data)
    _write(checkpoint_dir, name, json_text=text, weights=weights)
    if case == "no weights file":  # an old pair's JSON, its weights gone
        (checkpoint_dir / f"{name}.json").write_text(json.dumps(data | {"format_version": 1}))
        (checkpoint_dir / f"{name}.safetensors").unlink()
    elif case == "directory":
        (checkpoint_dir / f"{name}.safetensors").unlink()
        (checkpoint_dir / f"{name}.safetensors").mkdir()
    elif case == "symlink name":
        name = "../" + name
    checkpoint = load_outcome(checkpoint_dir, name)
    assert refused(checkpoint), f"{case}: loaded"


@FEW
@given(name=st.one_of(st.text(max_size=12), NON_INTS, st.sampled_from(["t5-shift", "shaw-shift", "T5-SHIFT",
                                                                       "t5-shift ", "../t5-shift", "/etc/passwd", "t5-shift.json",
                                                                       "t5-shift\x00", "..", ".", "CON", "a" * 101])))
def test_checkpoint_names(name):
    result = outcome(("checkpoint name", "no checkpoint named", "checkpoint"), load_checkpoint, name)
    if not refused(result):
        assert result.info.name == name and (CHECKPOINT_DIR / f"{name}.safetensors").is_file()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
