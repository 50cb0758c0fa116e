"""Your model: a real model's position plan layer by layer, each layer's structure at the model's own context
length, two models side by side, and (for the operator's model directories) its own attention on your text.

The operator lists model directories (RELVIZ_MODELS); a visitor picks one of them, never a path. Published
configs (presets) are always listed. Every view is built per offset or per position, never L × L.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import streamlit as st

from relviz import hf, layer_strip
from relviz._words import counted

from relviz.app import controls, display, navigation
from relviz.figures.attention import attention_grid, colour_rows
from relviz.figures.layers import selected_bars, side_by_side, strip_figure, view_figure
from relviz.figures.parameters import bias_curve_figure, similarity_figure
from relviz.figures.toeplitz import toeplitz_view
from relviz.mechanisms.absolute import LEARNED_COSINE, TOEPLITZ_SHARE, LearnedAbsolute
from relviz.mechanisms.t5_bias import T5Bias
from relviz.model_presets import model_presets, preset_config
from relviz.schemes.view_kinds import relative_share
from relviz.toy_plan import drawn_schemes, toy_plan
from relviz.training import list_checkpoints, load_checkpoint

navigation.ensure_app_navigation()

P = "ym"
PRESET_MARK = " (published config)"
TOY_MARK = " (relviz toy model)"
NONE = "(none)"
#: the length control: "own" is the model's own context, then powers of two (clamped to the model's own);
#: plain strings, as the link carries them
OWN = "own"
LENGTHS = [OWN] + [str(2 ** k) for k in range(4, 25)]
DEFAULT_LENGTH = 4096   # for a model whose config names no context length


@st.cache_data(max_entries=4, show_spinner=False, ttl=60)
def choices(models_setting: str, allow_hub: str) -> dict[str, tuple[str, str]]:
    """label -> ("dir", target) for the operator's models, ("preset", group/id) for the published configs."""
    env = {hf.MODELS_ENV: models_setting, hf.ALLOW_HUB_ENV: allow_hub}
    out = {name: ("dir", target) for name, target in hf.configured_models(env).items()}
    for key, entry in model_presets().items():
        out[entry["label"] + PRESET_MARK] = ("preset", key)
    for info in list_checkpoints():
        if info.model_config.scheme in drawn_schemes():
            out[info.name + TOY_MARK] = ("toy", info.name)
    return out


def _preset_plan(key: str) -> hf.ModelPositions:
    entry = model_presets()[key]
    return hf.from_config(preset_config(entry), source=entry["source"])


def _toy_plan(name: str) -> hf.ModelPositions:
    return toy_plan(load_checkpoint(name).model, source=f"relviz's shipped checkpoint {name}")


#: where a listed model comes from -> (how its plan is read, its raw config for the context length)
SOURCES = {"dir": (hf.open_configured, lambda target: {}),
           "preset": (_preset_plan, lambda target: preset_config(model_presets()[target])),
           "toy": (_toy_plan, lambda target: {})}


#: whether a listed model's source may be shown (a published config's URL) or not (a path on the server)
SOURCE_IS_PUBLIC = {"dir": False, "preset": True, "toy": True}


@st.cache_resource(max_entries=16, show_spinner="Reading the model's position plan…")
def positions_of(kind: str, target: str) -> hf.ModelPositions:
    return SOURCES[kind][0](target)


def raw_config(kind: str, target: str) -> dict:
    return SOURCES[kind][1](target)


def named_length(kind: str, target: str) -> int | None:
    """The context length the model's config names (max_position_embeddings or the like); None if it names none."""
    return layer_strip.context_length(positions_of(kind, target), raw_config(kind, target))


def own_length(kind: str, target: str) -> int:
    return named_length(kind, target) or DEFAULT_LENGTH


# Figures are read-only once built (st.plotly_chart copies them): cached by scalars.
@st.cache_resource(max_entries=16, show_spinner=False)
def strip_base(kind: str, target: str, stack: str, title: str = "") -> dict:
    """The strip as a plain figure dict, built once per model: a layer move only outlines another column."""
    return strip_figure(layer_strip.strip(positions_of(kind, target), stack), title=title).to_dict()


@st.cache_resource(max_entries=32, show_spinner=False)
def views_of(kind: str, target: str, stack: str, layer: int, length: int) -> list:
    """[(view, figure or None)] of one layer at one length (the compare mode adjusts copies of these figures)."""
    plan = positions_of(kind, target).layer(layer, stack=stack)
    return [(v, view_figure(v)) for v in layer_strip.layer_views(plan, length)]


@st.cache_resource(max_entries=32, show_spinner=False)
def layer_specs(kind: str, target: str, stack: str, layer: int, length: int) -> list:
    """[(view, figure dict or None)] of one layer at one length; the views are cheap (a few ms), their figures come
    from view_spec by content."""
    plan = positions_of(kind, target).layer(layer, stack=stack)
    return [(v, view_spec(hashlib.sha256(pickle.dumps(v)).hexdigest(), v)) for v in layer_strip.layer_views(plan, length)]


@st.cache_resource(max_entries=64, show_spinner=False)
def view_spec(digest: str, _view) -> dict | None:
    """A view's figure as the dict plotly.js reads (``Figure.to_dict()``), built once per distinct view (``digest``:
    its pickle's hash, so equal data give the same figure): the layers of a model that apply the same mechanisms
    share one, a move between them builds nothing, and Streamlit sends an unchanged figure as a reference that the
    browser does not draw again."""
    figure = view_figure(_view)
    return None if figure is None else figure.to_dict()


# T5's map of one head, held as what it sends (display.drawable: a canvas picture's JSON, a plotly figure's encoded
# dict), keyed by its per-offset biases (Streamlit hashes the 2L − 1 values): a payload dict was rebuilt and walked by
# Streamlit on every run, a go.Figure deep-copied and validated.
@st.cache_resource(max_entries=16, show_spinner=False)
def t5_map(per_offset: np.ndarray, length: int):
    """One head's bias, ``per_offset`` [2L − 1] float32, as an L × L Toeplitz picture (display.drawable)."""
    return display.drawable(toeplitz_view(per_offset, length, length, value_label="bias", colorscale="RdBu_r",
                                          zmid=0.0, height=460))


@st.cache_resource(max_entries=2, show_spinner="Loading the model…")
def runnable(directory: str):
    return hf.load_model(directory)


@st.cache_data(max_entries=16, show_spinner=False)
def own_attention(directory: str, text: str) -> tuple[list[str], np.ndarray]:
    tokenizer, model = runnable(directory)
    tokens, weights = hf.model_attention(tokenizer, model, text)
    return tokens, weights.numpy()


@contextmanager
def no_server_path(kind: str, target: str, name: str) -> Iterator[None]:
    """A ValueError from reading or running a listed model directory, re-raised with the directory's path on the
    server replaced by the operator's name for it: messages written for the command line name the path (no
    config.json in /srv/models/x, a missing shard), and a visitor must never see it."""
    try:
        yield
    except (ValueError, OSError) as error:   # OSError: a file the directory lost or may not be read
        text = str(error)
        if not SOURCE_IS_PUBLIC[kind]:
            named = f"the model directory {name!r}"
            text = text.replace(repr(target), named).replace(target, named)   # quoted ('/srv/x') or bare
        raise ValueError(text) from None


def pick_layer(chart_key: str, layer_key: str, clicks_key: str) -> None:
    """The strip's click: the layer of the clicked bar becomes the layer shown, and the strip is drawn anew under
    the next key: the browser keeps an unchanged chart's selection, so the same bar clicked again after a slider
    move would send nothing."""
    points = (st.session_state.get(chart_key) or {}).get("selection", {}).get("points", [])
    if points:
        st.session_state[layer_key] = int(points[0]["x"])
        st.session_state[clicks_key] = st.session_state.get(clicks_key, 0) + 1


def show_strip(kind: str, target: str, stack: str, layer: int, *, chart_key: str, layer_key: str,
               title: str = "") -> None:
    """The strip, the same figure for every layer (a move sends and redraws no chart: Streamlit draws a changed
    figure as a new chart, ~100 ms for a 62-layer strip in Chromium), the chosen layer outlined by CSS."""
    export = st.session_state.get(display.EXPORT_KEY) or st.query_params.get(display.EXPORT_KEY) or "PNG"
    strip = strip_base(kind, target, stack, title)
    clicks_key = f"{chart_key}_clicks"
    drawn = f"{chart_key}_{st.session_state.get(clicks_key, 0)}"
    with st.container(key=chart_key):   # the key a tour's step names and the outline's CSS finds
        st.plotly_chart(display.prepared_spec(strip), key=drawn, width="stretch", config=display.plotly_config(export),
                        on_select=lambda: pick_layer(drawn, layer_key, clicks_key), selection_mode="points")
    display.outline_bars(chart_key, selected_bars(strip, layer))


def show_views(shown: list, *, key: str) -> None:
    """[(view, figure)]: a go.Figure (the compare mode's), a figure dict from view_spec, or None (words only)."""
    for n, (view, figure) in enumerate(shown):
        spec = figure if isinstance(figure, dict) else None
        titled = (spec["layout"].get("title") or {}).get("text") if spec is not None else \
            figure is not None and figure.layout.title.text
        if not titled:   # a bias curve's figure carries the title itself
            st.markdown(f"**{view.title}**")
        if figure is not None:
            display.show_figure(display.prepared_spec(spec) if spec is not None else figure, key=f"{key}_{n}")
            st.caption(view.caption)
        else:
            st.caption(view.text)


def layer_control(key: str, layers: int, label: str, container) -> int:
    controls.clamp_state(key, 0, layers - 1)
    if layers == 1:
        return 0
    return int(container.slider(label, 0, layers - 1, 0, key=key, bind="query-params",
                                help="Or click a layer in the strip."))


def layer_section(positions: hf.ModelPositions, kind: str, target: str, label: str, stack: str, length: int,
                  own: int, chosen_length: int, options: dict) -> int:
    """The layer slider, the strip and everything drawn from the chosen layer (its caption and views, the compare
    mode's second model). Run as a fragment (layer_fragment): a layer move or a strip click reruns this part alone,
    not the model's choice, the notes and the weights' sections below (a move's server CPU and its websocket
    messages, issue 34). Returns the layer shown."""
    n_layers = len(positions.plans[stack])
    layer = layer_control(f"{P}_layer", n_layers, "layer", st)
    with display.user_errors():   # a fragment's own rerun runs outside the page's block
        # the strip comes first (on the first screen); it is titled when a second model is drawn under it
        asked = st.session_state.get(f"{P}_vs") or st.query_params.get(f"{P}_vs")
        show_strip(kind, target, stack, layer, chart_key=f"{P}_strip", layer_key=f"{P}_layer",
                   title=label if asked in options and asked != label else "")
        # every stack in view: a vision tower's blocks beside the text layers they feed
        for shown_stack in positions.stack_names:
            if shown_stack != stack:
                display.show_figure(display.prepared_spec(strip_base(kind, target, shown_stack,
                                                                     f"{shown_stack}: choose it under 'stack' "
                                                                     "to read its layers")),
                                    key=f"{P}_strip_{shown_stack}")
        c_view, c_vs = st.columns([1.4, 3])
        kind_shown = c_view.selectbox("show", list(layer_strip.VIEW_KINDS), key=f"{P}_view", bind="query-params",
                                      help="Which view of the layer: all, or one kind (a layer without it shows all).")
        other = c_vs.selectbox("compare with", [NONE] + [o for o in options if o != label], key=f"{P}_vs",
                               bind="query-params", help="A second model's strip and the same view, side by side.")
        plan = positions.layer(layer, stack=stack)
        st.caption(layer_strip.layer_caption(plan, length, own, names_length=named_length(kind, target) is not None))

        if other == NONE:
            views = layer_specs(kind, target, stack, layer, length)
            shown = layer_strip.chosen([v for v, _ in views], kind_shown)
            pairs = [(v, f) for v, f in views if any(v is s for s in shown.views)]
            if shown.missing:
                st.caption(f"This layer has no {kind_shown} view; all of its views are shown.")
            if positions.notes:
                v_col, n_col = st.columns([3, 1])
                with v_col:
                    show_views(pairs, key=f"{P}_fig_view")
                with n_col:
                    st.markdown(f"**{positions.notes_title}**")
                    for text in positions.notes:
                        st.info(text, icon=":material/warning:")
            else:
                show_views(pairs, key=f"{P}_fig_view")
        else:
            kind2, target2 = options[other]
            with no_server_path(kind2, target2, other):
                positions2 = positions_of(kind2, target2)
            own2 = own_length(kind2, target2)
            length2 = own2 if chosen_length == 0 else min(chosen_length, own2)
            stack2 = stack if stack in positions2.stack_names else positions2.stack_names[0]
            n2 = len(positions2.plans[stack2])
            layer2 = layer_control(f"{P}_layer2", n2, f"layer of {other}", st)
            show_strip(kind2, target2, stack2, layer2, chart_key=f"{P}_strip2", layer_key=f"{P}_layer2", title=other)
            sides = ((kind, target, stack, layer, length, label, positions),
                     (kind2, target2, stack2, layer2, length2, other, positions2))
            picked = []
            for k, t, s, lay, ln, _, _ in sides:
                views = views_of(k, t, s, lay, ln)
                shown = layer_strip.chosen([v for v, _ in views], kind_shown)
                picked.append([(v, f) for v, f in views if any(v is x for x in shown.views)])
            # the same y range for a view both sides have, legends under the plots: the two models compare
            compared = side_by_side(*picked)
            left, right = st.columns(2)
            for column, (_, _, stk, lay, ln, name, pos), pairs in zip((left, right), sides, compared):
                with column:
                    st.markdown(layer_strip.side_heading(name, pos.layer(lay, stack=stk), ln))
                    show_views(pairs, key=f"{P}_fig_{'a' if column is left else 'b'}")
                    for text in pos.notes:
                        st.info(text, icon=":material/warning:")
    return layer


#: the same, rerun alone on a move of its own widgets
layer_fragment = st.fragment(layer_section)


st.title("Your model")
st.markdown(
    "Each layer of a real model, from its config.json: the **strip** shows what every layer applies (click a "
    "layer); below, that layer's structure at the model's **own context length**. The published configs need no "
    "weights and show what a config decides (rotation and its scaling, ALiBi slopes, windows, layers without "
    "position). Learned positions (T5's bucket biases, a learned absolute table) live in a checkpoint's weights: "
    "they appear for the models the server's operator lists in `RELVIZ_MODELS` (model directories with "
    "config.json and *.safetensors; see the README).")
display.sign_convention(compact=True)

options = choices(os.environ.get(hf.MODELS_ENV, ""), os.environ.get(hf.ALLOW_HUB_ENV, ""))
c_model, c_len, _ = st.columns([3.2, 1.6, 2.2])
label = c_model.selectbox("model", list(options), key=f"{P}_model", bind="query-params",
                          help="The server's operator lists the models (RELVIZ_MODELS, see DEPLOY.md); published "
                               "configs are always here, each with its source.")
try:  # the slider stops below the model's own context (it ran to 16,777,216 for every model)
    own_cap: int | None = own_length(*options[label])
except (ValueError, OSError):
    own_cap = None  # the model does not read: the error is shown below, where the page reads it again
lengths = [OWN] + [v for v in LENGTHS[1:] if own_cap is None or int(v) < own_cap]
if f"{P}_len" in st.session_state and st.session_state[f"{P}_len"] not in lengths:
    st.session_state[f"{P}_len"] = OWN  # a shorter length kept from a model with a longer context
picked_length = c_len.select_slider("context length", lengths, value=OWN, key=f"{P}_len", bind="query-params",
                                   help="Where the views are drawn: the model's own max_position_embeddings "
                                        "(own" + (f": {own_cap:,}" if own_cap else "") + "), or shorter.")
chosen_length = 0 if picked_length == OWN else int(picked_length)
with display.user_errors():
    kind, target = options[label]
    with no_server_path(kind, target, label):
        positions = positions_of(kind, target)
    own = own_length(kind, target)
    length = own if chosen_length == 0 else min(chosen_length, own)

    stacks = positions.stack_names
    stack = st.radio("stack", stacks, horizontal=True, key=f"{P}_stack", bind="query-params",
                     help="Encoder: bidirectional; decoder: causal; vision: a vision-language model's image encoder "
                          "(its patches see each other both ways).") if len(stacks) > 1 else stacks[0]
    # a layer move reruns only the layer's part, unless the weights' section below changes with the layer (a T5 bias
    # table in more than one layer): then the whole page runs
    t5 = positions.first(T5Bias)
    t5_stack = (stack if stack in positions.stacks else positions.stacks[0]) \
        if t5 is not None and t5.table is not None else None
    t5_tables = t5_stack is not None and len(positions.layers(t5_stack)) > 1
    layer = (layer_section if t5_tables else layer_fragment)(positions, kind, target, label, stack, length, own,
                                                             chosen_length, options)

    with st.expander("every layer, run by run", expanded=False):
        st.markdown(layer_strip.runs_list(layer_strip.strip(positions, stack)))
    # a model directory is named by the operator's label, never by its path on the server
    st.caption(f"**{positions.model_type}** · Source: " + (positions.source if SOURCE_IS_PUBLIC[kind] else
                                                            f"the server's model directory {label!r}"))
    read_from = sorted({p.read_from for p in positions.all_layers()})
    st.caption("Layers read: " + "; ".join(read_from) + ".")
    unconfirmed = model_presets().get(target, {}).get("unconfirmed")
    if unconfirmed:
        st.caption("Not confirmed from a public copy of the model's own config.json (typed from third-party copies): "
                   + ", ".join(unconfirmed) + ".")
    with st.expander(positions.config_title, expanded=False):
        st.json(positions.config)
        if positions.tensors_read:
            st.caption("tensors read: " + ", ".join(positions.tensors_read))
    if not hf.configured_models():
        st.caption("No model directories are configured on this server (RELVIZ_MODELS): the published configs "
                   "in the list need none.")

    # ---- what only the weights hold: T5 tables, learned absolute positions -------------------
    absolute = positions.first(LearnedAbsolute)
    if t5_stack is not None:
        st.subheader("T5's learned bias, head by head")
        c1, c2 = st.columns(2)
        extent = int(c1.slider("offsets shown ±", 16, 512, 160, step=16, key=f"{P}_ext", bind="query-params"))
        layers = positions.layers(t5_stack)
        table_layer = layer if layer in layers else layers[0]
        table_bias = positions.layer(table_layer, stack=t5_stack).find(T5Bias)
        curve = table_bias.curve(extent)
        display.show_figure(bias_curve_figure(curve), key=f"{P}_fig_t5curve")
        st.caption(curve.caption)
        h1, h2 = st.columns(2)
        controls.clamp_state(f"{P}_head", 1, t5.heads)
        head = int(h1.slider("head", 1, t5.heads, 1, key=f"{P}_head", bind="query-params"))
        L = int(h2.slider("positions L", 8, 256, 64, step=8, key=f"{P}_L", bind="query-params"))  # noqa: N816
        per_offset = table_bias.bias_per_offset(L, L)[head - 1].numpy()                      # [2L − 1]
        display.show_toeplitz(t5_map(per_offset.astype(np.float32), L), key=f"{P}_fig_t5map",
                              name=f"t5_bias_head{head}_{L}")
        st.caption(table_bias.map_caption(head, t5_stack))
    if absolute is not None and absolute.table is not None:
        st.subheader("Learned absolute positions")
        table = positions.position_embeddings()
        controls.clamp_state(f"{P}_n", 8, min(512, table.shape[0]))
        n = int(st.slider("positions compared", 8, min(512, table.shape[0]), min(128, table.shape[0]), step=8,
                          key=f"{P}_n", bind="query-params"))
        learned = hf.learned_similarity(positions, n)
        c_fig, c_txt = st.columns([3, 1])
        with c_fig:
            display.show_figure(similarity_figure(learned), key=f"{P}_fig_learned")
        with c_txt:
            share = relative_share(learned.cosine, n)
            st.metric("how Toeplitz is it", f"{share:.1%}", help=TOEPLITZ_SHARE)
            st.caption(LEARNED_COSINE)

    directory = positions.directory
    if directory is not None:      # a model directory (a published config has none)
        st.subheader("Its own attention on your text")
        if not hf.has_tokenizer(directory):
            st.info("This model directory has no tokenizer files (one of " + ", ".join(hf.TOKENIZER_FILES) +
                    "), so it cannot be run on text here.")
        elif not hf.can_observe():
            st.info("Running a model on text needs transformers, which this server does not have installed "
                    "(pip install 'relviz[hf]').")
        else:
            text = st.text_input(f"text (at most {hf.MAX_TOKENS} tokens are run)", "The cat sat on the mat.",
                                 max_chars=400, key=f"{P}_text", bind="query-params")
            with no_server_path(kind, str(directory), label):
                hf.check_runnable(directory)  # every run: the operator's limit may change, the cache would not
                try:
                    tokens, weights = own_attention(str(directory), text)
                except Exception as error:  # noqa: BLE001 - transformers' loaders raise many types: say why, no traceback
                    why = str(error) if type(error) is ValueError else f"{type(error).__name__}: {error}"
                    raise ValueError(f"This model could not be run on text here: {why}") from None
            st.caption(f"{counted(len(tokens), 'token')}: " + " ".join(tokens[:hf.MAX_TOKENS]) +
                       " — every layer (rows) and head (columns), eager attention, "
                       + ("the encoder's self-attention." if "encoder" in positions.stack_names else "self-attention."))
            display.show_figure(attention_grid(weights, tokens=tokens, shared_scale=True), key=f"{P}_fig_attention")
            st.caption(f"One colour scale for every head, up to the largest weight from row "
                       f"{colour_rows(len(tokens))} on (the first rows see few keys, so a causal model's weights "
                       "there are large by necessity: they show in the top colour). Hover for i, j, j − i and "
                       "the exact weight.")
