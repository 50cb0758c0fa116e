"""A manual sweep for text the reader cannot read whole: every page, every tab of it, and every step of the built-in
tours (scrolled to its subject chart), at each screen size, in Chromium.

Not a test (too long for CI: ~45 views a size); tests/test_browser_teaching.py holds a fast subset. Run it after a
change to a page's layout or a figure's title, then look at the screenshots:
    python tests/browser_cut_sweep.py OUT_DIR [WIDTHxHEIGHT[@SCALE] ...] [--pages=stem,stem] [--no-tours] [--no-pages] [--present]
        [--choices]
--choices also reads each option of every radio and segmented control (Images' views, Skew's colouring, …).
--present also presents each built-in tour in lecture mode (Start presenting, Next through every step, Back on the
last, Finish): each step's subject drawn on the first screen, nothing cut or overlapping, Back off on step 1.
The default sizes are a projector's 1024 × 768, the same projector with the laptop at 125 % (819 × 614 CSS
pixels), a laptop's 1366 × 768 and a monitor's 1920 × 1080. What counts as cut is browser_support.CLIPPED_JS: a
chart's text past its chart, a canvas text past its canvas or squeezed, an element's text wider than its box; an
exception on the page is listed too.
It writes OUT_DIR/findings.jsonl (one line a view: its URL, the size, what was cut, its screenshot) and
OUT_DIR/summary.txt (each cut text once, with the sizes and views it was seen at).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

from browser_support import (
    CANVAS_TEXT_INIT_JS,
    CHROMIUM_ARGS,
    CLIPPED_JS,
    REPO,
    app_server,
    chromium_path,
    page_url,
    wait_for_app,
)

SIZES = ["1024x768", "819x614@1.25", "1366x768", "1920x1080"]


def settle(page, timeout_ms: int = 90_000) -> None:
    """The run has ended (no running status, nothing stale), twice 250 ms apart, and every chart has drawn."""
    page.wait_for_timeout(150)
    for _ in range(2):
        page.wait_for_function("""() => !document.querySelector('[data-testid="stStatusWidget"]')
                                        && !document.querySelector('[data-stale="true"]')""", timeout=timeout_ms)
        page.wait_for_timeout(250)
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.js-plotly-plot'))
                                    .every(p => p.querySelector('.main-svg'))""", timeout=timeout_ms)
    page.wait_for_timeout(700)   # plotly's relayout to the column's width, the canvas's first drawing


class CutSweep:
    def __init__(self, out: Path, with_choices: bool = False) -> None:
        self.out, self.with_choices = out, with_choices
        self.log = open(out / "findings.jsonl", "a")
        self.seen: dict[tuple, set[str]] = defaultdict(set)

    def check(self, page, size: str, view: str, subject: str = "") -> list:
        """Read what is cut on the page as it stands; a screenshot of the viewport (at the subject when given,
        else at the first cut element's chart or box), one line in findings.jsonl. Each chart is scrolled into view
        first: one below the fold had not always been laid out to its width (T5's bucket budget read whole at 819 px
        where it was drawn at 6-9 px)."""
        for chart in page.query_selector_all('[data-testid="stMain"] .js-plotly-plot'):
            chart.scroll_into_view_if_needed()
        page.wait_for_timeout(400)
        found = page.evaluate(CLIPPED_JS) + [["error", "", text[:120], ""] for text in page.evaluate(
            """() => Array.from(document.querySelectorAll('[data-testid="stException"]')).map(e => e.innerText)""")]
        if subject:
            page.evaluate("k => { const e = document.querySelector('.st-key-' + k); if (e) e.scrollIntoView(); }",
                          subject)
            page.wait_for_timeout(400)
        shot = re.sub(r"[^A-Za-z0-9_.@-]+", "_", f"{size}-{view}")[:140] + ".png"
        try:
            page.screenshot(path=str(self.out / shot))
        except Exception:  # noqa: BLE001 - a missing screenshot is no finding
            shot = ""
        self.log.write(json.dumps({"size": size, "view": view, "url": page.url, "cut": found, "shot": shot}) + "\n")
        self.log.flush()
        for row in found:
            self.seen[tuple(row[:3])].add(f"{size} {view}")
        print("!!" if found else "  ", size, view, found[:4], flush=True)
        return found

    def open(self, page, url: str) -> None:
        page.goto(url)
        wait_for_app(page, 90_000)
        settle(page)

    def page_and_tabs(self, page, base: str, stem: str, url: str, size: str) -> None:
        self.open(page, base + url)
        self.check(page, size, stem or "home")
        tabs = page.query_selector_all('[data-testid="stMain"] [role="tab"]')
        labels = [t.inner_text().strip() for t in tabs]
        for i, label in enumerate(labels[1:], start=1):   # the first tab was checked with the page
            page.query_selector_all('[data-testid="stMain"] [role="tab"]')[i].click()
            settle(page)
            self.check(page, size, f"{stem}-tab-{label[:30]}")
        if self.with_choices:
            self.choices(page, size, stem or "home")

    def choices(self, page, size: str, stem: str, most: int = 8) -> None:
        """Each option of every radio and segmented control (the views a page switches between: Images' views,
        Skew's colouring, Live attention's layers), up to ``most`` a control, each read as it is drawn."""
        groups = '[data-testid="stRadio"], [data-testid="stButtonGroup"]'
        options = 'label, button'
        for g in range(len(page.query_selector_all(groups))):
            for o in range(1, most):          # the first option is the page as it opened (or the one before)
                group = page.query_selector_all(groups)
                if g >= len(group):
                    break
                choice = group[g].query_selector_all(options)
                if o >= len(choice):
                    break
                label = (choice[o].inner_text() or f"option{o}").strip().split("\n")[0][:30]
                try:
                    choice[o].click()
                    settle(page)
                except Exception as error:  # noqa: BLE001 - an option that does not settle is a finding too
                    print("!! failed", size, stem, label, str(error)[:200], flush=True)
                    continue
                self.check(page, size, f"{stem}-choice-{label}")

    def summary(self) -> str:
        lines = []
        for (kind, where, text), views in sorted(self.seen.items()):
            sizes = sorted({v.split(" ")[0] for v in views})
            lines.append(f"{kind} | {where} | {text!r} | {', '.join(sizes)} | {'; '.join(sorted(views)[:6])}")
        return "\n".join(lines)


#: What a presented step shows of its subject (the element keyed by the step's subject): its box, whether every
#: picture in it has drawn (a plotly chart's SVG, a canvas component's drawing at a size), and every visible element
#: of the main area that overlaps another one it is not nested in: [box, drawn, overlaps].
STEP_JS = """(key) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const el = key ? main.querySelector('.st-key-' + key) : null;
  const box = r => (({top, bottom, left, right}) => ({top, bottom, left, right}))(r.getBoundingClientRect());
  let drawn = null;
  if (el) {
    const plots = [...el.querySelectorAll('.js-plotly-plot')];
    const canvases = [...el.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)
      .flatMap(root => [...root.querySelectorAll('.relviz-toeplitz, .relviz-xy, .relviz-grid, .relviz-step')]);
    drawn = plots.length + canvases.length > 0 && plots.every(p => p.querySelector('.main-svg')
              && p.getBoundingClientRect().width > 50)
            && canvases.every(r => +r.dataset.draws > 0 && r.querySelector('canvas').width > 50);
  }
  const leaves = [...main.querySelectorAll('[data-testid="stElementContainer"]')]
    .filter(e => e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true})   // not in a closed expander
            && e.getBoundingClientRect().height > 2 && !e.querySelector('[data-testid="stElementContainer"]'));
  const overlaps = [];
  for (let i = 0; i < leaves.length; i++) for (let j = i + 1; j < leaves.length; j++) {
    const a = leaves[i].getBoundingClientRect(), b = leaves[j].getBoundingClientRect();
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    // more than 8 px each way: Streamlit's own page links reach 6 px into the caption under them
    if (w > 8 && h > 8) overlaps.push([leaves[i].className.split(' ').filter(c => c.startsWith('st-key-')).join('') ||
      leaves[i].innerText.slice(0, 30), leaves[j].className.split(' ').filter(c => c.startsWith('st-key-')).join('') ||
      leaves[j].innerText.slice(0, 30), Math.round(w) + 'x' + Math.round(h)]);
  }
  return [el ? box(el) : null, drawn, overlaps.slice(0, 5)];
}"""


def present_tours(sweep: CutSweep, page, base: str, size: str) -> None:
    """Present every built-in tour as a teacher does, in one tab with the presenter bar: Start presenting, then Next
    through every step (each is checked: its subject drawn and starting on the first screen, nothing cut or
    overlapping), Back on the last step and Next again, and Finish, which ends the tour. Back is disabled on step 1."""
    from urllib.parse import quote_plus

    from relviz.app import tours

    height = page.viewport_size["height"]
    for number, (title, tour) in enumerate(tours.BUILTINS.items(), start=1):
        sweep.open(page, f"{base}/tour?tour_pick={quote_plus(title)}")
        page.get_by_role("button", name="Start presenting").click()
        order = list(range(len(tour.steps))) + [len(tour.steps) - 2, len(tour.steps) - 1]
        for walk, index in enumerate(order):
            step = tour.steps[index]
            view = f"present{number}-step{index + 1:02d}-{step.page}" + ("-back" if walk == len(tour.steps) else "")
            try:
                page.wait_for_selector(f"text={index + 1} / {len(tour.steps)} · {step.title}", timeout=90_000)
                page.wait_for_url(lambda url: f"lecture_step={index + 1}" in url.split("?")[-1].split("&"),
                                  timeout=90_000)
                settle(page)
                found = sweep.check(page, size, view)
                subject, drawn, overlaps = page.evaluate(STEP_JS, step.subject)
                extra = []
                if step.subject and (subject is None or not drawn):
                    extra.append(["step", step.subject, "picture not drawn", str(subject)])
                elif subject is not None and not 0 <= subject["top"] < height * 0.5:
                    extra.append(["step", step.subject, "subject not on the first screen", str(subject)])
                extra += [["overlap", a, b, size_] for a, b, size_ in overlaps]
                back = page.get_by_role("button", name="◀ Back")
                if index == 0 and not back.is_disabled():
                    extra.append(["step", "tour_prev", "Back is enabled on step 1", ""])
                label = "Finish" if index == len(tour.steps) - 1 else "Next ▶"
                if page.get_by_role("button", name=label).count() != 1:
                    extra.append(["step", "tour_next", f"no {label} button", ""])
                if extra:
                    sweep.log.write(json.dumps({"size": size, "view": view, "url": page.url, "cut": extra}) + "\n")
                    for row in extra:
                        sweep.seen[tuple(row[:3])].add(f"{size} {view}")
                    print("!!", size, view, extra, flush=True)
                if walk == len(tour.steps) - 1:          # the last step: one back, then on again
                    back.click()
                else:
                    page.get_by_role("button", name=label).click()
            except Exception as error:  # noqa: BLE001 - a step that does not open is a finding too
                print("!! failed", size, view, str(error)[:200], flush=True)
                page.screenshot(path=str(sweep.out / f"{size}-{view}-failed.png"))
                break
        else:
            try:      # Finish ends the tour: Lecture mode again, no presenter bar
                page.wait_for_selector("text=Make your own tour", timeout=90_000)
                settle(page)
                if page.locator(".st-key-tour_bar").count():
                    raise RuntimeError("the presenter bar is still there")
            except Exception as error:  # noqa: BLE001
                print("!! failed", size, f"present{number}-finish", str(error)[:200], flush=True)


def step_urls() -> list[tuple[str, str, str]]:
    """(view name, URL path and query, subject key) of every step of every built-in tour: the step's shared link."""
    from relviz.app import tours
    from relviz.app.navigation import PAGES

    default = next(Path(p.path).stem for p in PAGES if p.default)
    rows = []
    for number, tour in enumerate(tours.BUILTINS.values()):
        for index, step in enumerate(tour.steps):
            path = "/" if step.page == default else f"/{step.page}"
            rows.append((f"tour{number + 1}-step{index + 1:02d}-{step.page}",
                         f"{path}?{urlencode(step.params, doseq=True)}", step.subject))
    return rows


def main(argv: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    from relviz.app.navigation import PAGES

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    sizes = [a for a in argv[1:] if re.fullmatch(r"\d+x\d+(@[\d.]+)?", a)] or SIZES
    stems = next((a.split("=", 1)[1].split(",") for a in argv[1:] if a.startswith("--pages=")), None)
    sweep = CutSweep(out, with_choices="--choices" in argv)
    started = time.monotonic()
    with app_server(timeout=120) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for size in sizes:
            width, height, scale = re.fullmatch(r"(\d+)x(\d+)(?:@([\d.]+))?", size).groups()
            context = browser.new_context(viewport={"width": int(width), "height": int(height)},
                                          device_scale_factor=float(scale or 1))
            context.add_init_script(CANVAS_TEXT_INIT_JS)
            page = context.new_page()
            page.set_default_timeout(90_000)
            for info in PAGES if "--no-pages" not in argv else ():
                stem = Path(info.path).stem
                if stems is None or stem in stems:
                    try:
                        sweep.page_and_tabs(page, base, stem, page_url("", info.path, info.default), size)
                    except Exception as error:  # noqa: BLE001 - a page that does not settle is a finding too
                        print("!! failed", size, stem, str(error)[:200], flush=True)
            if "--present" in argv:
                present_tours(sweep, page, base, size)
            if "--no-tours" not in argv:
                for view, url, subject in step_urls():
                    if stems is None or view.split("-")[-1] in stems:
                        try:
                            sweep.open(page, base + url)
                            sweep.check(page, size, view, subject)
                        except Exception as error:  # noqa: BLE001
                            print("!! failed", size, view, str(error)[:200], flush=True)
            context.close()
        browser.close()
    (out / "summary.txt").write_text(sweep.summary() + "\n")
    print(sweep.summary())
    print(f"{time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests"))
    main(sys.argv[1:])
