"""RoPE: the rotation, why q·k sees only j − i, the long-term decay, and the scaling rules of real models."""
from __future__ import annotations

import math

import numpy as np
import streamlit as st
import torch

from relviz.app import controls, display, downloads, navigation
from relviz.figures.rope import decay_figure, pair_figure, ratio_figure, score_figure, wavelength_figure
from relviz.rope import (
    HAND_SET_RULES,
    RULE_TEXT,
    ContentScores,
    DecayCurves,
    RopeConfig,
    content_scores,
    decay_curves,
    hand_set_config,
    pair_explanation,
    preset_caption,
    rope_parameters,
    rope_presets,
    shifted_caption,
    turning_in_context,
    unscaled,
)
from relviz.rope import scores as words
from relviz.rope.pair import rotate_pair

navigation.ensure_app_navigation()

CPU = "cpu"
P = "rp"
CUSTOM = "custom"
LENGTHS = [2 ** k for k in range(8, 21)]              # 256 … 1,048,576 positions
HEAD_DIMS = [16, 32, 64, 96, 128, 256]
BASES = [100, 500, 1000, 10000, 50000, 100000, 500000, 1000000, 10000000]
FACTORS = [1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
ORIGINALS = [2 ** k for k in range(9, 18)]            # 512 … 131,072
#: One pair's query and key before rotation (any two 2-vectors show it; these start 62° apart).
PAIR_Q, PAIR_K = (1.0, 0.25), (0.6, 0.8)
PAIR_POSITIONS = 256
CUSTOM_RULES = list(HAND_SET_RULES)  # longrope needs per-pair lists: presets
#: each field a hand-set rule takes (HAND_SET_RULES' entries) -> its control: label, choices, default, URL key
FIELD_CONTROLS = {
    "low_freq_factor": ("low_freq_factor", [0.5, 1.0, 2.0], 1.0, f"{P}_low"),
    "high_freq_factor": ("high_freq_factor", [1.0, 2.0, 4.0, 8.0], 4.0, f"{P}_high"),
    "beta_fast": ("beta_fast (turns)", [4, 8, 16, 32, 64], 32, f"{P}_bf"),
    "beta_slow": ("beta_slow (turns)", [0.25, 0.5, 1, 2, 4], 1, f"{P}_bs"),
}


@st.cache_data(max_entries=4, show_spinner=False)
def presets() -> dict[str, tuple[str, RopeConfig, str]]:
    return rope_presets()


def custom_config(head_dim: int, base: float, rule: str, factor: float, original: int,
                  fields: tuple[tuple[str, float], ...]) -> RopeConfig:
    """The head the controls describe (relviz.rope.hand_set_config; ``fields``: the rule's own, as (name, value))."""
    return hand_set_config(head_dim, base, rule, factor=factor, original=original, **dict(fields))


def config_of(key: tuple) -> RopeConfig:
    """A config from its scalar key: ("preset", id) or ("custom", head_dim, base, rule, ...)."""
    return presets()[key[1]][1] if key[0] == "preset" else custom_config(*key[1:])


@st.cache_data(max_entries=32, show_spinner=False)
def frequencies(key: tuple, length: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(θ at this length, unscaled θ, attention scaling)."""
    config = config_of(key)
    inv_freq, scaling = rope_parameters(config, length, device=CPU)
    plain = rope_parameters(unscaled(config), device=CPU)[0]
    return inv_freq.numpy(), plain.numpy(), scaling


SHOWN_MAX = 256  # the largest 'positions shown'


@st.cache_data(max_entries=32, show_spinner=False)
def all_scores(key: tuple, length: int, same: bool, seed: int) -> ContentScores:
    """The SHOWN_MAX × SHOWN_MAX scores of random unit q, k, per offset, checked against brute-force
    rotation; moving 'positions shown' takes their top-left block (``head``) instead of computing again."""
    return content_scores(config_of(key), length, SHOWN_MAX, same=same, seed=seed)


def scores(key: tuple, length: int, window: int, same: bool, seed: int) -> ContentScores:
    return all_scores(key, length, same, seed).head(window)


@st.cache_data(max_entries=32, show_spinner=False)
def decay(key: tuple, length: int) -> DecayCurves:
    return decay_curves(config_of(key), length)


# Figures, cached by the same scalars (as pages/absolute.py does): a figure is read-only once built
# (st.plotly_chart copies it), so a rerun that moves one control rebuilds only the figure it changes.
FIGURE_CACHE = dict(max_entries=8, show_spinner=False)


@st.cache_resource(**FIGURE_CACHE)
def wavelength_fig(key: tuple, length: int):
    config = config_of(key)
    inv_freq, plain, _ = frequencies(key, length)
    return wavelength_figure(inv_freq, plain, length=length, rule=config.scaling.rope_type, original=config.scaled_from)


@st.cache_resource(**FIGURE_CACHE)
def ratio_fig(key: tuple, length: int):
    config = config_of(key)
    inv_freq, plain, _ = frequencies(key, length)
    return ratio_figure(inv_freq, plain, factor=config.scaling.factor, rule=config.scaling.rope_type)


@st.cache_resource(**FIGURE_CACHE)
def score_fig(key: tuple, length: int, window: int, same: bool, seed: int):
    """The score matrix as it is sent (display.drawable: a canvas picture's JSON or a plotly figure's encoded dict):
    a payload dict was rebuilt and walked by Streamlit on every run, a go.Figure deep-copied and validated."""
    return display.drawable(score_figure(scores(key, length, window, same, seed), browser=True))


@st.cache_resource(**FIGURE_CACHE)
def decay_fig(key: tuple, length: int):
    config = config_of(key)
    return decay_figure(decay(key, length), length=length, original=config.scaled_from)


@st.fragment
def score_matrix(key: tuple, length: int, preset: str, attention: float) -> None:
    """Every pair at once: its controls and the score matrix. A fragment: moving "positions shown" (the tour's
    slider), the content toggle or the seed reruns this block alone, not the page above it."""
    with display.user_errors():
        st.markdown("**Every pair at once: the score matrix is Toeplitz.**")
        # a row that wraps: in three fixed columns the toggle's label was cut to "same content…" at 819 px
        row = st.container(horizontal=True, vertical_alignment="center")
        t1, t2, t3 = (row.container(width=w) for w in ("stretch", "content", "stretch"))
        window = int(t1.slider("positions shown", 8, SHOWN_MAX, 48, step=8, key=f"{P}_L", bind="query-params"))
        same = t2.toggle("same content q = k", value=True, key=f"{P}_same", bind="query-params",
                         help="The same vector at every position (q for queries, k for keys).")
        seed = controls.number_control("seed", 0, 9999, 0, key=f"{P}_seed", where=t3)
        content = scores(key, length, window, same, seed)
        col_s, col_t = st.columns([3, 2])
        with col_s:
            display.show_toeplitz(score_fig(key, length, window, same, seed), key=f"{P}_fig_scores",
                                  name="rope_scores")
        with col_t:
            st.markdown(words.SCORE_MATRIX_WORDS)
            st.success(words.checked_words(content.spread), icon=":material/check_circle:")
            if attention != 1.0:
                st.caption(f"Scores include the attention scaling² = {attention ** 2:.4f}.")
            downloads.offset_vector_downloads(np.arange(-(window - 1), window),
                                              content.per_offset.numpy().astype(np.float32),
                                              name=f"rope_scores_{preset}_L{window}", key=f"{P}_dl", quantity="score")


display.page_title("RoPE and its scalings")
display.sign_convention(compact=True)

preset_map = presets()
by_label = {label: preset_id for preset_id, (label, _, _) in preset_map.items()}
c_preset, c_len = st.columns([2, 1])
# Bound widgets put their shown value in the URL: options are the labels themselves (no format_func).
chosen = c_preset.selectbox(
    "model (custom: set the head below)", [CUSTOM] + list(by_label), key=f"{P}_preset", bind="query-params",
    help="Settings read from each model's published config.json (the source is shown below).")
preset = by_label.get(chosen, CUSTOM)
length = int(c_len.select_slider("context length L (the length you run at)", LENGTHS, value=8192,
                                 key=f"{P}_len", bind="query-params"))

if preset == CUSTOM:
    c1, c2, c3, c4 = st.columns(4)
    head_dim = int(c1.select_slider("head dim d", HEAD_DIMS, value=128, key=f"{P}_dim", bind="query-params"))
    base = float(c2.select_slider("base", BASES, value=10000, key=f"{P}_base", bind="query-params"))
    rule = c3.selectbox("scaling rule", CUSTOM_RULES, key=f"{P}_rule", bind="query-params",
                        help="LongRoPE needs a factor per pair: pick the Phi-3 preset to see it.")
    entry = HAND_SET_RULES[rule]
    original, factor, fields = 4096, 1.0, {}  # plain RoPE (no entry) has no training length or factor
    if entry is not None:
        original = int(c4.select_slider("original context (training length)", ORIGINALS, value=4096,
                                        key=f"{P}_orig", bind="query-params"))
        d1, *field_columns = st.columns(max(3, 1 + len(entry.fields)))
        factor = float(d1.select_slider("factor", FACTORS, value=4.0, key=f"{P}_factor", bind="query-params"))
        for column, name in zip(field_columns, entry.fields):
            label, choices, default, url_key = FIELD_CONTROLS[name]
            fields[name] = float(column.select_slider(label, choices, value=default, key=url_key,
                                                      bind="query-params"))
    key: tuple = (CUSTOM, head_dim, base, rule, factor, original, tuple(fields.items()))
else:
    key = ("preset", preset)

with display.user_errors():
    config = config_of(key)
    rule = config.scaling.rope_type
    inv_freq, _, attention = frequencies(key, length)

    st.subheader("1 · The rotation: which pairs turn inside the context")
    col_w, col_r = st.columns([3, 2])
    with col_w:
        display.show_figure(wavelength_fig(key, length), key=f"{P}_fig_wave")
        st.caption(words.WAVELENGTH_WORDS)
    with col_r:
        if not config.scaling.scales:
            st.markdown(words.NO_RULE_WORDS)
        else:
            display.show_figure(ratio_fig(key, length), key=f"{P}_fig_ratio")
            st.caption(words.RATIO_WORDS)

    turning, pairs, longest = turning_in_context(torch.from_numpy(inv_freq), length)
    figures_row = st.container(horizontal=True)   # wraps: three fixed columns cut "54,410 p…" at 1024 px
    figures_row.metric("pairs that complete a turn in L", f"{turning} of {pairs}")
    figures_row.metric("longest wavelength", f"{longest:,.0f} positions")
    figures_row.metric("attention scaling (on cos and sin)", f"{attention:.4f}",
                       help="Logits are multiplied by its square. yarn and longrope only; 1 for the other rules.")
    st.info(f"**{rule}** — {RULE_TEXT[rule]}", icon=":material/info:")
    if preset != CUSTOM:
        st.caption(preset_caption(*preset_map[preset]))
    st.markdown(words.WHAT_ROPE_DOES)

    st.subheader("2 · Why RoPE is relative: one pair, then the whole score matrix")
    pairs = len(inv_freq)
    controls.clamp_state(f"{P}_pair", 0, pairs - 1)
    a1, a2, a3 = st.columns(3)
    pair_index = int(a1.slider("frequency pair i", 0, pairs - 1, min(4, pairs - 1), key=f"{P}_pair",
                               bind="query-params", help="Pair i turns by θ_i per position (this model's θ, "
                                                         "with its scaling rule at this length)."))
    m = int(a2.slider("query position m", 0, PAIR_POSITIONS, 2, key=f"{P}_m", bind="query-params"))
    n = int(a3.slider("key position n", 0, PAIR_POSITIONS, 5, key=f"{P}_n", bind="query-params"))
    theta = float(inv_freq[pair_index])
    pair = rotate_pair(PAIR_Q, PAIR_K, theta, query_position=m, key_position=n)
    start = rotate_pair(PAIR_Q, PAIR_K, theta, query_position=0, key_position=0)
    shift = 16
    shifted = rotate_pair(PAIR_Q, PAIR_K, theta, query_position=m + shift, key_position=n + shift)
    col_p, col_e = st.columns([3, 2])
    with col_p:
        display.show_figure(pair_figure(pair, start, pair_index=pair_index), key=f"{P}_fig_pair")
    with col_e:
        st.markdown(pair_explanation(pair))
        pair_row = st.container(horizontal=True)    # wraps: two fixed columns cut "-0.73…" at 1024 px
        pair_row.metric("angle from q to k", f"{math.degrees(pair.angle_difference):.1f}°")
        pair_row.metric("q_m · k_n", f"{pair.dot:.4f}")
        st.caption(shifted_caption(shifted, shift))

    score_matrix(key, length, preset, attention)

    st.subheader("3 · The long-term decay, at this length")
    curves = decay(key, length)
    display.show_figure(decay_fig(key, length), key=f"{P}_fig_decay")
    st.caption(words.decay_words(curves))
