"""Images and video: the 2-D relative index of a patch grid, Swin's bias table, 2-D RoPE and M-RoPE."""
from __future__ import annotations

import streamlit as st

from relviz.app import controls, display, navigation

navigation.ensure_app_navigation()
P = "im"  # query-parameter prefix of this page

import relviz.show_vision as sv  # noqa: E402  (after the routing guard: the bare run stops before torch loads)
from relviz.vision import absolute2d, grid, mrope, rope2d, score_maps, swin  # noqa: E402

VIEWS = ("2-D relative index", "Swin's bias table", "2-D RoPE", "M-RoPE (video)")
ROPES = {"Pixtral": "pixtral", "Qwen-VL vision": "qwen_vl", "DINOv3": "dinov3"}
RULES = {"Qwen2-VL": "qwen2_vl", "Qwen2.5-VL": "qwen2_5_vl", "Qwen3-VL": "qwen3_vl"}
HEAD_DIMS = ("16", "32", "64", "80", "128")
SECONDS = ("0.5", "1.0", "1.5", "2.0")



# Figures are cached as what they send (cache_resource, display.drawable: a canvas picture's JSON, a plotly figure's
# encoded dict), keyed by the relviz.show function's name and its scalar arguments; built without plotly's validation
# (tests build them with it). A payload dict was rebuilt and walked by Streamlit on every run (and made a fresh server
# import pandas and pyarrow), a go.Figure deep-copied and validated.
@st.cache_resource(max_entries=64, show_spinner=False)
def figure(name: str, *args, **kwargs):
    return display.drawable(getattr(sv, name)(*args, **kwargs))


def show(name: str, *args, key: str, **kwargs) -> None:
    display.show_figure(figure(name, *args, **kwargs), key=key)


def show_in_place(name: str, *args, key: str, **kwargs) -> None:
    """A map a query slider changes, drawn by the canvas component (``browser=True``: a GridImage), which
    redraws in place; a changed plotly figure is a new chart to the browser, mounted and drawn from scratch."""
    display.show_toeplitz(figure(name, *args, browser=True, **kwargs), key=key, name=key.removeprefix(f"{P}_fig_"))


@st.fragment
def mrope_scores_panel(rule: str, rows: int, cols: int, frames: int, tps: int, seconds: float) -> None:
    """The frame-offset slider and the slice it picks, rerun alone when the slider moves (a fragment): the ids chart
    above (36,873 tokens at 8 frames of 64 × 64) is not sent again."""
    controls.clamp_state(f"{P}_dt", -(frames - 1), frames - 1)
    dt = int(st.slider("frame offset Δt (key − query)", -(frames - 1), frames - 1, 0, key=f"{P}_dt",
                       bind="query-params")) if frames > 1 else 0
    with display.user_errors():
        show_in_place("mrope_scores", rule, rows, cols, frames, dt=dt, tokens_per_second=tps,
                      seconds_per_grid=seconds, key=f"{P}_fig_mrope_scores")
    st.caption(mrope.frame_offset_words(dt, rows, cols, frames))


def query_controls(rows: int, cols: int) -> tuple[int, int]:
    """The query patch, above the charts that depend on it (inside their fragment: a move reruns them alone)."""
    controls.clamp_state(f"{P}_qr", 0, rows - 1)
    controls.clamp_state(f"{P}_qc", 0, cols - 1)
    left, right = st.columns(2)
    with left:
        query_row = int(st.slider("query patch row", 0, rows - 1, min(5, rows - 1), key=f"{P}_qr",
                                  bind="query-params")) if rows > 1 else 0
    with right:
        query_col = int(st.slider("query patch column", 0, cols - 1, min(5, cols - 1), key=f"{P}_qc",
                                  bind="query-params")) if cols > 1 else 0
    return query_row, query_col


@st.fragment
def index_panel(rows: int, cols: int) -> None:
    """The 2-D relative index view: the query patch's row (Δh, Δw laid out as the image) and every pair."""
    query_row, query_col = query_controls(rows, cols)
    dh_words, dw_words = grid.offset_words(query_row, query_col)
    left, right = st.columns(2)
    with left:
        show_in_place("patch_row", rows, cols, query_row=query_row, query_col=query_col, axis="h",
                      key=f"{P}_fig_dh")
        st.caption(dh_words)
    with right:
        show_in_place("patch_row", rows, cols, query_row=query_row, query_col=query_col, axis="w",
                      key=f"{P}_fig_dw")
        st.caption(dw_words)
    if rows * cols <= sv.PAIR_MATRIX_MAX:
        left, right = st.columns(2)
        with left:
            show("patch_pairs", rows, cols, query_row=query_row, query_col=query_col, axis="h", validate=False,
                                key=f"{P}_fig_pairs_h")
        with right:
            show("patch_pairs", rows, cols, query_row=query_row, query_col=query_col, axis="w", validate=False,
                                key=f"{P}_fig_pairs_w")
    st.caption(grid.pair_matrix_words(rows, cols, drawn_up_to=sv.PAIR_MATRIX_MAX))


@st.fragment
def swin_panel(rows: int, cols: int, window: int, seed: int) -> None:
    """Swin's index formula, one query's bias and the gathered bias, for the query patch's place in its window."""
    query_row, query_col = query_controls(rows, cols)
    in_row, in_col = swin.place_in_window(query_row, query_col, window)
    left, right = st.columns(2)
    with left:
        show("swin_index", window, query_row=in_row, query_col=in_col, validate=False, key=f"{P}_fig_swin_index")
        st.caption(swin.index_words(window, in_row, in_col))
    with right:
        show("swin_query_bias", window, seed=seed, query_row=in_row, query_col=in_col, validate=False,
                            key=f"{P}_fig_swin_query")
        st.caption(swin.query_bias_words(query_row, query_col, in_row, in_col))
    # half the page, its caption beside: a square map across the whole width left its colour bar far to its right
    left, right = st.columns(2)
    with left:
        show("swin_bias_matrix", window, seed=seed, query_row=in_row, query_col=in_col, validate=False,
             key=f"{P}_fig_swin_bias")
    with right:
        st.caption(swin.gathered_bias_words(window))


@st.fragment
def rope_query_panel(rows: int, cols: int, args: dict) -> None:
    """One query patch's scores against every key patch: the slice of the per-offset map the query reads."""
    query_row, query_col = query_controls(rows, cols)
    show_in_place("rope2d_query_scores", rows, cols, query_row=query_row, query_col=query_col, **args,
                  key=f"{P}_fig_rope_query")
    st.caption(rope2d.query_words(rows, cols, query_row, query_col))


display.page_title("Images and video")
display.sign_convention(compact=True)

with st.sidebar:
    view = st.radio("view", VIEWS, key=f"{P}_view", bind="query-params")
    st.subheader("Patch grid")
    rows = int(st.slider("rows H (patches)", 1, 64, 16, key=f"{P}_rows", bind="query-params",
                         help="64 × 64 patches: a 1024 × 1024 image at 16 px, 4,096 patches."))
    cols = int(st.slider("columns W (patches)", 1, 64, 16, key=f"{P}_cols", bind="query-params"))

st.markdown(grid.grid_words(rows, cols))

if view == VIEWS[0]:
    index_panel(rows, cols)
    st.caption(absolute2d.PATCH_TABLE_WORDS)

elif view == VIEWS[1]:
    with st.sidebar:
        st.subheader("Swin window")
        window = int(st.slider("window M (patches per side)", 2, 16, 7, key=f"{P}_win", bind="query-params",
                               help="Swin uses 7 (224 px) and 12; Swin v2 8, 16 and 24."))
        pretrained = int(st.selectbox("Swin v2: pretrained window (0: this window)", ("0", "8", "12", "16"),
                                      key=f"{P}_pre", bind="query-params"))
        seed = int(st.slider("random table: seed", 0, 999, 0, key=f"{P}_seed", bind="query-params"))
    swin_panel(rows, cols, window, seed)
    fit = swin.window_fit_words(rows, cols, window)
    if fit:
        st.info(fit)
    show("swinv2_coords", window, pretrained_window=pretrained, key=f"{P}_fig_swinv2")
    st.caption(swin.SWINV2_WORDS)

elif view == VIEWS[2]:
    with st.sidebar:
        st.subheader("2-D RoPE")
        rope_label = st.selectbox("model", tuple(ROPES), key=f"{P}_rope", bind="query-params")
        head_dim = int(st.selectbox("head_dim", HEAD_DIMS, index=2, key=f"{P}_dim", bind="query-params"))
        same = st.toggle("key content = query content", True, key=f"{P}_same", bind="query-params",
                         help="On: k = q, a patch meeting its own content elsewhere (the score peaks at Δ = 0).")
        seed = int(st.slider("content: seed", 0, 999, 0, key=f"{P}_seed", bind="query-params"))
    rope = ROPES[rope_label]
    args = dict(rope=rope, head_dim=head_dim, seed=seed, same=same)
    left, right = st.columns(2)
    with left:
        show("rope2d_scores", rows, cols, **args, validate=False, key=f"{P}_fig_rope_plane")
        st.caption(rope2d.plane_words(rows, cols))
    with right:
        rope_query_panel(rows, cols, args)
    show("rope2d_pairs", head_dim, rows, cols, key=f"{P}_fig_rope_pairs")
    st.caption(rope2d.PAIRS_WORDS)
    if score_maps.make_rope2d(rope, head_dim).normalised:
        st.caption(rope2d.NORMALISED_WORDS)

else:
    with st.sidebar:
        st.subheader("M-RoPE")
        rule_label = st.selectbox("model", tuple(RULES), index=1, key=f"{P}_rule", bind="query-params")
        frames = int(st.slider("video frames T", 1, 8, 4, key=f"{P}_frames", bind="query-params",
                               help="Temporal patches of the video's grid (grid_thw's t)."))
        tps = int(st.selectbox("tokens_per_second (Qwen2.5-VL)", ("2", "4"), key=f"{P}_tps", bind="query-params",
                               help="2 in Qwen2.5-VL's published configs, 4 by default in transformers' config class. "
                                    "With these and the seconds below, f·interval is a whole number for every frame."))
        seconds = float(st.selectbox("seconds per temporal patch (Qwen2.5-VL)", SECONDS, index=1, key=f"{P}_sec",
                                     bind="query-params"))
    rule = RULES[rule_label]
    with display.user_errors():
        show("mrope_ids", rule, rows, cols, frames, tokens_per_second=tps, seconds_per_grid=seconds,
                            key=f"{P}_fig_mrope_ids")
        st.caption(mrope.ids_words(rows, cols, frames))
        left, right = st.columns(2)
        with left:
            mrope_scores_panel(rule, rows, cols, frames, tps, seconds)
        with right:
            show("mrope_pairs", score_maps.rule_named(rule).section, key=f"{P}_fig_mrope_pairs")
            st.caption(mrope.SECTIONS_WORDS)
        st.markdown(mrope.TEXT_IS_PLAIN_ROPE)
    st.markdown(mrope.rules_words())
