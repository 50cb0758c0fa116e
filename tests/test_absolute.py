"""Tests for relviz.absolute: the sinusoidal encoding against the paper's formula, and what is
(and is not) true of its position similarity."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.absolute import (
    projected_similarity,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_similarity,
    sinusoidal_similarity_per_offset,
    toeplitz_deviation,
)
from relviz.positions import expand_toeplitz


def naive_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The paper's formula, one cell at a time, in float64."""
    out = torch.empty(num_positions, d_model, dtype=torch.float64)
    for p in range(num_positions):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            out[p, 2 * i] = math.sin(angle)
            out[p, 2 * i + 1] = math.cos(angle)
    return out


@pytest.mark.parametrize("num_positions,d_model", [(1, 2), (7, 4), (50, 16), (33, 64)])
def test_encoding_matches_the_paper_formula(num_positions, d_model):
    pe = sinusoidal_encoding(num_positions, d_model, dtype=torch.float64, device="cpu")
    assert pe.shape == (num_positions, d_model)
    torch.testing.assert_close(pe, naive_encoding(num_positions, d_model), rtol=0, atol=1e-12)
    pe32 = sinusoidal_encoding(num_positions, d_model, device="cpu")
    assert pe32.dtype == torch.float32
    torch.testing.assert_close(pe32.double(), naive_encoding(num_positions, d_model), rtol=0, atol=1e-7)


def test_concatenated_layout_is_a_permutation_of_the_interleaved_one():
    interleaved = sinusoidal_encoding(20, 8, device="cpu")
    concatenated = sinusoidal_encoding(20, 8, interleaved=False, device="cpu")
    torch.testing.assert_close(concatenated, interleaved[:, [0, 2, 4, 6, 1, 3, 5, 7]])


def test_position_zero_and_the_frequencies():
    pe = sinusoidal_encoding(3, 10, device="cpu")
    assert torch.equal(pe[0, 0::2], torch.zeros(5)) and torch.equal(pe[0, 1::2], torch.ones(5))
    omega = sinusoidal_frequencies(10, device="cpu")
    assert omega[0] == 1.0
    torch.testing.assert_close(omega, torch.tensor([10000.0 ** (-2 * k / 10) for k in range(5)],
                                                   dtype=torch.float64))


def test_long_positions_stay_accurate():
    """Angles are computed in float64: position 100 000 is still right to float32 precision."""
    pe = sinusoidal_encoding(100_001, 4, device="cpu")[-1].double()
    expected = torch.tensor([math.sin(100_000), math.cos(100_000), math.sin(1000.0), math.cos(1000.0)],
                            dtype=torch.float64)
    torch.testing.assert_close(pe, expected, rtol=0, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(num_positions=st.integers(1, 80), half=st.integers(1, 64))
def test_similarity_depends_only_on_the_offset(num_positions, half):
    """PE_i · PE_j = Σ_k cos((j − i) ω_k): exactly Toeplitz; the float32 matrix agrees to ~1e-6 · d."""
    d_model = 2 * half
    similarity = sinusoidal_similarity(num_positions, d_model, device="cpu")
    offsets = torch.arange(-(num_positions - 1), num_positions)
    closed_form = expand_toeplitz(sinusoidal_similarity_per_offset(offsets, d_model), num_positions,
                                  num_positions)
    tolerance = 2e-6 * d_model
    torch.testing.assert_close(similarity.double(), closed_form, rtol=0, atol=tolerance)
    assert toeplitz_deviation(similarity) <= 2 * tolerance
    # symmetric in j − i: +n and −n are indistinguishable
    torch.testing.assert_close(similarity, similarity.T, rtol=0, atol=tolerance)
    # the diagonal is |PE_p|² = d_model / 2 (every sin² + cos² pair is 1)
    torch.testing.assert_close(similarity.diagonal().double(), torch.full((num_positions,), d_model / 2,
                                                                          dtype=torch.float64),
                               rtol=0, atol=tolerance)


def test_similarity_in_float64_is_toeplitz_to_rounding_and_normalize_divides_by_half_d():
    similarity = sinusoidal_similarity(300, 128, dtype=torch.float64, device="cpu")
    assert toeplitz_deviation(similarity) < 1e-10
    normalised = sinusoidal_similarity(300, 128, normalize=True, dtype=torch.float64, device="cpu")
    torch.testing.assert_close(normalised, similarity / 64)
    assert torch.allclose(normalised.diagonal(), torch.ones(300, dtype=torch.float64))


def test_similarity_is_not_monotone_in_distance():
    """What the page claims: the raw similarity ripples, it is no distance measure."""
    curve = sinusoidal_similarity_per_offset(torch.arange(0, 128), 128, normalize=True)
    assert curve[0] == 1.0
    assert (curve[1:] < curve[0]).all()
    assert (curve[1:] - curve[:-1] > 0).any()  # somewhere it rises again


def test_projected_similarity_is_not_toeplitz():
    projected = projected_similarity(64, 64, seed=0, device="cpu")
    assert projected.shape == (64, 64)
    assert toeplitz_deviation(projected) > 0.5
    torch.testing.assert_close(projected, projected_similarity(64, 64, seed=0, device="cpu"))
    assert not torch.allclose(projected, projected_similarity(64, 64, seed=1, device="cpu"))


def test_toeplitz_deviation():
    assert toeplitz_deviation(torch.tensor([[1.0, 2.0], [3.0, 1.0]])) == 0.0
    assert toeplitz_deviation(torch.arange(12.0).reshape(3, 4)) == 10.0  # diagonal 0: 0, 5, 10
    assert toeplitz_deviation(torch.zeros(0, 3)) == 0.0
    with pytest.raises(ValueError, match="matrix must have 2 dimensions"):
        toeplitz_deviation(torch.zeros(3))


@pytest.mark.parametrize("call,message", [
    (lambda: sinusoidal_encoding(0, 8), "num_positions must be an integer from 1"),
    (lambda: sinusoidal_encoding(2.5, 8), "num_positions must be an integer"),
    (lambda: sinusoidal_encoding(10, 7), "d_model must be even"),
    (lambda: sinusoidal_encoding(10, 0), "d_model must be an integer from 2"),
    (lambda: sinusoidal_encoding(10, 8, base=1.0), "base must be a finite number greater than 1"),
    (lambda: sinusoidal_encoding(10, 8, base=float("nan")), "base must be"),
    (lambda: sinusoidal_encoding(10, 8, interleaved=1), "interleaved must be True or False"),
    (lambda: sinusoidal_encoding(10, 8, dtype=torch.int64), "dtype must be a floating-point"),
    (lambda: sinusoidal_encoding(10, 8, device="nonsense"), "device must be a torch device"),
    (lambda: sinusoidal_similarity(2**15, 8), "num_positions² must be at most"),
    (lambda: sinusoidal_similarity_per_offset(torch.tensor([True]), 8), "offsets must be a real tensor"),
    (lambda: projected_similarity(10, 8, d_head=0), "d_head must be an integer from 1"),
    (lambda: projected_similarity(10, 8, seed=-1), "seed must be an integer"),
])
def test_bad_arguments_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("²", "²")):
        call()


def t2t_timing_signal(length: int, channels: int, min_timescale: float = 1.0,
                      max_timescale: float = 1.0e4) -> torch.Tensor:
    """tensor2tensor's common_attention.get_timing_signal_1d, transcribed (float64, one cell at a time)."""
    num_timescales = channels // 2
    increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    out = torch.zeros(length, channels, dtype=torch.float64)
    for p in range(length):
        for k in range(num_timescales):
            angle = p * min_timescale * math.exp(-k * increment)
            out[p, k] = math.sin(angle)
            out[p, num_timescales + k] = math.cos(angle)
    return out


@pytest.mark.parametrize("length,channels", [(1, 2), (9, 4), (40, 16), (17, 7), (30, 64)])
def test_tensor2tensor_timing_signal_matches_its_formula(length, channels):
    from relviz.absolute import tensor2tensor_timing_signal
    got = tensor2tensor_timing_signal(length, channels, dtype=torch.float64, device="cpu")
    torch.testing.assert_close(got, t2t_timing_signal(length, channels), rtol=0, atol=1e-12)


def test_tensor2tensor_frequencies_differ_from_the_paper_and_the_docstring_says_so():
    from relviz.absolute import tensor2tensor_timing_signal
    t2t = tensor2tensor_timing_signal(20, 16, device="cpu")
    concat = sinusoidal_encoding(20, 16, interleaved=False, device="cpu")
    assert not torch.allclose(t2t, concat, atol=1e-3)  # same layout, other frequencies
    torch.testing.assert_close(t2t[:, :1], concat[:, :1])  # both start at frequency 1
    doc = sinusoidal_encoding.__doc__
    assert "tensor2tensor's layout)" not in doc and "tensor2tensor_timing_signal" in doc


def test_shifting_the_whole_sequence_moves_every_vector_but_not_the_scores_by_offset():
    """Issue 33: the picture of a shifted sequence (relviz.absolute.shift_sequence, show.sinusoidal_shift)."""
    from relviz.absolute import shift_sequence

    moved = shift_sequence(32, 16, 100)
    assert moved.change.shape == (32,) and bool((moved.change > 0.1).all())        # every absolute vector moves
    lo0, hi0 = moved.before
    lo1, hi1 = moved.after
    assert moved.offsets.tolist() == list(range(-31, 32))
    assert float((hi1 - lo1).max()) < 1e-12 and float((lo1 - lo0).abs().max()) < 1e-12  # the same curve by j − i
    assert moved.largest_difference < 1e-12
    still = shift_sequence(32, 16, 0)
    assert float(still.change.abs().max()) == 0.0 and still.largest_difference == 0.0
    import pytest
    with pytest.raises(ValueError, match="shift"):
        shift_sequence(32, 16, -1)


def test_a_shift_is_compared_with_the_vectors_at_both_places_computed_afresh() -> None:
    """shift_sequence keeps the unshifted side per (L, d_model) across slider moves: each shift's result is
    still PE at s…s+L−1 against PE at 0…L−1, whatever shifts were asked before."""
    from relviz.absolute import diagonal_range, shift_sequence

    for shift in (5, 0, 37, 5):
        result = shift_sequence(24, 10, shift)
        pe = sinusoidal_encoding(24 + shift, 10, dtype=torch.float64, device="cpu")
        before, after = pe[:24], pe[shift:]
        sim_before, sim_after = before @ before.T / 5, after @ after.T / 5
        assert torch.equal(result.change, (after - before).norm(dim=1))
        assert all(torch.equal(a, b) for a, b in zip(result.before, diagonal_range(sim_before)))
        assert all(torch.equal(a, b) for a, b in zip(result.after, diagonal_range(sim_after)))
        assert result.largest_difference == float((sim_after - sim_before).abs().max())


def test_diagonal_range_is_the_min_and_max_of_each_diagonals_cells() -> None:
    from relviz.absolute import diagonal_range

    gen = torch.Generator().manual_seed(3)
    for rows, cols in [(1, 1), (1, 6), (6, 1), (3, 8), (8, 3), (7, 7)]:
        matrix = torch.randn(rows, cols, generator=gen)
        lo, hi = diagonal_range(matrix)
        for t in range(rows + cols - 1):
            cells = torch.tensor([float(matrix[i, i + t - (rows - 1)]) for i in range(rows)
                                  if 0 <= i + t - (rows - 1) < cols], dtype=torch.float64)
            assert lo[t] == cells.min() and hi[t] == cells.max(), (rows, cols, t)
