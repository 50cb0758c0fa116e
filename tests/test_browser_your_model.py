"""Your model in a real browser: the strip and a layer view drawn for today's models at projector and laptop
sizes, a click on the strip picks the layer, and the 'Position in today's models' tour runs start to end."""
from __future__ import annotations

import os
import urllib.parse

import pytest

from browser_support import CHROMIUM_ARGS, REPO, app_server, chromium_path, wait_for_app
from relviz.app.tours import TODAY

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

MODELS = {"gemma3": ("Gemma 3 27B (published config)", 5, 62, "wavelength"),
          "scout": ("Llama 4 Scout 17B-16E (published config)", 3, 48, "Query temperature"),
          "gptoss": ("GPT-OSS 20B (published config)", 0, 24, "sink takes")}

#: Per chart on the page: its bar count (the strip's cells) and whether it has drawn traces.
CHARTS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')).map(div => ({
  bars: (div.data || []).filter(t => t.type === 'bar').reduce((n, t) => n + t.x.length, 0),
  traces: div.querySelectorAll('.trace, .barlayer .point').length,
  top: div.getBoundingClientRect().top}))"""


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield base, chromium
        chromium.close()


def _open(page, base: str, **params) -> None:
    page.goto(f"{base}/your_model?{urllib.parse.urlencode(params)}")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60000)
    page.wait_for_function("document.querySelectorAll('[data-testid=\"stMain\"] .js-plotly-plot').length >= 2",
                           timeout=60000)
    page.wait_for_timeout(500)


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)], ids=["1280x720", "1440x900"])
@pytest.mark.parametrize("name", list(MODELS))
def test_strip_and_layer_view_are_drawn(browser, name, size):
    base, chromium = browser
    label, layer, layers, title = MODELS[name]
    page = chromium.new_page(viewport={"width": size[0], "height": size[1]})
    try:
        _open(page, base, ym_model=label, ym_layer=layer)
        charts = page.evaluate(CHARTS_JS)
        strip = charts[0]
        rows = 3                     # position, keys seen, softmax (Gemma's query_pre_attn_scalar; GPT-OSS's sinks)
        assert strip["bars"] == layers * rows - (36 if name == "scout" else 0), strip   # one cell per layer and row
        assert 0 <= strip["top"] < size[1] * 0.75, strip                                # on the first screen
        assert all(c["traces"] > 0 for c in charts), charts                             # every view drawn
        assert page.get_by_text(title).first.is_visible()
        page.screenshot(path=str(ARTIFACTS / f"your_model_{name}_{size[0]}x{size[1]}.png"))
    finally:
        page.close()


def test_a_click_on_the_strip_picks_the_layer(browser):
    base, chromium = browser
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    try:
        _open(page, base, ym_model=MODELS["scout"][0], ym_layer=0)
        strip = page.locator('[data-testid="stMain"] .js-plotly-plot').first
        # the NoPE trace's first bar is layer 3; plotly takes clicks on its drag layer, so click where it is drawn
        nope = page.evaluate("""() => document.querySelector('[data-testid="stMain"] .js-plotly-plot').data
                                .findIndex(t => t.name.includes('NoPE'))""")
        box = strip.locator(".barlayer .trace").nth(nope).locator(".point path").first.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function("new URL(location.href).searchParams.get('ym_layer') === '3'", timeout=30000)
        page.get_by_text("No position on this layer").first.wait_for(timeout=30000)
    finally:
        page.close()


#: The strip's outlined bars, as the layer each one draws (its trace's x at its place among the trace's bars).
OUTLINED_JS = """() => { const div = document.querySelector('.st-key-ym_strip .js-plotly-plot');
  return Array.from(div.querySelectorAll('.barlayer > .trace')).flatMap((group, t) =>
    Array.from(group.querySelectorAll('.point path')).flatMap((path, p) =>
      getComputedStyle(path).strokeWidth === '2px' ? [div.data[t].x[p]] : [])); }"""


#: the page's introduction, outside the layer's fragment: a whole-page run sends it, the fragment's rerun does not
INTRO = "Each layer of a real model, from its config.json".encode()


def test_a_layer_move_outlines_its_layer_without_drawing_the_strip_again(browser):
    """The strip is one figure for every layer: a slider move outlines the new layer's cells (and only those) on
    the same chart, which plotly does not draw again. The move reruns the layer's fragment alone: no websocket
    message after it carries the page's introduction, which the page's first run sent."""
    base, chromium = browser
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    frames: list[bytes] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(
        payload if isinstance(payload, bytes) else payload.encode())))
    try:
        _open(page, base, ym_model=MODELS["gemma3"][0], ym_layer=5)
        wait_for_app(page)
        assert any(INTRO in frame for frame in frames)               # the first run sent the whole page
        frames.clear()
        assert page.evaluate(OUTLINED_JS) == [5, 5, 5]               # position, keys seen, softmax
        page.evaluate("""() => { const div = document.querySelector('.st-key-ym_strip .js-plotly-plot');
                                 div.dataset.before = 'yes'; window.__strip_draws = 0;
                                 div.on('plotly_afterplot', () => { window.__strip_draws += 1; }); }""")
        page.get_by_role("slider", name="layer").focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("new URL(location.href).searchParams.get('ym_layer') === '6'", timeout=30000)
        page.wait_for_function(f"({OUTLINED_JS})().join() === '6,6,6'", timeout=30000)
        wait_for_app(page)
        assert page.evaluate("document.querySelector('.st-key-ym_strip .js-plotly-plot').dataset.before") == "yes"
        assert page.evaluate("window.__strip_draws") == 0
        assert frames and not any(INTRO in frame for frame in frames)   # the move's rerun: the fragment alone
    finally:
        page.close()


def test_todays_models_tour_runs_start_to_end(browser):
    base, chromium = browser
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{base}/tour?{urllib.parse.urlencode({'tour_pick': TODAY.title})}")
        wait_for_app(page)
        page.get_by_role("button", name="▶ Start presenting").click()
        for number, step in enumerate(TODAY.steps, start=1):
            page.get_by_text(f"{number} / {len(TODAY.steps)} · {step.title}").first.wait_for(timeout=60000)
            # the step's subject chart is drawn and shown (a lecture hides what stands above it, since 514adc9)
            page.wait_for_selector(f'[data-testid="stMain"] .st-key-{step.subject} .js-plotly-plot .main-svg',
                                   timeout=60000)
            if step.page != "your_model":  # a step on another page (images): drawn, no error, then on
                assert not page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()
                page.get_by_role("button", name="Next ▶" if number < len(TODAY.steps) else "Finish").click()
                continue
            picked = page.locator('[data-testid="stMain"] input[aria-label="model"]')
            page.wait_for_function("v => document.querySelector('[data-testid=\"stMain\"] input[aria-label=\"model\"]')"
                                   ".value === v", arg=step.params["ym_model"], timeout=30000)
            assert picked.input_value() == step.params["ym_model"], number
            # the layer's heading is drawn (hidden on the projector when it stands above the subject)
            page.get_by_text(f"layer {step.params['ym_layer']}").first.wait_for(state="attached", timeout=30000)
            for key, label in (("ym_layer", "layer"), ("ym_view", "show")):
                if key in step.params:      # the step's value, not the one the previous step left on screen
                    settled = ("([l, v]) => { const found = document.querySelectorAll(`[data-testid=\"stMain\"] "
                               "input[aria-label=\"${l}\"]`); return found.length === 1 && found[0].value === v; }")
                    page.wait_for_function(settled, arg=[label, step.params[key]], timeout=30000)
            assert not page.get_by_text("Ignored in the link").count(), number
            assert not page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()
            page.get_by_role("button", name="Next ▶" if number < len(TODAY.steps) else "Finish").click()
        page.get_by_text("Make your own tour").first.wait_for(timeout=60000)
    finally:
        page.close()
