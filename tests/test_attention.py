"""Tests for relviz.attention: every function against a plain loop over (i, j)."""
from __future__ import annotations

import functools
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import relviz.attention as attention_module
import relviz.attention_fused as fused_kernels
import relviz.flex as flex_module
import relviz.skew as skew_module
from relviz import attention as fused
from relviz.positions import shaw_clip_index
from relviz.skew import gather_relative


def _weights_path_checked_against_fused(function):
    """``function`` on its exact weights path (need_weights=True); every call also runs the fused
    path (the default) on the same arguments and asserts it returns the same output and no weights."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        out, weights = function(*args, need_weights=True, **kwargs)
        fused_out, no_weights = function(*args, **kwargs)
        assert no_weights is None
        torch.testing.assert_close(fused_out, out)    # float64: 1e-7; float32: 1.3e-6 relative
        return out, weights
    return call


shaw_attention = _weights_path_checked_against_fused(fused.shaw_attention)
t5_attention = _weights_path_checked_against_fused(fused.t5_attention)
skew_attention = _weights_path_checked_against_fused(fused.skew_attention)
alibi_attention = _weights_path_checked_against_fused(fused.alibi_attention)

B, H, D = 2, 3, 4
LENGTHS = [1, 3, 8]


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype)


def _qkv(length: int, seed: int = 0, *, batch: int = B, heads: int = H, dim: int = D,
         dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (_randn(batch, heads, length, dim, seed=seed, dtype=dtype),
            _randn(batch, heads, length, dim, seed=seed + 1, dtype=dtype),
            _randn(batch, heads, length, dim, seed=seed + 2, dtype=dtype))


# ---- naive references: explicit index lookup per (i, j) -------------------------------

def _naive(q, k, v, *, scale, causal, key_vector=None, bias=None, value_vector=None):
    """Loop over (i, j) (vectorised over batch and heads only).

    key_vector(i, j) -> [D] added to k_j inside the dot product (or None);
    bias(i, j) -> [H] added to the scaled logit (or None);
    value_vector(i, j) -> [D] added to v_j in the output (or None).
    """
    length = q.shape[-2]
    logits = torch.empty(q.shape[:-1] + (length,), dtype=q.dtype)
    for i in range(length):
        for j in range(length):
            key = k[..., j, :]
            if key_vector is not None:
                key = key + key_vector(i, j)
            logit = scale * (q[..., i, :] * key).sum(-1)                  # [B, H]
            if bias is not None:
                logit = logit + bias(i, j)
            if causal and j > i:
                logit = torch.full_like(logit, float("-inf"))
            logits[..., i, j] = logit
    weights = torch.softmax(logits, dim=-1)
    out = torch.zeros_like(q)
    for i in range(length):
        for j in range(length):
            value = v[..., j, :]
            if value_vector is not None:
                value = value + value_vector(i, j)
            out[..., i, :] += weights[..., i, j, None] * value
    return out, weights


def naive_shaw(q, k, v, rel_k, rel_v, *, clip, causal, scale):
    def row(i, j):
        return max(-clip, min(clip, j - i)) + clip
    return _naive(q, k, v, scale=scale, causal=causal,
                  key_vector=lambda i, j: rel_k[row(i, j)],
                  value_vector=None if rel_v is None else (lambda i, j: rel_v[row(i, j)]))


@functools.lru_cache(maxsize=None)
def naive_t5_bucket(n: int, *, num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """T5's bucket for one offset n = key − query, the reference formula on one value (float32)."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if n > 0:
            bucket += num_buckets
        n = abs(n)
    else:
        n = max(-n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    ratio = torch.log(torch.tensor(n, dtype=torch.float32) / max_exact)
    large = max_exact + int(ratio / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


def naive_t5(q, k, v, table, *, num_buckets, max_distance, bidirectional, causal, scale):
    def bias(i, j):
        return table[naive_t5_bucket(j - i, num_buckets=num_buckets, max_distance=max_distance,
                                     bidirectional=bidirectional)]
    return _naive(q, k, v, scale=scale, causal=causal, bias=bias)


def naive_skew(q, k, v, e_r, *, scale):
    rows = e_r.shape[0]

    def key_vector(i, j):
        if j > i:
            return torch.zeros_like(e_r[0])        # masked anyway
        return e_r[max(j - i + rows - 1, 0)]     # beyond the table: its farthest row
    return _naive(q, k, v, scale=scale, causal=True, key_vector=key_vector)


def naive_alibi_slopes(heads: int) -> list[float]:
    known = {1: [2 ** -8], 2: [2 ** -4, 2 ** -8], 3: [2 ** -4, 2 ** -8, 2 ** -2],
             4: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8],
             6: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]}
    if heads in known:
        return known[heads]
    assert heads & (heads - 1) == 0
    return [2 ** (-8 * (h + 1) / heads) for h in range(heads)]


def naive_alibi(q, k, v, *, causal, scale):
    slopes = torch.tensor(naive_alibi_slopes(q.shape[1]), dtype=q.dtype)
    return _naive(q, k, v, scale=scale, causal=causal, bias=lambda i, j: -slopes * abs(i - j))


def _close(actual, expected) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-10)


def _check_weights(weights: torch.Tensor, causal: bool) -> None:
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=weights.dtype))
    assert (weights >= 0).all()
    if causal:
        length = weights.shape[-1]
        above = torch.ones(length, length, dtype=torch.bool).triu(1)
        assert (weights[..., above] == 0).all()


# ---- Shaw -------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("clip", [0, 1, 2, 10])
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("with_values", [False, True])
def test_shaw_matches_naive_loop(length: int, clip: int, causal: bool, with_values: bool) -> None:
    q, k, v = _qkv(length, seed=length + 10 * clip)
    rel_k = _randn(2 * clip + 1, D, seed=7)
    rel_v = _randn(2 * clip + 1, D, seed=8) if with_values else None
    out, weights = shaw_attention(q, k, v, rel_k, rel_v, clip=clip, causal=causal)
    ref_out, ref_weights = naive_shaw(q, k, v, rel_k, rel_v, clip=clip, causal=causal,
                                      scale=1 / math.sqrt(D))
    assert out.shape == q.shape and weights.shape == (B, H, length, length)
    _close(weights, ref_weights)
    _close(out, ref_out)
    _check_weights(weights, causal)


@settings(max_examples=25, deadline=None)
@given(length=st.integers(1, 9), clip=st.integers(0, 12), causal=st.booleans(),
       scale=st.floats(0.05, 3.0), seed=st.integers(0, 2**16))
def test_shaw_property(length: int, clip: int, causal: bool, scale: float, seed: int) -> None:
    q, k, v = _qkv(length, seed=seed, batch=1, heads=2)
    rel_k, rel_v = _randn(2 * clip + 1, D, seed=seed + 3), _randn(2 * clip + 1, D, seed=seed + 4)
    out, weights = shaw_attention(q, k, v, rel_k, rel_v, clip=clip, causal=causal, scale=scale)
    ref_out, ref_weights = naive_shaw(q, k, v, rel_k, rel_v, clip=clip, causal=causal, scale=scale)
    _close(weights, ref_weights)
    _close(out, ref_out)


def test_shaw_with_zero_tables_is_plain_attention() -> None:
    q, k, v = _qkv(6, seed=3)
    zeros = torch.zeros(5, D, dtype=torch.float64)
    out, weights = shaw_attention(q, k, v, zeros, zeros, clip=2, causal=True, scale=1.0)
    logits = (q @ k.transpose(-2, -1)).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -math.inf)
    expected = torch.softmax(logits, -1)
    _close(weights, expected)
    _close(out, expected @ v)


# ---- T5 ---------------------------------------------------------------------------------

T5_CONFIGS = [(32, 128, True), (32, 128, False), (8, 16, True), (8, 16, False), (4, 3, True),
              (6, 5, True), (5, 7, True), (5, 7, False), (2, 2, False), (3, 4, False)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_buckets, max_distance, bidirectional", T5_CONFIGS)
@pytest.mark.parametrize("length", [3, 12])
def test_t5_matches_naive_loop(length: int, num_buckets: int, max_distance: int,
                               bidirectional: bool, causal: bool) -> None:
    q, k, v = _qkv(length, seed=length + num_buckets)
    table = _randn(num_buckets, H, seed=11)
    kwargs = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional,
                  causal=causal)
    out, weights = t5_attention(q, k, v, table, **kwargs)
    ref_out, ref_weights = naive_t5(q, k, v, table, scale=1 / math.sqrt(D), **kwargs)
    _close(weights, ref_weights)
    _close(out, ref_out)
    _check_weights(weights, causal)


def test_naive_t5_bucket_matches_the_documented_32_128_table() -> None:
    documented = {0: 0, -1: 1, -7: 7, -8: 8, -11: 8, -12: 9, -15: 9, -16: 10, -22: 10, -23: 11,
                  -31: 11, -32: 12, -45: 12, -46: 13, -63: 13, -64: 14, -90: 14, -91: 15,
                  -500: 15, 1: 17, 7: 23, 8: 24, 11: 24, 12: 25, 16: 26, 23: 27, 32: 28,
                  46: 29, 64: 30, 90: 30, 91: 31, 1000: 31}
    for n, bucket in documented.items():
        assert naive_t5_bucket(n, num_buckets=32, max_distance=128, bidirectional=True) == bucket


def test_t5_scale_one_reproduces_t5_and_bias_is_not_scaled() -> None:
    length = 20
    q, k, v = _qkv(length, seed=5)
    table = _randn(32, H, seed=6)
    out, weights = t5_attention(q, k, v, table, num_buckets=32, max_distance=128,
                                bidirectional=True, scale=1.0)
    buckets = torch.tensor([[naive_t5_bucket(j - i, num_buckets=32, max_distance=128, bidirectional=True)
                             for j in range(length)] for i in range(length)])
    logits = q @ k.transpose(-2, -1) + table[buckets].permute(2, 0, 1)
    _close(weights, torch.softmax(logits, -1))
    _close(out, torch.softmax(logits, -1) @ v)
    # with another scale only q·k is scaled
    _, weights_half = t5_attention(q, k, v, table, num_buckets=32, max_distance=128,
                                   bidirectional=True, scale=0.5)
    logits_half = 0.5 * (q @ k.transpose(-2, -1)) + table[buckets].permute(2, 0, 1)
    _close(weights_half, torch.softmax(logits_half, -1))


# ---- Music Transformer skew -------------------------------------------------------------

@pytest.mark.parametrize("rows", [1, 3, 7, 8, 9, 20])
@pytest.mark.parametrize("length", [1, 3, 8])
def test_skew_attention_matches_naive_loop(length: int, rows: int) -> None:
    q, k, v = _qkv(length, seed=length * 31 + rows)
    e_r = _randn(rows, D, seed=rows)
    out, weights = skew_attention(q, k, v, e_r)
    ref_out, ref_weights = naive_skew(q, k, v, e_r, scale=1 / math.sqrt(D))
    _close(weights, ref_weights)
    _close(out, ref_out)
    _check_weights(weights, causal=True)


@pytest.mark.parametrize("rows, length", [(3, 8), (8, 8), (12, 8)])
def test_skew_attention_equals_causal_shaw_with_clip_rows_minus_one(rows: int, length: int) -> None:
    """Repeating e_r[0] beyond the table is exactly Shaw's clipping on the past side."""
    q, k, v = _qkv(length, seed=rows)
    e_r = _randn(rows, D, seed=99)
    rel_k = torch.cat([e_r, _randn(rows - 1, D, seed=100)])    # future rows: masked, any value
    out, weights = skew_attention(q, k, v, e_r, scale=0.7)
    shaw_out, shaw_weights = shaw_attention(q, k, v, rel_k, clip=rows - 1, causal=True, scale=0.7)
    _close(weights, shaw_weights)
    _close(out, shaw_out)


def test_skew_attention_uses_the_last_rows_when_the_table_is_longer() -> None:
    q, k, v = _qkv(4, seed=1)
    e_r = _randn(10, D, seed=2)
    _close(skew_attention(q, k, v, e_r)[0], skew_attention(q, k, v, e_r[-4:])[0])


# ---- ALiBi ------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("heads", [1, 3, 4, 6, 8])
@pytest.mark.parametrize("length", [1, 4, 9])
def test_alibi_matches_naive_loop(length: int, heads: int, causal: bool) -> None:
    q, k, v = _qkv(length, seed=heads * 5 + length, heads=heads)
    out, weights = alibi_attention(q, k, v, causal=causal)
    ref_out, ref_weights = naive_alibi(q, k, v, causal=causal, scale=1 / math.sqrt(D))
    _close(weights, ref_weights)
    _close(out, ref_out)
    _check_weights(weights, causal)


def test_alibi_defaults_to_causal_and_scale_one_path() -> None:
    q, k, v = _qkv(6, seed=4, heads=8)
    out, weights = alibi_attention(q, k, v, scale=1.0)
    ref_out, ref_weights = naive_alibi(q, k, v, causal=True, scale=1.0)
    _close(weights, ref_weights)
    _close(out, ref_out)


# ---- common behaviour -------------------------------------------------------------------

def _call_all(q, k, v, **extra):
    d = q.shape[-1]
    heads = q.shape[1]
    dtype = q.dtype
    gen = torch.Generator().manual_seed(0)

    def table(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(q.device).requires_grad_(q.requires_grad)
    rel_k, rel_v, bias, e_r = table(5, d), table(5, d), table(8, heads), table(6, d)
    return {
        "shaw": (shaw_attention(q, k, v, rel_k, rel_v, clip=2, causal=True, **extra), [rel_k, rel_v]),
        "t5": (t5_attention(q, k, v, bias, num_buckets=8, max_distance=20, bidirectional=False,
                            causal=True, **extra), [bias]),
        "skew": (skew_attention(q, k, v, e_r, **extra), [e_r]),
        "alibi": (alibi_attention(q, k, v, **extra), []),
    }


def test_float32_inputs_keep_float32_and_scale_default_is_one_over_sqrt_d() -> None:
    q, k, v = _qkv(5, seed=9, dtype=torch.float32)
    for name, ((out, weights), _) in _call_all(q, k, v).items():
        assert out.dtype == weights.dtype == torch.float32, name
    default = _call_all(q, k, v)
    explicit = _call_all(q, k, v, scale=1 / math.sqrt(D))
    for name in default:
        torch.testing.assert_close(default[name][0][1], explicit[name][0][1])


@pytest.mark.parametrize("name", ["shaw", "t5", "skew", "alibi"])
def test_gradients_flow_to_inputs_and_tables(name: str) -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(7, seed=12, dtype=torch.float32))
    (out, weights), tables = _call_all(q, k, v)[name]
    (out.square().sum() + weights[..., 0].sum()).backward()
    for tensor in [q, k, v, *tables]:
        assert tensor.grad is not None and torch.isfinite(tensor.grad).all()
        assert tensor.grad.abs().sum() > 0


def test_gradcheck_all_functions() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(4, seed=13, batch=1, heads=2, dim=3))
    rel_k = _randn(3, 3, seed=1).requires_grad_()
    rel_v = _randn(3, 3, seed=2).requires_grad_()
    bias = _randn(4, 2, seed=3).requires_grad_()
    rel_k13, rel_v13 = _randn(13, 3, seed=5).requires_grad_(), _randn(13, 3, seed=6).requires_grad_()
    e_r = _randn(3, 3, seed=4).requires_grad_()
    checks = [
        (lambda q, k, v, a, b: shaw_attention(q, k, v, a, b, clip=1, causal=False), (q, k, v, rel_k, rel_v)),
        (lambda q, k, v, a, b: shaw_attention(q, k, v, a, b, clip=6, causal=True),
         (q, k, v, rel_k13, rel_v13)),
        (lambda q, k, v, a: t5_attention(q, k, v, a, num_buckets=4, max_distance=3, bidirectional=True),
         (q, k, v, bias)),
        (lambda q, k, v, a: skew_attention(q, k, v, a), (q, k, v, e_r)),
        (lambda q, k, v: alibi_attention(q, k, v, causal=True), (q, k, v)),
    ]
    for func, inputs in checks:
        assert torch.autograd.gradcheck(func, inputs, fast_mode=True)


# ---- memory: no L × L × D tensor ------------------------------------------------------

class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor any aten op returns (composite ops show their pieces)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.op = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in (result if isinstance(result, (tuple, list)) else [result]):
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > self.largest:
                self.largest = t.untyped_storage().nbytes()
                self.op = str(func)
        return result


MEM_L, MEM_D = 256, 64
MEM_LIMIT = MEM_L * MEM_L * MEM_D * 4          # bytes of one fp32 L × L × D tensor (16.8 MB)


def _memory_cases():
    q, k, v = (t.requires_grad_() for t in _qkv(MEM_L, seed=0, batch=1, heads=2, dim=MEM_D,
                                                  dtype=torch.float32))
    clip = 300                                  # > L: every offset has its own row
    rel_k = torch.randn(2 * clip + 1, MEM_D, requires_grad=True)
    rel_v = torch.randn(2 * clip + 1, MEM_D, requires_grad=True)
    e_r = torch.randn(MEM_L, MEM_D, requires_grad=True)
    return {
        "shaw": lambda: shaw_attention(q, k, v, rel_k, rel_v, clip=clip, causal=True),
        "skew": lambda: skew_attention(q, k, v, e_r),
        "naive": lambda: (q @ k.transpose(-2, -1) + gather_relative(
            q, rel_k, shaw_clip_index(MEM_L, k=clip, device="cpu")), None),
    }


def _run(fn, backward: bool = True) -> None:
    out, _ = fn()
    if backward:
        out.sum().backward()


@pytest.mark.parametrize("name", ["shaw", "skew"])
def test_no_gather_relative_and_no_l_l_d_tensor(name: str, monkeypatch) -> None:
    """Forward and backward: no op returns anything near L × L × D (16.8 MB here)."""
    def forbidden(*args, **kwargs):
        raise AssertionError("gather_relative builds L × L × D and must not be used")
    monkeypatch.setattr(skew_module, "gather_relative", forbidden)
    if hasattr(attention_module, "gather_relative"):
        monkeypatch.setattr(attention_module, "gather_relative", forbidden)
    recorder = _LargestTensor()
    with recorder:
        _run(_memory_cases()[name])
    assert recorder.largest < MEM_LIMIT / 8, (recorder.op, recorder.largest)


def test_the_largest_tensor_check_does_see_the_naive_gather() -> None:
    recorder = _LargestTensor()
    with recorder:
        _run(_memory_cases()["naive"], backward=False)
    assert recorder.largest >= MEM_LIMIT


def _profiled_peak_op_memory(fn, backward: bool = True) -> int:
    """Largest memory any profiled op (with its children) allocates, in bytes."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _run(fn, backward)
    return max(max(e.cpu_memory_usage, e.self_cpu_memory_usage) for e in prof.events())


def test_profiler_sees_no_l_l_d_allocation() -> None:
    cases = _memory_cases()
    assert _profiled_peak_op_memory(cases["shaw"]) < MEM_LIMIT / 4
    assert _profiled_peak_op_memory(cases["skew"]) < MEM_LIMIT / 4
    # the same measurement does catch the naive path's gathered tensor
    assert _profiled_peak_op_memory(cases["naive"], backward=False) >= MEM_LIMIT


# ---- invalid arguments ------------------------------------------------------------------

def _valid():
    q, k, v = _qkv(4, seed=0, dtype=torch.float32)
    return q, k, v, torch.zeros(5, D), torch.zeros(8, H), torch.zeros(6, D)


def _error_cases():
    q, k, v, rel, bias, e_r = _valid()
    t5 = dict(num_buckets=8, max_distance=20, bidirectional=True)
    return [
        # q, k, v themselves (shared by every function)
        ("q-list", lambda: alibi_attention(q.tolist(), k, v), "q", "torch.Tensor"),
        ("q-3d", lambda: alibi_attention(q[0], k, v), "q", "4 dimensions"),
        ("q-int", lambda: alibi_attention(q.long(), k.long(), v.long()), "q", "floating"),
        ("k-shape", lambda: shaw_attention(q, k[:, :, :3], v, rel, clip=2), "k", "same shape"),
        ("v-shape", lambda: t5_attention(q, k, v[..., :2], bias, **t5), "v", "same shape"),
        ("k-dtype", lambda: skew_attention(q, k.double(), v, e_r), "k", "dtype"),
        ("empty", lambda: alibi_attention(q[:, :, :0], k[:, :, :0], v[:, :, :0]), "q", ">= 1"),
        ("scale-neg", lambda: alibi_attention(q, k, v, scale=-1.0), "scale", "positive"),
        ("scale-zero", lambda: shaw_attention(q, k, v, rel, clip=2, scale=0), "scale", "positive"),
        ("scale-nan", lambda: skew_attention(q, k, v, e_r, scale=float("nan")), "scale", "finite"),
        ("scale-str", lambda: t5_attention(q, k, v, bias, **t5, scale="1"), "scale", "number"),
        ("causal-int", lambda: alibi_attention(q, k, v, causal=1), "causal", "True or False"),
        # Shaw
        ("clip-neg", lambda: shaw_attention(q, k, v, rel, clip=-1), "clip", ">= 0|from 0"),
        ("clip-float", lambda: shaw_attention(q, k, v, rel, clip=2.0), "clip", "integer"),
        ("rel_k-rows", lambda: shaw_attention(q, k, v, rel, clip=3), "rel_k", "2\\*clip\\+1"),
        ("rel_k-cols", lambda: shaw_attention(q, k, v, rel[:, :2], clip=2), "rel_k", "shape"),
        ("rel_k-list", lambda: shaw_attention(q, k, v, rel.tolist(), clip=2), "rel_k", "torch.Tensor"),
        ("rel_k-dtype", lambda: shaw_attention(q, k, v, rel.double(), clip=2), "rel_k", "dtype"),
        ("rel_v-rows", lambda: shaw_attention(q, k, v, rel, rel[:3], clip=2), "rel_v", "2\\*clip\\+1"),
        ("rel_v-1d", lambda: shaw_attention(q, k, v, rel, rel[0], clip=2), "rel_v", "2 dimensions"),
        # T5
        ("t5-buckets", lambda: t5_attention(q, k, v, bias[:2], num_buckets=2, max_distance=20,
                                            bidirectional=True), "num_buckets", "at least 4"),
        ("t5-distance", lambda: t5_attention(q, k, v, bias, num_buckets=8, max_distance=2,
                                             bidirectional=True), "max_distance", "greater than"),
        ("t5-bidir", lambda: t5_attention(q, k, v, bias, num_buckets=8, max_distance=20,
                                          bidirectional="yes"), "bidirectional", "True or False"),
        ("t5-rows", lambda: t5_attention(q, k, v, bias[:7], **t5), "bias_table", "num_buckets, H"),
        ("t5-heads", lambda: t5_attention(q, k, v, bias[:, :2], **t5), "bias_table", "num_buckets, H"),
        ("t5-missing", lambda: t5_attention(q, k, v, None, **t5), "bias_table", "torch.Tensor"),
        # skew
        ("e_r-cols", lambda: skew_attention(q, k, v, e_r[:, :3]), "e_r", "M, D"),
        ("e_r-empty", lambda: skew_attention(q, k, v, e_r[:0]), "e_r", "M >= 1"),
        ("e_r-3d", lambda: skew_attention(q, k, v, e_r[None]), "e_r", "2 dimensions"),
        ("e_r-int", lambda: skew_attention(q, k, v, e_r.long()), "e_r", "floating"),
    ]


@pytest.mark.parametrize("case", _error_cases(), ids=lambda c: c[0])
def test_invalid_arguments_raise_value_error_naming_the_parameter(case) -> None:
    _, call, param, phrase = case
    with pytest.raises(ValueError, match=param) as info:
        call()
    assert re.search(phrase, str(info.value)), str(info.value)


def test_tables_on_another_device_are_refused_with_a_message() -> None:
    q, k, v, rel, _, _ = _valid()
    meta = rel.to("meta")
    with pytest.raises(ValueError, match="rel_k must be on q's device"):
        shaw_attention(q, k, v, meta, clip=2)


# ---- CUDA -------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available on this machine")
def test_cuda_matches_cpu() -> None:
    q, k, v = _qkv(9, seed=21, dtype=torch.float32)
    cpu = _call_all(q, k, v)
    gpu = _call_all(q.cuda(), k.cuda(), v.cuda())
    for name in cpu:
        (out_c, w_c), _ = cpu[name]
        (out_g, w_g), _ = gpu[name]
        assert out_g.device.type == "cuda" and w_g.device.type == "cuda"
        torch.testing.assert_close(out_g.cpu(), out_c, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(w_g.cpu(), w_c, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available on this machine")
def test_cuda_auto_backend_matches_sdpa_forward_and_backward() -> None:
    """On CUDA "auto" runs compiled FlexAttention: same output and gradients as the SDPA path, at a
    length that is not a multiple of FlexAttention's 128-wide blocks, causal and not."""
    assert flex_module.resolve_backend("auto", torch.device("cuda"), 64) == "flex"
    gen = torch.Generator().manual_seed(4)
    table = torch.randn(32, 4, generator=gen).cuda()
    for length in (333,):        # one length: each new one compiles again (seconds each, on a 6-minute budget)
        q, k, v = (torch.randn(2, 4, length, 64, generator=gen).cuda() for _ in range(3))
        for causal in (False, True):
            calls = {"t5": lambda x, y, z, **m: fused.t5_attention(x, y, z, table, num_buckets=32, max_distance=128,
                                                                  bidirectional=not causal, causal=causal, **m),
                     "alibi": lambda x, y, z, **m: fused.alibi_attention(x, y, z, causal=causal, **m)}
            for name, call in calls.items():
                results = []
                for backend in ("auto", "sdpa"):
                    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
                    out = call(*leaves, backend=backend)[0]
                    out.square().sum().backward()
                    results.append((out.detach(), [t.grad for t in leaves]))
                (out_a, grads_a), (out_s, grads_s) = results
                torch.testing.assert_close(out_a, out_s, rtol=1e-4, atol=1e-4, msg=f"{name} L={length} {causal}")
                for ga, gs in zip(grads_a, grads_s):
                    torch.testing.assert_close(ga, gs, rtol=1e-3, atol=1e-3, msg=f"{name} grad L={length}")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available on this machine")
def test_cuda_narrow_heads_run_sdpa_under_auto_and_are_refused_under_flex() -> None:
    """A head narrower than 16 (the toy models' 4) makes torch's FlexAttention kernel raise in the compile:
    "auto" runs SDPA for it (the output equals backend="sdpa" bit for bit), and "flex" says so up front."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 40, 4, generator=gen).cuda() for _ in range(3))
    auto = fused.alibi_attention(q, k, v, causal=True)[0]
    torch.testing.assert_close(auto, fused.alibi_attention(q, k, v, causal=True, backend="sdpa")[0], rtol=0, atol=0)
    with pytest.raises(ValueError, match="head dim of at least 16 on CUDA"):
        fused.alibi_attention(q, k, v, causal=True, backend="flex")


# ---- the fused path: same output and gradients as the weights path ----------------------

@st.composite
def _attention_case(draw):
    """A function and one of its parameter families, as (name, call(q, k, v, tables, **mode), tables)."""
    name = draw(st.sampled_from(["shaw", "shaw_kv", "t5", "skew", "alibi"]))
    heads, dim = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    length = draw(st.integers(1, 10))
    causal = draw(st.booleans())
    scale = draw(st.sampled_from([None, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).requires_grad_()
    if name.startswith("shaw"):
        clip = draw(st.integers(0, 12))
        tables = [randn(2 * clip + 1, dim)] + ([randn(2 * clip + 1, dim)] if name == "shaw_kv" else [])

        def call(q, k, v, tables, **mode):
            return fused.shaw_attention(q, k, v, *tables, clip=clip, causal=causal, scale=scale, **mode)
    elif name == "t5":
        num_buckets, max_distance, bidirectional = draw(st.sampled_from(T5_CONFIGS))
        tables = [randn(num_buckets, heads)]

        def call(q, k, v, tables, **mode):
            return fused.t5_attention(q, k, v, *tables, num_buckets=num_buckets, max_distance=max_distance,
                                      bidirectional=bidirectional, causal=causal, scale=scale, **mode)
    elif name == "skew":
        tables = [randn(draw(st.integers(1, 12)), dim)]

        def call(q, k, v, tables, **mode):
            return fused.skew_attention(q, k, v, *tables, scale=scale, **mode)
    else:
        tables = []

        def call(q, k, v, tables, **mode):
            return fused.alibi_attention(q, k, v, causal=causal, scale=scale, **mode)
    q, k, v = (randn(draw(st.integers(1, 2)) if i == 0 else 1, heads, length, dim) for i in range(3))
    q, k, v = (t.detach().expand(q.shape).contiguous().requires_grad_() for t in (q, k, v))
    return name, call, [q, k, v] + tables


@settings(max_examples=60, deadline=None)
@given(case=_attention_case())
def test_fused_path_matches_the_weights_path_with_gradients(case) -> None:
    """float32: the fused output and every gradient (q, k, v, tables) agree with the weights path."""
    name, call, inputs = case
    q, k, v, *tables = inputs
    upstream = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    results = {}
    for need_weights in (True, False):
        out, weights = call(q, k, v, tables, need_weights=need_weights)
        assert (weights is None) == (not need_weights)
        grads = torch.autograd.grad((out * upstream).sum(), inputs)
        results[need_weights] = (out.detach(), grads)
    torch.testing.assert_close(results[False][0], results[True][0], rtol=1e-5, atol=1e-5)
    for fused_grad, exact_grad in zip(results[False][1], results[True][1]):
        torch.testing.assert_close(fused_grad, exact_grad, rtol=1e-4, atol=1e-5)


def test_fused_t5_and_alibi_never_build_the_l_by_l_bias() -> None:
    """The per-offset bias reaches SDPA as an unfold view: no op returns an [H, L, L] tensor."""
    length, heads = 256, 4
    q, k, v = _qkv(length, seed=3, batch=1, heads=heads, dim=8, dtype=torch.float32)
    table = torch.randn(32, heads)
    for call in (lambda: fused.t5_attention(q, k, v, table, num_buckets=32, max_distance=128,
                                            bidirectional=False, causal=True),
                 lambda: fused.alibi_attention(q, k, v)):
        recorder = _LargestTensor()
        with recorder:
            out, weights = call()
        assert weights is None
        # SDPA's own kernel works in blocks; one [H, L, L] float32 tensor would be 1 MB
        assert recorder.largest < heads * length * length * 4 / 2, (recorder.op, recorder.largest)


@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_fused_paths_in_query_chunks_match_the_weights_path(chunk: int, monkeypatch) -> None:
    """Several query chunks (each seeing only keys up to its last query when causal), the skew bias
    as a strided view of q·E_rᵀ, Shaw's band gathered between zeros and the far future's constant
    (clip 3 of length 10; 0; 12, past the length), T5's and ALiBi's per-offset views: same output
    and gradients as the weights path."""
    monkeypatch.setattr(fused_kernels, "FUSED_CHUNK", chunk)
    gen = torch.Generator().manual_seed(chunk)
    q, k, v = (torch.randn(2, 3, 10, 5, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    tables = {"skew": torch.randn(4, 5, generator=gen, dtype=torch.float64, requires_grad=True),
              "skew_long": torch.randn(13, 5, generator=gen, dtype=torch.float64, requires_grad=True),
              "shaw": torch.randn(7, 5, generator=gen, dtype=torch.float64, requires_grad=True),
              "shaw_clip0": torch.randn(1, 5, generator=gen, dtype=torch.float64, requires_grad=True),
              "shaw_clip12": torch.randn(25, 5, generator=gen, dtype=torch.float64, requires_grad=True)}
    calls = [(tables["skew"], lambda w: fused.skew_attention(q, k, v, tables["skew"], need_weights=w)),
             (tables["skew_long"], lambda w: fused.skew_attention(q, k, v, tables["skew_long"], need_weights=w))]
    t5_table = torch.randn(8, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    for causal in (True, False):
        for name, clip in (("shaw", 3), ("shaw_clip0", 0), ("shaw_clip12", 12)):   # band inside, empty, all keys
            calls.append((tables[name], lambda w, c=causal, n=name, m=clip: fused.shaw_attention(
                q, k, v, tables[n], clip=m, causal=c, need_weights=w)))
        calls.append((t5_table, lambda w, c=causal: fused.t5_attention(q, k, v, t5_table, num_buckets=8, max_distance=6,
                                                                         bidirectional=not c, causal=c, need_weights=w)))
        calls.append((q, lambda w, c=causal: fused.alibi_attention(q, k, v, causal=c, need_weights=w)))
    for table, call in calls:
        (exact, _), (out, _) = call(True), call(False)
        torch.testing.assert_close(out, exact, rtol=1e-10, atol=1e-10)
        for a, b in zip(torch.autograd.grad(out.sum(), (q, k, v, table)),
                        torch.autograd.grad(exact.sum(), (q, k, v, table))):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_fused_skew_and_shaw_hold_no_bias_larger_than_one_chunk(monkeypatch) -> None:
    monkeypatch.setattr(fused_kernels, "FUSED_CHUNK", 32)
    length, heads = 256, 4
    q, k, v = _qkv(length, seed=3, batch=1, heads=heads, dim=8, dtype=torch.float32)
    for call in (lambda: fused.skew_attention(q, k, v, torch.randn(length, 8)),
                 lambda: fused.shaw_attention(q, k, v, torch.randn(129, 8), clip=64, causal=True)):
        recorder = _LargestTensor()
        with recorder:
            out, weights = call()
        # a chunk's bias [H, 32, L + 1], or Shaw's per-index logits [H, L, 2·clip + 2]; never [H, L, L]
        largest = heads * max(32 * (length + 1), length * 130) * 4
        assert weights is None and recorder.largest <= largest, (recorder.op, recorder.largest)


def test_offset_bias_attention_is_t5_with_the_per_offset_bias() -> None:
    from relviz.positions import t5_bias, t5_bias_offsets
    q, k, v = _qkv(9, seed=4)
    table = _randn(8, H, seed=5)
    config = dict(num_buckets=8, max_distance=16, bidirectional=True)
    per_offset = t5_bias_offsets(table, 9, **config)
    assert per_offset.shape == (H, 17)
    for need_weights in (True, False):
        expected = fused.t5_attention(q, k, v, table, **config, causal=True, need_weights=need_weights)
        got = fused.offset_bias_attention(q, k, v, per_offset, causal=True, need_weights=need_weights)
        _close(got[0], expected[0])
    weights = fused.offset_bias_attention(q, k, v, per_offset, need_weights=True)[1]
    logits = q @ k.transpose(-2, -1) / math.sqrt(D) + t5_bias(table, 9, **config)
    _close(weights, torch.softmax(logits, -1))
    with pytest.raises(ValueError, match="per_offset must have shape"):
        fused.offset_bias_attention(q, k, v, per_offset[:, :-1])


@pytest.mark.parametrize("bad, phrase", [(dict(need_weights=1), "need_weights must be True or False"),
                                         (dict(backend="cuda"), "backend must be one of"),
                                         (dict(backend="flex", need_weights=True), "fused path")])
def test_bad_mode_is_refused(bad, phrase) -> None:
    q, k, v = _qkv(4, seed=0, dtype=torch.float32)
    with pytest.raises(ValueError, match=phrase):
        fused.alibi_attention(q, k, v, **bad)


def test_auto_backend_is_sdpa_on_cpu_and_flex_only_where_cuda_has_it(monkeypatch) -> None:
    """"auto" (the default) picks FlexAttention on CUDA only, for heads of at least 16 (torch's CUDA kernel
    refuses narrower ones in the compile), and falls back to SDPA without it."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert flex_module.resolve_backend("auto", cpu, 64) == "sdpa"
    assert flex_module.resolve_backend("flex", cpu, 4) == "flex" and flex_module.resolve_backend("sdpa", cuda, 64) == "sdpa"
    monkeypatch.setattr(flex_module, "available", lambda device_type: device_type == "cuda")
    assert flex_module.resolve_backend("auto", cuda, 64) == "flex"
    assert flex_module.resolve_backend("auto", cuda, flex_module.MIN_CUDA_HEAD_DIM) == "flex"
    assert flex_module.resolve_backend("auto", cuda, flex_module.MIN_CUDA_HEAD_DIM - 1) == "sdpa"
    monkeypatch.setattr(flex_module, "available", lambda device_type: False)
    assert flex_module.resolve_backend("auto", cuda, 64) == "sdpa"
    q, k, v = _qkv(6, seed=3, dtype=torch.float32)
    for causal in (False, True):           # on CPU "auto" is the SDPA path, bit for bit
        torch.testing.assert_close(fused.alibi_attention(q, k, v, causal=causal)[0],
                                   fused.alibi_attention(q, k, v, causal=causal, backend="sdpa")[0], rtol=0, atol=0)
    with_weights = fused.alibi_attention(q, k, v, backend="auto", need_weights=True)
    assert with_weights[1] is not None and with_weights[1].shape == (B, H, 6, 6)


def test_fused_path_refuses_non_finite_inputs_like_the_weights_path() -> None:
    q, k, v = _qkv(5, seed=0, dtype=torch.float32)
    table = torch.zeros(8, H)
    table[1, 1] = -math.inf                       # j − i = −1: would silently mask keys in a fused kernel
    bad_k = k.clone()
    bad_k[0, 0, 2, 1] = math.nan
    for need_weights in (True, False):
        with pytest.raises(ValueError, match="finite"):
            fused.t5_attention(q, k, v, table, num_buckets=8, max_distance=16, bidirectional=True,
                               need_weights=need_weights)
        with pytest.raises(ValueError, match="finite"):
            fused.alibi_attention(q, bad_k, v, need_weights=need_weights)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_backend_score_mods_match_sdpa(monkeypatch) -> None:
    """backend="flex": every score_mod gives the SDPA path's output. Run eagerly here (the compiled
    kernel is the same function; compiling takes ~15-50 s on CPU: `python -m relviz bench` times it)."""
    from torch.nn.attention.flex_attention import flex_attention
    monkeypatch.setitem(flex_module._COMPILED, "cpu", flex_attention)
    q, k, v = _qkv(7, seed=8, dtype=torch.float32)
    gen = torch.Generator().manual_seed(2)
    rel = torch.randn(9, D, generator=gen)
    table = torch.randn(8, H, generator=gen)
    calls = {
        "shaw": lambda **m: fused.shaw_attention(q, k, v, rel, clip=4, causal=False, **m),
        "shaw causal": lambda **m: fused.shaw_attention(q, k, v, rel, clip=4, causal=True, **m),
        "t5": lambda **m: fused.t5_attention(q, k, v, table, num_buckets=8, max_distance=16, bidirectional=True,
                                             **m),
        "t5 causal": lambda **m: fused.t5_attention(q, k, v, table, num_buckets=8, max_distance=16,
                                                    bidirectional=False, causal=True, **m),
        "skew": lambda **m: fused.skew_attention(q, k, v, rel[:5], **m),
        "alibi": lambda **m: fused.alibi_attention(q, k, v, causal=False, **m),
    }
    with torch.no_grad():
        for name, call in calls.items():
            flex_out, none = call(backend="flex")
            assert none is None
            torch.testing.assert_close(flex_out, call()[0], rtol=1e-5, atol=1e-5, msg=name)
    with pytest.raises(ValueError, match="no backward on CPU"):
        fused.alibi_attention(q.requires_grad_(), k, v, backend="flex")
    with pytest.raises(ValueError, match="rel_v"):
        fused.shaw_attention(q, k, v, rel, rel, clip=4, backend="flex")
