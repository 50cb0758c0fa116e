"""Teaching views in a real browser at projector size (1280 × 720): the main picture of each teaching
page is on the first screen, the T5 precision tab draws from a link, and the code block opens."""
from __future__ import annotations

import json
import os

import pytest

from browser_support import (
    CHROMIUM_ARGS,
    CLIPPED_JS,
    CUT_TEXT_JS,
    REPO,
    TITLES_CUT_JS,
    app_server,
    chromium_path,
    wait_for_app,
)

from relviz.app import tours
from relviz.app.controls import in_range

ARTIFACTS = REPO / "test-artifacts" / "browser"

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

#: Pages whose main picture leads the page. Live attention's is the chosen head beside its scheme's
#: position structure; Your model's is its default model's (a published config's) position structure,
#: under one row holding the picker and the length control. Check and Lecture mode are tool pages (a
#: form first, the picture follows an upload or a step), so they are not listed.
TEACHING = ["", "shaw", "t5", "skew", "absolute", "attention", "experiments", "rope", "your_model"]


#: Every note (plotly annotation) that runs left or right out of its chart's plot area, over the axis
#: labels or the margin: [chart index, text, px past the left edge (< 0), px before the right edge (< 0)].
NOTES_OUTSIDE_JS = """() => {
  const out = [];
  document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot').forEach((plot, k) => {
    const areas = Array.from(plot.querySelectorAll('.nsewdrag')).map(e => e.getBoundingClientRect())
      .filter(r => r.width);
    if (!areas.length) return;
    const left = Math.min(...areas.map(r => r.left)), right = Math.max(...areas.map(r => r.right));
    plot.querySelectorAll('.annotation').forEach(a => {
      const r = a.getBoundingClientRect();
      if (r.width && (r.left < left - 1 || r.right > right + 1))
        out.push([k, a.textContent.slice(0, 60), Math.round(r.left - left), Math.round(right - r.right)]);
    });
  });
  return out;
}"""


#: Each heatmap in a third of the page: [plot-area width, height, cell width / height, colour bar length or 0].
SMALL_HEATMAPS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot'))
  .filter(p => p.getBoundingClientRect().width < 400 && (p.data || []).some(t => t.type === 'heatmap'))
  .map(p => {
    const area = p.querySelector('.nsewdrag').getBoundingClientRect();
    const [x0, x1] = p._fullLayout.xaxis.range, [y0, y1] = p._fullLayout.yaxis.range;
    const cell = (area.width / Math.abs(x1 - x0)) / (area.height / Math.abs(y1 - y0));
    const bar = p.querySelector('.cbfill');
    const box = bar ? bar.getBoundingClientRect() : null;
    return [area.width, area.height, cell, box ? Math.max(box.width, box.height) : 0];
  })"""


@pytest.fixture(scope="module")
def projector():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with app_server() as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        yield base, page
        browser.close()


#: a page's pictures: plotly charts, and the ones relviz's canvas components draw (the Absolute page's maps, the
#: Experiments overview, the Skew page's steps)
PICTURES = ".js-plotly-plot, .relviz-toeplitz, .relviz-xy, .relviz-grid, .relviz-step"


def _open(page, url: str) -> None:
    page.goto(url)
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .main-svg, .relviz-step canvas", timeout=60000)
    page.wait_for_timeout(800)


#: The control each page's lesson is about (its label): on the first screen at 1280 × 720 and 1440 × 900,
#: above the navigation where it sits in the sidebar (before, the sidebar's page links came first and put
#: T5's num_buckets and Live attention's checkpoint near y ≈ 800).
FIRST_CONTROL = {"": "query i (the outlined row)", "shaw": "clipping distance k", "t5": "num_buckets",
                 "skew": "sequence length L", "absolute": "positions L",
                 "rope": "model (custom: set the head below)", "attention": "checkpoint", "your_model": "model",
                 "experiments": 'accuracy that counts as "resolved"', "check": "matrix kind (as --kind)",
                 "tour": in_range("start at step", 1, len(tours.BUILTIN.steps))}
#: The tool pages start with a form and no chart: Check waits for an upload, Lecture mode for a tour to start.
NO_CHART = ["check", "tour"]
SIDEBAR_CONTROLS = ["shaw", "t5", "attention", "check"]


def _inside_first_screen(page, label: str, height: int) -> dict:
    box = page.get_by_label(label, exact=True).first.bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= height, (label, box)
    return box


@pytest.mark.parametrize("path", TEACHING, ids=[p or "home" for p in TEACHING])
def test_main_picture_is_on_the_first_screen_at_1280x720(projector, path):
    base, page = projector
    _open(page, f"{base}/{path}")
    box = page.locator(PICTURES).first.bounding_box()
    page.screenshot(path=str(ARTIFACTS / f"projector_{path or 'home'}.png"))
    assert box is not None and box["y"] < 720
    visible = min(box["y"] + box["height"], 720) - max(box["y"], 0)
    assert visible >= 0.6 * box["height"], box
    _inside_first_screen(page, FIRST_CONTROL[path], 720)
    assert page.evaluate(CUT_TEXT_JS) == [], "text cut off with an ellipsis at 1280 × 720"
    assert page.evaluate(NOTES_OUTSIDE_JS) == [], "a chart's note runs out of its plot area"


@pytest.mark.parametrize("path", NO_CHART)
def test_a_tool_page_starts_with_its_first_control_on_the_first_screen(projector, path):
    base, page = projector
    page.goto(f"{base}/{path}")
    wait_for_app(page)
    _inside_first_screen(page, FIRST_CONTROL[path], 720)


@pytest.mark.parametrize("path", SIDEBAR_CONTROLS)
def test_sidebar_controls_come_before_the_navigation_at_1440x900(projector, path):
    base, page = projector
    page.set_viewport_size({"width": 1440, "height": 900})
    try:
        page.goto(f"{base}/{path}")
        wait_for_app(page)
        control = _inside_first_screen(page, FIRST_CONTROL[path], 900)
        first_link = page.locator('[data-testid="stSidebar"] [data-testid="stPageLink"]').first.bounding_box()
        assert first_link is not None and control["y"] < first_link["y"], (control, first_link)
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})


#: A projector at 1024 × 768 with the laptop's display scaled to 125 %: the page is 819 × 614 CSS pixels.
SCALED_PROJECTOR = {"width": 819, "height": 614}
#: Views with charts side by side or buttons in narrow columns, each with all its text whole at that size: Live
#: attention's head beside the longest structure title (FIRE) and its sequence row ("random example" was cut to
#: "rando…" at 1024 px, the structure's title to "…max_d"), the skew's downloads in a third of the page
#: ("Downl…") and its memory figures, Check's example button, RoPE's figures ("54,410 p…" at 1024 px) and its
#: content toggle, Absolute's toggles, Lecture mode's copy button. (The titles' widths are also held by
#: tests/test_display_defects.py, without a browser.)
NARROW_VIEWS = ["attention?at_ck=fire-shift", "skew", "check", "rope", "absolute", "tour"]


@pytest.mark.parametrize("path", NARROW_VIEWS)
def test_no_text_is_cut_on_a_projector_scaled_to_125_percent(projector, path):
    base, page = projector
    page.set_viewport_size(SCALED_PROJECTOR)
    try:
        page.goto(f"{base}/{path}")
        wait_for_app(page)
        page.wait_for_timeout(1500)   # every chart drawn
        page.screenshot(path=str(ARTIFACTS / f"scaled_projector_{path.split('?')[0]}.png"))
        assert page.evaluate(CUT_TEXT_JS) == [], "text cut off with an ellipsis at 819 × 614"
        assert page.evaluate(TITLES_CUT_JS) == [], "a chart's title runs off its chart at 819 × 614"
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})


#: Where tests/browser_cut_sweep.py found chart text cut (every page, tab and tour step at 1024 × 768 and 819 × 614),
#: each fixed in its figure, at the size it was found at: T5's map title, its curve's line notes, the budget's and
#: the composition's titles and axis title; the seed table's title beside Shaw's map; Shaw's three maps in thirds, its
#: table strip and its Table 2 chart; Images' M-RoPE pairs (title note and axis title); Your model's keys-seen panels
#: with two models side by side (the Today's models tour's last step); Images' Swin view (one query's bias, a plotly
#: map in half the page); Skew's encoder tab (its error map's title, 54 px past at 1024 px); Experiments at 819 px (the
#: offset chart's title, Table 2's title and axis title, the cost charts' legends, the chooser's chips); Absolute at
#: 819 px (ALiBi's distance axis title, and the main area scrolled sideways). Since CLIPPED_JS reads text drawn under
#: MIN_TEXT_PX and text clipped at its plot's edge, at 819 px also: T5's budget labels (shrunk to 6-9 px), its
#: layer-table cells and the seed table's label; Experiments' Table 2 end labels and its strips' s ranges.
CUT_VIEWS = [("t5", SCALED_PROJECTOR), ("t5?t5_tab=Compare+with+Shaw", SCALED_PROJECTOR), ("shaw", SCALED_PROJECTOR),
             ("images?im_view=M-RoPE+%28video%29&im_rows=16&im_cols=16&im_frames=4&im_rule=Qwen2.5-VL",
              SCALED_PROJECTOR),
             ("your_model?ym_model=Llama-3.1+8B+%28published+config%29&ym_vs=Llama+4+Scout+17B-16E+%28published+"
              "config%29&ym_layer=3&ym_layer2=3&ym_view=pattern", {"width": 1024, "height": 768}),
             ("images?im_view=Swin%27s+bias+table", SCALED_PROJECTOR),
             ("skew?skew_tab=Bidirectional+skew+%28encoder%29", {"width": 1024, "height": 768}),
             ("experiments", SCALED_PROJECTOR), ("absolute", SCALED_PROJECTOR)]
CUT_IDS = ["t5-819", "t5-compare-819", "shaw-819", "images-mrope-819", "your_model-compare-1024", "images-swin-819",
           "skew-encoder-1024", "experiments-819", "absolute-819"]


@pytest.mark.parametrize("path, size", CUT_VIEWS, ids=CUT_IDS)
def test_no_chart_text_runs_off_its_chart_where_the_cut_sweep_found_it(projector, path, size):
    base, page = projector
    page.set_viewport_size(size)
    try:
        page.goto(f"{base}/{path}")
        wait_for_app(page)
        page.wait_for_function("""() => document.querySelectorAll('.js-plotly-plot').length > 0 && Array.from(
            document.querySelectorAll('.js-plotly-plot')).every(p => p.querySelector('.main-svg'))""", timeout=60000)
        page.wait_for_timeout(800)   # plotly's relayout to its column's width
        for chart in page.query_selector_all('[data-testid="stMain"] .js-plotly-plot'):
            chart.scroll_into_view_if_needed()   # one below the fold is laid out to its width once seen
        page.wait_for_timeout(400)
        page.screenshot(path=str(ARTIFACTS / f"cut_{CUT_IDS[CUT_VIEWS.index((path, size))]}.png"))
        assert [cut for cut in page.evaluate(CLIPPED_JS) if cut[0] != "scrolls"] == []
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})


def test_t5_precision_tab_from_a_link(projector):
    base, page = projector
    _open(page, f"{base}/t5?t5_nb=34&t5_md=27&t5_tab=Precision+%26+references")
    assert page.get_by_text("T5 buckets in float32, bfloat16 and float16").count() >= 1
    assert page.get_by_text("Mesh TensorFlow ≠ Hugging Face (relviz): 2 offsets").count() == 1
    assert not page.query_selector_all('[data-testid="stException"]')


def test_code_for_this_view_opens_with_the_exact_settings(projector):
    base, page = projector
    _open(page, f"{base}/shaw?sh_clip=5")
    assert page.locator('[data-testid="stCode"]').count() == 0  # lazy: no code until opened
    page.get_by_text("Code for this view (PyTorch)").first.click()
    page.wait_for_selector('[data-testid="stCode"]', timeout=60_000)  # the expander reruns to send it
    code = page.locator('[data-testid="stCode"]').first.inner_text()
    assert "shaw_clip_index(10, 10, k=5, q_offset=0" in code


@pytest.mark.parametrize("path", ["shaw", "skew?skew_L=16", "skew?skew_L=3"])
def test_small_matrices_keep_square_cells_and_their_width_at_1280x720(projector, path):
    """In a third of the page a matrix keeps square-ish cells, the one with the colour bar is not
    squeezed narrower than its neighbours, and the bar spans most of the plot (not a stub)."""
    base, page = projector
    _open(page, f"{base}/{path}")
    charts = page.evaluate(SMALL_HEATMAPS_JS)
    for step in page.locator(".relviz-step").all():   # the Skew page's steps: canvases (components/step_canvas.js)
        plot = json.loads(step.get_attribute("data-plot"))
        charts.append([plot["cell"] * plot["cols"], plot["cell"] * plot["rows"], 1.0, plot["bar"]])
    assert len(charts) >= 3, charts
    widths = sorted(width for width, *_ in charts)
    for width, height, cell, bar in charts:
        assert 0.8 <= cell <= 1.25, (path, charts)
        assert width >= 0.9 * widths[len(widths) // 2], (path, charts)
        assert bar == 0 or bar >= 0.8 * width, (path, charts)


#: What a projector shows wrong in a chart, found by the text's boxes: a title wider than its chart, two texts
#: on each other (labels, notes, a cell's label drawn twice), a note under data markers, a legend over an
#: axis title or scrolling, a bar's label shrunk or turned to fit: [chart, problem, text].
CHART_CLASHES_JS = r"""() => {
  const out = [];
  const R = e => e.getBoundingClientRect();
  const inter = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left))
                        * Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const area = r => r.width * r.height;
  document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot').forEach((plot, k) => {
    const svg = R(plot.querySelector('.main-svg'));
    const name = (plot.layout && plot.layout.title && plot.layout.title.text || '') + '#' + k;
    const title = plot.querySelector('.gtitle');
    if (title && (R(title).right > svg.right + 1 || R(title).left < svg.left - 1))
      out.push([name, 'title cut', title.textContent]);
    const texts = Array.from(plot.querySelectorAll('.textpoint text, .annotation-text, .hm text, .heatmaplayer text, .bartext'))
      .filter(e => e.textContent.trim() && area(R(e)) > 0);
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++) {
        const a = R(texts[i]), b = R(texts[j]);
        if (inter(a, b) > 0.2 * Math.min(area(a), area(b)))
          out.push([name, 'texts overlap', texts[i].textContent + ' | ' + texts[j].textContent]);
      }
    const points = Array.from(plot.querySelectorAll('.scatterlayer .points path.point')).map(R).filter(r => area(r) > 0);
    plot.querySelectorAll('.annotation-text').forEach(a => {
      const r = R(a);
      if (points.some(p => inter(r, p) > 0.3 * area(p))) out.push([name, 'note under markers', a.textContent]);
    });
    const legend = plot.querySelector('.legend .bg');
    if (legend) {
      const l = R(legend);
      plot.querySelectorAll('.xtitle, .ytitle').forEach(t => {
        if (inter(l, R(t)) > 0) out.push([name, 'legend over axis title', t.textContent]);
      });
      const bar = plot.querySelector('.legend .scrollbar');
      if (bar && R(bar).height > 0) out.push([name, 'legend scrolls', '']);
    }
    plot.querySelectorAll('.bartext').forEach(t => {
      const tr = t.getAttribute('transform') || '';
      const size = parseFloat(getComputedStyle(t).fontSize);
      if (/rotate\((?!0)/.test(tr) || size < 11) out.push([name, 'bar text squeezed', t.textContent + ' ' + size + tr]);
    });
  });
  return out;
}"""

#: The views where a teacher found these (issue 26, defects 2-7): Experiments' Table 2 title and labels, the
#: training-length note under the ✕ markers, the memory chart's legend; T5's bucket budget (a one-bucket bar's
#: label) and curve legend; the skew's hatched cells; a 32-head ALiBi model's legend.
CLASH_VIEWS = ["experiments", "t5?t5_bi=false", "t5", "skew?skew_L=6",
               "your_model?ym_model=MPT-7B+instruct+(published+config)", "rope?rp_m=3&rp_n=9"]


@pytest.mark.parametrize("path", CLASH_VIEWS)
def test_chart_texts_do_not_collide_at_1280x720(projector, path):
    base, page = projector
    page.set_viewport_size({"width": 1280, "height": 1400})  # same width; a tall chart is drawn whole
    try:
        _open(page, f"{base}/{path}")
        for chart in page.query_selector_all(".js-plotly-plot"):
            chart.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        assert page.evaluate(CHART_CLASHES_JS) == []
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})


def test_pages_load_nothing_from_outside_the_app_server(projector):
    """Defect 10: the favicon (a material icon) came from an outside font server, which fails offline in a
    lecture hall; an emoji icon is drawn by the page itself."""
    base, page = projector
    outside: list[str] = []
    listener = lambda request: outside.append(request.url) if not request.url.startswith((base, "data:")) else None
    page.on("request", listener)
    try:
        for path in ["", "t5"]:
            _open(page, f"{base}/{path}")
        icons = page.evaluate("() => Array.from(document.querySelectorAll('link[rel~=icon]')).map(e => e.href)")
    finally:
        page.remove_listener("request", listener)
    assert icons and all(icon.startswith(("data:", base)) for icon in icons), icons
    assert outside == []


def test_an_absolute_shift_move_redraws_its_canvas_in_place_with_the_hover_in_the_browser(projector):
    """The shift figure is drawn by relviz's xy canvas (relviz/components/xy_canvas.js): an arrow key on the shift
    redraws the same element (its draw counter goes on, a mark set on it stays), where the plotly figure it replaced
    was a new chart on every move; its titles name the new shift, hovering the right panel gives j − i and the
    dot product there, and its button downloads the picture as PNG."""
    base, page = projector
    _open(page, f"{base}/absolute?abs_L=64&abs_d=64&abs_shift=10")
    root = page.locator(".st-key-abs_fig_shift .relviz-xy")
    root.wait_for(timeout=60000)
    root.scroll_into_view_if_needed()
    before = int(root.get_attribute("data-draws"))
    root.evaluate("r => { r.dataset.mark = 'kept'; }")
    assert root.locator("canvas").get_attribute("aria-label").startswith("absolute: PE(i + 10) − PE(i)")
    page.get_by_role("slider", name="shift the whole sequence by s").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("""() => [...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)
        .map(s => s.querySelector('.relviz-xy canvas')).filter(Boolean)
        .some(c => c.getAttribute('aria-label').startsWith('absolute: PE(i + 11) − PE(i)'))""", timeout=60000)
    assert root.get_attribute("data-mark") == "kept" and int(root.get_attribute("data-draws")) > before
    assert page.locator(".st-key-abs_fig_shift .js-plotly-plot").count() == 0
    canvas = root.locator("canvas").bounding_box()
    root.locator("canvas").hover(position={"x": canvas["width"] * 0.8, "y": canvas["height"] * 0.4})
    tip = root.locator(".relviz-tooltip")
    tip.wait_for(state="visible", timeout=10000)
    assert "j − i = " in tip.inner_text()
    with page.expect_download(timeout=20000) as download:                  # its PNG, as the plotly chart's camera
        root.locator(".relviz-download").click()
    assert download.value.suggested_filename == "sinusoidal_shift_L64_d64_s11.png"


def test_the_skew_steps_redraw_in_place_and_hover_each_cell(projector):
    """The Skew page's steps are canvases (relviz/components/step_canvas.js): an L move redraws the same element
    (a changed plotly chart was mounted anew), at the new size; a cell's hover is its step's hover text (step 4,
    row 0, column 2: garbage that came from row 1)."""
    base, page = projector
    _open(page, f"{base}/skew?skew_L=6")
    step4 = page.locator(".relviz-step").nth(3)
    step4.scroll_into_view_if_needed()
    plot = json.loads(step4.get_attribute("data-plot"))
    assert (plot["rows"], plot["cols"]) == (6, 6)
    box = step4.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + plot["x0"] + 2.5 * plot["cell"], box["y"] + plot["y0"] + 0.5 * plot["cell"])
    tip = step4.locator(".relviz-tooltip")
    tip.wait_for(state="visible", timeout=10_000)
    assert "query i = 0, key j = 2" in tip.inner_text() and "garbage: from row 1" in tip.inner_text()
    handle, draws = step4.element_handle(), int(step4.get_attribute("data-draws"))
    page.get_by_role("slider", name="sequence length L").focus()
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("([el, n]) => Number(el.dataset.draws) > n && JSON.parse(el.dataset.plot).rows === 5",
                           arg=[handle, draws], timeout=60_000)
