"""Tests for relviz.memory against the Music Transformer figures in FACTS.md."""
from __future__ import annotations

import pytest

from relviz.memory import format_bytes, relative_term_bytes


def test_music_transformer_example() -> None:
    sizes = relative_term_bytes(2048, 512, 8)
    assert sizes.shaw_per_layer == 2048 * 2048 * 512 * 4
    assert sizes.skew_per_layer == 2048 * 512 * 4
    assert sizes.shaw_per_head == 2048 * 2048 * 64 * 4
    assert sizes.skew_per_head == 2048 * 64 * 4
    assert sizes.ratio == 2048
    assert format_bytes(sizes.shaw_per_layer) == "8.6 GB"
    assert format_bytes(sizes.skew_per_layer) == "4.2 MB"
    assert format_bytes(sizes.shaw_per_head) == "1.1 GB"
    assert format_bytes(sizes.skew_per_head) == "0.52 MB"


def test_half_precision_halves_everything() -> None:
    full, half = relative_term_bytes(1024, 256, 4), relative_term_bytes(1024, 256, 4, dtype_bytes=2)
    assert half.shaw_per_layer * 2 == full.shaw_per_layer
    assert half.skew_per_head * 2 == full.skew_per_head


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (999, "999 B"), (1000, "1 kB"), (1500, "1.5 kB"), (99_999, "100 kB"),
    (100_000, "0.1 MB"), (524_288, "0.52 MB"), (4_194_304, "4.2 MB"), (9_960_000, "10 MB"),
    (34_359_738_368, "34 GB"), (8_589_934_592, "8.6 GB"), (1_073_741_824, "1.1 GB"),
    (2.5e15, "2.5 PB"), (3e18, "3000 PB"),
])
def test_format_bytes(n, text) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize("args, param", [
    ((0, 512, 8), "length"), ((2048, 0, 8), "dim"), ((2048, 512, 0), "heads"),
    ((2048, 512, 7), "divisible"),
    ((2048, 1, 8), r"heads must be at most dim .*got dim=1, heads=8"),   # the Skew page's D at its minimum ((2048, 512, 8, 0), "dtype_bytes"), ((2048.0, 512, 8), "length"),
])
def test_relative_term_bytes_rejects_bad_arguments(args, param) -> None:
    with pytest.raises(ValueError, match=param):
        relative_term_bytes(*args)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1", True, None])
def test_format_bytes_rejects_bad_input(bad) -> None:
    with pytest.raises(ValueError, match="n must be"):
        format_bytes(bad)


def test_relative_term_explanation_carries_l_and_d():
    mem = relative_term_bytes(2048, 512, 8, 4)
    assert mem.head_dim == 64
    text = mem.explanation()
    assert "**L²·D** = 2048² × 512 values" in text and "**2,048× less** (exactly L)" in text


def test_shared_zmax_is_the_largest_magnitude_and_one_for_zeros():
    import numpy as np
    from relviz.figures.skew import shared_zmax
    assert shared_zmax(np.array([[0.5, -2.0], [np.nan, 1.0]]), np.array([1.5])) == 2.0
    assert shared_zmax(np.zeros((3, 3))) == 1.0
