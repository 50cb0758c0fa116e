"""Checking a shared link's values before the page's URL-bound controls are seeded from them.

Exists so that a link with a value no control can take (inf, NaN, a word where a number goes) opens the
page with defaults and a short notice, never a traceback; tours build their links through the same check.
"""
from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Iterator, Mapping

import streamlit as st

from relviz.app import internals


# ---------------------------------------------------------------------------------------
# Values in a shared link. Streamlit seeds every URL-bound widget from the link's query string;
# a value the widget cannot take is dropped (Streamlit's own check, or the one below, which runs
# first because Streamlit's int() of "inf" overflows), the default is used, and a short notice
# says which values were ignored.

LINK_CHECKED_KEY = "_relviz_link_checked"


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


def code_span(text: str) -> str:
    """``text`` from a link as a markdown code span, shown as it is: a link, a colour or a formula in it stays text
    (a link's value ``[log in](https://…)`` drew a live link in the app's own notice). The fence is one backtick
    longer than the longest run in the text, and line breaks become spaces (a blank line would end the span)."""
    flat = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


#: CommonMark's escapable punctuation (and Streamlit's ":" of :red[…] and :material/…:): each gets a backslash.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$:])")


def as_text(text: str) -> str:
    """``text`` that a link or a file brought (a shared tour's titles and notes), escaped so that markdown shows it
    as written: a tour link titled ``[log in](https://…)`` drew a live link in the bar and on Lecture mode."""
    return _MARKDOWN.sub(r"\\\1", text)


def without_value(why: str) -> str:
    """A refusal's reason without its closing "; got '…'" (the notice shows the value once, as a code span): what a
    control takes is the schema's text, the value is the link's and is never rendered as markdown."""
    return why.split("; got ", 1)[0]


_LINK_DROPPED_KEY = "_relviz_link_dropped"  # values dropped before the rerun, for the notice after it


@contextlib.contextmanager
def checked_link_values(url_path: str | None = None) -> Iterator[None]:
    """Around navigation.run(): drop the link's unusable values before any widget is seeded,
    and after the page ran, show one short notice naming every value that was not taken.

    Checks once per link (a new session, or a page switch that brings new query values), not
    on the reruns that follow. Public API only: Streamlit seeds URL-bound widgets from the query
    string the run started with, so an unusable value is deleted from st.query_params (which also
    updates the query string a rerun starts from) and the run starts again without it (st.rerun);
    the notice is kept in session state across that rerun. ``url_path`` (st.navigation's, of the page about to run):
    a key that no control of that page binds (another page's, or no page's) is named in the notice too.
    """
    slot = st.empty()
    initial = {key: (values[-1] if values else "") for key in st.query_params
               for values in [st.query_params.get_all(key)]}
    given = {key: len(st.query_params.get_all(key)) for key in initial}
    fingerprint = tuple(sorted(initial.items()))
    fresh = bool(initial) and st.session_state.get(LINK_CHECKED_KEY) != fingerprint
    dropped: dict[str, str] = st.session_state.pop(_LINK_DROPPED_KEY, None) or {}
    # a control already on screen put its own value in the URL: not a link's value (a number outside its range
    # is refused by relviz.app.controls.number_control, which says so beside the control)
    on_screen = {key for key in initial if key in st.session_state}
    if fresh:
        from relviz.app.link_schema import range_problem, seed_problem, takes_list  # plain numbers: no torch

        # a number outside its control's range, from a link (a bound key cannot be deleted: dropping one a control
        # on screen wrote would start the run again and again); a one-value control's key given more than once
        # (Streamlit took the first value for one control, the last for another, neither for a slider)
        unusable = {key: problem for key, value in initial.items()
                    if (problem := (f"given {given[key]} times: a link sets this control once"
                                    if given[key] > 1 and not takes_list(key) else None)
                        or url_value_problem(value) or
                        (None if key in on_screen else seed_problem(key, value))) is not None}
        if unusable:
            for key, problem in unusable.items():
                # say the range the control takes, as for any other refused value
                dropped[f"{key[:40]}={initial[key][:24]}"] = (problem if given[key] > 1 else None) or \
                    range_problem(key, initial[key]) or problem
                with contextlib.suppress(KeyError, st.errors.StreamlitAPIException):  # bound: not seeded again
                    del st.query_params[key]
            st.session_state[_LINK_DROPPED_KEY] = dropped
            st.rerun()
        st.session_state[LINK_CHECKED_KEY] = fingerprint
    try:
        yield
    finally:
        if fresh:
            for key, value in initial.items():
                if key not in st.session_state and key not in on_screen and url_path is not None:
                    elsewhere = _not_this_pages(key, url_path)
                    if elsewhere:
                        dropped.setdefault(f"{key[:40]}={value[:24]}", elsewhere)
                if key not in st.session_state or key in on_screen:
                    continue  # no control of this page has this key, or the control wrote the value itself
                kept = st.query_params.get_all(key)
                if (kept[-1] if kept else None) == value:
                    continue
                if not _value_matches(value, st.session_state.get(key)):
                    from relviz.app.controls import run_range_problem
                    from relviz.app.link_schema import range_problem  # plain numbers: no torch

                    # the schema's range, or the narrower one the control took in this run (a checkpoint's layers)
                    dropped.setdefault(f"{key[:40]}={value[:24]}", range_problem(key, value) or
                                       run_range_problem(key, value) or "not a value this control takes")
        if dropped:
            items = "; ".join(f"{code_span(item)} ({without_value(why)})" for item, why in dropped.items())
            slot.warning(f"Ignored in the link: {items}. Those controls use their defaults.",
                         icon=":material/link_off:")


def _not_this_pages(key: str, url_path: str) -> str | None:
    """Why ``key`` does nothing on the page at ``url_path`` (st.navigation's url_path; "" for the default page): it
    is another page's control, or no page's; None for a key of this page (drawn or not: a closed tab's, a window
    the matrix does not need) and for the keys lecture mode and Streamlit read."""
    from relviz.app.link_schema import APP_KEYS, LINK_ONLY_PARAMS, PAGE_PARAMS, page_param
    from relviz.app.navigation import PAGES

    stems = {info.path.removeprefix("pages/").removesuffix(".py"): info for info in PAGES}
    page = url_path or next(stem for stem, info in stems.items() if info.default)
    if key in APP_KEYS or page_param(page, key) is not None or key in LINK_ONLY_PARAMS.get(page, {}):
        return None
    owner = next((stem for stem in [*PAGE_PARAMS, *LINK_ONLY_PARAMS]
                  if page_param(stem, key) is not None or key in LINK_ONLY_PARAMS.get(stem, {})), None)
    if owner is None:
        return "no relviz page has this control"
    return f"a control of the {stems[owner].title if owner in stems else owner} page, not of this one"


# ---------------------------------------------------------------------------------------
# Values of a closed tab. st.tabs runs only the open tab's code, and at the end of a run Streamlit deletes from
# the URL the keys of the controls it did not draw (the session keeps their values): a link copied on T5's
# Precision tab lost the window the Buckets tab shows (t5_ws, t5_r0, t5_c0), and opened on another window.


def keep_in_link(keys: Iterable[str]) -> list[str]:
    """Keep ``keys`` (the URL-bound controls of the tabs this run did not open) in the URL with the values they
    last had, so the link still opens every tab as the visitor left it. Call at the end of the page, once every
    control is drawn: a key that an open tab drew (T5's window on the Compare tab) stays bound to its control.
    Returns the keys kept this way (the tests read it)."""
    return internals.keep_undrawn_params(keys)
