"""Images and video in a real browser: every view of the page drawn at projector and laptop sizes, at the
largest grid (64 × 64 = 4,096 patches; 8 frames of them on the M-RoPE view). Screenshots go to
test-artifacts/browser/images-<view>-<size>.png
(the viewport) and images-<view>-lower.png (scrolled to the end at 1440 × 900)."""
from __future__ import annotations

import os
import urllib.parse

import pytest

from browser_support import CHROMIUM_ARGS, REPO, app_server, chromium_path, wait_for_app

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

#: view (its URL value) -> (a short name for the screenshot, the plotly charts it draws, a title each must show,
#: the titles of the maps the canvas component draws: the ones a query slider redraws in place)
VIEWS = {
    "2-D relative index": ("index", 0, (), ("Δh of every key patch", "Δw of every key patch")),
    "Swin's bias table": ("swin", 4, ("table row per offset", "bias of query patch", "window adds", "Swin v2"), ()),
    "2-D RoPE": ("rope", 2, ("score per (Δh, Δw)", "each pair's wavelength and axis (head_dim"),
                 ("against every key patch",)),
    "M-RoPE (video)": ("mrope", 2, ("position ids", "mrope_section [16, 24, 24]"), ("frames apart",)),
}

#: Per canvas map (relviz/components/toeplitz_canvas.js, kind "grid"; Playwright's locators see into its shadow
#: root): its title (the canvas's aria-label starts with it), its size and how many times it has drawn.
GRIDS_SELECTOR = '.relviz-toeplitz[data-kind="grid"]'


def grids(page) -> list[dict]:
    out = []
    for root in page.locator(GRIDS_SELECTOR).all():
        box = root.bounding_box() or {"width": 0, "height": 0}
        out.append({"label": root.locator("canvas").get_attribute("aria-label") or "",
                    "draws": int(root.get_attribute("data-draws") or 0), "width": box["width"],
                    "height": box["height"]})
    return out

#: Per chart in the main area: its title, how many traces plotly drew and whether its plot area has height.
CHARTS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')).map(div => ({
  title: ((div.layout && div.layout.title && div.layout.title.text) || '').replace(/<br>/g, ' '),   // wrapped: read whole
  drawn: div.querySelectorAll('.heatmaplayer .hm, .heatmaplayer image, .scatterlayer .trace, .gl-container canvas')
           .length,
  height: div.getBoundingClientRect().height, width: div.getBoundingClientRect().width}))"""


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield base, chromium
        chromium.close()


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_is_drawn_at_both_sizes(browser, view):
    """Opened once at 1280 × 720, then resized to 1440 × 900: both draw every chart of the view."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    base, chromium = browser
    name, count, titles, drawn_in_place = VIEWS[view]
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        query = {"im_view": view, "im_rows": 64, "im_cols": 64, "im_qr": 20, "im_qc": 40}
        if name == "mrope":
            query.update(im_frames=8, im_dt=2)
        page.goto(f"{base}/images?{urllib.parse.urlencode(query)}")
        wait_for_app(page)
        page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stMain\"] .js-plotly-plot .main-svg')"
                               ".length >= n", arg=count, timeout=90000)
        if drawn_in_place:
            page.locator(GRIDS_SELECTOR).nth(len(drawn_in_place) - 1).wait_for(timeout=90000)
        for width, height in ((1280, 720), (1440, 900)):
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(1500)
            try:  # under load plotly may still be drawing (or resizing) a chart: wait for the view's state
                page.wait_for_function(f"([n, parts]) => {{ const c = ({CHARTS_JS})(); return c.length === n && "
                                       "parts.every(p => c.some(x => x.title.includes(p) && x.drawn > 0 "
                                       "&& x.height > 200 && x.width > 250)); }", arg=[count, list(titles)],
                                       timeout=60000)
            except PlaywrightTimeout:  # the assertions below say what is missing
                pass
            charts = page.evaluate(CHARTS_JS)
            page.screenshot(path=str(ARTIFACTS / f"images-{name}-{width}x{height}.png"))
            assert len(charts) == count, [c["title"] for c in charts]
            maps = grids(page)
            assert len(maps) == len(drawn_in_place), maps
            for part in drawn_in_place:
                hits = [m for m in maps if m["label"].startswith(part) or part in m["label"]]
                assert len(hits) == 1 and hits[0]["draws"] > 0, (part, maps)
                assert hits[0]["height"] > 200 and hits[0]["width"] > 250, (width, hits[0])
            for part in titles:
                hits = [c for c in charts if part in c["title"]]
                assert len(hits) == 1, (part, [c["title"] for c in charts])
                assert hits[0]["drawn"] > 0 and hits[0]["height"] > 200 and hits[0]["width"] > 250, (width, hits[0])
        page.evaluate("() => { const main = document.querySelector('[data-testid=\"stMain\"]'); "
                      "main.scrollTop = main.scrollHeight; }")
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / f"images-{name}-lower.png"))
        assert page.query_selector_all('[data-testid="stException"], [data-testid="stAlertContentError"]') == []
        assert errors == []
    finally:
        page.close()


def test_a_query_move_redraws_the_map_in_place(browser):
    """The query slider's move redraws the canvas map where it is (its draw counter goes on: the same element):
    a changed plotly figure is a new chart to Streamlit's frontend, mounted and drawn from scratch, which made
    this move take ~130 ms in Chromium (python -m relviz bench --only slider --slider-pages images)."""
    base, chromium = browser
    page = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:
        page.goto(f"{base}/images?im_view=2-D+RoPE&im_rows=64&im_cols=64&im_qr=20&im_qc=10")
        wait_for_app(page)
        root = page.locator(GRIDS_SELECTOR).first
        root.wait_for(timeout=90000)
        page.wait_for_timeout(1000)
        before = int(root.get_attribute("data-draws"))
        root.evaluate("r => { r.dataset.mark = 'kept'; }")
        label = root.locator("canvas").get_attribute("aria-label")
        assert label.startswith("query (20, 10) against every key patch"), label
        page.get_by_role("slider", name="query patch column").focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"""() => {{
            const r = [...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)
              .map(s => s.querySelector('{GRIDS_SELECTOR}')).find(Boolean);
            return r && r.querySelector('canvas').getAttribute('aria-label').startsWith('query (20, 11)'); }}""",
                               timeout=60000)
        assert root.get_attribute("data-mark") == "kept"
        assert int(root.get_attribute("data-draws")) > before
    finally:
        page.close()
