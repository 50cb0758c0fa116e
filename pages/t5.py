"""T5 buckets: the bucket map, bucket vs distance, the ranges table, pitfalls, and a compare view."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from relviz._words import counted
from relviz.app import controls, display, downloads, links, navigation
from relviz.figures import shaw as shaw_text
from relviz.figures.shaw import shaw_matrices, shaw_offsets
from relviz.figures.t5 import (
    bucket_budget_figure,
    bucket_curve,
    bucket_map,
    bucket_overview,
    composition_figure,
    precision_figure,
    ranges_rows,
    seed_table_figure,
    sharing_figure,
    t5_offsets,
)
from relviz.figures.toeplitz_window import Window, needs_window
from relviz.positions import smallest_num_buckets, t5_nearest_valid
from relviz.precision import (
    CHANGE_COLUMNS,
    EDGE_COLUMNS,
    change_rows,
    edge_rows,
    mesh_tf_edges,
    precision_changes,
    precision_window,
)
from relviz.rope import load_presets
from relviz.snippets import t5_precision_snippet, t5_snippet
from relviz import t5_notes as t5_text
from relviz.t5_notes import t5_notes

navigation.ensure_app_navigation()
P = "t5"  # query-parameter prefix of this page


@st.cache_data(max_entries=32, show_spinner=False)
def notes(nb: int, md: int, bidir: bool, q_len: int, k_len: int, q_offset: int):
    return t5_notes(nb, md, bidir, q_len=q_len, k_len=k_len, q_offset=q_offset)


# The per-offset vectors as one read-only object (cache_resource): cache_data would unpickle a copy on every
# call, 32 MB at 2^20 positions.
@st.cache_resource(max_entries=8, show_spinner=False)
def offsets(q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int):
    return t5_offsets(q_len, k_len, num_buckets=nb, max_distance=md, bidirectional=bidir, q_offset=q_offset)


# Each window's picture is held as what it sends (display.drawable: a canvas picture's JSON or a plotly figure's
# encoded dict), built once per server: a payload dict was rebuilt and walked by Streamlit on every run (and made a
# fresh server import pandas and pyarrow), a go.Figure deep-copied and validated.
@st.cache_resource(max_entries=24, show_spinner=False)  # read-only, shared: never unpickled per rerun
def map_figure(q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int,
               row0: int, col0: int, rows: int, cols: int, height: int = 470):
    """(the window's exact buckets, for the downloads; its picture, display.drawable)."""
    values = offsets(q_len, k_len, nb, md, bidir, q_offset)
    view = bucket_map(values, q_len, k_len, q_offset=q_offset, window=Window(row0, col0, rows, cols),
                      height=height, browser=True)
    return view.values, display.drawable(view)


# Pooled once per matrix (cache_resource: the object is read-only); a window move only moves its rectangle.
@st.cache_resource(max_entries=8, show_spinner=False)
def pooled_overview(q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int):
    return bucket_overview(offsets(q_len, k_len, nb, md, bidir, q_offset), q_len, k_len, q_offset=q_offset,
                           browser=True)


@st.cache_resource(max_entries=24, show_spinner=False)
def overview_figure(q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int,
                    row0: int, col0: int, rows: int, cols: int):
    """(the overview's block size; its picture with the window's rectangle, display.drawable)."""
    view = pooled_overview(q_len, k_len, nb, md, bidir, q_offset).with_window(Window(row0, col0, rows, cols))
    return view.block, display.drawable(view)


# A plotly figure is cached as the dict it sends (cache_resource, display.prepared_spec: its arrays encoded once):
# st.cache_data would unpickle and re-validate it on every rerun, and a cached go.Figure is deep-copied and
# re-encoded by st.plotly_chart on every rerun, a window move included (the curve sits in the window's fragment).
@st.cache_resource(max_entries=24, show_spinner=False)
def curve_figure(nb: int, md: int, bidir: bool, log_x: bool):
    return display.prepared_spec(bucket_curve(nb, md, bidir, log_x=log_x, height=470, validate=False).to_dict())


@st.cache_data(max_entries=24, show_spinner=False)
def ranges_table(q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int) -> pd.DataFrame:
    rows = ranges_rows(offsets(q_len, k_len, nb, md, bidir, q_offset), q_len, k_len)
    return pd.DataFrame(rows).astype({"offsets": str})


def kind_column_px(kinds: pd.Series) -> int:
    """Room for the longest kind at the grid's 14 px font (about 7.5 px a character, plus padding)."""
    return int(7.5 * max(len(k) for k in kinds)) + 24


# Per matrix, read-only (cache_resource): a window move on the Compare tab reuses it (2M values at 2^20 positions).
@st.cache_resource(max_entries=8, show_spinner=False)
def shaw_values(q_len: int, k_len: int, k: int, q_offset: int):
    return shaw_offsets(q_len, k_len, k=k, q_offset=q_offset)


@st.cache_resource(max_entries=24, show_spinner=False)  # as map_figure: the picture as it is sent
def shaw_index_figure(q_len: int, k_len: int, k: int, q_offset: int, row0: int, col0: int, rows: int, cols: int):
    values = shaw_values(q_len, k_len, k, q_offset)
    return display.drawable(shaw_matrices(values, q_len, k_len, q_offset=q_offset,
                                          window=Window(row0, col0, rows, cols), height=470, browser=True,
                                          validate=False)[2])


@st.cache_resource(max_entries=16, show_spinner=False)
def precision_view(nb: int, md: int, bidir: bool):
    """(figure, rows of offsets that change in low precision, rows of Mesh-TF-vs-HF edges)."""
    max_offset = precision_window(md)
    changes = precision_changes(num_buckets=nb, max_distance=md, bidirectional=bidir, max_offset=max_offset)
    edges = mesh_tf_edges(num_buckets=nb, max_distance=md, bidirectional=bidir)
    figure = display.prepared_spec(precision_figure(nb, md, bidir, changes=changes, edges=edges,
                                                    max_offset=max_offset).to_dict())
    return (figure, pd.DataFrame(change_rows(changes), columns=list(CHANGE_COLUMNS)),
            pd.DataFrame(edge_rows(edges), columns=list(EDGE_COLUMNS)), max_offset)


@st.cache_resource(max_entries=16, show_spinner=False)
def confusion_figures(nb: int, md: int, bidir: bool):
    """Each as the dict it sends (display.prepared_spec), as curve_figure."""
    return tuple(display.prepared_spec(figure.to_dict()) for figure in (
        bucket_budget_figure(nb, md, bidir, validate=False), sharing_figure(),
        composition_figure(nb, md, bidir, validate=False)))


def use_nearest_valid(nb: int, md: int, bidir: bool) -> None:
    st.session_state[f"{P}_nb"], st.session_state[f"{P}_md"] = t5_nearest_valid(nb, md, bidir)


display.page_title("T5 relative position buckets")
display.sign_convention(compact=True)

with st.sidebar:
    st.subheader("Buckets")
    bidir = bool(st.toggle("bidirectional (encoder)", True, key=f"{P}_bi", bind="query-params",
                           help="Off: unidirectional, as in T5's decoder."))
    fewest = smallest_num_buckets(bidir)  # the slider starts at the smallest value this direction takes
    controls.clamp_state(f"{P}_nb", fewest, 128)
    nb = int(st.slider("num_buckets", fewest, 128, 32, key=f"{P}_nb", bind="query-params",
                       help=f"From {fewest} ({'bidirectional' if bidir else 'unidirectional'}: fewer leaves no "
                            "exact bucket) to 128."))
    md = int(st.slider("max_distance", 1, 1024, 128, key=f"{P}_md", bind="query-params"))
    st.caption(t5_text.published_caption(load_presets()["t5"]))
    st.subheader("Lengths")
    q_len, k_len, q_offset = controls.length_controls(P, q_default=32, k_default=32)
    st.subheader("Curve")
    log_x = bool(st.toggle("logarithmic distance axis", False, key=f"{P}_logx", bind="query-params"))

info = notes(nb, md, bidir, q_len, k_len, q_offset)
if not info.valid:
    st.error(f"{info.error}", icon=":material/error:")
    st.warning(t5_text.nearest_valid_text(info), icon=":material/lightbulb:")
    st.button("use the nearest valid setting", key=f"{P}_fix", on_click=use_nearest_valid, args=(nb, md, bidir))

#: the URL keys each tab's controls hold: a closed tab's stay in the link (links.keep_in_link)
WINDOW_KEYS = [f"{P}_ws", f"{P}_r0", f"{P}_c0"]
closed_tab_keys: list[str] = []
tab_map, tab_precision, tab_compare = st.tabs(["Buckets", "Precision & references", "Compare with Shaw"],
                                             key=f"{P}_tab", bind="query-params")


@st.fragment
def map_section(info, q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int, log_x: bool) -> None:
    """The window's controls and what they move: the overview's rectangle, the map, its downloads (and the curve
    beside the map). A fragment: a window move reruns this part alone, not the sidebar, the ranges, the three
    confusions or the page's navigation (issue 34: a move's elements and its time to the drawn chart)."""
    large = needs_window(q_len, k_len)
    # the overview and the map above the controls that move them (drawn once the controls have a value): below the
    # map, the lecture layout keeps the controls on screen (it drops what stands above a step's subject chart)
    panel, figures = st.container(), st.container()
    window = controls.window_controls(P, q_len, k_len, q_offset=q_offset)
    if large:
        with panel:
            block, summary = overview_figure(q_len, k_len, nb, md, bidir, q_offset, window.row0, window.col0,
                                             window.rows, window.cols)
            display.pooled_overview(summary, block=block, q_len=q_len, k_len=k_len, q_offset=q_offset, window=window,
                                    quantity="bucket", key=f"{P}_fig_overview",
                                    note="Pooling keeps every bucket edge (a block that straddles one shows a "
                                         "blend); it never skips offsets.")
    exact, fig_map = map_figure(q_len, k_len, nb, md, bidir, q_offset, window.row0, window.col0, window.rows,
                                window.cols)
    left, right = figures.columns(2)
    with left:
        display.show_toeplitz(fig_map, key=f"{P}_fig_map", name="t5_buckets_window")
        st.caption(t5_text.map_caption(info))
    with right:
        display.show_figure(curve_figure(nb, md, bidir, log_x), key=f"{P}_fig_curve")
        st.caption(t5_text.distance_curve_caption(info))

    # the window's downloads follow the window, so they sit in its fragment, under the map
    values = offsets(q_len, k_len, nb, md, bidir, q_offset)
    downloads.window_downloads(exact, values.offset, values.bucket, heading="Download the bucket map",
                               caption=f"The bucket of every (i, j), {q_len} × {k_len}, exact.",
                               q_len=q_len, k_len=k_len, q_offset=q_offset, window=window, large=large,
                               quantity="bucket", name="t5_buckets", suffix=f"{q_len}x{k_len}_{nb}_{md}",
                               key=f"{P}_dl")


@st.fragment
def compare_section(info, q_len: int, k_len: int, nb: int, md: int, bidir: bool, q_offset: int) -> None:
    """Shaw's index beside T5's map on the same window. A fragment, as map_section: a window move or a new k reruns
    this tab alone."""
    large = needs_window(q_len, k_len)
    k = int(st.slider("Shaw clipping distance k", 0, 64, 8, key=f"{P}_ck", bind="query-params", width=420))
    st.markdown(
        f"Same lengths ({q_len} × {k_len}, offset {q_offset}), same "
        + ("window" if large else "matrix") + ". Both schemes turn the offset j − i into a small table "
        "index; they differ in what they keep.")
    figures = st.container()         # above the window's controls, as in map_section
    window = controls.window_controls(P, q_len, k_len, q_offset=q_offset)
    left, right = figures.columns(2)
    with left:
        shaw = shaw_index_figure(q_len, k_len, k, q_offset, window.row0, window.col0, window.rows, window.cols)
        display.show_toeplitz(shaw, key=f"{P}_fig_cmp_shaw", name="shaw_index_window")
        st.caption(shaw_text.compare_caption(k))
    with right:
        if info.valid:
            t5_fig = map_figure(q_len, k_len, nb, md, bidir, q_offset, window.row0, window.col0, window.rows,
                                window.cols)[1]
            display.show_toeplitz(t5_fig, key=f"{P}_fig_cmp_t5", name="t5_buckets_window")
            st.caption(t5_text.compare_caption(info))
        else:
            st.error(f"No T5 map for this setting: {info.error}", icon=":material/error:")
    if k:   # under the window's controls, which belong with the two maps
        left, _ = st.columns(2)
        with left:
            display.show_figure(seed_table_figure(k), key=f"{P}_fig_seed_table")
            st.caption(shaw_text.seed_table_caption(k))
    st.markdown(t5_text.BOTH_ARE_BLIND)


with tab_map:
    if tab_map.open is not False:
        if info.valid:
            map_section(info, q_len, k_len, nb, md, bidir, q_offset, log_x)

            st.markdown(t5_text.WHAT_T5_LEARNS)
            display.code_for_this_view(t5_snippet(nb, md, bidir, q_len, k_len, q_offset),
                                  note="result is the bucket map above (the whole matrix, not only the window); "
                                       "score_mod adds T5's learned bias in FlexAttention.",
                                  key=f"{P}_code")

            left, right = st.columns([5, 4])
            with left:
                st.markdown("#### Bucket ranges")
                ranges = ranges_table(q_len, k_len, nb, md, bidir, q_offset)
                # Widths set: the grid sized "kind" by its header and cut "0 and every f…" at 1280 px.
                st.dataframe(ranges, hide_index=True, height=420, width="stretch", column_config={
                    "bucket": st.column_config.NumberColumn(width=60),
                    "offsets": st.column_config.TextColumn(width=70),
                    "kind": st.column_config.TextColumn(width=kind_column_px(ranges["kind"])),
                    "cells here": st.column_config.NumberColumn(width=85)})
                st.caption("j − i: the offsets the bucket holds (≤ / ≥: and every offset beyond). "
                           "offsets: how many. cells here: how many cells of this matrix use it.")
            with right:
                st.markdown("#### What to watch for in this setting")
                for note in info.notes:
                    if note.level == "warning":
                        st.warning(note.text, icon=":material/warning:")
                    else:
                        st.markdown("- " + note.text)

            st.markdown("#### Three confusions, in pictures")
            budget, sharing, composition = confusion_figures(nb, md, bidir)
            # across the page: in 3/5 of it plotly shrank the bar's labels to ~8 px at 819 px (a laptop at 125 %)
            display.show_figure(budget, key=f"{P}_fig_budget")
            st.caption(t5_text.budget_caption(info))
            c2, c3 = st.columns(2)
            with c2:
                display.show_figure(sharing, key=f"{P}_fig_sharing")
                st.caption(t5_text.SHARED_ACROSS_LAYERS)
            with c3:
                display.show_figure(composition, key=f"{P}_fig_composition")
                st.caption(t5_text.composition_caption(info))
        else:
            st.info("The bucket map, curve and ranges appear once the setting is valid (see the message above).",
                    icon=":material/info:")
            st.markdown(t5_text.VALID_SETTINGS)
    else:
        closed_tab_keys += WINDOW_KEYS

with tab_precision:
    if tab_precision.open is not False:
        if info.valid:
            figure, changed, differing, max_offset = precision_view(nb, md, bidir)
            display.show_figure(figure, key=f"{P}_fig_precision")
            st.caption(t5_text.precision_caption(max_offset))
            left, right = st.columns(2)
            with left:
                st.markdown(f"**Low precision: {counted(len(changed), 'offset')} "
                            "change bucket**")
                st.dataframe(changed, hide_index=True, height=260, width="stretch")
            with right:
                st.markdown(f"**Mesh TensorFlow ≠ Hugging Face (relviz): "
                            f"{counted(len(differing), 'offset')}**")
                if len(differing):
                    st.dataframe(differing, hide_index=True, height=260, width="stretch")
                else:
                    st.markdown(t5_text.NO_REFERENCE_EDGE)
            display.code_for_this_view(t5_precision_snippet(nb, md, bidir, max_offset), key=f"{P}_code_precision")
        else:
            st.info("The precision view appears once the setting is valid.", icon=":material/info:")

with tab_compare:
    if tab_compare.open is not False:
        compare_section(info, q_len, k_len, nb, md, bidir, q_offset)
    else:
        closed_tab_keys += [f"{P}_ck", *WINDOW_KEYS]
links.keep_in_link(closed_tab_keys)
