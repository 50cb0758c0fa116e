"""Package re-exports loaded on first use (PEP 562), so a package's ``__init__`` imports nothing.

Python holds a module's import lock while it imports that module's parent package. A package whose
``__init__`` imports its own submodules therefore closes a cycle (submodule → package →
submodule), and two threads importing into it from different ends at once (a fresh app server's
first sessions) can deadlock or meet a half-initialised module. With the re-exports resolved
lazily the package body is empty and the import graph stays acyclic (tests/test_library_imports.py).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[
        list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package`` re-exporting, per submodule
    (its name relative to the package), the names listed: ``{"loop": ("train", ...), ...}``."""
    owner = {name: f"{package}.{module}" for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in owner:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(owner[name]), name)

    def __dir__() -> list[str]:
        return sorted(owner)

    __getattr__.exports = dict(owner)  # type: ignore[attr-defined]  # name -> module, for tests/import_graph.py
    return list(owner), __getattr__, __dir__
