"""The Experiments overview in a real browser (relviz/components/grid_canvas.js): a threshold move redraws the same
canvas element in place, the ✓ marks sit in the cells at or above the threshold, and the hover of a cell says what
its plotly twin says. The screenshot goes to test-artifacts/browser/experiments-overview-1440x900.png."""
from __future__ import annotations

import base64
import os

import pytest

from browser_support import CHROMIUM_ARGS, REPO, app_server, chromium_path, wait_for_app
from relviz import experiments as ex
from relviz.figures.experiments import offset_overview_canvas

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

#: how many pixels of cell (panel, row, col) differ from its fill colour (the ✓ drawn over it), in CSS px at ratio 1
MARKED_JS = """(root, [panel, row, col]) => {
  const box = JSON.parse(root.dataset.panels)[panel], canvas = root.querySelector('canvas');
  const x = Math.round(box.x + col * box.cw + 3), y = Math.round(box.y + row * box.ch + 3);
  const pixels = canvas.getContext('2d').getImageData(x, y, Math.floor(box.cw) - 6, Math.floor(box.ch) - 6).data;
  let marked = 0;
  for (let k = 0; k < pixels.length; k += 4) {
    if (Math.abs(pixels[k] - pixels[0]) + Math.abs(pixels[k + 1] - pixels[1]) + Math.abs(pixels[k + 2] - pixels[2]) > 24)
      marked++;
  }
  return marked;
}"""


def test_a_threshold_move_redraws_the_overview_in_place():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    payload = offset_overview_canvas(ex.load_results()["experiments"]["offset_resolution"], 0.55).payload()
    first = payload["panels"][0]
    marks = list(base64.b64decode(first["marks"]))
    cols = len(first["columns"])
    ticked, plain = marks.index(1), next(k for k, m in enumerate(marks) if not m and k // cols == marks.index(1) // cols)
    with app_server() as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.goto(f"{base}/experiments?ex_thr=0.5")
            wait_for_app(page)
            root = page.locator(".relviz-grid")
            root.wait_for()
            root.evaluate("el => { el.__first = true; }")
            draws = int(root.get_attribute("data-draws"))
            page.get_by_role("slider", name='accuracy that counts as "resolved"').focus()
            page.keyboard.press("ArrowRight")                                # 0.50 -> 0.55
            for _ in range(100):                                             # the rerun's drawing, within 10 s
                if int(root.get_attribute("data-draws")) > draws:
                    break
                page.wait_for_timeout(100)
            assert root.evaluate("el => el.__first === true")                # the same element, redrawn in place
            assert int(root.get_attribute("data-draws")) > draws
            assert "at least 55%" in root.locator("canvas").get_attribute("aria-label")
            # a ticked cell holds the ✓, an unticked one of the same row nothing but its colour
            assert root.evaluate(MARKED_JS, [0, ticked // cols, ticked % cols]) > 5
            assert root.evaluate(MARKED_JS, [0, plain // cols, plain % cols]) == 0
            # the hover of the first cell is its plotly twin's
            box = root.locator("canvas").bounding_box()
            panel = root.evaluate("el => JSON.parse(el.dataset.panels)[0]")
            page.mouse.move(box["x"] + panel["x"] + panel["cw"] / 2, box["y"] + panel["y"] + panel["ch"] / 2)
            tip = root.locator(".relviz-tooltip")
            tip.wait_for()
            assert tip.inner_text().splitlines() == first["hover"][0]
            page.screenshot(path=str(ARTIFACTS / "experiments-overview-1440x900.png"))
        finally:
            browser.close()
