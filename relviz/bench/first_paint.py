"""Bench section ``first_paint``: a fresh visitor's first page, relviz vs a minimal Streamlit + Plotly app.

Each round starts a fresh server (loopback, a free port) for relviz's app.py and for a minimal app
(a title, a sentence and one Plotly heatmap: what someone would write instead), then opens the
landing page in a fresh Chromium context and waits until the title and the first chart have been
drawn. Measured, per app:

- ``cold``: server started and healthy -> first chart drawn, for the server's first visitor (the
  page's imports happen during this visit);
- ``warm``: the same for a second, fresh visitor (new browser context) of the same server;
- what the websocket brought until then (messages, bytes): one message per element drawn, so this
  counts what the browser renders besides the chart, and it does not depend on machine load.

The two apps alternate within each round, so machine load hits both alike; the ratio of the
medians is the figure. Needs Playwright and Chromium (requirements-dev.txt, Debian's chromium).
Not measured with ``--quick`` (the CI smoke run): run ``python -m relviz bench --only first_paint``.
"""
from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relviz.bench.report import Column, SectionResult, Target, ms

REPO = Path(__file__).resolve().parents[2]
TARGET_RATIO = 1.2

MINIMAL_APP = '''
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="minimal", layout="wide")
st.title("A minimal Streamlit + Plotly app")
st.write("One heatmap of j - i, the picture a first page would show.")
n = 7
st.plotly_chart(go.Figure(go.Heatmap(z=[[j - i for j in range(n)] for i in range(n)])))
'''

#: The page has drawn: a title and at least one Plotly chart holding data.
DRAWN_JS = """() => !!document.querySelector('h1') && Array.from(document.querySelectorAll('.js-plotly-plot'))
  .some(div => div.data && div.data.length > 0)"""


def unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "first paint: needs playwright (pip install -r requirements-dev.txt)"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "first paint: needs Chromium (apt-get install chromium)"
    if not (REPO / "app.py").exists():
        return "first paint: needs a checkout of the repository (app.py), not an installed package"
    return None


def launch_chromium(playwright):
    """Debian's Chromium, headless, as every browser bench section runs it."""
    return playwright.chromium.launch(
        executable_path=shutil.which("chromium") or shutil.which("chromium-browser"),
        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


@contextlib.contextmanager
def _server(script: Path, cwd: Path, timeout_s: float = 120.0) -> Iterator[tuple[str, float]]:
    """A fresh headless server for ``script``; yields (base URL, seconds until healthy)."""
    from relviz.bench.class_servers import free_port, stopping, wait_healthy

    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless=true",
               "--server.address=127.0.0.1", f"--server.port={port}", "--browser.gatherUsageStats=false",
               "--server.fileWatcherType=none"]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    with stopping(process):
        wait_healthy(process, base, f"streamlit for {script}", timeout_s, poll_s=0.05)  # fine polls: it times the start
        yield base, time.perf_counter() - started


#: Installed before the page loads: counts the websocket's messages and their bytes.
COUNT_MESSAGES_JS = """(() => {
  window.__relvizMessages = 0;
  window.__relvizBytes = 0;
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    socket.addEventListener('message', event => {
      const data = event.data;
      window.__relvizMessages += 1;
      window.__relvizBytes += data.byteLength ?? data.size ?? data.length ?? 0;
      window.__relvizLast = performance.now();   // when the last message came (the slider bench)
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();"""


def _visit(browser, base: str, timeout_s: float = 120.0) -> tuple[float, int, int]:
    """(seconds from navigation to the first drawn chart, websocket messages and bytes by then), in a
    fresh browser context. Counting the messages is the same few lines of JavaScript for both apps."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(COUNT_MESSAGES_JS)
        started = time.perf_counter()
        page.goto(base + "/", wait_until="commit")
        page.wait_for_function(DRAWN_JS, timeout=timeout_s * 1000, polling=20)
        seconds = time.perf_counter() - started
        messages, received = page.evaluate("() => [window.__relvizMessages, window.__relvizBytes]")
        return seconds, int(messages), int(received)
    finally:
        context.close()


def measure(rounds: int, log=lambda message: None) -> dict[str, Any]:
    """Cold and warm first paint of both apps over ``rounds`` alternating rounds: seconds per visit, and
    (websocket messages, bytes) per visit under ``cold_ws`` / ``warm_ws``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # unavailable() says so first; this keeps a direct call honest too
        raise ImportError("first paint needs playwright: pip install -r requirements-dev.txt") from exc

    times: dict[str, dict[str, list]] = {app: {"cold": [], "warm": [], "start": [], "cold_ws": [], "warm_ws": []}
                                         for app in ("relviz", "minimal")}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        minimal = Path(tmp) / "minimal_app.py"
        minimal.write_text(MINIMAL_APP)
        browser = launch_chromium(playwright)
        try:
            for round_ in range(rounds):
                order = [("relviz", REPO / "app.py", REPO), ("minimal", minimal, Path(tmp))]
                for name, script, cwd in order if round_ % 2 == 0 else order[::-1]:
                    log(f"first paint: round {round_ + 1}/{rounds}, {name}")
                    with _server(script, cwd) as (base, start_s):
                        times[name]["start"].append(start_s)
                        for visit in ("cold", "warm"):
                            seconds, messages, received = _visit(browser, base)
                            times[name][visit].append(seconds)
                            times[name][f"{visit}_ws"].append((messages, received))
        finally:
            browser.close()
    return times


def _ms_or_dash(ms):
    return lambda seconds: "-" if seconds is None else ms(seconds)


def _median_pair(pairs: list[tuple[int, int]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _messages_text(pair) -> str:
    return "-" if pair is None else f"{pair[0]:.0f} ({pair[1] / 1e3:.1f} KB)"


def first_paint_section(ctx):
    title = "First paint: a fresh visitor's landing page in Chromium, relviz vs a minimal Streamlit + Plotly app"
    reason = unavailable()
    if reason:
        return SectionResult(name="first_paint", title=title, columns=[], rows=[], notes=[reason])
    columns = [Column("visit", "visit"), Column("relviz_s", "relviz ms", _ms_or_dash(ms)),
               Column("minimal_s", "minimal app ms", _ms_or_dash(ms)),
               Column("ratio", "relviz / minimal", lambda x: "-" if x is None else f"{x:.2f}x"),
               Column("relviz_ws", "relviz messages (KB)", _messages_text),
               Column("minimal_ws", "minimal messages (KB)", _messages_text)]
    if ctx.quick:  # two fresh servers and Chromium cost a minute on a loaded machine: not a smoke test
        return SectionResult(name="first_paint", title=title, columns=columns,
                             rows=[{"visit": "not measured with --quick", "relviz_s": None, "minimal_s": None,
                                    "ratio": None, "relviz_ws": None, "minimal_ws": None}],
                             targets=[Target(f"a fresh visitor's first page within {TARGET_RATIO}x of the minimal "
                                             "app", None, "run without --quick")])
    rounds = 5
    times = measure(rounds, ctx.log)
    rows = []
    ratios = {}
    for visit in ("cold", "warm"):
        relviz_s = statistics.median(times["relviz"][visit])
        minimal_s = statistics.median(times["minimal"][visit])
        ratios[visit] = relviz_s / minimal_s
        rows.append({"visit": "server's first visitor" if visit == "cold" else "a later fresh visitor",
                     "relviz_s": relviz_s, "minimal_s": minimal_s, "ratio": ratios[visit],
                     "relviz_ws": _median_pair(times["relviz"][f"{visit}_ws"]),
                     "minimal_ws": _median_pair(times["minimal"][f"{visit}_ws"]),
                     "relviz_all": [round(t, 3) for t in times["relviz"][visit]],
                     "minimal_all": [round(t, 3) for t in times["minimal"][visit]]})
    targets = [Target(f"a fresh visitor's first page within {TARGET_RATIO}x of the minimal app ({visit})",
                      ratios[visit] <= TARGET_RATIO, f"{ratios[visit]:.2f}x") for visit in ("cold", "warm")]
    start = {name: statistics.median(times[name]["start"]) for name in times}
    return SectionResult(
        name="first_paint", title=title,
        columns=columns, rows=rows, targets=targets,
        notes=[f"median of {rounds} alternating rounds; navigation -> title and first Plotly chart drawn; "
               "messages: what the websocket brought by then (one per element drawn; does not depend on load)",
               f"server start to healthy (not counted): relviz {start['relviz'] * 1e3:.0f} ms, "
               f"minimal {start['minimal'] * 1e3:.0f} ms"])
