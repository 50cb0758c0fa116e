"""The canvas components' tick steps in Chromium, on a blank page (no app server): each component's module as
Streamlit gets it (relviz.components), mounted on a div of a given width with a payload built by the library.

An axis that holds whole numbers (the xy canvas's positions and offsets, sent as int32) gets whole-number steps: a
2.5 step put a tick at 2.5 between positions 2 and 3, where plotly stepped by 2. The same picture with its x sent as
float64 may still step by 2.5 (the data decide, not the page), which also shows the sweep reaches that case."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from browser_support import CHROMIUM_ARGS, chromium_path
from relviz.components import toeplitz_canvas_js, xy_canvas_js
from relviz.figures.toeplitz_canvas import toeplitz_image
from relviz.figures.toeplitz_window import Window
from relviz.figures.xy_canvas import XYPanel, XYTrace, xy_image

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

#: Mount a component's module (a blob URL) once per width and return the root's data-ticks after each drawing.
MOUNT_JS = """async ([code, payload, widths, root]) => {
  const url = URL.createObjectURL(new Blob([code], {type: "text/javascript"}));
  const draw = (await import(url)).default;
  const out = [];
  for (const width of widths) {
    const parent = document.createElement("div");
    parent.style.width = width + "px";
    document.body.appendChild(parent);
    draw({data: payload, parentElement: parent});
    out.push(JSON.parse(parent.querySelector(root).dataset.ticks));
    parent.remove();
  }
  return out;
}"""
WIDTHS = list(range(240, 1441, 40))
LENGTHS = (3, 6, 8, 11, 12, 24, 30, 48, 64)


def shift_like(length: int, x_dtype) -> dict:
    """Two panels as the Absolute page's shift figure: bars over positions 0 … L − 1, a line over offsets."""
    positions = np.arange(length).astype(x_dtype)
    offsets = np.arange(-(length - 1), length).astype(x_dtype)
    rng = np.random.default_rng(length)
    left = XYPanel((XYTrace("bar", positions, rng.random(length), "#1f77b4", "moved", ("i = {x}",)),),
                   share=0.4, x_title="position i")
    right = XYPanel((XYTrace("line", offsets, rng.random(2 * length - 1), "#ff7f0e", "score", ("j − i = {x}",)),),
                    share=0.6, x_title="relative position j − i")
    return json.loads(json.dumps(xy_image((left, right)).payload()))


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            tab.set_content("<html><body style='margin:0'></body></html>")
            yield tab
        finally:
            browser.close()


def x_ticks(page, payload: dict) -> list[float]:
    drawn = page.evaluate(MOUNT_JS, [xy_canvas_js(), payload, WIDTHS, ".relviz-xy"])
    assert len(drawn) == len(WIDTHS)
    return [v for panels in drawn for panel in panels for v in panel["x"]]


def test_an_axis_of_whole_numbers_gets_whole_number_ticks_at_every_width(page):
    for length in LENGTHS:
        ticks = x_ticks(page, shift_like(length, np.int64))
        assert ticks and all(v == int(v) for v in ticks), (length, sorted({v for v in ticks if v != int(v)}))
    # the same positions sent as float64: the data, not the page, make the axis an integer one
    float_ticks = [v for length in LENGTHS for v in x_ticks(page, shift_like(length, np.float64))]
    assert 2.5 in float_ticks


def test_a_toeplitz_window_ticks_whole_indices(page):
    """The Toeplitz canvas's index axes step by the same whole-number rule (canvas_common.js's niceStep)."""
    per_offset = np.arange(-299, 300, dtype=np.int64)             # j − i of a 300 × 300 matrix
    image = toeplitz_image(per_offset, 300, 300, value_label="j − i", window=Window(17, 40, 130, 130))
    drawn = page.evaluate(MOUNT_JS, [toeplitz_canvas_js(), json.loads(json.dumps(image.payload())), WIDTHS,
                                     ".relviz-toeplitz"])
    steps = set()
    for width, ticks in zip(WIDTHS, drawn):
        for axis, first, last in (("x", 40, 169), ("y", 17, 146)):    # the window's columns and rows
            at = [int(label.replace("\u2212", "-")) for label in ticks[axis]]
            step = at[1] - at[0] if len(at) > 1 else next(s for s in (100, 50, 20, 10, 5, 2, 1) if at[0] % s == 0)
            # every multiple of one 1-2-5 step inside the window, and nothing else
            assert step in (1, 2, 5, 10, 20, 50, 100), (width, axis, at)
            assert at == list(range(-(-first // step) * step, last + 1, step)), (width, axis, at)
            steps.add(step)
    assert len(steps) >= 2   # the widths reach more than one step
