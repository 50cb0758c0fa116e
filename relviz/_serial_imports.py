"""One thread at a time runs relviz's own module imports (installed by ``import relviz``).

A freshly started app server runs many sessions' first page at once, each in its own thread, and
each page imports relviz modules that import one another. Python's per-module import locks let two
threads enter that graph from different ends; where it has cycles, one thread then meets a module
another is still initialising ("cannot import name ... from partially initialized module
'relviz.training.loop'"). Taking one process-wide lock before any relviz import that is not already
complete closes that window: the first thread imports the whole group it needs, the others wait
for it, then find every module complete. The lock is taken before any module lock (in
``__import__``), so it cannot deadlock with them; imports of finished modules skip it.
"""
from __future__ import annotations

import builtins
import sys
import threading

_LOCK = threading.RLock()
_original_import = builtins.__import__


def _complete(name: str) -> bool:
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _serial_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and (name == "relviz" or name.startswith("relviz.")):
        wanted = [name] + [f"{name}.{item}" for item in fromlist or () if item != "*"]
        if not all(_complete(part) or (part != name and hasattr(sys.modules.get(name), part.rsplit(".", 1)[1]))
                   for part in wanted):
            with _LOCK:
                return _original_import(name, globals, locals, fromlist, level)
    return _original_import(name, globals, locals, fromlist, level)


def install() -> None:
    """Route imports through the lock (idempotent)."""
    if builtins.__import__ is not _serial_import:
        builtins.__import__ = _serial_import
