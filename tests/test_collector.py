"""relviz.app.collector: after a run that imported modules, what is alive moves to the collector's permanent
generation (later collections skip it), and garbage already in cycles is collected first, not frozen."""
from __future__ import annotations

import gc
import sys
import types
import weakref

from relviz.app import collector


class _Node:
    pass


def test_a_run_that_imported_modules_freezes_after_collecting(monkeypatch):
    monkeypatch.setattr(collector, "_FROZEN_AT", [len(sys.modules)])
    cycle = _Node()
    cycle.me = cycle
    dead = weakref.ref(cycle)
    del cycle                                     # garbage only through its cycle
    kept = _Node()
    monkeypatch.setitem(sys.modules, "relviz_collector_probe", types.ModuleType("relviz_collector_probe"))
    try:
        assert collector.freeze_new_modules() is True
        assert dead() is None                     # collected before the freeze, not kept forever
        assert gc.get_freeze_count() > 0
        assert not gc.is_finalized(kept)
        assert collector.freeze_new_modules() is False   # no new module since: nothing to do
    finally:
        gc.unfreeze()
