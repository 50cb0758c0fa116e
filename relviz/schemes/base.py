"""The one interface every position scheme implements, and the parameters it declares.

A scheme is a subclass of :class:`Scheme` in its own module of ``relviz/schemes/``. The class
attributes say what the scheme is (name, one-line summary, parameters, causal-only, training
defaults); an instance is the ``nn.Module`` of one model that holds its learned position parameters and
hands out, per layer, the mechanism of :mod:`relviz.mechanisms` that computes its position
(:meth:`Scheme.mechanism`). Everything the model runs and the pages draw is that mechanism's: the forward
(:meth:`Scheme.embed`, :meth:`Scheme.attend`), the structure beside the attention (:meth:`Scheme.structure`)
and the parameter views (:meth:`Scheme.parameter_views`), their words included. A scheme's module holds its
name, its one-line summary (``python -m relviz schemes``), its parameters' help (the CLI flags), its
error messages and the offset study's words for its exact range (:meth:`Scheme.exact_range_words`).

A :class:`Param` is declared once and gives everything else: the ModelConfig field, its
validation, the ``python -m relviz train`` flag and help, the app's slider range.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from relviz.attention_steps import Attention, dot_product_attention
from relviz.mechanisms.base import Mechanism
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.schemes.view_kinds import PositionStructure

__all__ = ["MAX_LENGTH", "Param", "Scheme", "SchemeConfig", "Attention", "dot_product_attention", "detached",
           "clamped_layer"]

#: Longest sequence a model accepts: the attention weights it returns take
#: n_layers · B · H · L² floats (L = 4096, 2 layers, 4 heads: 537 MB per sequence).
MAX_LENGTH = 4096

class SchemeConfig(Protocol):
    """What a scheme reads from a model's configuration; :class:`relviz.model.ModelConfig` is one.

    Declared here rather than imported from :mod:`relviz.model`: ModelConfig is built from the
    registry of this package (one field per :class:`Param`), so the model depends on the schemes,
    never the other way round. Each scheme also reads its own parameters by their names.
    """

    d_model: int
    n_layers: int
    n_heads: int
    causal: bool

    @property
    def head_dim(self) -> int: ...

    def __getattr__(self, name: str) -> Any: ...  # the scheme's own parameters (one per Param)


@dataclass(frozen=True)
class Param:
    """One scheme parameter: a ModelConfig field, a CLI flag and an app slider, declared once.

    ``minimum`` / ``maximum`` bound what the library accepts (``exclusive_minimum``: the value
    must be strictly greater); ``app_min`` / ``app_max`` bound the app's "train your own"
    slider (defaults: the library's bounds).
    """

    name: str
    kind: type          # int or float
    default: int | float
    help: str
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: bool = False
    app_min: int | float | None = None
    app_max: int | float | None = None
    label: str | None = None      # the app's slider label (default: the help text)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def in_app(self) -> bool:
        """Whether the app's "train your own" form has a slider for it."""
        return (self.app_max if self.app_max is not None else self.maximum) is not None and \
            (self.app_min if self.app_min is not None else self.minimum) is not None

    @property
    def slider_range(self) -> tuple[int | float, int | float]:
        lo = self.app_min if self.app_min is not None else self.minimum
        hi = self.app_max if self.app_max is not None else self.maximum
        if lo is None or hi is None:
            raise ValueError(f"parameter {self.name} needs app_min and app_max to have a slider")
        return lo, hi

    def range_text(self) -> str:
        low = "" if self.minimum is None else (f"> {self.minimum}" if self.exclusive_minimum else f">= {self.minimum}")
        high = "" if self.maximum is None else f"<= {self.maximum}"
        return " and ".join(part for part in (low, high) if part) or "any"

    def check(self, value: object) -> int | float:
        """The value as this parameter's type, or ValueError naming it and the allowed range."""
        if self.kind is int:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        else:
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
        if ok:
            value = self.kind(value)
            ok = ((self.minimum is None or (value > self.minimum if self.exclusive_minimum else value >= self.minimum))
                  and (self.maximum is None or value <= self.maximum))
        if not ok:
            what = "an integer" if self.kind is int else "a finite number"
            raise ValueError(f"{self.name} must be {what} {self.range_text()}; got {value!r}")
        return value

    def to_dict(self) -> dict[str, Any]:
        """What ``python -m relviz schemes --json`` lists."""
        return {"name": self.name, "type": self.kind.__name__, "default": self.default, "minimum": self.minimum,
                "maximum": self.maximum, "exclusive_minimum": self.exclusive_minimum, "flag": self.flag,
                "help": self.help, "app_range": list(self.slider_range) if self.in_app else None}


class Scheme(nn.Module):
    """Base class of every position scheme: plain attention, nothing added.

    Subclasses set the class attributes and override what their scheme changes. The registry
    (:mod:`relviz.schemes`) finds every subclass with a ``name`` in the package's modules.
    """

    #: The scheme's name: ModelConfig.scheme, ``--scheme NAME``, checkpoint JSON.
    name: ClassVar[str] = ""
    #: One line for the app and the CLI.
    summary: ClassVar[str] = ""
    #: Parameters the config holds for this scheme (flat ModelConfig fields; names unique across schemes).
    params: ClassVar[tuple[Param, ...]] = ()
    #: "relative", "absolute" (positions added to the input) or "none": what the page's findings say.
    family: ClassVar[str] = "relative"
    #: Only defined for causal attention.
    causal_only: ClassVar[bool] = False
    #: The position concept it learns: the class of relviz.mechanisms (the one registry of concepts) that
    #: :meth:`mechanism` hands out. Declared once, here: a real model's plan names its toy scheme through it.
    concept: ClassVar[type[Mechanism]] = NoPosition

    @classmethod
    def in_input(cls) -> bool:
        """Whether its positions are added to the input (an absolute scheme), not to attention."""
        return cls.family == "absolute"

    @classmethod
    def without_position(cls) -> bool:
        """Whether the model gets no position information at all."""
        return cls.family == "none"
    #: Why (the error message's reason), when causal_only.
    causal_reason: ClassVar[str] = ""
    #: Position in listings (the app's picker, ``python -m relviz schemes``).
    order: ClassVar[float] = 100.0
    #: Where the shipped checkpoint / CLI defaults depart from ModelConfig's and the training
    #: defaults: {"model": {...}, "training": {...}}.
    training_defaults: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Where training_defaults changes the layer count: "<scheme> <layers> (why)", quoted by the Live attention page
    #: beside the common shape (relviz.inspection.about_the_models).
    shape_note: ClassVar[str] = ""

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__()
        self.config = config

    # -- configuration (class level: known before building anything) ---------------------

    @classmethod
    def check_config(cls, config: SchemeConfig, active: bool) -> dict[str, Any]:
        """Cross-field checks, after each Param has been checked; returns normalised parameter
        values to store. Runs for every scheme (``active``: the config uses this one), so a
        config stays valid whichever scheme it is switched to."""
        return {}

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        """Learned parameters of this scheme in a model with ``config`` (before building it)."""
        return 0

    @classmethod
    def describe_params(cls, values: dict[str, Any]) -> str:
        """Short text for the parameters, e.g. 'k = 8' (the app's request summary)."""
        return ", ".join(f"{p.name} = {values[p.name]}" for p in cls.params)

    @classmethod
    def info(cls) -> dict[str, Any]:
        """What ``python -m relviz schemes --json`` lists."""
        return {"name": cls.name, "summary": cls.summary, "causal_only": cls.causal_only,
                "parameters": [p.to_dict() for p in cls.params], "training_defaults": cls.training_defaults,
                "module": cls.__module__}

    # -- what the experiments read (offsets −1..−max_s of a causal model, answer of shift-by-s) --

    #: Whether the offset study compares the nearest offset of a shared group with its inside (T5 buckets).
    bucketed: ClassVar[bool] = False

    @classmethod
    def offset_segments(cls, params: dict[str, Any], max_s: int) -> list[tuple[int, int, str]]:
        """The offsets s = 1..max_s (answer at j − i = −s) grouped the way one layer sees them:
        (first s, last s, label) per group; [] for schemes without a per-offset table."""
        return []

    @classmethod
    def exact_shifts(cls, params: dict[str, Any], shifts: list[int]) -> list[int] | None:
        """The s whose offset −s one layer can single out by position alone; None for schemes
        without a per-offset table."""
        return None

    @classmethod
    def exact_range_words(cls, params: dict[str, Any], exact: list[int], first_out: int) -> tuple[str, str]:
        """The offset study's words (where the exact range ``exact`` lies, what lies beyond it from
        ``first_out`` on); a scheme whose :meth:`exact_shifts` is not None overrides it."""
        raise LookupError(f"scheme {cls.name!r} has a per-offset table but no words for its exact range: "
                          f"override exact_range_words in {cls.__module__}")

    # -- the model -------------------------------------------------------------------------

    @classmethod
    def check_length_for(cls, config: SchemeConfig, length: int) -> None:
        """Raise ValueError, saying why, if a model with ``config`` cannot run at this length
        (known before building it: the app's training guard asks)."""

    def check_length(self, length: int) -> None:
        """Raise ValueError, saying why, if the scheme cannot run at this sequence length."""
        type(self).check_length_for(self.config, length)

    def mechanism(self, layer: int) -> Mechanism:
        """The mechanism (relviz.mechanisms) that computes layer ``layer``'s position, holding this module's
        parameters (not copies: training's gradients flow through it). The model's forward runs it
        (:meth:`embed`, :meth:`prepare`, :meth:`attend`) and relviz.toy_plan draws it: one implementation of
        each concept. The base class: no position (plain attention). A scheme overrides this, never the forward
        below (relviz.schemes.registry refuses a scheme that overrides embed, prepare or attend)."""
        return NoPosition()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token embeddings [B, L, D] -> input of the first block (an absolute mechanism adds its positions)."""
        return self.mechanism(0).embed(x)

    def prepare(self, length: int, like: torch.Tensor) -> Any:
        """What every layer's attention shares within one forward, built once per forward (a bias per offset from
        a table every layer uses, rotation angles): the mechanism's; None when nothing is shared.
        ``like``: the embeddings [B, L, D_model] (their device and dtype)."""
        return self.mechanism(0).prepare(length, like)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, shared: Any = None,
               need_weights: bool = False) -> Attention:
        """Layer ``layer``'s attention on [B, H, L, D_head] -> (output, weights [B, H, L, L] or None): its
        mechanism's.

        ``shared``: this forward's :meth:`prepare` (None: built here). need_weights=False takes
        the fused path (training, evaluation, experiments); True the exact weights path the app
        draws. Both give the same output to float rounding. The mechanisms call :mod:`relviz.attention` with
        ``validate=False``: the model validated its config and tokens once, and a check per
        layer would read back from the device (tests/test_validate_once.py counts the reads).
        """
        return self.mechanism(layer).attend(q, k, v, causal=self.config.causal, shared=shared,
                                            need_weights=need_weights)

    # -- what the app shows: the mechanism's ----------------------------------------------------

    def structure(self, length: int, layer: int = 0) -> PositionStructure | None:
        """What layer ``layer``'s mechanism (the last layer's beyond it) puts into every (query i, key j) at ``length``,
        with its words (``caption``): the mechanism's own structure, the one Your model draws for that layer. None:
        nothing per cell to draw. ValueError (the scheme's) where the model cannot run at ``length``."""
        self.check_length(length)
        return self.mechanism(clamped_layer(self.config, layer)).structure(length, self.config.causal)

    def parameter_views(self, *, length: int, train_length: int, layer: int) -> list[LayerView]:
        """The position parameters of layer ``layer`` (the last one beyond it): the views of the mechanism it
        hands out, the very ones the Your model page draws for that layer, their words included, with what training
        at ``train_length`` reached where the mechanism can say it (Mechanism.trained_views). A mechanism without a
        view of its own is named in its own words (a Note of its label and description), so the page always has
        something to show."""
        layer = clamped_layer(self.config, layer)
        mechanism = self.mechanism(layer)
        return mechanism.trained_views(length, layer, train_length) or [Note(mechanism.label(), mechanism.describe())]

    # -- helpers ---------------------------------------------------------------------------

    def offsets_shown(self, length: int) -> np.ndarray:
        """Offsets a per-offset view covers: −(L − 1)..0 causal, −(L − 1)..L − 1 bidirectional."""
        return np.arange(-(length - 1), 1 if self.config.causal else length)


def clamped_layer(config: SchemeConfig, layer: int) -> int:
    """The layer that stands for ``layer``: itself, or the model's last one where ``layer`` is past them (a layer
    a page keeps from a deeper model it showed before). The one place the pages and the views clamp a layer."""
    return min(layer, config.n_layers - 1)


def detached(t: torch.Tensor) -> np.ndarray:
    """A parameter as a float32 numpy array on the CPU."""
    return t.detach().to("cpu", torch.float32).numpy()
