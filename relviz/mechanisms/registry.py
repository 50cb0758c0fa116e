"""The registry of position mechanisms: every module of :mod:`relviz.mechanisms` is imported, and every
:class:`~relviz.mechanisms.base.Mechanism` subclass it defines with a ``name`` is registered.

It lives here, not in the package's ``__init__``: Python holds a module's lock while it loads the
module's parent package, so a package body that imported its own modules would close an import cycle
(tests/test_library_imports.py).
"""
from __future__ import annotations

import importlib
import pkgutil

import relviz.mechanisms as _package

from relviz.mechanisms.base import Mechanism

__all__ = ["MECHANISMS", "get_mechanism"]


def _discover() -> dict[str, type[Mechanism]]:
    found: dict[str, type[Mechanism]] = {}
    for info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda m: m.name):
        if info.name == "registry":  # this module
            continue
        module = importlib.import_module(f"{_package.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Mechanism) and obj.__module__ == module.__name__ \
                    and obj.name:
                if obj.name in found:
                    raise RuntimeError(f"mechanism {obj.name!r} is defined twice: in {found[obj.name].__module__} "
                                       f"and {module.__name__}")
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


#: mechanism name -> its class, in listing order.
MECHANISMS: dict[str, type[Mechanism]] = _discover()


def get_mechanism(name: object) -> type[Mechanism]:
    if not isinstance(name, str) or name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]
