"""Streamlit helpers shared by the pages (the only relviz module that imports streamlit).

Keeps the pages thin: page registry, the sign-convention note, figure display with PNG
export, matrix downloads, and turning a library ValueError into an on-page message.
"""
from __future__ import annotations

import contextlib
import functools
import io
import math
import runpy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
import threading
from typing import TYPE_CHECKING, NoReturn, TypeVar

import plotly.graph_objects as go
import streamlit as st

from relviz.app import internals as app_internals
from relviz.app.lectures import Lectures
from relviz.app.tours import PAGE_PARAMS, Step, check_step, page_keys, page_param
from relviz.components import toeplitz_canvas_js
if TYPE_CHECKING:  # imported where used: torch loads only on a page that trains or measures, numpy only
    import numpy as np  # where a page offers downloads (the landing page's first visitor skips its import)

    from relviz.app.training_queue import SessionTrainings

T = TypeVar("T")


@dataclass(frozen=True)
class PageInfo:
    path: str
    title: str
    icon: str
    default: bool = False


#: The learning order: the navigation and the landing page both follow it.
PAGES: list[PageInfo] = [
    PageInfo("pages/home.py", "Start here", ":material/home:", default=True),
    PageInfo("pages/shaw.py", "Relative index & Shaw clipping", ":material/grid_on:"),
    PageInfo("pages/t5.py", "T5 buckets", ":material/view_week:"),
    PageInfo("pages/skew.py", "The skew, step by step", ":material/south_east:"),
    PageInfo("pages/absolute.py", "Absolute vs relative", ":material/compare_arrows:"),
    PageInfo("pages/rope.py", "RoPE and its scalings", ":material/360:"),
    PageInfo("pages/attention.py", "Live attention", ":material/visibility:"),
    PageInfo("pages/your_model.py", "Your model", ":material/model_training:"),
    PageInfo("pages/experiments.py", "Experiments", ":material/science:"),
    PageInfo("pages/check.py", "Check my implementation", ":material/fact_check:"),
    PageInfo("pages/tour.py", "Lecture mode", ":material/co_present:"),
]

#: The browser tab's icon: an emoji, which Streamlit's page draws itself as an inline SVG. A material icon (the
#: old ":material/swap_horiz:", or a page's own icon when none is set) is fetched from an outside font server
#: and fails offline (a lecture hall without a network); an image file is read through Streamlit's image code,
#: which imports numpy and PIL before the landing page's first paint.
FAVICON = "↔️"
#: The entry point every page is served through (ensure_app_navigation).
APP_SCRIPT = Path(__file__).resolve().parents[2] / "app.py"

SIGN_CONVENTION = ("**Sign convention:** relative position = **j − i** = key position − query position. "
                   "Negative: the key lies in the past of the query; positive: in its future.")

#: What plotly's camera button downloads: PNG at twice the shown size (sharp on a projector) or
#: SVG (vector, for papers). plotly.js has one image button, so the sidebar picks its format.
EXPORT_FORMATS = {"PNG": {"format": "png", "scale": 2}, "SVG": {"format": "svg"}}
EXPORT_KEY = "chart_export"


def plotly_config(export: str = "PNG") -> dict:
    """The chart config: no plotly logo, the camera button in the chosen format (default PNG)."""
    return {"displaylogo": False, "toImageButtonOptions": dict(EXPORT_FORMATS.get(export, EXPORT_FORMATS["PNG"]))}


PLOTLY_CONFIG = plotly_config()


def export_format_control() -> None:
    """The sidebar's choice of the camera button's format, shared by every chart of every page."""
    st.segmented_control("chart download (camera icon)", list(EXPORT_FORMATS), default="PNG", required=True,
                         key=EXPORT_KEY, bind="query-params",
                         help="PNG for slides and the web; SVG (vector) for papers.")


_PRELOAD_LOCK = threading.Lock()


def preload_shared_modules() -> None:
    """Make the modules every page shares ready before any page runs (app.py calls it first).

    plotly's figure code is imported and its optional-import lookups made thread-safe
    (``app_internals.safe_plotly_lookups``), so a page importing pandas never breaks another session's
    figure. The lock serialises the first imports of a fresh server, so two sessions never
    import these modules' dependencies in opposite orders. Neither pandas nor torch is imported
    here: only the pages that use them load them, and the landing page uses neither.
    """
    with _PRELOAD_LOCK:
        import plotly.graph_objects  # noqa: F401

        app_internals.safe_plotly_lookups()


_APP_RUN = threading.local()


@contextlib.contextmanager
def running_app_navigation() -> Iterator[None]:
    """Around app.py's navigation.run(): marks this script run (its thread) as routed through
    app.py, so ensure_app_navigation knows the page is not running bare."""
    _APP_RUN.active = True
    try:
        yield
    finally:
        _APP_RUN.active = False


class PageEnded(Exception):
    """Raised by :func:`end_page`; app.py catches it and still draws the sidebar."""


def end_page() -> NoReturn:
    """End the page's run here, like st.stop(), except that app.py still draws the sidebar after it.

    app.py draws the sidebar after the page (so the page's own elements reach the browser first);
    after st.stop() Streamlit refuses every further element, so the sidebar would be missing. Outside
    app.py's navigation (a script that is not a relviz page) it is st.stop().
    """
    if getattr(_APP_RUN, "active", False):
        raise PageEnded
    st.stop()


def ensure_app_navigation() -> None:
    """Route every page run through app.py. Call first thing on every page.

    Until some session has run app.py's st.navigation, a Streamlit server that sees a pages/
    folder beside app.py serves /t5 by running pages/t5.py alone (the old folder mode: no page
    config, no relviz sidebar); Streamlit has no option to turn that mode off. Such a run is
    recognised by its own thread (app.py marks its runs, see running_app_navigation), not by
    Streamlit's process-wide mode: a class arriving at a fresh server starts many runs in folder
    mode before the first st.navigation ends it. app.py is then run in place (its st.navigation
    ends folder mode, and draws this same page: page URLs are the file stems in both modes);
    st.stop() ends the bare run. Unlike st.rerun(), this keeps the click that started the run.
    A page is always run through app.py, in tests too (tests/page_support.py).
    """
    if not getattr(_APP_RUN, "active", False):
        runpy.run_path(str(APP_SCRIPT), run_name="__main__")
        st.stop()


# ---------------------------------------------------------------------------------------
# Values in a shared link. Streamlit seeds every URL-bound widget from the link's query string;
# a value the widget cannot take is dropped (Streamlit's own check, or the one below, which runs
# first because Streamlit's int() of "inf" overflows), the default is used, and a short notice
# says which values were ignored.

_LINK_CHECKED_KEY = "_relviz_link_checked"


def url_value_problem(value: str | list[str]) -> str | None:
    """Why no relviz control can take this URL value, or None when some control might.

    A link's value that reads as a number but is not a finite float (inf, -Infinity, NaN,
    1e999, 400 digits) fits no relviz control: numbers are bounded and no text control
    takes such a word. Public so that every link relviz builds (tours) goes through it.
    """
    text = (value[-1] if isinstance(value, list) and value else value)
    if not isinstance(text, str):
        return None
    try:
        number = float(text.strip())
    except ValueError:
        return None  # text: whether it fits is the widget's own check
    return None if math.isfinite(number) else "not a finite number"


def usable_link_params(params: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split a link's query parameters into (usable, dropped: key -> why). For links relviz builds."""
    usable, dropped = {}, {}
    for key, value in params.items():
        problem = url_value_problem(value)
        if problem is None:
            usable[key] = value
        else:
            dropped[key] = problem
    return usable, dropped


def _value_matches(url_value: str, value: object) -> bool:
    """Whether a widget's value is what the link asked for (so the link's value was taken)."""
    if isinstance(value, bool):
        return url_value.strip().lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return float(url_value) == float(value)
        except (ValueError, OverflowError):
            return False
    if isinstance(value, (list, tuple)):
        return url_value == ",".join(map(str, value)) or url_value in map(str, value) and len(value) == 1
    return url_value == str(value)


_LINK_DROPPED_KEY = "_relviz_link_dropped"  # values dropped before the rerun, for the notice after it


@contextlib.contextmanager
def checked_link_values() -> Iterator[None]:
    """Around navigation.run(): drop the link's unusable values before any widget is seeded,
    and after the page ran, show one short notice naming every value that was not taken.

    Checks once per link (a new session, or a page switch that brings new query values), not
    on the reruns that follow. Public API only: Streamlit seeds URL-bound widgets from the query
    string the run started with, so an unusable value is deleted from st.query_params (which also
    updates the query string a rerun starts from) and the run starts again without it (st.rerun);
    the notice is kept in session state across that rerun.
    """
    slot = st.empty()
    initial = {key: (values[-1] if values else "") for key in st.query_params
               for values in [st.query_params.get_all(key)]}
    fingerprint = tuple(sorted(initial.items()))
    fresh = bool(initial) and st.session_state.get(_LINK_CHECKED_KEY) != fingerprint
    dropped: dict[str, str] = st.session_state.pop(_LINK_DROPPED_KEY, None) or {}
    if fresh:
        unusable = {key: problem for key, value in initial.items()
                    if (problem := url_value_problem(value)) is not None}
        if unusable:
            for key, problem in unusable.items():
                dropped[f"{key}={initial[key][:24]}"] = problem
                with contextlib.suppress(KeyError, st.errors.StreamlitAPIException):  # bound: not seeded again
                    del st.query_params[key]
            st.session_state[_LINK_DROPPED_KEY] = dropped
            st.rerun()
        st.session_state[_LINK_CHECKED_KEY] = fingerprint
    try:
        yield
    finally:
        if fresh:
            for key, value in initial.items():
                if key not in st.session_state:
                    continue  # no control of this page has this key
                kept = st.query_params.get_all(key)
                if (kept[-1] if kept else None) == value:
                    continue
                if not _value_matches(value, st.session_state.get(key)):
                    dropped.setdefault(f"{key}={value[:24]}", "not a value this control takes")
        if dropped:
            items = "; ".join(f"`{item}` ({why})" for item, why in dropped.items())
            slot.warning(f"Ignored in the link: {items}. Those controls use their defaults.",
                         icon=":material/link_off:")


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
    page, so the control has no value yet) the link's."""
    export = st.session_state.get(EXPORT_KEY) or st.query_params.get(EXPORT_KEY) or "PNG"
    st.plotly_chart(figure, key=key, config=plotly_config(export), width="stretch")


_CANVAS = "relviz_toeplitz_canvas"
_canvas_component = None


def _toeplitz_canvas():
    """The canvas component (relviz/components/toeplitz_canvas.js), registered once per process."""
    global _canvas_component
    if _canvas_component is None:
        _canvas_component = st.components.v2.component(_CANVAS, js=toeplitz_canvas_js())
    return _canvas_component


def show_toeplitz(view, *, key: str, name: str = "relviz") -> None:
    """Draw what figures.toeplitz.toeplitz_view (or an overview builder) returned: a plotly figure
    as :func:`show_figure` does, a picture described by its per-offset data (``.payload()``) with the
    canvas component, which draws it and computes the hover in the browser. ``name``: the PNG's file name."""
    payload = getattr(view, "payload", None)
    if payload is None:
        show_figure(view.figure, key=key)
        return
    _toeplitz_canvas()(key=key, data=payload() | {"name": name}, width="stretch", height="content")


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


def matrix_to_csv(matrix: np.ndarray, *, row0: int = 0, col0: int = 0, corner: str = "i\\j") -> str:
    """The matrix as CSV with a header row: ``corner`` then the column indices (key positions j from
    ``col0``); each line starts with its row index (query position i from ``row0``). Integers stay
    integers. ``pandas.read_csv(f, index_col=0)`` reads it back as the exact matrix."""
    import numpy as np

    matrix = np.asarray(matrix)
    matrix = matrix.reshape(matrix.shape[0], -1) if matrix.ndim > 1 else matrix[None]
    rows, cols = matrix.shape
    out = io.StringIO()
    out.write(",".join([corner] + [str(col0 + c) for c in range(cols)]) + "\n")
    fmt = "%d" if np.issubdtype(matrix.dtype, np.integer) else "%.7g"
    labelled = np.concatenate([np.arange(row0, row0 + rows)[:, None].astype(matrix.dtype if fmt == "%d"
                                                                             else np.float64), matrix], axis=1)
    np.savetxt(out, labelled, fmt=["%d"] + [fmt] * cols, delimiter=",")
    return out.getvalue()


def offset_vector_csv(offsets: np.ndarray, values: np.ndarray, *, quantity: str) -> str:
    """The per-offset vector as CSV: header ``j-i,<quantity>``, then one line per diagonal."""
    import numpy as np

    table = np.stack([np.asarray(offsets), np.asarray(values)], axis=1)
    out = io.StringIO()
    fmt = "%d" if np.issubdtype(table.dtype, np.integer) else "%.7g"
    np.savetxt(out, table, fmt=["%d", fmt], delimiter=",", header=f"j-i,{quantity}", comments="")
    return out.getvalue()


def matrix_to_npy(matrix: np.ndarray) -> bytes:
    import numpy as np

    out = io.BytesIO()
    np.save(out, np.asarray(matrix))
    return out.getvalue()


def matrix_downloads(matrix: np.ndarray | Callable[[], np.ndarray], *, name: str, key: str,
                     csv: Callable[[], str] | None = None, row0: int = 0, col0: int = 0,
                     corner: str = "i\\j") -> None:
    """CSV and .npy downloads of ``matrix`` (or of what the callable ``matrix`` returns), built only when
    clicked (deferred callables).

    The CSV has a header row (``corner``, then the column indices from ``col0``) and each line starts
    with its row index (from ``row0``); the .npy holds the bare matrix. ``csv`` replaces the CSV text.
    """
    if not callable(matrix):
        matrix = functools.partial(lambda held: held, matrix)
    left, right = st.columns(2)
    left.download_button("Download CSV", csv or (lambda: matrix_to_csv(matrix(), row0=row0, col0=col0, corner=corner)),
                         file_name=f"{name}.csv", mime="text/csv", key=f"{key}_csv", on_click="ignore",
                         help="First line: the column indices; first column: the row index "
                              "(pandas.read_csv(file, index_col=0) gives the matrix back).")
    right.download_button("Download .npy", lambda: matrix_to_npy(matrix()), file_name=f"{name}.npy",
                          mime="application/octet-stream", key=f"{key}_npy", on_click="ignore")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Show a library ValueError as st.error (its message names the parameter) instead of a traceback.

    Only the block inside stops; everything after it on the page still runs.
    """
    try:
        yield
    except ValueError as error:
        st.error(str(error), icon=":material/error:")


# ---------------------------------------------------------------------------------------
# Training and measuring inside the app: one quota per visitor (across reloads), shared by every page.

SESSION_TRAININGS_KEY = "trainings"


def _hashed(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:20]


def visitor_key() -> tuple[str | None, str | None]:
    """(visitor, address): whom this session's runs count against, as Streamlit sees the client.

    visitor: the token in the browser's XSRF cookie (Streamlit sets it on the first visit; a
    reload or a new tab sends the same token again), else the client address. address: the client's IP address
    (st.context.ip_address; behind a reverse proxy on the same host, Streamlit's server takes
    it from X-Forwarded-For). Both hashed; None when unknown (a local session without cookies,
    e.g. AppTest: then the session counts alone). See docs/DEPLOY.md for what this cannot stop.
    """
    address = st.context.ip_address
    address = address if isinstance(address, str) and address else None  # (AppTest gives a mock)
    cookie = st.context.cookies.get(app_internals.XSRF_COOKIE) if st.context.cookies else None
    cookie = cookie if isinstance(cookie, str) and cookie else None
    visitor = f"cookie:{_hashed(app_internals.xsrf_token(cookie))}" if cookie else (f"ip:{_hashed(address)}" if address else None)
    return visitor, (_hashed(address) if address else None)


def session_trainings() -> SessionTrainings:
    """This browser session's trained models, its runs counted per visitor across reloads
    (relviz.app.training_queue's quota, in the server-wide ledger)."""
    from relviz.app.training_queue import LEDGER, SessionTrainings  # loads torch (TYPE_CHECKING above)

    if SESSION_TRAININGS_KEY not in st.session_state:
        visitor, address = visitor_key()
        st.session_state[SESSION_TRAININGS_KEY] = SessionTrainings(visitor=visitor, address=address, ledger=LEDGER)
    return st.session_state[SESSION_TRAININGS_KEY]


def run_guarded(run: Callable[[Callable[[float, str], None]], T]) -> T | None:
    """Run ``run(report)`` inside the training guard (session quota, one server-wide slot, one
    thread, time limit) with a progress bar; a refusal or timeout becomes an st.error and None."""
    # loads torch (TYPE_CHECKING above)
    from relviz.app.training_queue import TrainingBusy, TrainingTimeout, guarded_run

    bar = st.progress(0.0, text="starting…")
    try:
        with guarded_run(session_trainings()) as check_time:
            def report(fraction: float, text: str) -> None:
                check_time()
                bar.progress(min(1.0, max(0.0, fraction)), text=text)

            return run(report)
    except (ValueError, TrainingBusy, TrainingTimeout) as error:
        bar.empty()
        st.error(str(error), icon=":material/block:")
        return None


# ---------------------------------------------------------------------------------------
# Length, offset and window controls shared by the pages that draw a q_len × k_len matrix.

#: Longest query/key length the length controls allow (2^20).
from relviz.app.page_limits import MAX_LENGTH  # noqa: E402


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Before a widget with dynamic bounds is drawn: pull its kept value back inside [lo, hi]."""
    value = st.session_state.get(key)
    if value is not None and not lo <= value <= hi:
        st.session_state[key] = min(max(value, lo), hi)


def _set_state(key: str, value: int) -> None:
    st.session_state[key] = value


def length_controls(prefix: str, *, q_default: int, k_default: int) -> tuple[int, int, int]:
    """Query length, key length and query offset (with the two alignment presets), URL-bound.

    Keys: {prefix}_q, {prefix}_k, {prefix}_off. The presets set the offset through a callback:
    "align first keys" (T5: query i sits at key position i) and "align last keys"
    (tensor2tensor: the queries are the last q_len keys, offset k_len − q_len).
    """
    q_key, k_key, off_key = f"{prefix}_q", f"{prefix}_k", f"{prefix}_off"
    q_len = int(st.number_input("query length", 1, MAX_LENGTH, q_default, key=q_key, bind="query-params",
                                help=f"1 to {MAX_LENGTH:,}. Above 512 per side the page shows an exact "
                                     "downsampled overview plus a full-resolution window."))
    k_len = int(st.number_input("key length", 1, MAX_LENGTH, k_default, key=k_key, bind="query-params",
                                help="May differ from the query length (e.g. a decoder step with a cache)."))
    lo, hi = -q_len, k_len
    clamp_state(off_key, lo, hi)
    q_offset = int(st.slider("query offset (query i sits at key position offset + i)", lo, hi, 0, key=off_key,
                             bind="query-params",
                             help="0 aligns the queries with the first keys (T5); k_len − q_len aligns them "
                                  "with the last keys (tensor2tensor). Both conventions exist in real code."))
    st.button("align first keys (T5): offset 0", key=f"{prefix}_first", on_click=_set_state,
              args=(off_key, 0), width="stretch", help="T5 without a cache: query i sits at key i.")
    st.button(f"align last keys (t2t): offset {k_len - q_len}", key=f"{prefix}_last",
              on_click=_set_state, args=(off_key, min(max(k_len - q_len, lo), hi)), width="stretch",
              help="tensor2tensor: range_q = range_k[-length_q:], the queries are the last keys.")
    return q_len, k_len, q_offset


def _centre_window(col_key: str, col0: int) -> None:
    st.session_state[col_key] = col0


def pooled_overview(view, *, q_len: int, k_len: int, q_offset: int, window,
                    quantity: str, note: str, key: str) -> None:
    """The large-matrix panel of the Shaw and T5 pages: the pooled overview (figures.toeplitz's
    ToeplitzOverview or ToeplitzOverviewImage) beside what it shows and which exact window the
    full-resolution figures below hold (``window``: figures.toeplitz.Window)."""
    block = view.block
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


def window_controls(prefix: str, q_len: int, k_len: int, *, q_offset: int, default_size: int = 256):
    """Size and position of the full-resolution window on a matrix too large to draw whole.

    Keys: {prefix}_ws (size), {prefix}_r0 / {prefix}_c0 (first row / column). Returns a
    relviz.figures.toeplitz.Window that lies inside the matrix: the whole matrix, with no
    controls drawn, when it is small enough to show cell by cell.
    """
    # Imported here: both load numpy, which the landing page's first visitor skips (see TYPE_CHECKING above).
    from relviz.figures.toeplitz import Window, diagonal_col0, fit_window, needs_window
    from relviz.views import DISPLAY_MAX

    if not needs_window(q_len, k_len):
        return Window(0, 0, q_len, k_len)
    st.subheader("Full-resolution window")

    size = int(st.slider("window size (cells per side)", 16, DISPLAY_MAX, default_size, step=16,
                         key=f"{prefix}_ws", bind="query-params",
                         help="The window is exact and full resolution; larger windows send more data."))
    rows, cols = min(size, q_len), min(size, k_len)
    row0 = col0 = 0
    r_key, c_key = f"{prefix}_r0", f"{prefix}_c0"
    if q_len > rows:
        clamp_state(r_key, 0, q_len - rows)
        row0 = int(st.slider("window: first query row", 0, q_len - rows, 0, key=r_key, bind="query-params"))
    if k_len > cols:
        clamp_state(c_key, 0, k_len - cols)
        col0 = int(st.slider("window: first key column", 0, k_len - cols, 0, key=c_key, bind="query-params"))
        st.button("centre the window on j − i = 0", key=f"{prefix}_centre", on_click=_centre_window,
                  args=(c_key, diagonal_col0(q_len, k_len, q_offset=q_offset, row0=row0, rows=rows, cols=cols)),
                  width="stretch")
    return fit_window(q_len, k_len, row0=row0, col0=col0, size=size)


def large_matrix_downloads(window_values: np.ndarray, offsets: np.ndarray, values: np.ndarray, *, q_len: int,
                           k_len: int, window, quantity: str, name: str, suffix: str, key: str) -> None:
    """Downloads for a matrix too large to build: the exact window shown (``window``:
    figures.toeplitz.Window) and the per-offset vector that defines every entry. Files are
    ``{name}_window_{suffix}`` and ``{name}_per_offset_{suffix}``."""
    st.markdown(
        f"The full {q_len} × {k_len} matrix is not built. Download the exact **window** shown above, or the "
        f"**per-offset vector** ({q_len + k_len - 1} rows: j − i, {quantity}): it defines every entry, "
        f"{quantity}(i, j) = value of the row whose j − i equals j − (offset + i).")
    left, right = st.columns(2)
    with left:
        st.caption(f"{quantity}, window rows {window.row0}…{window.row0 + window.rows - 1}, "
                   f"columns {window.col0}…{window.col0 + window.cols - 1}")
        matrix_downloads(window_values, name=f"{name}_window_{suffix}", key=f"{key}_win", row0=window.row0,
                         col0=window.col0)
    with right:
        st.caption(f"per-offset vector (j − i, {quantity})")
        offset_vector_downloads(offsets, values, name=f"{name}_per_offset_{suffix}", key=f"{key}_vec",
                                quantity=quantity)


def offset_vector_downloads(offsets: np.ndarray, values: np.ndarray, *, name: str, key: str,
                            quantity: str = "value") -> None:
    """CSV/.npy of the per-offset vector: column 0 is j − i, column 1 the value on that diagonal.

    These q_len + k_len − 1 rows define the whole Toeplitz matrix: entry (i, j) is the value
    of the row whose j − i equals j − (q_offset + i).
    """
    import numpy as np

    # stacked only when clicked: at 2^20 positions the two columns are 4M values
    matrix_downloads(lambda: np.stack([np.asarray(offsets), np.asarray(values)], axis=1), name=name, key=key,
                     csv=lambda: offset_vector_csv(offsets, values, quantity=quantity))


# ---------------------------------------------------------------------------------------
# Lecture mode: the presenter bar every page shows while a tour runs, and collecting views.
# The tours themselves (data, validation, links) are relviz.app.tours'.

TOUR_STATE = "_relviz_tour"          # (Tour, step index) while presenting
DRAFT_STATE = "_relviz_tour_draft"   # list[tours.Step]: the views a teacher collected
LECTURE_STATE = "_relviz_lecture"    # this tab's live lecture id (relviz.app.lectures), followed by its presenter view
LECTURE_PARAM = "lecture"            # the presenter view's link value on the Lecture mode page
#: How often the presenter view looks at the lecture it follows (seconds).
FOLLOW_EVERY_S = 1.0


def presenting() -> bool:
    """Whether this tab shows a tour step (the presenter bar is on screen)."""
    return st.session_state.get(TOUR_STATE) is not None


@st.cache_resource
def lectures():
    """The server's live lectures: the step an audience tab and its presenter view share."""

    return Lectures()


def _page_name(url_path: str) -> str:
    """st.navigation's url_path ('' for the default page) -> the page's file stem."""
    default = next(Path(page.path).stem for page in PAGES if page.default)
    return url_path or default


def go_to_step(tour, index: int) -> None:
    """Open step ``index`` of ``tour`` exactly: its page with its link values, every other control of
    that page back at its default (their kept values are forgotten first)."""

    index = min(max(index, 0), len(tour.steps) - 1)
    step = tour.steps[index]
    st.session_state[TOUR_STATE] = (tour, index)
    shared = lectures().get(st.session_state.get(LECTURE_STATE))
    if shared is None or shared.tour != tour:
        st.session_state[LECTURE_STATE] = lectures().start(tour, index)
    else:
        lectures().move(st.session_state[LECTURE_STATE], index)
    kept = {key: st.session_state.pop(key, None)
            for key in page_keys(step.page, [key for key in st.session_state if isinstance(key, str)])}
    st.session_state.pop(_LINK_CHECKED_KEY, None)
    # a control of the page on screen keeps its on-screen value over a link value equal to its default (the
    # browser sends it back): the controls the step sets get the step's value in their state, typed as before
    _switch_page(f"pages/{step.page}.py", dict(step.params), kept)


def _as_kept(text, kept):
    """A link value as the type of the value the control held before."""
    if isinstance(kept, bool):
        return str(text).lower() == "true"
    if isinstance(kept, int):
        return int(float(text))
    if isinstance(kept, float):
        return float(text)
    return text


def _switch_page(path: str, params: dict, kept: dict | None = None) -> None:
    """st.switch_page with exactly ``params`` in the URL. A control of the page on screen stays bound to
    its key until the next run, and Streamlit refuses to set a bound key: release the bindings of the
    keys being set (the next page binds its own controls again). Other bindings stay: Streamlit clears
    them during the next page's run, and that is what updates the address bar to the new page."""
    app_internals.release_url_bindings(params)
    for key, value in (kept or {}).items():
        if key in params and value is not None:
            st.session_state[key] = _as_kept(params[key], value)
    st.switch_page(path, query_params=params)


#: Shown in the sidebar where other pages have "Add this view to my tour".
NO_TOUR_STEP = ("No “Add this view to my tour” on this page: it is a tool whose picture comes from a model, "
                "a file or a tour, not a view a tour can return to.")


def current_view(page_name: str):
    """The view on screen as a tour step (the page and its URL values), or a message why it cannot be one."""

    if page_name not in PAGE_PARAMS:
        return None, NO_TOUR_STEP
    params = {}
    for key in page_keys(page_name, st.query_params.keys()):
        values = st.query_params.get_all(key)
        if values:
            params[key] = values if page_param(page_name, key).takes_list else values[-1]
    try:
        return check_step(Step(page_name, params, title=next(
            (p.title for p in PAGES if Path(p.path).stem == page_name), page_name))), ""
    except ValueError as error:
        return None, f"This view cannot be collected: {error}"


def lecture_mode(url_path: str) -> None:
    """Call in app.py before the page runs: while a tour runs, the presenter bar above the page. The step's
    note is in the presenter view (a second tab), never on the audience's screen."""
    if presenting():
        _presenter_bar(_page_name(url_path))


def collect_view_control(url_path: str) -> None:
    """In the sidebar (app.py draws it after the page): the button that adds the view on screen, every
    control as the page left it, to the teacher's own tour; or why this page has none."""
    page_name = _page_name(url_path)
    step, why = current_view(page_name)
    if step is not None:
        draft = st.session_state.setdefault(DRAFT_STATE, [])
        # on_click: the view is added before the rerun draws the button, so its count is already the new one
        st.button(f"Add this view to my tour ({len(draft)})", key="tour_collect", icon=":material/add:",
                  on_click=_collect_view, args=(page_name,),
                  help="Collects this page with every control as it is now; edit notes and share the "
                       "tour on the Lecture mode page.", width="stretch")
    elif why == NO_TOUR_STEP:
        st.caption(why)


def _collect_view(page_name: str) -> None:
    """The button's callback: the view as the page left it (its URL values) joins the teacher's tour."""
    step, _ = current_view(page_name)
    if step is None:
        return
    draft = st.session_state.setdefault(DRAFT_STATE, [])
    draft.append(step)
    st.toast(f"Added: {step.title} (step {len(draft)} of your tour)", icon=":material/playlist_add:")


def _presenter_bar(page_name: str) -> None:
    """One compact row above the page: the step and its title, Back / Next (Page Up / Page Down), the
    presenter view's link and End. The step's note is in the presenter view, which follows this tab."""
    tour, index = st.session_state[TOUR_STATE]
    lecture_id = st.session_state.get(LECTURE_STATE)
    shared = lectures().get(lecture_id)
    step = tour.steps[index]
    last = len(tour.steps) - 1
    away = page_name != step.page
    with st.container(border=True, key="tour_bar"):
        # widths: "◀ Back PageUp" and "Next ▶ PageDown" whole at 1280 px
        prev_col, text_col, next_col, notes_col, end_col = st.columns([2.1, 3.6, 2.1, 1.4, 0.9],
                                                                       vertical_alignment="center")
        previous = prev_col.button("◀ Back", key="tour_prev", disabled=index == 0, width="stretch",
                                   shortcut="pageup", help="Previous step (Page Up)")
        label = f"Step {index + 1}" if away else ("Next ▶" if index < last else "Finish")
        advance = next_col.button(label, key="tour_next", type="primary", width="stretch", shortcut="pagedown",
                                  help="Back to this step's view" if away else
                                  "Next step (Page Down: most presentation clickers send it)")
        if shared is not None:
            notes_col.link_button("Notes", f"tour?{LECTURE_PARAM}={lecture_id}", icon=":material/open_in_new:",
                                  width="stretch", help="The presenter view in a new tab (for your own screen): "
                                                        "this step's note, what comes next, every step. It follows "
                                                        "this tab.")
        end = end_col.button("End", key="tour_end", width="stretch", help="Leave lecture mode")
        text_col.markdown(f"**{index + 1} / {len(tour.steps)} · {step.title}**"
                          + ("  \n:gray[You left this step's page.]" if away else
                             "  \n:gray[relative position = j − i = key − query]"))
    if end or (advance and index == last and not away):
        del st.session_state[TOUR_STATE]
        if lecture_id is not None:
            lectures().end(lecture_id)
            st.session_state.pop(LECTURE_STATE, None)
        _switch_page("pages/tour.py", {})
    if previous:
        go_to_step(tour, index - 1)
    if advance:
        go_to_step(tour, index if away else index + 1)


@st.fragment(run_every=FOLLOW_EVERY_S)
def presenter_view(lecture_id: str) -> None:
    """The presenter's tab (Lecture mode page, ?lecture=ID): the step on the audience's screen, its note, what
    comes next and every step. It looks every FOLLOW_EVERY_S seconds and follows the audience's tab, where
    Back / Next and the clicker's keys stay (the audience's tab does not poll: no "running" flicker on the
    projector)."""
    shared = lectures().get(lecture_id)
    if shared is None:
        st.warning("This lecture has ended, or its link is from another server or an older session. Start the "
                   "tour again and open **Notes** from its bar.", icon=":material/co_present:")
        return
    tour, index = shared.tour, shared.index
    step, last = tour.steps[index], len(tour.steps) - 1
    st.markdown(f"### {index + 1} / {len(tour.steps)} · {step.title}")
    st.info(step.note or "No note for this step.", icon=":material/co_present:")
    st.caption(f"Next: **{tour.steps[index + 1].title}**" if index < last else "This is the last step.")
    # "3\." : a line starting "3. " would become a list item, renumbered by markdown around the marked one
    st.markdown("  \n".join((f"**▶ {n}\\. {s.title}**" if n - 1 == index else f"{n}\\. {s.title}")
                             for n, s in enumerate(tour.steps, start=1)))
