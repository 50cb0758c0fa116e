"""What every position mechanism shares: validated config reads, the layer it is read for, its base class.

A real model composes mechanisms per layer (a rotation with one base on local layers and another on
global ones, none at all on every fourth layer, a window, sinks...). Each mechanism is one module of
this package: it reads its part of a Hugging Face config for one layer (``read``), owns its reference
math, and says in words what it does (``label`` for the layer strip, ``describe`` for hover text).
The family table (``families.py``) says which mechanisms a model_type applies and with which options;
it is data, read by the mechanisms, never a branch on a family name outside them.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from relviz.attention_steps import Attention, dot_product_attention
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.view_kinds import PositionStructure

__all__ = ["ConfigView", "LayerContext", "Mechanism", "ToyMechanism", "MAX_POSITIONS", "MAX_LAYERS", "REQUIRED"]

#: The longest context relviz reads (Llama 4 Scout claims 10M; 2^27 leaves room, and refuses 2^40).
MAX_POSITIONS = 1 << 27
MAX_LAYERS = 4096
#: A ConfigView read's default meaning "no default: the field must be in the config".
REQUIRED = object()


class ConfigView:
    """A parsed config.json with reads that validate once, naming the field and what is allowed."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "") -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{prefix or 'config'} must be a JSON object; got {type(data).__name__}")
        self.data = data
        self.prefix = prefix

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def int(self, key: str, default: Any = REQUIRED, *, minimum: int = 0, maximum: int = MAX_POSITIONS) -> int:
        value = self.data.get(key)
        if value is None:
            if default is REQUIRED:
                raise ValueError(f"config field {self.name(key)} is required (an integer from {minimum} to "
                                 f"{maximum})")
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not minimum <= value <= maximum:
            raise ValueError(f"config field {self.name(key)} must be an integer from {minimum} to {maximum}; "
                             f"got {value!r}")
        return int(value)

    def float(self, key: str, default: Any = REQUIRED, *, minimum: float = 0.0, maximum: float = 1e12) -> Any:
        value = self.data.get(key)
        if value is None:
            if default is REQUIRED:
                raise ValueError(f"config field {self.name(key)} is required (a finite number from {minimum:g} "
                                 f"to {maximum:g})")
            return default
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                or not minimum <= value <= maximum:
            raise ValueError(f"config field {self.name(key)} must be a finite number from {minimum:g} to "
                             f"{maximum:g}; got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"config field {self.name(key)} must be true or false; got {value!r}")
        return value

    def str(self, key: str, default: Any = REQUIRED, *, allowed: tuple[str, ...] | None = None) -> str:
        value = self.data.get(key)
        if value is None:
            if default is REQUIRED:
                raise ValueError(f"config field {self.name(key)} is required")
            return default
        if not isinstance(value, str) or len(value) > 200 or (allowed is not None and value not in allowed):
            what = f"one of {', '.join(allowed)}" if allowed is not None else "a short string"
            raise ValueError(f"config field {self.name(key)} must be {what}; got {value!r}")
        return value

    def list(self, key: str, length: int, item: Callable[[str, Any], Any], *,
             counted_by: str = "num_hidden_layers") -> list[Any] | None:
        """A list of ``length`` entries (one per layer), each checked by ``item(name, value)``; None if absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != length:
            got = f"{len(value)} entries" if isinstance(value, (list, tuple)) else repr(value)[:60]
            raise ValueError(f"config field {self.name(key)} must be a list with one entry per layer "
                             f"({self.name(counted_by)} = {length}); got {got}")
        return [item(f"{self.name(key)}[{k}]", v) for k, v in enumerate(value)]

    def sub(self, key: str) -> ConfigView | None:
        value = self.data.get(key)
        if value is None:
            return None
        return ConfigView(value, f"{self.name(key)}.")


@dataclass
class LayerContext:
    """One attention layer as a mechanism reads it: the config, where the layer sits, and its weights.

    ``tensor(suffix)`` returns the one tensor whose name ends in ``suffix`` (None when the checkpoint has
    none, or when only a config was given); ``shared`` keeps what several layers of a model reuse (a
    table read once)."""

    config: ConfigView
    stack: str
    index: int
    layers: int
    layer_type: str | None
    causal: bool
    layers_field: str = "num_hidden_layers"
    tensor: Callable[[str], torch.Tensor | None] = lambda suffix: None
    has_weights: bool = False
    shared: dict[str, Any] = field(default_factory=dict)


class Mechanism:
    """One position mechanism as one layer applies it.

    Subclasses set ``name`` (the family table's key), ``role`` (what it does to attention: it rotates
    q and k, adds a bias to the logits, decides which keys a query sees, adds positions to the input,
    joins the softmax, or scales it) and ``order`` (its place in listings), and implement ``read``.
    """

    name: ClassVar[str] = ""
    role: ClassVar[str] = ""
    order: ClassVar[int] = 100
    #: the colour group of the layer strip (the page picks colours by it, never by name)
    legend: ClassVar[str] = ""
    #: whether it carries position information (a layer with none of these is a NoPE layer)
    positional: ClassVar[bool] = False
    #: whether its values live in the checkpoint's tensors (a config alone gives only its settings)
    needs_weights: ClassVar[bool] = False
    #: what the Live attention page says where :meth:`structure` gives nothing to draw
    no_structure: ClassVar[str] = "This layer's position mechanism gives attention no position structure to draw."
    #: the options its ``read`` interprets in the family table: key -> its type (or a tuple of types), or the
    #: values it may take (a frozenset); relviz.mechanisms.families.check_family refuses any other key
    option_types: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Mechanism | None:
        """This mechanism on the layer ``ctx`` describes, or None when the layer does not apply it."""
        raise NotImplementedError

    def label(self) -> str:
        """A few words for the layer strip (e.g. 'RoPE θ 10k')."""
        return self.name

    def describe(self) -> str:
        """One sentence for hover text and the command line."""
        return self.label()

    def notes(self) -> list[str]:
        """Where transformers runs this differently from the model's config or original code."""
        return []

    def settings(self) -> dict[str, Any]:
        """The settings read, by their transformers names, JSON-serialisable."""
        return {}

    def to_json(self) -> dict[str, Any]:
        return {"mechanism": self.name, "role": self.role, "label": self.label(), **self.settings()}

    def key(self) -> tuple:
        """What makes two layers' mechanisms the same (for grouping runs of identical layers)."""
        return (self.name, tuple(sorted((k, repr(v)) for k, v in self.settings().items())))

    def extent(self) -> str | None:
        """What this layer's positions are when they are not a sequence of tokens (a vision tower's patches: the
        model's context length means nothing there), in words; None for a sequence."""
        return None

    def views(self, length: int, layer: Any) -> list[LayerView]:
        """What this mechanism looks like on ``layer`` (its LayerPlan: the other mechanisms it sits with) at
        ``length`` positions, as relviz.mechanisms.view_kinds' data kinds, built per offset or per position."""
        return []

    def trained_views(self, length: int, layer: Any, train_length: int) -> list[LayerView]:
        """:meth:`views` for a model whose training length is known (relviz's toy model, on the Live attention
        page): the same views, and what training reached where the mechanism can say it (T5's buckets, a learned
        table's similarity among the trained positions). A read model's length is unknown: :meth:`views` alone."""
        return self.views(length, layer)

    def structure(self, length: int, causal: bool) -> PositionStructure | None:
        """What this mechanism puts into every cell (query i, key j) at ``length`` positions (an index, a bias or a
        similarity, [1 or H, L, L]), with its words (``caption``, citing its ``facts``); ``causal``: the layer attends
        to the past only (the future cells are drawn masked). None: nothing per cell to draw (no position, or
        values that live in weights not read). L × L: the pages ask for it only at short lengths (the Live
        attention page, and Your model up to relviz.layer_strip.STRUCTURE_MAX_LENGTH)."""
        return None

    # -- the forward of relviz's toy model: a toy scheme (relviz.schemes) hands out its mechanisms, holding its
    # learned parameters, and the model runs them; a real model's mechanisms are read, never run -------------

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token embeddings [B, L, D] -> the first block's input (a mechanism in the input adds its positions)."""
        return x

    def prepare(self, length: int, like: torch.Tensor) -> Any:
        """What every layer's :meth:`attend` shares within one forward (a bias per offset, rotation angles), built
        once per forward; None when nothing is shared. ``like``: the embeddings [B, L, D] (device and dtype)."""
        return None

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, shared: Any = None,
               need_weights: bool = False) -> Attention:
        """One layer's attention on q, k, v [B, H, L, D_head] -> (output, weights [B, H, L, L] or None); ``shared``:
        this forward's :meth:`prepare` (None: built here). Nothing is checked: the toy model validated its config
        and tokens once. Here plain attention, softmax(q kᵀ / √D) v: a mechanism that acts inside attention (a
        bias, a rotation) overrides it; one in the input, or none, leaves attention as it is."""
        return dot_product_attention(q, k, v, causal=causal, need_weights=need_weights)


class ToyMechanism(Mechanism):
    """A mechanism only relviz's toy model applies (a toy scheme hands it out and runs it; relviz.toy_plan draws
    it): no published config names it, so ``read`` finds it in none; its values are learned (in the checkpoint)."""

    positional = True
    needs_weights = True
    legend = "bias"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Mechanism | None:
        return None
