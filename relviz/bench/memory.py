"""Bench section ``view_memory``: the server memory one view takes, at 2^16, 2^18 and 2^20 positions.

Each (page, length) runs in a fresh process: the page is first run once at a small setting (imports,
Streamlit's own caches, the page's small figures), then the peak-RSS counter is reset
(/proc/self/clear_refs) and the page is run at the setting measured, as the server runs it (Streamlit's
AppTest: the same script, the same st.cache_data / st.cache_resource entries). Reported: the peak RSS
the view added (``peak``) and what it still holds after the run (``retained``: its cache entries).
Nothing on these pages builds the L × L matrix, so the memory should grow like L: ×4 from 2^18 to 2^20
(an L × L view would grow ×16, and at 2^20 could not be built at all: 2^40 cells).

(The section ``memory`` is the Music Transformer paper's arithmetic; this one measures the app.)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from relviz.bench.app import unavailable
from relviz.bench.report import Column, SectionResult, Target, mb

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (2**16, 2**18, 2**20)
#: The largest growth from 2^18 to 2^20 (×4 positions) that still reads as O(L).
LINEAR_GROWTH = 6.0


#: page -> (its query parameters at L positions per side, window mid-way down the diagonal; the warm-up L)
VIEWS: dict[str, tuple[Any, int | None]] = {
    "t5": (lambda n, mid: {"t5_q": n, "t5_k": n, "t5_ws": "512", "t5_r0": mid, "t5_c0": mid}, None),
    "shaw": (lambda n, mid: {"sh_q": n, "sh_k": n, "sh_ws": "512", "sh_r0": mid, "sh_c0": mid, "sh_clip": "64"},
             None),
    "absolute": (lambda n, mid: {"abs_aL": n, "abs_al_ws": "512", "abs_al_r0": mid, "abs_al_c0": mid}, None),
    "rope": (lambda n, mid: {"rp_len": n, "rp_L": "256"}, 256),
    # Your model at a context of L (a power of two), and at the model's own (Llama 4 Scout: 10,485,760)
    "your_model": (lambda n, mid: {"ym_model": SCOUT, "ym_len": n, "ym_view": "all"}, 16),
}
SCOUT = "Llama 4 Scout 17B-16E (published config)"
#: lengths beyond LENGTHS a page also runs at: (the value its control takes, the positions it stands for)
OWN_CONTEXT = {"your_model": ("own", 10_485_760)}
PAGES = tuple(VIEWS)


def _params(page: str, length: int) -> dict[str, str]:
    """Query parameters of one view at ``length`` positions per side: the window mid-way down the diagonal."""
    if page not in VIEWS:
        raise ValueError(f"page must be one of {', '.join(VIEWS)}; got {page!r}")
    own, positions = OWN_CONTEXT.get(page, (None, None))
    value = own if length == positions else str(length)
    return VIEWS[page][0](value, str(max(0, length // 2 - 256)))


def _status(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {key}")


def run_case(page: str, length: int, warm_length: int = 64) -> dict[str, Any]:
    """One view in this process (meant to be fresh): bytes it added at its peak and still holds."""
    import logging

    try:
        from streamlit.testing.v1 import AppTest
    except ImportError as exc:
        raise ImportError("the view_memory section needs streamlit: pip install 'relviz[app]'") from exc

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)

    def run(n: int) -> list[str]:
        app = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)   # as a deep link opens it
        app.switch_page(f"pages/{page}.py")
        for key, value in _params(page, n).items():
            app.query_params[key] = value
        app.run()
        return [str(e.value) for e in (*app.exception, *app.error)]

    problems = run(VIEWS[page][1] or warm_length)
    with open("/proc/self/clear_refs", "w") as refs:          # peak := current RSS
        refs.write("5")
    before = _status("VmRSS")
    problems += run(length)
    return {"page": page, "L": length, "peak_bytes": _status("VmHWM") - before,
            "retained_bytes": _status("VmRSS") - before, "problems": problems}


def _in_fresh_process(page: str, length: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "relviz.bench.memory", "--case", json.dumps([page, length])],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    if proc.returncode != 0:
        return {"page": page, "L": length, "problems": [f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def view_memory_section(ctx):
    title = "Server memory of one view (fresh process each), 2^16 / 2^18 / 2^20 positions per side"
    columns = [Column("page", "page"), Column("L", "L"), Column("peak_bytes", "peak added", mb),
               Column("retained_bytes", "retained", mb), Column("growth", "× from L/4", lambda x: f"{x:.1f}x"),
               Column("problems", "problems", lambda p: "; ".join(p) if p else "")]
    reason = unavailable()
    if reason:
        return SectionResult(name="view_memory", title=title, columns=columns, rows=[], notes=[reason])
    lengths = (2**10, 2**12) if ctx.quick else LENGTHS
    rows = []
    for page in PAGES[:1] if ctx.quick else PAGES:              # --quick: the T5 page at two small lengths
        extra = () if ctx.quick or page not in OWN_CONTEXT else (OWN_CONTEXT[page][1],)
        for length in (*lengths, *extra):
            ctx.log(f"view_memory: {page} L={length}")
            row = _in_fresh_process(page, length)
            earlier = next((r for r in rows if r["page"] == page and r["L"] == length // 4 and "peak_bytes" in r), None)
            if earlier and "peak_bytes" in row and earlier["peak_bytes"] > 0:
                row["growth"] = row["peak_bytes"] / earlier["peak_bytes"]
            rows.append(row)
    top = [r for r in rows if r["L"] == lengths[-1]]
    targets = [Target(f"O(L): peak memory of a view grows ≤ {LINEAR_GROWTH:.0f}x from L = {lengths[-2]} to "
                      f"{lengths[-1]} (×4 positions; L × L would be ×16)",
                      all(r.get("growth", float("inf")) <= LINEAR_GROWTH and not r["problems"] for r in top)
                      if not ctx.quick else None,
                      ", ".join(f"{r['page']} {r['peak_bytes'] / 1e6:.0f} MB ({r.get('growth', float('nan')):.1f}x)"
                                if "peak_bytes" in r else f"{r['page']}: {r['problems']}" for r in top))]
    return SectionResult(
        name="view_memory", title=title, columns=columns, rows=rows, targets=targets,
        notes=["peak added: VmHWM after the view minus VmRSS before it (the counter reset first); retained: "
               "VmRSS after minus before (the page's cache entries, Python's and malloc's free lists). Each "
               "(page, L) runs in a fresh process after one warm-up run of the page at a small setting. "
               "Pages: t5 and shaw at L × L with a 512² window mid-way down the diagonal (Shaw k = 64), "
               "absolute = its ALiBi row at L (abs_aL), rope at context length L (rp_len, 256 positions shown), "
               "your_model = Llama 4 Scout's layer views at a context of L, and at its own 10,485,760."])


def _case_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m relviz.bench.memory")
    parser.add_argument("--case", required=True, help='JSON ["page", length] (internal)')
    page, length = json.loads(parser.parse_args(argv).case)
    print(json.dumps(run_case(page, int(length))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_case_main(sys.argv[1:]))
