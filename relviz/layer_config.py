"""What each layer's config says, read the way transformers' config classes read it.

A family's config class derives per-layer lists a config.json may leave out (``derived_config``: Qwen2's sliding
layers from max_window_layers, Jamba's attention period, GPT-Neo's runs, Gemma 4's last layer, ...); transformers
5's ``per_layer_config`` overrides fields of single layers (``config_of_layer``); the per-layer kinds are named by
the config field layer_types or its alias layers_block_type (``layer_types``); Swin counts its blocks per stage (``summed_layers``); a family
entry's ``requires`` holds where each dotted field has its value (``holds``). relviz.model_plan reads a model's
plan from these.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relviz.mechanisms.base import MAX_LAYERS, REQUIRED, ConfigView

__all__ = ["LAYER_TYPE_FIELDS", "config_of_layer", "derived_config", "holds", "layer_types", "lookup", "summed_layers"]

def lookup(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def holds(config: Mapping[str, Any], requires: Mapping[str, Any]) -> bool:
    """Whether every (dotted) field holds its required value; an absent field counts as false."""
    return all(lookup(config, k) == v or (v is False and lookup(config, k) is None) for k, v in requires.items())


def layer_types(cfg: ConfigView, layers: int, counted_by: str) -> list[str | None]:
    def one(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value or len(value) > 64:
            raise ValueError(f"config field {name} must be a layer type name such as 'full_attention'; got {value!r}")
        return value
    field = next((f for f in LAYER_TYPE_FIELDS if cfg.has(f)), LAYER_TYPE_FIELDS[0])
    types = cfg.list(field, layers, one, counted_by=counted_by)
    return types if types is not None else [None] * layers


#: the config fields transformers names the per-layer kinds by (layers_block_type: its alias in Zamba,
#: Nemotron-H, Granite-MoE-Hybrid)
LAYER_TYPE_FIELDS = ("layer_types", "layers_block_type")


def config_of_layer(cfg: ConfigView, index: int) -> ConfigView:
    """Layer ``index``'s config: transformers 5's ``per_layer_config`` ({layer index: the fields it overrides},
    e.g. Gemma 4's full-attention layers' head_dim 512) laid over the model's fields."""
    table = cfg.raw("per_layer_config")
    if table is None:
        return cfg
    if not isinstance(table, Mapping):
        raise ValueError(f"config field {cfg.name('per_layer_config')} must map layer indices to JSON objects of "
                         f"fields; got {table!r:.60}")
    # transformers reads each key with int() (its to_dict writes them zero-padded: "05")
    over = next((v for k, v in table.items() if isinstance(k, (int, str)) and str(k).strip().isdigit()
                 and int(k) == index), None)
    if over is None:
        return cfg
    if not isinstance(over, Mapping):
        raise ValueError(f"config field {cfg.name(f'per_layer_config.{index}')} must be a JSON object of the fields "
                         f"layer {index} overrides; got {over!r:.60}")
    return ConfigView({**cfg.data, **over}, cfg.prefix)


def summed_layers(cfg: ConfigView, field_name: str) -> int:
    """The layers a list field counts per stage (Swin's depths), summed; ValueError naming the field."""
    value = cfg.raw(field_name)
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_LAYERS for v in value) \
            or not 1 <= sum(value) <= MAX_LAYERS:
        raise ValueError(f"config field {cfg.name(field_name)} must be a list of layer counts per stage summing to 1 "
                         f"to {MAX_LAYERS}; got {value!r:.60}")
    return sum(value)


def derived_config(cfg: ConfigView, family: Mapping[str, Any], stacks: Mapping[str, Any]) -> ConfigView:
    """The config with the per-layer lists its family's config class derives when they are absent."""
    rules = family.get("derive", ())
    if not rules:
        return cfg
    spec = next(iter(stacks.values()))
    layers = cfg.int(spec["layers_field"], spec.get("layers_default", REQUIRED), minimum=1, maximum=MAX_LAYERS)
    data = dict(cfg.data)
    for rule in rules:
        present = data.get(rule["field"])
        if present is not None and not (rule.get("when_empty") and present == []) and not rule.get("always"):
            continue
        if not holds(data, rule.get("requires", {})):
            continue
        view = ConfigView(data, cfg.prefix)
        if "sum_of" in rule:                    # a size the config class computes from others
            total = sum(view.int(f, minimum=0, maximum=1 << 16) for f in rule["sum_of"])
            low, high = rule.get("minimum", 1), rule.get("maximum", 1 << 16)
            if not low <= total <= high or (rule.get("even") and total % 2):   # named by its sources
                raise ValueError(f"config field {' + '.join(view.name(f) for f in rule['sum_of'])} is {total}: "
                                 f"it gives {rule['field']}, which must be {'an even integer' if rule.get('even') else 'an integer'} "
                                 f"from {low} to {high}")
            data[rule["field"]] = total
            continue
        if "threshold_field" in rule:           # Qwen2: sliding from layer max_window_layers on
            start = view.int(rule["threshold_field"], layers, minimum=0, maximum=MAX_LAYERS)
            data[rule["field"]] = [rule["then"] if i >= start else rule["else"] for i in range(layers)]
            continue
        if "indices_field" in rule:             # Bamba, LFM2: the listed layers are "then", the others "else"
            listed = view.raw(rule["indices_field"], [])
            if not isinstance(listed, (list, tuple)) or not all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v < layers for v in listed):
                raise ValueError(f"config field {view.name(rule['indices_field'])} must list layer indices from 0 "
                                 f"to {layers - 1}; got {listed!r:.60}")
            data[rule["field"]] = [rule["then"] if i in listed else rule["else"] for i in range(layers)]
            continue
        if "cycle_field" in rule:               # RecurrentGemma: block_types repeated over the layers
            cycle = view.raw(rule["cycle_field"], rule.get("cycle_default"))
            if rule.get("text") and not isinstance(cycle, str):
                continue                        # EXAONE 4: a number there is the next rule's
            given = cycle
            if isinstance(cycle, str):          # EXAONE 4's "LLLG": one letter per layer
                cycle = list(cycle)
            if not isinstance(cycle, (list, tuple)) or not cycle or not all(
                    isinstance(v, str) and v in rule["map"] for v in cycle):
                raise ValueError(f"config field {view.name(rule['cycle_field'])} must be a non-empty "
                                 f"{'string' if rule.get('text') else 'list'} of {', '.join(rule['map'])}; "
                                 f"got {given!r:.60}")
            data[rule["field"]] = [rule["map"][cycle[i % len(cycle)]] for i in range(layers)]
            if rule.get("last"):                # (whatever the pattern gives the last layer)
                data[rule["field"]][-1] = rule["last"]
            continue
        if "runs_field" in rule:                # GPT-Neo: [[["global", "local"], 12]] is 24 layers
            runs = view.raw(rule["runs_field"])
            if not isinstance(runs, (list, tuple)) or not all(
                    isinstance(r, (list, tuple)) and len(r) == 2 and isinstance(r[0], (list, tuple)) and r[0]
                    and all(isinstance(t, str) and t in rule["map"] for t in r[0]) and isinstance(r[1], int)
                    and not isinstance(r[1], bool) and 0 <= r[1] <= MAX_LAYERS for r in runs):
                raise ValueError(f"config field {view.name(rule['runs_field'])} must be a list of [types, count] "
                                 f"runs, each type one of {', '.join(rule['map'])}; got {runs!r:.60}")
            total = sum(len(types) * count for types, count in runs)
            if total != layers:
                raise ValueError(f"config field {view.name(rule['runs_field'])} gives {total} layers; "
                                 f"{view.name(spec['layers_field'])} is {layers}")
            data[rule["field"]] = [rule["map"][t] for types, count in runs for _ in range(count) for t in types]
            continue
        if "offset_field" in rule:              # Jamba: "then" where i % period == offset
            period = view.int(rule["period_field"], rule["period"], minimum=1, maximum=MAX_LAYERS)
            offset = view.int(rule["offset_field"], rule["offset"], minimum=0, maximum=period - 1)
            data[rule["field"]] = [rule["then"] if i % period == offset else rule["else"] for i in range(layers)]
            continue
        if "constant" in rule:
            data[rule["field"]] = [rule["constant"]] * layers
            continue
        if "last" in rule:                      # Gemma 4: its config class forces the last layer's type
            data[rule["field"]] = [*view.list(rule["field"], layers, lambda n, v: v,
                                              counted_by=spec["layers_field"])[:-1], rule["last"]]
            continue
        if "override" in rule:                  # Gemma 4: per_layer_config from global_head_dim on its full layers
            value = view.int(rule["source_field"], rule["source_default"], minimum=2, maximum=1 << 16)
            types = data.get("layer_types") or []
            data[rule["field"]] = {str(i): {rule["override"]: value} for i, t in enumerate(types)
                                   if t == rule["layer_type"]}
            continue
        if rule.get("from_field"):
            source = view.list(rule["from_field"], layers, lambda n, v: v, counted_by=spec["layers_field"])
            data[rule["field"]] = [rule["then"] if v else rule["else"] for v in source]
            continue
        period = rule["period"]
        if rule.get("period_field"):
            period = view.int(rule["period_field"], period, minimum=1, maximum=MAX_LAYERS)
        below = view.int(rule["below_field"], layers, minimum=0, maximum=MAX_LAYERS) if rule.get("below_field") \
            else layers                         # Qwen2-MoE: the pattern only below max_window_layers
        data[rule["field"]] = [rule["then"] if (i + rule["phase"]) % period and i < below else rule["else"]
                               for i in range(layers)]
    return ConfigView(data, cfg.prefix)
