"""RoPE settings from what a user gives: one layer of a real model, from its per-layer plan
(relviz.hf.from_config / inspect); a config.json (read through that plan, or relviz.rope's reader for a bare RoPE
block); the command line's flags.

Layers differ: Gemma 3's sliding layers use θ 10k and its full layers 1M with linear scaling; Llama 4,
SmolLM3 and Cohere 2 have layers without any rotation. A layer without rotation is checked against
the identity (cos 1, sin 0, angle 0), and a cache that rotates there gets the cause "rotation applied on
a layer that has none" when one of the model's rotating layers reproduces it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from relviz import hf
from relviz.check.rope import RopeKind, RopeSettings, rope_settings
from relviz.mechanisms.rotation import Rotation
from relviz.model_plan import ModelPlan
from relviz.rope.config import PerLayerTypeRope, rope_config_from_hf
from relviz.rope.math import CACHE_LAYOUT_OF


def _settings(rotation: Rotation, q_offset: int) -> RopeSettings:
    if rotation.rotary_offset or rotation.sections:
        raise ValueError("this layer's rotation sits after pass-through dims or splits its pairs across "
                         "M-RoPE axes: check its text-only cache with --head-dim/--rotary-dim instead")
    return RopeSettings(rotation.rope, CACHE_LAYOUT_OF[rotation.layout], q_offset)


def settings_for_layer(plan: ModelPlan, layer: int, *, stack: str | None = None, q_offset: int = 0) -> RopeSettings:
    """RopeSettings of ``layer`` (of ``stack``) as the model applies it; a layer without rotation gets
    ``rotates=False`` and the model's rotating layers as ``elsewhere``."""
    if not isinstance(plan, ModelPlan):
        raise ValueError(f"plan must be a relviz.model_plan.ModelPlan (relviz.hf.from_config); got {type(plan).__name__}")
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


def settings_from_config(config: Mapping[str, Any] | str, *, layout: str | None = None,
                         q_offset: int = 0) -> RopeSettings:
    """RopeSettings from a Hugging Face config.json (a dict, or its text), scaling rules included.

    A model's config (it names its ``model_type``) is read only through the model's per-layer plan
    (relviz.hf.from_config, relviz.check.rope_model): the layout, the rotary dims and the rule per layer are the
    plan's, so the checker keeps no list of families of its own. A model whose layers rotate differently needs
    the layer (``--layer N``). A bare RoPE block without a model_type is read by relviz.rope's reader, the one
    the plan's rotation uses. ``layout`` overrides the layout read.
    """
    if isinstance(config, str):
        config = hf.config_from_text(config, "config")
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a JSON object (a config.json); got {type(config).__name__}")
    config = dict(config)
    if "model_type" in config:
        plan = hf.from_config(config)
        layers = range(len(plan.plans[plan.stack_names[0]]))
        per_layer = [settings_for_layer(plan, n, q_offset=q_offset) for n in layers]
        if any((p.config, p.layout, p.rotates) != (per_layer[0].config, per_layer[0].layout, per_layer[0].rotates)
               for p in per_layer):
            raise ValueError(f"this {plan.model_type} model's layers rotate differently (per layer type): give the "
                             "layer (--layer N, or relviz.check.rope_model.settings_for_model), whose settings the "
                             "model's per-layer plan reads")
        return replace(per_layer[0], layout=layout) if layout else per_layer[0]
    try:
        rope = rope_config_from_hf(config)
    except PerLayerTypeRope as exc:
        raise ValueError(f"{exc}: give the layer (--layer N, or relviz.check.rope_model.settings_for_model), "
                         "whose settings the model's per-layer plan reads") from None
    return RopeSettings(rope, layout or ("interleaved" if config.get("rope_interleave") else "half"), q_offset)


def settings_from_args(kind: RopeKind, args: Any, shape: tuple[int, ...] | None) -> RopeSettings:
    """RopeSettings from the command line: --config FILE (a config.json; with --layer N that layer of the
    model's per-layer plan), else --head-dim, --base, --rotary-dim, --layout; head_dim and rotary_dim
    default to what the array's shape implies."""
    layer = getattr(args, "layer", None)
    if layer is not None and not args.config:
        raise ValueError("--layer needs --config config.json (the model whose layer it is)")
    if args.config:
        with open(args.config, "rb") as handle:
            data = handle.read(hf.MAX_CONFIG_BYTES + 1)
        if len(data) > hf.MAX_CONFIG_BYTES:
            raise ValueError(f"--config {args.config} is over {hf.MAX_CONFIG_BYTES:,} bytes: not a config.json")
        parsed = hf.config_from_text(data, f"--config {args.config}")
        if layer is None:
            return settings_from_config(parsed, layout=args.layout, q_offset=args.q_offset)
        s = settings_for_model(parsed, layer, q_offset=args.q_offset)
        return replace(s, layout=args.layout) if args.layout else s
    head_dim, rotary_dim = args.head_dim, args.rotary_dim
    if head_dim is None:
        if shape is None or len(shape) != 2:
            raise ValueError("give --head-dim (or --config) for a RoPE function: relviz calls it with head_dim")
        head_dim, implied = kind.dims_of(tuple(shape))
        rotary_dim = rotary_dim or implied
    return rope_settings(head_dim=head_dim, base=args.base, rotary_dim=rotary_dim, layout=args.layout or "half",
                         q_offset=args.q_offset)
