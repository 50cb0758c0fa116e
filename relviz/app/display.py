"""How the pages show things: the sign-convention note, titles, plotly figures with PNG/SVG export, the
Toeplitz canvas, the large-matrix overview panel, code blocks and library errors as on-page messages.

Exists so that every page draws the same way (one export switch, one hover canvas, one error style).
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import plotly.graph_objects as go
import streamlit as st

from relviz.app import internals
from relviz.app.lecture_mode import presenting
from relviz.components import component_js

SIGN_CONVENTION = ("**Sign convention:** relative position = **j − i** = key position − query position. "
                   "Negative: the key lies in the past of the query; positive: in its future.")

#: What plotly's camera button downloads: PNG at twice the shown size (sharp on a projector) or
#: SVG (vector, for papers). plotly.js has one image button, so the sidebar picks its format.
EXPORT_FORMATS = {"PNG": {"format": "png", "scale": 2}, "SVG": {"format": "svg"}}
EXPORT_KEY = "chart_export"


def plotly_config(export: str = "PNG") -> dict:
    """The chart config: no plotly logo, and of plotly's toolbar only the camera button (the chosen format, default
    PNG). The full toolbar (zoom, pan, box select, autoscale: nine buttons) appeared over the chart's title and
    legend wherever the pointer rested; dragging still zooms and a double click still resets. While a tour step is
    on a projector, no toolbar at all."""
    config = {"displaylogo": False, "toImageButtonOptions": dict(EXPORT_FORMATS.get(export, EXPORT_FORMATS["PNG"])),
              "modeBarButtons": [["toImage"]]}
    if presenting():
        config["displayModeBar"] = False
    return config


def export_format_control() -> None:
    """The sidebar's choice of the camera button's format, shared by every chart of every page."""
    st.segmented_control("chart download (camera icon)", list(EXPORT_FORMATS), default="PNG", required=True,
                         key=EXPORT_KEY, bind="query-params",
                         help="PNG for slides and the web; SVG (vector) for papers.")


SIGN_CONVENTION_SHORT = ("**Sign convention:** relative position = **j − i** = key − query "
                         "(negative: the key lies in the query's past).")


def sign_convention(*, compact: bool = False) -> None:
    """The sign-convention note; ``compact`` is one line, so the page's main picture fits on a
    1280 × 720 projector screen. While a tour runs the presenter bar says it instead (one short line)."""
    if not presenting():
        st.info(SIGN_CONVENTION_SHORT if compact else SIGN_CONVENTION, icon=":material/swap_horiz:")


def page_title(title: str) -> None:
    """The page's title; while a tour runs the presenter bar shows the step's title instead, so on a
    1280 × 720 projector the step's picture starts ~150 px higher."""
    if not presenting():
        st.title(title)


def show_figure(figure: go.Figure, *, key: str) -> None:
    """Draw a plotly figure with the PNG/SVG export button; ``key`` keeps it stable across reruns.

    The format is the sidebar control's, or on a link's first run (app.py draws the sidebar after the
    page, so the control has no value yet) the link's.

    st.plotly_chart encodes the figure's JSON on every run (plotly.io.to_json; Streamlit 1.67 takes a figure, a dict
    or a list, never JSON): a cached figure (:func:`prepared_spec`) skips plotly's copy and validation, not that.
    For a 512 × 512 map that is ~7.6 ms CPU with plotly's "json" engine (the base64 holds "NaN", so plotly decodes
    and encodes it again) and ~2.4 ms with orjson, which plotly's "auto" engine takes where it is installed; the
    class bench saw no difference on Absolute at L = 512 (28 Nov 2026, under load)."""
    export = st.session_state.get(EXPORT_KEY) or st.query_params.get(EXPORT_KEY) or "PNG"
    st.plotly_chart(figure, key=key, config=plotly_config(export), width="stretch")


def prepared(data: list[dict], layout: dict):
    """A figure for :func:`show_figure` from its trace and layout dicts (e.g. relviz.figures.attention's
    ``*_parts``), encoded once and sent as it is on every run: for cached figures that a move rebuilds and every
    run draws (relviz.app.internals.prepared_figure says what it skips and why)."""
    return internals.prepared_figure(data, layout)


def prepared_spec(spec: dict):
    """:func:`prepared` for a figure's finished dict (``Figure.to_dict()``, or a shallow edit of one)."""
    return internals.prepared_spec(spec)


def outline_css(key: str, bars: list[tuple[int, int]]) -> str:
    """CSS that outlines bars of the bar chart inside the element keyed ``key``: (t, p) is trace t's point p, which
    plotly.js draws as the p-th bar of the t-th bar group. "" for no bars."""
    cells = ",".join(f".st-key-{key} .barlayer > .trace:nth-child({t + 1}) .point:nth-child({p + 1}) path"
                     for t, p in bars)
    return f"<style>{cells}{{stroke:#111 !important;stroke-width:2px !important}}</style>" if cells else ""


def outline_bars(key: str, bars: list[tuple[int, int]]) -> None:
    """Outline ``bars`` (:func:`outline_css`) of a chart whose figure stays the same: a style-only st.html block
    draws no element, and Streamlit neither re-sends nor redraws the unchanged chart (a changed figure is a new
    chart to the browser, drawn from scratch). Your model's strip marks its chosen layer so."""
    css = outline_css(key, bars)
    if css:
        st.html(css)


#: relviz's canvas components: Streamlit's name -> the file (relviz/components/) with its own JavaScript
_COMPONENT_FILES = {"relviz_toeplitz_canvas": "toeplitz_canvas.js", "relviz_xy_canvas": "xy_canvas.js",
                    "relviz_grid_canvas": "grid_canvas.js", "relviz_step_canvas": "step_canvas.js"}
#: the components whose elements sit in the page's own DOM, not a shadow root: the Skew steps' titles, captions and
#: check are text a visitor reads, which the page's checks of cut text (tests/browser_support.CLIPPED_JS) and its
#: readers find there; their styles are the component's own classes ("relviz-steps …") and inline
_IN_PAGE_DOM = frozenset({"relviz_step_canvas"})
_components: dict[str, object] = {}   # each registered once per process, on its first use


def _mount(component: str, payload: dict | str, *, key: str, **fields) -> None:
    """Draw ``payload`` with the canvas component ``component``, with ``fields`` beside it and the PNG button unless
    a lecture is on the projector. A str payload is its JSON already (:func:`canvas_json`): the component gets
    ``{"json": payload}``, all scalars. A dict holding lists makes Streamlit ask, for each, whether it is a
    dataframe, which imports pandas and pyarrow on a server's first canvas (~0.5-2 s of a cold first run) and walks
    the dict on every run."""
    if component not in _components:
        _components[component] = st.components.v2.component(component, js=component_js(_COMPONENT_FILES[component]),
                                                             isolate_styles=component not in _IN_PAGE_DOM)
    data = {"json": payload} if isinstance(payload, str) else payload
    _components[component](key=key, data=data | fields | {"toolbar": not presenting()}, width="stretch",
                           height="content")


def show_toeplitz(view, *, key: str, name: str = "relviz") -> None:
    """Draw what figures.toeplitz.toeplitz_view (or an overview builder, or a GridImage builder) returned, or what
    :func:`drawable` made of it: a plotly figure as :func:`show_figure` does, a picture described by its per-offset
    data (``.payload()``, or its JSON) with the canvas component, which draws it and computes the hover in the
    browser. ``name``: the PNG's file name."""
    if isinstance(view, str):
        show_canvas(view, key=key, name=name)
    elif hasattr(view, "payload"):
        show_canvas(view.payload(), key=key, name=name)
    else:
        show_figure(getattr(view, "figure", view), key=key)


def drawable(view):
    """What :func:`show_toeplitz` sends for ``view``, made once for a page's cache (cache_resource) to hold: a canvas
    picture (``.payload()``) as its JSON (:func:`canvas_json`), a plotly one (a toeplitz_view's ``.figure``, or a
    figure) as the dict it sends (:func:`prepared_spec`). Sent as it is on every run: a payload dict was rebuilt
    (its per-offset lists) and walked by Streamlit on each, and a go.Figure deep-copied and validated."""
    payload = getattr(view, "payload", None)
    if payload is not None:
        return canvas_json(payload())
    return prepared_spec(getattr(view, "figure", view).to_dict())


def show_canvas(payload: dict | str, *, key: str, name: str = "relviz") -> None:
    """Draw a picture's payload (``.payload()`` of a figures.toeplitz_canvas image), or its JSON
    (:func:`canvas_json`, as a page's cache keeps it), with the Toeplitz canvas component."""
    _mount("relviz_toeplitz_canvas", payload, key=key, name=name)


def canvas_json(payload: dict) -> str:
    """A canvas payload as the JSON string the show_* functions below send as it is."""
    return json.dumps(payload, separators=(",", ":"))


def show_xy(payload: dict | str, *, key: str, name: str = "relviz") -> None:
    """Draw an XYImage's payload (relviz.figures.xy_canvas: bars, lines, ranges in panels), or its JSON
    (:func:`canvas_json`), with the xy canvas component (relviz/components/xy_canvas.js): a move that changes it
    redraws the same element in place. ``name``: the PNG's file name."""
    _mount("relviz_xy_canvas", payload, key=key, name=name)


def show_grid_panels(payload: dict | str, *, key: str) -> None:
    """Draw a GridPanels payload (relviz.figures.grid_canvas: labelled heatmaps in panels, with marks), or its JSON
    (:func:`canvas_json`), with the grid canvas component (relviz/components/grid_canvas.js): a move that changes it
    redraws the same element in place."""
    _mount("relviz_grid_canvas", payload, key=key)


def show_steps(steps: str, *, key: str) -> None:
    """Draw skew steps (relviz.figures.skew_canvas.steps_json: the steps' titles, pictures and captions and a check
    panel, in a grid) with the steps component (relviz/components/step_canvas.js), one element for the grid: a move
    that changes them redraws the same pictures in place, and Streamlit re-renders one element, not a title, a
    canvas and a caption per step."""
    _mount("relviz_step_canvas", steps, key=key)


def code_for_this_view(code: str, *, note: str = "", key: str | None = None) -> None:
    """A collapsed 'Code for this view' block: PyTorch that reproduces the picture above (relviz.snippets).

    With ``key`` the block is lazy: its code is sent only once the visitor opens it. A closed
    st.code still makes the browser fetch and compile Streamlit's syntax highlighter (1.5 MB of
    JavaScript) before the page settles, which the landing page's first paint cannot afford.
    """
    expander = st.expander("Code for this view (PyTorch)", icon=":material/code:",
                           **({"key": key, "on_change": "rerun"} if key else {}))
    if key and not expander.open:
        return
    with expander:
        if note:
            st.caption(note)
        st.code(code, language="python")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Show a library ValueError as st.error (its message names the parameter) instead of a traceback.

    Only the block inside stops; everything after it on the page still runs.
    """
    try:
        yield
    except ValueError as error:
        st.error(str(error), icon=":material/error:")


def pooled_overview(view, *, block: int, q_len: int, k_len: int, q_offset: int, window,
                    quantity: str, note: str, key: str) -> None:
    """The large-matrix panel of the Shaw and T5 pages: the pooled overview (figures.toeplitz's
    ToeplitzOverview or ToeplitzOverviewImage, or what :func:`drawable` made of one), whose blocks are ``block``
    entries a side, beside what it shows and which exact window the full-resolution figures below hold
    (``window``: figures.toeplitz_window.Window)."""
    st.markdown(f"#### The matrix is {q_len} × {k_len}: too large to draw cell by cell")
    left, right = st.columns(2)
    with left:
        show_toeplitz(view, key=key, name=f"{quantity}_overview_{q_len}x{k_len}")
    with right:
        st.markdown(
            f"**Downsampled overview (left).** Each cell stands for a block of {block:,} × {block:,} entries, "
            f"coloured by the block's exact **mean** {quantity}; hover gives its exact **min** and **max** "
            f"{quantity} and its range of j − i. {note}")
        if block > 1:
            st.markdown(
                f"**What it hides:** the cells inside a block. Every offset with |j − i| < {block:,} falls in the "
                "blocks along the diagonal, so the exact band near the diagonal shows there only as a blend (and "
                "its min…max): read it in the full-resolution window, which is exact, one cell per entry.")
        st.markdown(
            f"**Full resolution (below).** Rows {q_offset + window.row0}…{q_offset + window.row0 + window.rows - 1}, "
            f"columns {window.col0}…{window.col0 + window.cols - 1}, exact: the rectangle on the overview. Move it "
            "with the window sliders.")
