"""relviz.rope.pair against an independent transcription: a pair as a complex number times e^{i·pos·θ}."""
from __future__ import annotations

import cmath
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relviz.rope.pair import MAX_POSITION, rotate_pair

coordinate = st.floats(-10, 10, allow_nan=False)
position = st.integers(0, 5000)
theta = st.floats(0, 3.2, allow_nan=False)


@given(coordinate, coordinate, coordinate, coordinate, theta, position, position)
def test_matches_complex_rotation(q0, q1, k0, k1, t, m, n):
    pair = rotate_pair((q0, q1), (k0, k1), t, query_position=m, key_position=n)
    q_m = complex(q0, q1) * cmath.exp(1j * m * t)
    k_n = complex(k0, k1) * cmath.exp(1j * n * t)
    assert pair.query == pytest.approx((q_m.real, q_m.imag), abs=1e-9)
    assert pair.key == pytest.approx((k_n.real, k_n.imag), abs=1e-9)
    assert pair.dot == pytest.approx((q_m * k_n.conjugate()).real, abs=1e-8)
    if abs(q_m) > 1e-6 and abs(k_n) > 1e-6:
        between = cmath.phase(k_n / q_m)                  # the angle from q to k, in (−π, π]
        assert math.cos(pair.angle_difference) == pytest.approx(math.cos(between), abs=1e-7)
        assert math.sin(pair.angle_difference) == pytest.approx(math.sin(between), abs=1e-7)
        assert pair.dot == pytest.approx(abs(q_m) * abs(k_n) * math.cos(pair.angle_difference), abs=1e-7)


@given(theta, position, position, st.integers(0, 5000))
def test_the_score_depends_on_the_offset_alone(t, m, n, shift):
    a = rotate_pair((1.0, 0.25), (0.6, 0.8), t, query_position=m, key_position=n)
    b = rotate_pair((1.0, 0.25), (0.6, 0.8), t, query_position=m + shift, key_position=n + shift)
    assert b.offset == a.offset == n - m
    assert b.dot == pytest.approx(a.dot, abs=1e-9)
    assert math.cos(b.angle_difference) == pytest.approx(math.cos(a.angle_difference), abs=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    (dict(query=(1.0,)), "query must be two finite numbers"),
    (dict(key=(1.0, float("nan"))), "key must be two finite numbers"),
    (dict(theta=-0.1), "theta must be a finite number >= 0"),
    (dict(theta=float("inf")), "theta must be a finite number >= 0"),
    (dict(query_position=-1), "query_position must be an integer from 0"),
    (dict(key_position=MAX_POSITION + 1), "key_position must be an integer from 0"),
    (dict(key_position=2.5), "key_position must be an integer from 0"),
])
def test_invalid_input_is_refused_naming_the_parameter(kwargs, message):
    args = dict(query=(1.0, 0.0), key=(0.0, 1.0), theta=0.5, query_position=1, key_position=2) | kwargs
    with pytest.raises(ValueError, match=message):
        rotate_pair(args.pop("query"), args.pop("key"), args.pop("theta"), **args)


def test_pair_sentences_carry_the_positions():
    from relviz.rope import pair_explanation, shifted_caption
    pair = rotate_pair((1.0, 0.0), (0.0, 1.0), 0.5, query_position=2, key_position=5)
    text = pair_explanation(pair)
    assert "m·θ = 2·θ" in text and "n·θ = 5·θ" in text and "(n − m)·θ = 3·θ" in text
    moved = rotate_pair((1.0, 0.0), (0.0, 1.0), 0.5, query_position=18, key_position=21)
    caption = shifted_caption(moved, 16)
    assert "Both moved by 16 (m = 18, n = 21)" in caption
    assert f"{math.degrees(moved.angle_difference):.1f}°" in caption and f"q·k = {moved.dot:.4f}" in caption
