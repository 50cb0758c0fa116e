"""Absolute vs relative: the sinusoidal encoding, its position similarity, the relative index, ALiBi."""
from __future__ import annotations

import numpy as np
import streamlit as st

from relviz.app import controls, display, downloads, navigation
from relviz.absolute import projected_similarity, sinusoidal_encoding, sinusoidal_similarity, toeplitz_deviation
from relviz.figures import absolute as pictures
from relviz.figures.absolute import relative_figure
from relviz.figures.toeplitz import Window, needs_window, toeplitz_overview_image, toeplitz_view
from relviz.positions import alibi_bias, alibi_bias_offsets, alibi_slopes, relative_positions
from relviz.schemes.alibi import slope_rule_text
from relviz.snippets import alibi_snippet, sinusoidal_snippet

navigation.ensure_app_navigation()

MAX_LENGTH = 512
CPU = "cpu"  # the page draws on the CPU whatever the default device is


@st.cache_data(max_entries=16, show_spinner=False)
def encoding(length: int, d_model: int) -> np.ndarray:
    return sinusoidal_encoding(length, d_model, device=CPU).numpy()


@st.cache_data(max_entries=16, show_spinner=False)
def similarity(length: int, d_model: int, projected: bool) -> tuple[np.ndarray, float]:
    if projected:
        matrix = projected_similarity(length, d_model, d_head=64, seed=0, device=CPU)
    else:
        matrix = sinusoidal_similarity(length, d_model, normalize=True, device=CPU)
    return matrix.numpy(), toeplitz_deviation(matrix)


@st.cache_data(max_entries=16, show_spinner=False)
def relative(length: int) -> np.ndarray:
    return relative_positions(length, device=CPU).numpy().astype(np.int16)


@st.cache_data(max_entries=32, show_spinner=False)
def alibi(length: int, heads: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """(bias of one head [L, L], slopes of all heads)."""
    bias = alibi_bias(length, num_heads=heads, device=CPU)[head - 1]
    return bias.numpy(), alibi_slopes(heads, device=CPU).numpy()


# Figures (relviz.figures.absolute's, which relviz.show re-exports), cached by the same scalars: a figure is
# read-only once built (st.plotly_chart copies it), so going back to a recent setting skips plotly's slow
# property validation.
FIGURE_CACHE = dict(max_entries=8, show_spinner=False)
encoding_fig = st.cache_resource(**FIGURE_CACHE)(pictures.sinusoidal_encoding_map)
similarity_fig = st.cache_resource(**FIGURE_CACHE)(pictures.sinusoidal_similarity_map)
curve_fig = st.cache_resource(**FIGURE_CACHE)(pictures.sinusoidal_offset_curve)
alibi_fig = st.cache_resource(**FIGURE_CACHE)(pictures.alibi_bias)
slopes_fig = st.cache_resource(**FIGURE_CACHE)(pictures.alibi_slopes)
lines_fig = st.cache_resource(**FIGURE_CACHE)(pictures.alibi_lines)


@st.cache_resource(**FIGURE_CACHE)
def shift_fig(length: int, d_model: int, shift: int):
    return pictures.sinusoidal_shift(length, d_model, shift)


@st.cache_resource(**FIGURE_CACHE)
def relative_fig(length: int):
    return relative_figure(relative(length))


@st.cache_data(max_entries=4, show_spinner=False)
def alibi_per_offset(length: int, heads: int, head: int) -> np.ndarray:
    """One head's bias per offset, −m·|j − i|: 2L − 1 values (the whole L × L matrix is never built)."""
    return alibi_bias_offsets(length, num_heads=heads, device=CPU)[head - 1].numpy()


@st.cache_resource(max_entries=4, show_spinner=False)
def alibi_overview(length: int, heads: int, head: int):
    return toeplitz_overview_image(alibi_per_offset(length, heads, head), length, length, value_label="bias",
                                   title=f"overview of head {head}'s bias (block means)")


@st.cache_resource(max_entries=8, show_spinner=False)
def alibi_window(length: int, heads: int, head: int, row0: int, col0: int, rows: int, cols: int):
    return toeplitz_view(alibi_per_offset(length, heads, head), length, length, value_label="bias",
                         window=Window(row0, col0, rows, cols), title=f"head {head}: bias, full resolution")


display.page_title("Absolute vs relative")
display.sign_convention(compact=True)

c1, c2, c3 = st.columns(3)
length = int(c1.slider("positions L", 8, MAX_LENGTH, 128, step=8, key="abs_L", bind="query-params"))
d_model = int(c2.slider("d_model", 4, 512, 128, step=4, key="abs_d", bind="query-params",
                        help="Width of the encoding: d_model / 2 sin/cos pairs, one per frequency."))
projected = c3.toggle("through a random head", value=False,
                      key="abs_proj", bind="query-params",
                      help="Score (PE_i W_Q)·(PE_j W_K) / √64 with random Gaussian W_Q, W_K: what one head "
                           "of an untrained model sees of the positions alone.")

with display.user_errors():
    pe = encoding(length, d_model)
    sim, deviation = similarity(length, d_model, projected)
    rel = relative(length)
    col_pe, col_sim, col_rel = st.columns(3)
    with col_pe:
        st.markdown("**Absolute: PE[p, d]**")
        display.show_figure(encoding_fig(length, d_model), key="abs_fig_pe")
        st.caption("Dimensions 2k and 2k + 1 hold sin and cos of p·ω_k with ω_k = 10000^(−2k/d_model): the "
                   "first pairs turn fast (wavelength 2π), later ones ever slower (up to 2π·10000). Each "
                   "row is one position's vector — a different vector for every position.")
        downloads.matrix_downloads(pe, name=f"sinusoidal_L{length}_d{d_model}", key="abs_dl_pe", corner="p\\\\d")
    with col_sim:
        if projected:
            st.markdown("**Through a random head**")
            display.show_figure(similarity_fig(length, d_model, projected=projected), key="abs_fig_sim")
            st.caption("(PE_i W_Q)·(PE_j W_K) / √64 with random Gaussian W_Q, W_K. The projections mix "
                       "frequencies, so the sin·sin + cos·cos pairs no longer combine into cos((j − i)ω): the score depends on where the pair sits, not only on j − i. A "
                       "trained head can learn to keep the relative part, but nothing forces it to.")
        else:
            st.markdown("**Dot products PE_i · PE_j**")
            display.show_figure(similarity_fig(length, d_model, projected=projected), key="abs_fig_sim")
            st.caption("Shown divided by d_model / 2. sin(a)sin(b) + cos(a)cos(b) = cos(a − b), so "
                       "PE_i · PE_j = Σ_k cos((j − i)·ω_k): "
                       "constant along every diagonal, like the relative matrix beside it. Absolute vectors, "
                       "relative dot products.")
        downloads.matrix_downloads(sim, name=f"{'projected' if projected else 'sinusoidal'}_similarity_L{length}"
                                      f"_d{d_model}", key="abs_dl_sim")
    with col_rel:
        st.markdown("**Relative: j − i**")
        display.show_figure(relative_fig(length), key="abs_fig_rel")
        st.caption("What a relative scheme gives the score directly: the offset, the same along each "
                   "diagonal (a Toeplitz matrix). Shaw et al. look it up in a table, T5 in buckets, ALiBi "
                   "turns it into a penalty (below).")
        downloads.matrix_downloads(rel, name=f"relative_L{length}", key="abs_dl_rel")

    st.markdown(
        "An **absolute** encoding gives every position its own vector and adds it to the token: the model must "
        "*learn* to compare positions. A **relative** scheme hands the attention score the offset j − i "
        "directly. The sinusoidal encoding sits in between: its vectors are absolute, but their dot products "
        "depend only on the offset.")
    display.code_for_this_view(sinusoidal_snippet(length, d_model, projected),
                          note="pe is the encoding, result the middle picture.", key="abs_code_pe")

    # the whole sequence shifted: the absolute vectors all change, the scores by j − i stay (relviz.absolute)
    shift_col, shift_fig_col = st.columns([1, 3.2])
    shift = int(shift_col.slider("shift the whole sequence by s", 0, 512, 16, key="abs_shift", bind="query-params",
                                 help="The same tokens, starting at position s instead of 0."))
    shift_col.markdown(
        f"**Move every token {shift} positions along.** Each position's own vector PE(i) becomes PE(i + {shift}): "
        "left, how far each one moved. A model that reads positions from these vectors sees a different input. "
        "Right: the dot products by offset j − i, before (line) and after (dots): the relative structure, what "
        "a relative scheme gives the score, does not move.")
    with shift_fig_col:
        display.show_figure(shift_fig(length, d_model, shift), key="abs_fig_shift")

    curve_col, check_col = st.columns([2, 1])
    with curve_col:
        display.show_figure(curve_fig(length, d_model, projected=projected), key="abs_fig_curve")
    with check_col:
        st.markdown("**Does it depend only on j − i?**")
        if projected:
            st.warning(f"No: along one diagonal (same j − i) the random head's score varies by up to "
                       f"{deviation:.3g}. The orange band on the left is that spread.", icon=":material/warning:")
        else:
            st.success(f"Yes: the largest spread along any diagonal is {deviation:.1e} (float32 rounding).",
                       icon=":material/check_circle:")
        st.markdown(
            "The curve is **symmetric**: the raw similarity cannot tell a key 5 positions back from one 5 "
            "ahead, and it is **not monotone** — it ripples, so it is a poor distance measure far away. The "
            "model only sees position through learned projections of token + PE, which is why relative "
            "schemes put j − i into the score explicitly.")

st.divider()
st.subheader("ALiBi: a penalty proportional to distance, one slope per head")
st.markdown(
    "ALiBi (Press et al., *Train Short, Test Long*) adds no position vectors at all. Each head adds "
    "**−m_h · (i − j)** to the logit of key j ≤ i: the further back, the larger the penalty; a steep head "
    "looks locally, a flat one far. The slopes are fixed, not learned.")
@st.fragment
def alibi_section(length: int) -> None:
    """ALiBi's controls and pictures. A fragment: moving the heads (the tour's slider), the head shown, the mask or
    the ALiBi length reruns this section alone, not the sinusoidal figures above it."""
    a1, a2, a3 = st.columns(3)
    heads = int(a1.slider("heads", 1, 32, 12, key="abs_heads", bind="query-params"))
    controls.clamp_state("abs_head", 1, heads)  # fewer heads than the one shown: show the last
    head = int(a2.slider("show head", 1, heads, 1, key="abs_head", bind="query-params")) if heads > 1 else 1
    causal = a3.toggle("causal mask (j > i not allowed)", value=True, key="abs_causal", bind="query-params",
                       help="ALiBi was defined for causal language models; without the mask the bias is "
                            "−m·|j − i| on both sides, as relviz.positions.alibi_bias returns it.")
    alibi_length = controls.number_control("ALiBi length", 8, controls.MAX_LENGTH, None, key="abs_aL", where=a1,
                                           placeholder=f"{length} (L above)",
                                           help="Empty: L above. Above 512 the bias is shown as a pooled overview "
                                                "and an exact window, computed per offset.")
    alibi_length = length if alibi_length is None else int(alibi_length)
    with display.user_errors():
        rule = slope_rule_text(heads)
        slopes = alibi_slopes(heads, device=CPU).numpy()
        large = needs_window(alibi_length, alibi_length)
        if large:  # the overview panel needs the page's width (it has two columns of its own)
            window = controls.window_controls("abs_al", alibi_length, alibi_length, q_offset=0)
            display.pooled_overview(alibi_overview(alibi_length, heads, head).with_window(window), q_len=alibi_length,
                               k_len=alibi_length, q_offset=0, window=window, quantity="bias", key="abs_fig_alibi_ov",
                               note="Pooling keeps the exact extremes of every block; it never skips offsets.")
        left, right = st.columns([1, 1.25])
        with left:
            st.markdown(f"**Head {head}: bias, slope m = {slopes[head - 1]:.4g}**")
            if large:
                view = alibi_window(alibi_length, heads, head, window.row0, window.col0, window.rows, window.cols)
                display.show_toeplitz(view, key="abs_fig_alibi_window", name=f"alibi_head{head}_window")
                st.caption("−m·|j − i| in every cell, as relviz.positions.alibi_bias returns it"
                           + (": a causal model masks the cells above the diagonal (j > i), which this large view "
                              "does not grey out." if causal else "."))
                downloads.large_matrix_downloads(view.values, np.arange(-(alibi_length - 1), alibi_length),
                                          alibi_per_offset(alibi_length, heads, head), q_len=alibi_length,
                                          k_len=alibi_length, window=window, quantity="bias",
                                          name="alibi", suffix=f"L{alibi_length}_heads{heads}_head{head}",
                                          key="abs_dl_alibi")
            else:
                bias, _ = alibi(alibi_length, heads, head)
                display.show_figure(alibi_fig(alibi_length, heads, head, causal=causal), key="abs_fig_alibi")
                st.caption("Zero on the diagonal, falling linearly with distance into the past. Grey above the "
                           "diagonal: masked by the causal mask." if causal else
                           "Zero on the diagonal, falling linearly with |j − i| on both sides (no mask).")
                display.code_for_this_view(alibi_snippet(alibi_length, heads, head, causal),
                                      note="result is the bias above; score_mod adds every head's bias in "
                                           "FlexAttention.", key="abs_code_alibi")
                downloads.matrix_downloads(np.where(relative(alibi_length) > 0, np.nan, bias) if causal else bias,
                                    name=f"alibi_L{alibi_length}_heads{heads}_head{head}", key="abs_dl_alibi")
        with right:
            st.markdown("**Slopes of all heads** (bar height: −log2 m)")
            display.show_figure(slopes_fig(heads, head=head), key="abs_fig_slopes")
            st.markdown(rule)
            st.markdown("**Bias against distance, every head** (selected head in red)")
            display.show_figure(lines_fig(alibi_length, heads, head=head), key="abs_fig_lines")


alibi_section(length)
