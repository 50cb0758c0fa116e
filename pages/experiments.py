"""Experiments: what each scheme can and cannot do, measured (offset resolution, length
extrapolation, cost), from the shipped results file, with a live rerun of one cell each."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from relviz import experiments as ex
from relviz.app import controls, display, navigation, quotas
from relviz.figures.experiments import (
    extrapolation_figure,
    memory_wall_figure,
    offset_detail,
    offset_overview_canvas,
    shaw_reference_figure,
    time_figure,
)
from relviz.app.training_queue import CAPS, check_work, steps_within_cap
from relviz.figures.heatmap import narrow_figure_title

navigation.ensure_app_navigation()

P = "ex"  # query-parameter prefix of this page
#: Tests (and people comparing runs) can point the page at another results file.
RESULTS_ENV = "RELVIZ_EXPERIMENTS_RESULTS"


def results_path() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or ex.RESULTS_PATH)


@st.cache_data(max_entries=4, show_spinner=False)
def load(path: str, mtime: float, size: int) -> dict:
    """The validated results (keyed by path, modification time and size, so a rerun is picked up)."""
    return ex.load_results(path)


# Figures: st.cache_resource keyed by scalars (the file's stat key, the controls, a live overlay as
# JSON text). A cached figure is shared read-only (st.plotly_chart copies it), so a rerun that
# changes one control rebuilds one figure instead of five; plotly's validation is the slow part.
FIGURE_CACHE = dict(max_entries=8, show_spinner=False)
DETAIL_TITLE_CHARS = 40   # the offset chart's title, wrapped to 3/4 of the page


def section_of(path: str, mtime: float, size: int, name: str) -> dict:
    return load(path, mtime, size)["experiments"][name]


def titled(fig: go.Figure, text: str, size: int | None = 14) -> go.Figure:
    fig.update_layout(title=dict(text=text, font=dict(size=size) if size else None))
    return fig


def live_json(rows: list | None) -> str | None:
    return json.dumps(rows, sort_keys=True) if rows is not None else None


@st.cache_resource(max_entries=16, show_spinner=False)
def overview_payload(path: str, mtime: float, size: int, threshold: float) -> str:
    """The overview for the canvas component, as the JSON it sends (shared): a threshold move redraws that element in
    place, where a new plotly figure was a new chart that plotly.js drew from scratch (issue 34)."""
    return display.canvas_json(offset_overview_canvas(
        section_of(path, mtime, size, "offset_resolution"), threshold,
        title=f"Offset resolution: mean accuracy over seeds · ✓ = at least {threshold:.0%}").payload())


@st.cache_resource(**FIGURE_CACHE)
def detail_fig(path: str, mtime: float, size: int, shown: tuple[str, ...], live: str | None,
               live_label: str) -> go.Figure:
    fig = offset_detail(section_of(path, mtime, size, "offset_resolution"), list(shown),
                        live=json.loads(live) if live else None, live_label=live_label)
    # two lines in 3/4 of the page: on one it ran 54 px past its chart at 819 px (a 125 % laptop)
    return narrow_figure_title(titled(fig, "Accuracy against shift s, with the offsets one layer cannot separate"),
                               chars=DETAIL_TITLE_CHARS)


@st.cache_resource(**FIGURE_CACHE)
def extrapolation_fig(path: str, mtime: float, size: int, live: str | None, live_label: str) -> go.Figure:
    fig = extrapolation_figure(section_of(path, mtime, size, "length_extrapolation"),
                               live=json.loads(live) if live else None, live_label=live_label)
    return titled(fig, "Accuracy against evaluation length")


@st.cache_resource(**FIGURE_CACHE)
def cost_figs(path: str, mtime: float, size: int, live: str | None) -> tuple[go.Figure, go.Figure]:
    section, rows = section_of(path, mtime, size, "cost"), json.loads(live) if live else None
    return (titled(memory_wall_figure(section, live=rows), "The memory wall: peak memory against L"),
            titled(time_figure(section, live=rows), "Forward time against L"))


@st.cache_resource(max_entries=1, show_spinner=False)
def shaw_reference_fig() -> go.Figure:
    return shaw_reference_figure(ex.SHAW_TABLE2)


def stat_key(path: Path) -> tuple[str, float, int]:
    st_ = path.stat()
    return str(path), st_.st_mtime, st_.st_size


display.page_title("Experiments")
display.sign_convention(compact=True)

path = results_path()
try:
    if not path.exists():
        ex.load_results(path)  # raises the "does not exist" message
    key = stat_key(path)
    results = load(*key)
except ValueError as error:
    st.error(f"Cannot show the experiments: {error}", icon=":material/error:")
    st.info("Recreate the results with `python -m relviz experiments` (about 20 minutes on 2 cores) or "
            "`python -m relviz experiments --quick` (a smoke run).", icon=":material/terminal:")
    navigation.end_page()

PROVENANCE = ex.provenance(results)
experiments = results["experiments"]


def reading(sentences: list[str]) -> None:
    """The generated three-sentence reading, one sentence per line."""
    st.markdown("**What the data shows** (written from the stored numbers):\n"
                + "\n".join(f"- {s}" for s in sentences if s))


@st.fragment
def resolved_overview(key: tuple, section: dict) -> None:
    """The threshold, the overview it marks and the reading it counts. A fragment: moving the threshold (the
    tour's slider) reruns this block alone, not the page's other studies."""
    threshold = float(st.slider("accuracy that counts as \"resolved\"", 0.5, 1.0, 0.9, 0.05, key=f"{P}_thr",
                                bind="query-params", format="%.2f",
                                help="Cells at or above it get a ✓; the text below counts them."))
    display.show_grid_panels(overview_payload(*key, threshold), key=f"{P}_fig_overview")
    st.markdown(ex.INTRO)  # below the main picture, so the picture is on a projector's first screen
    st.caption(PROVENANCE)
    st.markdown(ex.ONE_LAYER)
    reading(ex.offset_reading(section, threshold))


def setup_box(section: dict, extra: dict | None = None) -> None:
    setup = section["setup"]
    with st.expander("Setup: task, lengths, steps, seeds", icon=":material/settings:"):
        st.markdown(setup.get("method", ""))
        rows = {k: v for k, v in setup.items() if k not in ("method", "bench_notes")}
        rows |= extra or {}
        st.json(rows, expanded=1)
        for note in setup.get("bench_notes", []):
            st.caption(note)
        st.caption(f"Measured in {section['seconds'] / 60:.1f} min of this run.")


def cell_problem(work: int, what: str) -> str | None:
    """Why a live cell cannot run now (too much work, the session's quota), shown under the
    controls with the cell's size; None when it can."""
    trainings = quotas.session_trainings()
    problem = None
    try:
        check_work(work, what)
        trainings.check_quota()
    except ValueError as error:
        problem = str(error)
    size = f"steps × length × layers = {work:,} of at most {CAPS.max_cell_work:,} · " if work else ""
    st.caption(f"{size}{trainings.runs_left} of {CAPS.max_trainings_per_session} runs left for you "
               f"(counted per visitor over the last hour, not per tab; shared with Live attention) · one training or measurement at a time on this server.")
    if problem:
        st.error(problem, icon=":material/block:")
    return problem


# ---------------------------------------------------------------------------------------
# 1. Offset resolution

st.subheader("1 · Offset resolution", anchor="offset-resolution")
if "offset_resolution" not in experiments:
    st.markdown(ex.INTRO)
    st.caption(PROVENANCE)
    st.info("This results file has no offset-resolution experiment (run `python -m relviz experiments --only offset`).")
else:
    section = experiments["offset_resolution"]
    settings = {s["id"]: s for s in section["settings"]}
    labels = {sid: s["label"] for sid, s in settings.items()}
    resolved_overview(key, section)

    # the chooser above the chart, the page's width: in the [3, 1] column its chips were squeezed to 23 px at
    # 1024 px and scrolled sideways at 1366 px
    default = [sid for sid in ("shaw-k4", "t5-8-32") if sid in settings] or list(settings)[:2]
    chosen = st.multiselect("settings to compare", list(settings), default=default, key=f"{P}_set",
                            bind="query-params", format_func=labels.get)
    left, right = st.columns([3, 1])
    with right:
        st.markdown(ex.OFFSET_CHART)
        st.markdown(ex.SHAW_REFERENCE)
    live_state = st.session_state.get(f"{P}_live_offset")
    with left:
        live_rows = live_label = None
        if live_state:
            live_rows, live_label = live_state["rows"], live_state["label"]
        shown = chosen + ([live_state["setting"]] if live_state and live_state["setting"] not in chosen else [])
        if shown:
            fig = detail_fig(*key, tuple(shown), live_json(live_rows), live_label or "live")
            display.show_figure(fig, key=f"{P}_fig_detail")
        else:
            st.info("Choose at least one setting to compare.")
    ref_left, ref_right = st.columns([2, 3])   # [1, 2]: Table 2's axis title ran 8 px past its chart at 819 px
    with ref_left:
        display.show_figure(shaw_reference_fig(), key=f"{P}_fig_shaw_ref")
    with ref_right:
        st.dataframe(pd.DataFrame(ex.offset_table(section)), hide_index=True, height=260, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="percent")
                                    for c in ("mean", "min", "max")})
        st.caption(ex.STORED_CELLS)
    setup_box(section)
    st.caption(ex.ONE_MODEL_PER_S)

    with st.container(border=True):
        st.markdown("**Run this cell live.** Retrain one setting at every s with one seed and a small step "
                    "budget; the result is drawn as a dotted line with stars on the chart above.")
        c1, c2, c3, c4 = st.columns([2, 1, 2, 1])
        live_setting = c1.selectbox("setting", list(settings), key=f"{P}_lo_set",
                                    format_func=labels.get)
        live_layers = c2.selectbox("layers", section["setup"]["layers"], key=f"{P}_lo_lay")
        stored_max = section["setup"]["training"]["max_steps"].get(str(live_layers), 500)
        steps_cap = steps_within_cap(ex.live_offset_work(section, live_layers, 1), 400, 5)
        controls.clamp_state(f"{P}_lo_steps", 5, steps_cap)
        live_steps = int(c3.slider("max steps per s", 5, steps_cap, max(5, min(100, stored_max, steps_cap)), 5,
                                   key=f"{P}_lo_steps",
                                   help=f"The stored run allowed up to {stored_max}; fewer steps finish sooner "
                                        "but may not converge."))
        live_seed = controls.number_control("seed", 0, 999, 7, key=f"{P}_lo_seed", where=c4, bind=False)
        n_s = len(section["setup"]["shifts"])
        problem = cell_problem(ex.live_offset_work(section, live_layers, live_steps), "this cell")
        if st.button(f"Train {n_s} models (≤ {live_steps} steps each)", key=f"{P}_lo_go", type="primary",
                     disabled=problem is not None):
            rows = quotas.run_guarded(lambda report: ex.live_offset(
                section, live_setting, live_layers, seed=live_seed, max_steps=live_steps, progress=report))
            if rows is not None:
                label = ex.live_offset_label(labels[live_setting], live_layers, live_seed, live_steps)
                st.session_state[f"{P}_live_offset"] = {"rows": rows, "label": label, "setting": live_setting}
                st.rerun()
        if live_state:
            st.caption(f"Drawn above: {live_state['label']}: {ex.live_offset_summary(live_state['rows'])}")


# ---------------------------------------------------------------------------------------
# 2. Length extrapolation

st.subheader("2 · Length extrapolation: train short, test long", anchor="length-extrapolation")
if "length_extrapolation" not in experiments:
    st.info("This results file has no length-extrapolation experiment "
            "(run `python -m relviz experiments --only length`).")
else:
    section = experiments["length_extrapolation"]
    setup = section["setup"]
    settings = {s["id"]: s for s in section["settings"]}
    labels = {sid: s["label"] for sid, s in settings.items()}
    st.markdown(ex.extrapolation_setup_sentence(setup))
    left, right = st.columns([3, 1])
    live_state = st.session_state.get(f"{P}_live_extrap")
    with left:
        fig = extrapolation_fig(*key, live_json(live_state["rows"] if live_state else None),
                                live_state["label"] if live_state else "live")
        display.show_figure(fig, key=f"{P}_fig_extrap")
    with right:
        st.markdown(ex.EXTRAPOLATION_CHART)
        st.markdown(f"**Published reference (ALiBi).** {ex.ALIBI_HEADLINE}")
        st.caption(ex.ALIBI_ON_SHIFT)
    reading(ex.extrapolation_reading(section))
    setup_box(section)

    with st.container(border=True):
        st.markdown("**Run this cell live.** Retrain one scheme at the training length with one seed, then "
                    "evaluate it at every length; drawn as a dotted line with stars.")
        c1, c2, c3 = st.columns([2, 2, 1])
        live_setting = c1.selectbox("scheme", list(settings), key=f"{P}_le_set",
                                    index=list(settings).index("alibi") if "alibi" in settings else 0,
                                    format_func=labels.get)
        stored_max = max(setup["training"]["max_steps"].values())
        steps_cap = steps_within_cap(ex.live_extrapolation_work(section, 1), 600, 10)
        controls.clamp_state(f"{P}_le_steps", 10, steps_cap)
        live_steps = int(c2.slider("max steps", 10, steps_cap, max(10, min(300, stored_max, steps_cap)), 10,
                                   key=f"{P}_le_steps",
                                   help=f"The stored run allowed up to {stored_max}."))
        live_seed = controls.number_control("seed", 0, 999, 7, key=f"{P}_le_seed", where=c3, bind=False)
        problem = cell_problem(ex.live_extrapolation_work(section, live_steps), "this cell")
        if st.button(f"Train and evaluate at {len(setup['factors'])} lengths", key=f"{P}_le_go", type="primary",
                     disabled=problem is not None):
            rows = quotas.run_guarded(lambda report: ex.live_extrapolation(
                section, live_setting, seed=live_seed, max_steps=live_steps, progress=report))
            if rows is not None:
                label = f"live: {settings[live_setting]['label']}, seed {live_seed}, ≤ {live_steps} steps"
                st.session_state[f"{P}_live_extrap"] = {"rows": rows, "label": label}
                st.rerun()
        if live_state:
            st.caption(f"Drawn above: {live_state['label']}: "
                       f"{ex.live_extrapolation_summary(live_state['rows'])}")


# ---------------------------------------------------------------------------------------
# 3. Cost

st.subheader("3 · Cost: the memory wall", anchor="cost")
if "cost" not in experiments:
    st.info("This results file has no cost experiment (run `python -m relviz experiments --only cost`).")
else:
    section = experiments["cost"]
    setup = section["setup"]
    st.markdown(ex.cost_setup_sentence(setup))
    live_state = st.session_state.get(f"{P}_live_cost")
    left, right = st.columns([3, 2])
    with left:
        wall, timing = cost_figs(*key, live_json(live_state["rows"] if live_state else None))
        display.show_figure(wall, key=f"{P}_fig_wall")
    with right:
        display.show_figure(timing, key=f"{P}_fig_time")
        st.caption(ex.cost_chart_caption(setup['memory_total_bytes']))
    reading(ex.cost_reading(section))
    skipped = ex.skipped_cost_summary(section)
    if skipped:
        st.caption(skipped)
    setup_box(section)

    with st.container(border=True):
        st.markdown("**Run this cell live.** Measure one implementation on this server at a few lengths (each "
                    "in a fresh process, as the stored run did); drawn as black stars on both charts.")
        c1, c2 = st.columns([2, 2])
        impl = c1.selectbox("implementation", list(ex.IMPLEMENTATIONS), key=f"{P}_lc_impl",
                            index=list(ex.IMPLEMENTATIONS).index("chunked"),
                            format_func=ex.IMPLEMENTATIONS.get)
        lengths = c2.multiselect("lengths", [128, 256, 512, 1024, 2048], default=[256, 512], key=f"{P}_lc_len",
                                 max_selections=3, help="Up to three; 2048 takes a few seconds per case.")
        problem = cell_problem(0, "this measurement")
        if st.button("Measure", key=f"{P}_lc_go", type="primary", disabled=not lengths or problem is not None):
            rows = quotas.run_guarded(lambda report: ex.live_cost(impl, sorted(lengths), chunk=setup["chunk"],
                                                              progress=report))
            if rows is not None:
                st.session_state[f"{P}_live_cost"] = {"rows": rows, "impl": impl}
                st.rerun()
        if live_state:
            st.caption(f"Drawn above: {ex.IMPLEMENTATIONS[live_state['impl']]}: "
                       f"{ex.live_cost_summary(live_state['rows'])}")
