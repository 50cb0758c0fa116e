"""The zoo's settings searched: each family's position fields varied away from its defaults, each case read and observed.

``relviz.zoo`` reads every text family at its default config. A published checkpoint rarely sits there: it sets
another RoPE rule, a partial rotary, a wider head, windows, a different context, or leaves out fields its config
class derives. ``cases(model_type)`` makes those configs from the family's tiny default (``relviz.zoo.tiny_config``),
one field varied per case (``VARIATIONS``: each a rule applied to the config's data, the same for every family: a
case exists only where the family's config holds the field it varies, or where leaving a field out or adding one
means something); ``classify`` runs relviz's reading (``read_plan``, what a user sees without the observer) and
the observer (``verified_plan``; where the reading refuses, ``transformers_refusal``: whether transformers builds
and runs it at all, the one thing left to decide) on it, and ends the case as one of:

- ``exact``: the observer built it with transformers and every layer agreed;
- ``refused``: relviz refused it with a reason (its reading, or the observer's finding);
- ``transformers``: transformers itself refuses the config or cannot build or run it (nothing to hold relviz to);
- ``silent``: relviz read the config without a refusal, and the observer found that what transformers ran differs:
  the confident wrong answer this search exists to find. Its count must be 0.

``search(families, seed=..., per_field=...)`` samples the cases (all of them with ``per_field=None``).
"""
from __future__ import annotations

import copy
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz.model_plan import read_plan
from relviz.observe import REFUSED_BY_TRANSFORMERS, transformers_refusal, verified_plan
from relviz.zoo import tiny_config

__all__ = ["SettingCase", "Result", "VARIATIONS", "FIELDS", "cases", "classify", "search", "counts", "EXACT", "REFUSED",
           "TRANSFORMERS", "SILENT"]

EXACT, REFUSED, TRANSFORMERS, SILENT = "exact", "refused", "transformers", "silent"

#: ... that the plan differs from what transformers ran
_DIFFERS = "differs from what transformers"

Config = dict[str, Any]


@dataclass(frozen=True)
class SettingCase:
    model_type: str
    field: str            # the field varied (VARIATIONS' key)
    value: str            # the value, in words
    config: Config        # the whole config.json (its text side varied)


@dataclass(frozen=True)
class Result:
    case: SettingCase
    outcome: str          # EXACT, REFUSED, TRANSFORMERS or SILENT
    reason: str           # the refusal, or for SILENT what the observer found
    seconds: float


def _text(config: Config) -> Config:
    """The side the position fields sit in: the nested text_config of a composite (its own model_type), else the
    config itself."""
    text = config.get("text_config")
    return text if isinstance(text, dict) and isinstance(text.get("model_type"), str) else config


def _rope_dicts(side: Config) -> list[Config]:
    """The rope parameter dicts a config holds: rope_parameters itself, or one per layer type where it is nested."""
    params = side.get("rope_parameters")
    if not isinstance(params, dict):
        return []
    nested = [v for v in params.values() if isinstance(v, dict)]
    return nested if nested else [params]


def _head_dim(side: Config) -> int | None:
    value = side.get("head_dim")
    if isinstance(value, int) and value > 0:
        return value
    width, heads = side.get("hidden_size"), side.get("num_attention_heads")
    return width // heads if isinstance(width, int) and isinstance(heads, int) and heads and width % heads == 0 \
        else None


def _rotary_pairs(side: Config, params: Config) -> int | None:
    head = _head_dim(side)
    if head is None:
        return None
    factor = params.get("partial_rotary_factor", side.get("partial_rotary_factor", 1.0))
    dim = side.get("rotary_dim") if isinstance(side.get("rotary_dim"), int) else int(head * float(factor or 1.0))
    return dim // 2


def _set_rope(rule: Callable[[Config, Config], Config | None]) -> Callable[[Config], bool]:
    """A variation of every rope dict of the config (per layer type too): ``rule(side, params)`` gives the new
    dict (None: not applicable)."""
    def apply(side: Config) -> bool:
        found = _rope_dicts(side)
        changed = False
        for params in found:
            new = rule(side, params)
            if new is not None and new != params:
                params.clear()
                params.update(new)
                changed = True
        return changed
    return apply


def _original(side: Config, params: Config | None = None) -> int:
    """The original context a scaled rule names: a quarter of the context, at most 16 (the probe's 20 positions
    then run past it, where dynamic rules change θ)."""
    positions = side.get("max_position_embeddings")
    return min(16, positions // 4) if isinstance(positions, int) and positions >= 8 else 16


def _scaled(rope_type: str, **fields: Any) -> Callable[[Config, Config], Config]:
    def rule(side: Config, params: Config) -> Config:
        extra = {k: (v(side, params) if callable(v) else v) for k, v in fields.items()}
        return {**{k: v for k, v in params.items() if k in ("rope_theta", "partial_rotary_factor", "mrope_section",
                                                             "mrope_interleaved")},
                "rope_type": rope_type, **extra}
    return rule


def _longrope(side: Config, params: Config) -> Config | None:
    pairs = _rotary_pairs(side, params)
    if not pairs:
        return None
    return _scaled("longrope", factor=4.0, original_max_position_embeddings=_original,
                   short_factor=[1.0 + 0.1 * i for i in range(pairs)],
                   long_factor=[1.0 + 0.5 * i for i in range(pairs)])(side, params)


def _set(field: str, value: Callable[[Config], Any]) -> Callable[[Config], bool]:
    """Set a field the config holds already (its family reads it) to another value."""
    def apply(side: Config) -> bool:
        if field not in side:
            return False
        new = value(side)
        if new is None or new == side[field]:
            return False
        side[field] = new
        return True
    return apply


def _drop(*fields: str) -> Callable[[Config], bool]:
    """Leave fields out, as a config.json may, so the config class derives them."""
    def apply(side: Config) -> bool:
        present = [f for f in fields if f in side]
        for f in present:
            del side[f]
        return bool(present)
    return apply


def _older_name(side: Config) -> bool:
    """rope_parameters written under its older name rope_scaling (configs saved before transformers 5)."""
    if not isinstance(side.get("rope_parameters"), dict) or side.get("rope_scaling") is not None:
        return False
    side["rope_scaling"] = side.pop("rope_parameters")
    return True


def _alternate(side: Config) -> bool:
    """layer_types of two kinds alternating (the first two kinds the family's own list or its windows name)."""
    types = side.get("layer_types")
    if not isinstance(types, list) or not types:
        return False
    kinds = list(dict.fromkeys(types))
    if len(kinds) < 2:
        if kinds != ["full_attention"] and kinds != ["sliding_attention"]:
            return False
        kinds = ["sliding_attention", "full_attention"]
        if side.get("sliding_window") is None and "sliding_window" in side:
            side["sliding_window"] = 4096
    side["layer_types"] = [kinds[i % 2] for i in range(len(types))]
    return side["layer_types"] != types


def _added_types(side: Config) -> bool:
    """layer_types written into a config whose family holds none, sliding and full alternating, with a window
    (a config.json may carry fields its class does not define: transformers keeps them as attributes, and a family
    whose modeling never reads them windows every layer, or none)."""
    layers = side.get("num_hidden_layers")
    if any(f in side for f in ("layer_types", "layers_block_type")) or not isinstance(layers, int) or layers < 2:
        return False
    window = [f for f in ("sliding_window", "attention_window_size", "sliding_window_size") if f in side]
    if not window:
        return False
    for f in window:
        side[f] = side[f] if isinstance(side[f], int) and side[f] > 0 else 4096
    if side.get("use_sliding_window") is False:
        side["use_sliding_window"] = True
    side["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    return True


def _window(side: Config) -> bool:
    """A sliding window set where the family's config holds the field (null or another value)."""
    changed = False
    for field in ("sliding_window", "attention_window_size", "sliding_window_size"):
        if field in side:
            side[field] = 1024 if side[field] == 4096 else 4096
            changed = True
    if "use_sliding_window" in side and not side["use_sliding_window"]:
        side["use_sliding_window"] = True
        changed = True
    return changed


def _added_window(side: Config) -> bool:
    """sliding_window 4096 written into a config whose family holds no window field (a Mistral checkpoint converted
    to ``llama`` keeps its window in config.json; transformers keeps the field, and its Llama never reads it)."""
    if any(f in side for f in ("sliding_window", "attention_window_size", "sliding_window_size", "window_size",
                               "local_attention")) or not isinstance(side.get("num_hidden_layers"), int):
        return False
    side["sliding_window"] = 4096
    return True


def _window_derived(side: Config) -> bool:
    """The window set (``_window``) with layer_types left out, so the config class derives the sliding layers from
    the window fields (Qwen2's max_window_layers, Qwen2-MoE's every other layer below it)."""
    return "layer_types" in side and _window(side) and _drop("layer_types")(side)


def _wider_head(side: Config) -> int | None:
    head = _head_dim(side)
    return None if head is None else 2 * head


def _partial(side: Config) -> bool:
    """partial_rotary_factor 0.5 (0.25 where it is 0.5), in the config's rope dicts or at its top level where it
    sits there."""
    changed = False
    for params in _rope_dicts(side):
        if "partial_rotary_factor" in params or "partial_rotary_factor" not in side:
            params["partial_rotary_factor"] = 0.25 if params.get("partial_rotary_factor") == 0.5 else 0.5
            changed = True
    if "partial_rotary_factor" in side:
        side["partial_rotary_factor"] = 0.25 if side["partial_rotary_factor"] == 0.5 else 0.5
        changed = True
    return changed


def _scale_fields(side: Config) -> bool:
    """Every attention scaling field the config holds (a name with 'scal' or 'multiplier' in it, a number or a flag)
    moved: numbers halved, flags flipped."""
    changed = False
    for k, v in list(side.items()):
        if not any(w in k for w in ("scal", "multiplier", "temperature")) or k.startswith("rope"):
            continue
        if isinstance(v, bool):
            side[k] = not v
        elif isinstance(v, (int, float)) and v:
            side[k] = type(v)(v / 2) if isinstance(v, float) else max(1, v // 2)
        else:
            continue
        changed = changed or side[k] != v
    return changed


#: field -> [(value in words, the change to the text side: True where it applies)]
VARIATIONS: dict[str, list[tuple[str, Callable[[Config], bool]]]] = {
    "rope_type": [
        ("linear ×2", _set_rope(_scaled("linear", factor=2.0))),
        ("dynamic ×2", _set_rope(_scaled("dynamic", factor=2.0))),
        ("dynamic ×2, original 16", _set_rope(_scaled("dynamic", factor=2.0, original_max_position_embeddings=16))),
        ("yarn ×4", _set_rope(_scaled("yarn", factor=4.0, original_max_position_embeddings=_original))),
        ("yarn ×4 mscale 0.707 mscale_all_dim 1", _set_rope(_scaled(
            "yarn", factor=4.0, original_max_position_embeddings=_original, mscale=0.707, mscale_all_dim=1.0))),
        ("yarn ×4 attention_factor 0.8 β 16/2 untruncated", _set_rope(_scaled(
            "yarn", factor=4.0, original_max_position_embeddings=_original, attention_factor=0.8, beta_fast=16.0,
            beta_slow=2.0, truncate=False))),
        ("longrope", _set_rope(_longrope)),
        ("llama3 ×8 low 1 high 4", _set_rope(_scaled("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                     original_max_position_embeddings=_original))),
    ],
    "rope_theta": [("12345", _set_rope(lambda side, p: {**p, "rope_theta": 12345.0} if "rope_theta" in p else None))],
    "rope_parameters": [("left out", _drop("rope_parameters", "rope_scaling", "rope_theta")),
                        ("as rope_scaling", _older_name)],
    "partial_rotary_factor": [("0.5 (0.25 where it was 0.5)", _partial)],
    "rotary_dim": [("half", _set("rotary_dim", lambda s: s["rotary_dim"] // 2 if isinstance(s["rotary_dim"], int)
                                 and s["rotary_dim"] >= 4 else None))],
    "head_dim": [("2 × hidden/heads", _set("head_dim", _wider_head)), ("left out", _drop("head_dim"))],
    "sliding_window": [("4096", _window), ("4096, layer_types left out", _window_derived),
                       ("4096, where the family holds none", _added_window)],
    "layer_types": [("alternating", _alternate), ("left out", _drop("layer_types")),
                    ("alternating, where the family holds none", _added_types)],
    "max_position_embeddings": [("16 (below the probe's 20)", _set("max_position_embeddings", lambda s: 16)),
                                ("100000", _set("max_position_embeddings", lambda s: 100000))],
    "attention scaling": [("halved / flipped", _scale_fields)],
}
FIELDS = tuple(VARIATIONS)


def cases(model_type: str, fields: Iterable[str] = FIELDS) -> list[SettingCase]:
    """Every applicable variation of the family's tiny default config, one field per case."""
    base = tiny_config(model_type)
    out = []
    for field in fields:
        for value, change in VARIATIONS[field]:
            config = copy.deepcopy(base)
            if change(_text(config)):
                out.append(SettingCase(model_type, field, value, config))
    return out


def classify(case: SettingCase) -> Result:
    """The case read by relviz, then held against what transformers runs.

    On one torch thread (restored after): every tensor here is tiny, and a second thread's hand-off costs more than
    the op on a loaded machine (a cos of 12 × 64 floats: 0.03 ms on one thread, 3 ms on two at load 4), which kept
    the sweep over every family from finishing in 1,300 s."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _classify(case)
    finally:
        torch.set_num_threads(threads)


def _classify(case: SettingCase) -> Result:
    start = time.perf_counter()
    try:
        read_plan(case.config)
        read = ""
    except ValueError as exc:
        read = str(exc)
    if read:      # refused either way: what transformers runs decides only whether it runs at all
        outcome = TRANSFORMERS if transformers_refusal(case.config, causal_lm=True) else REFUSED
        return Result(case, outcome, read, time.perf_counter() - start)
    try:
        verified_plan(case.config, causal_lm=True)
    except ValueError as exc:
        message = str(exc)
        if any(words in message for words in REFUSED_BY_TRANSFORMERS):
            outcome = TRANSFORMERS
        elif _DIFFERS in message:
            outcome = SILENT
        else:
            outcome = REFUSED
        return Result(case, outcome, message, time.perf_counter() - start)
    return Result(case, EXACT, "", time.perf_counter() - start)


def search(families: Iterable[str], *, seed: int = 0, per_field: int | None = None,
           fields: Iterable[str] = FIELDS, progress: Callable[[str, list[Result]], None] | None = None,
           workers: int = 1) -> list[Result]:
    """The cases of ``families``, at most ``per_field`` per field varied (drawn with ``seed``; None: all);
    ``progress(model_type, its results)`` after each family's cases; ``workers`` processes classify them (each case
    on one torch thread: a second process, not a second thread, is what a second core is good for here)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a whole number ≥ 1; got {workers!r}")
    fields = tuple(fields)
    families = list(dict.fromkeys(families))
    pool: dict[str, list[SettingCase]] = {f: [] for f in fields}
    for model_type in families:
        try:
            found = cases(model_type, fields)
        except Exception:  # noqa: BLE001 - transformers cannot build the family's default: relviz.zoo says so
            continue
        for case in found:
            pool[case.field].append(case)
    rng = random.Random(seed)
    chosen = [c for f in fields for c in (pool[f] if per_field is None or len(pool[f]) <= per_field
                                          else rng.sample(pool[f], per_field))]
    groups = [g for g in ([c for c in chosen if c.model_type == t] for t in families) if g]  # family by family,
    out: list[Result] = []                                                                   # its fields in order
    for done in _classified(groups, workers):
        out.extend(done)
        if progress is not None:
            progress(done[0].case.model_type, done)
    return out


def _classify_all(group: list[SettingCase]) -> list[Result]:
    return [classify(c) for c in group]


def _classified(groups: list[list[SettingCase]], workers: int) -> Iterator[list[Result]]:
    """Each family's results, in order: here, or over ``workers`` fresh processes (a family's cases in one, so the
    observer's caches serve it as they would here; every case seeds its own model, so where it runs changes
    nothing of its result)."""
    if workers <= 1 or len(groups) <= 1:
        yield from map(_classify_all, groups)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(min(workers, len(groups)), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(_classify_all, groups)


def counts(results: Iterable[Result]) -> dict[str, Counter]:
    """field varied -> Counter of outcomes."""
    out: dict[str, Counter] = {}
    for r in results:
        out.setdefault(r.case.field, Counter())[r.outcome] += 1
    return out
