"""Bench section ``slider``: key press -> charts settled, in Chromium, at each large-matrix page's largest setting.

A real server (loopback, a free port) and Debian's Chromium: the page is opened through a link that
sets its largest setting (2^20 × 2^20 positions, window 512 × 512; T5 and Shaw also at 8192², the earlier
largest; ALiBi on the absolute page at 2^20; RoPE at a 2^20 context), the "window: first query row" slider gets
the keyboard focus, and each round presses the right arrow key: one step to a window position not
shown before, as a visitor sweeping the window sees it (the server computes it afresh, and the data
travel: neither Streamlit's message cache nor st.cache_data can answer a new position). A round's time
runs from the key press to the moment the page stops changing: the page's plotly charts report
``plotly_afterplot``, relviz's canvas component (relviz/components/toeplitz_canvas.js) dispatches
``relviz:drawn``, and a MutationObserver sees every other change to the page (text, a style block: Your
model outlines its chosen layer by CSS and sends no chart on a move that changes no view); the rerun is over
and nothing more changes for 0.6 s.

- ``settled``: key press -> last chart redrawn or last change to the page (what the visitor waits for);
- ``server``: key press -> the rerun's first new chart data drawn in the page (none when no chart changed);
- ``last message``: key press -> the rerun's last websocket message (the server's rerun plus transport);
  ``browser`` = settled − last message: Streamlit's rendering, plotly decoding and drawing after it.
- ``bytes``: what the websocket brought for the move. It does not depend on machine load, and the
  browser's share grows with it (Streamlit parses a changed chart's JSON, re-themes it through a
  string copy and parses it again, then plotly draws it anew).

Needs Playwright and Chromium (requirements-dev.txt, Debian's chromium). Not measured with ``--quick``.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from relviz.bench.first_paint import COUNT_MESSAGES_JS, _server, launch_chromium
from relviz.bench.first_paint import unavailable as first_paint_unavailable
from relviz.bench.report import Column, SectionResult, Target, ms

REPO = Path(__file__).resolve().parents[2]
TARGET_S = 0.300
BYTES_TARGET = 200_000

#: page path, query string of its largest setting, label of the slider the arrow keys move, the key
#: that moves it to a value not shown before (RoPE's slider starts at its maximum)
CASES = [
    ("t5", "t5_q=8192&t5_k=8192&t5_ws=512&t5_r0=2048&t5_c0=2048", "window: first query row", "ArrowRight"),
    ("t5", "t5_q=1048576&t5_k=1048576&t5_ws=512&t5_r0=524288&t5_c0=524288", "window: first query row", "ArrowRight"),
    ("shaw", "sh_q=8192&sh_k=8192&sh_ws=512&sh_r0=2048&sh_c0=2048&sh_clip=64", "window: first query row",
     "ArrowRight"),
    ("shaw", "sh_q=1048576&sh_k=1048576&sh_ws=512&sh_r0=524288&sh_c0=524288&sh_clip=64", "window: first query row",
     "ArrowRight"),
    ("absolute", "abs_aL=1048576&abs_al_ws=512&abs_al_r0=524288&abs_al_c0=524288", "window: first query row",
     "ArrowRight"),
    ("rope", "rp_len=1048576&rp_L=256", "positions shown", "ArrowLeft"),
    # Your model at the model's own context (Llama 4 Scout: 10,485,760 positions; Gemma 3: 131,072): the layer
    # slider, each press a layer not shown before (its strip highlight and every view of that layer)
    ("your_model", "ym_model=Llama+4+Scout+17B-16E+%28published+config%29", "layer", "ArrowRight"),
    ("your_model", "ym_model=Gemma+3+27B+%28published+config%29", "layer", "ArrowRight"),
    # Images and video at a 1024 × 1024 image in 16-px patches (4,096 patches): the query patch moves; and 8 frames
    # of such patches: each press a frame offset Δt not shown before
    ("images", "im_view=2-D+RoPE&im_rows=64&im_cols=64&im_qr=20&im_qc=10", "query patch column", "ArrowRight"),
    ("images", "im_view=M-RoPE+%28video%29&im_rows=64&im_cols=64&im_frames=8&im_dt=-7",
     "frame offset Δt (key − query)", "ArrowRight"),
    # the other pages' sliders at their largest setting: the skew's longest sequence (each press one shorter),
    # the absolute page's 512 × 512 maps with the shift moving, Experiments' threshold from its lowest
    ("skew", "skew_L=16", "sequence length L", "ArrowLeft"),
    ("absolute", "abs_L=512&abs_d=512&abs_shift=0", "shift the whole sequence by s", "ArrowRight"),
    ("experiments", "ex_thr=0.5", 'accuracy that counts as "resolved"', "ArrowRight"),
]

#: Installed once the page is drawn: every chart div records when its data last changed and when
#: it last finished drawing.
WATCH_JS = """() => {
  window.__relviz = {changed: 0, drawn: 0, first: 0, mutated: 0, ran: false};
  const seen = new WeakMap();
  const hook = (div, known) => {
    if (seen.has(div) || !div.on) return;
    seen.set(div, known ? div.data : null);     // a chart mounted later: its first drawing is new data
    div.on('plotly_afterplot', () => {
      const now = performance.now();
      if (div.data !== seen.get(div)) {
        seen.set(div, div.data);
        window.__relviz.changed = now;
        if (!window.__relviz.first) window.__relviz.first = now;
      }
      window.__relviz.drawn = now;
    });
  };
  // relviz's canvas component (large Toeplitz windows, overviews) announces each drawing itself
  window.addEventListener('relviz:drawn', event => {
    const now = performance.now();
    if (event.detail && event.detail.changed) {
      window.__relviz.changed = now;
      if (!window.__relviz.first) window.__relviz.first = now;
    }
    window.__relviz.drawn = now;
  });
  document.querySelectorAll('.js-plotly-plot').forEach(div => hook(div, true));
  new MutationObserver(() => {
    window.__relviz.mutated = performance.now();
    document.querySelectorAll('.js-plotly-plot').forEach(div => hook(div, false));
  }).observe(document.body, {childList: true, subtree: true, attributes: true, characterData: true});
  // the rerun happened (a move that changes no chart has no new data to wait for): the app's run state changed
  // (a record for each change, even when the run was over before the observer was called)
  new MutationObserver(() => { window.__relviz.ran = true; })
    .observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']});
  return true;
}"""


#: The charts' clocks and whether the rerun is over: Streamlit's app root carries the script's run state
#: (its end-to-end tests read it); a status widget alone misses a server that pauses between two charts.
RUN_STATE_JS = """() => ({changed: window.__relviz.changed, ran: window.__relviz.ran, now: performance.now(),
  last: window.__relvizLast || 0,
  drawn: Math.max(window.__relviz.drawn, window.__relviz.mutated),
  running: !!document.querySelector('[data-testid="stStatusWidget"]') ||
           (document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state') ?? 'notRunning')
             !== 'notRunning'})"""


def unavailable() -> str | None:
    reason = first_paint_unavailable()
    return reason.replace("first paint", "slider") if reason else None


def _round(page, key: str, quiet_ms: int = 600, timeout_s: float = 60.0) -> tuple[float, float | None, float, int]:
    """Press ``key`` on the focused slider; (settled, first new chart data or None, last websocket message) in
    seconds after the press, and the bytes the websocket brought."""
    start = page.evaluate("() => { Object.assign(window.__relviz, {changed: 0, drawn: 0, first: 0, mutated: 0, "
                          "ran: false}); window.__relvizBytes = 0; window.__relvizLast = 0; return performance.now(); }")
    page.keyboard.press(key)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page.wait_for_timeout(100)
        state = page.evaluate(RUN_STATE_JS)
        # the rerun happened: a chart drew new data, the app's run state changed, or the server sent a message
        answered = state["changed"] or state["ran"] or state["last"] > start
        if answered and not state["running"] and state["now"] - state["drawn"] >= quiet_ms:
            first, received, last = page.evaluate("() => [window.__relviz.first, window.__relvizBytes, "
                                                  "window.__relvizLast]")
            return ((state["drawn"] - start) / 1e3, (first - start) / 1e3 if first else None,
                    (last - start) / 1e3, int(received))
    raise RuntimeError(f"the page did not settle within {timeout_s:.0f} s after {key} (last state: {state})")


def measure(rounds: int, log=lambda message: None, pages: set[str] | None = None) -> list[dict[str, Any]]:
    """Every case of CASES (``pages``: only those pages' cases), ``rounds`` presses each."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise RuntimeError("the slider bench needs playwright: pip install -r requirements-dev.txt") from exc


    rows = []
    with _server(REPO / "app.py", REPO) as (base, _), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for page_name, query, label, key in CASES:
                if pages is not None and page_name not in pages:
                    continue
                log(f"slider: {page_name}")
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                page = context.new_page()
                page.add_init_script(COUNT_MESSAGES_JS)  # counts the websocket's bytes (and messages)
                page.goto(f"{base}/{page_name}?{query}")
                # a plotly chart or a canvas component drawn (the Skew page's steps are all canvases)
                page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot, "
                                       "[data-testid^=\"stBidiComponent\"]').length > 0 && "
                                       "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                       timeout=180_000)
                page.wait_for_timeout(3000)
                page.evaluate(WATCH_JS)
                slider = page.get_by_role("slider", name=label)
                slider.focus()
                _round(page, key)                                     # the first move warms the code paths
                settled, server, last, received = [], [], [], []
                for _ in range(rounds):                               # each press: a position not seen before
                    total, first, final, size = _round(page, key)
                    settled.append(total)
                    server.append(first)
                    last.append(final)
                    received.append(size)
                drawn = [f for f in server if f is not None]
                rows.append({"page": page_name, "setting": query.replace("&", " "),
                             "settled_s": statistics.median(settled),
                             "first_data_s": statistics.median(drawn) if drawn else None,
                             "last_message_s": statistics.median(last),
                             "browser_s": statistics.median(t - f for t, f in zip(settled, last)),
                             "bytes": statistics.median(received), "worst_s": max(settled),
                             "all_s": [round(t, 3) for t in settled]})
                context.close()
        finally:
            browser.close()
    return rows


def slider_section(ctx):
    title = "Slider -> charts settled in Chromium, each large-matrix page at its largest setting"
    reason = unavailable()
    columns = [Column("page", "page"), Column("setting", "setting"), Column("settled_s", "settled ms", ms),
               Column("worst_s", "slowest ms", ms),
               Column("first_data_s", "first chart redrawn ms", lambda v: "none" if v is None else ms(v)),
               Column("last_message_s", "last message ms", ms), Column("browser_s", "browser after it ms", ms),
               Column("bytes", "MB per move", lambda b: f"{b / 1e6:.2f}")]
    if reason:
        return SectionResult(name="slider", title=title, columns=columns, rows=[], notes=[reason])
    if ctx.quick:
        return SectionResult(name="slider", title=title, columns=columns,
                             rows=[{"page": "not measured with --quick"}],
                             targets=[Target(f"slider -> settled ≤ {TARGET_S * 1e3:.0f} ms median", None,
                                             "run without --quick")])
    rounds = 9
    chosen = (getattr(ctx, "options", None) or {}).get("slider_pages")
    pages = {p for p in chosen.split(",") if p} if chosen is not None else None
    if pages is not None and (unknown := pages - {case[0] for case in CASES}):
        raise ValueError(f"--slider-pages must name pages of the slider cases "
                         f"({', '.join(sorted({case[0] for case in CASES}))}); got {', '.join(sorted(unknown))}")
    rows = measure(rounds, ctx.log, pages)
    worst = max(rows, key=lambda r: r["settled_s"])
    return SectionResult(
        name="slider", title=title, columns=columns, rows=rows,
        targets=[Target(f"slider -> settled ≤ {TARGET_S * 1e3:.0f} ms median on every page",
                        worst["settled_s"] <= TARGET_S,
                        ", ".join(f"{r['page']} ({r['setting'].split()[0]}) {r['settled_s'] * 1e3:.0f} ms, "
                                  f"{r['bytes'] / 1e6:.2f} MB" for r in rows)),
                 Target(f"≤ {BYTES_TARGET / 1e6:.1f} MB a move on every page",
                        max(r["bytes"] for r in rows) <= BYTES_TARGET,
                        f"largest {max(r['bytes'] for r in rows) / 1e6:.2f} MB")],
        notes=[f"median of {rounds} arrow-key presses on the page's slider, each to a value not shown before "
               "(one step each; RoPE: 'positions shown' down from 256); MB per move: what the websocket brought (does not depend on load), "
               "viewport 1440 × 900; settled = the last plotly_afterplot, canvas drawing (relviz:drawn) or other change to the "
               "page after the press, the rerun over and 0.6 s of quiet after it. 'first chart redrawn' = the first chart "
               "showing new data (none: no chart changed); 'last message' = the rerun's last websocket message; "
               "'browser after it' = settled − last message."])
