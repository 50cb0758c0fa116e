"""The Music Transformer skew, step by step: pad, reshape, slice, mask; the bidirectional variant; memory."""
from __future__ import annotations

import streamlit as st

from relviz.app import controls, display, downloads, navigation
from relviz.figures.skew import (
    DEMO_DIM,
    bidirectional_steps,
    causal_steps,
    demo_inputs,
    proof_numbers,
    shared_zmax,
    step_figure,
    unmasked_error,
    unmasked_error_figure,
)
from relviz.memory import format_bytes, relative_term_bytes
from relviz.snippets import skew_snippet

navigation.ensure_app_navigation()

MIN_L, MAX_L, DEFAULT_L = 3, 16, 6
#: label shown (and written to the URL) -> step_figure's colour_by
COLOUR_OPTIONS = {"score": "value", "distance": "distance", "source row": "row"}
TABS = ["Causal skew (decoder)", "Bidirectional skew (encoder)"]
DTYPES = {"fp32": 4, "fp16 / bf16": 2}


@st.cache_data(max_entries=64, show_spinner=False)
def causal(length: int, seed: int):
    demo = demo_inputs(length, seed)
    return causal_steps(demo), proof_numbers(demo)


@st.cache_data(max_entries=64, show_spinner=False)
def bidirectional(length: int, seed: int):
    demo = demo_inputs(length, seed)
    return bidirectional_steps(demo), proof_numbers(demo)


#: The steps' cells by tab: causal(length, seed) and bidirectional(length, seed) return them.
STEPS = {"causal": causal, "bidirectional": bidirectional}


@st.cache_resource(max_entries=32, show_spinner=False)  # 6 views' steps; at most 0.5 MB each (L = 16)
def step_fig(tab: str, name: str, length: int, seed: int, colour_by: str, zmax: float, x_title: str, y_title: str,
             show_scale: bool, width_budget: int):
    """One step's figure, built once per server for the same link values (read-only, shared by every session:
    a move redrew every step's figure in every session)."""
    cells, _ = STEPS[tab](length, seed)
    return step_figure(cells[name], colour_by=colour_by, zmax=zmax, length=length, x_title=x_title, y_title=y_title,
                       show_scale=show_scale, width_budget=width_budget)


def step(title: str, cells: tuple[str, str], caption: str, *, key: str, colour_by: str, zmax: float, length: int,
         seed: int, x_title: str = "column", y_title: str = "row", show_scale: bool = False,
         width_budget: int = 240) -> None:
    """A step: its title, its figure (``cells``: the tab and the name of its cells) and its caption."""
    st.markdown(f"**{title}**")
    figure = step_fig(*cells, length, seed, colour_by, zmax, x_title, y_title, show_scale, width_budget)
    display.show_figure(figure, key=key)
    if not figure.layout.meta["labels"]:
        caption += (" (Cell labels are off at this size, they would overlap: hover a cell for its distance "
                    "and source, or colour by distance.)")
    st.caption(caption)


def fmt(x: float) -> str:
    return f"{x:.1e}" if x else "0"


display.page_title("The skew, step by step")
display.sign_convention(compact=True)

left, middle, right = st.columns([1, 1, 1.4])
length = left.slider("sequence length L", MIN_L, MAX_L, DEFAULT_L, key="skew_L", bind="query-params")
seed = controls.number_control("random seed (Q and E_r)", 0, 99_999, 0, key="skew_seed", where=middle,
                               help=f"Q and the distance vectors are random Gaussian, D = {DEMO_DIM} wide; the seed "
                                    "picks them, so a link reproduces the exact numbers.")
colour_by = COLOUR_OPTIONS[right.radio(
    "colour cells by", list(COLOUR_OPTIONS), horizontal=True, key="skew_colour", bind="query-params",
    help="score: the number itself (one colour range for all steps, so a score keeps its colour as it "
         "moves). distance: the distance the score stands for. source row: the query row it came from.")]
length, seed = int(length), int(seed)

causal_tab, bidirectional_tab = st.tabs(TABS, key="skew_tab", bind="query-params")

with causal_tab:
    if causal_tab.open is not False:
        cells, proof = causal(length, seed)
        zmax = shared_zmax(cells["qer"].values)
        last = length - 1
        common = dict(colour_by=colour_by, zmax=zmax, length=length, seed=seed)
        # each title on one line in a third of a 1024 px page (~26 characters), so the three panels of a row
        # start level: a wrapped title pushed its panel below the others
        row1 = st.columns(3)
        with row1[0]:
            step("1 · Q E_rᵀ by distance", ("causal", "qer"),
                 f"Row i: query i against every distance vector. Column m stands for distance m − {last}: "
                 f"the last column is distance 0 (the query itself), the first is −{last}. A causal model "
                 "only needs these L distances.",
                 key="skew_fig_qer", y_title="query i", x_title="column m", show_scale=True, **common)
        with row1[1]:
            step("2 · Pad a zero column", ("causal", "padded"),
                 f"L × (L + 1): each row gets a zero in front (grey) and its scores shift one column right. "
                 "Nothing is computed, only memory is laid out.",
                 key="skew_fig_padded", y_title="query i", **common)
        with row1[2]:
            step("3 · Reshape to (L + 1) × L", ("causal", "reshaped"),
                 "The same numbers in the same memory order, read in rows of L instead of L + 1. So row r "
                 "starts r cells earlier in memory: it holds the last r scores of query r − 1, then query "
                 "r's pad, then the first scores of query r. Each row slides one more cell: that is the skew.",
                 key="skew_fig_reshaped", **common)
        row2 = st.columns(3)
        with row2[0]:
            step("4 · Drop row 0 → S_rel", ("causal", "skewed"),
                 "Row i now starts with query i's last i + 1 scores, distances −i … 0: key j sits exactly at "
                 "distance j − i (labels on each diagonal agree). Then the pad (j = i + 1) and, hatched, "
                 "scores of query i + 1 for the wrong distances: garbage.",
                 key="skew_fig_skewed", x_title="key j", y_title="query i", **common)
        with row2[1]:
            step("5 · Mask out j > i", ("causal", "masked"),
                 "A decoder adds −∞ above the diagonal anyway (a token must not see the future), which "
                 "removes the pad and the garbage. What remains is q_i · e(j − i) for every key j ≤ i.",
                 key="skew_fig_masked", x_title="key j", y_title="query i", **common)
        with row2[2]:
            st.markdown("**Live check: naive gather**")
            st.success(f"skew equals the naive gather on the lower triangle (j ≤ i): "
                       f"max |difference| = {fmt(proof['causal_lower'])}", icon=":material/check_circle:")
            st.caption("The naive gather (relviz.skew.gather_relative) builds e(j − i) for every cell and "
                       "takes q_i · e(j − i): Shaw et al.'s way. The skew moves scores, it does not compute "
                       "new ones; the difference is float32 rounding of two summation orders.")
            st.warning(f"Above the diagonal the skew differs from the true q_i · e(j − i) by up to "
                     f"{proof['causal_upper']:.3g}: those cells are garbage.", icon=":material/warning:")
            st.markdown(
                "**Do not use this skew in a bidirectional encoder.** Without a causal mask the garbage "
                "reaches the softmax: every key after the query gets another query's score for a wrong "
                "distance. Transformer-XL's `_rel_shift` is the same trick (pad, view, drop a row) and has "
                "the same garbage above the diagonal; reusing it in a non-causal model is a known bug in "
                "several codebases. An encoder needs the **2L − 1 distances** of the next tab.")
        st.markdown(
            "Relative attention needs, for every query i and key j, the score **q_i · e(j − i)**: the query "
            "against the learned vector of their distance. Shaw et al. gather an e(j − i) for every (i, j): an "
            "L × L × D tensor. The Music Transformer (Huang et al. 2018) computes **Q E_rᵀ** once, one score per "
            "query and *distance*, then moves every score to its (i, j) cell with a pad, a reshape and a slice: "
            "no gather, only L × D extra memory. Every cell is labelled with the distance its score stands for.")
        display.code_for_this_view(skew_snippet(length, seed, bidirectional=False, dim=DEMO_DIM),
                              note="result is step 4 (S_rel before the mask); masked is step 5.", key="skew_code_causal")
        names = {"QE_r^T": "qer", "padded": "padded", "reshaped": "reshaped", "sliced": "skewed",
                 "masked": "masked"}
        dl_choice, dl_buttons, dl_note = st.columns([1, 1, 1], vertical_alignment="bottom")
        choice = names[dl_choice.selectbox("download a step's matrix", list(names), key="skew_dl",
                                           bind="query-params")]
        with dl_buttons:
            downloads.matrix_downloads(cells[choice].values, name=f"skew_{choice}_L{length}_seed{seed}",
                                key="skew_dl_causal")
        dl_note.caption("The masked step's −∞ cells are saved as NaN.")

with bidirectional_tab:
    if bidirectional_tab.open is not False:
        cells_bi, proof = bidirectional(length, seed)
        zmax = shared_zmax(cells_bi["qer"].values)
        common = dict(colour_by=colour_by, zmax=zmax, length=length, seed=seed)
        last = length - 1
        top = st.columns([2.2, 1])
        with top[0]:
            step("1 · Q E_allᵀ: 2L − 1 distances", ("bidirectional", "qer"),
                 f"An encoder's key can lie on either side of the query, so the table holds one vector per "
                 f"distance −{last} … +{last}. Column m stands for distance m − {last}.",
                 key="skew_fig_bi_qer", y_title="query i", x_title="column m", show_scale=True,
                 width_budget=520, **common)
        with top[1]:
            st.markdown("**Live check: naive gather**")
            st.success(f"bidirectional skew equals the naive gather everywhere: "
                       f"max |difference| = {fmt(proof['bidirectional'])}", icon=":material/check_circle:")
            st.warning(f"The causal skew used here instead would be wrong above the diagonal by up to "
                       f"{proof['causal_upper']:.3g}.", icon=":material/warning:")
            st.caption("Same idea as the causal skew: only reshapes and slices, no L × L × D tensor "
                       "(tensor2tensor's dot_product_unmasked_self_attention_relative_v2). The price is a "
                       "table of 2L − 1 distances instead of L.")
        step("2 · Flatten, skip L − 1 numbers, read rows of 2L − 2", ("bidirectional", "window"),
             f"In memory, query i's score for distance −i (key 0) sits at i·(2L − 2) + {last} … so after "
             f"dropping the first {last} numbers, rows of 2L − 2 = {2 * length - 2} start exactly there. "
             "The faded columns (≥ L) are cut off next.",
             key="skew_fig_bi_window", y_title="query i", width_budget=760, **common)
        bottom = st.columns(2)
        with bottom[0]:
            step("3 · Keep the first L columns → S_rel", ("bidirectional", "result"),
                 "Every cell holds q_i · e(j − i), above the diagonal too: exact everywhere, no mask needed. "
                 "Its lower triangle equals the causal skew's (both tabs share E_r for distances ≤ 0).",
                 key="skew_fig_bi_result", x_title="key j", y_title="query i", width_budget=380, **common)
        with bottom[0]:
            display.code_for_this_view(skew_snippet(length, seed, bidirectional=True, dim=DEMO_DIM),
                                  note="result is step 3, S_rel.", key="skew_code_bidir")
        with bottom[1]:
            st.markdown("**The bug this tab avoids**")
            display.show_figure(unmasked_error_figure(unmasked_error(demo_inputs(length, seed))),
                           key="skew_fig_bi_bug")
            st.caption("The causal skew of the first tab, fed to an encoder without its mask: every cell above "
                       "the diagonal holds another query's score for a wrong distance (the pad and the garbage), "
                       "and the softmax uses it. Below the diagonal the error is 0. Transformer-XL's _rel_shift "
                       "has the same upper triangle; several codebases reuse it in encoders.")
        with bottom[0]:
            downloads.matrix_downloads(cells_bi["result"].values, name=f"skew_bidirectional_L{length}_seed{seed}",
                                key="skew_dl_bi")

st.divider()
st.subheader("Why bother: the memory of the relative term")
mem_cols = st.columns([1, 1, 1, 1.3])
mem_length = controls.number_control("L (sequence length)", 1, 1_000_000, 2048, key="skew_mL", where=mem_cols[0])
mem_dim = controls.number_control("D (model width)", 1, 65_536, 512, key="skew_mD", where=mem_cols[1])
mem_heads = controls.number_control("H (heads)", 1, 1024, 8, key="skew_mH", where=mem_cols[2])
dtype_name = mem_cols[3].selectbox("number format", list(DTYPES), key="skew_mdtype", bind="query-params")
with display.user_errors():
    mem = relative_term_bytes(int(mem_length), int(mem_dim), int(mem_heads), DTYPES[dtype_name])
    metric_cols = st.columns(4)
    metric_cols[0].metric("Shaw: L × L × D per layer", format_bytes(mem.shaw_per_layer))
    metric_cols[1].metric("skew: L × D per layer", format_bytes(mem.skew_per_layer))
    metric_cols[2].metric(f"Shaw per head (D_h = {mem.head_dim})", format_bytes(mem.shaw_per_head))
    metric_cols[3].metric("skew per head", format_bytes(mem.skew_per_head))
    st.markdown(mem.explanation())
    st.caption(
        "At L = 2048, D = 512 in fp32 the Music Transformer paper quotes “8.5 GB → 4.2 MB”. The exact "
        "figures are 2048² × 512 × 4 B = 8 589 934 592 B = 8.6 GB (decimal; it is 8.0 GiB) and "
        "2048 × 512 × 4 B = 4.2 MB: the paper's 8.5 is a rounding slip. Per head (D_h = 64): 1.1 GB vs 0.52 MB.")
