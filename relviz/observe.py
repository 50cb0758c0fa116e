"""Observe what transformers itself runs on every layer of a model, and hold relviz's plan against it.

``observe(config)`` shrinks a config (same model_type, layer types, RoPE parameters, layer count and head
dim; two heads, tiny MLPs and vocabulary; windows and chunks cut to a few positions so that a short probe
shows them), builds the model with transformers from that config alone (random weights: nothing is
loaded, nothing from a checkpoint runs, ``trust_remote_code`` is never set), and runs one eager forward on
the CPU at each of two probe lengths with recorders around the modeling module's own functions:

- each layer's ``eager_attention_forward``: whether softmax attention runs there at all, the mask it
  gets, its softmax scale, its sinks;
- its ``apply_rotary*`` functions: the rotation's input and output, and, by probing the same function
  with one unit vector per dim, which dims rotate and which dim each is paired with;
- each layer's module classes: what mixes tokens where no attention runs (``mixer.kind_of_module``).

``verified_plan(config)`` reads the plan of the shrunk config, compares it layer by layer with the
observation (``relviz.observe_differences``: rotation ``torch.equal`` on the recorded call, the same pairs and dims, which
layers rotate, mixer, mask at both lengths, sinks, scale), and returns the real config's plan with every
layer marked observed; any difference refuses the model naming the layer and what differs, so no reading
is ever claimed that transformers did not confirm. Results are cached per config.
"""
from __future__ import annotations

import copy
import functools
import json
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from relviz.mechanisms.families import FAMILIES, family_of
from relviz.mechanisms.indexer import IndexedSelection
from relviz.mechanisms.mixer import ATTENTION, TokenMixer, kind_of_module
from relviz.model_plan import OBSERVED, UNVERIFIED, LayerPlan, ModelPlan, read_plan
from relviz.observe_differences import differences
from relviz.observe_input import InputPosition, input_position
from relviz.observe_position import LONG_PROBE, LayerProbe, attends_at, derive_entry, probe_layers
from relviz.observe_build import build, has_causal_lm, runs, transformers_module
from relviz.observe_record import INDEXER_SCOPE, PRE_SCALE as _PRE_SCALE, Recorder as _Recorder, \
    allowed as _allowed, biased as _biased, \
    inputs as _inputs, layer_list as _layers, partners as _partners, rotation_input as _rotation_input
from relviz.observe_shrink import SMALL_CHUNK, SMALL_WINDOW, fills, shrink

__all__ = ["Observation", "LayerObservation", "observe", "shrink", "verified_plan", "transformers_refusal",
           "REFUSED_BY_TRANSFORMERS",
           "PROBE_LENGTHS", "SMALL_WINDOW", "SMALL_CHUNK"]

PROBE_LENGTHS = (12, 20)
#: and at most this many layers (a time cap: each layer is built and run twice)
MAX_OBSERVED_LAYERS = 256


@dataclass
class LayerObservation:
    """What transformers did on one layer at the probe lengths."""

    index: int
    attends: bool = False
    kinds: tuple[str, ...] = ()                       # the mixer kinds seen (module classes), attention first
    modules: tuple[str, ...] = ()                     # the layer's module classes that decided ``kinds``
    masks: dict[int, torch.Tensor] = field(default_factory=dict)    # probe length -> bool [L, L] allowed
    scaling: float | None = None
    head_dim: int | None = None                       # the q width its eager attention got
    sinks: bool = False
    rotations: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (in, out) [B, H, L, d]
    pairs: list[int] | None = None                    # dim -> its partner (itself when it does not rotate)
    indexer_rotations: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # a DSA indexer's own
    indexer_pairs: list[int] | None = None            # ... and its pairs (relviz.mechanisms.indexer)
    inv_freq: torch.Tensor | None = None              # the layer's rotary module's buffer
    softmax_masks: dict[int, torch.Tensor] = field(default_factory=dict)  # length -> bool [L, L], any softmax
    at_softmax: bool = False                          # attention seen at its softmax only (no eager call)
    softmax_bias: bool = False                        # ... where it adds something besides q·k (q = k = 0 probe)
    bias: bool = False                                # the mask it gets adds a finite bias where it allows
    fill: float | None = None                         # a finite value its softmax's masked scores hold (−1e4)
    handed_scores: str = ""                           # an argument besides the mask shaped [..., L, L] (Inkling's
                                                      # position_bias), named
    probe: LayerProbe = field(default_factory=LayerProbe)   # relviz.observe_position.probe_layers
    ran: bool = True                                  # its forward ran on the probe's token ids


@dataclass
class Observation:
    model_type: str
    layers: list[LayerObservation]
    seconds: float
    transformers_version: str
    inputs: InputPosition | None = None               # what the embedding stage adds per position
    attribute_map: dict[str, str] = field(default_factory=dict)  # the config class's aliases (n_layer, d_model)


def observe(config: Mapping[str, Any], *, causal_lm: bool = False, probes: bool = True) -> Observation:
    """What transformers runs per layer for ``config`` (a parsed config.json, already small: see ``shrink``).

    ``probes=False``: the model built and run at the probe lengths only (its recorded calls read as always), without
    the probes that replace a layer's input or read the embedding stage: enough to say whether transformers builds
    and runs it (``transformers_refusal``), never enough to verify a plan.

    One observation at a time, on one torch thread (restored after): the tiny model's matrices gain nothing
    from a second thread, and on a loaded machine two threads cost 4-6× (llama 5.3 s vs 1.3 s at load 14)."""
    with _ONE_AT_A_TIME:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return _observe(json.dumps(config, sort_keys=True), causal_lm, probes)
        finally:
            torch.set_num_threads(threads)


_ONE_AT_A_TIME = threading.Lock()


@functools.lru_cache(maxsize=64)
def _observe(key: str, causal_lm: bool = False, probes: bool = True) -> Observation:
    start = time.perf_counter()
    config = json.loads(key)
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and layers > MAX_OBSERVED_LAYERS:
        raise ValueError(f"config field num_hidden_layers is {layers}: the observer builds at most "
                         f"{MAX_OBSERVED_LAYERS} layers (published models have fewer)")
    # an encoder-decoder read as its causal LM is built as that alone (decided on the meta device: a base model
    # built only to be thrown away cost Marian's 100,000-row sinusoidal table twice more)
    hf_config, model, version = build(config, causal_if_encoder_decoder=causal_lm)
    if not causal_lm and has_causal_lm(hf_config, model) and not runs(model, PROBE_LENGTHS[0]):   # Whisper's wants
        hf_config, model, version = build(config, causal=True)                                    # audio: the decoder
    text = getattr(hf_config, "get_text_config", lambda: hf_config)()
    count = getattr(text, "num_hidden_layers", None)
    if not isinstance(count, int):
        raise ValueError(f"{config['model_type']!r}: its config class names no num_hidden_layers to observe")
    layers = _layers(model, count)
    # a family outside the table is also run long, on a copy no forward has touched yet (BigBird switches itself
    # to full attention for good on its first short input)
    pristine = copy.deepcopy(model) if probes and not family_of(str(config["model_type"]), config)[0] else None
    modeling = sys.modules[type(model).__module__]
    seen = [LayerObservation(k) for k in range(count)]
    for k, layer in enumerate(layers):
        classes = [type(m).__name__ for m in layer.modules()]
        seen[k].modules = tuple(c for c in classes if kind_of_module(c))
        seen[k].kinds = tuple(dict.fromkeys(kind_of_module(c) for c in seen[k].modules))
    for length in PROBE_LENGTHS:
        recorder = _recorded_forward(modeling, model, layers, length,
                                     f"transformers could not run a {config['model_type']!r} model built from this "
                                     "config", 300)
        for k, here in enumerate(seen):
            here.ran = here.ran and k in recorder.ran
        for layer, name, args, kwargs, out in recorder.calls:
            if layer < 0:
                continue
            here = seen[layer]
            if name == "softmax":
                if length not in here.softmax_masks:               # the layer's first softmax over its positions
                    here.softmax_masks[length] = args[0]
                    here.fill = kwargs.get("fill") if length == PROBE_LENGTHS[0] else here.fill
            elif name == "eager_attention_forward":
                module = args[0]
                here.attends = True
                mask = kwargs.get("attention_mask", args[4] if len(args) > 4 else None)
                here.masks[length] = _allowed(mask, length)
                here.bias = here.bias or _biased(mask, length)
                here.scaling = kwargs.get("scaling", args[5] if len(args) > 5 else None)
                query = args[1] if len(args) > 1 else kwargs.get("query")
                here.head_dim = int(query.shape[-1]) if isinstance(query, torch.Tensor) else None
                if isinstance(here.scaling, (int, float)) and kwargs.get(_PRE_SCALE) is not None:
                    here.scaling = here.scaling * kwargs[_PRE_SCALE]      # q scaled first (OPT, Whisper)
                here.sinks = getattr(module, "sinks", None) is not None or kwargs.get("s_aux") is not None
                here.handed_scores = here.handed_scores or next(
                    (k for k, v in kwargs.items() if k != "attention_mask" and isinstance(v, torch.Tensor)
                     and v.is_floating_point() and v.ndim >= 2 and v.shape[-2:] == (length, length)), "")
            elif length == PROBE_LENGTHS[0]:
                scoped, name = name.startswith(INDEXER_SCOPE), name.removeprefix(INDEXER_SCOPE)
                at = _rotation_input(args, out)
                x_in, x_out = args[at], out[0] if isinstance(out, tuple) else out
                axis = next((a for a in range(x_in.ndim - 1) if x_in.shape[a] == length), None)
                if axis is None and scoped:      # not one entry per position (DeepSeek-V4's pooled keys): its layer
                    here.indexer_rotations.append((x_in, x_out))      # cannot be read as a DSA indexer's
                    continue
                if axis is None:
                    raise ValueError(f"the observer could not read a rotation {config['model_type']!r} ran: {name}'s "
                                     f"input {tuple(x_in.shape)} has no axis of the probe's {length} positions")
                rotations = here.indexer_rotations if scoped else here.rotations
                if not rotations:
                    pairs = _partners(dict(recorder.restore)[name], args, kwargs, x_in, axis, at)
                    here.indexer_pairs, here.pairs = (pairs, here.pairs) if scoped else (here.indexer_pairs, pairs)
                rotations.append((x_in.movedim(axis, -2).detach().clone(), x_out.movedim(axis, -2).detach().clone()))
    named = dict(model.named_modules())
    # a list of rotary modules, one per θ, each layer handed one's angles (Granite SWA's rotary_embs): which one a
    # layer ran is not the model's rotary_emb (built at the global θ and unused there); the recorded rotation, held
    # torch.equal against relviz's, is the check then
    rotary = None if any(n.split(".")[-2:-1] == ["rotary_embs"] for n in named) else \
        next((m for n, m in named.items() if n.endswith("rotary_emb")), None)
    for here, layer_type in zip(seen, getattr(text, "layer_types", None) or [None] * count):
        held = getattr(rotary, f"{layer_type}_inv_freq", None) if rotary is not None and layer_type else None
        here.inv_freq = held if held is not None else getattr(rotary, "inv_freq", None)
        if not here.attends and set(here.softmax_masks) == set(PROBE_LENGTHS):
            here.attends, here.masks, here.at_softmax = True, dict(here.softmax_masks), True
        if here.attends:
            here.kinds = (ATTENTION, *here.kinds)
    if any(here.at_softmax for here in seen):
        _softmax_bias(model, modeling, seen, config["model_type"])
    if not probes:
        return Observation(config["model_type"], seen, time.perf_counter() - start, version,
                           InputPosition(None, "not probed (the observer was asked whether transformers runs it only)"),
                           dict(getattr(text, "attribute_map", {}) or {}))
    def run(ids: torch.Tensor) -> Any:
        return model(**_inputs(model, ids.shape[-1], ids), use_cache=False)
    try:
        for here, probe in zip(seen, probe_layers(layers, PROBE_LENGTHS[0], run,
                                                  lambda: _Recorder(modeling, model, layers))):
            here.probe = probe                       # (a probe the model does not take leaves each probe None)
    except Exception:  # noqa: BLE001 - then differences() names every layer it could not check
        pass
    try:
        inputs = input_position(model, layers, PROBE_LENGTHS[0], run)
    except ValueError as exc:
        inputs = InputPosition(None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a probe transformers' code does not take: said, never guessed
        inputs = InputPosition(None, f"the probe failed: {type(exc).__name__}: {str(exc)[:200]}")
    if pristine is not None and any(o.attends for o in seen):
        rows = inputs.rows - getattr(inputs.found, "offset", 0) if inputs.rows else LONG_PROBE
        fresh = _layers(pristine, count)
        try:                                             # outside the table: does attention change with length?
            long = attends_at(fresh, min(LONG_PROBE, rows), lambda ids: pristine(**_inputs(pristine, ids.shape[-1], ids),
                                                                                 use_cache=False),
                              lambda: _Recorder(modeling, pristine, fresh))
        except Exception:  # noqa: BLE001 - unseen: differences() names it
            long = None
        for k, here in enumerate(seen):
            here.probe.long_checked, here.probe.long_failed = long is not None, long is None
            here.probe.long_mask = None if long is None else long[k]
    return Observation(config["model_type"], seen, time.perf_counter() - start, version, inputs,
                       dict(getattr(text, "attribute_map", {}) or {}))


def _recorded_forward(modeling: Any, model: torch.nn.Module, layers: list, length: int, failure: str,
                      quoted: int) -> _Recorder:
    """One eager forward of ``length`` tokens under the recorders, which come back closed with the calls they kept
    (and the functions they wrapped); or a ValueError that starts with ``failure`` and quotes transformers' own
    error (its first ``quoted`` characters)."""
    recorder = _Recorder(modeling, model, layers)
    try:
        with torch.no_grad():
            model(**_inputs(model, length), use_cache=False)
    except Exception as exc:  # noqa: BLE001 - any failure inside transformers is quoted, never hidden
        raise ValueError(f"{failure}: {type(exc).__name__}: {str(exc)[:quoted]}") from exc
    finally:
        recorder.close()
    return recorder


def _softmax_bias(model: torch.nn.Module, modeling: Any, seen: list[LayerObservation], model_type: str) -> None:
    """Whether anything is added to the scores besides q·k and the mask, where attention is seen at its softmax
    only: one more forward with every projection zeroed (each parameter but the embeddings' tables and the norms'
    scales), so q = k = 0 and the scores a softmax gets are the mask plus whatever position bias the layer adds."""
    zeroed = copy.deepcopy(model)
    tables = {id(p) for m in zeroed.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    with torch.no_grad():
        for name, p in zeroed.named_parameters():
            if id(p) not in tables and not (p.ndim == 1 and name.endswith("weight")):
                p.zero_()
    length = PROBE_LENGTHS[0]
    layers = _layers(zeroed, len(seen))
    recorder = _recorded_forward(modeling, zeroed, layers, length,
                                 f"transformers could not run a {model_type!r} model with its projections zeroed "
                                 "(the observer's check for a position bias)", 200)
    for layer, name, args, _, _ in recorder.calls:
        if name == "softmax" and layer >= 0 and seen[layer].at_softmax:
            allowed, scores = args                                                 # [L, L], [H, L, L]
            seen[layer].softmax_bias = seen[layer].softmax_bias or bool((scores[:, allowed] != 0).any())


def verified_plan(config: Mapping[str, Any], *, source: str = "config", causal_lm: bool = False) -> ModelPlan:
    """The plan of ``config``, every layer checked against what transformers runs (a ValueError otherwise).

    ``causal_lm``: an encoder-decoder family is built as the causal LM transformers maps it to, its decoder alone
    (BartForCausalLM), as the zoo sweep reads each family; by default its base model, both stacks.

    Cached per config: a second read is a copy of the first (callers may set its directory)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json); got {type(config).__name__}")
    try:
        key = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config must be plain JSON data: {exc}") from exc
    types = [config.get("model_type"), (config.get("text_config") or {}).get("model_type")
             if isinstance(config.get("text_config"), Mapping) else None]
    table = json.dumps([FAMILIES.get(t) for t in types if isinstance(t, str)], sort_keys=True, default=repr)
    return copy.deepcopy(_verified(key, source, table, causal_lm))


def transformers_refusal(config: Mapping[str, Any], *, causal_lm: bool = False) -> str:
    """The observer's refusal of ``config`` where transformers itself does not take it (its config class refuses
    it, or it cannot build or run the shrunk model: ``REFUSED_BY_TRANSFORMERS``), else "".

    The same steps as ``verified_plan`` up to the recorded forwards at the probe lengths, without the probes that
    verify a plan: for a config relviz refuses to read, where what transformers would run decides nothing but
    whether transformers runs it at all (relviz.zoo_search)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json); got {type(config).__name__}")
    text = config.get("text_config")
    side = text if isinstance(text, Mapping) and isinstance(text.get("model_type"), str) else config
    try:
        json.dumps(config, sort_keys=True)
        _observe_shrunk(side, _accepted(side), causal_lm, probes=False)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        return message if any(words in message for words in REFUSED_BY_TRANSFORMERS) else ""
    return ""


#: words of the observer's refusal that mean transformers itself did not take the config (its config class refuses
#: it, it cannot build or run the shrunk model); its own size cap ("could not build a small model") is relviz's
REFUSED_BY_TRANSFORMERS = ("could not build a '", "could not run a '", "could not build its default",
                        "its config class refuses")


def _accepted(config: Mapping[str, Any]) -> list[str]:
    """The fields the config leaves null and its transformers config class leaves null too (Ministral's head_dim:
    its model then fails to build), which the shrunk config must keep null: shrinking fills a null with what a class
    would derive. First the class must take the config as given (Ministral 3's refuses head_dim: null); a refusal is
    quoted."""
    transformers = transformers_module()
    fields = {k: v for k, v in config.items() if k != "model_type"}
    try:
        built = transformers.AutoConfig.for_model(str(config.get("model_type")), **fields)
    except Exception as exc:  # noqa: BLE001 - transformers' own refusal, quoted
        raise ValueError(f"transformers {transformers.__version__} could not build a {config.get('model_type')!r} "
                         f"model: its config class refuses this config: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return [k for k, v in fields.items() if v is None and _still_null(built, k)]


def _still_null(config: Any, key: str) -> bool:
    try:
        return getattr(config, key, None) is None
    except Exception:  # noqa: BLE001 - a per-layer attribute transformers will not read globally: set per layer
        return False


@functools.lru_cache(maxsize=64)
def _verified(key: str, source: str, table: str, causal_lm: bool = False) -> ModelPlan:
    """(``table``: the family table's entries the config reads, so an edited entry is verified afresh.)"""
    config = json.loads(key)
    text = config.get("text_config")
    side = text if isinstance(text, Mapping) and isinstance(text.get("model_type"), str) else config
    small, seen = _observe_shrunk(side, _accepted(side), causal_lm)  # a vision-language model: its text model alone
    entry = None
    if not family_of(str(side.get("model_type")), dict(side))[0]:
        try:                                              # outside the table, no RoPE: read what transformers ran
            entry = derive_entry(small, seen)
        except ValueError as exc:
            raise ValueError(f"transformers runs this {config.get('model_type')!r} model; it is not in relviz's "
                             f"family table and has no RoPE settings, and what ran is not one relviz can say "
                             f"exactly: {exc}") from exc
        config = side
    try:
        plan_small = read_plan(small, source=source, family=entry)
    except ValueError as exc:
        raise ValueError(f"transformers runs this {config.get('model_type')!r} model, but relviz cannot read it: "
                         f"{exc}") from exc
    found = differences(plan_small, seen)
    if found:
        raise ValueError(f"relviz's reading of this {config.get('model_type')!r} model differs from what "
                         f"transformers {seen.transformers_version} runs, so it is refused: " + "; ".join(found[:4]))
    plan = read_plan(config, source=source, family=entry)
    observed = plan.stack_names[0]                       # the stack differences() held against what ran
    plan.plans[observed] = [_observed(p, o) for p, o in zip(plan.plans[observed], seen.layers)]
    others = [stack for stack in plan.stack_names[1:]]
    plan.notes = [n for n in plan.notes if UNVERIFIED not in n or others]
    for stack in others:
        plan.notes.insert(0, f"the {stack} stack was not observed (the observer ran the {observed} stack's "
                             f"layers only): its layers are {plan.plans[stack][0].read_from}")
    if any(o.at_softmax for o in seen.layers):
        plan.notes.insert(0, "this family's attention does not go through transformers' eager_attention_forward: "
                             "the observer saw it at its softmax (which keys each query sees, and the rotation of "
                             "q and k), so the softmax scale was not observed")
    where = "" if plan.in_family_table else f"model_type {plan.model_type!r} is not in relviz's family table: "
    if entry is not None:
        where += "its entry was derived from what transformers ran; "
    plan.notes.insert(0, f"{where}observed: transformers {seen.transformers_version} built this model (tiny widths, "
                         f"the same layers) and ran it; every layer's reading equals what it ran")
    probed = [s for p in plan_small.plans[observed] if (s := p.find(IndexedSelection)) is not None]
    if probed:
        plan.notes.insert(1, probed[0].observed_words())
    return plan


#: heads a shrunk model gets, tried in turn where transformers cannot build or run the first (CodeGen splits
#: its heads in four; a group count must divide them)
HEADS_TRIED = (2, 4)


def _observe_shrunk(config: Mapping[str, Any], nulls: list[str] = (), causal_lm: bool = False, probes: bool = True
                    ) -> tuple[dict[str, Any], Observation]:
    """The shrunk config and what transformers ran of it: two heads, or four where two cannot build or run
    (``nulls``: fields kept null, see ``_accepted``)."""
    for heads in HEADS_TRIED:
        # an MLP width left null stays filled: its class derives it from the width (GPT-2's, CodeGen's n_inner:
        # 4 × width), and kept null at CodeGen's four heads the model would pass the observer's size cap; so do a
        # count of experts per token (DeepSeek-V2's class leaves it null, and its router cannot run so) and a default
        # choice (X-MOD's language): no position depends on them
        small = {**shrink(config, heads_to=heads), **{k: None for k in nulls if not fills(k)}}
        try:
            return small, observe(small, causal_lm=causal_lm, probes=probes)
        except ValueError as exc:
            if _TOO_LARGE in str(exc):
                return _narrower(config, nulls, causal_lm, heads, exc, probes)
            if heads == HEADS_TRIED[-1] or not any(words in str(exc) for words in _TRANSFORMERS_REFUSED):
                raise
    raise AssertionError("unreachable")


def _narrower(config: Mapping[str, Any], nulls: list[str], causal_lm: bool, heads: int, too_large: ValueError,
              probes: bool = True) -> tuple[dict[str, Any], Observation]:
    """A model still past the size cap with its head width kept (xLSTM's heads are 512 wide): narrower heads, where the
    config names no head dim and nothing rotates (the head width is kept for RoPE alone); else the cap's refusal."""
    small = {**shrink(config, heads_to=heads, narrow=True), **{k: None for k in nulls if not fills(k)}}
    try:
        seen = observe(small, causal_lm=causal_lm, probes=probes)
    except ValueError:
        raise too_large from None
    if any(o.rotations for o in seen.layers):
        raise too_large
    return small, seen


#: transformers' own refusal to build or run the shrunk model (not the observer's size cap)
_TRANSFORMERS_REFUSED = ("could not build a '", "could not run a '")
#: ... the observer's size cap
_TOO_LARGE = "could not build a small model"


def _observed(p: LayerPlan, o: LayerObservation) -> LayerPlan:
    mechanisms = p.mechanisms
    mixer = p.find(TokenMixer)
    if mixer is not None and "recurrent_state" in mixer.kinds and len(o.kinds) == len(mixer.kinds):
        mechanisms = tuple(TokenMixer(o.kinds) if m is mixer else m for m in mechanisms)   # named by what ran
    return LayerPlan(p.stack, p.index, p.layer_type, mechanisms, OBSERVED)
