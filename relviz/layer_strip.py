"""What one layer of a real model shows at the model's own context length, as plain data, per offset.

Each position mechanism says what it looks like (``Mechanism.views(length, layer)``), made of the data
kinds of relviz.mechanisms.view_kinds and relviz.schemes.view_kinds (import them from there). This module
holds the layer strip (which mechanism each layer applies, one cell per layer and row) and the helpers
that collect the views for a plan. The figures (``relviz.figures.layers``) dispatch on the kind of data, never on a mechanism, scheme
or family name.

Nothing here builds an L × L matrix at a long context: a pattern is the range of offsets each query sees (its
band), a temperature is one factor per position, a rotation one wavelength per pair, so a 10M-token context
(Llama 4 Scout) costs a few thousand numbers. Only at a short length (``STRUCTURE_MAX_LENGTH``: a toy
checkpoint's own context) does a layer also show each mechanism's structure per cell (``Mechanism.structure``,
the one the Live attention page draws beside the attention).

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from relviz._checks import check_int
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.view_kinds import KeysSeen, LayerView, Note, SinkShare, TemperatureCurve, Wavelengths
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, SimilarityMatrix, VectorNorms

if TYPE_CHECKING:  # annotations only: reading a plan is the caller's (relviz.model_plan, relviz.hf)
    from relviz.model_plan import LayerPlan, ModelPlan

__all__ = ["StripCell", "Strip", "strip", "layer_views", "context_length", "extent", "chosen", "Shown", "VIEW_KINDS",
           "MIN_LENGTH", "STRUCTURE_MAX_LENGTH"]

#: the shortest context the page draws
MIN_LENGTH = 16
#: the longest length a layer's structure (L × L, per head) is drawn at: 128 covers the shipped toy checkpoints'
#: own context (64), and a 112-head ALiBi layer's structure stays at 7 MB
STRUCTURE_MAX_LENGTH = 128


#: what a visitor may ask to see first (URL value -> the data kinds it shows)
VIEW_KINDS: dict[str, tuple[type, ...]] = {
    "all": (Wavelengths, KeysSeen, TemperatureCurve, SinkShare, BiasCurve, VectorNorms, SimilarityMatrix, Note,
            PositionStructure),
    "rotation": (Wavelengths,),
    "pattern": (KeysSeen,),
    "bias": (BiasCurve,),
    "temperature": (TemperatureCurve,),
    "sinks": (SinkShare,),
    "structure": (PositionStructure,),
}


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
    #: what the strip must say about where its layers were read from ("" when every layer is verified)
    caveat: str = ""

    def labels(self, row: str) -> list[str]:
        """The distinct labels of a row, in order of first appearance."""
        return list(dict.fromkeys(c.label for c in self.cells if c.row == row))


#: a mechanism's legend -> the strip row it sits in (a legend not listed gets a row of its own)
ROWS: dict[str, str] = {"mixer": "token mixer", "no_attention": "token mixer", "rotation": "position", "none": "position", "bias": "position", "absolute": "position",
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
            caveat = "" if layer.verified else f" [{layer.read_from}]"
            cells.append(StripCell(layer.index, row, found[0].legend, " + ".join(m.label() for m in found),
                                   "; ".join(m.describe() for m in found) + caveat))
    order = [r for r in dict.fromkeys(ROWS.values()) if r in rows] + [r for r in rows if r not in ROWS.values()]
    runs = tuple((a, b, p.label()) for a, b, p in plan.runs(stack))
    unverified = sorted({p.read_from for p in layers if not p.verified})
    caveat = f"every layer: {unverified[0]}" if unverified else ""
    return Strip(stack, len(layers), tuple(order), tuple(cells), tuple(p.layer_type for p in layers), runs, caveat)


def runs_list(strip: Strip) -> str:
    """The strip's runs of equal layers as a Markdown list: "layers a–b: what they apply", one line a run."""
    return "\n".join(f"- layers {a}–{b}: {text}" if a != b else f"- layer {a}: {text}" for a, b, text in strip.runs)


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


def extent(layer: LayerPlan) -> str | None:
    """What the layer's positions are when they are not a sequence (a vision tower's patches), in words: the first
    of its mechanisms that says; None for a sequence of tokens, drawn at a context length."""
    return next((words for m in layer.mechanisms if (words := m.extent())), None)


def layer_caption(layer: LayerPlan, length: int, own: int, *, names_length: bool) -> str:
    """The line over one layer's views: stack, index and layer type, where it is drawn (a vision tower's patches,
    or ``length`` positions and how they stand to the model's ``own`` context; ``names_length``: whether its
    config names one, T5's relative buckets do not) and what the layer applies."""
    if not names_length:
        note = " (its config.json names no context length)"
    else:
        note = f" (its own context: {own:,})" if length != own else " (the model's own context)"
    where = extent(layer) or f"at {length:,} positions{note}"
    return (f"**{layer.stack} layer {layer.index}**" + (f" · {layer.layer_type}" if layer.layer_type else "")
            + f" · {where}: " + layer.describe().split(": ", 1)[-1])


def side_heading(name: str, layer: LayerPlan, length: int) -> str:
    """A compared model's heading: its name, the layer, and its patches or its length."""
    return f"**{name}** · layer {layer.index} " + ("(patches of an image)" if extent(layer) else f"at {length:,} positions")


def layer_views(layer: LayerPlan, length: int) -> list[LayerView]:
    """Every view of one layer at ``length`` positions, in the order of its mechanisms; up to
    ``STRUCTURE_MAX_LENGTH``, each mechanism's structure per cell follows its views (causal as the layer's
    attention pattern is; a layer without one shows none)."""
    length = check_int("length", length, minimum=MIN_LENGTH, maximum=1 << 27)
    pattern = layer.find(AttentionPattern)
    out: list[LayerView] = []
    for mechanism in layer.mechanisms:
        # a table's legend numbers every layer: from 0 here, as the strip and transformers count them
        out.extend(replace(v, first_layer=0) if isinstance(v, VectorNorms) else v for v in mechanism.views(length, layer))
        if length <= STRUCTURE_MAX_LENGTH and pattern is not None:
            structure = mechanism.structure(length, pattern.causal)
            if structure is not None:
                out.append(structure)
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


