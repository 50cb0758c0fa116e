"""The app in a real browser: Debian's Chromium, driven by Playwright, against a loopback server.

Screenshots land in test-artifacts/browser/ for a person to look at.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from browser_support import (
    CHROMIUM_ARGS,
    PICTURE_DRAWN,
    PLOT_STATE_JS,
    REPO,
    app_server,
    chromium_path,
    page_url,
    wait_for_app,
)
from relviz.app.navigation import PAGES

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

MAIN_SLIDERS = '[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]'
SIDEBAR_SLIDERS = '[data-testid="stSidebar"] [data-testid="stSlider"] input[type="range"]'


def sliders_of(page) -> list:
    """The page's sliders, main area first (a page may keep its controls in the sidebar)."""
    return page.query_selector_all(MAIN_SLIDERS) + page.query_selector_all(SIDEBAR_SLIDERS)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def browser_page(browser):
    with app_server() as base:
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield base, page, errors
        page.close()


def error_boxes(page) -> list[str]:
    return [element.inner_text() for element in
            page.query_selector_all('[data-testid="stException"], [data-testid="stAlertContentError"]')]


#: The teaching tools start without a chart (they wait for an upload or a tour): test_browser_tools.py.
TOOL_PAGES = {"pages/check.py", "pages/tour.py"}
VISUAL_PAGES = [p for p in PAGES if p.path not in TOOL_PAGES]


@pytest.mark.parametrize("info", VISUAL_PAGES, ids=[Path(p.path).stem for p in VISUAL_PAGES])
def test_page_loads_without_errors_and_a_slider_redraws_a_chart(browser_page, info):
    base, page, js_errors = browser_page
    page.goto(page_url(base, info.path, info.default))
    wait_for_app(page)
    name = Path(info.path).stem
    page.wait_for_selector(PICTURE_DRAWN, timeout=60000)
    page.wait_for_timeout(1500)  # let every chart finish drawing before the screenshot
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert error_boxes(page) == []
    assert page.query_selector('[data-testid="stMainBlockContainer"] h1') is not None

    sliders = sliders_of(page)
    charts = page.query_selector_all(".js-plotly-plot, .relviz-step")   # Skew's steps: canvases
    if not sliders or not charts:
        pytest.fail(f"{name}: expected at least one slider and one chart (found {len(sliders)}, {len(charts)})")
    before = page.evaluate(PLOT_STATE_JS)
    url_before = page.url
    sliders[0].focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => ({PLOT_STATE_JS})() !== {before!r}", timeout=60000)
    wait_for_app(page)
    page.wait_for_timeout(1500)
    assert page.url != url_before, "the moved slider should be written to the URL (shareable state)"
    assert error_boxes(page) == []
    page.screenshot(path=str(ARTIFACTS / f"{name}-moved.png"), full_page=True)
    assert js_errors == [], js_errors


def test_shared_link_restores_the_view(browser_page):
    base, page, _ = browser_page
    page.goto(page_url(base, "pages/t5.py", False))
    wait_for_app(page)
    page.wait_for_selector(SIDEBAR_SLIDERS, timeout=60000)
    sliders = sliders_of(page)
    sliders[0].focus()
    page.keyboard.press("ArrowRight")
    wait_for_app(page)
    page.wait_for_timeout(500)
    shared = page.url
    value = sliders[0].input_value()
    assert "?" in shared
    page.goto(shared)
    wait_for_app(page)
    page.wait_for_selector(SIDEBAR_SLIDERS, timeout=60000)
    restored = sliders_of(page)
    assert restored[0].input_value() == value


def test_first_request_of_a_fresh_server_may_be_a_deep_link(browser):
    """A shared link opened before anyone loaded '/' still gets app.py's navigation and layout."""
    with app_server() as base:
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(page_url(base, "pages/t5.py", False) + "?t5_nb=16")
        wait_for_app(page)
        # app.py draws the navigation as page links (the folder's automatic navigation is off)
        page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stPageLink"]', timeout=60000)
        # the links arrive one by one: read the sidebar once the first and the last are drawn
        page.wait_for_function("""() => {
            const text = document.querySelector('[data-testid="stSidebar"]')?.innerText || '';
            return text.includes('Start here') && text.includes('T5 buckets') && text.includes('Lecture mode');
        }""", timeout=60000)
        navigation = page.inner_text('[data-testid="stSidebar"]')
        assert page.locator('[data-testid="stSidebarNav"]').count() == 0  # no file names, ever
        page.screenshot(path=str(ARTIFACTS / "deep-link-first.png"), full_page=True)
        page.close()
    assert "Start here" in navigation and "T5 buckets" in navigation, navigation


def _hover_cell(page, canvas, row: int, col: int) -> str:
    """Move the mouse to the middle of cell (row, col) of a canvas picture; the tooltip's text."""
    import json

    plot = json.loads(canvas.evaluate("c => c.parentElement.dataset.plot"))
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + plot["x0"] + (col + 0.5) * plot["cell"],
                    box["y"] + plot["y0"] + (row + 0.5) * plot["cell"])
    tip = canvas.evaluate_handle("c => c.parentElement.querySelector('.relviz-tooltip')").as_element()
    page.wait_for_function("t => t.style.display === 'block'", arg=tip, timeout=10000)
    return tip.inner_text()


def test_large_t5_window_is_drawn_in_the_browser_with_exact_hover_and_redraws_on_a_slider_move(browser_page):
    """The canvas window (relviz/components/toeplitz_canvas.js): the tooltip of a chosen cell shows its
    exact i, j, j − i, bucket and bucket range, computed in the browser; a slider move redraws it."""
    import torch

    from relviz.positions import t5_bucket, t5_bucket_ranges

    base, page, js_errors = browser_page
    # 160 × 160: large enough to be drawn on the canvas, cells a few pixels wide so a mouse can pick one
    page.goto(page_url(base, "pages/t5.py", False) + "?t5_q=8192&t5_k=8192&t5_ws=160&t5_r0=2048&t5_c0=2048"
              "&t5_nb=32&t5_md=128&t5_bi=true")
    wait_for_app(page)
    canvas = page.locator('.relviz-toeplitz[data-kind="window"] canvas').first
    canvas.wait_for(timeout=60000)
    canvas.scroll_into_view_if_needed()
    ranges = {r.bucket: r for r in t5_bucket_ranges(num_buckets=32, max_distance=128, bidirectional=True,
                                                    max_offset=8191)}

    def expected(i: int, j: int) -> str:
        bucket = int(t5_bucket(torch.tensor([j - i]), num_buckets=32, max_distance=128, bidirectional=True)[0])
        r = ranges[bucket]
        first = max(r.first, -8191) if r.open_low else r.first
        last = min(r.last, 8191) if r.open_high else r.last
        minus = lambda v: str(v).replace("-", "−")  # noqa: E731
        return "\n".join([f"i = {i}", f"j = {j}", f"j − i = {minus(j - i)}", f"bucket = {bucket}",
                          f"bucket holds j − i = {minus(first)} … {minus(last)}"])

    for row, col in ((10, 150), (150, 10), (80, 80), (0, 159), (159, 0)):
        assert _hover_cell(page, canvas, row, col) == expected(2048 + row, 2048 + col)
    page.screenshot(path=str(ARTIFACTS / "t5-canvas-hover.png"))
    with page.expect_download() as download:   # the PNG button: drawn in the browser at twice the size shown
        canvas.evaluate("c => c.parentElement.querySelector('.relviz-download').click()")
    png = Path(download.value.path()).read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    shown = canvas.evaluate("c => [c.clientWidth, c.clientHeight]")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and [width, height] == [2 * shown[0], 2 * shown[1]]
    assert download.value.suggested_filename == "t5_buckets_window.png"
    draws = int(canvas.evaluate("c => c.parentElement.dataset.draws"))
    page.get_by_role("slider", name="window: first query row").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("([c, n]) => Number(c.parentElement.dataset.draws) > n",
                           arg=[canvas.element_handle(), draws], timeout=60000)
    wait_for_app(page)
    canvas.scroll_into_view_if_needed()   # the slider sits below the map: focusing it scrolled the page down
    assert _hover_cell(page, canvas, 10, 150) == expected(2049 + 10, 2048 + 150)
    assert js_errors == [], js_errors


def test_pooled_overview_ticks_sit_a_round_number_of_entries_apart_on_a_projector(browser_page):
    """At 1280 × 720 the 8192² overview has room for 4 ticks; they read 0, 2048, 4096, 6144 (a power of
    two of its 64-blocks), not a 1-2-5 step rounded up to whole blocks (79 blocks: 0, 5056)."""
    base, page, js_errors = browser_page
    size = page.viewport_size
    page.set_viewport_size({"width": 1280, "height": 720})
    try:
        page.goto(page_url(base, "pages/t5.py", False) + "?t5_q=8192&t5_k=8192&t5_ws=512&t5_r0=2048&t5_c0=2048")
        wait_for_app(page)
        root = page.locator('.relviz-toeplitz[data-kind="overview"]').first
        root.wait_for(timeout=60000)
        ticks = root.evaluate("r => JSON.parse(r.dataset.ticks)")
    finally:
        page.set_viewport_size(size)
    for labels in (ticks["x"], ticks["y"]):
        values = [int(label) for label in labels]
        assert len(values) >= 3 and values[0] == 0, ticks
        assert all(v % 1024 == 0 for v in values), ticks
    assert js_errors == [], js_errors


def test_pooled_overview_is_pooled_in_the_browser_with_exact_block_hover_and_the_window_marked(browser_page):
    """The overview's blocks (mean colour; hover ranges, exact mean, min, max) are computed in the browser
    from the per-offset vector; checked here against the full matrix for blocks at the edges and inside."""
    from relviz.positions import t5_bucket_map
    from relviz.toeplitz_display import display_block

    base, page, js_errors = browser_page
    q_len, k_len, q_offset = 1300, 1500, -40
    page.goto(page_url(base, "pages/t5.py", False) + f"?t5_q={q_len}&t5_k={k_len}&t5_off={q_offset}&t5_nb=24"
              "&t5_md=300&t5_ws=256&t5_r0=500&t5_c0=600")
    wait_for_app(page)
    canvas = page.locator('.relviz-toeplitz[data-kind="overview"] canvas').first
    canvas.wait_for(timeout=60000)
    canvas.scroll_into_view_if_needed()
    full = t5_bucket_map(q_len, k_len, num_buckets=24, max_distance=300, q_offset=q_offset, device="cpu").numpy()
    block = display_block(q_len, k_len, 128)
    minus = lambda v: str(v).replace("-", "−")  # noqa: E731
    span = lambda a, b: f"{minus(a)}–{minus(b - 1)}" if b - a > 1 else minus(a)  # noqa: E731
    rows, cols = -(-q_len // block), -(-k_len // block)
    for a, b in ((0, 0), (rows - 1, cols - 1), (40, 45), (rows - 1, 0), (10, cols - 1)):
        r0, r1, c0, c1 = a * block, min((a + 1) * block, q_len), b * block, min((b + 1) * block, k_len)
        cells = full[r0:r1, c0:c1]
        expected = "\n".join([
            f"i = {span(r0 + q_offset, r1 + q_offset)}", f"j = {span(c0, c1)}",
            f"j − i = {minus(c0 - (q_offset + r1 - 1))} … {minus(c1 - 1 - (q_offset + r0))}",
            f"bucket: mean {minus(f'{cells.mean():#.4g}')}, min {cells.min()}, max {cells.max()}",
            f"block {block} × {block}"])
        assert _hover_cell(page, canvas, a, b) == expected
    page.mouse.move(0, 0)
    page.screenshot(path=str(ARTIFACTS / "t5-canvas-overview.png"))
    # the rectangle: white under dotted black, at rows 500…755 and columns 600…855
    plot = canvas.evaluate("c => JSON.parse(c.parentElement.dataset.plot)")
    edge = canvas.evaluate("""(c, p) => {
        const ctx = c.getContext('2d'), s = c.width / c.clientWidth;
        const at = (x, y) => Array.from(ctx.getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data);
        return [0, 1, 2, 3, 4, 5, 6, 7].map(k => at(p.x0 + 600 / p.block * p.cell + 0.3 + k * 0.1 * p.cell,
                                                          p.y0 + 500 / p.block * p.cell));
    }""", {**plot, "block": block})
    assert any(px[:3] == [255, 255, 255] for px in edge) or any(sum(px[:3]) < 60 for px in edge), edge
    assert js_errors == [], js_errors
