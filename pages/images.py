"""Images and video: the 2-D relative index of a patch grid, Swin's bias table, 2-D RoPE and M-RoPE."""
from __future__ import annotations

import streamlit as st

from relviz._words import counted
from relviz.app import controls, display, navigation

navigation.ensure_app_navigation()
P = "im"  # query-parameter prefix of this page

import relviz.show_vision as sv  # noqa: E402  (after the routing guard: the bare run stops before torch loads)
from relviz.vision import score_maps  # noqa: E402

VIEWS = ("2-D relative index", "Swin's bias table", "2-D RoPE", "M-RoPE (video)")
ROPES = {"Pixtral": "pixtral", "Qwen-VL vision": "qwen_vl", "DINOv3": "dinov3"}
RULES = {"Qwen2-VL": "qwen2_vl", "Qwen2.5-VL": "qwen2_5_vl", "Qwen3-VL": "qwen3_vl"}
HEAD_DIMS = ("16", "32", "64", "80", "128")
SECONDS = ("0.5", "1.0", "1.5", "2.0")



# Figures are cached as the objects themselves (cache_resource: st.plotly_chart copies them, nothing changes them),
# keyed by the relviz.show function's name and its scalar arguments; built without plotly's validation (tests
# build them with it).
@st.cache_resource(max_entries=64, show_spinner=False)
def figure(name: str, *args, **kwargs):
    return getattr(sv, name)(*args, **kwargs)


def show(name: str, *args, key: str, **kwargs) -> None:
    display.show_figure(figure(name, *args, **kwargs), key=key)


@st.fragment
def mrope_scores_panel(rule: str, rows: int, cols: int, frames: int, tps: int, seconds: float) -> None:
    """The frame-offset slider and the slice it picks, rerun alone when the slider moves (a fragment): the ids chart
    above (36,873 tokens at 8 frames of 64 × 64) is not sent again."""
    controls.clamp_state(f"{P}_dt", -(frames - 1), frames - 1)
    dt = int(st.slider("frame offset Δt (key − query)", -(frames - 1), frames - 1, 0, key=f"{P}_dt",
                       bind="query-params")) if frames > 1 else 0
    with display.user_errors():
        show("mrope_scores", rule, rows, cols, frames, dt=dt, tokens_per_second=tps, seconds_per_grid=seconds,
             validate=False, key=f"{P}_fig_mrope_scores")
    st.caption(f"**Two video tokens {counted(dt, 'frame', spec='+d')} apart**, score per (Δh, Δw) (k = q). Their ids differ by Δt on the "
               "time axis (Qwen2.5-VL: times the interval; Qwen3-VL: every axis moves by the frame's start), so the "
               "map of each Δt is one slice of a (Δt, Δh, Δw) volume: "
               f"{counted((2 * frames - 1) * (2 * rows - 1) * (2 * cols - 1), 'value')} for "
               f"{counted((frames * rows * cols) ** 2, 'pair')}.")


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
    left, right = st.columns(2)
    with left:
        show("patch_row", rows, cols, query_row=query_row, query_col=query_col, axis="h", validate=False,
                            key=f"{P}_fig_dh")
        st.caption(f"**Δh** of every key patch from the query patch ({query_row}, {query_col}), outlined: constant "
                   "along each image row.")
    with right:
        show("patch_row", rows, cols, query_row=query_row, query_col=query_col, axis="w", validate=False,
                            key=f"{P}_fig_dw")
        st.caption("**Δw**: constant down each column. Another query patch sees the same two pictures shifted: "
                   "the pair enters only through its offset.")
    if rows * cols <= sv.PAIR_MATRIX_MAX:
        left, right = st.columns(2)
        with left:
            show("patch_pairs", rows, cols, query_row=query_row, query_col=query_col, axis="h", validate=False,
                                key=f"{P}_fig_pairs_h")
        with right:
            show("patch_pairs", rows, cols, query_row=query_row, query_col=query_col, axis="w", validate=False,
                                key=f"{P}_fig_pairs_w")
        st.caption(f"**Every pair** (query patch × key patch, row-major). Δh is constant on each {cols} × {cols} "
                   "block; inside every block Δw is the 1-D relative index j − i. A 2-D relative structure is a "
                   "grid of Toeplitz blocks, described by its offsets like the 1-D ones. The outlined row is "
                   "the query patch's, the two pictures above.")
    else:
        st.caption(f"The pair matrix ({rows * cols:,} × {rows * cols:,}) is drawn for grids of at most "
                   f"{sv.PAIR_MATRIX_MAX} patches; the two pictures above are its outlined row.")


@st.fragment
def swin_panel(rows: int, cols: int, window: int, seed: int) -> None:
    """Swin's index formula, one query's bias and the gathered bias, for the query patch's place in its window."""
    query_row, query_col = query_controls(rows, cols)
    in_row, in_col = query_row % window, query_col % window
    left, right = st.columns(2)
    with left:
        show("swin_index", window, query_row=in_row, query_col=in_col, validate=False, key=f"{P}_fig_swin_index")
        st.caption(f"**The index formula**: a window of {window} × {window} patches has (2M − 1)² = "
                   f"{(2 * window - 1) ** 2} offsets, one table row each. Swin's code writes δ = query − key (the "
                   "negative of this page's Δ), so the row is (δh + M − 1)(2M − 1) + (δw + M − 1). The outline: "
                   f"the offsets the query patch ({in_row}, {in_col}) of its window reads.")
    with right:
        show("swin_query_bias", window, seed=seed, query_row=in_row, query_col=in_col, validate=False,
                            key=f"{P}_fig_swin_query")
        st.caption(f"**One query's bias** over its window: the table read at the outlined offsets. The query "
                   f"patch ({query_row}, {query_col}) of the grid sits at ({in_row}, {in_col}) of its window; "
                   "attention never crosses a window (the shifted windows of the next block move the borders).")
    # half the page, its caption beside: a square map across the whole width left its colour bar far to its right
    left, right = st.columns(2)
    with left:
        show("swin_bias_matrix", window, seed=seed, query_row=in_row, query_col=in_col, validate=False,
             key=f"{P}_fig_swin_bias")
    with right:
        st.caption(f"**The gathered bias** {window * window} × {window * window}, what the block adds to each "
                   "head's logits: the table (random values here, as a fresh model has; a checkpoint holds learned "
                   "ones) gathered per pair. It repeats in Toeplitz blocks, like Shaw's clipped table in two "
                   "dimensions, except that the window itself is the clip: no offset beyond ±(M − 1) exists. The "
                   "outlined row is the query patch's: the map on the right above.")


@st.fragment
def rope_query_panel(rows: int, cols: int, args: dict) -> None:
    """One query patch's scores against every key patch: the slice of the per-offset map the query reads."""
    query_row, query_col = query_controls(rows, cols)
    show("rope2d_query_scores", rows, cols, query_row=query_row, query_col=query_col, **args, validate=False,
         key=f"{P}_fig_rope_query")
    def signed(v: int) -> str:  # a minus sign, as the axes write it, not a hyphen
        return str(v).replace("-", "−")

    st.caption(f"**The query patch ({query_row}, {query_col}) against every key patch**: its part of the map beside "
               f"(Δh from {signed(-query_row)} to {rows - 1 - query_row}, Δw from {signed(-query_col)} to "
               f"{cols - 1 - query_col}), laid out as the image. Move the query: the picture slides, its shape stays.")


display.page_title("Images and video")
display.sign_convention(compact=True)

with st.sidebar:
    view = st.radio("view", VIEWS, key=f"{P}_view", bind="query-params")
    st.subheader("Patch grid")
    rows = int(st.slider("rows H (patches)", 1, 64, 16, key=f"{P}_rows", bind="query-params",
                         help="64 × 64 patches: a 1024 × 1024 image at 16 px, 4,096 patches."))
    cols = int(st.slider("columns W (patches)", 1, 64, 16, key=f"{P}_cols", bind="query-params"))

st.markdown(
    "An image enters a vision transformer as a grid of **patches**, read row by row. Every structure on this "
    "page depends on a pair of patches only through **(Δh, Δw) = (key row − query row, key column − query "
    "column)**: a grid of H × W patches has (H·W)² pairs but only (2H − 1)(2W − 1) offsets, so each view is "
    f"computed per offset. Here: {rows} × {cols} = {counted(rows * cols, 'patch', 'patches')}, "
    f"{counted((rows * cols) ** 2, 'pair')}, {counted((2 * rows - 1) * (2 * cols - 1), 'offset')}.")

if view == VIEWS[0]:
    index_panel(rows, cols)

elif view == VIEWS[1]:
    with st.sidebar:
        st.subheader("Swin window")
        window = int(st.slider("window M (patches per side)", 2, 16, 7, key=f"{P}_win", bind="query-params",
                               help="Swin uses 7 (224 px) and 12; Swin v2 8, 16 and 24."))
        pretrained = int(st.selectbox("Swin v2: pretrained window (0: this window)", ("0", "8", "12", "16"),
                                      key=f"{P}_pre", bind="query-params"))
        seed = int(st.slider("random table: seed", 0, 999, 0, key=f"{P}_seed", bind="query-params"))
    swin_panel(rows, cols, window, seed)
    show("swinv2_coords", window, pretrained_window=pretrained, key=f"{P}_fig_swinv2")
    st.caption("**Swin v2** replaces the table by a small MLP (2 → 512 → heads, bounded by 16·sigmoid) that "
               "reads each offset as a continuous coordinate, log-spaced: sign(x)·log2(1 + |x|)/log2(8) with "
               "x = 8·δ/(P − 1). Near offsets stay apart, far ones crowd together, so a larger window at "
               "fine-tuning (P the pretrained window) asks the MLP for coordinates only a little beyond those it "
               "learned.")

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
        st.caption(f"**The score per offset (Δh, Δw)**: {counted((2 * rows - 1) * (2 * cols - 1), 'value')} "
                   f"describe all {counted((rows * cols) ** 2, 'pair')}. Half the frequency pairs turn with the row, half with the "
                   "column, so the map is a row term plus a column term: S(Δh, Δw) = S_h(Δh) + S_w(Δw). Every "
                   "query patch reads its own H × W part of this one map.")
    with right:
        rope_query_panel(rows, cols, args)
    show("rope2d_pairs", head_dim, rows, cols, key=f"{P}_fig_rope_pairs")
    st.caption("**Which pairs turn with which axis, and how fast.** Pixtral takes a D-wide RoPE and gives its "
               "even-indexed θ to the row, the odd-indexed to the column, so rows and columns alternate along the "
               "wavelengths; the Qwen-VL vision towers use the same θ (from a D/2-wide RoPE) for both; DINOv3 uses "
               "θ_i = 1/100^(4i/D) on patch centres normalised to [−1, 1], an angle of 2π·coordinate·θ, so its "
               "wavelengths in patches grow with the grid. All three lay cos and sin out as [row pairs, column "
               "pairs] twice and pair dimension p with p + D/2 (rotate_half).")
    if score_maps.make_rope2d(rope, head_dim).normalised:
        st.caption("**DINOv3's coordinates depend on the image size**: neighbouring patches are 2/H apart, so one "
                   "patch of offset turns a pair by 2π·θ·2/H, less on a larger image: the map stretches with the "
                   "grid. Its CLS and register tokens come before the patches and are not rotated: a patch's score "
                   "against them depends on where the patch is, not on an offset.")

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
        st.caption("**Three position ids per token**, as transformers' get_rope_index builds them for a sequence "
                   f"of text, a {rows} × {cols} image (tokens after the vision tower's 2 × 2 merge), text, a "
                   f"{frames}-frame video and text. Text continues one counter on all three rows; a grid starting "
                   "at s gets t ids s + ⌊f·interval⌋, h ids s + row, w ids s + column, and the counter moves on by "
                   "max(H, W). Qwen2.5-VL's interval is tokens_per_second × seconds per temporal patch; Qwen3-VL "
                   "makes each frame its own grid after its timestamp text (two tokens here; a real timestamp, "
                   "`<0.5 seconds>`, takes a few more). When the video's t ids outgrow "
                   "max(H, W), the text after it starts below them: transformers 5.23 moves the counter by "
                   "max(H, W) only.")
        left, right = st.columns(2)
        with left:
            mrope_scores_panel(rule, rows, cols, frames, tps, seconds)
        with right:
            show("mrope_pairs", score_maps.rule_named(rule).section, key=f"{P}_fig_mrope_pairs")
            st.caption("**Which pairs each axis owns.** Sectioned (Qwen2-VL, 2.5-VL, mrope_section [16, 24, 24]): "
                       "the fastest pairs turn with time, then a block with the row, then the slowest with the "
                       "column, whose wavelengths (base 10,000 here) run from about 2,000 to 54,000 ids: across a "
                       "few dozen columns they hardly turn, so the map beside barely changes along Δw. Interleaved (Qwen3-VL, [24, 20, 20]): "
                       "t, h, w take turns, so every axis gets fast and slow pairs.")
        st.markdown(
            "**Why text is plain RoPE.** A text token carries the same id n on all three rows, so every pair turns "
            "by n·θ_i whichever axis owns it: the sections no longer matter, and between two text tokens M-RoPE "
            "is 1-D RoPE at offset j − i. Only image and video tokens, whose three ids differ, use the split.")
