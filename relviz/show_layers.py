"""``relviz.show``'s pictures of today's models, layer by layer (the Your model page): the layer strip
and each layer's views (wavelengths, attention pattern, bias, temperature, sinks).

Its own module because these pictures read a model's per-layer plan (a published preset or your own
model directory through relviz.hf), not relviz's own schemes; ``relviz.show`` re-exports them.
"""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from relviz.figures.layers import strip_figure, view_figure
from relviz.layer_strip import VIEW_KINDS, chosen, context_length, strip
from relviz.layer_strip import layer_views as views_of_layer
from relviz.model_presets import preset_config, preset_entry, preset_plan


# ---------------------------------------------------------------------------------------
# Today's models, layer by layer (the Your model page): a preset is "group/id" of relviz/presets.json
# (e.g. "models/gemma-3-27b"), or pass a ModelPlan (relviz.hf.inspect of your own model directory).


def _plan_of(model):
    return preset_plan(model) if isinstance(model, str) else model


def _length_of(plan, model, length: int | None) -> int:
    raw = preset_config(preset_entry(model)) if isinstance(model, str) else None
    return length if length is not None else (context_length(plan, raw) or 4096)


def layer_strip(model: Any = "models/gemma-3-27b", *, stack: str | None = None, layer: int | None = None) -> go.Figure:
    """One cell per layer per row (position, keys seen, softmax), coloured by what the layer applies.

    Example: ``show.layer_strip("models/llama-4-scout", layer=3)``
    """

    return strip_figure(strip(_plan_of(model), stack), selected=layer)


def layer_views(model: Any = "models/gemma-3-27b", layer: int = 0, *, length: int | None = None,
                stack: str | None = None) -> list[go.Figure]:
    """Every view of one layer at ``length`` positions (default: the model's own context), figures only.

    Example: ``show.layer_views("models/gpt-oss-20b", 1)``
    """

    plan = _plan_of(model)
    figures = [view_figure(v) for v in views_of_layer(plan.layer(layer, stack=stack), _length_of(plan, model, length))]
    return [f for f in figures if f is not None]


def _one(kind: str, model: Any, layer: int, length: int | None, stack: str | None) -> go.Figure:
    plan = _plan_of(model)
    shown = chosen(views_of_layer(plan.layer(layer, stack=stack), _length_of(plan, model, length)), kind)
    if shown.missing:
        raise ValueError(f"layer {layer} of this model has no {kind} view (its views: "
                         f"{', '.join(type(v).__name__ for v in shown.views)})")
    assert isinstance(shown.views[0], VIEW_KINDS[kind])
    return view_figure(shown.views[0])


def layer_wavelengths(model: Any = "models/gemma-3-27b", layer: int = 5, *, length: int | None = None,
                      stack: str | None = None) -> go.Figure:
    """A rotating layer's wavelength per pair against the context, scaled and as its base alone gives.

    Example: ``show.layer_wavelengths("models/gemma-3-27b", 5)`` (a global layer: base 1M, linear ×8)
    """
    return _one("rotation", model, layer, length, stack)


def layer_pattern(model: Any = "models/llama-4-scout", layer: int = 0, *, length: int | None = None,
                  stack: str | None = None) -> go.Figure:
    """Keys each query sees over the whole context, and the band of offsets j − i it may attend.

    Example: ``show.layer_pattern("models/llama-4-scout", 0)`` (chunks of 8,192 over 10M positions)
    """
    return _one("pattern", model, layer, length, stack)


def layer_bias(model: Any = "alibi/bloom-560m", layer: int = 0, *, length: int | None = None,
               stack: str | None = None) -> go.Figure:
    """A bias (or bucket) against j − i: ALiBi's lines, DeBERTa's buckets, a T5 table read from weights.

    Example: ``show.layer_bias("alibi/bloom-560m", length=512)``
    """
    return _one("bias", model, layer, length, stack)


def layer_temperature(model: Any = "models/llama-4-scout", layer: int = 3, *, length: int | None = None,
                      stack: str | None = None) -> go.Figure:
    """Llama 4's NoPE layers: the factor on the queries against position.

    Example: ``show.layer_temperature("models/llama-4-scout", 3)``
    """
    return _one("temperature", model, layer, length, stack)


def layer_sinks(model: Any = "models/gpt-oss-20b", layer: int = 0, *, length: int | None = None,
                stack: str | None = None) -> go.Figure:
    """GPT-OSS: the share of each softmax row the sink takes against position (illustrative logits from a config).

    Example: ``show.layer_sinks("models/gpt-oss-20b", 0)``
    """
    return _one("sinks", model, layer, length, stack)


def atlas(first: Any = "rope/llama-3.1-8b", second: Any = "models/llama-4-scout") -> list[go.Figure]:
    """Two models' strips, one above the other (the page's side-by-side mode).

    Example: ``show.atlas("rope/llama-3.1-8b", "models/llama-4-scout")``
    """
    return [layer_strip(first), layer_strip(second)]
