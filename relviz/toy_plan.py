"""relviz's own toy model as a plan of mechanisms: a shipped (or session-trained) toy checkpoint read as
a :class:`relviz.model_plan.ModelPlan`, so the Your model page draws it as it draws a real model (its layer strip
and each layer's views), with the same mechanism views.

The toy scheme holds the learned parameters (checkpoint tensor names ``position.<attr>`` unchanged) and hands
out, per layer, the mechanism of :mod:`relviz.mechanisms` that its forward runs (``Scheme.mechanism``). The
plan holds those same mechanisms, built from a frozen copy of the parameters on the CPU, so what the page
draws is what ran: one implementation of each concept. This module sits above the model, the schemes and
the plan, which it joins.
"""
from __future__ import annotations

import copy

from relviz.mechanisms.pattern import AttentionPattern
from relviz.model import RelvizTransformer
from relviz.model_plan import LayerPlan, ModelPlan
from relviz.schemes.registry import REGISTRY

__all__ = ["TOY", "toy_plan", "drawn_schemes"]

#: the plan's model_type and where each layer's plan comes from
TOY = "relviz-toy"
READ_FROM = "relviz's toy model: the mechanisms its forward runs (tests/test_toy_plan.py)"


def toy_plan(model: RelvizTransformer, *, source: str = "relviz toy model") -> ModelPlan:
    """The toy model's plan: one stack (decoder when causal, else encoder), every layer the mechanism its scheme
    hands out (the one the forward runs) and its attention pattern."""
    if not isinstance(model, RelvizTransformer):
        raise ValueError(f"model must be a relviz RelvizTransformer; got {type(model).__name__}")
    config = model.config
    # a frozen copy of the scheme's parameters on the CPU: the plan outlives a training step that changes them
    position = copy.deepcopy(model.position).to("cpu").requires_grad_(False)
    pattern = AttentionPattern(causal=config.causal)
    stack = "decoder" if config.causal else "encoder"
    layers = [LayerPlan(stack, index, None, (position.mechanism(index), pattern), read_from=READ_FROM)
              for index in range(config.n_layers)]
    return ModelPlan(TOY, source, {stack: layers},
                     config={"max_position_embeddings": config.max_len, **config.to_dict()},
                     notes=[f"relviz's toy {config.scheme} model: {type(model.position).summary}"],
                     notes_title="About this toy model",
                     config_title="settings read from the checkpoint's ModelConfig",
                     in_family_table=False)


def drawn_schemes() -> tuple[str, ...]:
    """The toy schemes :func:`toy_plan` can draw (the Your model page lists their checkpoints): every one, since
    each hands out the mechanisms its forward runs."""
    return tuple(REGISTRY)
