"""Many users at once: sessions against one relviz server, and the server's memory.

``run_load`` opens ``sessions`` Streamlit sessions spread over the app's pages, holds them all
open, then lets every session move one slider of its page several times at the same moment. The
first ``browsers`` sessions are Chromium tabs (one browser, a few contexts with their own
cookies); the others are websocket sessions (``SocketSession``): they send what a tab sends after
a drag and read what the server answers, without rendering, so 24 sessions cost the server's CPU
and not 24 tabs' (on 2 cores the tabs used to starve the server they were measuring). Each session
checks that its own view follows its own moves and nothing else: a tab checks the slider, the URL
and a redrawn chart; a websocket session checks that each run finished without an exception or
error box and sent changed charts, and that a final rerun with no change still draws the charts
of its own last move (another session's value would draw others). Meanwhile a thread samples the server's resident memory (psutil) and its
``active_sessions`` gauge, and a probe measures the server alone, without a browser: every few
seconds a fresh websocket session runs the landing page (tests/cold_start_support.py), so a slow
answer is the server's, not the browsers' rendering; the websocket sessions' move times are the
server's too. While the sessions move, one more visitor opens the landing page in a fresh
Chromium context: its time to the first drawn chart is the figure a newcomer meets on a loaded
server, and the websocket sessions keep moving until it has it (``load_moves``), so the server is
busy the whole time it waits.

Memory: ``warm_rss`` is read after every page was opened once (websocket sessions, before the
browsers start: the modules and caches every page loads), ``peak_rss`` during the run,
``closed_rss`` when every session closed and the server dropped them, ``rest_rss`` one allocator-trim
period later (relviz.app.allocator). Beside them, what
Streamlit's caches hold (``cache_sizes``: st.cache_data's bytes, st.cache_resource's entries).

Everything is bounded: a fixed number of sessions and moves and per-action timeouts. The run's
deadline is a stall deadline, not a wall clock: it fails only when neither a session nor the
server probe made progress for ``stall_s`` seconds (a stuck server), or at a hard cap far above
any merely slow run (``deadline_s``).

Run directly for a manual look: python tests/load_support.py [SESSIONS]
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import json
import math
import re
import statistics
import sys
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from browser_support import (CHROMIUM_ARGS, PICTURE_DRAWN, PLOT_STATE_JS, REPO, app_server, chromium_path,
                             page_url)
from cold_start_support import ColdSession, read_message
from cold_start_support import open_session as first_visit

#: The slider each page's sessions move (by its widget key); a page not listed uses its first slider.
SLIDERS = {"home": "home_q", "shaw": "sh_clip", "t5": "t5_nb", "skew": "skew_L", "absolute": "abs_heads", "rope": "rp_L",
           "attention": "at_len", "experiments": "ex_thr"}
#: Pages the sessions are not spread over, and why: nothing on their first view is a slider this
#: test can move and check (a select_slider's range input holds the option's index while the URL
#: holds the option).
NOT_MOVED = {"check": "no slider (an upload form)", "tour": "no slider (the tour editor)",
             "your_model": "its only slider on the default model, ym_len, is a select_slider"}
ACTION_TIMEOUT_MS = 120_000
#: A page still without its slider this long after it finished running, and showing an error,
#: counts as unavailable (reported, not moved).
UNAVAILABLE_AFTER_MS = 20_000
#: Chromium keeps background tabs' timers and rendering at full speed: every session is "in front".
BACKGROUND_ARGS = ["--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-smooth-scrolling",
                   "--disable-backgrounding-occluded-windows", "--disable-dev-shm-usage", "--mute-audio"]
#: Pages opened at once while the sessions connect (then all of them move sliders together).
OPENING_AT_ONCE = 4
#: Browser contexts (cookie jars) the sessions are spread over.
CONTEXTS = 4
#: The heaviest settings of each page, as a shared link sets them (RELVIZ_LOAD_HEAVY in tests/test_load.py):
#: the longest matrices with the largest exact window, the longest text, the most positions.
HEAVIEST = {"shaw": "sh_q=8192&sh_k=8192&sh_ws=512", "t5": "t5_q=8192&t5_k=8192&t5_ws=512",
            "absolute": "abs_L=512&abs_d=512&abs_heads=32", "skew": "skew_L=16", "attention": "at_len=256",
            "rope": "rp_len=1048576&rp_L=256"}
#: At most this many further moves per websocket session while a newcomer waits for its first chart.
KEEP_LOADING_MOVES = 40
#: Seconds between two server probes (a websocket session of the landing page, no browser).
PROBE_EVERY_S = 3.0
#: A title and a Plotly chart holding data: the first chart has been drawn.
FIRST_CHART_JS = """() => !!document.querySelector('h1') && Array.from(document.querySelectorAll('.js-plotly-plot'))
  .some(div => div.data && div.data.length > 0)"""

READY_JS = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && document.querySelectorAll('[data-testid="stMainBlockContainer"] *').length > 5"""
ERRORS_JS = """() => Array.from(document.querySelectorAll(
    '[data-testid="stException"], [data-testid="stAlertContentError"]')).map(e => e.innerText.slice(0, 300))"""
SLIDER_KEYS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stElementContainer"]'))
    .filter(e => e.querySelector('[data-testid="stSlider"] input[type="range"]'))
    .map(e => (Array.from(e.classList).find(c => c.startsWith('st-key-')) || '').slice(7))
    .filter(k => k)"""


# ---------------------------------------------------------------------------------------
# The server: its process, its memory, its sessions


def server_process(port: int) -> psutil.Process:
    """The streamlit process app_server started for ``port`` (a child of this process)."""
    for child in psutil.Process().children(recursive=True):
        try:
            if f"--server.port={port}" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    raise RuntimeError(f"no streamlit process for port {port} among this process's children")


def _metrics(base: str, family: str) -> str | None:
    """One family of /_stcore/metrics as text (asking for one family keeps the cache sizing out)."""
    host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
    try:
        connection = http.client.HTTPConnection(host, port, timeout=30)
        connection.request("GET", f"/_stcore/metrics?families={family}")
        text = connection.getresponse().read().decode()
        connection.close()
    except OSError:
        return None
    return text


def active_sessions(base: str | list[str]) -> int | None:
    """Streamlit's active_sessions gauge from /_stcore/metrics (None if unavailable); summed over the
    processes when ``base`` lists several (behind a proxy, which does not pass the metrics on)."""
    if isinstance(base, list):
        counts = [active_sessions(one) for one in base]
        return None if all(c is None for c in counts) else sum(c or 0 for c in counts)
    text = _metrics(base, "active_sessions")
    match = re.search(r"^active_sessions (\d+)", text or "", re.MULTILINE)
    return int(match.group(1)) if match else None


def cache_sizes(base: str | list[str]) -> dict[str, float]:
    """What Streamlit's caches hold: st.cache_data in MB (its pickled entries, what
    server.maxCacheDataSize caps) and the number of st.cache_resource entries (Streamlit sizes those
    only with server.enableExpensiveMemoryStats; relviz bounds them by max_entries)."""
    if isinstance(base, list):                     # several processes: their sums
        each = [cache_sizes(one) for one in base]
        return {key: round(sum(c[key] for c in each), 1) if key == "cache_data_mb" else sum(c[key] for c in each)
                for key in ("cache_data_mb", "cache_resource_entries")}
    text = _metrics(base, "cache_memory_bytes") or ""
    data = sum(float(m.group(1)) for m in re.finditer(r'^cache_memory_bytes\{cache_type="st_cache_data"[^}]*\} (\S+)',
                                                          text, re.MULTILINE))
    resource = sum(float(m.group(1)) for m in re.finditer(
        r'^cache_memory_bytes\{cache_type="st_cache_resource"[^}]*\} (\S+)', text, re.MULTILINE))
    return {"cache_data_mb": round(data / 2**20, 1), "cache_resource_entries": int(resource)}


class Sampler(threading.Thread):
    """Samples the server's RSS (with any children) and its active sessions until stopped."""

    def __init__(self, process: psutil.Process | list[psutil.Process], base: str | list[str],
                 every: float = 0.25) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.processes = process if isinstance(process, list) else [process]   # several: summed
        self.process, self.base, self.every = self.processes[0], base, every
        self.peak_rss = 0
        self.samples: list[tuple[float, int]] = []
        self.max_sessions = 0
        self.max_sessions_each: list[int] = []   # the gauge's peak in each process
        #: pid -> CPU seconds last seen, for the server and for the browser's processes
        self.server_cpu: dict[int, float] = {}
        self.browser_cpu: dict[int, float] = {}
        self._halt = threading.Event()

    def rss(self) -> int:
        total = 0
        for proc in [p for server in self.processes for p in (server, *server.children(recursive=True))]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total

    def run(self) -> None:
        start = time.monotonic()
        tick = 0
        while not self._halt.is_set():
            try:
                value = self.rss()
            except psutil.Error:
                break
            self.peak_rss = max(self.peak_rss, value)
            self.samples.append((round(time.monotonic() - start, 2), value))
            if tick % 4 == 0:  # the metrics endpoint and the CPU counters once a second
                each = [active_sessions(one) for one in (self.base if isinstance(self.base, list) else [self.base])]
                if any(c is not None for c in each):
                    self.max_sessions = max(self.max_sessions, sum(c or 0 for c in each))
                    self.max_sessions_each = [max(m, c or 0) for m, c in zip(self.max_sessions_each or [0] * len(each),
                                                                              each)]
                self.count_cpu()
            tick += 1
            self._halt.wait(self.every)

    def count_cpu(self) -> None:
        """CPU seconds so far of the server and of this test's Chromium processes."""
        server = {p.pid for proc in self.processes for p in (proc, *proc.children(recursive=True))}
        for proc in psutil.Process().children(recursive=True):
            try:
                name = proc.name().lower()
                times = proc.cpu_times()
            except psutil.Error:
                continue
            seconds = times.user + times.system
            if proc.pid in server:
                self.server_cpu[proc.pid] = seconds
            elif "chrom" in name or "headless_shell" in name:
                self.browser_cpu[proc.pid] = seconds

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


# ---------------------------------------------------------------------------------------
# One browser session


class PageUnavailable(RuntimeError):
    """The page shows an error instead of its controls (e.g. a data file it needs is missing)."""


@dataclass
class Move:
    target: int | float
    seconds: float


@dataclass
class SessionReport:
    index: int
    page: str
    slider: str = ""
    start_value: float | None = None
    expected: float | None = None
    shown: float | None = None
    url_value: str | None = None
    moves: list[Move] = field(default_factory=list)
    open_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unavailable: str = ""
    client: str = "browser"  # or "websocket" (SocketSession: the server's side of a tab, no rendering)
    final_charts: tuple[str, ...] = ()
    load_moves: list[Move] = field(default_factory=list)  # websocket moves after the counted ones

    @property
    def ok(self) -> bool:
        return not self.errors and not self.problems


def _targets(start: float, lo: float, hi: float, step: float, local: int, moves: int) -> list[float]:
    """Values this session sets, one per move: a walk of a few steps from the start whose end differs
    from the other sessions' on the same page (local = the session's index among them), kept inside
    [lo, hi]: the first move goes local + 1 steps, every later one a step further."""
    direction = 1 if start + (local + moves) * step <= hi else -1
    deltas = [local + 1] + [1] * (moves - 1)
    values, value = [], start
    for delta in deltas:
        new = min(max(value + direction * delta * step, lo), hi)
        if new == value:  # would not change anything: go the other way
            new = min(max(value - direction * step, lo), hi)
        values.append(new)
        value = new
    return values


def _number(text: str) -> float:
    value = float(text)
    return int(value) if value.is_integer() else value


async def _wait_ready(page, timeout_ms: int = ACTION_TIMEOUT_MS) -> None:
    await page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    await page.wait_for_function(READY_JS, timeout=timeout_ms)


async def open_session(context, base: str, info, report: SessionReport, query: str = ""):
    """A new tab (its own websocket: its own Streamlit session) on ``info``'s page, ready to move."""
    page = await context.new_page()
    page.on("pageerror", lambda error: report.errors.append(f"javascript: {error}"[:300]))
    started = time.perf_counter()
    url = page_url(base, info.path, info.default) + (f"?{query}" if query else "")
    await page.goto(url, timeout=ACTION_TIMEOUT_MS)
    await _wait_ready(page)
    name = Path(info.path).stem
    key = SLIDERS.get(name)
    if key is None:
        try:
            await page.wait_for_selector('[data-testid="stSlider"] input[type="range"]', timeout=UNAVAILABLE_AFTER_MS)
        except Exception:  # noqa: BLE001 - a page without any slider (the checker, the tour editor): nothing to move
            raise PageUnavailable(f"{name}: the page has no slider to move") from None
        keys = await page.evaluate(SLIDER_KEYS_JS)
        if not keys:
            raise RuntimeError(f"{name}: no keyed slider on the page")
        key = keys[0]
    report.slider = key
    try:
        await page.wait_for_selector(f'.st-key-{key} input[type="range"]', timeout=UNAVAILABLE_AFTER_MS)
    except Exception:  # noqa: BLE001 - not there (yet?): a page that explains why is unavailable, not broken
        messages = await page.evaluate(ERRORS_JS)
        if messages:
            raise PageUnavailable(f"{name}: no slider {key}; the page says: {messages[0][:200]}") from None
        await page.wait_for_selector(f'.st-key-{key} input[type="range"]', timeout=ACTION_TIMEOUT_MS)
    await page.wait_for_selector(PICTURE_DRAWN, timeout=ACTION_TIMEOUT_MS)
    report.open_seconds = time.perf_counter() - started
    return page


async def move_slider(page, report: SessionReport, local: int, moves: int) -> None:
    """Move the session's slider ``moves`` times; after each, wait for the URL and a redrawn chart."""
    key = report.slider
    slider = page.locator(f'.st-key-{key} input[type="range"]')
    lo = _number(await slider.get_attribute("min") or "0")
    hi = _number(await slider.get_attribute("max") or "100")
    step = _number(await slider.get_attribute("step") or "1")
    value = _number(await slider.input_value())
    report.start_value = value
    for target in _targets(value, lo, hi, step, local, moves):
        before = await page.evaluate(PLOT_STATE_JS)
        presses = round(abs(target - value) / step)
        key_name = "ArrowRight" if target > value else "ArrowLeft"
        started = time.perf_counter()
        await slider.focus()
        for _ in range(presses):
            await page.keyboard.press(key_name)
        expected = f"{target:g}"
        # A URL-bound widget at its default value is left out of the URL.
        await page.wait_for_function(
            """([key, expected, fallback, before]) => {
                const params = new URLSearchParams(location.search);
                const input = document.querySelector(`.st-key-${key} input[type="range"]`);
                const same = (a, b) => a !== null && a !== undefined && Math.abs(Number(a) - Number(b)) < 1e-9;
                const inUrl = same(params.get(key), expected) || (params.get(key) === null && same(expected, fallback));
                return inUrl && input && same(input.value, expected)
                    && !document.querySelector('[data-testid="stStatusWidget"]')
                    && (%s)() !== before;
            }""" % PLOT_STATE_JS, arg=[key, expected, f"{report.start_value:g}", before],
            timeout=ACTION_TIMEOUT_MS, polling=100)
        report.moves.append(Move(target, round(time.perf_counter() - started, 3)))
        value = target
    report.expected = value


async def check_own_view(page, report: SessionReport) -> None:
    """After everyone moved: this session still shows exactly its own last value, and no error."""
    await _wait_ready(page)
    await page.wait_for_timeout(500)
    slider = page.locator(f'.st-key-{report.slider} input[type="range"]')
    report.shown = _number(await slider.input_value())
    report.url_value = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get(report.slider, [None])[0]
    if not math.isclose(report.shown, report.expected, abs_tol=1e-9):
        report.problems.append(f"slider shows {report.shown}, this session set {report.expected}")
    in_url = report.url_value is not None and math.isclose(float(report.url_value), report.expected, abs_tol=1e-9)
    at_default = report.url_value is None and math.isclose(report.expected, report.start_value, abs_tol=1e-9)
    if not (in_url or at_default):
        report.problems.append(f"URL says {report.slider}={report.url_value}, this session set {report.expected:g}")
    report.errors += [f"error box: {text}" for text in await page.evaluate(ERRORS_JS)]


# ---------------------------------------------------------------------------------------
# One websocket session: what a browser tab sends and receives, without the browser


class SocketSession:
    """A Streamlit session driven over its websocket the way a tab drives it (no browser, no rendering).

    It opens a page as a deep link, then moves a slider by sending the rerun a browser sends after a
    drag (the slider's new value as its widget state). What it checks is what the server owes a tab:
    the run finished, it drew no exception box and no error, and the charts it sent changed; at the
    end, a rerun without any widget change still draws the charts of this session's own last move
    (state from another session would draw other charts). Like a tab's address bar (Streamlit's
    frontend writes a bound widget's value into the URL and leaves it out at its default), its
    query string follows its moves and goes with every rerun: a stale link value would be seeded
    back into the widget.
    """

    #: Runs finished by every SocketSession so far (the load a newcomer met).
    runs_finished = 0

    def __init__(self, base: str, page: str, query: str) -> None:
        self.url = base.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.page, self.query = page, query
        self.page_hash = ""
        self.sliders: dict[str, object] = {}  # query_param_key -> Slider proto
        self.charts: tuple[str, ...] = ()     # digests of the charts (plotly, canvas) of the last run, in order
        self.socket = None

    def set_query_value(self, key: str, value: float, *, default: float) -> None:
        """What the frontend does to the address bar after a bound widget changed."""
        params = [(k, v) for k, v in urllib.parse.parse_qsl(self.query, keep_blank_values=True) if k != key]
        if not math.isclose(value, default, abs_tol=1e-9):
            params.append((key, f"{value:g}"))
        self.query = urllib.parse.urlencode(params)

    async def connect(self) -> None:
        import websockets

        self.socket = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None,
                                               open_timeout=ACTION_TIMEOUT_MS / 1000)

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()

    async def run(self, widget=None) -> ColdSession:
        """One script run (the first visit, or a rerun with ``widget``, a WidgetState, changed)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        request = BackMsg()
        request.rerun_script.query_string = self.query
        request.rerun_script.page_name = self.page
        request.rerun_script.page_script_hash = self.page_hash
        if widget is not None:
            request.rerun_script.widget_states.widgets.append(widget)
        seen = ColdSession(self.page, self.query)
        charts: list[str] = []
        started = time.perf_counter()
        await self.socket.send(request.SerializeToString())
        async with asyncio.timeout(ACTION_TIMEOUT_MS / 1000):
            while not seen.finished.startswith("FINISHED"):
                message = ForwardMsg.FromString(await self.socket.recv())
                read_message(message, seen)
                kind = message.WhichOneof("type")
                if kind == "navigation":
                    self.page_hash = message.navigation.page_script_hash
                elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                    element = message.delta.new_element
                    if element.WhichOneof("type") == "plotly_chart":
                        charts.append(chart_digest(element.plotly_chart.spec))
                    elif element.WhichOneof("type") == "bidi_component" and element.bidi_component.json:
                        # relviz's canvas pictures (large Toeplitz windows) are charts too: their data
                        charts.append(chart_digest(element.bidi_component.json))
                    elif element.WhichOneof("type") == "slider" and element.slider.query_param_key:
                        self.sliders[element.slider.query_param_key] = element.slider
        seen.seconds = time.perf_counter() - started
        self.charts = tuple(charts)
        SocketSession.runs_finished += 1
        return seen


def chart_digest(spec: str) -> str:
    """A chart's content, whatever the order of its JSON keys (a figure from st.cache_data is an
    unpickled copy whose keys may come in another order than the freshly drawn one's)."""
    return hashlib.sha1(json.dumps(json.loads(spec), sort_keys=True).encode()).hexdigest()


def _socket_problems(seen: ColdSession, what: str) -> list[str]:
    problems = [f"{what}: exception box {text}" for text in seen.exceptions]
    problems += [f"{what}: error box {text}" for text in seen.errors]
    if seen.finished != "FINISHED_SUCCESSFULLY":
        problems.append(f"{what}: the run ended {seen.finished}")
    return problems


async def open_socket_session(base: str, info, report: SessionReport, query: str = "") -> SocketSession:
    """A websocket session on ``info``'s page, opened as a deep link, with the slider it will move."""
    name = Path(info.path).stem
    session = SocketSession(base, name, query)
    await session.connect()
    seen = await session.run()
    report.open_seconds = seen.seconds
    report.errors += _socket_problems(seen, "open")
    key = SLIDERS.get(name) or next((k for k, s in session.sliders.items()
                                     if s.data_type in (s.INT, s.FLOAT) and not s.options), None)
    if key not in session.sliders:
        await session.close()
        raise PageUnavailable(f"{name}: no slider {key}; the page says: {(seen.errors or ['nothing'])[0][:200]}")
    if not session.charts:
        report.problems.append("open: no chart drawn")
    report.slider = key
    return session


async def move_socket_slider(session: SocketSession, report: SessionReport, local: int, moves: int,
                             keep_loading: asyncio.Event | None = None) -> None:
    """Move the session's slider ``moves`` times, as a drag does; each run must redraw the charts.
    Then, until ``keep_loading`` is set (a newcomer got its first chart) and for at most
    KEEP_LOADING_MOVES, keep moving one step at a time (reported apart, as ``load_moves``): the
    newcomer's figure is then measured on a server that is busy the whole time."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    slider = session.sliders[report.slider]
    linked = urllib.parse.parse_qs(session.query).get(report.slider)
    value = _number(linked[-1]) if linked else _number(str(slider.default[0]))
    report.start_value = value
    targets = _targets(value, slider.min, slider.max, slider.step, local, moves)
    direction = 1
    while targets or (keep_loading is not None and not keep_loading.is_set()
                      and len(report.load_moves) < KEEP_LOADING_MOVES):
        if targets:
            target = targets.pop(0)
        else:  # one step further, turning at the ends
            if not slider.min <= value + direction * slider.step <= slider.max:
                direction = -direction
            target = value + direction * slider.step
        before = session.charts
        state = WidgetState(id=slider.id)
        state.double_array_value.data.append(target)
        seen = await session.run(state)
        problems = _socket_problems(seen, f"move to {target:g}")
        if not problems and session.charts == before:
            problems.append(f"move to {target:g}: no chart changed")
        (report.moves if len(report.moves) < moves else report.load_moves).append(Move(target, round(seen.seconds, 3)))
        if problems:
            report.problems += problems
            return
        value = target
        session.set_query_value(report.slider, target, default=slider.default[0])
    report.expected = value
    report.final_charts = session.charts


async def check_socket_view(session: SocketSession, report: SessionReport) -> None:
    """After everyone moved: a rerun with no widget change draws this session's own last charts."""
    seen = await session.run()
    report.errors += _socket_problems(seen, "final check")
    report.shown = report.expected if session.charts == report.final_charts else None
    if session.charts != report.final_charts:
        report.problems.append(f"final check: the charts differ from this session's after its last move "
                               f"({report.slider}={report.expected:g})")


async def run_sessions(base: str, pages, *, sessions: int, moves: int, deadline_s: float, stall_s: float,
                       extra: dict, queries: dict[str, str] | None = None, browsers: int = 3) -> list[SessionReport]:
    """Run the sessions: the first ``browsers`` in Chromium tabs, the others as websocket sessions;
    ``extra`` receives the probe's answers and the fresh visitor's figure."""
    from playwright.async_api import async_playwright

    plan = [(i, pages[i % len(pages)]) for i in range(sessions)]
    local_index = {i: sum(1 for j, p in plan[:i] if p.path == info.path) for i, info in plan}
    reports = [SessionReport(i, Path(info.path).stem, client="browser" if i < browsers else "websocket")
               for i, info in plan]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_path(),
                                                   args=CHROMIUM_ARGS + BACKGROUND_ARGS)
        # A few browser contexts (separate cookie jars), each with one tab per page: two sessions of
        # the same page never share a context, and tabs of one context share the HTTP cache.
        contexts = [await browser.new_context(viewport={"width": 1024, "height": 720})
                    for _ in range(max(1, min(CONTEXTS, browsers)))]
        for context in contexts:  # a busy 2-core machine may need far longer than Playwright's 30 s
            context.set_default_timeout(ACTION_TIMEOUT_MS)
        opened: list = [None] * sessions
        gate = asyncio.Semaphore(OPENING_AT_ONCE)

        async def opener(i, info):
            async with gate:
                try:
                    query = (queries or {}).get(Path(info.path).stem, "")
                    if reports[i].client == "websocket":
                        opened[i] = await open_socket_session(base, info, reports[i], query)
                    else:
                        context = contexts[(i // len(pages)) % len(contexts)]
                        opened[i] = await open_session(context, base, info, reports[i], query)
                except PageUnavailable as error:
                    reports[i].unavailable = str(error)
                except Exception as error:  # noqa: BLE001 - reported per session
                    reports[i].problems.append(f"could not open: {type(error).__name__}: {error}"[:400])

        async def mover(i):
            if opened[i] is None:
                return
            page = opened[i]
            try:
                if reports[i].client == "websocket":
                    await move_socket_slider(page, reports[i], local_index[i], moves, newcomer_done)
                else:
                    await move_slider(page, reports[i], local_index[i], moves)
            except Exception as error:  # noqa: BLE001
                reports[i].problems.append(f"move {len(reports[i].moves) + 1} failed: {type(error).__name__}: "
                                           f"{error}"[:400])

        async def checker(i):
            if opened[i] is None or reports[i].expected is None:
                return
            try:
                if reports[i].client == "websocket":
                    await check_socket_view(opened[i], reports[i])
                else:
                    await check_own_view(opened[i], reports[i])
            except Exception as error:  # noqa: BLE001
                reports[i].problems.append(f"final check failed: {type(error).__name__}: {error}"[:400])

        progress = [0]  # bumped by every finished open, move, check and probe answer

        def counted(coroutine_function):
            async def run(*args):
                await coroutine_function(*args)
                progress[0] += 1
            return run

        newcomer_done = asyncio.Event()

        async def fresh_visitor():
            """One newcomer (a real Chromium tab) while every session moves: navigation -> first chart
            drawn, in seconds, and how many websocket runs the server answered meanwhile."""
            context = await browser.new_context(viewport={"width": 1440, "height": 900})
            runs_before = SocketSession.runs_finished
            try:
                page = await context.new_page()
                started = time.perf_counter()
                await page.goto(base + "/", wait_until="commit", timeout=ACTION_TIMEOUT_MS)
                await page.wait_for_function(FIRST_CHART_JS, timeout=ACTION_TIMEOUT_MS, polling=50)
                extra["fresh_visitor_first_chart_s"] = round(time.perf_counter() - started, 2)
            except Exception as error:  # noqa: BLE001 - reported, not fatal
                extra["fresh_visitor_first_chart_s"] = f"failed: {type(error).__name__}"
            finally:
                extra["runs_answered_while_fresh_visitor_waited"] = SocketSession.runs_finished - runs_before
                newcomer_done.set()
                await context.close()

        async def probe(stop: asyncio.Event):
            while not stop.is_set():
                answer = await first_visit(base, "home", timeout_s=ACTION_TIMEOUT_MS / 1000)
                extra["probe"].append(None if answer.failure or answer.exceptions else round(answer.seconds, 3))
                progress[0] += 1
                try:
                    await asyncio.wait_for(stop.wait(), timeout=PROBE_EVERY_S)
                except TimeoutError:
                    pass

        async def everything():
            await asyncio.gather(*(counted(opener)(i, info) for i, info in plan))
            # every session is open and connected: now all of them move at the same moment, and a
            # newcomer arrives
            await asyncio.gather(fresh_visitor(), *(counted(mover)(i) for i in range(sessions)))
            await asyncio.gather(*(counted(checker)(i) for i in range(sessions)))

        stop = asyncio.Event()
        prober = asyncio.create_task(probe(stop))
        work = asyncio.create_task(everything())
        started, seen, last_progress = time.perf_counter(), -1, time.perf_counter()
        try:
            while not work.done():
                await asyncio.wait([work], timeout=5)
                if progress[0] != seen:
                    seen, last_progress = progress[0], time.perf_counter()
                stalled = time.perf_counter() - last_progress > stall_s
                if stalled or time.perf_counter() - started > deadline_s:
                    work.cancel()
                    why = (f"no session and no server probe made progress for {stall_s:.0f} s" if stalled
                           else f"not finished within the hard cap of {deadline_s:.0f} s")
                    for report in reports:
                        if report.expected is None or report.shown is None:
                            report.problems.append(why)
                    break
        finally:
            stop.set()
            await asyncio.gather(prober, return_exceptions=True)
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
            await asyncio.gather(*(session.close() for session in opened if isinstance(session, SocketSession)),
                                 return_exceptions=True)
            await browser.close()
    return reports


async def _open_every_page(base: str, pages, queries: dict[str, str] | None) -> None:
    """Each page once (at the run's settings), over a websocket (no browser): what every page imports
    and caches is loaded."""
    for info in pages:
        name = Path(info.path).stem
        await first_visit(base, name, (queries or {}).get(name, ""), timeout_s=ACTION_TIMEOUT_MS / 1000)


def _rest_rss(sampler, base: str, process, timeout_s: float = 60.0) -> tuple[int | None, int | None]:
    """The server's RSS once it holds no session (the browsers closed, or after ``timeout_s``), and
    again after one period of its allocator trim (relviz.app.allocator: freed pages go back then)."""
    from relviz.app.allocator import TRIM_EVERY_S

    if not all(p.is_running() for p in (process if isinstance(process, list) else [process])):
        return None, None
    for _ in range(int(timeout_s)):
        if active_sessions(base) == 0:
            break
        time.sleep(1)
    at_close = sampler.rss()
    time.sleep(TRIM_EVERY_S + 1)
    return at_close, sampler.rss()


@contextlib.contextmanager
def _servers(processes: int):
    """(the base the sessions use, the processes' bases): one server, or ``processes`` behind nginx
    (tests/proxy_support.py, docs/nginx/relviz-processes.conf)."""
    if processes == 1:
        with app_server() as base:
            yield base, [base]
    else:
        from proxy_support import proxied_app
        with proxied_app(processes) as (front, bases):
            yield front, bases


def run_load(*, sessions: int = 24, moves: int = 3, deadline_s: float = 1800.0, stall_s: float = 180.0,
             pages=None, queries: dict[str, str] | None = None, browsers: int = 3, processes: int = 1) -> dict:
    """Start a server (or ``processes`` of them behind nginx), run the sessions against it, return the
    figures (see the module docstring). Behind the proxy the memory, session and cache figures are the
    processes' sums, and ``sessions_per_process`` says how the proxy spread the sessions."""
    from relviz.app.navigation import PAGES

    pages = list(pages or [info for info in PAGES if Path(info.path).stem not in NOT_MOVED])
    started = time.perf_counter()
    extra: dict = {"probe": []}
    with _servers(processes) as (base, backends):
        ports = [urllib.parse.urlsplit(one).port for one in backends]
        log_path = REPO / "test-artifacts" / f"server-{ports[0]}.log"
        process = [server_process(port) for port in ports]
        sampler = Sampler(process, backends if processes > 1 else base)
        metrics_base = backends if processes > 1 else base
        baseline_rss = sampler.rss()
        asyncio.run(_open_every_page(base, pages, queries))
        warm_rss, warm_caches = sampler.rss(), cache_sizes(metrics_base)
        sampler.start()
        try:
            reports = asyncio.run(run_sessions(base, pages, sessions=sessions, moves=moves, deadline_s=deadline_s,
                                               stall_s=stall_s, extra=extra, queries=queries,
                                               browsers=browsers))
        finally:
            sampler.count_cpu()
            sampler.stop()
            running = all(p.is_running() for p in process)
            end_rss = sampler.rss() if running else None
            per_process = sampler.max_sessions_each
            closed_rss, rest_rss = _rest_rss(sampler, metrics_base, process)
            rest_caches = cache_sizes(metrics_base) if running else {}
    times = [move.seconds for report in reports for move in report.moves]
    by_client = {client: [move.seconds for report in reports if report.client == client
                          for move in report.moves + report.load_moves] for client in ("websocket", "browser")}
    slowest = max(((move.seconds, report.page, report.slider) for report in reports for move in report.moves),
                  default=(None, None, None))
    return {
        "sessions": sessions,
        "sessions_completed": sum(1 for r in reports if r.ok and r.shown is not None),
        "sessions_unavailable": {r.index: r.unavailable for r in reports if r.unavailable},
        "sessions_held_max_server_gauge": sampler.max_sessions,
        "processes": processes,
        "sessions_per_process": per_process,
        "server_logs": [str(REPO / "test-artifacts" / f"server-{port}.log") for port in ports],
        "moves_per_session": moves,
        "moves_done": len(times),
        "slowest_response_s": slowest[0],
        "slowest_response_where": f"{slowest[1]} ({slowest[2]})" if slowest[1] else None,
        "median_response_s": round(statistics.median(times), 3) if times else None,
        "slowest_open_s": round(max((r.open_seconds for r in reports), default=0.0), 2),
        "browser_sessions": sum(1 for r in reports if r.client == "browser"),
        "websocket_sessions": sum(1 for r in reports if r.client == "websocket"),
        # a websocket session's move is the server's time alone (the run, no rendering); a browser's
        # adds its tab's rendering on the same cores
        "server_move_median_s": round(statistics.median(by_client["websocket"]), 3) if by_client["websocket"] else None,
        "server_move_max_s": max(by_client["websocket"], default=None),
        "browser_move_median_s": round(statistics.median(by_client["browser"]), 3) if by_client["browser"] else None,
        "browser_move_max_s": max(by_client["browser"], default=None),
        "baseline_rss_mb": round(baseline_rss / 2**20, 1),
        "warm_rss_mb": round(warm_rss / 2**20, 1),
        "closed_rss_mb": round(closed_rss / 2**20, 1) if closed_rss else None,
        "rest_rss_mb": round(rest_rss / 2**20, 1) if rest_rss else None,
        "warm_caches": warm_caches,
        "rest_caches": rest_caches,
        "probe_answers": len([t for t in extra["probe"] if t is not None]),
        "probe_failures": len([t for t in extra["probe"] if t is None]),
        "probe_median_s": round(statistics.median([t for t in extra["probe"] if t is not None]), 3)
        if any(t is not None for t in extra["probe"]) else None,
        "probe_max_s": max((t for t in extra["probe"] if t is not None), default=None),
        "fresh_visitor_first_chart_s": extra.get("fresh_visitor_first_chart_s"),
        "runs_answered_while_fresh_visitor_waited": extra.get("runs_answered_while_fresh_visitor_waited"),
        "load_moves_done": sum(len(r.load_moves) for r in reports),
        "peak_rss_mb": round(sampler.peak_rss / 2**20, 1),
        "end_rss_mb": round(end_rss / 2**20, 1) if end_rss else None,
        "rss_samples": len(sampler.samples),
        "server_cpu_s": round(sum(sampler.server_cpu.values()), 1),
        "browser_cpu_s": round(sum(sampler.browser_cpu.values()), 1),
        "machine_cpus": psutil.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in psutil.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
        "server_log": str(log_path),
        "pages": {Path(p.path).stem: sum(1 for r in reports if r.page == Path(p.path).stem) for p in pages},
        "failures": [asdict(r) for r in reports if not r.ok and not r.unavailable],
        "sessions_detail": [{"index": r.index, "page": r.page, "client": r.client, "slider": r.slider, "start": r.start_value,
                             "set": [m.target for m in r.moves], "shown": r.shown, "url": r.url_value,
                             "move_seconds": [m.seconds for m in r.moves], "open_seconds": round(r.open_seconds, 2)}
                            for r in reports],
    }


if __name__ == "__main__":  # pragma: no cover - manual use
    sys.path.insert(0, str(REPO))
    figures = run_load(sessions=int(sys.argv[1]) if len(sys.argv) > 1 else 24)
    print(json.dumps({k: v for k, v in figures.items() if k not in ("sessions_detail", "failures")}, indent=2))
    for failure in figures["failures"]:
        print(failure["index"], failure["page"], failure["slider"], [m["target"] for m in failure["moves"]], failure["problems"], failure["errors"])
