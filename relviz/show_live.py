"""``relviz.show``'s pictures of the shipped checkpoints: a prediction, the attention weights of every
layer and head, the scheme's position structure, attention by offset and the learned parameters,
drawn as the Live attention page draws them.

Its own module because these pictures load and run a trained model (relviz.training, relviz.inspection),
which the position pictures of :mod:`relviz.show` never need; ``relviz.show`` re-exports them.
"""
from __future__ import annotations

import functools

import plotly.graph_objects as go

from relviz.figures import attention as attention_figures
from relviz.figures import layers as layer_figures
from relviz.inspection import mean_attention_by_offset, parameter_views, random_text, run_view
from relviz.inspection import position_structure as structure_of
from relviz.training.checkpoints import load_checkpoint


# ---------------------------------------------------------------------------------------
# Live attention of the shipped checkpoints


@functools.lru_cache(maxsize=8)
def _checkpoint(name: str):
    return load_checkpoint(name)


def _run(checkpoint: str, text: str | None, length: int, seed: int):

    loaded = _checkpoint(checkpoint)
    text = random_text(length, seed) if text is None else text
    return loaded, run_view(loaded.model, loaded.info.task, text)


def prediction(checkpoint: str = "t5-shift", text: str | None = None, *, length: int = 32,
               seed: int = 0) -> go.Figure:
    """Input, the task's answer and the model's prediction, token by token.

    ``checkpoint``: a shipped checkpoint (``relviz checkpoints`` lists them); ``text``: digits
    (default: the app's random example of ``length`` and ``seed``).
    Example: ``show.prediction("alibi-shift", length=64)``
    """
    loaded, view = _run(checkpoint, text, length, seed)
    return attention_figures.prediction_strip(view, train_length=loaded.info.train_length)


def attention(checkpoint: str = "t5-shift", text: str | None = None, *, length: int = 32,
              seed: int = 0) -> go.Figure:
    """The attention weights of every layer and head of a shipped checkpoint on ``text``.

    Example: ``show.attention("t5-shift", text="3141592653589793238462643383279")``
    """

    loaded, view = _run(checkpoint, text, length, seed)
    return attention_figures.attention_grid(view.weights, structure=structure_of(loaded.model, view.length))


def attention_head(checkpoint: str = "t5-shift", text: str | None = None, *, layer: int = 1, head: int = 1,
                   length: int = 32, seed: int = 0) -> go.Figure:
    """One head's exact weights (layers and heads count from 1, as in the app); hover: the scheme's index.

    Example: ``show.attention_head("shaw-shift", layer=2, head=3)``
    """

    loaded, view = _run(checkpoint, text, length, seed)
    layers, heads = view.weights.shape[:2]
    _check_count("layer", layer, layers)
    _check_count("head", head, heads)
    return attention_figures.attention_heatmap(view.weights[layer - 1, head - 1], layer=layer - 1, head=head - 1,
                                               structure=structure_of(loaded.model, view.length, layer - 1),
                                               train_length=loaded.info.train_length)


def position_structure(checkpoint: str = "t5-shift", length: int = 32, *, head: int = 1, layer: int = 1) -> go.Figure:
    """The position structure layer ``layer``'s mechanism puts beside its weights (e.g. T5's buckets and learned bias;
    layers and heads count from 1, as in the app).

    Raises ValueError for a scheme without one (``none``).
    Example: ``show.position_structure("fire-shift", 48, head=2, layer=3)``
    """

    loaded = _checkpoint(checkpoint)
    _check_count("layer", layer, loaded.model.config.n_layers)
    structure = structure_of(loaded.model, length, layer - 1)
    if structure is None:
        raise ValueError(f"checkpoint {checkpoint!r} (scheme {loaded.model.config.scheme}) has no position structure")
    _check_count("head", head, loaded.model.config.n_heads)
    return attention_figures.structure_heatmap(structure, head=head - 1)


def attention_by_offset(checkpoint: str = "t5-shift", text: str | None = None, *, length: int = 32,
                        seed: int = 0) -> go.Figure:
    """Each head's mean weight on the keys at each offset j − i (a relative habit is a peak).

    Example: ``show.attention_by_offset("rope-shift", length=64)``
    """

    loaded, view = _run(checkpoint, text, length, seed)
    task, causal = loaded.info.task, loaded.model.config.causal
    params = task.params()
    answer = -params["s"] if "s" in params else None
    window = (-(params["w"] - 1), 0) if "w" in params else None
    return attention_figures.offset_profile_figure(mean_attention_by_offset(view.weights), causal=causal,
                                                   answer_offset=answer, window=window)


def learned_parameters(checkpoint: str = "t5-shift", *, length: int | None = None, layer: int = 1) -> list[go.Figure]:
    """The checkpoint's learned position parameters, one figure per panel of the app (T5: bias per
    head against the offset; Shaw/skew: vector norms and their cosine; ALiBi: slopes; learned
    absolute: cosine of the position vectors). Empty for schemes that learn none.

    Example: ``show.learned_parameters("t5-shift")[0]``
    """
    loaded = _checkpoint(checkpoint)
    _check_count("layer", layer, loaded.model.config.n_layers)
    train_length = loaded.info.train_length

    views = parameter_views(loaded.model, length=length or train_length, train_length=train_length, layer=layer - 1)
    figures = (layer_figures.view_figure(view, train_length=train_length) for view in views)
    return [figure for figure in figures if figure is not None]


def _check_count(name: str, value: object, count: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
        raise ValueError(f"{name} must be an integer from 1 to {count}; got {value!r}")
