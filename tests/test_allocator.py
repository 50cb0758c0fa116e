"""relviz.app.allocator: the server's threads share two malloc arenas and free pages go back to the system.

The test frees memory that glibc cannot return by itself (every tenth block of each thread's heap
stays allocated, so no heap has a free top to shrink) and checks that ``trim`` returns most of it.
It runs in a fresh interpreter (its own heaps) and reads the kernel's resident size, not a clock.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from relviz.app import allocator
pytestmark = pytest.mark.skipif(allocator._libc() is None, reason="needs glibc (Linux): a no-op elsewhere")

SCRIPT = textwrap.dedent("""
    import threading
    from relviz.app import allocator
    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    kept = []
    def work():
        blocks = [bytearray(64 * 1024) for _ in range(800)]  # 50 MB per thread, below the mmap threshold
        kept.extend(blocks[::10])
        del blocks

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    before = rss_mb()
    released = allocator.trim()
    print(before, rss_mb(), released)
""")


def test_trim_returns_freed_pages_that_glibc_keeps():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[1])})
    assert result.returncode == 0, result.stderr
    before, after, released = result.stdout.split()
    before, after = float(before), float(after)
    # 4 threads × 50 MB allocated, 90% freed (180 MB) but held by glibc; a trim gives most of it back
    assert before - after > 100, (before, after)
    assert released == "True"


def test_the_trimmer_starts_once_and_limits_arenas(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert allocator.limit_arenas() is True
    first = allocator.start_trimming(every_s=3600)
    assert first is not None and first.daemon and first.is_alive()
    assert allocator.start_trimming() is first


def test_an_operators_malloc_arena_max_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert allocator.limit_arenas() is False
