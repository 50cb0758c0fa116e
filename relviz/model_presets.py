"""Published models as per-layer plans: the presets of relviz/presets.json that a config alone can draw.

An entry keeps the fields as the model's config.json publishes them (``config``) apart from what
transformers derives from them per layer (``derived``: layer_types, no_rope_layers, nested
rope_parameters...), so that a reader can tell what was typed from the file and what was computed;
``unconfirmed`` names the fields no public copy of the model's own file confirmed. The plan is read
from the two merged, exactly as transformers' config object holds them.
"""
from __future__ import annotations

from typing import Any

from relviz.hf import from_config
from relviz.rope.config import load_presets

__all__ = ["GROUPS", "model_presets", "preset_config", "preset_plan", "preset_entry"]

#: the preset groups a config alone can draw layer by layer (T5 and learned tables need weights, but
#: their strip and settings still come from the config)
GROUPS = ("models", "rope", "alibi", "t5")


def model_presets() -> dict[str, dict[str, Any]]:
    """"group/id" -> preset entry, today's models first."""
    presets = load_presets()
    return {f"{group}/{entry['id']}": entry for group in GROUPS for entry in presets.get(group, [])}


def preset_entry(key: str) -> dict[str, Any]:
    presets = model_presets()
    if key not in presets:
        raise ValueError(f"preset must be one of {', '.join(presets)}; got {key!r}")
    return presets[key]


def preset_config(entry: dict[str, Any]) -> dict[str, Any]:
    """The config transformers would hold: the published fields, then the derived ones over them."""
    config = dict(entry["config"])
    derived = entry.get("derived", {})
    config.update(derived)
    if "rope_parameters" in derived:
        config.pop("rope_scaling", None)      # transformers 5 folds rope_scaling into rope_parameters
    return config


def preset_plan(key: str):
    """The ModelPlan of one preset ("group/id")."""

    entry = preset_entry(key)
    return from_config(preset_config(entry), source=entry["source"])
