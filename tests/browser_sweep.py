"""A manual sweep of the app in Chromium: every page, every control to both ends (sliders, number inputs, selects,
segmented controls), every radio, checkbox, button, tab and expander.

Not a test (too long for CI): run it by hand after a change to the pages, then look at the screenshots.
    python tests/browser_sweep.py OUT_DIR [WIDTHxHEIGHT[@SCALE] ...] [--pages=stem,stem] [--urls=url|url [--no-choices]]
        [--open-only] [--shots=flagged]
A projector at 1024 × 768 with the laptop's display scaled to 125 % shows a page 819 × 614 CSS pixels wide:
819x614@1.25 (the viewport is in CSS pixels; the scale only sharpens the screenshot).
It writes OUT_DIR/findings.jsonl (one line per action: what was done, how long the rerun took, the error boxes,
empty charts and clipped charts seen after it) and a screenshot of the viewport after each action.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from browser_support import (
    CANVAS_TEXT_INIT_JS,
    CHROMIUM_ARGS,
    CLIPPED_JS,
    CUT_TEXT_JS,
    REPO,
    TITLES_CUT_JS,
    app_server,
    chromium_path,
    page_url,
    wait_for_app,
)

#: What the sweep reads after every action: error boxes, charts with no data, charts wider than the main area.
CHECK_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const width = main ? main.getBoundingClientRect().right : window.innerWidth;
  const errors = Array.from(document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]'))
    .map(e => e.innerText.slice(0, 400));
  const empty = [], clipped = [];
  document.querySelectorAll('.js-plotly-plot').forEach((div, i) => {
    const data = div.data || [];
    const has = data.some(t => ['x', 'y', 'z', 'values', 'r'].some(k => t[k] != null
        && ((t[k].bdata !== undefined && t[k].bdata.length > 0) || (t[k].length || 0) > 0)));
    const title = (div.layout && div.layout.title && div.layout.title.text) || '';
    if (!has) empty.push(i + ':' + title.slice(0, 80));
    const box = div.getBoundingClientRect();
    if (div.offsetParent === null || box.width === 0) return;   // in a closed tab or expander
    if (box.right > width + 2 || box.width < 50) clipped.push(i + ':' + title.slice(0, 80) + ' w=' + Math.round(box.width));
  });
  const warnings = Array.from(document.querySelectorAll('[data-testid="stAlertContentWarning"]')).map(e => e.innerText.slice(0, 200));
  // text cut: a chart title wider than its chart, a label ending in an ellipsis
  const cut = (TITLES_CUT_JS)().map(([i, t]) => 'title ' + i + ': ' + t)
    .concat((CUT_TEXT_JS)().map(([t]) => 'ellipsis: ' + t));
  // a canvas component on screen that has not drawn (no data-draws) or drew at no size: a blank picture
  const roots = [...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)
    .flatMap(root => [...root.querySelectorAll('.relviz-toeplitz, .relviz-xy, .relviz-grid, .relviz-step')]);
  roots.forEach((r, i) => {
    const c = r.querySelector('canvas'), box = r.getBoundingClientRect();
    if (!box.width) return;   // in a closed tab or expander
    if (!c || !(+r.dataset.draws > 0) || !c.width || !c.height) empty.push('canvas ' + i + ':' + (c && c.getAttribute('aria-label') || ''));
  });
  // the clipped-text check of browser_support (text past its chart or canvas, cut text), less what scrolls whole
  (CLIPPED_JS)().filter(row => row[0] !== 'scrolls').forEach(row => cut.push(row.join(' | ')));
  const exceptions = document.querySelectorAll('[data-testid="stException"]').length;
  return {errors, empty, clipped, cut, warnings, exceptions, charts: document.querySelectorAll('.js-plotly-plot').length};
}""".replace("TITLES_CUT_JS", TITLES_CUT_JS).replace("CUT_TEXT_JS", CUT_TEXT_JS).replace("CLIPPED_JS", CLIPPED_JS)


def settle(page) -> float:
    """Seconds until the rerun is done (no running status widget)."""
    start = time.monotonic()
    page.wait_for_timeout(100)
    try:
        for _ in range(2):   # a rerun's status widget may show late on a loaded machine: settled twice, 250 ms apart
            page.wait_for_function(
                """() => !document.querySelector('[data-testid="stStatusWidget"]')
                         && !document.querySelector('[data-stale="true"]')""", timeout=90000)
            page.wait_for_timeout(250)
    except Exception:  # noqa: BLE001 - a timeout is a finding
        return -1.0
    return time.monotonic() - start - 0.5


class Sweep:
    def __init__(self, page, out: Path, tag: str) -> None:
        self.page, self.out, self.tag, self.n = page, out, tag, 0
        self.log = open(out / "findings.jsonl", "a")
        self.js_errors: list[str] = []
        page.on("pageerror", lambda error: self.js_errors.append(str(error)[:300]))

    #: screenshots only of the actions with a finding (and of each page as it opens): --shots=flagged
    flagged_only = False

    def record(self, what: str, seconds: float, shot: bool = True) -> dict:
        self.n += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.tag}-{self.n:03d}-{what}")[:120] + ".png"
        try:
            found = self.page.evaluate(CHECK_JS)
        except Exception as error:  # noqa: BLE001
            found = {"errors": [f"evaluate failed: {error}"]}
        if self.flagged_only and what != "open" and not any(
                found.get(k) for k in ("errors", "empty", "clipped", "cut", "exceptions")):
            shot = False
        if shot:
            self.page.wait_for_timeout(600)  # charts finish drawing
            try:
                self.page.screenshot(path=str(self.out / name))
            except Exception:  # noqa: BLE001
                name = ""
        row = {"tag": self.tag, "what": what, "seconds": round(seconds, 2), "shot": name, **found,
               "js": list(self.js_errors), "url": self.page.url}
        self.js_errors.clear()
        self.log.write(json.dumps(row) + "\n")
        self.log.flush()
        flag = "!!" if found.get("errors") or found.get("empty") or found.get("clipped") or found.get("cut") \
            or found.get("exceptions") or row["js"] else "  "
        print(flag, self.tag, what, row["seconds"], found.get("errors"), found.get("empty"), found.get("clipped"),
              found.get("cut"), flush=True)
        return row

    def controls(self, selector: str) -> list:
        return self.page.query_selector_all(selector)

    def sliders(self) -> None:
        selector = '[data-testid="stSlider"] [role="slider"], [data-testid="stSlider"] input[type="range"]'
        count = len(self.controls(selector))
        for i in range(count):
            for key in ("Home", "End"):
                thumbs = self.controls(selector)
                if i >= len(thumbs):
                    break
                label = thumbs[i].get_attribute("aria-label") or thumbs[i].evaluate(
                    "e => (e.closest('[data-testid=stSlider]').innerText || '').split('\\n')[0]") or f"slider{i}"
                if thumbs[i].get_attribute("aria-disabled") == "true" or thumbs[i].is_disabled():
                    break
                try:
                    thumbs[i].focus()
                    self.page.keyboard.press(key)
                except Exception:  # noqa: BLE001
                    continue
                self.record(f"slider-{label}-{key}", settle(self.page))
            # back to where it was is not needed: each end is a finding; the next slider starts from here

    def number_inputs(self) -> None:
        count = len(self.controls('[data-testid="stNumberInput"] input'))
        for i in range(count):
            for end in ("min", "max"):
                inputs = self.controls('[data-testid="stNumberInput"] input')
                if i >= len(inputs):
                    break
                box = inputs[i]
                label = box.get_attribute("aria-label") or f"number{i}"
                bounds = re.search(r"\(([-\d,.]+) – ([-\d,.]+)\)", label)
                value = box.get_attribute(end)
                if bounds:  # the label names the range the page takes ("query length (1 – 1,048,576)")
                    value = bounds.group(1 if end == "min" else 2).replace(",", "")
                value = value if value not in (None, "") else ("-1000000000" if end == "min" else "1000000000")
                try:
                    box.fill(value)
                    box.press("Enter")
                except Exception:  # noqa: BLE001
                    continue
                self.record(f"number-{label}-{end}={value}", settle(self.page))

    def selects(self) -> None:
        count = len(self.controls('[data-testid="stSelectbox"]'))
        for i in range(count):
            for which in ("first", "last"):
                boxes = self.controls('[data-testid="stSelectbox"]')
                if i >= len(boxes):
                    break
                label = (boxes[i].inner_text() or f"select{i}").split("\n")[0][:40]
                try:
                    boxes[i].click()
                    self.page.wait_for_selector('[role="option"]', timeout=5000)
                    options = self.page.query_selector_all('[role="option"]')
                    option = options[0] if which == "first" else options[-1]
                    text = option.inner_text()[:50]
                    option.click()
                except Exception:  # noqa: BLE001
                    self.page.keyboard.press("Escape")
                    continue
                self.record(f"select-{label}-{which}-{text}", settle(self.page))

    def radios_and_checks(self) -> None:
        count = len(self.controls('[data-testid="stRadio"] label, [data-testid="stCheckbox"] label'))
        for i in range(count):
            items = self.controls('[data-testid="stRadio"] label, [data-testid="stCheckbox"] label')
            if i >= len(items):
                break
            label = (items[i].inner_text() or f"choice{i}")[:40]
            try:
                items[i].click()
            except Exception:  # noqa: BLE001
                continue
            self.record(f"choice-{label}", settle(self.page))

    def segmented(self) -> None:
        """Each segmented control (Streamlit's button group) to its first and its last option."""
        selector = '[data-testid="stButtonGroup"]'
        for i in range(len(self.controls(selector))):
            for which in ("first", "last"):
                groups = self.controls(selector)
                if i >= len(groups):
                    break
                options = groups[i].query_selector_all("button")
                if not options:
                    break
                option = options[0] if which == "first" else options[-1]
                label = (option.inner_text() or f"group{i}").strip()[:30]
                try:
                    option.click()
                except Exception:  # noqa: BLE001
                    continue
                self.record(f"segment-{i}-{which}-{label}", settle(self.page))

    def tabs_and_expanders(self) -> None:
        for selector, kind in (('[role="tab"]', "tab"), ('[data-testid="stExpander"] summary', "expander")):
            count = len(self.controls(selector))
            for i in range(count):
                items = self.controls(selector)
                if i >= len(items):
                    break
                label = (items[i].inner_text() or f"{kind}{i}")[:40]
                try:
                    items[i].click()
                except Exception:  # noqa: BLE001
                    continue
                self.record(f"{kind}-{label}", settle(self.page))

    def buttons(self, skip: tuple[str, ...] = ()) -> None:
        selector = '[data-testid="stMain"] [data-testid="stButton"] button, [data-testid="stSidebar"] [data-testid="stButton"] button'
        count = len(self.controls(selector))
        for i in range(count):
            items = self.controls(selector)
            if i >= len(items):
                break
            label = (items[i].inner_text() or f"button{i}")[:40]
            if any(s in label for s in skip) or items[i].is_disabled():
                continue
            try:
                items[i].click()
            except Exception:  # noqa: BLE001
                continue
            self.record(f"button-{label}", settle(self.page))


def sweep_url(browser, base: str, url: str, tag: str, viewport: tuple[int, int], out: Path, full: bool = True,
              choices: bool = True, scale: float = 1.0) -> None:
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=scale)
    page.add_init_script(CANVAS_TEXT_INIT_JS)   # CLIPPED_JS reads the canvas components' texts
    sweep = Sweep(page, out, tag)
    start = time.monotonic()
    page.goto(base + url)
    seconds = settle(page)
    try:
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30000)
    except Exception:  # noqa: BLE001 - a page without charts
        pass
    page.wait_for_timeout(3000)
    sweep.record("open", time.monotonic() - start if seconds >= 0 else -1)
    try:
        page.screenshot(path=str(out / f"{tag}-full.png"), full_page=True)
    except Exception:  # noqa: BLE001
        pass
    if full:
        sweep.tabs_and_expanders()
        if choices:   # off to stay on the view a link chose (a radio would move to another view)
            sweep.radios_and_checks()
            sweep.segmented()
        sweep.selects()
        sweep.number_inputs()
        sweep.sliders()
        sweep.buttons(skip=("Download",))
    page.close()


def main(argv: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    from relviz.app.navigation import PAGES

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    sizes = [size for a in argv[1:] if (size := re.fullmatch(r"(\d+)x(\d+)(?:@([\d.]+))?", a))]
    stems = None
    urls: list[str] = []
    for a in argv[1:]:
        if a.startswith("--pages="):
            stems = a.split("=", 1)[1].split(",")
        if a.startswith("--urls="):
            urls = a.split("=", 1)[1].split("|")
    light = "--open-only" in argv
    Sweep.flagged_only = "--shots=flagged" in argv
    with app_server(timeout=120) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for size in sizes or [re.fullmatch(r"(\d+)x(\d+)(?:@([\d.]+))?", "1440x900")]:
            width, height, scale = int(size[1]), int(size[2]), float(size[3] or 1)
            at = f"{width}x{height}" + (f"@{size[3]}" if size[3] else "")
            for url in urls:
                tag = f"{at}-" + re.sub(r"[^A-Za-z0-9]+", "_", url)[:60]
                sweep_url(browser, base, url, tag, (width, height), out, full=not light,
                          choices="--no-choices" not in argv, scale=scale)
            for info in PAGES if not urls else []:
                stem = Path(info.path).stem
                if stems and stem not in stems:
                    continue
                url = page_url("", info.path, info.default)
                sweep_url(browser, base, url, f"{at}-{stem}", (width, height), out, full=not light, scale=scale)
        browser.close()


if __name__ == "__main__":
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests"))
    main(sys.argv[1:])
