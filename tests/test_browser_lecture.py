"""A lecture on a projector, in a real browser: both built-in tours walked at 1280 × 720 from the presenter
view (a second tab), as a teacher presents them (issue 33).

At every step: the audience's tab follows the presenter's Next (and, at the end, Back), the step's subject chart
is whole inside the 1280 × 720 viewport with its title and legend, and the step's note is not on the audience's
screen. One server and one browser for the whole walk. The walk waits on conditions, never a fixed pause: the
audience's address names the step (?lecture_step=N), the bar shows it, and the subject's boxes hold still.
Screenshots of each step land in test-artifacts/lecture/ with RELVIZ_LECTURE_SHOTS=1 (and of a failing step always).
"""
from __future__ import annotations

import os
from urllib.parse import parse_qsl, quote_plus, urljoin, urlsplit

import pytest

from browser_support import CHROMIUM_ARGS, REPO, app_server, chromium_path, wait_for_app
from relviz.app import tours

ARTIFACTS = REPO / "test-artifacts" / "lecture"
WIDTH, HEIGHT = 1280, 720
SHOTS = os.environ.get("RELVIZ_LECTURE_SHOTS") == "1"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

#: The subject's box, its plotly title's and legend's boxes (null where it has none), and whether every
#: plotly chart inside it has drawn: [box, title box, legend box, drawn].
SUBJECT_JS = """(key) => {
  const el = document.querySelector('[data-testid="stMain"] .st-key-' + key);
  if (!el) return null;
  const box = r => r ? (({top, bottom, left, right}) => ({top, bottom, left, right}))(r.getBoundingClientRect()) : null;
  const plots = Array.from(el.querySelectorAll('.js-plotly-plot'));
  return [box(el), box(el.querySelector('.gtitle')), box(el.querySelector('.legend')),
          plots.every(p => p.querySelector('.main-svg'))];
}"""


@pytest.fixture(scope="module")
def lecture():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
        yield base, context
        chromium.close()


def tours_step_param(index: int) -> str:
    """What the audience's address holds on step ``index`` (0-based): the link names its step."""
    from relviz.app.lecture_mode import STEP_PARAM

    return f"{STEP_PARAM}={index + 1}"


def _bar_text(tour: tours.Tour, index: int) -> str:
    return f"{index + 1} / {len(tour.steps)} · {tour.steps[index].title}"


#: True once the page's run has ended (no "running" status), the lecture layout holds (no header band), and the
#: subject is drawn with its boxes (SUBJECT_JS) where they were at the last poll: laid out for the projector.
SETTLED_JS = """([key, subject]) => {
  const header = document.querySelector('header[data-testid="stHeader"]');
  if (document.querySelector('[data-testid="stStatusWidget"]') || (header && getComputedStyle(header).display !== 'none')
      || document.querySelector('[data-testid="stMain"] [data-stale="true"]')) { window.__relvizSubject = null; return false; }
  const r = (""" + SUBJECT_JS + """)(key);
  const seen = JSON.stringify(r), same = r !== null && r[3] && window.__relvizSubject === seen;
  window.__relvizSubject = seen;
  return same;
}"""


def _on_step(audience, tour: tours.Tour, index: int, name: str) -> None:
    """The audience's tab shows step ``index``: its bar, its subject whole on the first screen, no note."""
    step = tour.steps[index]
    # the projector's window is in front (a background tab does not paint: plotly's redraws wait for it)
    audience.bring_to_front()
    try:
        audience.wait_for_url(lambda url: tours_step_param(index) in url.split("?")[-1].split("&"), timeout=60_000)
        audience.wait_for_selector(f"text={_bar_text(tour, index)}", timeout=60_000)
        audience.wait_for_function(SETTLED_JS, arg=[step.subject, step.subject], polling=100, timeout=60_000)
    except Exception:
        audience.screenshot(path=str(ARTIFACTS / f"{name}-{index + 1:02d}-failed.png"))
        raise
    found = audience.evaluate(SUBJECT_JS, step.subject)
    if SHOTS:
        audience.screenshot(path=str(ARTIFACTS / f"{name}-{index + 1:02d}.png"))
    box, title, legend, _ = found
    where = (name, index + 1, step.subject)
    for part in (box, title, legend):
        if part is not None:
            assert 0 <= part["top"] and part["bottom"] <= HEIGHT + 1, (where, found)
            assert 0 <= part["left"] and part["right"] <= WIDTH + 1, (where, found)
    assert audience.get_by_text(step.note[:40]).count() == 0, where             # the note stays with the teacher
    assert not audience.query_selector_all('[data-testid="stException"]'), where
    assert not audience.locator('header[data-testid="stHeader"]').is_visible()  # no header band
    assert not audience.locator(".modebar-container, .relviz-download").filter(visible=True).count(), where


@pytest.mark.parametrize("title", list(tours.BUILTINS), ids=["first", "today"])
def test_the_presenter_view_drives_a_built_in_tour_at_1280x720(lecture, title):
    base, context = lecture
    tour = tours.BUILTINS[title]
    name = "first" if tour is tours.BUILTIN else "today"
    audience = context.new_page()
    audience.goto(f"{base}/tour?tour_pick={quote_plus(title)}")
    wait_for_app(audience)
    audience.get_by_role("button", name="Start presenting").click()
    audience.wait_for_selector(f"text={_bar_text(tour, 0)}", timeout=60_000)
    presenter = context.new_page()
    presenter.goto(urljoin(audience.url, audience.get_by_role("link", name="Notes").get_attribute("href")))
    presenter.wait_for_selector(f"text={tour.steps[0].note[:40]}", timeout=60_000)
    # the presenter's small copy of the audience's screen draws step 1's subject; after that the copies are not
    # loaded (each is a second page load per step, about half the walk's time, and no per-step check needs it)
    mirror = presenter.frame_locator('[data-testid="stIFrame"]').frame_locator("iframe")
    mirror.locator(f".st-key-{tour.steps[0].subject}").wait_for(timeout=60_000)
    if SHOTS:
        presenter.screenshot(path=str(ARTIFACTS / f"{name}-presenter.png"))
    context.route(_is_mirror, lambda route: route.abort())
    try:
        _walk(audience, presenter, tour, name)
    finally:
        context.unroute(_is_mirror)
    presenter.close()
    audience.close()


def _is_mirror(url: str) -> bool:
    from relviz.app.lecture_mode import COPY_PARAM

    return f"{COPY_PARAM}=1" in url


def _walk(audience, presenter, tour: tours.Tour, name: str) -> None:
    """Every step from the presenter's tab (Next, once Page Down), then one step back."""
    for index in range(len(tour.steps)):
        _on_step(audience, tour, index, name)
        if index < len(tour.steps) - 1:
            presenter.bring_to_front()
            if index == 1:                           # the clicker's Page Down, in the presenter's tab
                presenter.keyboard.press("PageDown")
            else:
                presenter.get_by_role("button", name="Next ▶").click()
            try:
                presenter.wait_for_selector(f"text={_bar_text(tour, index + 1)}", timeout=60_000)
            except Exception:
                presenter.screenshot(path=str(ARTIFACTS / f"{name}-presenter-{index + 1:02d}-failed.png"))
                raise
    presenter.bring_to_front()
    presenter.get_by_role("button", name="◀ Back").click()   # and back
    _on_step(audience, tour, len(tour.steps) - 2, name)


#: Every line trace of the first chart (Start here's outlined row is one): [top, bottom] on the screen.
SHAPES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('.scatterlayer path.js-line'))
  .map(p => p.getBoundingClientRect()).filter(r => r.height > 0).map(r => [r.top, r.bottom])"""


def test_no_blank_band_above_the_title_and_homes_last_row_above_the_fold(lecture):
    """Defect 6: a blank band of ~95 px sat above every page's title (Streamlit's 6rem top padding; now 1rem).
    Defect 11: on Start here at query = 6 (the last row) the outlined row was cut by the 720 px fold."""
    base, context = lecture
    page = context.new_page()
    for path in ["t5", "?home_q=6"]:
        page.goto(f"{base}/{path}")
        wait_for_app(page)
        title = page.locator('[data-testid="stMainBlockContainer"] h1').first.bounding_box()
        assert title is not None and title["y"] < 40, (path, title)
    page.wait_for_selector(".js-plotly-plot .scatterlayer path.js-line", timeout=60_000)
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "home-q6-1280x720.png"))
    shapes = page.evaluate(SHAPES_JS)
    assert shapes and max(bottom for _, bottom in shapes) <= HEIGHT, shapes
    page.close()


#: (page, the input's label as on screen, a value outside its range, the value it keeps): a column of the main
#: area, the sidebar (a negative range), the sidebar's length inputs, and Lecture mode's own.
TYPED_OUT_OF_RANGE = [("skew", "H (heads) (1 – 1,024)", "5000", "8"),
                      ("check", "query offset (first position) (-512 – 512)", "-900", "0"),
                      ("shaw", "query length (1 – 1,048,576)", "2000000", "10"),
                      ("tour", f"start at step (1 – {len(tours.BUILTIN.steps)})", "99", "1")]


def test_a_typed_number_outside_its_range_is_refused_on_screen(lecture):
    """Defect 16: a typed out-of-range number was refused only in a tooltip, and "Press Enter to apply" sat over
    the value. On four pages: the range is in the label, no hint shows while typing, and Enter gives an error
    naming the range while the input, the address bar and the page keep their value."""
    base, context = lecture
    page = context.new_page()
    for path, label, typed, kept in TYPED_OUT_OF_RANGE:
        page.goto(f"{base}/{path}")
        wait_for_app(page)
        box = page.locator(f'input[aria-label="{label}"]')
        box.wait_for(timeout=60_000)
        box.scroll_into_view_if_needed()
        box.fill(typed)
        assert not page.locator('[data-testid="InputInstructions"]').filter(visible=True).count(), path
        box.press("Enter")
        lo, hi = label[label.rindex("(") + 1:-1].split(" – ")
        error = page.locator('[data-testid="stAlertContentError"]', has_text=f"takes {lo} to {hi}")
        error.wait_for(timeout=60_000)
        assert f"{int(typed):,} was not applied" in error.inner_text(), path
        page.wait_for_function(f"() => document.querySelector('input[aria-label=\"{label}\"]').value === '{kept}'",
                               timeout=60_000)
        # the query's values only: the server's port is random and may hold the typed digits (CI: port 49937, 99)
        assert typed not in [value for _, value in parse_qsl(urlsplit(page.url).query)], (path, page.url)
        assert not page.get_by_text("Ignored in the link").count(), path  # one message, beside the control
        assert not page.query_selector_all('[data-testid="stException"]'), path
        page.screenshot(path=str(ARTIFACTS / f"d16-{path}.png"))
    page.close()


def test_the_bar_on_a_phone_gives_the_title_its_own_row(lecture):
    """At 390 × 844 (tests/browser_cut_sweep.py --present) the bar squeezed the step's title into 45 px ("logari /
    thmic / bucke / ts"), cut Notes to its icon (a link, not a button: its column shrank with the title's), and filled
    half the screen, the subject starting ~460 px down. Below 640 px the title has a row above the buttons."""
    from browser_support import CLIPPED_JS
    from browser_cut_sweep import STEP_JS

    base, context = lecture
    page = context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    tour = tours.BUILTIN
    page.goto(f"{base}/tour?tour_pick={quote_plus(tour.title)}")
    wait_for_app(page)
    page.get_by_role("button", name="Start presenting").click()
    page.wait_for_selector(f"text={_bar_text(tour, 0)}", timeout=60_000)
    page.wait_for_function(SETTLED_JS, arg=[tour.steps[0].subject, tour.steps[0].subject], polling=100,
                           timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "bar-390x844.png"))
    title = page.locator(f".st-key-{lecture_mode_bar_key()} p", has_text=tour.steps[0].title).first.bounding_box()
    assert title is not None and title["width"] >= 250, title
    assert not [row for row in page.evaluate(CLIPPED_JS) if "Notes" in row[2]]
    subject, drawn, _ = page.evaluate(STEP_JS, tour.steps[0].subject)
    assert drawn and subject["top"] < 844 / 2, subject
    page.get_by_role("button", name="End").click()
    page.close()


def lecture_mode_bar_key() -> str:
    from relviz.app.lecture_mode import BAR_KEY

    return BAR_KEY
