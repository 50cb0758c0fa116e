"""The registry of position mechanisms, relviz's one registry of position concepts: every module of
:mod:`relviz.mechanisms` is imported, and every :class:`~relviz.mechanisms.base.Mechanism` subclass it defines
with a ``name`` is registered, once. The plan reader builds a real model's layers from it (the family table
names its entries), each toy scheme hands out one of its classes (``Scheme.concept``) and runs it, and the
Your model page draws a concept's views from its mechanism (the Live attention page's parameter views are built
by the same mechanism modules' functions).

It lives here, not in the package's ``__init__``: Python holds a module's lock while it loads the
module's parent package, so a package body that imported its own modules would close an import cycle
(tests/test_library_imports.py).
"""
from __future__ import annotations

import relviz.mechanisms as _package
from relviz._registry import discover_subclasses
from relviz.mechanisms.base import Mechanism

__all__ = ["MECHANISMS", "get_mechanism"]

#: mechanism name -> its class, in listing order.
MECHANISMS: dict[str, type[Mechanism]] = discover_subclasses(_package, Mechanism, registry="registry",
                                                             what="mechanism")


def get_mechanism(name: object) -> type[Mechanism]:
    if not isinstance(name, str) or name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]
