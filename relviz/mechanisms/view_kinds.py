"""The data kinds a mechanism's views are made of (``Mechanism.views(length, layer)``), and the exact
per-query helpers that build them without an L × L matrix.

They sit below the mechanisms, so that each mechanism module imports them at its top; the kinds a toy
scheme shows too (BiasCurve, VectorNorms, SimilarityMatrix) are relviz.schemes.view_kinds'. relviz.layer_strip
(which reads a plan, above the mechanisms) collects a layer's views, and relviz.figures.layers draws each by
its kind.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relviz._checks import check_int
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, SimilarityMatrix, VectorNorms

__all__ = ["Wavelengths", "KeysSeen", "TemperatureCurve", "SinkShare", "Note", "LayerView",
           "keys_seen", "keys_at", "step_positions", "MAX_POINTS"]

#: at most this many points per curve; more steps than this are sampled (exact values at the samples)
MAX_POINTS = 4096


@dataclass(frozen=True)
class Wavelengths:
    """A rotation's wavelength 2π/θ_i per pair at ``length`` positions, scaled and as its base alone gives."""

    title: str
    caption: str
    inv_freq: np.ndarray          # [pairs] θ_i as the layer uses it at this length
    plain: np.ndarray             # [pairs] base^(−2i/d), no scaling
    length: int
    original: int | None          # the pre-training context the scaling stretches (None: unscaled)
    rule: str
    attention_scaling: float

    @property
    def turns(self) -> np.ndarray:
        """[pairs] how many full turns each pair makes over the context (≥ 1: it wraps)."""
        return (self.length - 1) * self.inv_freq.astype(np.float64) / (2 * math.pi)


@dataclass(frozen=True)
class KeysSeen:
    """The attention pattern per query: how many keys query i sees, and the band of offsets j − i it may use.

    ``positions`` are 0-based query positions (breakpoints: the curves are exact, linear between them);
    ``back[k]`` / ``ahead[k]`` the farthest offset back (≤ 0) and ahead (≥ 0) query ``positions[k]`` sees.
    """

    title: str
    caption: str
    length: int
    positions: np.ndarray         # [n] int64, ascending
    back: np.ndarray              # [n] int64, ≤ 0
    ahead: np.ndarray             # [n] int64, ≥ 0
    reach: int | None             # the most keys back any query sees (None: the whole context)
    limit_label: str = ""
    sampled: bool = False
    cap: int | None = None        # at most this many of the band's keys are attended (DSA's index_topk: chosen
                                  # by content), None: every key of the band

    @property
    def count(self) -> np.ndarray:
        """[n] keys seen by each query (itself included)."""
        band = self.ahead - self.back + 1
        return band if self.cap is None else np.minimum(band, self.cap)


@dataclass(frozen=True)
class TemperatureCurve:
    """A factor on the queries (or the softmax) against the query position: a step curve."""

    title: str
    caption: str
    positions: np.ndarray         # [n] int64 0-based query positions where the factor changes (and the ends)
    factors: np.ndarray           # [n] float64, the factor from that position on
    length: int
    sampled: bool = False


@dataclass(frozen=True)
class SinkShare:
    """The share of each softmax row a learned sink takes, against the query position, for given sink logits.

    ``logits`` are the sink logits relative to the keys' logits (which the curve holds equal): with n keys
    seen the sink takes 1 / (1 + n·e^(−s)). From the weights: one curve per head; from a config alone:
    ``illustrative`` values.
    """

    title: str
    caption: str
    positions: np.ndarray         # [n] 0-based query positions
    keys: np.ndarray              # [n] keys seen there
    logits: np.ndarray            # [S] sink logit − key logit per curve
    share: np.ndarray             # [S, n]
    labels: tuple[str, ...]
    illustrative: bool


@dataclass(frozen=True)
class Note:
    """No picture: what the layer does, in words (a NoPE layer, a scale, a table that lives in the weights)."""

    title: str
    text: str


LayerView = (Wavelengths | KeysSeen | TemperatureCurve | SinkShare | BiasCurve | VectorNorms | SimilarityMatrix | Note
             | PositionStructure)

# ---------------------------------------------------------------------------------------
# The pattern per query, exactly, without an L × L mask


def keys_seen(length: int, *, causal: bool, window: int | None = None, chunk: int | None = None,
              max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(positions, back, ahead, sampled): the band of offsets each query sees, at its breakpoints.

    As transformers' masks: causal ``j ≤ i``; sliding ``j > i − w`` (causal) or ``|i − j| ≤ w``
    (bidirectional); chunked ``j // c == i // c`` (with causal). Between breakpoints both edges are
    linear in i, so the curves drawn through them are exact. Chunks beyond ``max_points`` / 2 are
    sampled: the teeth shown are exact, some between them are left out (``sampled``)."""
    length = check_int("length", length, minimum=1, maximum=1 << 27)
    last = length - 1
    if chunk is not None:
        starts = np.arange(0, length, chunk, dtype=np.int64)
        sampled = len(starts) > max_points // 2
        if sampled:
            keep = np.unique(np.geomspace(1, len(starts), max_points // 2).astype(np.int64) - 1)
            starts = starts[keep]
        ends = np.minimum(starts + chunk - 1, last)
        positions = np.stack([starts, ends], 1).reshape(-1)
        back = np.stack([np.zeros_like(starts), starts - ends], 1).reshape(-1)
        ahead = np.zeros_like(positions)
        if not causal:   # (no bidirectional chunked model today: the chunk's keys ahead too)
            ahead = np.stack([ends - starts, np.zeros_like(starts)], 1).reshape(-1)
        return positions, back, ahead, sampled
    if window is None:
        positions = np.array([0, last], dtype=np.int64)
        back = -positions
        ahead = np.zeros_like(positions) if causal else last - positions
        return positions, back, ahead, False
    if causal:
        reach = window - 1
        positions = np.unique(np.array([0, min(reach, last), last], dtype=np.int64))
        return positions, -np.minimum(positions, reach), np.zeros_like(positions), False
    positions = np.unique(np.clip(np.array([0, window, last - window, last], dtype=np.int64), 0, last))
    return positions, -np.minimum(positions, window), np.minimum(last - positions, window), False


def keys_at(positions: np.ndarray, length: int, *, causal: bool, window: int | None = None,
            chunk: int | None = None) -> np.ndarray:
    """[n] int64: how many keys each query position sees (itself included), by the same rules as keys_seen."""
    i = np.asarray(positions, dtype=np.int64)
    last = length - 1
    if chunk is not None:
        start = (i // chunk) * chunk
        return (i - start + 1) if causal else (np.minimum(start + chunk - 1, last) - start + 1)
    if causal:
        return np.minimum(i, window - 1) + 1 if window is not None else i + 1
    if window is None:
        return np.full_like(i, length)
    return np.minimum(i, window) + np.minimum(last - i, window) + 1


def step_positions(length: int, period: float, max_points: int = MAX_POINTS) -> tuple[np.ndarray, bool]:
    """0-based positions p where ⌊(p + 1)/period⌋ changes (p = k·period − 1), plus 0 and length − 1."""
    count = int((length) // period)
    ks = np.arange(1, count + 1, dtype=np.float64)
    sampled = count > max_points
    if sampled:
        ks = np.unique(np.round(np.geomspace(1, count, max_points)))
    steps = np.ceil(ks * period - 1).astype(np.int64)
    steps = steps[(steps > 0) & (steps < length)]
    return np.unique(np.concatenate([[0], steps, [length - 1]])).astype(np.int64), sampled
