"""Position mechanisms of real and toy models: one module each, found by this registry.

Every module of this package is imported, and every :class:`~relviz.mechanisms.base.Mechanism` subclass
it defines with a ``name`` is registered. The family table (``families.py``) names mechanisms by these
names; ``relviz.plan.read_plan`` asks each to read itself for each layer. A new mechanism is one new file
here (its ``read``, its math, its words); a family that uses it names it in the table.
"""
from __future__ import annotations

import importlib
import pkgutil

from relviz.mechanisms.base import ConfigView, LayerContext, Mechanism

__all__ = ["Mechanism", "ConfigView", "LayerContext", "MECHANISMS", "get_mechanism"]


def _discover() -> dict[str, type[Mechanism]]:
    found: dict[str, type[Mechanism]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
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
