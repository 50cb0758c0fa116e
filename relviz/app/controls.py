"""The length, offset and window controls shared by the pages that draw a q_len × k_len matrix.

Exists so that every such page binds the same keys to the URL (tours' links name them) with the same bounds.
"""
from __future__ import annotations

import re

import streamlit as st

from relviz.app.page_limits import MAX_LENGTH


#: session state: URL key of a control whose range follows the page's other settings -> the (lo, hi) it took when last
#: drawn. relviz.app.links names it when a link's value fell outside (the link schema only knows the widest range).
_RUN_RANGES = "_relviz_run_ranges"


def note_range(key: str, lo: float, hi: float) -> None:
    """Record the range the control bound to ``key`` takes in this run (a range that depends on other settings: a
    checkpoint's layers, a matrix's rows), so a link's value outside it is refused naming the range."""
    st.session_state.setdefault(_RUN_RANGES, {})[key] = (lo, hi)


def run_range_problem(key: str, value: str) -> str | None:
    """What the control bound to ``key`` took in this run (note_range), when the link's ``value`` lies outside it;
    None when no range was recorded or the value is inside it (then the schema's message, or none, applies)."""
    recorded = st.session_state.get(_RUN_RANGES, {}).get(key)
    if recorded is None:
        return None
    lo, hi = recorded
    try:
        if lo <= float(value) <= hi:
            return None
    except ValueError:
        return None
    return f"{key} must be from {lo:,} to {hi:,} with the page's other settings; got {value[:40]!r}"


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Before a widget with dynamic bounds is drawn: pull its kept value back inside [lo, hi] (and note the range)."""
    note_range(key, lo, hi)
    value = st.session_state.get(key)
    if value is not None and not lo <= value <= hi:
        st.session_state[key] = min(max(value, lo), hi)


#: Streamlit writes "Press Enter to apply" inside a number input, over the value in a column or the sidebar
#: (narrow); Enter, the +/− buttons and leaving the field still apply, so the hint goes (a style-only block).
NUMBER_INPUT_CSS = '<style>[data-testid="stNumberInput"] [data-testid="InputInstructions"] {display: none;}</style>'

#: session state: number-input key -> the last value its page used (what a refused value leaves in place)
_KEPT_NUMBERS = "_relviz_numbers"
#: session state: number-input key -> the out-of-range value just refused (shown once, as an st.error)
_REFUSED_NUMBERS = "_relviz_numbers_refused"


def in_range(label: str, lo: int, hi: int) -> str:
    """A number input's label with the range it takes, on screen without hovering (a projector has no pointer)."""
    return f"{label} ({lo:,} – {hi:,})"


_RANGE_IN_LABEL = re.compile(r"\((-?[\d,]+) – (-?[\d,]+)\)$")


def label_range(label: str) -> tuple[int, int] | None:
    """The range in_range wrote into ``label``, or None: how a test or the bench reads a number input's range."""
    found = _RANGE_IN_LABEL.search(label)
    return None if found is None else (int(found[1].replace(",", "")), int(found[2].replace(",", "")))


def out_of_range_message(label: str, lo: int, hi: int, typed: int, kept: int | None) -> str:
    """What a refused number says: the control, the range it takes, and that the page did not change."""
    stays = "stays empty" if kept is None else f"stays at {kept:,}"
    return f"**{label}** takes {lo:,} to {hi:,}: {typed:,} was not applied, the value {stays}."


def _refuse_outside(key: str, lo: int, hi: int, fallback: int | None, on_change, args: tuple) -> None:
    """The number input's callback: a value outside [lo, hi] is put back to the last one the page used (so
    nothing else changes) and remembered for the message; a value inside goes on to the page's own callback."""
    typed = st.session_state.get(key)
    if typed is not None and not lo <= typed <= hi:
        st.session_state.setdefault(_REFUSED_NUMBERS, {})[key] = typed
        st.session_state[key] = st.session_state.get(_KEPT_NUMBERS, {}).get(key, fallback)
    elif on_change is not None:
        on_change(*args)


def number_control(label: str, lo: int, hi: int, value: int | None, *, key: str, where=None, bind: bool = True,
                   on_change=None, args: tuple = (), **kwargs) -> int | None:
    """An integer input that takes lo..hi, shows that range in its label, and answers a value outside it with a
    visible st.error naming the range, leaving the page as it was. Every number input of the app is one of these.

    Streamlit's own bounds (min_value/max_value) refuse a typed value in the browser with only a tooltip and a red
    field, which a class on a projector never sees, and the page never hears of it; so the widget has no bounds
    and relviz checks the value (its callback puts the value back before the page runs). ``where``: the container
    (a column, the sidebar; default the main area). ``bind``: the value is in the URL (a link's value outside the
    range is refused before, by relviz.app.links). ``value`` None: the input may be empty (returns None). Other
    keyword arguments go to st.number_input (help, placeholder, disabled).
    """
    where = st if where is None else where
    kept = st.session_state.get(key)
    if kept is not None and not lo <= kept <= hi:  # the range moved under a kept value (e.g. fewer heads)
        st.session_state[key] = min(max(kept, lo), hi)
    where.html(NUMBER_INPUT_CSS)
    number = where.number_input(in_range(label, lo, hi), value=value, step=1, key=key,
                                bind="query-params" if bind else None, on_change=_refuse_outside,
                                args=(key, lo, hi, value, on_change, args), **kwargs)
    refused = st.session_state.get(_REFUSED_NUMBERS, {}).pop(key, None)
    if number is not None and not lo <= number <= hi:  # a link's value outside a range that moves at run time
        refused, number = number, min(max(number, lo), hi)
    if refused is not None:
        where.error(out_of_range_message(label, lo, hi, refused, number), icon=":material/error:")
    st.session_state.setdefault(_KEPT_NUMBERS, {})[key] = number
    return None if number is None else int(number)


def _set_state(key: str, value: int) -> None:
    st.session_state[key] = value


def length_controls(prefix: str, *, q_default: int, k_default: int) -> tuple[int, int, int]:
    """Query length, key length and query offset (with the two alignment presets), URL-bound.

    Keys: {prefix}_q, {prefix}_k, {prefix}_off. The presets set the offset through a callback:
    "align first keys" (T5: query i sits at key position i) and "align last keys"
    (tensor2tensor: the queries are the last q_len keys, offset k_len − q_len).
    """
    q_key, k_key, off_key = f"{prefix}_q", f"{prefix}_k", f"{prefix}_off"
    q_len = number_control("query length", 1, MAX_LENGTH, q_default, key=q_key,
                           help="Above 512 per side the page shows an exact downsampled overview plus a "
                                "full-resolution window.")
    k_len = number_control("key length", 1, MAX_LENGTH, k_default, key=k_key,
                           help="May differ from the query length (e.g. a decoder step with a cache).")
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


def window_controls(prefix: str, q_len: int, k_len: int, *, q_offset: int, default_size: int = 256):
    """Size and position of the full-resolution window on a matrix too large to draw whole.

    Keys: {prefix}_ws (size), {prefix}_r0 / {prefix}_c0 (first row / column). Returns a
    relviz.figures.toeplitz_window.Window that lies inside the matrix: the whole matrix, with no
    controls drawn, when it is small enough to show cell by cell. Drawn as one row in the current
    container: the page calls it inside the st.fragment that draws the window, so a move reruns only that part
    (issue 34); a fragment cannot write to the sidebar.
    """
    # Imported here: both load numpy, which the landing page's first visitor skips.
    from relviz.figures.toeplitz_window import Window, diagonal_col0, fit_window, needs_window
    from relviz.toeplitz_display import DISPLAY_MAX

    if not needs_window(q_len, k_len):
        return Window(0, 0, q_len, k_len)
    st.markdown("**Full-resolution window**")
    c_size, c_row, c_col, c_centre = st.columns(4, vertical_alignment="bottom")
    size = int(c_size.slider("window size (cells per side)", 16, DISPLAY_MAX, default_size, step=16,
                             key=f"{prefix}_ws", bind="query-params",
                             help="The window is exact and full resolution; larger windows send more data."))
    rows, cols = min(size, q_len), min(size, k_len)
    row0 = col0 = 0
    r_key, c_key = f"{prefix}_r0", f"{prefix}_c0"
    if q_len > rows:
        clamp_state(r_key, 0, q_len - rows)
        row0 = int(c_row.slider("window: first query row", 0, q_len - rows, 0, key=r_key, bind="query-params"))
    if k_len > cols:
        clamp_state(c_key, 0, k_len - cols)
        col0 = int(c_col.slider("window: first key column", 0, k_len - cols, 0, key=c_key, bind="query-params"))
        # a short label: a quarter of the main area at 1280 px cut "centre the window on j − i = 0"
        c_centre.button("centre on j − i = 0", key=f"{prefix}_centre", on_click=_centre_window,
                        args=(c_key, diagonal_col0(q_len, k_len, q_offset=q_offset, row0=row0, rows=rows, cols=cols)),
                        width="stretch", help="Moves the first key column so that j − i = 0 runs through the "
                                              "middle of the window.")
    return fit_window(q_len, k_len, row0=row0, col0=col0, size=size)
