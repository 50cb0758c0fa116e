"""relviz's own toy model as a plan of mechanisms: a shipped (or session-trained) toy checkpoint read as
a :class:`relviz.plan.ModelPlan`, so the Your model page draws it as it draws a real model (its layer strip
and each layer's views), with the same mechanism views.

The toy schemes keep their learned parameters (checkpoint tensor names ``position.<attr>`` unchanged);
:data:`MECHANISMS_OF` gives, per scheme, the mechanisms of :mod:`relviz.mechanisms` that compute what the
scheme does, holding the model's own values (tests/test_toy_plan.py proves each equal to the scheme's own
forward). This module sits above both packages: the mechanisms already import the schemes' bias curves,
so the schemes cannot import the mechanisms. A scheme without an entry here (a new one, until it gets a
mechanism) is refused naming it, and the Your model page does not list its checkpoints.
"""
from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from relviz.mechanisms.base import Mechanism
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rotation import Rotation
from relviz.model import RelvizTransformer
from relviz.model_plan import LayerPlan, ModelPlan
from relviz.rope.config import RopeConfig
from relviz.schemes.base import Scheme
from relviz.schemes.registry import REGISTRY
from relviz.schemes.rope import Rope

__all__ = ["MECHANISMS_OF", "PER_LAYER", "TOY", "toy_plan", "drawn_schemes"]

#: the plan's model_type and where each layer's plan comes from
TOY = "relviz-toy"
READ_FROM = "relviz's toy model: the mechanisms compute what its scheme does (tests/test_toy_plan.py)"


def _rotation(model: RelvizTransformer) -> tuple[Mechanism, ...]:
    config = model.config
    return (Rotation(rope=RopeConfig(head_dim=config.head_dim, base=config.rope_base,
                                     max_position_embeddings=config.max_len)),)


#: toy scheme -> the mechanisms one of its layers applies (besides the attention pattern), from the model
MECHANISMS_OF: dict[type[Scheme], Callable[[RelvizTransformer], tuple[Mechanism, ...]]] = {
    Rope: _rotation,
}
#: toy scheme -> the mechanisms of layer ``index``, where each layer has its own (FIRE, Shaw, skew)
PER_LAYER: dict[type[Scheme], Callable[[RelvizTransformer, int], tuple[Mechanism, ...]]] = {
}


def _tables(parameters) -> tuple[torch.Tensor, ...]:
    """A learned table per layer, detached copies on the CPU."""
    return tuple(p.detach().to("cpu", copy=True) for p in parameters)


def toy_plan(model: RelvizTransformer, *, source: str = "relviz toy model") -> ModelPlan:
    """The toy model's plan: one stack (decoder when causal, else encoder), every layer the mechanism its scheme
    hands out (the one the forward runs) and its attention pattern."""
    if not isinstance(model, RelvizTransformer):
        raise ValueError(f"model must be a relviz RelvizTransformer; got {type(model).__name__}")
    config = model.config
    shared = MECHANISMS_OF.get(type(model.position))
    per_layer = PER_LAYER.get(type(model.position))
    # the plan holds a frozen copy of the scheme's parameters on the CPU: the mechanisms the forward runs
    position = copy.deepcopy(model.position).to("cpu").requires_grad_(False)
    pattern = AttentionPattern(causal=config.causal)
    every = shared(model) if shared is not None else ()
    stack = "decoder" if config.causal else "encoder"
    layers = [LayerPlan(stack, index, None,
                        (*(every or (per_layer(model, index) if per_layer else (position.mechanism(index),))),
                         pattern), read_from=READ_FROM)
              for index in range(config.n_layers)]
    return ModelPlan(TOY, source, {stack: layers},
                     config={"max_position_embeddings": config.max_len, **config.to_dict()},
                     notes=[f"relviz's toy {config.scheme} model: {type(model.position).summary}"],
                     in_family_table=False)


def drawn_schemes() -> tuple[str, ...]:
    """The toy schemes :func:`toy_plan` can draw (the Your model page lists their checkpoints): every one, since
    each hands out the mechanisms its forward runs."""
    return tuple(REGISTRY)
