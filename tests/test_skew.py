"""Tests for relviz.skew: the skew against plain loops and against the naive gather."""
from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.skew import (
    SkewSteps,
    gather_relative,
    skew,
    skew_bidirectional,
    skew_source_index,
    skew_steps,
)

BATCHES = [(), (3,), (2, 3)]
LENGTHS = list(range(1, 18))


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype)


# ---- naive references, written as loops straight from the definitions ----------------

def naive_skew(qer: torch.Tensor) -> torch.Tensor:
    """Per-cell loop of the documented result, including the upper-triangle garbage."""
    length = qer.shape[-1]
    out = torch.empty_like(qer)
    for i in range(length):
        for j in range(length):
            if j <= i:
                out[..., i, j] = qer[..., i, j - i + length - 1]
            elif j == i + 1:
                out[..., i, j] = 0.0
            else:
                out[..., i, j] = qer[..., i + 1, j - i - 2]
    return out


def naive_bidirectional(qer: torch.Tensor) -> torch.Tensor:
    length = qer.shape[-2]
    out = torch.empty(qer.shape[:-1] + (length,), dtype=qer.dtype)
    for i in range(length):
        for j in range(length):
            out[..., i, j] = qer[..., i, j - i + length - 1]
    return out


def causal_index(length: int) -> torch.Tensor:
    """index[i, j] = j − i + L − 1, clamped to L − 1 above the diagonal (table of L rows)."""
    i = torch.arange(length).unsqueeze(1)
    j = torch.arange(length).unsqueeze(0)
    return (j - i + length - 1).clamp(max=length - 1)


def bidirectional_index(length: int) -> torch.Tensor:
    i = torch.arange(length).unsqueeze(1)
    j = torch.arange(length).unsqueeze(0)
    return j - i + length - 1


def lower(length: int) -> torch.Tensor:
    return torch.ones(length, length, dtype=torch.bool).tril()


# ---- skew -------------------------------------------------------------------------------

@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("length", LENGTHS)
def test_skew_exact_on_lower_triangle(length: int, batch: tuple[int, ...]) -> None:
    qer = _randn(*batch, length, length, seed=length)
    out = skew(qer)
    assert out.shape == qer.shape
    expected = naive_skew(qer)
    mask = lower(length)
    assert torch.equal(out[..., mask], expected[..., mask])
    # spot-check the formula independently of naive_skew: the diagonal is distance 0
    idx = torch.arange(length)
    assert torch.equal(out[..., idx, idx], qer[..., idx, length - 1])


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("length", LENGTHS)
def test_skew_upper_triangle_is_documented_garbage(length: int, batch: tuple[int, ...]) -> None:
    qer = _randn(*batch, length, length, seed=100 + length)
    out = skew(qer)
    assert torch.equal(out, naive_skew(qer))
    if length >= 2:
        idx = torch.arange(length - 1)
        assert torch.all(out[..., idx, idx + 1] == 0)  # the pad sits just above the diagonal


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 24),
       batch=st.lists(st.integers(1, 3), max_size=3).map(tuple),
       seed=st.integers(0, 2**31 - 1))
def test_skew_property(length: int, batch: tuple[int, ...], seed: int) -> None:
    qer = _randn(*batch, length, length, seed=seed, dtype=torch.float32)
    out = skew(qer)
    assert out.shape == qer.shape and out.dtype == qer.dtype
    assert torch.equal(out, naive_skew(qer))


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
@pytest.mark.parametrize("length", [1, 2, 3, 7, 16])
def test_skew_equals_naive_gather_on_lower_triangle(length: int, batch: tuple[int, ...]) -> None:
    dim = 5
    q = _randn(*batch, length, dim, seed=1)
    e_r = _randn(length, dim, seed=2)            # row m: distance m − (L − 1), i.e. −(L−1)..0
    via_skew = skew(q @ e_r.T)
    via_gather = gather_relative(q, e_r, causal_index(length))
    mask = lower(length)
    torch.testing.assert_close(via_skew[..., mask], via_gather[..., mask], rtol=1e-12, atol=1e-12)
    if length >= 2:  # and the upper triangle really is different: the mask is needed
        assert not torch.allclose(via_skew[..., ~mask], via_gather[..., ~mask])


def test_skew_keeps_dtype_and_accepts_non_contiguous_input() -> None:
    base = _randn(2, 6, 6, seed=3)
    qer_t = base.transpose(-1, -2)               # non-contiguous view
    assert not qer_t.is_contiguous()
    assert torch.equal(skew(qer_t), naive_skew(qer_t.contiguous()))
    before = base.clone()
    skew(base)
    assert torch.equal(base, before)             # input left untouched
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        half = base.to(dtype)
        assert skew(half).dtype == dtype
        assert torch.equal(skew(half), naive_skew(half))


def test_skew_output_is_only_the_padded_matrix() -> None:
    """O(L²): the result lives in the single L × (L+1) padded buffer, nothing larger."""
    length = 64
    qer = _randn(3, length, length, seed=4, dtype=torch.float32)
    out = skew(qer)
    per_matrix = length * (length + 1) * qer.element_size()
    assert out.untyped_storage().nbytes() == 3 * per_matrix


def test_skew_gradcheck() -> None:
    qer = _randn(2, 4, 4, seed=5).requires_grad_()
    assert torch.autograd.gradcheck(skew, (qer,))
    # the gradient reaches exactly the cells the lower triangle reads (plus garbage reads)
    length = 5
    qer = _randn(length, length, seed=6).requires_grad_()
    skew(qer)[lower(length)].sum().backward()
    expected = torch.zeros(length, length)
    for i in range(length):
        for j in range(i + 1):
            expected[i, j - i + length - 1] += 1
    assert torch.equal(qer.grad, expected.double())


# ---- skew_steps and skew_source_index ---------------------------------------------------

@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("length", [1, 2, 5, 9])
def test_skew_steps_shapes_and_composition(length: int, batch: tuple[int, ...]) -> None:
    qer = _randn(*batch, length, length, seed=7)
    steps = skew_steps(qer)
    assert isinstance(steps, SkewSteps)
    assert steps.padded.shape == batch + (length, length + 1)
    assert steps.reshaped.shape == batch + (length + 1, length)
    assert steps.skewed.shape == batch + (length, length)
    assert torch.all(steps.padded[..., 0] == 0)
    assert torch.equal(steps.padded[..., 1:], qer)
    assert torch.equal(steps.reshaped, steps.padded.reshape(batch + (length + 1, length)))
    assert torch.equal(steps.skewed, steps.reshaped[..., 1:, :])
    assert torch.equal(steps.skewed, skew(qer))
    assert steps.valid.dtype == torch.bool
    i = torch.arange(length).unsqueeze(1)
    j = torch.arange(length).unsqueeze(0)
    assert torch.equal(steps.valid.expand_as(steps.skewed), (j <= i).expand_as(steps.skewed))
    with pytest.raises(Exception):               # frozen
        steps.padded = qer  # type: ignore[misc]


@pytest.mark.parametrize("length", [1, 2, 3, 6, 11])
def test_skew_source_index_reproduces_every_step(length: int) -> None:
    qer = _randn(length, length, seed=8)
    steps = skew_steps(qer)
    source = skew_source_index(length, device="cpu")
    for name in ("padded", "reshaped", "skewed"):
        rows, cols = getattr(source.row, name), getattr(source.col, name)
        assert rows.dtype == torch.long and cols.dtype == torch.long
        assert rows.shape == cols.shape == getattr(steps, name).shape
        assert torch.equal(rows == -1, cols == -1)   # pad in both or in neither
        is_pad = rows == -1
        looked_up = torch.where(is_pad, torch.zeros((), dtype=qer.dtype),
                                qer[rows.clamp(min=0), cols.clamp(min=0)])
        assert torch.equal(looked_up, getattr(steps, name))
    # the padded step holds exactly L pads, all in column 0
    assert int((source.row.padded == -1).sum()) == length
    assert torch.all(source.row.padded[:, 0] == -1)
    # on the lower triangle, cell (i, j) of the result comes from qer[i, j − i + L − 1]
    i = torch.arange(length).unsqueeze(1).expand(length, length)
    j = torch.arange(length).unsqueeze(0).expand(length, length)
    mask = lower(length)
    assert torch.equal(source.row.skewed[mask], i[mask])
    assert torch.equal(source.col.skewed[mask], (j - i + length - 1)[mask])
    # and the only pad in the result sits at j = i + 1
    assert torch.equal(source.row.skewed == -1, j == i + 1)
    assert torch.equal(source.row.valid, mask)


# ---- skew_bidirectional -----------------------------------------------------------------

@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("length", LENGTHS)
def test_skew_bidirectional_matches_naive_loop(length: int, batch: tuple[int, ...]) -> None:
    qer = _randn(*batch, length, 2 * length - 1, seed=200 + length)
    out = skew_bidirectional(qer)
    assert out.shape == batch + (length, length)
    assert torch.equal(out, naive_bidirectional(qer))


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 24),
       batch=st.lists(st.integers(1, 3), max_size=3).map(tuple),
       seed=st.integers(0, 2**31 - 1),
       transpose=st.booleans())
def test_skew_bidirectional_property(length: int, batch: tuple[int, ...], seed: int,
                                     transpose: bool) -> None:
    width = 2 * length - 1
    if transpose:   # same values, non-contiguous layout
        qer = _randn(*batch, width, length, seed=seed, dtype=torch.float32).transpose(-1, -2)
    else:
        qer = _randn(*batch, length, width, seed=seed, dtype=torch.float32)
    assert torch.equal(skew_bidirectional(qer), naive_bidirectional(qer))


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
@pytest.mark.parametrize("length", [1, 2, 3, 8, 13])
def test_skew_bidirectional_equals_naive_gather(length: int, batch: tuple[int, ...]) -> None:
    dim = 6
    q = _randn(*batch, length, dim, seed=9)
    e_r = _randn(2 * length - 1, dim, seed=10)    # distances −(L−1)..+(L−1)
    via_skew = skew_bidirectional(q @ e_r.T)
    via_gather = gather_relative(q, e_r, bidirectional_index(length))
    torch.testing.assert_close(via_skew, via_gather, rtol=1e-12, atol=1e-12)


def test_skew_bidirectional_needs_no_bigger_buffer_than_qer() -> None:
    length = 64
    qer = _randn(2, length, 2 * length - 1, seed=11, dtype=torch.float32)
    out = skew_bidirectional(qer)
    assert out.untyped_storage().nbytes() <= qer.untyped_storage().nbytes()


def test_skew_bidirectional_gradcheck() -> None:
    for length in (1, 2, 4):
        qer = _randn(2, length, 2 * length - 1, seed=12).requires_grad_()
        assert torch.autograd.gradcheck(skew_bidirectional, (qer,))


# ---- gather_relative --------------------------------------------------------------------

def test_gather_relative_matches_loop_with_arbitrary_index() -> None:
    q = _randn(2, 4, 3, seed=13)
    table = _randn(7, 3, seed=14)
    index = torch.randint(0, 7, (4, 5), generator=torch.Generator().manual_seed(15))
    out = gather_relative(q, table, index)
    assert out.shape == (2, 4, 5)
    for b in range(2):
        for i in range(4):
            for j in range(5):
                expected = torch.dot(q[b, i], table[index[i, j]])
                torch.testing.assert_close(out[b, i, j], expected)
    # int32 indices are accepted too
    torch.testing.assert_close(gather_relative(q, table, index.int()), out)


def test_gather_relative_gradcheck() -> None:
    q = _randn(3, 2, seed=16).requires_grad_()
    table = _randn(5, 2, seed=17).requires_grad_()
    index = torch.tensor([[0, 4, 2], [1, 1, 3], [4, 0, 0]])
    assert torch.autograd.gradcheck(lambda a, b: gather_relative(a, b, index), (q, table))


# ---- validation -------------------------------------------------------------------------

_F = torch.zeros
_ERROR_CASES = [
    # (function, args, parameter the message must start with, a phrase it must contain)
    (skew, ([[1.0]],), "qer", "torch.Tensor"),
    (skew, (_F(3),), "qer", "at least 2"),
    (skew, (_F(3, 4),), "qer", r"\[\.\.\., L, L\]"),
    (skew, (_F(2, 0, 0),), "qer", "L >= 1"),
    (skew, (torch.zeros(3, 3, dtype=torch.long),), "qer", "floating"),
    (skew_steps, ("x",), "qer", "torch.Tensor"),
    (skew_steps, (_F(2, 3),), "qer", r"\[\.\.\., L, L\]"),
    (skew_steps, (torch.zeros(2, 2, dtype=torch.int32),), "qer", "floating"),
    (skew_source_index, (0,), "length", "from 1 to 4096"),
    (skew_source_index, (4097,), "length", "from 1 to 4096"),
    (skew_source_index, (2.5,), "length", "integer"),
    (skew_source_index, (True,), "length", "integer"),
    (skew_bidirectional, (None,), "qer", "torch.Tensor"),
    (skew_bidirectional, (_F(5),), "qer", "at least 2"),
    (skew_bidirectional, (_F(3, 3),), "qer", r"2L-1"),
    (skew_bidirectional, (_F(3, 6),), "qer", r"2L-1"),
    (skew_bidirectional, (_F(0, 0),), "qer", "L >= 1"),
    (skew_bidirectional, (torch.zeros(2, 3, dtype=torch.long),), "qer", "floating"),
    (gather_relative, ([1.0], _F(3, 2), torch.zeros(2, 2, dtype=torch.long)), "q", "torch.Tensor"),
    (gather_relative, (_F(2), _F(3, 2), torch.zeros(2, 2, dtype=torch.long)), "q", "at least 2"),
    (gather_relative, (torch.zeros(2, 2, dtype=torch.long), _F(3, 2),
                       torch.zeros(2, 2, dtype=torch.long)), "q", "floating"),
    (gather_relative, (_F(2, 2), _F(3, 2, 1), torch.zeros(2, 2, dtype=torch.long)), "table",
     "2 dimensions"),
    (gather_relative, (_F(2, 2), _F(3, 5), torch.zeros(2, 2, dtype=torch.long)), "table",
     "D equal"),
    (gather_relative, (_F(2, 2), _F(0, 2), torch.zeros(2, 2, dtype=torch.long)), "table",
     "at least one row"),
    (gather_relative, (_F(2, 2, dtype=torch.float64), _F(3, 2), torch.zeros(2, 2, dtype=torch.long)),
     "table", "same dtype"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.zeros(2, dtype=torch.long)), "index",
     "2 dimensions"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.zeros(3, 2, dtype=torch.long)), "index",
     "Lq equal"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.zeros(2, 2)), "index", "integer"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.zeros(2, 2, dtype=torch.bool)), "index",
     "integer"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.tensor([[0, 3], [1, 2]])), "index",
     "from 0 to 2"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.tensor([[0, -1], [1, 2]])), "index",
     "from 0 to 2"),
    (gather_relative, (_F(2, 2), _F(3, 2, device="meta"), torch.zeros(2, 2, dtype=torch.long)),
     "table", "device"),
    (gather_relative, (_F(2, 2), _F(3, 2), torch.zeros(2, 2, dtype=torch.long, device="meta")),
     "index", "device"),
]


@pytest.mark.parametrize("func, args, param, phrase", _ERROR_CASES,
                         ids=[f"{c[0].__name__}-{c[2]}-{n}" for n, c in enumerate(_ERROR_CASES)])
def test_invalid_arguments_raise_value_error_naming_the_parameter(func, args, param: str,
                                                                  phrase: str) -> None:
    with pytest.raises(ValueError, match=rf"^{param} ") as info:
        func(*args)
    assert re.search(phrase, str(info.value)), str(info.value)


# ---- device -----------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available on this machine")
def test_skew_on_cuda_matches_cpu() -> None:
    length = 33
    qer = _randn(2, 3, length, length, seed=18, dtype=torch.float32)
    bi = _randn(2, length, 2 * length - 1, seed=19, dtype=torch.float32)
    out = skew(qer.cuda())
    assert out.device.type == "cuda"
    assert torch.equal(out.cpu(), skew(qer))
    assert torch.equal(skew_bidirectional(bi.cuda()).cpu(), skew_bidirectional(bi))
    steps = skew_steps(qer.cuda())
    assert steps.valid.device.type == "cuda"
    source = skew_source_index(length, device="cuda")
    assert source.row.skewed.device.type == "cuda"
    assert torch.equal(source.col.skewed.cpu(), skew_source_index(length, device="cpu").col.skewed)


def test_the_step_words_name_every_step_the_page_draws_and_its_distances() -> None:
    """Each step's words are keyed like its cells, so a step without words (or words without a step) fails
    here; the captions carry the length's own distances."""
    from relviz.figures.skew import bidirectional_steps, causal_steps, demo_inputs
    from relviz.skew import bidirectional_step_words, causal_step_words

    demo = demo_inputs(7, 0)
    assert list(causal_step_words(7)) == list(causal_steps(demo))
    assert list(bidirectional_step_words(7)) == list(bidirectional_steps(demo))
    assert "the first is −6" in causal_step_words(7)["qer"].caption
    assert "−6 … +6" in bidirectional_step_words(7)["qer"].caption
    assert "2L − 2 = 12" in bidirectional_step_words(7)["window"].caption
    with pytest.raises(ValueError, match="length"):
        causal_step_words(0)
