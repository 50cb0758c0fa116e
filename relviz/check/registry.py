"""The check kinds, as data: each kind module registers a ``Kind`` here, and everything that serves
every kind (the command line, ``relviz.check.check``, the results' verdicts, ``relviz.testing``)
looks it up instead of comparing kind names."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """One thing a user's code produces that relviz can check.

    ``check(got, settings)`` compares (``settings`` None: search the bounded grid for them) and returns
    a ``CheckResult``; ``settings`` names the settings it reads; ``labels`` head the three columns of a
    mismatch (row, column, and what the column or offset means); ``max_side`` bounds an upload's side;
    ``on_page``: the Check page offers it (visitors upload its matrix; the page never runs their code).
    ``from_args(args, shape)``: its settings from the command line's flags (shape None: before any
    array exists); ``invoke(fn, settings, length)``: call a user's own function as ``signature`` documents
    and return the array it produced (relviz.check.callables; the command line and the library only).
    """

    name: str
    description: str
    settings: tuple[str, ...]
    check: Callable[[Any, Any], Any]
    labels: tuple[str, str, str] = ("i", "j", "j − i")
    #: The picture's axes: rows, columns.
    axes: tuple[str, str] = ("query position i", "key position j")
    max_side: int = 512
    on_page: bool = True
    #: What to feed or upload, shown beside the upload (empty: nothing to add).
    hint: str = ""
    from_args: Callable[[Any, tuple[int, ...] | None], Any] | None = None
    invoke: Callable[[Callable[..., Any], Any, int], Any] | None = None
    signature: str = ""
    #: ``variant(cause_name, shape, settings)``: the array that named mistake produces (None: not here)
    variant: Callable[[str, tuple[int, ...], Any], Any] | None = None


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if kind.name in REGISTRY:
        raise ValueError(f"check kind {kind.name!r} is registered twice")
    REGISTRY[kind.name] = kind
    return kind


def kind_of(name: object) -> Kind:
    """The registered kind, or ValueError naming the kinds there are."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"kind must be one of {', '.join(REGISTRY)}; got {name!r}")
    return REGISTRY[name]
