"""The app's pages and how every page run is routed through app.py.

Exists so that the page registry (the learning order), the start-up work app.py does before any page
runs, and the guarantee that a page is never served bare (Streamlit's folder mode) live in one place.
"""
from __future__ import annotations

import contextlib
import runpy
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import streamlit as st

from relviz.app import internals as app_internals


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
    PageInfo("pages/images.py", "Images and video", ":material/grid_view:"),
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
