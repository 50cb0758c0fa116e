"""The length, offset and window controls shared by the pages that draw a q_len × k_len matrix.

Exists so that every such page binds the same keys to the URL (tours' links name them) with the same bounds.
"""
from __future__ import annotations

import streamlit as st

from relviz.app.page_limits import MAX_LENGTH


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Before a widget with dynamic bounds is drawn: pull its kept value back inside [lo, hi]."""
    value = st.session_state.get(key)
    if value is not None and not lo <= value <= hi:
        st.session_state[key] = min(max(value, lo), hi)


#: Streamlit writes "Press Enter to apply" inside a number input, over the value in a column or the sidebar
#: (narrow); Enter, the +/− buttons and leaving the field still apply, so the hint goes (a style-only block).
NUMBER_INPUT_CSS = '<style>[data-testid="stNumberInput"] [data-testid="InputInstructions"] {display: none;}</style>'


def in_range(label: str, lo: int, hi: int) -> str:
    """A number input's label with the range it takes: Streamlit refuses a typed value outside it only in a
    tooltip, which a student on a projector never sees."""
    return f"{label} ({lo:,} – {hi:,})"


def _set_state(key: str, value: int) -> None:
    st.session_state[key] = value


def length_controls(prefix: str, *, q_default: int, k_default: int) -> tuple[int, int, int]:
    """Query length, key length and query offset (with the two alignment presets), URL-bound.

    Keys: {prefix}_q, {prefix}_k, {prefix}_off. The presets set the offset through a callback:
    "align first keys" (T5: query i sits at key position i) and "align last keys"
    (tensor2tensor: the queries are the last q_len keys, offset k_len − q_len).
    """
    q_key, k_key, off_key = f"{prefix}_q", f"{prefix}_k", f"{prefix}_off"
    st.html(NUMBER_INPUT_CSS)
    q_len = int(st.number_input(in_range("query length", 1, MAX_LENGTH), 1, MAX_LENGTH, q_default, key=q_key,
                                bind="query-params",
                                help="Above 512 per side the page shows an exact downsampled overview plus a "
                                     "full-resolution window."))
    k_len = int(st.number_input(in_range("key length", 1, MAX_LENGTH), 1, MAX_LENGTH, k_default, key=k_key,
                                bind="query-params",
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


def window_controls(prefix: str, q_len: int, k_len: int, *, q_offset: int, default_size: int = 256):
    """Size and position of the full-resolution window on a matrix too large to draw whole.

    Keys: {prefix}_ws (size), {prefix}_r0 / {prefix}_c0 (first row / column). Returns a
    relviz.figures.toeplitz.Window that lies inside the matrix: the whole matrix, with no
    controls drawn, when it is small enough to show cell by cell.
    """
    # Imported here: both load numpy, which the landing page's first visitor skips.
    from relviz.figures.toeplitz import Window, diagonal_col0, fit_window, needs_window
    from relviz.toeplitz_display import DISPLAY_MAX

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
