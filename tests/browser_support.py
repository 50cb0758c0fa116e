"""Start the app on loopback and drive it in Debian's Chromium (the tests and manual looks share this).

Run directly to take screenshots of every page: python tests/browser_support.py [OUT_DIR]
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


#: A digest of every chart on the page: each trace's x, y, z and text, the layout's shapes and title; each canvas
#: component's picture name (aria-label) and drawing count.
#: Plotly keeps data sent as base64 ({dtype, bdata}) in that form, so the digest reads the bdata text
#: too (lengths alone miss a moved outline). Compare two digests to see that a chart was redrawn.
PLOT_STATE_JS = """() => {
  const sig = v => v == null ? null
    : (v.bdata !== undefined ? v.bdata.length + ':' + v.bdata.slice(0, 300) + v.bdata.slice(-300)
    : (Array.isArray(v) ? v.length + ':' + JSON.stringify(v.slice(0, 50)).slice(0, 600) : String(v).slice(0, 400)));
  // relviz's canvas components (in their shadow roots; the Skew steps in the page's DOM): a drawing counts, with
  // what the picture is called
  const canvases = [document, ...[...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)]
    .flatMap(root => [...root.querySelectorAll('.relviz-toeplitz, .relviz-xy, .relviz-grid, .relviz-step')])
    .map(r => (r.querySelector('canvas')?.getAttribute('aria-label') || '') + '#' + r.dataset.draws);
  return Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map(div => JSON.stringify((div.data || []).map(t => [sig(t.x), sig(t.y), sig(t.z), String(t.text).slice(0, 100)]))
      + JSON.stringify((div.layout && div.layout.shapes) || []).slice(0, 300)
      + JSON.stringify(div.layout && div.layout.title && div.layout.title.text || ''))
    .concat(canvases).join('|');
}"""

#: A page's first picture drawn: a plotly chart, or a step of the Skew page (a canvas component; Playwright's
#: selectors see into the shadow roots of the others).
PICTURE_DRAWN = ".js-plotly-plot .main-svg, .relviz-step canvas"


#: Every text in the main area that the browser cuts off with an ellipsis (a widget label too long
#: for its column, say): [text, full width, shown width].
CUT_TEXT_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] *'))
  .filter(e => getComputedStyle(e).textOverflow === 'ellipsis' && e.textContent.trim()
               && e.scrollWidth > e.clientWidth + 1)
  .map(e => [e.textContent.slice(0, 80), e.scrollWidth, e.clientWidth])"""

#: Every chart title wider than its chart (plotly never wraps one; the rest is cut off at the chart's edge):
#: [chart index, title text].
TITLES_CUT_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot'))
  .map((div, i) => [div, i, div.querySelector('.gtitle')])
  .filter(([div, i, t]) => t && div.offsetParent !== null && div.getBoundingClientRect().width > 0
          && (t.getBoundingClientRect().right > div.getBoundingClientRect().right + 1
              || t.getBoundingClientRect().left < div.getBoundingClientRect().left - 1))
  .map(([div, i, t]) => [i, t.textContent.slice(0, 80)])"""


#: Records every text relviz's canvas component draws (fillText), with its box in the canvas's pixels and how much
#: a maxWidth squeezed it: run before the page's scripts (``context.add_init_script``), read by CLIPPED_JS. A
#: canvas's text is no element, so the element checks cannot see it run off the canvas.
CANVAS_TEXT_INIT_JS = """(() => {
  const proto = CanvasRenderingContext2D.prototype, fill = proto.fillText;
  proto.fillText = function (text, x, y, maxWidth) {
    try {
      const canvas = this.canvas, m = this.measureText(text), now = performance.now();
      if (!canvas.__relvizTexts || now - canvas.__relvizDrawn > 30) canvas.__relvizTexts = [];  // a new drawing
      canvas.__relvizDrawn = now;
      const squeeze = maxWidth !== undefined && m.width > maxWidth ? maxWidth / m.width : 1;
      const left = x - m.actualBoundingBoxLeft * squeeze, right = x + m.actualBoundingBoxRight * squeeze;
      const top = y - m.actualBoundingBoxAscent, bottom = y + m.actualBoundingBoxDescent;
      const t = this.getTransform();
      const xs = [], ys = [];
      for (const [px, py] of [[left, top], [right, top], [left, bottom], [right, bottom]]) {
        xs.push(t.a * px + t.c * py + t.e); ys.push(t.b * px + t.d * py + t.f);
      }
      canvas.__relvizTexts.push({text: String(text).slice(0, 60), squeeze, left: Math.min(...xs),
        right: Math.max(...xs), top: Math.min(...ys), bottom: Math.max(...ys)});
    } catch (error) { /* never break the drawing */ }
    return fill.apply(this, arguments);
  };
})();"""

#: The smallest chart text a projector shows readably, in CSS px (a laptop at 125 % draws it at 13.75 device px):
#: plotly shrinks a bar's inside text to fit its bar, to ~8 px in T5's budget bars at 819 px.
MIN_TEXT_PX = 11

#: Every text the reader cannot read whole, in the main area and the sidebar: [kind, where, text, detail].
#:   chart text: a plotly chart's text (title, tick label, colour bar tick, legend, note) whose box runs past the
#:     chart's own box (the SVG cuts it there), or that is drawn smaller than MIN_TEXT_PX CSS px: its font size times
#:     the scale plotly gave it (a bar's inside text is shrunk to fit its bar by a transform; its font-size stays),
#:     or whose box runs past its plot area where plotly clips it there (a trace's text with cliponaxis: Table 2's
#:     end labels lost their ends at 819 px);
#:   canvas text: a canvas's text (relviz's canvas component, not a data frame's grid) drawn past its canvas, or
#:     squeezed below 90 % of its width by a maxWidth;
#:   cut: an element whose text is wider (or taller) than its box while its overflow is hidden or ellipsised
#:     (scrollWidth > clientWidth);
#:   scrolls: the same in a box that scrolls sideways (the text is whole, behind a scroll bar);
#:   page: the main area itself scrolls sideways.
CLIPPED_JS = """() => {
  const MIN_TEXT_PX = @MIN_TEXT_PX@;
  const out = [], shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const name = div => ((div.layout && div.layout.title && div.layout.title.text) || '').replace(/<[^>]*>/g, ' ').slice(0, 50);
  // how far text box r runs past the clip path (plotly's plot area: a trace's text with cliponaxis) of an
  // ancestor of t inside the chart: 0 when none clips it
  const clippedBy = (t, r) => {
    const g = t.closest('[clip-path]');
    const rect = g && document.getElementById((g.getAttribute('clip-path').match(/#([^)'"]+)/) || [])[1] || '');
    const shape = rect && rect.querySelector('rect');
    const m = shape && g.getScreenCTM();
    if (!m) return 0;
    const x = +shape.getAttribute('x') || 0, y = +shape.getAttribute('y') || 0;
    const w = +shape.getAttribute('width'), h = +shape.getAttribute('height');
    const left = m.a * x + m.c * y + m.e, top = m.b * x + m.d * y + m.f;
    const right = m.a * (x + w) + m.c * (y + h) + m.e, bottom = m.b * (x + w) + m.d * (y + h) + m.f;
    return Math.max(left - r.left, r.right - right, top - r.top, r.bottom - bottom);
  };
  const areas = Array.from(document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]'))
    .filter(a => a.getBoundingClientRect().width > 0);
  areas.forEach(area => area.querySelectorAll('.js-plotly-plot').forEach(div => {
    const box = div.getBoundingClientRect();
    if (!box.width || !shown(div)) return;
    div.querySelectorAll('svg.main-svg text').forEach(t => {
      if (t.closest('.hoverlayer') || !t.textContent.trim() || !shown(t)) return;
      const r = t.getBoundingClientRect();
      if (!r.width) return;
      const past = Math.max(box.left - r.left, r.right - box.right, box.top - r.top, r.bottom - box.bottom);
      if (past > 1) out.push(['chart text', name(div), t.textContent.slice(0, 60), Math.round(past) + ' px past']);
      const m = t.getScreenCTM(), px = parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
      if (px < MIN_TEXT_PX) out.push(['chart text', name(div), t.textContent.slice(0, 60), 'drawn at ' + px.toFixed(1) + ' px']);
      const cut = clippedBy(t, r);
      if (cut > 1) out.push(['chart text', name(div), t.textContent.slice(0, 60), Math.round(cut) + ' px past its plot (clipped)']);
    });
  }));
  areas.forEach(area => area.querySelectorAll('canvas').forEach(canvas => {
    // a data frame's grid is a canvas too: its cells past the edge are behind its scroll bar, whole
    if (!shown(canvas) || !canvas.__relvizTexts || canvas.closest('[data-testid="stDataFrame"]')) return;
    const where = (canvas.closest('[class*="st-key-"]') || {className: ''}).className.toString()
      .split(' ').filter(c => c.startsWith('st-key-')).join(' ');
    canvas.__relvizTexts.forEach(t => {
      const past = Math.max(-t.left, t.right - canvas.width, -t.top, t.bottom - canvas.height);
      if (past > 1) out.push(['canvas text', where, t.text, Math.round(past) + ' device px past']);
      else if (t.squeeze < 0.9) out.push(['canvas text', where, t.text, 'squeezed to ' + Math.round(100 * t.squeeze) + ' %']);
    });
  }));
  areas.forEach(area => area.querySelectorAll('*').forEach(e => {
    if (e.closest('.js-plotly-plot') || !e.textContent.trim() || !shown(e)) return;
    const style = getComputedStyle(e);
    const wide = e.scrollWidth > e.clientWidth + 1, tall = e.scrollHeight > e.clientHeight + 1;
    const hides = v => v === 'hidden' || v === 'clip';
    const text = e.innerText.replace(/\\s+/g, ' ').trim().slice(0, 60);
    if (!text) return;
    if (wide && (hides(style.overflowX) || style.textOverflow === 'ellipsis'))
      out.push(['cut', e.getAttribute('data-testid') || e.tagName.toLowerCase(), text, e.scrollWidth + ' > ' + e.clientWidth + ' px']);
    else if (tall && hides(style.overflowY) && e.clientHeight > 0)
      out.push(['cut', e.getAttribute('data-testid') || e.tagName.toLowerCase(), text, 'height ' + e.scrollHeight + ' > ' + e.clientHeight + ' px']);
    else if (wide && ['auto', 'scroll'].includes(style.overflowX))
      out.push(['scrolls', e.getAttribute('data-testid') || e.tagName.toLowerCase(), text, e.scrollWidth + ' > ' + e.clientWidth + ' px']);
  }));
  const main = document.querySelector('[data-testid="stMain"]');
  if (main && main.scrollWidth > main.clientWidth + 1) out.push(['page', 'stMain', '', main.scrollWidth + ' > ' + main.clientWidth + ' px']);
  return out;
}""".replace("@MIN_TEXT_PX@", str(MIN_TEXT_PX))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def app_server(port: int | None = None, timeout: float = 60.0, env: dict[str, str] | None = None) -> Iterator[str]:
    """A headless streamlit server for app.py on 127.0.0.1; yields its base URL, stops it after."""
    port = port or free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless=true",
               "--server.address=127.0.0.1", f"--server.port={port}", "--browser.gatherUsageStats=false",
               "--server.fileWatcherType=none"]
    log = open(REPO / "test-artifacts" / f"server-{port}.log", "w") if (REPO / "test-artifacts").is_dir() \
        else subprocess.DEVNULL
    # torch's threads sleep between operations, as docs/DEPLOY.md starts the server (unpinned, they spin)
    environment = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, **(env or {})}
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=environment)
    with serving(process, f"http://127.0.0.1:{port}", what="streamlit", timeout=timeout) as base:
        yield base


@contextlib.contextmanager
def serving(process: subprocess.Popen, base: str, *, what: str, timeout: float = 60.0,
            log: Callable[[], str] | None = None) -> Iterator[str]:
    """Wait until ``process`` answers ``base``/_stcore/health with 200 (an app server, or a proxy in front of
    one), yield ``base``, and stop the process after. RuntimeError naming ``what`` (and the end of ``log()``)
    when the process exits or ``timeout`` seconds pass first."""
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                detail = f": {log()[-1000:]}" if log is not None else ""
                raise RuntimeError(f"{what} did not start on {base} (exit code {process.poll()}){detail}")
            time.sleep(0.25)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def page_url(base: str, page_path: str, default: bool) -> str:
    """st.navigation's URL for a page file: the default page is '/', others use the file's stem."""
    return base + "/" if default else f"{base}/{Path(page_path).stem}"


def wait_for_app(page, timeout_ms: int = 60000) -> None:
    """Wait until the script has finished running (no 'running' status widget) and content exists."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && document.querySelectorAll('[data-testid="stMainBlockContainer"] *').length > 5""",
        timeout=timeout_ms)
    page.wait_for_timeout(300)


def main(out_dir: str = "test-artifacts/screens") -> None:
    from playwright.sync_api import sync_playwright

    from relviz.app.navigation import PAGES

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 2200})  # the main area scrolls itself
        for info in PAGES:
            page.goto(page_url(base, info.path, info.default))
            wait_for_app(page)
            page.wait_for_selector(PICTURE_DRAWN, timeout=60000)
            page.wait_for_timeout(6000)  # lazy elements and every chart finish drawing
            target = out / f"{Path(info.path).stem}.png"
            page.screenshot(path=str(target), full_page=True)
            print(target)
        browser.close()


if __name__ == "__main__":
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    main(*sys.argv[1:])
