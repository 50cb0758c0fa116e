"""The app's pictures as plain Plotly figures, for a notebook or a paper (no Streamlit).

One function per picture the app draws, each a thin wrapper: it calls the library for the
numbers and ``relviz.figures`` for the drawing, exactly as the page does, and returns a
``plotly.graph_objects.Figure``. Show it with ``fig.show()`` (or as a cell's last value);
save it for a paper with ``fig.write_image("fig.svg")`` / ``"fig.pdf"`` / ``"fig.png"``
(needs ``pip install "relviz[export]"`` and a Chrome or Chromium; see the README) or
``fig.write_html("fig.html")`` (no extra needed).

    >>> import relviz.show as show
    >>> show.t5_buckets(num_buckets=32, max_distance=128, bidirectional=True, length=64)  # doctest: +SKIP

Sign convention everywhere: relative position = j − i = key position − query position.
Matrices larger than one heatmap can show at full resolution (more than 1024 per side) are
drawn as their top-left 1024 × 1024 window; ``t5_overview`` / ``shaw_overview`` pool the whole.

The position pages' pictures are written here; those of the shipped checkpoints
(:mod:`relviz.show_live`), of the studies (:mod:`relviz.show_experiments`), of today's models
layer by layer (:mod:`relviz.show_layers`) and of position in images and video (:mod:`relviz.show_vision`) in their
own modules, re-exported here: every picture is
``relviz.show.<name>``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from relviz.figures.absolute import (
    alibi_bias,
    alibi_lines,
    alibi_slopes,
    sinusoidal_encoding_map,
    sinusoidal_offset_curve,
    sinusoidal_shift,
    sinusoidal_similarity_map,
)
from relviz.figures import intro as intro_figures
from relviz.figures import rope as rope_figures
from relviz.figures import shaw as shaw_figures
from relviz.figures import skew as skew_figures
from relviz.figures import t5 as t5_figures
from relviz.figures.compose import panel_grid
from relviz.rope.config import rope_presets
from relviz.rope.math import rope_parameters, unscaled
from relviz.rope.scores import content_scores, decay_curves
from relviz.show_experiments import (
    forward_time,
    length_extrapolation,
    memory_wall,
    offset_resolution,
    offset_resolution_detail,
    shaw_reference,
)
from relviz.show_layers import (
    atlas,
    layer_bias,
    layer_pattern,
    layer_sinks,
    layer_strip,
    layer_temperature,
    layer_views,
    layer_wavelengths,
)
from relviz.show_vision import (
    mrope_ids,
    mrope_pairs,
    mrope_scores,
    patch_pairs,
    patch_row,
    rope2d_pairs,
    rope2d_query_scores,
    rope2d_scores,
    swin_bias_matrix,
    swin_index,
    swin_query_bias,
    swinv2_coords,
)
from relviz.show_live import (
    attention,
    attention_by_offset,
    attention_head,
    learned_parameters,
    position_structure,
    prediction,
)

__all__ = [
    "relative_intro", "relative_index", "shaw_clipped", "shaw_index", "shaw_table", "shaw_overview",
    "shaw_k_ablation", "t5_buckets", "t5_overview", "t5_bucket_curve", "skew_steps",
    "sinusoidal_encoding_map", "sinusoidal_similarity_map", "sinusoidal_offset_curve", "sinusoidal_shift", "alibi_bias",
    "alibi_slopes", "alibi_lines", "rope_wavelengths", "rope_frequency_ratio", "rope_scores", "rope_decay",
    "prediction", "attention", "attention_head", "position_structure",
    "attention_by_offset", "learned_parameters", "offset_resolution", "offset_resolution_detail", "shaw_reference",
    "length_extrapolation", "memory_wall", "forward_time",
    "layer_strip", "layer_wavelengths", "layer_pattern", "layer_bias", "layer_temperature", "layer_sinks",
    "layer_views", "atlas",
    "patch_row", "patch_pairs", "swin_index", "swin_bias_matrix", "swin_query_bias", "swinv2_coords",
    "rope2d_scores", "rope2d_query_scores", "rope2d_pairs", "mrope_ids", "mrope_pairs", "mrope_scores",
]

CPU = "cpu"  # figures are drawn from CPU tensors whatever the default device is
#: The landing page's sentence.
INTRO_TOKENS = ("The", "cat", "sat", "on", "the", "mat", ".")


# ---------------------------------------------------------------------------------------
# Home: what relative position is


def relative_intro(tokens: tuple[str, ...] | list[str] = INTRO_TOKENS, *, query: int = 2) -> go.Figure:
    """j − i for a short sentence, every cell labelled, the row of ``query`` outlined.

    Example: ``show.relative_intro(["I", "saw", "her", "duck"], query=1)``
    """
    tokens = [str(t) for t in tokens]
    if not tokens:
        raise ValueError("tokens must hold at least one token")
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < len(tokens):
        raise ValueError(f"query must be an integer from 0 to {len(tokens) - 1}; got {query!r}")
    return intro_figures.relative_intro_figure(tokens, query=query)


# ---------------------------------------------------------------------------------------
# Relative index & Shaw clipping


def _shaw(q_len: int, k_len: int | None, k: int, q_offset: int) -> tuple[Any, int, int]:
    k_len = q_len if k_len is None else k_len
    return shaw_figures.shaw_offsets(q_len, k_len, k=k, q_offset=q_offset), q_len, k_len


def relative_index(q_len: int = 10, k_len: int | None = None, *, q_offset: int = 0) -> go.Figure:
    """The relative position j − i of every query i and key j (rows: i = q_offset + row).

    Example: ``show.relative_index(8, 12, q_offset=4)`` (8 new queries after 4 cached tokens)
    """
    values, q_len, k_len = _shaw(q_len, k_len, 0, q_offset)
    return shaw_figures.shaw_matrices(values, q_len, k_len, q_offset=q_offset)[0].figure


def shaw_clipped(q_len: int = 10, k_len: int | None = None, *, k: int = 3, q_offset: int = 0) -> go.Figure:
    """Shaw et al.'s clipped offset clip(j − i, −k, k).

    Example: ``show.shaw_clipped(16, k=4)``
    """
    values, q_len, k_len = _shaw(q_len, k_len, k, q_offset)
    return shaw_figures.shaw_matrices(values, q_len, k_len, q_offset=q_offset)[1].figure


def shaw_index(q_len: int = 10, k_len: int | None = None, *, k: int = 3, q_offset: int = 0) -> go.Figure:
    """Shaw et al.'s lookup index clip(j − i, −k, k) + k: the row of the 2k + 1 table each cell reads.

    Example: ``show.shaw_index(16, k=4)``
    """
    values, q_len, k_len = _shaw(q_len, k_len, k, q_offset)
    return shaw_figures.shaw_matrices(values, q_len, k_len, q_offset=q_offset)[2].figure


def shaw_table(q_len: int = 10, k_len: int | None = None, *, k: int = 3, q_offset: int = 0) -> go.Figure:
    """The 2k + 1 rows of Shaw's table, coloured like the index; hover: how many cells read each.

    Example: ``show.shaw_table(10, k=3)``
    """
    values, q_len, k_len = _shaw(q_len, k_len, k, q_offset)
    return shaw_figures.embedding_strip(values, q_len, k_len)


def shaw_overview(q_len: int = 8192, k_len: int | None = None, *, k: int = 3, q_offset: int = 0) -> go.Figure:
    """A pooled overview of a large lookup index (block means: the band |j − i| ≤ k stays visible).

    Example: ``show.shaw_overview(8192, k=16)``
    """
    values, q_len, k_len = _shaw(q_len, k_len, k, q_offset)
    return shaw_figures.shaw_overview(values, q_len, k_len, q_offset=q_offset).figure


def shaw_k_ablation(k: int = 3) -> go.Figure:
    """Shaw et al.'s Table 2 (BLEU against the clipping distance k), ``k`` marked.

    Example: ``show.shaw_k_ablation(k=2)``
    """
    return shaw_figures.k_ablation_figure(k)


# ---------------------------------------------------------------------------------------
# T5 buckets


def _t5(num_buckets: int, max_distance: int, bidirectional: bool, length: int, k_len: int | None,
        q_offset: int) -> tuple[Any, int, int]:
    k_len = length if k_len is None else k_len
    values = t5_figures.t5_offsets(length, k_len, num_buckets=num_buckets, max_distance=max_distance,
                                   bidirectional=bidirectional, q_offset=q_offset)
    return values, length, k_len


def t5_buckets(num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True, length: int = 32,
               *, k_len: int | None = None, q_offset: int = 0) -> go.Figure:
    """T5's bucket of every (query i, key j) for ``length`` queries and ``k_len`` (default: as many) keys.

    Example: ``show.t5_buckets(num_buckets=32, max_distance=128, bidirectional=True, length=64)``
    """
    values, q_len, k_len = _t5(num_buckets, max_distance, bidirectional, length, k_len, q_offset)
    return t5_figures.bucket_map(values, q_len, k_len, q_offset=q_offset).figure


def t5_overview(num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True,
                length: int = 8192, *, k_len: int | None = None, q_offset: int = 0) -> go.Figure:
    """A pooled overview of a large bucket map (block means keep every bucket edge).

    Example: ``show.t5_overview(length=8192)``
    """
    values, q_len, k_len = _t5(num_buckets, max_distance, bidirectional, length, k_len, q_offset)
    return t5_figures.bucket_overview(values, q_len, k_len, q_offset=q_offset).figure


def t5_bucket_curve(num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True, *,
                    log_x: bool = False) -> go.Figure:
    """Bucket against distance |j − i|, past and future, with the exact / logarithmic / last regions.

    Example: ``show.t5_bucket_curve(32, 128, log_x=True)``
    """
    return t5_figures.bucket_curve(num_buckets, max_distance, bidirectional, log_x=log_x)


# ---------------------------------------------------------------------------------------
# The Music Transformer skew

#: colour_by names as the app shows them -> step_figure's
_SKEW_COLOURS = {"score": "value", "distance": "distance", "source row": "row"}


def skew_steps(L: int = 6, *, seed: int = 0, bidirectional: bool = False, colour_by: str = "score") -> go.Figure:  # noqa: N803 (L as in the papers)
    """Every step of the skew on random Q and E_r, one panel each, every cell labelled with its distance.

    Causal (decoder): Q E_rᵀ, pad, reshape, slice, mask. ``bidirectional=True`` (encoder): Q E_allᵀ
    over 2L − 1 distances, the flattened window, the result. ``colour_by``: "score", "distance"
    or "source row". Same ``L`` and ``seed`` give the app's numbers.

    Example: ``show.skew_steps(L=6)``
    """
    if colour_by not in _SKEW_COLOURS:
        raise ValueError(f"colour_by must be one of {sorted(_SKEW_COLOURS)}; got {colour_by!r}")
    demo = skew_figures.demo_inputs(L, seed)
    if bidirectional:
        cells = skew_figures.bidirectional_steps(demo)
        steps = [("1 · Q E_allᵀ (2L − 1 distances)", "qer", "column m", "query i"),
                 ("2 · flatten, skip L − 1, rows of 2L − 2", "window", "column", "query i"),
                 ("3 · first L columns → S_rel", "result", "key j", "query i")]
    else:
        cells = skew_figures.causal_steps(demo)
        steps = [("1 · Q E_rᵀ", "qer", "column m", "query i"), ("2 · pad a zero column", "padded", "column", "query i"),
                 ("3 · reshape to (L + 1) × L", "reshaped", "column", "row"),
                 ("4 · slice off row 0 → S_rel", "skewed", "key j", "query i"),
                 ("5 · causal mask", "masked", "key j", "query i")]
    zmax = float(np.nanmax(np.abs(cells["qer"].values))) or 1.0
    panels = [(title, skew_figures.step_figure(cells[name], colour_by=_SKEW_COLOURS[colour_by], zmax=zmax, length=L,
                                               x_title=x_title, y_title=y_title, show_scale=n == 0,
                                               scale_below=False))
              for n, (title, name, x_title, y_title) in enumerate(steps)]
    return panel_grid(panels, cols=3)


# ---------------------------------------------------------------------------------------
# RoPE and its scalings (published models' settings, computed as transformers computes them)


def _rope(preset: str, length: int | None) -> tuple[Any, int, np.ndarray, np.ndarray]:

    presets = rope_presets()
    if preset not in presets:
        raise ValueError(f"preset must be one of {sorted(presets)}; got {preset!r}")
    config = presets[preset][1]
    length = config.max_position_embeddings if length is None else length
    inv_freq = rope_parameters(config, length, device=CPU)[0].numpy()
    plain = rope_parameters(unscaled(config), device=CPU)[0].numpy()
    return config, length, inv_freq, plain


def rope_wavelengths(preset: str = "llama-3.1-8b", length: int | None = None) -> go.Figure:
    """Wavelength 2π/θ_i of every rotary pair of a published model's RoPE, scaled and unscaled,
    against the context ``length`` (default: the model's max_position_embeddings).

    Example: ``show.rope_wavelengths("llama-3.1-8b", length=32768)``
    """
    config, length, inv_freq, plain = _rope(preset, length)
    return rope_figures.wavelength_figure(inv_freq, plain, length=length, original=config.scaled_from,
                                          rule=config.scaling.rope_type)


def rope_frequency_ratio(preset: str = "llama-3.1-8b", length: int | None = None) -> go.Figure:
    """θ_scaled / θ per rotary pair under the model's scaling rule: 1 = kept, 1/factor = interpolated.

    Raises ValueError for a model without a scaling rule.
    Example: ``show.rope_frequency_ratio("phi-3-vision-128k")``
    """
    config, length, inv_freq, plain = _rope(preset, length)
    if not config.scaling.scales:
        raise ValueError(f"preset {preset!r} has no RoPE scaling rule (rope_type default)")
    return rope_figures.ratio_figure(inv_freq, plain, factor=config.scaling.factor, rule=config.scaling.rope_type)


def rope_scores(preset: str = "llama-3.1-8b", length: int | None = None, *, window: int = 48,
                same: bool = True, seed: int = 0) -> go.Figure:
    """The window × window score matrix of random unit q, k under a published model's RoPE at ``length``
    positions: constant along every diagonal (Toeplitz), computed per offset as the RoPE page does
    (``relviz.rope.content_scores`` also gives its distance from brute-force rotation).

    Example: ``show.rope_scores("phi-3-mini-128k", length=131072, window=32, same=False)``
    """

    config, length, _, _ = _rope(preset, length)
    return rope_figures.score_figure(content_scores(config, length, window, same=same, seed=seed))


def rope_decay(preset: str = "llama-3.1-8b", length: int | None = None) -> go.Figure:
    """RoPE's long-term decay under a published model's settings at ``length`` positions: the RoFormer
    bound (scaled and unscaled θ) and the measured mean score for identical and independent q, k.

    Example: ``show.rope_decay("llama-3.1-8b", length=131072)``
    """

    config, length, _, _ = _rope(preset, length)
    return rope_figures.decay_figure(decay_curves(config, length), length=length, original=config.scaled_from)
