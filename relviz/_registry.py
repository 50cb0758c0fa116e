"""Registries that find their entries: every module of a package is imported and each subclass of a
base class it defines with a ``name`` is collected (relviz.schemes.registry, relviz.mechanisms.registry).

The registry is a module of the package, not its ``__init__`` (see relviz/_lazy.py for why).
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")


def discover_subclasses(package: ModuleType, base: type[T], *, registry: str, what: str) -> dict[str, type[T]]:
    """name -> class for every subclass of ``base`` with a ``name`` defined in a module of ``package`` (its
    module ``registry``, the caller, is skipped), in (``order``, name) order; RuntimeError naming ``what``
    (e.g. "scheme") when two classes share a name."""
    found: dict[str, type[T]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name == registry:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, base) and obj.__module__ == module.__name__ and obj.name:
                if obj.name in found:
                    raise RuntimeError(f"{what} {obj.name!r} is defined twice: in {found[obj.name].__module__} "
                                       f"and {module.__name__}")
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))
