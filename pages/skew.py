"""The Music Transformer skew, step by step: pad, reshape, slice, mask; the bidirectional variant; memory."""
from __future__ import annotations

import streamlit as st

from relviz.app import controls, display, downloads, links, navigation
from relviz.figures.skew_canvas import check_panel, step_panel, step_payload, steps_json
from relviz import skew as skew_words
from relviz.figures.skew import (
    DEMO_DIM,
    NO_LABELS,
    bidirectional_steps,
    causal_steps,
    demo_inputs,
    proof_numbers,
    shared_zmax,
    unmasked_error,
    unmasked_error_figure,
)
from relviz.memory import PAPER_FIGURES, format_bytes, relative_term_bytes
from relviz.snippets import skew_snippet

navigation.ensure_app_navigation()

MIN_L, MAX_L, DEFAULT_L = 3, 16, 6
#: label shown (and written to the URL) -> step_figure's colour_by
COLOUR_OPTIONS = {"score": "value", "distance": "distance", "source row": "row"}
#: The title of the panel that checks the skew against the naive gather, beside the steps
CHECK_TITLE = "Live check: naive gather"
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


@st.cache_resource(max_entries=32, show_spinner=False)  # 6 views' steps; at most ~0.1 MB each (L = 16)
def step_picture(tab: str, name: str, length: int, seed: int, colour_by: str, zmax: float, x_title: str,
                 y_title: str, show_scale: bool, width_budget: int) -> tuple[str, bool]:
    """One step's picture for the steps component (relviz.figures.skew_canvas.step_payload) as its JSON, and whether
    its cells carry labels; built once per server for the same link values (read-only, shared by every session).
    A canvas, not a plotly chart: Streamlit mounted a new chart for every changed plotly spec, so an L move had
    plotly.js draw five charts from scratch (issue 34)."""
    cells, _ = STEPS[tab](length, seed)
    payload = step_payload(cells[name], name=f"skew_{tab}_{name}_L{length}_seed{seed}", colour_by=colour_by,
                           zmax=zmax, length=length, x_title=x_title, y_title=y_title, show_scale=show_scale,
                           width_budget=width_budget)
    return display.canvas_json(payload), payload["labels_on"]


def step(words: skew_words.StepWords, cells: tuple[str, str], *, colour_by: str, zmax: float, length: int,
         seed: int, x_title: str = "column", y_title: str = "row", show_scale: bool = False,
         width_budget: int = 240) -> dict:
    """A step's panel for the steps component: its title, its picture (``cells``: the tab and the name of its
    cells) and its caption."""
    picture, labels_on = step_picture(*cells, length, seed, colour_by, zmax, x_title, y_title, show_scale,
                                      width_budget)
    return step_panel(words.title, words.caption + ("" if labels_on else NO_LABELS), picture)


display.page_title("The skew, step by step")
display.sign_convention(compact=True)


@st.fragment
def steps() -> None:
    """The controls and every step they change: a fragment, so a move of L, the seed or the colouring reruns this
    part alone, not the memory panel below or the page's navigation (issue 34: a move's elements and its time to
    the drawn charts)."""
    left, middle, right = st.columns([1, 1, 1.4])
    length = left.slider("sequence length L", MIN_L, MAX_L, DEFAULT_L, key="skew_L", bind="query-params")
    seed = controls.number_control("random seed (Q and E_r)", 0, 99_999, 0, key="skew_seed", where=middle,
                                   help=f"Q and the distance vectors are random Gaussian, D = {DEMO_DIM} wide; the "
                                        "seed picks them, so a link reproduces the exact numbers.")
    colour_by = COLOUR_OPTIONS[right.radio(
        "colour cells by", list(COLOUR_OPTIONS), horizontal=True, key="skew_colour", bind="query-params",
        help="score: the number itself (one colour range for all steps, so a score keeps its colour as it "
             "moves). distance: the distance the score stands for. source row: the query row it came from.")]
    length, seed = int(length), int(seed)

    causal_tab, bidirectional_tab = st.tabs(TABS, key="skew_tab", bind="query-params")
    closed_tab_keys: list[str] = []  # the URL keys of the tabs this run does not open: they stay in the link

    with causal_tab:
        if causal_tab.open is not False:
            cells, proof = causal(length, seed)
            zmax = shared_zmax(cells["qer"].values)
            words = skew_words.causal_step_words(length)
            common = dict(colour_by=colour_by, zmax=zmax, length=length, seed=seed)
            # each title on one line in a third of a 1024 px page (~26 characters), so the three panels of a row
            # start level: a wrapped title pushed its panel below the others. Each row of three (steps 1-3; steps
            # 4, 5 and the live check) is one component (relviz/components/step_canvas.js): an L move re-sends two
            # elements where it re-sent 20 (a title, a canvas and a caption each, the check's five), which
            # Streamlit's React re-rendered one by one (issue 34: the browser's share of a move). Two, not one: the
            # first row is a tour's subject, whole on a 1280 x 720 projector
            exact, garbage = skew_words.causal_check_words(proof["causal_lower"], proof["causal_upper"])
            row1 = [step(words["qer"], ("causal", "qer"), y_title="query i", x_title="column m", show_scale=True,
                         **common),
                    step(words["padded"], ("causal", "padded"), y_title="query i", **common),
                    step(words["reshaped"], ("causal", "reshaped"), **common)]
            row2 = [step(words["skewed"], ("causal", "skewed"), x_title="key j", y_title="query i", **common),
                    step(words["masked"], ("causal", "masked"), x_title="key j", y_title="query i", **common),
                    check_panel(CHECK_TITLE, [("success", exact), ("caption", skew_words.NAIVE_GATHER),
                                              ("warning", garbage), ("text", skew_words.NOT_IN_AN_ENCODER)])]
            display.show_steps(steps_json(row1, [1, 1, 1]), key="skew_fig_qer")
            display.show_steps(steps_json(row2, [1, 1, 1]), key="skew_fig_skewed")
            st.markdown(skew_words.WHY_THE_SKEW)
            display.code_for_this_view(skew_snippet(length, seed, bidirectional=False, dim=DEMO_DIM),
                                       note="result is step 4 (S_rel before the mask); masked is step 5.",
                                       key="skew_code_causal")
            names = {"QE_r^T": "qer", "padded": "padded", "reshaped": "reshaped", "sliced": "skewed",
                     "masked": "masked"}
            dl_choice, dl_buttons, dl_note = st.columns([1, 1, 1], vertical_alignment="bottom")
            choice = names[dl_choice.selectbox("download a step's matrix", list(names), key="skew_dl",
                                               bind="query-params")]
            with dl_buttons:
                downloads.matrix_downloads(cells[choice].values, name=f"skew_{choice}_L{length}_seed{seed}",
                                           key="skew_dl_causal")
            dl_note.caption("The masked step's −∞ cells are saved as NaN.")
        else:
            closed_tab_keys.append("skew_dl")

    with bidirectional_tab:
        if bidirectional_tab.open is not False:
            cells_bi, proof = bidirectional(length, seed)
            zmax = shared_zmax(cells_bi["qer"].values)
            common = dict(colour_by=colour_by, zmax=zmax, length=length, seed=seed)
            words = skew_words.bidirectional_step_words(length)
            exact, wrong = skew_words.bidirectional_check_words(proof["bidirectional"], proof["causal_upper"])
            top = [step(words["qer"], ("bidirectional", "qer"), y_title="query i", x_title="column m",
                        show_scale=True, width_budget=520, **common),
                   check_panel(CHECK_TITLE, [("success", exact), ("warning", wrong),
                                             ("caption", skew_words.BIDIRECTIONAL_PRICE)])]
            display.show_steps(steps_json(top, [2.2, 1]), key="skew_fig_bi_qer")   # a tour's subject, as above
            window = step(words["window"], ("bidirectional", "window"), y_title="query i", width_budget=760,
                          **common)
            display.show_steps(steps_json([window], [1]), key="skew_fig_bi_window")
            bottom = st.columns(2)
            with bottom[0]:
                result = step(words["result"], ("bidirectional", "result"), x_title="key j", y_title="query i",
                              width_budget=380, **common)
                display.show_steps(steps_json([result], [1]), key="skew_fig_bi_result")
            with bottom[0]:
                display.code_for_this_view(skew_snippet(length, seed, bidirectional=True, dim=DEMO_DIM),
                                           note="result is step 3, S_rel.", key="skew_code_bidir")
            with bottom[1]:
                st.markdown("**The bug this tab avoids**")
                display.show_figure(unmasked_error_figure(unmasked_error(demo_inputs(length, seed))),
                                    key="skew_fig_bi_bug")
                st.caption(skew_words.UNMASKED_ERROR)
            with bottom[0]:
                downloads.matrix_downloads(cells_bi["result"].values,
                                           name=f"skew_bidirectional_L{length}_seed{seed}", key="skew_dl_bi")
    links.keep_in_link(closed_tab_keys)


steps()

st.divider()
st.subheader("Why bother: the memory of the relative term")
mem_cols = st.columns([1, 1, 1, 1.3])
mem_length = controls.number_control("L (sequence length)", 1, 1_000_000, 2048, key="skew_mL", where=mem_cols[0])
mem_dim = controls.number_control("D (model width)", 1, 65_536, 512, key="skew_mD", where=mem_cols[1])
mem_heads = controls.number_control("H (heads)", 1, 1024, 8, key="skew_mH", where=mem_cols[2])
dtype_name = mem_cols[3].selectbox("number format", list(DTYPES), key="skew_mdtype", bind="query-params")
with display.user_errors():
    mem = relative_term_bytes(int(mem_length), int(mem_dim), int(mem_heads), DTYPES[dtype_name])
    metrics = st.container(horizontal=True)   # wraps: four fixed columns cut "Shaw: L × …" at 819 px
    metrics.metric("Shaw: L × L × D per layer", format_bytes(mem.shaw_per_layer))
    metrics.metric("skew: L × D per layer", format_bytes(mem.skew_per_layer))
    metrics.metric(f"Shaw per head (D_h = {mem.head_dim})", format_bytes(mem.shaw_per_head))
    metrics.metric("skew per head", format_bytes(mem.skew_per_head))
    st.markdown(mem.explanation())
    st.caption(PAPER_FIGURES)
