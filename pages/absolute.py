"""Absolute vs relative: the sinusoidal encoding, its position similarity, the relative index, ALiBi."""
from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from relviz.app import controls, display, downloads, navigation
from relviz import absolute as words
from relviz.absolute import (projected_similarity, shift_sequence, sinusoidal_encoding, sinusoidal_similarity,
                             toeplitz_deviation)
from relviz.figures import absolute as pictures
from relviz.figures.toeplitz import toeplitz_view
from relviz.figures.toeplitz_canvas import toeplitz_overview_image
from relviz.figures.toeplitz_window import Window, needs_window
from relviz.mechanisms.alibi import WHAT_ALIBI_ADDS, bias_words
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


# Figures (relviz.figures.absolute's, which relviz.show re-exports), cached by the same scalars and held as the
# dicts they send (display.prepared_spec): every run draws them, and st.plotly_chart deep-copied and checked each
# go.Figure's arrays on every run (at L = d_model = 512: three 512 × 512 maps, 5.6 MB of JSON). Built once per
# server for the same values, shared by every session.
FIGURE_CACHE = dict(max_entries=8, show_spinner=False)


def _prepared(build):
    """``build``'s figure, cached as the dict st.plotly_chart sends (the same JSON: tests/test_page_absolute.py)."""
    @functools.wraps(build)
    def figure(*args, **kwargs):
        return display.prepared_spec(build(*args, **kwargs).to_dict())

    return st.cache_resource(**FIGURE_CACHE)(figure)


encoding_fig = _prepared(pictures.sinusoidal_encoding_map)
curve_fig = _prepared(pictures.sinusoidal_offset_curve)
alibi_fig = _prepared(pictures.alibi_bias)
slopes_fig = _prepared(pictures.alibi_slopes)
lines_fig = _prepared(pictures.alibi_lines)


# The three maps as the canvas component draws them (relviz.figures.absolute's *_canvas: their plotly twins' values
# and colours), held as the JSON they send (display.canvas_json: no pandas import, no walk per run): an L or d_model move redraws them in place, where a changed plotly
# heatmap was a new chart (two 512 × 512 maps: 4.2 MB of plotly JSON, encoded again on every run). A map over
# twice as long as it is wide stays plotly (its figure above).
@st.cache_resource(**FIGURE_CACHE)
def encoding_view(length: int, d_model: int):
    image = pictures.encoding_canvas(encoding(length, d_model))
    return display.canvas_json(image.payload()) if image is not None else encoding_fig(length, d_model)


@st.cache_resource(**FIGURE_CACHE)
def similarity_view(length: int, d_model: int, projected: bool) -> str:
    image = pictures.similarity_canvas(similarity(length, d_model, projected)[0], diverging=projected,
                                       value_label="score" if projected else "similarity")
    return display.canvas_json(image.payload())


@st.cache_resource(**FIGURE_CACHE)
def relative_view(length: int) -> str:
    return display.canvas_json(pictures.relative_canvas(length).payload())


def show_map(view, *, key: str, name: str) -> None:
    """A map as its cached canvas JSON (a str) or plotly figure (the fallback) draws."""
    if isinstance(view, str):
        display.show_canvas(view, key=key, name=name)
    else:
        display.show_figure(view, key=key)


@st.cache_data(max_entries=4, show_spinner=False)
def alibi_per_offset(length: int, heads: int, head: int) -> np.ndarray:
    """One head's bias per offset, −m·|j − i|: 2L − 1 values (the whole L × L matrix is never built)."""
    return alibi_bias_offsets(length, num_heads=heads, device=CPU)[head - 1].numpy()


@st.cache_resource(max_entries=4, show_spinner=False)
def alibi_overview(length: int, heads: int, head: int):
    return toeplitz_overview_image(alibi_per_offset(length, heads, head), length, length, value_label="bias",
                                   title=f"overview of head {head}'s bias (block means)")


# The overview with its window's rectangle and the exact window, held as what they send (display.drawable: a canvas
# picture's JSON, a plotly figure's encoded dict), as pages/t5.py holds its own: a payload dict was rebuilt and
# walked by Streamlit on every run, a go.Figure deep-copied and validated.
@st.cache_resource(max_entries=8, show_spinner=False)
def alibi_overview_drawn(length: int, heads: int, head: int, row0: int, col0: int, rows: int, cols: int):
    """(the overview's block size; its picture with the window's rectangle, display.drawable)."""
    overview = alibi_overview(length, heads, head)
    return overview.block, display.drawable(overview.with_window(Window(row0, col0, rows, cols)))


@st.cache_resource(max_entries=8, show_spinner=False)
def alibi_window(length: int, heads: int, head: int, row0: int, col0: int, rows: int, cols: int):
    """(the window's exact bias, for the downloads; its picture, display.drawable)."""
    view = toeplitz_view(alibi_per_offset(length, heads, head), length, length, value_label="bias",
                         window=Window(row0, col0, rows, cols), title=f"head {head}: bias, full resolution")
    return view.values, display.drawable(view)


@st.cache_resource(**FIGURE_CACHE)
def shift_picture(length: int, d_model: int, shift: int) -> str:
    """The shift figure as the xy canvas draws it (relviz.figures.absolute.shift_canvas: shift_figure's arrays):
    redrawn in place on a move, where a changed plotly figure was mounted and drawn anew (100-400 ms a move)."""
    return display.canvas_json(pictures.shift_canvas(shift_sequence(length, d_model, shift)).payload())


@st.fragment
def shift_section(length: int, d_model: int) -> None:
    """The whole sequence shifted: the absolute vectors all change, the scores by j − i stay (relviz.absolute). A
    fragment: moving the shift reruns this block alone, not the three maps above it (at L = d_model = 512, 5.6 MB
    of figures the page's run would send again)."""
    shift_col, shift_fig_col = st.columns([1, 3.2])
    shift = int(shift_col.slider("shift the whole sequence by s", 0, 512, 16, key="abs_shift", bind="query-params",
                                 help="The same tokens, starting at position s instead of 0."))
    shift_col.markdown(words.shift_words(shift))
    with shift_fig_col:
        display.show_xy(shift_picture(length, d_model, shift), key="abs_fig_shift",
                        name=f"sinusoidal_shift_L{length}_d{d_model}_s{shift}")


display.page_title("Absolute vs relative")
display.sign_convention(compact=True)

# a row that wraps: in three fixed columns the toggle's label was cut to "through a random h…" at 1024 px
_row = st.container(horizontal=True, vertical_alignment="center")
c1, c2, c3 = (_row.container(width=w) for w in ("stretch", "stretch", "content"))
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
        show_map(encoding_view(length, d_model), key="abs_fig_pe", name=f"sinusoidal_L{length}_d{d_model}")
        st.caption(words.ENCODING_WORDS)
        downloads.matrix_downloads(pe, name=f"sinusoidal_L{length}_d{d_model}", key="abs_dl_pe", corner="p\\\\d")
    with col_sim:
        if projected:
            st.markdown("**Through a random head**")
            show_map(similarity_view(length, d_model, projected), key="abs_fig_sim",
                     name=f"projected_similarity_L{length}_d{d_model}")
            st.caption(words.PROJECTED_WORDS)
        else:
            st.markdown("**Dot products PE_i · PE_j**")
            show_map(similarity_view(length, d_model, projected), key="abs_fig_sim",
                     name=f"sinusoidal_similarity_L{length}_d{d_model}")
            st.caption(words.DOT_PRODUCT_WORDS)
        downloads.matrix_downloads(sim, name=f"{'projected' if projected else 'sinusoidal'}_similarity_L{length}"
                                      f"_d{d_model}", key="abs_dl_sim")
    with col_rel:
        st.markdown("**Relative: j − i**")
        show_map(relative_view(length), key="abs_fig_rel", name=f"relative_L{length}")
        st.caption(words.RELATIVE_WORDS)
        downloads.matrix_downloads(rel, name=f"relative_L{length}", key="abs_dl_rel")

    st.markdown(words.ABSOLUTE_VS_RELATIVE)
    display.code_for_this_view(sinusoidal_snippet(length, d_model, projected),
                          note="pe is the encoding, result the middle picture.", key="abs_code_pe")

    shift_section(length, d_model)

    curve_col, check_col = st.columns([2, 1])
    with curve_col:
        display.show_figure(curve_fig(length, d_model, projected=projected), key="abs_fig_curve")
    with check_col:
        st.markdown("**Does it depend only on j − i?**")
        if projected:
            st.warning(words.deviation_words(deviation, projected=True), icon=":material/warning:")
        else:
            st.success(words.deviation_words(deviation, projected=False), icon=":material/check_circle:")
        st.markdown(words.CURVE_WORDS)

st.divider()
st.subheader("ALiBi: a penalty proportional to distance, one slope per head")
st.markdown(WHAT_ALIBI_ADDS)
@st.fragment
def alibi_section(length: int) -> None:
    """ALiBi's controls and pictures. A fragment: moving the heads (the tour's slider), the head shown, the mask or
    the ALiBi length reruns this section alone, not the sinusoidal figures above it."""
    a1, a2, a3 = st.columns(3)
    heads = int(a1.slider("heads", 1, 32, 12, key="abs_heads", bind="query-params"))
    controls.clamp_state("abs_head", 1, heads)  # fewer heads than the one shown: show the last
    head = int(a2.slider("show head", 1, heads, 1, key="abs_head", bind="query-params")) if heads > 1 else 1
    # "causal mask (j > i not allowed)" was cut to "causal mask (j > i…" in a third of the page at 1024 px
    causal = a3.toggle("causal mask", value=True, key="abs_causal", bind="query-params",
                       help="On: keys j > i (the future) get no attention. ALiBi was defined for causal language "
                            "models; without the mask the bias is −m·|j − i| on both sides, as "
                            "relviz.positions.alibi_bias returns it.")
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
            block, overview = alibi_overview_drawn(alibi_length, heads, head, window.row0, window.col0,
                                                   window.rows, window.cols)
            display.pooled_overview(overview, block=block, q_len=alibi_length,
                               k_len=alibi_length, q_offset=0, window=window, quantity="bias", key="abs_fig_alibi_ov",
                               note="Pooling keeps the exact extremes of every block; it never skips offsets.")
        left, right = st.columns([1, 1.25])
        with left:
            st.markdown(f"**Head {head}: bias, slope m = {slopes[head - 1]:.4g}**")
            if large:
                exact, view = alibi_window(alibi_length, heads, head, window.row0, window.col0, window.rows,
                                           window.cols)
                display.show_toeplitz(view, key="abs_fig_alibi_window", name=f"alibi_head{head}_window")
                st.caption(bias_words(causal=causal, whole=False))
                downloads.large_matrix_downloads(exact, np.arange(-(alibi_length - 1), alibi_length),
                                          alibi_per_offset(alibi_length, heads, head), q_len=alibi_length,
                                          k_len=alibi_length, window=window, quantity="bias",
                                          name="alibi", suffix=f"L{alibi_length}_heads{heads}_head{head}",
                                          key="abs_dl_alibi")
            else:
                bias, _ = alibi(alibi_length, heads, head)
                display.show_figure(alibi_fig(alibi_length, heads, head, causal=causal), key="abs_fig_alibi")
                st.caption(bias_words(causal=causal, whole=True))
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
