"""Lecture mode and Check my implementation in a real browser (Debian's Chromium via Playwright).

Screenshots at 1440 × 900 and 1280 × 720 (a projector) land in test-artifacts/browser/ to look at.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from browser_support import CHROMIUM_ARGS, REPO, app_server, chromium_path, wait_for_app
from relviz.app import tours
from relviz.check import SIGN, Settings, variant_matrix

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield base, chromium
        chromium.close()


def errors_on(page) -> list[str]:
    return [e.inner_text() for e in page.query_selector_all('[data-testid="stException"]')]


def settle(page, ms: int = 1200) -> None:
    wait_for_app(page)
    page.wait_for_timeout(ms)


#: Every box in the main area that scrolls sideways: [test id or class, content width, shown width].
SIDEWAYS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] *'))
  .filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1)
  .map(e => [e.getAttribute('data-testid') || String(e.className).slice(0, 40), e.scrollWidth, e.clientWidth])"""


STEP_1 = f"1 / {len(tours.BUILTIN.steps)} · {tours.BUILTIN.steps[0].title}"


def test_a_tour_runs_with_buttons_and_the_clicker_keys(server):
    """On a projector's 1280 × 720 (the 1440 × 900 screenshots are taken along the way)."""
    base, chromium = server
    size = (1280, 720)
    page = chromium.new_page(viewport={"width": size[0], "height": size[1]})
    js_errors: list[str] = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    page.goto(f"{base}/tour")
    settle(page)
    page.screenshot(path=str(ARTIFACTS / f"tour-{size[0]}.png"))
    assert page.evaluate(SIDEWAYS_JS) == []  # the tour table wraps its notes instead of scrolling
    page.get_by_role("button", name="Start presenting").click()
    settle(page)
    page.wait_for_selector(f"text={STEP_1}", timeout=60000)  # step 1: the bar stands in for the page's title
    page.get_by_role("button", name="Next").click()
    settle(page)
    page.get_by_role("button", name="Next").click()   # step 3: Shaw at k = 0
    page.wait_for_url("**/shaw?*sh_clip=0*", timeout=60000)  # the address bar follows the step (and the lecture)
    settle(page, 1000)
    clip = page.wait_for_selector('input[type="range"][aria-label^="clipping distance k"]', timeout=60000)
    assert clip.input_value() == "0"
    page.screenshot(path=str(ARTIFACTS / f"tour-step3-{size[0]}.png"))
    page.keyboard.press("PageDown")                    # a presentation clicker: step 4, T5 128 × 128
    page.wait_for_url("**/t5?*t5_q=128*", timeout=60000)
    settle(page, 2000)
    page.screenshot(path=str(ARTIFACTS / f"tour-step4-{size[0]}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "tour-step4-1440.png"))
    page.set_viewport_size({"width": size[0], "height": size[1]})
    # the main picture of the step stays on the first screen under the presenter bar
    chart = page.query_selector(".js-plotly-plot")
    assert chart is not None and chart.bounding_box()["y"] < size[1]
    page.keyboard.press("PageUp")
    page.wait_for_url("**/shaw?*sh_clip=0*", timeout=60000)
    settle(page, 1000)
    assert errors_on(page) == [] and js_errors == []
    page.close()


def arrive_on_start_page(page, address_settled: str) -> None:
    """Wait for step 1's title in the presenter bar, then for the address bar to satisfy ``address_settled`` (JS)."""
    page.wait_for_selector(f"text={STEP_1}", timeout=60000)
    page.wait_for_function(f"() => {address_settled}", timeout=60000)
    settle(page)


def test_step_1_in_a_fresh_browser_session_settles_the_address_bar_on_its_page(server):
    """A fresh browser context that arrived on another page: the tour's step 1 (the start page, every
    control at its default) ends with the address bar on '/', and so does Back from step 2. Streamlit
    writes the step's query string onto the old path first (tour?home_q=2), then the new path: the
    test waits for the settled address, not a snapshot."""
    base, chromium = server
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{base}/shaw?sh_clip=7")
    settle(page)
    page.get_by_role("link", name="Lecture mode").click()
    page.wait_for_url("**/tour", timeout=60000)
    settle(page)
    page.get_by_role("button", name="Start presenting").click()
    arrive_on_start_page(page, "location.pathname === '/' && !location.search.includes('sh_')")
    assert page.evaluate("location.pathname") == "/"
    page.get_by_role("button", name="Next").click()
    page.wait_for_url("**/shaw*", timeout=60000)
    settle(page)
    page.get_by_role("button", name="Back").click()
    arrive_on_start_page(page, "location.pathname === '/'")
    assert page.evaluate("location.pathname") == "/" and "sh_" not in page.evaluate("location.search")
    assert errors_on(page) == []
    context.close()


def test_a_collected_view_is_shared_as_one_link(server):
    base, chromium = server
    page = chromium.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{base}/t5")
    settle(page)
    slider = page.wait_for_selector('input[type="range"][aria-label^="num_buckets"]', timeout=60000)
    slider.focus()
    for _ in range(4):
        page.keyboard.press("ArrowLeft")                # num_buckets 32 -> 28
    page.wait_for_url("**t5_nb=28*", timeout=60000)
    settle(page)
    page.get_by_role("button", name="Add this view to my tour").click()
    settle(page)
    page.get_by_role("link", name="Lecture mode").click()  # within the session: the collection lives there
    box = page.wait_for_selector('input[aria-label^="Share as one link"]', timeout=60000)
    settle(page)
    link = box.input_value().strip()
    assert page.locator('[data-testid="stCode"]').count() == 0  # no code block: no 1.5 MB highlighter
    # the sidebar says why a tool page has no "Add this view" button
    assert "No “Add this view to my tour” on this page" in page.inner_text('[data-testid="stSidebar"]')
    shared = tours.decode(link.split(f"{tours.TOUR_PARAM}=")[1])
    assert shared.steps[0].page == "t5" and shared.steps[0].params == {"t5_nb": "28"}
    page.screenshot(path=str(ARTIFACTS / "tour-own.png"), full_page=True)
    page.goto(link)                                     # the shared link opens that tour
    settle(page)
    assert "My relviz tour" in page.inner_text('[data-testid="stMain"]')
    page.goto(f"{base}/tour?tour=..%2F..%2Fetc%2Fpasswd")  # a hostile link: refused, with a message
    settle(page)
    assert "This tour link was refused" in page.inner_text('[data-testid="stMain"]')
    assert errors_on(page) == []
    page.close()


def test_check_page_upload_shows_the_diff_and_the_cause(server, tmp_path):
    base, chromium = server
    size = (1440, 900)
    path = tmp_path / "flipped.npy"
    np.save(path, variant_matrix("t5", SIGN, (12, 12), Settings()))
    page = chromium.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(f"{base}/check?ck_kind=t5")
    settle(page)
    page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(path))
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60000)
    page.wait_for_selector('text=Likely cause', timeout=60000)
    settle(page, 2000)
    text = page.inner_text('[data-testid="stMain"]')
    assert "132 of 144 compared cells differ" in text and f"Likely cause: {SIGN}" in text
    page.screenshot(path=str(ARTIFACTS / f"check-{size[0]}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 720})
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "check-1280.png"))
    pickled = tmp_path / "model.npy"
    pickled.write_bytes(b"\x80\x04\x95" + b"\x00" * 40)  # a pickle named .npy
    page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(pickled))
    page.wait_for_selector('[data-testid="stAlertContentError"]:has-text("never unpickles")', timeout=60000)
    assert errors_on(page) == []
    page.close()


def test_the_presenter_view_follows_the_tour_in_a_second_tab(server):
    """The audience's tab (the projector) shows the picture and the step's title, no note; the presenter view,
    opened from the bar's Notes in a second tab, shows the note and follows the audience's Next and clicker
    (Page Down). At 1280 × 720, with the step's picture on the first screen."""
    from urllib.parse import urljoin

    base, chromium = server
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    audience = context.new_page()
    audience.goto(f"{base}/tour?tour_at=2")
    settle(audience)
    audience.get_by_role("button", name="Start presenting").click()
    # the address settles on /shaw: the step's values equal the controls' defaults, which leave the URL
    audience.wait_for_url("**/shaw*", timeout=60000)
    step2 = tours.BUILTIN.steps[1]
    audience.wait_for_selector(f"text=2 / {len(tours.BUILTIN.steps)} · {step2.title}", timeout=60000)
    audience.wait_for_selector(".js-plotly-plot .main-svg", timeout=60000)
    settle(audience, 1500)
    assert audience.get_by_text(step2.note[:40]).count() == 0        # no note on the projector
    chart = audience.locator(".js-plotly-plot").first.bounding_box()
    assert chart is not None and chart["y"] < 720 - 0.6 * chart["height"]
    audience.screenshot(path=str(ARTIFACTS / "lecture-audience-1280.png"))
    href = audience.get_by_role("link", name="Notes").get_attribute("href")
    presenter = context.new_page()
    presenter.goto(urljoin(audience.url, href))
    presenter.wait_for_selector(f"text={step2.title}", timeout=60000)
    assert presenter.get_by_text(step2.note[:40]).count() >= 1
    presenter.screenshot(path=str(ARTIFACTS / "lecture-presenter-1280.png"))
    audience.bring_to_front()
    audience.get_by_role("button", name="Next").click()
    audience.wait_for_url("**/shaw?*sh_clip=0*", timeout=60000)
    settle(audience)
    audience.keyboard.press("PageDown")                                 # the clicker
    audience.wait_for_url("**/t5?*", timeout=60000)
    presenter.wait_for_selector(f"text=4 / {len(tours.BUILTIN.steps)} · {tours.BUILTIN.steps[3].title}",
                                timeout=60000)
    assert presenter.get_by_text(tours.BUILTIN.steps[3].note[:40]).count() >= 1
    assert errors_on(audience) == [] and errors_on(presenter) == []
    context.close()
