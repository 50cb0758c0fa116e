"""The live Measure's child process: one thread, an address-space cap, low priority, and it dies with
the process that started it (before: every core, ~1.6 GB, and it outlived a killed server)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from relviz.experiments import bounded_child as _bounded_child
from relviz.experiments.bounded_child import CHILD_ADDRESS_SPACE, run_bounded

REPO = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and RLIMIT_AS are Linux")


@linux_only
def test_the_child_runs_with_one_thread_a_memory_cap_low_priority_and_a_parent_death_signal():
    probe = textwrap.dedent("""
        import ctypes, json, os, resource, torch
        libc = ctypes.CDLL(None); sig = ctypes.c_int()
        libc.prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG
        print(json.dumps({"threads": torch.get_num_threads(), "as": resource.getrlimit(resource.RLIMIT_AS)[0],
                          "nice": os.nice(0), "pdeathsig": sig.value}))
    """)
    proc = run_bounded([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    lowest = 19  # the kernel caps nice at 19: a test run started under nice 10 or more sees 19, not its own + 10
    assert seen == {"threads": 1, "as": CHILD_ADDRESS_SPACE, "nice": min(os.nice(0) + 10, lowest),
                    "pdeathsig": signal.SIGKILL}


@linux_only
def test_an_allocation_over_the_cap_fails_in_the_child_not_the_server():
    hog = "import numpy; a = numpy.ones(3 << 30, dtype=numpy.uint8); print('allocated')"
    proc = run_bounded([sys.executable, "-c", hog], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "MemoryError" in proc.stderr and "allocated" not in proc.stdout


def test_a_child_past_its_time_limit_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(_bounded_child, "CHILD_MAX_SECONDS", 1.0)
    proc = run_bounded([sys.executable, "-c", "import time; time.sleep(60)"], capture_output=True, text=True)
    assert proc.returncode == -9 and "stopped after 1 s" in proc.stderr


@linux_only
def test_the_child_dies_with_its_parent():
    """A stand-in server starts a bounded child and is killed with SIGKILL: the child goes too."""
    server = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from relviz.experiments.bounded_child import run_bounded
        run_bounded([sys.executable, "-c", "import time; time.sleep(600)"])
    """)
    parent = subprocess.Popen([sys.executable, "-c", server])
    try:
        child = None
        for _ in range(600):  # until the launcher has exec'd the sleeping child (bounded, not timed)
            children = psutil.Process(parent.pid).children()
            if children and "time.sleep(600)" in " ".join(children[0].cmdline()):
                child = children[0]
                break
            time.sleep(0.1)
        assert child is not None, "the bounded child did not start"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs([child], timeout=60)
        assert child in gone and not alive, "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
