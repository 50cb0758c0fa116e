"""Live attention: a small transformer trained with each scheme, run on a sequence you choose.

First screen: the sequence, and one head's attention beside the scheme's position structure
(hover: the scheme's own index for the cell). Below: prediction against target, the model's
description, every layer's and head's attention, mean attention by offset, the learned position
parameters, and training your own model in the session.
"""
from __future__ import annotations

import streamlit as st

from relviz import inspection
from relviz.app import controls, display, downloads, navigation, quotas
from relviz.app.training_queue import CAPS, SessionTrainings, TrainingRequest, check_request, scheme_caps, train_request
from relviz.figures.attention import (
    attention_grid_parts,
    attention_heatmap_parts,
    grid_caption,
    offset_profile_parts,
    prediction_strip_parts,
    structure_heatmap_parts,
)
from relviz.figures.heatmap import NARROW_TITLE_CHARS, narrow_figure_title, narrow_title
from relviz.figures.layers import view_figure, view_parts
from relviz.inspection import (
    LiveModel,
    clamped_layer,
    mean_attention_by_offset,
    no_structure_text,
    offset_findings,
    parameter_caption,
    parameter_views,
    position_structure,
    random_text,
    resize_text,
    run_view,
    structure_text,
)
from relviz.schemes import REGISTRY, get_scheme
from relviz.tasks import DIGITS, TASKS
from relviz.training import load_checkpoint, scan_checkpoints

P = "at"  # query-parameter prefix of this page

navigation.ensure_app_navigation()

#: Longest sequence this page runs (attention of every layer and head is drawn).
MAX_TEXT = 256
DEFAULT_LENGTH = 32
DEFAULT_MODEL = "t5-shift"
DEFAULT_SCHEME = "t5"
SEED_MAX = 2**31 - 1
#: A position-parameter chart's title, wrapped to fit its column (3/5 of the page, ~280 px at a projector's 819 px)
PARAMETER_TITLE_CHARS = 36


# ---------------------------------------------------------------------------------------
# Models: shipped checkpoints (cached for every user) and the session's own


@st.cache_data(max_entries=1, ttl=600, show_spinner=False)
def shipped_listing() -> tuple[list[str], dict[str, str]]:
    """Names of the valid shipped checkpoints (in the schemes' order), and why any others are not listed."""
    order = {scheme: n for n, scheme in enumerate(REGISTRY)}
    scan = scan_checkpoints()
    infos = sorted(scan.checkpoints, key=lambda info: (order.get(info.scheme, 99), info.name))
    return [info.name for info in infos], dict(scan.problems)


@st.cache_resource(max_entries=16, show_spinner="Loading the checkpoint…")
def shipped_checkpoint(name: str):
    """A loaded checkpoint, shared by every session: eval mode, no gradients, never mutated."""
    return load_checkpoint(name)


def active_model(name: str, trainings: SessionTrainings) -> LiveModel:
    trained = trainings.get(name)
    if trained is not None:
        return LiveModel.from_trained(trained)
    return LiveModel.from_checkpoint(name, shipped_checkpoint(name))


# ---------------------------------------------------------------------------------------
# Cached computations: keyed by the model's key (unique per weights) and scalars/strings.
# Everything in st.cache_resource, shared read-only: the arrays as they are, the figures as the dicts they send
# (display.prepared: encoded once, no go.Figure built, nothing validated or copied on a run); st.cache_data
# would unpickle a copy on every call. Bounded: at the longest
# sequence (256) an entry is at most ~3 MB, so these caches stay near 100 MB in the worst case.


# A move's figures each ask for the run and the structure (2 MB of weights at length 256): one object, no copies.
@st.cache_resource(max_entries=16, show_spinner=False)
def run(key: str, text: str, _model, _task):
    view = run_view(_model, _task, text)
    for array in (view.weights, view.mask, view.correct):
        array.setflags(write=False)
    return view


@st.cache_resource(max_entries=16, show_spinner=False)
def structure(key: str, length: int, layer: int, _model):
    """Layer ``layer``'s mechanism's structure, the one Your model draws for that layer."""
    return position_structure(_model, length, layer)


@st.cache_resource(max_entries=12, show_spinner=False)
def grid_figure(key: str, text: str, _model, _task):
    # sent as built (display.prepared): a go.Figure of 8 heatmaps and 16 axes cost ~12 ms to build on a move
    return display.prepared(*attention_grid_parts(run(key, text, _model, _task).weights,
                                                  structure=structure(key, len(text), 0, _model),
                                                  titled=False))  # the section heading names it


@st.cache_resource(max_entries=24, show_spinner=False)
def head_figure(key: str, text: str, layer: int, head: int, train_length: int, _model, _task):
    weights = run(key, text, _model, _task).weights[layer, head]
    return display.prepared(*attention_heatmap_parts(weights, layer=layer, head=head,
                                                     structure=structure(key, len(text), layer, _model),
                                                     train_length=train_length))


@st.cache_resource(max_entries=16, show_spinner=False)
def structure_figure(key: str, length: int, layer: int, head: int, _model):
    return display.prepared(*structure_heatmap_parts(structure(key, length, layer, _model), head=head))


@st.cache_resource(max_entries=12, show_spinner=False)
def strip_figure(key: str, text: str, train_length: int, _model, _task):
    return display.prepared(*prediction_strip_parts(run(key, text, _model, _task), train_length=train_length))


@st.cache_resource(max_entries=12, show_spinner=False)
def profile_and_findings(key: str, text: str, _model, _task):
    view = run(key, text, _model, _task)
    profile = mean_attention_by_offset(view.weights)
    findings = offset_findings(_task, profile, view.weights, causal=_model.config.causal,
                               scheme=_model.config.scheme)
    figure = display.prepared(*offset_profile_parts(profile, causal=_model.config.causal,
                                                    answer_offset=_task.answer_offset, window=_task.answer_window))
    return figure, findings


@st.cache_resource(max_entries=16, show_spinner=False)
def parameter_figures(key: str, length: int, train_length: int, layer: int, _model):
    """The layer's position mechanism's views, the ones Your model draws: [(figure or None for words, title,
    caption), ...]; each figure held as the dict it sends (display.prepared_spec: its arrays encoded once)."""
    views = parameter_views(_model, length=length, train_length=train_length, layer=layer)
    chars = PARAMETER_TITLE_CHARS if len(views) == 1 else NARROW_TITLE_CHARS   # one view in 3/5, else in columns
    return [(parameter_figure(view, train_length, chars), view.title, parameter_caption(view))
            for view in views]


def parameter_figure(view, train_length: int, chars: int):
    """One view's figure as it is sent: its parts where the kind has them (a T5 curve's 33 bucket edges as plotly
    shapes took ~6 ms to validate at each new length), else the figure's dict; None for words only."""
    parts = view_parts(view, train_length=train_length)
    if parts is not None:
        data, layout = parts
        return display.prepared(data, narrow_title(layout, lines=1, chars=chars))
    figure = view_figure(view, train_length=train_length)
    return None if figure is None else display.prepared_spec(narrow_figure_title(
        figure, lines=1, chars=chars).to_dict())


# ---------------------------------------------------------------------------------------
# Sequence controls (callbacks run before the script, so they may set widget state). The text is the
# one source of truth; length and seed only write to it.


def current_text() -> str:
    return str(st.session_state.get(f"{P}_seq", "") or "")


def on_length() -> None:
    length = int(st.session_state[f"{P}_len"])
    st.session_state[f"{P}_seq"] = resize_text(current_text(), length, int(st.session_state[f"{P}_seed"]))


def on_seed() -> None:
    st.session_state[f"{P}_seq"] = random_text(int(st.session_state[f"{P}_len"]), int(st.session_state[f"{P}_seed"]))


def on_random() -> None:
    seed = (int(st.session_state[f"{P}_seed"]) + 1) % (SEED_MAX + 1)
    st.session_state[f"{P}_seed"] = seed
    st.session_state[f"{P}_seq"] = random_text(int(st.session_state[f"{P}_len"]), seed)


# ---------------------------------------------------------------------------------------
# The page

trainings = quotas.session_trainings()
if f"{P}_pick" in st.session_state:  # a model trained in the last run: select it
    st.session_state[f"{P}_ck"] = st.session_state.pop(f"{P}_pick")

display.page_title("Live attention")

shipped, problems = shipped_listing()
options = shipped + trainings.names()
if problems:
    st.warning("Some checkpoint files could not be listed: " + "; ".join(problems.values()),
               icon=":material/warning:")
if not options:
    st.error("No checkpoints found in relviz/checkpoints/: rebuild them with `python -m relviz train --shipped`, "
             "or train your own below.", icon=":material/error:")


requested = st.query_params.get(f"{P}_ck")
if requested and options and requested not in options:
    shown = DEFAULT_MODEL if DEFAULT_MODEL in options else options[0]
    st.warning(f"This link asks for the checkpoint `{requested[:80].replace('`', '')}`, which is not here: a model "
               "trained in the app lives only in the browser session that trained it (the last three), so a link "
               f"from another browser session cannot bring it back. Showing **{shown}** instead; train it again at "
               "the bottom of the page with the same settings to reproduce it.", icon=":material/link_off:")

with st.sidebar:
    st.subheader("Model")
    name = st.selectbox("checkpoint", options, index=options.index(DEFAULT_MODEL) if DEFAULT_MODEL in options else 0,
                        key=f"{P}_ck", bind="query-params",
                        help="Shipped: one per scheme, task shift s = 5. Yours: trained in this session (kept until "
                             "you close the tab; the last three).") if options else None

active = active_model(name, trainings) if name else None

if active is not None:
    config, task = active.config, active.task
    with st.sidebar:
        st.subheader("Close-up")
        controls.note_range(f"{P}_layer", 1, config.n_layers)   # a link's layer 9 names this checkpoint's range
        controls.note_range(f"{P}_head", 1, config.n_heads)
        layer = int(st.segmented_control("layer", list(range(1, config.n_layers + 1)), default=1, required=True,
                                         key=f"{P}_layer", bind="query-params") or 1) - 1
        head = int(st.segmented_control("head", list(range(1, config.n_heads + 1)), default=1, required=True,
                                        key=f"{P}_head", bind="query-params") or 1) - 1
        layer, head = clamped_layer(config, layer), min(head, config.n_heads - 1)

    # One line on top; the intro and the model's full description follow the main picture, so the
    # picture is on the first screen of a 1280 × 720 projector.
    st.markdown(f"{active.headline()} · pick model, layer and head in the sidebar")


@st.fragment
def sequence_section(active: LiveModel, layer: int, head: int) -> None:
    """The sequence's controls and everything drawn from the sequence run through the model. A fragment: moving
    the length (the tour's slider), the seed or the text reruns this part alone, not the sidebar, the page's
    navigation or the training controls below (a move's server CPU, issue 34)."""
    config, task = active.config, active.task
    # --- the input ----------------------------------------------------------------------------
    # The button's label fits whole down to a projector's 819 px (1024 × 768 at 125 %); "random example" was cut to
    # "rando…" at 1024 px
    row = st.container(horizontal=True, vertical_alignment="bottom")
    c_text, c_len, c_seed, c_rand = (row.container(width=w) for w in ("stretch", 200, 190, "content"))
    length = int(c_len.slider("length", 1, MAX_TEXT, DEFAULT_LENGTH, key=f"{P}_len", bind="query-params",
                              on_change=on_length,
                              help=f"Longer than training ({active.train_length}) to watch extrapolation; up to "
                                   f"{MAX_TEXT} here. Keeps the typed start, fills the rest from the seed."))
    seed = controls.number_control("seed", 0, SEED_MAX, 0, key=f"{P}_seed", where=c_seed, on_change=on_seed,
                                   help="The random example for this seed and length.")
    c_rand.button("random example", key=f"{P}_rand", on_click=on_random, icon=":material/casino:", width="content",
                  help="Next seed, new random digits at this length.")
    # The default is the random example of this length and seed: a link to it needs no at_seq (random_text of
    # one seed is prefix-consistent, so lengthening an unedited example keeps it equal to the default).
    c_text.text_input(f"sequence: one token per digit {DIGITS[0]}–{DIGITS[-1]}, edit freely",
                      random_text(length, seed), key=f"{P}_seq", bind="query-params", max_chars=4096)
    # No callback from the text back to the slider: a browser that sends a stale text while the slider moves
    # would move the slider back. The slider resizes the text; the text's own length is what runs.
    text = current_text().strip()
    if text and len(text) != length:
        st.caption(f"The sequence has **{len(text)}** tokens: that is what runs. Moving the length slider cuts or "
                   "extends it.")

    # --- the sequence through the model -------------------------------------------------------
    view = None
    if len(text) > MAX_TEXT:
        st.error(f"The sequence has {len(text)} tokens; this page draws at most {MAX_TEXT} (the attention of every "
                 "layer and head). Shorten it, or set the length slider.", icon=":material/error:")
    else:
        with display.user_errors():
            view = run(active.key, text, active.model, task)

    structure_error = None
    try:
        struct_length = view.length if view is not None else length
        current_structure = structure(active.key, struct_length, layer, active.model)
    except ValueError as error:
        current_structure, structure_error = None, str(error)

    # --- the main picture: one head's weights beside the scheme's position structure ------------
    if view is not None:
        st.subheader(f"Layer {layer + 1}, head {head + 1} beside the scheme's position structure")
        left, right = st.columns(2)
        with left:
            display.show_figure(head_figure(active.key, text, layer, head, active.train_length, active.model, task),
                           key=f"{P}_fig_head")
            st.caption("Exact weights of the chosen head (pick layer and head in the sidebar)."
                       + (f" Dotted lines: the training length {active.train_length}." if view.length >
                          active.train_length else ""))
        with right:
            if current_structure is not None:
                display.show_figure(structure_figure(active.key, view.length, layer, head, active.model),
                                    key=f"{P}_fig_struct")
                st.caption(structure_text(current_structure)
                           + (" Blank: future keys, masked." if current_structure.masked_future else ""))
            else:
                st.info(no_structure_text(active.model, layer), icon=":material/info:")
    elif structure_error is None and current_structure is not None:
        st.subheader("The scheme's position structure")
        left, right = st.columns(2)
        with left:
            display.show_figure(structure_figure(active.key, struct_length, layer, head, active.model),
                                key=f"{P}_fig_struct")
        right.caption(f"At length {struct_length} (the length slider). " + structure_text(current_structure))

    if view is not None:
        st.subheader("Prediction against target")
        display.show_figure(strip_figure(active.key, text, active.train_length, active.model, task), key=f"{P}_fig_strip")
        if view.accuracy is None:
            st.info(f"Too short for {task.describe()}: positions before {task.first_counted} have no answer. "
                    f"Make the sequence at least {task.min_length} long.", icon=":material/info:")
        else:
            st.markdown(view.accuracy_line(active.train_length))
        st.caption("Rows: your input, the task's answer (· where none counts yet), the model's prediction. "
                   "Blue: correct; orange: wrong; grey: no answer counts at that position. Hover for details.")

    # --- about the models and this one --------------------------------------------------------
    st.subheader("About this model")
    st.markdown(inspection.about_the_models())
    st.markdown(active.description())
    display.sign_convention()

    # --- every layer and head, export, mean by offset -----------------------------------------
    if view is not None:
        st.subheader("Attention of every layer and head")
        display.show_figure(grid_figure(active.key, text, active.model, task), key=f"{P}_fig_grid")
        in_grid = structure(active.key, view.length, 0, active.model)      # the grid's hover: layer 1's structure
        st.caption(grid_caption(view.length, causal=config.causal,
                                structure_label=in_grid.label if in_grid is not None else None))

        st.markdown("**Export** the weights shown (researchers: exact float32).")
        a, b = st.columns([2, 1])
        with a:
            st.caption(f"layer {layer + 1}, head {head + 1}: {view.length} × {view.length}, rows = queries")
            downloads.matrix_downloads(view.weights[layer, head], name=f"attention_{active.scheme}_L{layer + 1}H{head + 1}",
                                key=f"{P}_dl")
        with b:
            st.caption("every layer and head, [layers, heads, L, L]")
            st.download_button("Download all (.npy)", lambda: downloads.matrix_to_npy(view.weights),
                               file_name=f"attention_{active.scheme}_all.npy", mime="application/octet-stream",
                               key=f"{P}_dl_all", on_click="ignore")

        st.subheader("Mean attention by offset")
        figure, findings = profile_and_findings(active.key, text, active.model, task)
        left, right = st.columns([3, 2])
        with left:
            display.show_figure(figure, key=f"{P}_fig_profile")
        with right:
            st.markdown(inspection.OFFSET_PROFILE)
            for finding in findings:
                if finding.good:
                    st.success(finding.text, icon=":material/lightbulb:")
                else:
                    st.info(finding.text, icon=":material/info:")

    # --- learned position parameters ----------------------------------------------------------
    st.subheader("Position parameters")
    st.caption(f"Layer {layer + 1}'s position mechanism, in the views the Your model page draws for that layer; "
               f"knowing the training length ({active.train_length}), a view may also show what training reached.")
    length_for_params = view.length if view is not None else active.train_length
    shown = parameter_figures(active.key, length_for_params, active.train_length, layer, active.model)
    if len(shown) == 1 and shown[0][0] is not None:
        (fig, title, caption), = shown
        left, right = st.columns([3, 2], vertical_alignment="center")
        with left:
            display.show_figure(fig, key=f"{P}_fig_param0")
        # a figure without a title of its own (RoPE's wavelengths) gets the view's, as on Your model
        right.markdown(caption if fig.to_dict()["layout"].get("title", {}).get("text") else f"**{title}**  \n{caption}")
    else:
        for n, (column, (fig, title, caption)) in enumerate(zip(st.columns(len(shown)), shown)):
            with column:
                if fig is None:                     # words only (a Note): no picture to draw
                    st.info(f"**{title}.** {caption}", icon=":material/info:")
                else:
                    display.show_figure(fig, key=f"{P}_fig_param{n}")
                    st.caption(caption)


if active is not None:
    sequence_section(active, layer, head)

# ---------------------------------------------------------------------------------------
# Train your own


def training_request() -> TrainingRequest:
    """The training controls, drawn in the current container."""
    c1, c2, c3 = st.columns(3)
    with c1:
        names = list(REGISTRY)
        scheme = st.selectbox("scheme", names, index=names.index(DEFAULT_SCHEME), key=f"{P}_tsch",
                              bind="query-params", help="; ".join(f"{k}: {v.summary}" for k, v in REGISTRY.items()))
        # The scheme's own parameters, each a slider over the range its module declares for the app.
        params = scheme_caps(get_scheme(scheme))
        for param in params:
            controls.note_range(f"{P}_t_{param.name}", *param.slider_range)
        scheme_params = {param.name: st.slider(param.label or param.help, *param.slider_range, param.default,
                                               key=f"{P}_t_{param.name}", bind="query-params")
                         for param in params}
    with c2:
        task_name = st.selectbox("task", list(TASKS), key=f"{P}_ttask", bind="query-params",
                                 help="; ".join(f"{k}: {cls.summary}" for k, cls in TASKS.items()))
        task_params = {slider.field: int(st.slider(slider.label, slider.minimum, slider.maximum, slider.default,
                                                   key=f"{P}_t{slider.field}", bind="query-params"))
                       for slider in TASKS[task_name].sliders()}
        layers = st.slider("layers", 1, CAPS.max_layers, 2, key=f"{P}_tl", bind="query-params")
        heads = st.segmented_control("heads", [1, 2, 4], default=4, required=True, key=f"{P}_th",
                                     bind="query-params") or 4
    with c3:
        steps = st.slider("steps", CAPS.min_steps, CAPS.max_steps, 300, step=10, key=f"{P}_tsteps",
                          bind="query-params")
        length = st.slider("training length", CAPS.min_length, CAPS.max_length, 24, key=f"{P}_tlen",
                           bind="query-params")
        seed = controls.number_control("training seed", 0, SEED_MAX, 0, key=f"{P}_tseed")
    return TrainingRequest(
        scheme=scheme, task=task_name, task_params=task_params, n_layers=int(layers),
        n_heads=int(heads), steps=int(steps), length=int(length), seed=int(seed), scheme_params=scheme_params)


st.divider()
st.subheader("Train your own")
st.markdown("Choose a scheme, its parameters and a task, and train a fresh model here, on this server's CPU. It "
            "appears in the sidebar's **checkpoint** picker (its first control) when done, for this session only. "
            "Changing any control while it trains stops the run.")
done = st.session_state.pop(f"{P}_done", None)
if done:
    st.success(done, icon=":material/check_circle:")
    st.toast(done, icon=":material/check_circle:")
request = training_request()
problem = None
try:
    check_request(request)
    trainings.check_quota()
except ValueError as error:
    problem = str(error)
st.caption(f"steps × length × layers = {request.work:,} of at most {CAPS.max_work:,} · {trainings.runs_left} of "
           f"{CAPS.max_trainings_per_session} runs left for you (counted per visitor over the last hour, not per tab) "
           f"· limits: {CAPS.describe()}.")
if problem:
    st.error(problem, icon=":material/block:")
if st.button("Train", key=f"{P}_train", type="primary", icon=":material/model_training:", disabled=problem is not None):
    result = quotas.run_guarded(lambda report: train_request(request, lambda p: report(p.fraction, p.text)))
    if result is not None:
        trained = trainings.add(request, result)
        dropped = f" (dropped the oldest: {', '.join(trainings.dropped)})" if trainings.dropped else ""
        st.session_state[f"{P}_pick"] = trained.name
        st.session_state[f"{P}_done"] = (
            f"Trained **{trained.name}** in {trained.result.train_seconds:.1f} s: accuracy "
            f"{trained.accuracy:.1%} on held-out sequences at length {trained.train_length}. It is now selected in "
            f"the picker{dropped}.")
        st.rerun()
