"""RoPE settings of one layer of a real model, from its per-layer plan (relviz.hf.from_config / inspect).

Layers differ: Gemma 3's sliding layers use θ 10k and its full layers 1M with linear scaling; Llama 4,
SmolLM3 and Cohere 2 have layers without any rotation. A layer without rotation is checked against
the identity (cos 1, sin 0, angle 0), and a cache that rotates there gets the cause "rotation applied on
a layer that has none" when one of the model's rotating layers reproduces it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relviz import hf
from relviz.check.rope import RopeSettings
from relviz.mechanisms.rotation import Rotation
from relviz.plan import ModelPlan

#: How each rotation layout of the plan writes its cos/sin cache (M-RoPE's complex pairs are adjacent;
#: DeepSeek's de-interleaving rotates half-split pairs after reordering q and k).
CACHE_LAYOUT = {"half": "half", "interleaved": "interleaved", "complex": "interleaved", "deinterleave": "half"}


def _settings(rotation: Rotation, q_offset: int) -> RopeSettings:
    if rotation.rotary_offset or rotation.sections:
        raise ValueError("this layer's rotation sits after pass-through dims or splits its pairs across "
                         "M-RoPE axes: check its text-only cache with --head-dim/--rotary-dim instead")
    return RopeSettings(rotation.rope, CACHE_LAYOUT.get(rotation.layout, "half"), q_offset)


def settings_for_layer(plan: ModelPlan, layer: int, *, stack: str | None = None, q_offset: int = 0) -> RopeSettings:
    """RopeSettings of ``layer`` (of ``stack``) as the model applies it; a layer without rotation gets
    ``rotates=False`` and the model's rotating layers as ``elsewhere``."""
    if not isinstance(plan, ModelPlan):
        raise ValueError(f"plan must be a relviz.plan.ModelPlan (relviz.hf.from_config); got {type(plan).__name__}")
    rotations = []
    for other in plan.all_layers():
        found = other.find(Rotation)
        if found is not None and found not in rotations:
            rotations.append(found)
    here = plan.layer(layer, stack=stack).find(Rotation)
    if here is not None:
        return _settings(here, q_offset)
    if not rotations:
        raise ValueError(f"no layer of this {plan.model_type} model rotates: a RoPE cache does not apply")
    elsewhere = tuple(_settings(r, q_offset) for r in rotations)
    return RopeSettings(elsewhere[0].config, elsewhere[0].layout, q_offset, rotates=False, elsewhere=elsewhere)


def settings_for_model(config_or_path: Mapping[str, Any] | str, layer: int = 0, *, stack: str | None = None,
                       q_offset: int = 0) -> RopeSettings:
    """The same from a config.json dict, or a model directory / Hub id (relviz.hf.inspect: never a pickle)."""

    plan = hf.from_config(dict(config_or_path)) if isinstance(config_or_path, Mapping) else hf.inspect(config_or_path)
    return settings_for_layer(plan, layer, stack=stack, q_offset=q_offset)
