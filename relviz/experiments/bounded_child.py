"""Run a measurement child with bounded threads and memory that dies with the process that started it.

The app's live Measure (Experiments page) times attention in a fresh process per case. Unbounded,
that process used every core and up to ~1.6 GB, and outlived a killed server. :func:`run_bounded`
starts it through this module's launcher (``python -m relviz.experiments.bounded_child``), which, before
it execs the real command:

- lowers its priority (nice 10): the server's pages come first;
- caps its address space (RLIMIT_AS): an allocation beyond it fails with MemoryError in the child,
  which exits with an error the caller reports, instead of swapping the server;
- asks Linux to SIGKILL it when its parent dies (prctl PR_SET_PDEATHSIG; kept across exec), and
  exits at once if the parent is already gone.

The thread count is set through the environment (OMP_NUM_THREADS and friends: torch's intra-op
pool honours it). The launcher, not ``preexec_fn``, applies the limits: ``preexec_fn`` is unsafe in
a threaded server. Parent-death signalling is Linux-only; elsewhere the child still has its
limits and the caller's timeout.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

#: Threads of a measurement child: one core stays free for the server.
CHILD_THREADS = 1
#: Address space of a measurement child (bytes). torch's import alone maps ~0.65 GB.
CHILD_ADDRESS_SPACE = 2 << 30
#: Longest a measurement child may run (seconds), whatever the caller asks.
CHILD_MAX_SECONDS = 300.0
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def run_bounded(command: Sequence[str], *, env: dict[str, str] | None = None, timeout: float | None = None,
                threads: int = CHILD_THREADS, address_space: int = CHILD_ADDRESS_SPACE,
                **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, ...)`` with the child bounded as the module docstring says.

    A run past the timeout (at most CHILD_MAX_SECONDS) is killed and returned with returncode -9
    and a message in stderr (no exception), so callers report it like any failed case.
    """
    environment = dict(os.environ if env is None else env)
    environment.update({name: str(threads) for name in _THREAD_VARIABLES})
    launcher = [sys.executable, "-m", "relviz.experiments.bounded_child", str(os.getpid()), str(address_space), "--",
                *command]
    limit = CHILD_MAX_SECONDS if timeout is None else min(timeout, CHILD_MAX_SECONDS)
    try:
        return subprocess.run(launcher, env=environment, timeout=limit, **kwargs)
    except subprocess.TimeoutExpired:
        text = kwargs.get("text") or kwargs.get("universal_newlines")
        message = f"stopped after {limit:.0f} s (the measurement's time limit)"
        return subprocess.CompletedProcess(launcher, -9, "" if text else b"", message if text else message.encode())


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _main(argv: list[str]) -> None:
    parent, address_space, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: python -m relviz.experiments.bounded_child PARENT_PID ADDRESS_SPACE -- COMMAND...")
    import resource

    _die_with_parent(int(parent))
    os.nice(10)
    limit = int(address_space)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(command[0], command)


if __name__ == "__main__":
    _main(sys.argv[1:])
