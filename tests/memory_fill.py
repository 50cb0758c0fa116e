"""The server's memory with its caches full: many distinct heavy views, then nobody.

A server starts (loopback, a free port); every page opens once at its heaviest settings
(load_support.HEAVIEST), then ROUNDS more visits of each page vary the slider the load test moves
(each a new cache entry at the heaviest settings), AT_ONCE sessions at a time over Streamlit's
websocket (no browser). The server's RSS and its caches (/_stcore/metrics) are read at each
stage: started, every page once, caches filled, sessions closed, one allocator-trim period later.
This is the worst case the caches allow at rest (their byte budget filled with the largest
entries), which the load test's few moves do not reach.

Run: python tests/memory_fill.py [ROUNDS=12] [AT_ONCE=10]
(start it as `MALLOC_ARENA_MAX=2 python tests/memory_fill.py` to measure the server with that setting)
"""
from __future__ import annotations

import asyncio
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from browser_support import app_server  # noqa: E402
from cold_start_support import open_session  # noqa: E402
from load_support import HEAVIEST, active_sessions, cache_sizes, server_process  # noqa: E402
from relviz.app.allocator import TRIM_EVERY_S  # noqa: E402

#: The slider each round varies, and its value in round r (within the control's range).
VARY = {"shaw": lambda r: f"sh_clip={64 - r}", "t5": lambda r: f"t5_nb={128 - 2 * r}",
        "absolute": lambda r: f"abs_heads={32 - r}", "rope": lambda r: f"rp_L={256 - 8 * r}",
        "attention": lambda r: f"at_seed={r}", "skew": lambda r: f"skew_seed={r}"}
PAGES = ["home", "shaw", "t5", "skew", "absolute", "rope", "attention", "your_model", "experiments", "check", "tour"]


def visits(rounds: int) -> list[tuple[str, str]]:
    return [(page, "&".join(q for q in (HEAVIEST.get(page, ""), VARY[page](r)) if q))
            for r in range(1, rounds + 1) for page in VARY]


async def open_all(base: str, plan: list[tuple[str, str]], at_once: int) -> list[str]:
    gate = asyncio.Semaphore(at_once)

    async def one(page: str, query: str) -> str:
        async with gate:
            seen = await open_session(base, page, query, timeout_s=600)
            return f"{page}?{query}: {seen.failure or seen.exceptions}" if seen.failure or seen.exceptions else ""

    return [p for p in await asyncio.gather(*(one(page, query) for page, query in plan)) if p]


def main(rounds: int = 12, at_once: int = 10) -> None:
    def report(stage: str) -> None:
        print(f"{stage:32} RSS {process.memory_info().rss / 2**20:6.0f} MB  caches {cache_sizes(base)}  "
              f"load {tuple(round(x, 1) for x in psutil.getloadavg())}", flush=True)

    with app_server() as base:
        process = server_process(urllib.parse.urlsplit(base).port)
        report("started")
        problems = asyncio.run(open_all(base, [(page, HEAVIEST.get(page, "")) for page in PAGES], at_once))
        report("every page once, heaviest")
        plan = visits(rounds)
        problems += asyncio.run(open_all(base, plan, at_once))
        report(f"{len(plan)} more heavy views")
        for _ in range(60):
            if active_sessions(base) == 0:
                break
            time.sleep(1)
        report("sessions closed")
        time.sleep(TRIM_EVERY_S + 2)
        report("one trim period later")
    print("problems:", problems or "none")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
