"""Part 3 of ``python -m relviz bench --only class`` (relviz.bench.class_load): the class itself.

Exists apart from the per-page costs so each module keeps one job: here the servers of one layout are
started (one process, or one per core behind nginx), each opened once (the teacher's tab), the students'
process is started on the clients' core, a few Chromium tabs open the same link meanwhile, and the answers
are summed up (percentiles, errors, isolation, the servers' CPU and peak memory, the load average).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from relviz.bench.class_load import ARTIFACTS, CONTROLS, _settle, cores
from relviz.bench.class_servers import REPO, app_process, cookie_secret, nginx

__all__ = ["run_class"]


class _Watch(threading.Thread):
    """Samples the servers' memory (RSS, with their children) until stopped; CPU read at the ends."""

    def __init__(self, processes) -> None:
        super().__init__(daemon=True)
        import psutil

        self.processes = [psutil.Process(p.pid) for p in processes]
        self.peak_each = [0] * len(self.processes)
        self.halt = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.halt.wait(0.25):
            for n, proc in enumerate(self.processes):
                try:
                    rss = sum(p.memory_info().rss for p in (proc, *proc.children(recursive=True)))
                except psutil.Error:
                    continue
                self.peak_each[n] = max(self.peak_each[n], rss)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=5)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _tabs(base: str, page: str, query: str, count: int, shots: Path, log) -> list[dict[str, Any]]:
    """``count`` Chromium tabs open the link: seconds to the first drawn chart, what they show."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [{"error": "playwright is not installed"}]
    from relviz.bench.first_paint import launch_chromium

    drawn_js = ("() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(d => d.data && d.data.length)"
                " || !!document.querySelector('canvas')")
    state_js = ("() => ({plotly: Array.from(document.querySelectorAll('.js-plotly-plot')).filter(d => d.data && "
                "d.data.length).length, canvas: document.querySelectorAll('canvas').length, errors: Array.from("
                "document.querySelectorAll('[data-testid=\"stException\"], [data-testid=\"stAlertContentError\"]'))"
                ".map(e => e.innerText.slice(0, 200))})")
    out = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for n in range(count):
                context = browser.new_context(viewport={"width": 1280, "height": 720})
                page_ = context.new_page()
                started = time.perf_counter()
                row: dict[str, Any] = {"tab": n}
                try:
                    page_.goto(f"{base}/{page}?{query}", wait_until="commit", timeout=120_000)
                    page_.wait_for_function(drawn_js, timeout=120_000, polling=50)
                    row["first_chart_s"] = time.perf_counter() - started
                    page_.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                            timeout=120_000)
                    page_.wait_for_timeout(1500)
                    row |= page_.evaluate(state_js)
                    shot = shots / f"tab-{page}-{n}.png"
                    page_.screenshot(path=str(shot))
                    row["screenshot"] = str(shot.relative_to(REPO))
                except Exception as error:  # noqa: BLE001 - reported
                    row["error"] = f"{type(error).__name__}: {error}"[:300]
                context.close()
                out.append(row)
                log(f"class: tab {n}: {row}")
        finally:
            browser.close()
    return out


def run_class(mode: str, page: str, query: str, options: dict, log) -> dict[str, Any]:
    """One class on ``mode`` ('one': one process; 'per-core': one per server core behind nginx)."""
    import psutil

    from relviz.bench.class_clients import Session

    server_cores, client_core = cores()
    count = 1 if mode == "one" else len(server_cores)
    if mode != "one" and count == 1:
        server_cores = server_cores + [client_core]   # 2 cores: two processes, the second shares the clients' core
        count = 2
    secret = cookie_secret()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(app_process(server_cores[n], env={"STREAMLIT_SERVER_COOKIE_SECRET": secret},
                                                   log=ARTIFACTS / f"server-{mode}-{n}.log"))
                   for n in range(count)]
        for server_base, _ in servers:                  # the teacher's tab on each process (imports, caches)
            async def warm(url: str = server_base) -> None:
                session = Session(url, page, query)
                await session.connect()
                await session.run()
                await session.close()
            asyncio.run(warm())
        if count > 1:
            base, proxy = stack.enter_context(nginx([int(b.rsplit(":", 1)[1]) for b, _ in servers],
                                                    cores=server_cores[:count]))
        else:
            base, proxy = servers[0][0], None
        plan = {"base": base, "page": page, "query": query, "control": CONTROLS[page],
                "students": options["students"], "arrive_s": options["arrive"], "duration_s": options["seconds"],
                "move_every_s": [5.0, 10.0], "seed": 0}
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="relviz-class-")))
        (folder / "plan.json").write_text(json.dumps(plan))
        processes = [p for _, p in servers]
        watch = _Watch(processes)
        cpu_before = [_settle(p) for p in processes]
        load_before = os.getloadavg()
        command = [sys.executable, "-m", "relviz.bench.class_clients", str(folder / "plan.json"),
                   str(folder / "out.json")]
        command = ["taskset", "-c", str(client_core), *command]
        watch.start()
        started = time.perf_counter()
        clients = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(options["arrive"] + 2)
        tabs = _tabs(base, page, query, options["tabs"], ARTIFACTS, log) if options["tabs"] else []
        _, stderr = clients.communicate(timeout=options["seconds"] + options["arrive"] + 600)
        seconds = time.perf_counter() - started
        client_cpu = psutil.Process().children()  # gone by now; its CPU comes from the wait status below
        del client_cpu
        watch.stop()
        cpu_after = [_settle(p, timeout_s=5) for p in processes]
        load_after = os.getloadavg()
        if clients.returncode != 0:
            raise RuntimeError(f"the class clients failed: {stderr.decode()[-2000:]}")
        result = json.loads((folder / "out.json").read_text())
        logs = [(ARTIFACTS / f"server-{mode}-{n}.log").read_text() for n in range(count)]
    students = result["students"]
    first = [s["first_chart_s"] for s in students if s["first_chart_s"] is not None]
    moves = [m["seconds"] for s in students for m in s["moves"]]
    late = [m["late_s"] for s in students for m in s["moves"]]
    errors = [f"student {s['index']}: {e}" for s in students for e in s["errors"]]
    errors += [f"server log {n}: Traceback" for n, text in enumerate(logs) if "Traceback" in text]
    server_cpu = sum(a - b for a, b in zip(cpu_after, cpu_before))
    return {"mode": f"{count} process{'es behind nginx' if count > 1 else ''}", "processes": count,
            "cores": f"server {','.join(map(str, server_cores[:count]))}; clients {client_core}",
            "page": page, "link": query, "students": len(students),
            "first_chart_p50_s": _percentile(first, 0.5), "first_chart_p95_s": _percentile(first, 0.95),
            "first_chart_max_s": max(first, default=None), "first_charts": len(first),
            "move_p50_s": _percentile(moves, 0.5), "move_p95_s": _percentile(moves, 0.95),
            "move_max_s": max(moves, default=None), "moves": len(moves),
            "moves_late_p95_s": _percentile(late, 0.95),
            "errors": errors[:20], "error_count": len(errors),
            "isolation_problems": result["isolation_problems"],
            "server_cpu_s": server_cpu, "server_cpu_per_run_ms": 1e3 * server_cpu / max(1, len(moves) + len(first)),
            "peak_rss_mb_each": [round(b / 2**20) for b in watch.peak_each],
            "seconds": seconds, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after], "tabs": tabs}
