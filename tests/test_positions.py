"""relviz.positions against plain transcriptions of the reference formulas."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.positions import (
    alibi_bias,
    alibi_bias_offsets,
    alibi_slopes,
    offset_range,
    relative_positions,
    shaw_clip_index,
    t5_bias,
    t5_bias_offsets,
    t5_bucket,
    t5_bucket_map,
    t5_bucket_ranges,
    t5_config,
    t5_nearest_valid,
)

CPU = torch.device("cpu")


def reference_t5_bucket(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int,
                        max_distance: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Hugging Face's T5Attention._relative_position_bucket, transcribed line by line
    (``.float()`` generalised to ``.to(dtype)`` to evaluate it in low precision)."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.to(dtype) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def naive_relative(q_len: int, k_len: int, q_offset: int) -> torch.Tensor:
    return torch.tensor([[j - (q_offset + i) for j in range(k_len)] for i in range(q_len)])


def valid_t5(num_buckets: int, max_distance: int, bidirectional: bool) -> bool:
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    return per_direction // 2 >= 1 and max_distance > per_direction // 2


# --------------------------------------------------------------------------- relative / Shaw

@given(q_len=st.integers(1, 24), k_len=st.integers(1, 24), q_offset=st.integers(-30, 30))
def test_relative_positions_is_key_minus_query(q_len, k_len, q_offset):
    got = relative_positions(q_len, k_len, q_offset=q_offset, device=CPU)
    assert got.dtype == torch.long
    assert torch.equal(got, naive_relative(q_len, k_len, q_offset))


def test_relative_positions_k_len_defaults_to_q_len():
    assert relative_positions(5, device=CPU).shape == (5, 5)


@given(q_len=st.integers(1, 20), k_len=st.integers(1, 20), q_offset=st.integers(-25, 25),
       k=st.integers(0, 25))
def test_shaw_clip_index_matches_definition(q_len, k_len, q_offset, k):
    got = shaw_clip_index(q_len, k_len, k=k, q_offset=q_offset, device=CPU)
    rel = naive_relative(q_len, k_len, q_offset)
    expected = torch.tensor([[max(-k, min(k, int(r))) + k for r in row] for row in rel])
    assert torch.equal(got, expected)
    assert int(got.min()) >= 0 and int(got.max()) <= 2 * k


def test_shaw_paper_example_row():
    # FACTS.md: 10 tokens, k = 3, row 0.
    assert shaw_clip_index(10, k=3, device=CPU)[0].tolist() == [3, 4, 5, 6, 6, 6, 6, 6, 6, 6]


def test_tensor2tensor_alignment_uses_last_keys():
    # q_len < k_len aligned to the last keys: the last query sits at the last key (offset 0 on the diagonal end).
    rel = relative_positions(3, 7, q_offset=4, device=CPU)
    assert rel[-1, -1] == 0 and rel[0, 4] == 0


# --------------------------------------------------------------------------- T5

T5_TABLE_32_128 = [  # FACTS.md: (first, last, bucket), key − query
    (0, 0, 0), (-7, -1, None), (-11, -8, 8), (-15, -12, 9), (-22, -16, 10), (-31, -23, 11),
    (-45, -32, 12), (-63, -46, 13), (-90, -64, 14), (-2000, -91, 15), (1, 7, None), (8, 11, 24),
    (12, 15, 25), (16, 22, 26), (23, 31, 27), (32, 45, 28), (46, 63, 29), (64, 90, 30), (91, 2000, 31),
]


def test_t5_default_matches_facts_table():
    for first, last, bucket in T5_TABLE_32_128:
        offsets = torch.arange(first, last + 1)
        got = t5_bucket(offsets)
        if bucket is None:  # the exact region: -n -> n, +n -> 16 + n
            expected = torch.where(offsets < 0, -offsets, 16 + offsets)
            assert torch.equal(got, expected)
        else:
            assert (got == bucket).all(), (first, last, bucket, got.unique())


def test_t5_unidirectional_future_in_bucket_zero_and_saturation_at_113():
    future = torch.arange(0, 500)
    assert (t5_bucket(future, bidirectional=False) == 0).all()
    assert t5_bucket(torch.tensor([-112, -113]), bidirectional=False).tolist() == [30, 31]


@settings(max_examples=300, deadline=None)
@given(num_buckets=st.integers(2, 160), max_distance=st.integers(1, 1500), bidirectional=st.booleans())
def test_t5_bucket_matches_reference_for_every_valid_config(num_buckets, max_distance, bidirectional):
    offsets = torch.arange(-3 * max_distance - 5, 3 * max_distance + 6)
    if not valid_t5(num_buckets, max_distance, bidirectional):
        with pytest.raises(ValueError, match="num_buckets|max_distance"):
            t5_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
        return
    got = t5_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    expected = reference_t5_bucket(offsets, bidirectional, num_buckets, max_distance)
    assert torch.equal(got, expected)
    assert int(got.min()) >= 0 and int(got.max()) < num_buckets


@settings(max_examples=150, deadline=None)
@given(q_len=st.integers(1, 40), k_len=st.integers(1, 40), q_offset=st.integers(-50, 50),
       num_buckets=st.sampled_from([4, 5, 8, 16, 32, 33, 64, 128]),
       max_distance=st.sampled_from([5, 20, 64, 128, 1000]), bidirectional=st.booleans())
def test_t5_bucket_map_matches_reference_per_cell(q_len, k_len, q_offset, num_buckets, max_distance,
                                                  bidirectional):
    if not valid_t5(num_buckets, max_distance, bidirectional):
        return
    got = t5_bucket_map(q_len, k_len, num_buckets=num_buckets, max_distance=max_distance,
                        bidirectional=bidirectional, q_offset=q_offset, device=CPU)
    expected = reference_t5_bucket(naive_relative(q_len, k_len, q_offset), bidirectional, num_buckets,
                                   max_distance)
    assert torch.equal(got, expected)


def test_t5_bucket_accepts_python_int_and_any_integer_dtype():
    assert int(t5_bucket(-100)) == 15
    assert torch.equal(t5_bucket(torch.tensor([-9, 9], dtype=torch.int32)), torch.tensor([8, 24]))


@pytest.mark.parametrize("num_buckets,max_distance,bidirectional,parameter", [
    (2, 128, True, "num_buckets"), (3, 128, True, "num_buckets"), (1, 128, False, "num_buckets"),
    (32, 8, True, "max_distance"), (32, 5, True, "max_distance"), (32, 16, False, "max_distance"),
    (0, 128, True, "num_buckets"), (32, 0, True, "max_distance"),
])
def test_t5_invalid_configs_name_the_parameter(num_buckets, max_distance, bidirectional, parameter):
    with pytest.raises(ValueError, match=parameter):
        t5_config(num_buckets, max_distance, bidirectional)
    with pytest.raises(ValueError, match=parameter):
        t5_bucket_map(4, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)


@given(num_buckets=st.integers(0, 200), max_distance=st.integers(0, 300), bidirectional=st.booleans())
def test_nearest_valid_is_valid_and_unchanged_when_already_valid(num_buckets, max_distance, bidirectional):
    nb, md = t5_nearest_valid(num_buckets, max_distance, bidirectional)
    t5_config(nb, md, bidirectional)  # does not raise
    if valid_t5(num_buckets, max_distance, bidirectional):
        assert (nb, md) == (num_buckets, max_distance)


@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_t5_refuses_non_integer_parameters(bad):
    with pytest.raises(ValueError, match="num_buckets"):
        t5_bucket(torch.tensor([1]), num_buckets=bad)


def test_t5_refuses_float_relative_positions():
    with pytest.raises(ValueError, match="relative_position"):
        t5_bucket(torch.tensor([1.0, 2.0]))


def test_t5_bucket_ranges_default_table():
    ranges = t5_bucket_ranges()
    assert len(ranges) == 32
    by_bucket = {r.bucket: r for r in ranges}
    assert (by_bucket[15].first, by_bucket[15].last, by_bucket[15].open_low) == (-128, -91, True)
    assert (by_bucket[31].first, by_bucket[31].last, by_bucket[31].open_high) == (91, 128, True)
    assert not by_bucket[16].used and by_bucket[16].first is None
    assert (by_bucket[8].first, by_bucket[8].last, by_bucket[8].count) == (-11, -8, 4)
    assert sum(r.count for r in ranges) == 2 * 128 + 1


@settings(max_examples=60, deadline=None)
@given(num_buckets=st.integers(4, 70), max_distance=st.integers(3, 300), bidirectional=st.booleans())
def test_t5_bucket_ranges_agree_with_buckets(num_buckets, max_distance, bidirectional):
    if not valid_t5(num_buckets, max_distance, bidirectional):
        return
    ranges = t5_bucket_ranges(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    offsets = torch.arange(-max_distance, max_distance + 1)
    buckets = reference_t5_bucket(offsets, bidirectional, num_buckets, max_distance)
    for r in ranges:
        members = offsets[buckets == r.bucket]
        assert r.count == members.numel()
        if r.used:  # contiguous and exactly [first, last]
            assert (r.first, r.last) == (int(members.min()), int(members.max()))
            assert r.count == r.last - r.first + 1


def test_odd_bucket_count_leaves_more_buckets_unused():
    unused_even = [r.bucket for r in t5_bucket_ranges(num_buckets=32) if not r.used]
    unused_odd = [r.bucket for r in t5_bucket_ranges(num_buckets=33) if not r.used]
    assert unused_even == [16]
    assert len(unused_odd) > len(unused_even)


# --------------------------------------------------------------------------- ALiBi

def reference_alibi_slopes(n: int) -> list[float]:
    """The ALiBi repository's get_slopes, transcribed."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + reference_alibi_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("num_heads", list(range(1, 33)) + [48, 100])
def test_alibi_slopes_match_reference(num_heads):
    expected = torch.tensor(reference_alibi_slopes(num_heads), dtype=torch.float32)
    assert torch.equal(alibi_slopes(num_heads, device=CPU), expected)


def test_alibi_slopes_eight_heads_are_halvings():
    assert alibi_slopes(8, device=CPU).tolist() == [2.0 ** -h for h in range(1, 9)]


@given(q_len=st.integers(1, 12), k_len=st.integers(1, 12), q_offset=st.integers(-10, 10),
       num_heads=st.integers(1, 12))
def test_alibi_bias_matches_definition(q_len, k_len, q_offset, num_heads):
    got = alibi_bias(q_len, k_len, num_heads=num_heads, q_offset=q_offset, device=CPU)
    slopes = alibi_slopes(num_heads, device=CPU)
    rel = naive_relative(q_len, k_len, q_offset).abs().float()
    assert got.shape == (num_heads, q_len, k_len)
    assert torch.equal(got, -slopes[:, None, None] * rel[None])


# --------------------------------------------------------------------------- validation

@pytest.mark.parametrize("call,parameter", [
    (lambda: relative_positions(0), "q_len"),
    (lambda: relative_positions(3, 0), "k_len"),
    (lambda: relative_positions(3, q_offset=1.5), "q_offset"),
    (lambda: relative_positions(2.0), "q_len"),
    (lambda: shaw_clip_index(3, k=-1), "k"),
    (lambda: shaw_clip_index(3, k=None), "k"),
    (lambda: relative_positions(2**16, 2**16), "q_len \\* k_len"),
    (lambda: alibi_slopes(0), "num_heads"),
    (lambda: alibi_bias(3, num_heads=0), "num_heads"),
    (lambda: relative_positions(3, device="no-such-device"), "device"),
    (lambda: t5_bucket_ranges(max_offset=0), "max_offset"),
    (lambda: t5_bucket(torch.tensor([2**30])), "relative_position"),
])
def test_invalid_arguments_raise_value_error_naming_the_parameter(call, parameter):
    with pytest.raises(ValueError, match=parameter):
        call()


def test_offset_range_covers_every_offset_once():
    offsets = offset_range(3, 5, q_offset=2, device=CPU)
    assert offsets.tolist() == sorted(set(naive_relative(3, 5, 2).flatten().tolist()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available on this machine")
def test_cuda_matches_cpu():
    cuda = torch.device("cuda")
    for fn in (lambda d: t5_bucket_map(300, 200, q_offset=7, device=d),
               lambda d: shaw_clip_index(50, 70, k=5, device=d),
               lambda d: relative_positions(20, 30, device=d),
               lambda d: alibi_bias(10, 12, num_heads=6, device=d)):
        got = fn(cuda)
        assert got.device.type == "cuda"
        assert torch.equal(got.cpu(), fn(CPU))


# ---- T5 and ALiBi biases built per offset -----------------------------------------------

@settings(max_examples=40, deadline=None)
@given(q_len=st.integers(1, 20), k_len=st.integers(1, 20), q_offset=st.integers(-25, 25),
       config=st.sampled_from([(32, 128, True), (32, 128, False), (8, 16, True), (5, 7, False), (6, 5, True)]),
       heads=st.integers(1, 4), seed=st.integers(0, 1000))
def test_t5_bias_is_the_table_looked_up_at_every_cells_bucket(q_len, k_len, q_offset, config, heads, seed):
    from relviz.positions import t5_bias, t5_bias_offsets
    num_buckets, max_distance, bidirectional = config
    table = torch.randn(num_buckets, heads, generator=torch.Generator().manual_seed(seed))
    kwargs = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional, q_offset=q_offset)
    buckets = t5_bucket_map(q_len, k_len, device="cpu", **kwargs)
    expected = table.transpose(0, 1)[:, buckets]                      # the cell-by-cell way
    bias = t5_bias(table, q_len, k_len, **kwargs)
    assert bias.shape == (heads, q_len, k_len) and bias.dtype == table.dtype
    assert torch.equal(bias, expected)
    assert t5_bias_offsets(table, q_len, k_len, **kwargs).shape == (heads, q_len + k_len - 1)


def test_t5_bias_refuses_a_table_of_the_wrong_shape():
    from relviz.positions import t5_bias
    with pytest.raises(ValueError, match="bias_table must have shape"):
        t5_bias(torch.zeros(31, 2), 4)
    with pytest.raises(ValueError, match="bias_table must be a floating"):
        t5_bias(torch.zeros(32, 2, dtype=torch.long), 4)


def test_alibi_bias_offsets_expand_to_alibi_bias():
    from relviz.positions import alibi_bias_offsets, expand_toeplitz
    per_offset = alibi_bias_offsets(5, 7, num_heads=6, q_offset=2, device="cpu")
    assert torch.equal(expand_toeplitz(per_offset, 5, 7), alibi_bias(5, 7, num_heads=6, q_offset=2, device="cpu"))


def test_per_offset_functions_take_lengths_whose_matrix_would_be_refused() -> None:
    """2^20 positions: the per-offset vectors (2^21 − 1 values) are built; the L × L matrix is refused."""
    length = 2**20
    offsets = offset_range(length, device="cpu")
    assert offsets.shape == (2 * length - 1,) and int(offsets[0]) == -(length - 1) and int(offsets[-1]) == length - 1
    table = torch.arange(32 * 2, dtype=torch.float32).reshape(32, 2)
    per_offset = t5_bias_offsets(table, length)
    assert per_offset.shape == (2, 2 * length - 1)
    assert torch.equal(per_offset[:, length - 1], table[0]) and torch.equal(per_offset[:, -1], table[31])
    assert alibi_bias_offsets(length, num_heads=4, device="cpu").shape == (4, 2 * length - 1)
    for build in (lambda: t5_bucket_map(length, device="cpu"), lambda: t5_bias(table, length),
                  lambda: shaw_clip_index(length, k=4, device="cpu"), lambda: relative_positions(length, device="cpu")):
        with pytest.raises(ValueError, match=r"q_len \* k_len"):
            build()


def test_press_slope_rule_in_both_arithmetics_agrees_within_a_few_float32_ulps():
    """One rule (press_slope_powers), two arithmetics: the reference code's Python floats (the toy model's)
    and transformers' BLOOM/Falcon float32 torch.pow (relviz.mechanisms.alibi): equal up to 10 heads, at most
    32 float32 ulps apart up to 256 (float32 rounds the base, and the power multiplies its error)."""
    from relviz.positions import alibi_slopes, press_slope_powers

    for heads in range(1, 257):
        bases, exponents = press_slope_powers(heads)
        reference = alibi_slopes(heads, device="cpu")
        bloom = alibi_slopes(heads, float32_powers=True, device="cpu")
        assert torch.equal(reference, torch.tensor([b ** e for b, e in zip(bases, exponents)], dtype=torch.float32))
        gap = (reference.view(torch.int32) - bloom.view(torch.int32)).abs().max().item()
        assert gap <= (0 if heads <= 10 else 32), (heads, gap)
    assert not torch.equal(alibi_slopes(11, device="cpu"), alibi_slopes(11, float32_powers=True, device="cpu"))


def test_t5_limits_come_from_one_table():
    """The bucket formula, a real model's config (relviz.model_plan) and the toy model (ModelConfig) all refuse one
    bucket past T5_LIMITS, naming the field they read."""
    from relviz.model import ModelConfig
    from relviz.model_plan import read_plan
    from relviz.positions import T5_LIMITS, t5_config

    far = 1 << 20                                       # past max_exact at any bucket count
    t5_config(T5_LIMITS.num_buckets, far, True)
    with pytest.raises(ValueError, match=f"num_buckets must be an integer from 1 to {T5_LIMITS.num_buckets}"):
        t5_config(T5_LIMITS.num_buckets + 1, far, True)
    config = {"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_heads": 4, "num_layers": 1,
              "num_decoder_layers": 1, "relative_attention_max_distance": far, "vocab_size": 10}
    read_plan({**config, "relative_attention_num_buckets": T5_LIMITS.num_buckets})
    with pytest.raises(ValueError, match="relative_attention_num_buckets"):
        read_plan({**config, "relative_attention_num_buckets": T5_LIMITS.num_buckets + 1})
    ModelConfig(scheme="t5", num_buckets=T5_LIMITS.trained_num_buckets, max_distance=far)
    with pytest.raises(ValueError, match="num_buckets"):
        ModelConfig(scheme="t5", num_buckets=T5_LIMITS.trained_num_buckets + 1, max_distance=far)


@settings(max_examples=40)
@given(lead=st.lists(st.integers(1, 3), max_size=2), q_len=st.integers(1, 12), k_len=st.integers(1, 12),
       block_bytes=st.integers(1, 200))
def test_a_large_expansion_built_in_blocks_of_rows_equals_one_flip(lead, q_len, k_len, block_bytes) -> None:
    """Past EXPAND_BLOCK_BYTES the Toeplitz matrix is written in blocks of rows (one flip of a 34 GB
    unfold view crashed CUDA on an H100): every block size gives the same matrix, out[i, j] =
    per_offset[j − i + q_len − 1]."""
    from unittest import mock

    import relviz.positions as positions
    per_offset = torch.arange(math.prod(lead) * (q_len + k_len - 1)).reshape(*lead, q_len + k_len - 1)
    whole = positions.expand_toeplitz(per_offset, q_len, k_len)
    with mock.patch.object(positions, "EXPAND_BLOCK_BYTES", block_bytes):
        blocks = positions.expand_toeplitz(per_offset, q_len, k_len)
    i, j = torch.meshgrid(torch.arange(q_len), torch.arange(k_len), indexing="ij")
    assert torch.equal(blocks, whole)
    assert torch.equal(blocks, per_offset[..., j - i + q_len - 1])
