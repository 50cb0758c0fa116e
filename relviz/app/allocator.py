"""glibc's allocator, tuned for a long-lived server with many short threads (Linux; a no-op elsewhere).

Streamlit runs every script run in a thread of its own. glibc gives threads separate malloc arenas
(up to 8 per core) and hands freed memory back to the system only from the top of each heap, so
after a class leaves, the memory its figures and arrays used stays resident, scattered over many
arenas. glibc's manual names both remedies: fewer arenas (``mallopt(M_ARENA_MAX)``, the
``MALLOC_ARENA_MAX`` environment variable) and ``malloc_trim(0)``, which returns the free pages
inside every arena. app.py starts both once per server process.

Kept because it still matters after issue 23's other changes (measured 26 Nov 2026 on 2 shared
cores at load 5-11; ``python tests/memory_fill.py 12 24``: every page at its heaviest, then 72 heavy
views 24 at once over websocket, 36 MB in st.cache_data; server RSS 12 s after the sessions closed):
**668 and 684 MB with it, 737 and 751 MB without** (app.py's start_trimming() call removed), 68 MB
(9 %) less; 10 at once (``12 10``) 671 / 689 against 699 / 700 MB. With ``MALLOC_ARENA_MAX=2`` in
the environment as well, 575 MB with it against 633 MB without.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import threading

__all__ = ["limit_arenas", "trim", "start_trimming"]

#: mallopt's parameter number for the arena limit (glibc's malloc.h: #define M_ARENA_MAX -8).
M_ARENA_MAX = -8
#: Arenas the server's threads share (the same as MALLOC_ARENA_MAX=2).
ARENAS = 2
#: Seconds between two trims: a trim walks the free chunks only, outside Python's GIL.
TRIM_EVERY_S = 10.0

_LOCK = threading.Lock()
_TRIMMER: threading.Thread | None = None


@functools.cache
def _libc():
    """glibc, or None (musl, macOS, Windows have no mallopt/malloc_trim of this kind). Looked up once:
    find_library runs ldconfig in a subprocess."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - both must exist
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(count: int = ARENAS) -> bool:
    """Let new threads share at most ``count`` arenas; True when glibc took it. Left alone when the
    operator set MALLOC_ARENA_MAX (glibc read it at start)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, int(count)) == 1)


def trim() -> bool:
    """Return the free pages of every arena to the system; True when glibc released any."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0) == 1)


def start_trimming(every_s: float = TRIM_EVERY_S) -> threading.Thread | None:
    """Limit the arenas and trim every ``every_s`` seconds in one daemon thread per process (later
    calls return the same thread). None without glibc."""
    global _TRIMMER
    with _LOCK:
        if _TRIMMER is not None:
            return _TRIMMER
        if _libc() is None:
            return None
        limit_arenas()
        halt = threading.Event()

        def loop() -> None:
            while not halt.wait(every_s):
                trim()

        _TRIMMER = threading.Thread(target=loop, name="relviz-malloc-trim", daemon=True)
        _TRIMMER.start()
        return _TRIMMER
