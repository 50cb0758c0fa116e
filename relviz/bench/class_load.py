"""Bench section ``class``: a whole class opens the lecture's link at once, on this machine's cores.

Three parts, each on app servers started as DEPLOY.md says (relviz.bench.class_servers), every server
process pinned to a core of its own and every client pinned to the last core (``taskset``; on 2 cores: the
server on core 0, the clients on core 1):

1. **Cost per page** (one quiet server, one session at a time): for each page, the link of its first step in
   the shipped tours; the server's CPU seconds (its process, every thread: psutil) for the page's first run
   on this server (imports included), for a later student's first run of the same link, and for a move of
   the page's slider. Means over several runs: the kernel counts a process's CPU in 10 ms ticks.
2. **Profile of a first run**: part 1's server runs with ``RELVIZ_RUN_PROFILE`` (relviz.app.run_profile), which
   records the CPU of app.py's body per run (the "thread" column: what the page's script costs; the rest of
   the process CPU is Streamlit's work around it). A second server, started with
   ``RELVIZ_RUN_PROFILE_SAMPLE=1``, samples every working thread's stack each millisecond; the same first
   runs' samples are split into import, serialisation, figure building, Streamlit's own work and the script
   (page and library).
3. **The class** (relviz.bench.class_clients, its own process on the client core): N students open the same
   link within ``arrive`` seconds, then each moves the page's slider every 5-10 s for ``seconds``; once with
   one process, once with one process per server core behind nginx (``docs/nginx/relviz-processes.conf``).
   Each process is opened once before the class arrives (the teacher's tab; a fresh process's imports are in
   part 1). A few Chromium tabs (on the client core) open the same link meanwhile and confirm what is drawn.
   Reported: time to first chart and move response (p50, p95), errors, whether any session drew another's
   values (class_clients.check_isolation), the servers' CPU and peak memory, the load average.

Options (``python -m relviz bench --only class --class-students 10 --class-seconds 30``): see relviz.cli.bench.
Not measured with ``--quick``.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from relviz.bench.class_servers import REPO, app_process, nginx_path
from relviz.bench.report import Column, SectionResult, Target

#: Per-page targets (server CPU) and the class's (seconds, p95).
FIRST_RUN_TARGET_S = 0.150
MOVE_TARGET_S = 0.050
FIRST_CHART_TARGET_S = 5.0
MOVE_RESPONSE_TARGET_S = 1.0
#: The most one server process may hold (tests/test_load.py's bound).
RSS_BOUND_MB = 1536
#: The slider each page's students move, by its URL key.
CONTROLS = {"home": "home_q", "shaw": "sh_clip", "t5": "t5_nb", "skew": "skew_L", "absolute": "abs_heads",
            "rope": "rp_L", "attention": "at_len", "your_model": "ym_layer", "experiments": "ex_thr",
            "images": "im_qr", "check": "ck_nb"}
#: The link of a page that no tour step shows, where its default view has no slider to move (Check's default
#: kind has no slider; T5's map has num_buckets).
LINKS = {"check": "ck_kind=t5"}
#: Pages with no slider: only their first run is measured.
NO_SLIDER = ("tour",)
DEFAULTS = {"students": 30, "seconds": 120.0, "arrive": 10.0, "page": "shaw", "tabs": 2, "first_runs": 4,
            "moves": 8, "pages": ",".join(CONTROLS), "modes": "one,per-core"}
ARTIFACTS = REPO / "test-artifacts" / "class"


def tour_link(page: str) -> str:
    """The query string of the page's first step in the shipped tours (else its LINKS entry, else '')."""
    import urllib.parse

    from relviz.app.tours import BUILTINS

    for tour in BUILTINS.values():
        for step in tour.steps:
            if step.page == page:
                return urllib.parse.urlencode(step.params, doseq=True)
    return LINKS.get(page, "")


def _link(spec: str) -> tuple[str, str]:
    """'page' or 'page?query' -> (page, query): a bare page name opens its tour step's link."""
    page, _, query = spec.partition("?")
    return page, (query if "?" in spec else tour_link(page))


def page_spec(spec: str) -> tuple[str, str, str | None]:
    """'page[?query][#key]' -> (page, query, the URL key of the slider a move moves: None for the page's
    CONTROLS entry)."""
    spec, _, control = spec.partition("#")
    page, query = _link(spec)
    return page, query, control or None


_CORES: list[tuple[list[int], int]] = []


def cores() -> tuple[list[int], int]:
    """(the servers' cores, the clients' core): every core but the last, and the last (this process's cores
    when the section started: it then pins itself to the clients' core)."""
    if not _CORES:
        _CORES.append(_available_cores())
    return _CORES[0]


def _available_cores() -> tuple[list[int], int]:
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if len(available) < 2:
        return available, available[0]
    return available[:-1], available[-1]


def _cpu_s(process) -> float:
    import psutil

    try:
        times = psutil.Process(process.pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _settle(process, quiet_s: float = 0.25, timeout_s: float = 10.0) -> float:
    """Wait until the server's CPU counter stops moving (its work for the last answer is done); its value."""
    last, deadline = _cpu_s(process), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _cpu_s(process)
        if now - last < 0.005:
            return now
        last = now
    return last


# ---------------------------------------------------------------------------------------
# Parts 1 and 2: one session at a time


def _page_costs(base: str, process, page: str, query: str, first_runs: int, moves: int, log,
                control: str | None = None) -> dict[str, Any]:
    """CPU seconds of the server for the page's cold first run, a later first run (mean) and a move (mean) of
    ``control`` (default: the page's CONTROLS entry)."""
    from relviz.bench.class_clients import Session

    control = control or CONTROLS.get(page)
    out: dict[str, Any] = {"page": page, "link": query, "control": control, "errors": []}
    before = _settle(process)
    seen = asyncio.run(Session.visit(base, page, query))
    out["cold_first_run_cpu_s"] = _settle(process) - before
    out["errors"] += seen["errors"]
    out["charts"] = len(seen["charts"])
    before = _settle(process)
    for _ in range(first_runs):
        seen = asyncio.run(Session.visit(base, page, query))
        out["errors"] += seen["errors"]
    out["first_run_cpu_s"] = (_settle(process) - before) / first_runs

    if page not in NO_SLIDER:
        passes = _moves(base, process, page, query, moves, control=control)
        out["errors"] += passes.pop("errors")
        out |= passes
    log(f"class: cost of {page}: cold {out['cold_first_run_cpu_s'] * 1e3:.0f} ms, first run "
        f"{out['first_run_cpu_s'] * 1e3:.0f} ms, move {out.get('move_cpu_s', float('nan')) * 1e3:.0f} ms CPU")
    return out


def _samples(folder: Path, process) -> dict:
    """The profile server's sample counts so far (relviz.app.run_profile writes them every 0.2 s), once the
    server is quiet."""
    _settle(process)
    time.sleep(0.5)
    path = folder / f"samples-{process.pid}.json"
    return json.loads(path.read_text()) if path.exists() else {"counts": {}, "functions": {}}


def _moves(base: str, process, page: str, query: str, count: int, between=None,
           control: str | None = None) -> dict[str, Any]:
    """One session moves the page's slider to ``count`` values (a fixed draw; the first move is not counted), then
    to the same values again: the server's CPU per move for values new to the server (``move_cpu_s``) and for
    values it has seen (``seen_move_cpu_s``: every cache answers), the median seconds of each, and errors.
    ``between(label)`` is called before each counted pass ('new', 'seen') and once after (None)."""
    import random

    from relviz.bench.class_clients import Session, _values, streamlit_protos

    WidgetState = streamlit_protos()[2]

    control = control or CONTROLS.get(page)
    out: dict[str, Any] = {"errors": []}

    async def run() -> None:
        session = Session(base, page, query)
        await session.connect()
        try:
            await session.run()
            slider = session.sliders.get(control)
            if slider is None:
                out["errors"].append(f"no slider {control}")
                return
            values = _values(slider, random.Random(1), count + 1)

            async def move(value) -> float:
                state = WidgetState(id=slider.id)
                state.double_array_value.data.append(value)
                seen = await session.run(state, session.fragments.get(control, ""))
                session.set_query_value(control, value, slider.default[0])
                out["errors"].extend(seen["errors"])
                return seen["seconds"]

            await move(values[0])
            for label in ("new", "seen"):
                if between is not None:
                    between(label)
                start = _settle(process)
                walls = [await move(value) for value in values[1:]]
                prefix = "" if label == "new" else "seen_"
                out[f"{prefix}move_cpu_s"] = (_settle(process) - start) / len(walls)
                out[f"{prefix}move_wall_s"] = statistics.median(walls)
            if between is not None:
                between(None)
            out["move_fragment"] = bool(session.fragments.get(control))
        finally:
            await session.close()

    asyncio.run(run())
    return out


def _profile_records(folder: Path) -> list[dict]:
    records = []
    for path in sorted(folder.glob("runs-*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def measure_costs(pages: list[str], options: dict, log) -> list[dict[str, Any]]:
    """Parts 1 and 2 for every page: one server for the CPU figures, one sampled server for the profile."""
    from relviz.app.run_profile import CATEGORIES, ENV_FOLDER, ENV_SAMPLE

    server_cores, _ = cores()
    rows = []
    with tempfile.TemporaryDirectory(prefix="relviz-class-runs-") as tmp:
        plain, sampled = Path(tmp) / "plain", Path(tmp) / "sampled"
        with app_process(server_cores[0], env={ENV_FOLDER: str(plain)}) as (base, process):
            for page in pages:
                name, query, control = page_spec(page)
                start = len(_profile_records(plain))
                row = _page_costs(base, process, name, query, options["first_runs"], options["moves"], log,
                                  control=control)
                row["spec"] = page
                runs = _profile_records(plain)[start:]
                full = [r for r in runs[:1 + options["first_runs"]]]
                if full:
                    row["cold_thread_cpu_s"] = full[0]["thread_cpu_s"]
                    warm = [r["thread_cpu_s"] for r in full[1:]]
                    row["first_run_thread_cpu_s"] = statistics.mean(warm) if warm else None
                rows.append(row)
        with app_process(server_cores[0], env={ENV_FOLDER: str(sampled), ENV_SAMPLE: "1"}) as (base, process):
            for row in rows:
                for label, count in (("cold", 1), ("warm", options["first_runs"])):
                    before = _samples(sampled, process)

                    async def visits(count: int = count) -> None:
                        from relviz.bench.class_clients import Session
                        for _ in range(count):
                            await Session.visit(base, row["page"], row["link"])

                    asyncio.run(visits())
                    after = _samples(sampled, process)
                    counts = {c: after["counts"].get(c, 0) - before["counts"].get(c, 0) for c in CATEGORIES}
                    total = sum(counts.values())
                    row[f"{label}_profile"] = {c: counts[c] / total for c in CATEGORIES} if total else {}
                    functions = {name: n - before["functions"].get(name, 0) for name, n in after["functions"].items()}
                    row[f"{label}_top"] = sorted(((k, v) for k, v in functions.items() if v > 0),
                                                 key=lambda kv: -kv[1])[:10]
                marks: dict[str, dict] = {}

                def mark(label, marks=marks):
                    marks[label or "end"] = _samples(sampled, process)

                if row["page"] not in NO_SLIDER:
                    _moves(base, process, row["page"], row["link"], options["moves"], between=mark,
                           control=row["control"])
                if "new" in marks and "seen" in marks:
                    for label, (a, b) in (("move", ("new", "seen")), ("seen_move", ("seen", "end"))):
                        counts = {c: marks[b]["counts"].get(c, 0) - marks[a]["counts"].get(c, 0) for c in CATEGORIES}
                        total = sum(counts.values())
                        row[f"{label}_profile"] = {c: counts[c] / total for c in CATEGORIES} if total else {}
                        functions = {name: n - marks[a]["functions"].get(name, 0)
                                     for name, n in marks[b]["functions"].items()}
                        row[f"{label}_top"] = sorted(((k, v) for k, v in functions.items() if v > 0),
                                                     key=lambda kv: -kv[1])[:10]
    return rows


# ---------------------------------------------------------------------------------------
# The section


def _options(ctx) -> dict:
    given = getattr(ctx, "options", None) or {}
    return {key: (type(value)(given[key]) if given.get(key) is not None else value)
            for key, value in DEFAULTS.items()}


def _pct(profile: dict, key: str) -> str:
    return f"{100 * profile.get(key, 0):.0f}" if profile else "—"


def class_section(ctx) -> SectionResult:
    title = "A class opens the lecture's link at once: server CPU per page, first chart and move times"
    if ctx.quick:
        return SectionResult(name="class", title=title, columns=[Column("page", "page")],
                             rows=[{"page": "not measured with --quick"}],
                             targets=[Target("class targets", None, "run without --quick")])
    if importlib_missing := [m for m in ("websockets", "psutil") if not _importable(m)]:
        return SectionResult(name="class", title=title, columns=[], rows=[],
                             notes=[f"skipped: needs {', '.join(importlib_missing)}"])
    options = _options(ctx)
    server_cores, client_core = cores()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {client_core})   # this process, Chromium and the clients: away from the servers
    log = ctx.log
    pages = [p for p in options["pages"].split(",") if p]
    costs = measure_costs(pages, options, log) if pages else []
    page, query = _link(options["page"])
    from relviz.bench.class_run import run_class

    classes = []
    for mode in [m for m in options["modes"].split(",") if m]:
        if mode not in ("one", "per-core"):
            raise ValueError(f"--class-modes must list one and/or per-core; got {mode!r}")
        if mode == "per-core" and nginx_path() is None:
            log("class: nginx is not installed: the per-core run is skipped")
            continue
        log(f"class: {options['students']} students on {page}, {mode}")
        classes.append(run_class(mode, page, query, options, log))
    rows = []
    for row in costs:
        rows.append({"what": f"page {row['spec']}", "cold_ms": row["cold_first_run_cpu_s"] * 1e3,
                     "first_ms": row["first_run_cpu_s"] * 1e3,
                     "thread_ms": (row.get("first_run_thread_cpu_s") or 0) * 1e3,
                     "move_ms": row.get("move_cpu_s", float("nan")) * 1e3,
                     "seen_ms": row.get("seen_move_cpu_s", float("nan")) * 1e3,
                     "move_profile": " ".join(f"{_pct(row.get('move_profile', {}), c)}" for c in
                                              ("import", "serialisation", "figure building", "streamlit", "script")),
                     "profile": " ".join(f"{_pct(row.get('warm_profile', {}), c)}" for c in
                                         ("import", "serialisation", "figure building", "streamlit", "script")),
                     "cold_profile": " ".join(f"{_pct(row.get('cold_profile', {}), c)}" for c in
                                              ("import", "serialisation", "figure building", "streamlit", "script")),
                     "errors": len(row["errors"]), "detail": row})
    for run in classes:
        rows.append({"what": f"class: {run['students']} on {run['page']}, {run['mode']}",
                     "first_chart": f"{run['first_chart_p50_s']:.2f} / {run['first_chart_p95_s']:.2f}"
                     if run["first_chart_p95_s"] is not None else "—",
                     "move": f"{run['move_p50_s']:.2f} / {run['move_p95_s']:.2f}" if run["move_p95_s"] is not None
                     else "—",
                     "rss": "+".join(map(str, run["peak_rss_mb_each"])), "errors": run["error_count"],
                     "detail": run})
    targets = []
    for row in costs:
        targets.append(Target(f"{row['spec']}: a first run ≤ {FIRST_RUN_TARGET_S * 1e3:.0f} ms server CPU",
                              row["first_run_cpu_s"] <= FIRST_RUN_TARGET_S, f"{row['first_run_cpu_s'] * 1e3:.0f} ms"))
        if "move_cpu_s" in row:
            targets.append(Target(f"{row['spec']}: a move ≤ {MOVE_TARGET_S * 1e3:.0f} ms server CPU",
                                  row["move_cpu_s"] <= MOVE_TARGET_S, f"{row['move_cpu_s'] * 1e3:.0f} ms"))
    for run in classes:
        where = f"{run['students']} students, {run['mode']}"
        targets += [
            Target(f"{where}: first chart p95 ≤ {FIRST_CHART_TARGET_S:.0f} s",
                   run["first_chart_p95_s"] is not None and run["first_chart_p95_s"] <= FIRST_CHART_TARGET_S
                   and run["first_charts"] == run["students"],
                   f"{run['first_chart_p95_s']} s ({run['first_charts']}/{run['students']} charts)"),
            Target(f"{where}: move p95 ≤ {MOVE_RESPONSE_TARGET_S:.0f} s",
                   run["move_p95_s"] is not None and run["move_p95_s"] <= MOVE_RESPONSE_TARGET_S,
                   f"{run['move_p95_s']} s over {run['moves']} moves"),
            Target(f"{where}: no error", run["error_count"] == 0 and not any("error" in t for t in run["tabs"]),
                   "; ".join(run["errors"][:3]) or "none"),
            Target(f"{where}: no session drew another's values", not run["isolation_problems"],
                   "; ".join(run["isolation_problems"][:3]) or "each value drew one picture, its own"),
            Target(f"{where}: memory bounded (≤ {RSS_BOUND_MB} MB per process)",
                   max(run["peak_rss_mb_each"]) <= RSS_BOUND_MB, f"peak {run['peak_rss_mb_each']} MB"),
        ]
    notes = [f"cores: servers {server_cores}, clients {client_core} (taskset); cost and profile servers on core "
             f"{server_cores[0]}",
             "page rows: server CPU ms (process, all threads) of the page's first run on a fresh server (cold: "
             "imports), of a later student's first run of the same link (first), the script thread's share of it "
             "(thread: app.py's body, relviz.app.run_profile), of a move of its slider to a value new to the server "
             "(move) and to one it has drawn before (seen: every cache answers); profile = % of the "
             "server's working-thread samples in a later first run (cold: the first run), as import / serialisation / "
             "figure building / streamlit / script (page and library)",
             "class rows: first chart and move response in seconds, p50 / p95; peak RSS MB per process"]
    if any(run["processes"] > len(server_cores) for run in classes):
        notes.append(f"one process per core on {len(server_cores) + 1} cores: the last process runs on core "
                     f"{client_core}, beside the students' clients (nothing else is left to pin it to)")
    for run in classes:
        notes.append(f"{run['mode']} ({run['cores']}): {run['students']} students, {run['moves']} moves, server CPU "
                     f"{run['server_cpu_s']:.1f} s ({run['server_cpu_per_run_ms']:.0f} ms per run), load "
                     f"{run['load_before']} -> {run['load_after']}, tabs: "
                     + "; ".join(f"{t.get('first_chart_s', 0):.1f} s, {t.get('plotly', 0)} plotly + "
                                 f"{t.get('canvas', 0)} canvas, errors {t.get('errors', t.get('error'))}"
                                 for t in run["tabs"]))
    columns = [Column("what", "what"), Column("cold_ms", "cold ms", _num), Column("first_ms", "first run ms", _num),
               Column("thread_ms", "thread ms", _num), Column("move_ms", "move ms", _num),
               Column("seen_ms", "seen move ms", _num), Column("profile", "profile %"),
               Column("cold_profile", "cold profile %"), Column("move_profile", "move profile %"),
               Column("first_chart", "first chart s"), Column("move", "move s"), Column("rss", "peak MB"),
               Column("errors", "errors")]
    return SectionResult(name="class", title=title, columns=columns, rows=rows, targets=targets, notes=notes)


def _num(value: float) -> str:
    return f"{value:.0f}"


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
