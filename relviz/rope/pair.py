"""One RoPE frequency pair at two positions: the numbers behind the picture of two turning arrows.

RoPE rotates pair i of a query at position m by the angle m·θ_i and the same pair of a key at position n
by n·θ_i. On one pair the whole argument for "RoPE is relative" fits in a picture: both arrows turn with
their positions, the angle between them is (angle of k − angle of q) + (n − m)·θ_i, and their dot product
|q|·|k|·cos(that angle) depends on n − m alone. Plain floats (float64): two 2-vectors need no tensors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: Positions a pair is drawn at: the longest context relviz shows (2^20).
MAX_POSITION = 2 ** 20


@dataclass(frozen=True)
class PairAtPositions:
    """A query and a key pair rotated to their positions; angles in radians, wrapped to [−π, π]."""

    theta: float                    # radians per position (θ_i)
    query_position: int             # m
    key_position: int               # n
    query: tuple[float, float]      # R(m·θ) q
    key: tuple[float, float]        # R(n·θ) k
    query_angle: float
    key_angle: float
    angle_difference: float         # key − query: (φ_k − φ_q) + (n − m)·θ, wrapped
    dot: float                      # q_m · k_n = |q|·|k|·cos(angle_difference)

    @property
    def offset(self) -> int:
        """n − m (key − query), the only thing the dot product depends on."""
        return self.key_position - self.query_position


def _vector(name: str, value: object) -> tuple[float, float]:
    try:
        x, y = (float(v) for v in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be two finite numbers (one frequency pair); got {value!r}") from None
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"{name} must be two finite numbers (one frequency pair); got {value!r}")
    return x, y


def _position(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_POSITION:
        raise ValueError(f"{name} must be an integer from 0 to {MAX_POSITION}; got {value!r}")
    return value


def _rotate(vector: tuple[float, float], angle: float) -> tuple[float, float]:
    c, s = math.cos(angle), math.sin(angle)
    return c * vector[0] - s * vector[1], s * vector[0] + c * vector[1]


def _wrap(angle: float) -> float:
    return math.remainder(angle, 2 * math.pi)


def rotate_pair(query: object, key: object, theta: float, *, query_position: int,
                key_position: int) -> PairAtPositions:
    """Rotate the pair ``query`` to ``query_position`` and ``key`` to ``key_position`` at ``theta`` radians per
    position (θ_i = base^(−2i/d), or a scaled one: take it from relviz.rope.rope_inv_freq)."""
    q, k = _vector("query", query), _vector("key", key)
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta < 0:
        raise ValueError(f"theta must be a finite number >= 0 (radians per position); got {theta!r}")
    m, n = _position("query_position", query_position), _position("key_position", key_position)
    q_m, k_n = _rotate(q, m * theta), _rotate(k, n * theta)
    query_angle, key_angle = math.atan2(q_m[1], q_m[0]), math.atan2(k_n[1], k_n[0])
    return PairAtPositions(
        theta=float(theta), query_position=m, key_position=n, query=q_m, key=k_n, query_angle=query_angle,
        key_angle=key_angle,
        # from the unrotated angles and the offset: exact for any m, n (no difference of two large angles)
        angle_difference=_wrap(math.atan2(k[1], k[0]) - math.atan2(q[1], q[0]) + (n - m) * theta),
        dot=q_m[0] * k_n[0] + q_m[1] * k_n[1])


def pair_explanation(pair: PairAtPositions) -> str:
    """Why one pair's angle depends on n − m alone, with this pair's positions."""
    return (f"The query's pair turns by m·θ = {pair.query_position}·θ, the key's by n·θ = {pair.key_position}·θ. "
            f"The angle between them is their angle at position 0 plus **(n − m)·θ = {pair.offset}·θ**: move both "
            "by the same amount and the arrows turn together, the angle stays.")


def shifted_caption(shifted: PairAtPositions, shift: int) -> str:
    """The same pair moved by ``shift`` positions: the same angle and the same score."""
    return (f"Both moved by {shift} (m = {shifted.query_position}, n = {shifted.key_position}): the angle is "
            f"{math.degrees(shifted.angle_difference):.1f}° and q·k = {shifted.dot:.4f}, the same: the "
            "score of one pair depends on n − m alone. Every pair does this at its own speed θ_i; the sum "
            "over pairs is the score matrix below.")
