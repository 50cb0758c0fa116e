"""What one layer of a real model shows at the model's own context length, as plain data, per offset.

Each position mechanism says what it looks like (``Mechanism.views(length, layer)``); this module holds
the data kinds those views are made of, the layer strip (which mechanism each layer applies, one cell
per layer and row), and the helpers that collect them for a plan. The figures (``relviz.figures.layers``)
dispatch on the kind of data, never on a mechanism, scheme or family name.

Nothing here builds an L × L matrix: a pattern is the range of offsets each query sees (its band), a
temperature is one factor per position, a rotation one wavelength per pair, so a 10M-token context
(Llama 4 Scout) costs a few thousand numbers.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from relviz._checks import check_int
from relviz.schemes.views import BiasCurve

if TYPE_CHECKING:  # (the plan imports the mechanisms, which import this module)
    from relviz.plan import LayerPlan, ModelPlan

__all__ = ["Wavelengths", "KeysSeen", "TemperatureCurve", "SinkShare", "Note", "BiasCurve", "LayerView",
           "StripCell", "Strip", "strip", "layer_views", "context_length", "keys_seen", "keys_at", "VIEW_KINDS",
           "MIN_LENGTH", "MAX_POINTS"]

#: the shortest context the page draws
MIN_LENGTH = 16
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

    @property
    def count(self) -> np.ndarray:
        """[n] keys seen by each query (itself included)."""
        return self.ahead - self.back + 1


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


LayerView = Wavelengths | KeysSeen | TemperatureCurve | SinkShare | BiasCurve | Note

#: what a visitor may ask to see first (URL value -> the data kinds it shows)
VIEW_KINDS: dict[str, tuple[type, ...]] = {
    "all": (Wavelengths, KeysSeen, TemperatureCurve, SinkShare, BiasCurve, Note),
    "rotation": (Wavelengths,),
    "pattern": (KeysSeen,),
    "bias": (BiasCurve,),
    "temperature": (TemperatureCurve,),
    "sinks": (SinkShare,),
}


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


# ---------------------------------------------------------------------------------------
# The strip


@dataclass(frozen=True)
class StripCell:
    layer: int
    row: str                      # which row of the strip (a mechanism's role group)
    legend: str                   # the colour group (a mechanism's legend)
    label: str                    # the words in the legend: what sets this cell apart
    describe: str                 # hover: the mechanism in a sentence


@dataclass(frozen=True)
class Strip:
    """One stack's layers as cells: one per layer per row (position, pattern, softmax)."""

    stack: str
    layers: int
    rows: tuple[str, ...]
    cells: tuple[StripCell, ...]
    layer_types: tuple[str | None, ...] = ()
    runs: tuple[tuple[int, int, str], ...] = ()

    def labels(self, row: str) -> list[str]:
        """The distinct labels of a row, in order of first appearance."""
        return list(dict.fromkeys(c.label for c in self.cells if c.row == row))


#: a mechanism's legend -> the strip row it sits in (a legend not listed gets a row of its own)
ROWS: dict[str, str] = {"rotation": "position", "none": "position", "bias": "position", "absolute": "position",
                        "pattern": "keys seen", "sinks": "softmax", "scale": "softmax"}


def strip(plan: ModelPlan, stack: str | None = None) -> Strip:
    """The layer strip of one stack of a plan (the first stack by default)."""
    stack = stack if stack is not None else plan.stack_names[0]
    layers = plan.plans[plan._stack(stack)]
    cells: list[StripCell] = []
    rows: dict[str, None] = {}
    for layer in layers:
        grouped: dict[str, list[Any]] = {}
        for mechanism in layer.mechanisms:
            grouped.setdefault(ROWS.get(mechanism.legend, mechanism.legend), []).append(mechanism)
        for row, found in grouped.items():
            rows[row] = None
            cells.append(StripCell(layer.index, row, found[0].legend, " + ".join(m.label() for m in found),
                                   "; ".join(m.describe() for m in found)))
    order = [r for r in dict.fromkeys(ROWS.values()) if r in rows] + [r for r in rows if r not in ROWS.values()]
    runs = tuple((a, b, p.label()) for a, b, p in plan.runs(stack))
    return Strip(stack, len(layers), tuple(order), tuple(cells), tuple(p.layer_type for p in layers), runs)


# ---------------------------------------------------------------------------------------
# A layer's views


def context_length(plan: ModelPlan, raw: dict[str, Any] | None = None) -> int | None:
    """The model's own context length (max_position_embeddings or the like, from the plan's settings or the raw
    config.json ``raw``); None when neither has one."""
    for source in (plan.config, raw or {}):
        for key in ("max_position_embeddings", "max_seq_len", "n_positions", "max_positions"):
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 27:
                return value
    return None


def layer_views(layer: LayerPlan, length: int) -> list[LayerView]:
    """Every view of one layer at ``length`` positions, in the order of its mechanisms."""
    length = check_int("length", length, minimum=MIN_LENGTH, maximum=1 << 27)
    out: list[LayerView] = []
    for mechanism in layer.mechanisms:
        out.extend(mechanism.views(length, layer))
    return out


@dataclass(frozen=True)
class Shown:
    """What the page shows of a layer: the views asked for, or all of them when the layer has none of that kind."""

    views: list[LayerView] = field(default_factory=list)
    missing: bool = False


def chosen(views: list[LayerView], kind: str) -> Shown:
    """The views of one kind (``VIEW_KINDS``); all views, flagged ``missing``, when there is none."""
    if kind not in VIEW_KINDS:
        raise ValueError(f"kind must be one of {', '.join(VIEW_KINDS)}; got {kind!r}")
    picked = [v for v in views if isinstance(v, VIEW_KINDS[kind])]
    return Shown(picked, False) if picked else Shown(list(views), True)


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
