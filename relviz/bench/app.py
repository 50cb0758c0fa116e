"""The app section of ``python -m relviz bench``: server-side rerun time and figure payloads.

This is tooling, not library: it drives the real pages through Streamlit's AppTest, so it is
the one relviz module besides relviz/app/ that imports streamlit (lazily, only when run).

- Rerun time: the page's first slider is moved back and forth and each rerun is timed (the
  script run as the server does it, plus AppTest's small overhead). Target ≤ 150 ms median.
- Figure size: the JSON of every plotly figure at the defaults, with every slider and number
  input at its minimum, and with every one at its maximum. Target ≤ 3 MB per figure.
"""
from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any

from relviz.bench.report import Column, SectionResult, Target, ms

REPO = Path(__file__).resolve().parents[2]
RERUN_TARGET_S = 0.150
FIGURE_TARGET_BYTES = 3_000_000


def unavailable() -> str | None:
    """Why the app section cannot run here (a pip-installed relviz has no app.py), or None."""
    if not (REPO / "app.py").is_file():
        return (f"skipped: the app runs from a source checkout (app.py beside relviz/), and "
                f"{REPO} has none; run the benchmark from the checkout")
    if importlib.util.find_spec("streamlit") is None:
        return "skipped: the app needs its dependencies: pip install 'relviz[app]'"
    return None


def _app(page_path: str):
    import logging

    try:
        from streamlit.testing.v1 import AppTest
    except ImportError as exc:
        raise ImportError("the app section needs streamlit: pip install 'relviz[app]'") from exc

    for name in list(logging.root.manager.loggerDict):  # AppTest's bare-mode warnings are noise here
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)

    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    app.switch_page(page_path)
    return app.run()


def _figure_sizes(app) -> list[int]:
    return [len(chart.proto.spec.encode()) for chart in app.get("plotly_chart")]  # as sent


def _exception_text(app) -> str | None:
    return "; ".join(e.message for e in app.exception) or None


def _set_all_controls(app, pick: str) -> None:
    """Every single-value slider and number input to its minimum or maximum."""
    from relviz.app.controls import label_range  # imports streamlit: only once the section runs

    for slider in app.slider:
        proto = slider.proto
        if proto.data_type in (proto.INT, proto.FLOAT) and not isinstance(slider.value, tuple):
            value = proto.max if pick == "max" else proto.min
            slider.set_value(int(value) if proto.data_type == proto.INT else float(value))
    for number in app.number_input:  # relviz's number inputs carry their range in the label (controls.in_range)
        bounds = label_range(number.label)
        if bounds is not None:
            number.set_value(bounds[1] if pick == "max" else bounds[0])


def _rerun_times(app, repeats: int) -> list[float]:
    sliders = [s for s in app.slider if not isinstance(s.value, tuple)]
    times = []
    if not sliders:
        for _ in range(repeats):
            start = time.perf_counter()
            app.run()
            times.append(time.perf_counter() - start)
        return times
    slider = sliders[0]
    proto = slider.proto
    low = slider.value
    high = low + proto.step if low + proto.step <= proto.max else low - proto.step
    for n in range(repeats):
        slider.set_value(high if n % 2 == 0 else low)
        start = time.perf_counter()
        app.run()
        times.append(time.perf_counter() - start)
    return times


def measure_page(page_path: str, repeats: int) -> dict[str, Any]:
    app = _app(page_path)
    errors = _exception_text(app)
    _rerun_times(app, 2)  # warm the caches both values use
    times = _rerun_times(app, repeats)
    sizes = {"default": max(_figure_sizes(app), default=0)}
    for pick in ("min", "max"):
        extreme = _app(page_path)
        _set_all_controls(extreme, pick)
        extreme.run()
        _set_all_controls(extreme, pick)  # controls whose range follows another control's value
        extreme.run()
        sizes[pick] = max(_figure_sizes(extreme), default=0)
        errors = errors or _exception_text(extreme)
    return {"page": page_path, "median_s": statistics.median(times), "max_s": max(times),
            "largest_figure_bytes": max(sizes.values()), "figure_bytes": sizes, "exception": errors}


def app_section(ctx):
    reason = unavailable()
    if reason:
        return SectionResult(name="app", title="App rerun time and figure sizes", columns=[],
                             rows=[], notes=[reason])
    from relviz.app.navigation import PAGES  # imports streamlit: only once the section knows it can run

    repeats = 5 if ctx.quick else 15
    rows = []
    for page in PAGES:
        ctx.log(f"app: {page.path}")
        rows.append(measure_page(page.path, repeats))
    slowest = max(rows, key=lambda r: r["median_s"])
    largest = max(rows, key=lambda r: r["largest_figure_bytes"])
    targets = [
        Target("rerun after a slider change <= 150 ms median on every page",
               slowest["median_s"] <= RERUN_TARGET_S,
               f"slowest {slowest['page']}: {slowest['median_s'] * 1e3:.0f} ms"),
        Target("every figure <= 3 MB at defaults, minimum and maximum settings",
               largest["largest_figure_bytes"] <= FIGURE_TARGET_BYTES,
               f"largest {largest['page']}: {largest['largest_figure_bytes'] / 1e6:.2f} MB"),
        Target("no page raised an exception", all(r["exception"] is None for r in rows),
               "; ".join(f"{r['page']}: {r['exception']}" for r in rows if r["exception"]) or "none"),
    ]
    columns = [Column("page", "page"), Column("median_s", "rerun median ms", ms),
               Column("max_s", "rerun max ms", ms),
               Column("largest_figure_bytes", "largest figure MB", lambda b: f"{b / 1e6:.2f}")]
    return SectionResult(name="app", title=f"App: server-side rerun ({repeats} slider moves) and figure sizes",
                         columns=columns, rows=rows, targets=targets,
                         notes=["rerun = AppTest run of the page after its first slider moved (server side)"])
