"""Python's cyclic garbage collector, for a server whose heap is mostly modules that never go away.

Exists because a full collection walks every tracked object, and in a relviz server most of them belong to
torch, pandas, plotly and Streamlit, loaded once and kept for the process's life. Streamlit runs one full
collection after every script run (``runner.postScriptGC``, on by default), and it walked all of them to
find a few cycles: 50-180 ms of server CPU per run, more than any page's own work (``python -m relviz bench
--only class``, 27 Nov 2026: Shaw's first run 182 -> 36 ms, a move 220 -> 64 ms; docs/DEPLOY.md).
:func:`freeze_new_modules`, called by app.py after each run, moves what is alive into the collector's
permanent generation (``gc.freeze()``, after a collection) whenever the run imported modules, so later
collections, Streamlit's after each run included, walk only what runs and sessions create. (Turning
``runner.postScriptGC`` off instead saved as much in a run, but left Python's own full collections walking
the modules during the runs: 16 ms a move.)

What it costs: an object alive at a freeze and later garbage only through a reference cycle is never
collected. Freezes happen only when the set of imported modules grew (a page's first visit on this server:
about a dozen times in a process's life), so what can stay is bounded by what was alive then.
"""
from __future__ import annotations

import gc
import sys
import threading

__all__ = ["freeze_new_modules"]

_LOCK = threading.Lock()
_FROZEN_AT = [0]   # how many modules were imported at the last freeze


def freeze_new_modules() -> bool:
    """After a run: when modules were imported since the last freeze, collect once and freeze what is alive
    (True); otherwise do nothing (False, the common case: one length comparison)."""
    if len(sys.modules) <= _FROZEN_AT[0]:
        return False
    with _LOCK:
        count = len(sys.modules)
        if count <= _FROZEN_AT[0]:
            return False
        gc.collect()
        gc.freeze()
        _FROZEN_AT[0] = count
    return True
