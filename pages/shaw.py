"""Relative index & Shaw clipping: j − i, clip(j − i, −k, k), the lookup index and the 2k + 1 table."""
from __future__ import annotations

import streamlit as st

from relviz.app import controls, display, downloads, navigation
from relviz.figures import shaw as shaw_text
from relviz.figures.shaw import (
    clip_formula,
    embedding_strip,
    k_ablation_figure,
    parameter_count,
    shaw_matrices,
    shaw_offsets,
    shaw_overview,
)
from relviz.figures.toeplitz_window import Window, needs_window
from relviz.snippets import shaw_snippet

navigation.ensure_app_navigation()
P = "sh"  # query-parameter prefix of this page


# Each picture is held as what it sends (display.drawable: a canvas picture's JSON or a plotly figure's encoded
# dict), built once per server: a payload dict was rebuilt and walked by Streamlit on every run (and made a fresh
# server import pandas and pyarrow), a go.Figure deep-copied and validated.
@st.cache_resource(max_entries=24, show_spinner=False)  # read-only, shared: never unpickled per rerun
def matrices(q_len: int, k_len: int, k: int, q_offset: int, row0: int, col0: int, rows: int, cols: int):
    """(the three windows' pictures: relative, clipped, lookup index; the lookup index's exact values)."""
    values = strip_and_offsets(q_len, k_len, k, q_offset)[1]   # per offset, computed once per matrix
    views = shaw_matrices(values, q_len, k_len, q_offset=q_offset, window=Window(row0, col0, rows, cols),
                          browser=True, validate=False)
    return tuple(display.drawable(view) for view in views), views[2].values


# Pooled once per matrix (cache_resource: the object is read-only); a window move only moves its rectangle.
@st.cache_resource(max_entries=8, show_spinner=False)
def pooled_overview(q_len: int, k_len: int, k: int, q_offset: int):
    return shaw_overview(shaw_offsets(q_len, k_len, k=k, q_offset=q_offset), q_len, k_len, q_offset=q_offset,
                         browser=True)


@st.cache_resource(max_entries=24, show_spinner=False)
def overview(q_len: int, k_len: int, k: int, q_offset: int, row0: int, col0: int, rows: int, cols: int):
    """(the overview's block size; its picture with the window's rectangle, display.drawable)."""
    view = pooled_overview(q_len, k_len, k, q_offset).with_window(Window(row0, col0, rows, cols))
    return view.block, display.drawable(view)


# Plotly figures are cached as the objects themselves (cache_resource; st.plotly_chart copies them, nothing
# changes them): st.cache_data would unpickle and re-validate them on every rerun, a window move included.
# Every figure here is built without plotly's validation (validate=False: the same figure, tests compare).
@st.cache_resource(max_entries=8, show_spinner=False)
def strip_and_offsets(q_len: int, k_len: int, k: int, q_offset: int):
    values = shaw_offsets(q_len, k_len, k=k, q_offset=q_offset)
    return embedding_strip(values, q_len, k_len, validate=False), values


@st.cache_resource(max_entries=70, show_spinner=False)
def ablation(k: int):
    return k_ablation_figure(k, validate=False)


display.page_title("Relative index & Shaw clipping")
display.sign_convention(compact=True)

with st.sidebar:  # the lesson's slider first: on a 1280 × 720 projector it is on the first screen
    st.subheader("Clipping")
    k = int(st.slider("clipping distance k", 0, 64, 3, key=f"{P}_clip", bind="query-params",
                      help="Offsets beyond ±k share the end vectors of the table."))
    st.subheader("Lengths")
    q_len, k_len, q_offset = controls.length_controls(P, q_default=10, k_default=10)
    st.subheader("Parameter count")
    d = int(st.select_slider("vector size d (per head, d_z)", [8, 16, 32, 64, 128, 256, 512, 1024], 64,
                             key=f"{P}_d", bind="query-params"))
    layers = int(st.slider("layers", 1, 48, 6, key=f"{P}_layers", bind="query-params"))


@st.fragment
def window_section(q_len: int, k_len: int, k: int, q_offset: int) -> None:
    """The window's controls and what they move: the overview's rectangle, the three matrices and their downloads.
    A fragment: a window move reruns this part alone, not the sidebar, the table strip, the ablation or the page's
    navigation (issue 34: a move's elements and its time to the drawn chart)."""
    large = needs_window(q_len, k_len)
    # the overview and the matrices above the controls that move them (drawn once the controls have a value): below
    # the matrices, the lecture layout keeps the controls on screen (it drops what stands above a step's subject)
    panel, figures = st.container(), st.container()
    window = controls.window_controls(P, q_len, k_len, q_offset=q_offset)
    values = strip_and_offsets(q_len, k_len, k, q_offset)[1]
    pictures, index_values = matrices(q_len, k_len, k, q_offset, window.row0, window.col0, window.rows,
                                      window.cols)
    if large:
        with panel:
            block, summary = overview(q_len, k_len, k, q_offset, window.row0, window.col0, window.rows, window.cols)
            display.pooled_overview(summary, block=block, q_len=q_len, k_len=k_len, q_offset=q_offset, window=window,
                                    quantity="index", key=f"{P}_fig_overview",
                                    note="Blocks are pooled, never skipped, so the thin band |j − i| ≤ k stays "
                                         "visible as a blend instead of vanishing between samples.")

    with figures:
        cols = st.columns(3)
        captions = shaw_text.matrix_captions(k)
        for column, item, caption, name in zip(cols, pictures, captions,
                                               ("relative", "clipped", "index")):
            with column:
                display.show_toeplitz(item, key=f"{P}_fig_{name}", name=f"shaw_{name}_window")
                st.caption(caption)
        unclipped = shaw_text.unclipped_caption(values)
        if unclipped:
            st.caption(unclipped)
        if q_offset:
            st.caption(shaw_text.offset_rows_caption(q_offset))

    # the window's downloads follow the window, so they sit in its fragment, under the matrices
    downloads.window_downloads(index_values, values.offset, values.index, heading="Download the matrix",
                               caption=f"The lookup index {clip_formula(k)} + {k}, {q_len} × {k_len}, exact.",
                               q_len=q_len, k_len=k_len, q_offset=q_offset, window=window, large=large,
                               quantity="index", name="shaw_index", suffix=f"{q_len}x{k_len}_k{k}", key=f"{P}_dl")


window_section(q_len, k_len, k, q_offset)
strip = strip_and_offsets(q_len, k_len, k, q_offset)[0]

st.markdown(shaw_text.WHAT_SHAW_LEARNS)
display.code_for_this_view(shaw_snippet(q_len, k_len, k, q_offset),
                      note="result is the lookup index above (the whole matrix, not only the window).",
                      key=f"{P}_code")

display.show_figure(strip, key=f"{P}_fig_strip")
st.caption(shaw_text.table_caption(k))

left, right = st.columns([3, 2])
with left:
    display.show_figure(ablation(k), key=f"{P}_fig_ablation")
    st.caption(shaw_text.ABLATION_CAPTION)
with right:
    count = parameter_count(k, d, layers)
    st.markdown("#### Parameters")
    st.metric("per table: (2k + 1) · d", f"{count.per_table:,}", help=f"(2·{k} + 1) · {d}")
    st.metric("per layer: a^K and a^V", f"{count.per_layer:,}")
    st.metric(f"all {layers} layers", f"{count.total:,}")
    st.markdown(shaw_text.SHARING)

with st.expander("Clipping and depth: what one layer cannot see", expanded=False):
    st.markdown(shaw_text.depth_text(k))
