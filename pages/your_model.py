"""Your model: a real Hugging Face checkpoint's position structure, and its own attention on your text.

The operator lists model directories (RELVIZ_MODELS); a visitor picks one of them, never a path.
Published configs (presets) that need no weights (RoPE, ALiBi) are always listed.
"""
from __future__ import annotations

import os

import numpy as np
import streamlit as st

from relviz import hf, ui
from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.t5_bias import T5Bias
from relviz.figures.attention import attention_grid, bias_curve_figure, colour_rows, similarity_figure
from relviz.figures.rope import decay_figure, ratio_figure, wavelength_figure
from relviz.figures.toeplitz import toeplitz_view
from relviz.positions import t5_bias_offsets, t5_config
from relviz.rope import decay_curves, load_presets, rope_parameters, unscaled
from relviz.schemes.alibi import bias_lines
from relviz.schemes.views import relative_share
from relviz.t5_notes import last_bucket_start

ui.ensure_app_navigation()

P = "ym"
LENGTHS = [2 ** k for k in range(8, 21)]
PRESET_MARK = " (published config)"


@st.cache_data(max_entries=4, show_spinner=False, ttl=60)
def choices(models_setting: str, allow_hub: str) -> dict[str, tuple[str, str]]:
    """label -> ("dir", target) for the operator's models, ("preset", group/id) for config-only presets."""
    env = {hf.MODELS_ENV: models_setting, hf.ALLOW_HUB_ENV: allow_hub}
    out = {name: ("dir", target) for name, target in hf.configured_models(env).items()}
    presets = load_presets()
    for group in ("rope", "alibi"):
        for entry in presets[group]:
            out[entry["label"] + PRESET_MARK] = ("preset", f"{group}/{entry['id']}")
    return out


@st.cache_resource(max_entries=8, show_spinner="Reading the checkpoint's position tensors…")
def positions_of(kind: str, target: str) -> hf.ModelPositions:
    if kind == "dir":
        return hf.open_configured(target)
    group, preset_id = target.split("/", 1)
    entry = next(e for e in load_presets()[group] if e["id"] == preset_id)
    return hf.from_config(entry["config"], source=entry["source"])


# The RoPE figures, cached by scalars (as pages/rope.py does): a figure is read-only once built
# (st.plotly_chart copies it), so a rerun that leaves the model and L alone (typing text below)
# rebuilds neither the figures nor the decay curves.
@st.cache_resource(max_entries=8, show_spinner=False)
def rope_figs(kind: str, target: str, length: int):
    """(wavelength figure, ratio figure or None without a scaling rule, decay figure, attention scaling)."""
    config = positions_of(kind, target).rope
    inv_freq, attention = rope_parameters(config, length, device="cpu")
    plain = rope_parameters(unscaled(config), device="cpu")[0].numpy()
    inv_freq = inv_freq.numpy()
    rule = config.scaling.rope_type
    wave = wavelength_figure(inv_freq, plain, length=length, original=config.scaled_from, rule=rule)
    ratio = ratio_figure(inv_freq, plain, factor=config.scaling.factor, rule=rule) if rule != "default" else None
    decay = decay_figure(decay_curves(config, length), length=length, original=config.scaled_from)
    return wave, ratio, decay, attention


@st.cache_resource(max_entries=2, show_spinner="Loading the model…")
def runnable(directory: str):
    return hf.load_model(directory)


@st.cache_data(max_entries=16, show_spinner=False)
def own_attention(directory: str, text: str) -> tuple[list[str], np.ndarray]:
    tokenizer, model = runnable(directory)
    tokens, weights = hf.model_attention(tokenizer, model, text)
    return tokens, weights.numpy()


def describe(positions: hf.ModelPositions, *, any_directory: bool) -> None:
    """What was read and from where, under the picture."""
    st.caption(f"**{positions.model_type}** · Source: {positions.source}")
    for note in positions.notes:
        st.info(note)
    with st.expander("settings read from config.json", expanded=False):
        st.json(positions.config)
        if positions.tensors_read:
            st.caption("tensors read: " + ", ".join(positions.tensors_read))
    if not any_directory:
        st.caption("No model directories are configured on this server (RELVIZ_MODELS): the published configs "
                   "in the list need none.")


st.title("Your model")
st.markdown(
    "A real checkpoint's own position structure, read exactly from config.json and its position tensors (never "
    "a pickled `.bin`): T5's learned bucket biases, ALiBi's slopes, RoPE's frequencies under its scaling rule, "
    "or a learned absolute table.")
ui.sign_convention(compact=True)

options = choices(os.environ.get(hf.MODELS_ENV, ""), os.environ.get(hf.ALLOW_HUB_ENV, ""))
# One row: the picker beside the scheme's main control (length), so the picture starts on the first screen.
c_model, c_control = st.columns([3, 2])
label = c_model.selectbox("model", list(options), key=f"{P}_model", bind="query-params",
                          help="The server's operator lists the models (RELVIZ_MODELS, see DEPLOY.md); published "
                               "configs that need no weights are always here.")

with ui.user_errors():
    kind, target = options[label]
    positions = positions_of(kind, target)

    t5, alibi = positions.first(T5Bias), positions.first(Alibi)
    rotation, absolute = positions.first(Rotation), positions.first(LearnedAbsolute)
    if t5 is not None:
        c1, c3 = c_control.columns(2)  # beside the picker; a per-layer table (UMT5) adds a row below
        stack = c1.radio("stack", positions.stacks, horizontal=True, key=f"{P}_stack", bind="query-params",
                         help="Encoder: bidirectional buckets; decoder: unidirectional (every future offset is "
                              "bucket 0).")
        extent = int(c3.slider("offsets shown ±", 16, 512, 160, step=16, key=f"{P}_ext", bind="query-params"))
        layers = positions.layers(stack)
        layer = int(st.select_slider("layer (its own table)", layers, value=layers[0], key=f"{P}_layer",
                                     bind="query-params")) if len(layers) > 1 else layers[0]
        curve = hf.bias_curve(positions, stack=stack, layer=layer, extent=extent)
        nb, md = t5.num_buckets, t5.max_distance
        ui.show_figure(bias_curve_figure(curve), key=f"{P}_fig_t5curve")
        st.caption(f"Each head's learned bias against j − i; dotted lines are bucket edges "
                   f"({nb} buckets, max_distance {md}: exact up to "
                   f"|j − i| = {t5_config(nb, md, stack == 'encoder').max_exact - 1}, one bucket from "
                   f"{last_bucket_start(nb, md, stack == 'encoder')} on). T5 adds it to the raw "
                   f"q·k logit" + ("; UMT5 has a table in every layer." if len(layers) > 1 else
                                   ", and block 0's table serves every layer of the stack."))
        reach = positions.layer(layer, stack=stack).find(hf.AttentionPattern).window
        if reach is not None:
            st.caption(f"This encoder attends block-locally: a token sees keys within ±{reach} (local_radius) "
                       "only, so only that band of the map below is used.")
        h1, h2 = st.columns(2)
        head = int(h1.slider("head", 1, t5.heads, 1, key=f"{P}_head", bind="query-params"))
        length = int(h2.slider("positions L", 8, 256, 64, step=8, key=f"{P}_L", bind="query-params"))
        per_offset = t5_bias_offsets(positions.bias_table(stack=stack, layer=layer).float(), length, length,
                                     num_buckets=nb, max_distance=md,
                                     bidirectional=stack == "encoder")[head - 1].numpy()
        heat = toeplitz_view(per_offset.astype(np.float32), length, length, value_label="bias",
                             colorscale="RdBu_r", zmid=0.0, height=460)
        ui.show_toeplitz(heat, key=f"{P}_fig_t5map", name=f"t5_bias_head{head}_{length}")
        st.caption(f"Head {head}'s bias map: exactly what the model adds to its logits (transformers' "
                   "compute_bias), constant along each diagonal.")

    elif alibi is not None:
        length = int(c_control.slider("positions L", 8, 512, 64, step=8, key=f"{P}_L", bind="query-params"))
        slopes = positions.alibi_slopes().float().numpy()
        ui.show_figure(bias_curve_figure(bias_lines(slopes, np.arange(-(length - 1), 1))), key=f"{P}_fig_alibi")
        st.caption(alibi.describe() + ". " + alibi.rule_text())

    elif rotation is not None:
        length = int(c_control.select_slider("context length L", LENGTHS, value=8192, key=f"{P}_len",
                                      bind="query-params"))
        wave, ratio, decay, attention = rope_figs(kind, target, length)
        r1, r2 = st.columns([3, 2])
        with r1:
            ui.show_figure(wave, key=f"{P}_fig_wave")
        with r2:
            if ratio is not None:
                ui.show_figure(ratio, key=f"{P}_fig_ratio")
            st.metric("attention scaling (on cos and sin)", f"{attention:.4f}")
        ui.show_figure(decay, key=f"{P}_fig_decay")
        st.caption("The RoPE page explains these views; here they use this model's base, head size and scaling.")

    elif absolute is not None:
        table = positions.position_embeddings()
        n = int(c_control.slider("positions compared", 8, min(512, table.shape[0]), min(128, table.shape[0]), step=8,
                          key=f"{P}_n", bind="query-params"))
        learned = hf.learned_similarity(positions, n)
        c_fig, c_txt = st.columns([3, 1])
        with c_fig:
            ui.show_figure(similarity_figure(learned), key=f"{P}_fig_learned")
        with c_txt:
            share = relative_share(learned.cosine, n)
            st.metric("how Toeplitz is it", f"{share:.1%}",
                      help="Share of the similarity's variance (off the diagonal) that depends on j − i alone: "
                           "100% means the learned table acts exactly like a relative one.")
            st.caption("Cosine between the learned position vectors p_i and p_j. A relative scheme would be "
                       "constant along every diagonal.")

    describe(positions, any_directory=any(k == "dir" for k, _ in options.values()))

    directory = positions.directory
    if kind == "dir" and directory is not None:
        st.subheader("Its own attention on your text")
        if not hf.has_tokenizer(directory):
            st.info("This model directory has no tokenizer files, so it cannot be run on text here.")
        else:
            text = st.text_input(f"text (at most {hf.MAX_TOKENS} tokens are run)", "The cat sat on the mat.",
                                 max_chars=400, key=f"{P}_text", bind="query-params")
            hf.check_runnable(directory)  # every run: the operator's limit may change, the cache would not
            tokens, weights = own_attention(str(directory), text)
            st.caption(f"{len(tokens)} tokens: " + " ".join(tokens[:hf.MAX_TOKENS]) +
                       " — every layer (rows) and head (columns), eager attention, "
                       + ("the encoder's self-attention." if "encoder" in positions.stack_names else "self-attention."))
            ui.show_figure(attention_grid(weights, tokens=tokens, shared_scale=True), key=f"{P}_fig_attention")
            st.caption(f"One colour scale for every head, up to the largest weight from row "
                       f"{colour_rows(len(tokens))} on (the first rows see few keys, so a causal model's weights "
                       "there are large by necessity: they show in the top colour). Hover for i, j, j − i and "
                       "the exact weight.")
