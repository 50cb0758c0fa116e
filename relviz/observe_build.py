"""Build the model transformers makes of a (shrunk) config, for relviz.observe to run: from the config alone
(random weights: nothing is loaded, nothing from a checkpoint runs, ``trust_remote_code`` is never set), counted
on the meta device first and refused past ``MAX_PARAMETERS``; transformers' own refusal is quoted. The base model
class, or the family's causal LM where the base model cannot run on token ids (Whisper's wants audio features),
where the caller asks (the zoo reads an encoder-decoder as its causal LM) or where transformers maps the config
to no base model (TrOCR).
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import torch

from relviz.observe_record import inputs
from relviz.observe_shrink import CHUNK_FIELDS, SMALL_CHUNK, SMALL_WINDOW, WINDOW_FIELDS, shrink

__all__ = ["build", "runs", "has_causal_lm", "model_class", "transformers_module", "auto", "auto_config",
           "MAX_PARAMETERS", "MAX_BUFFER_BYTES"]

#: a shrunk model larger than this is refused before it is allocated (counted on the meta device)
MAX_PARAMETERS = 60_000_000
#: ... and one whose buffers take more bytes than this (a causal mask buffer of 100,000² positions is 10 GB a layer)
MAX_BUFFER_BYTES = 1 << 30


def build(config: Mapping[str, Any], *, causal: bool = False, causal_if_encoder_decoder: bool = False):
    """(hf_config, model, transformers version) for ``config``: its base model class, or its causal LM where
    ``causal``, or where ``causal_if_encoder_decoder`` and the base model is an encoder-decoder with a causal LM of
    its own (``has_causal_lm``, decided on the meta device, so the base model is never built only to be dropped)."""
    transformers = transformers_module()
    AutoConfig = transformers.AutoConfig
    fields = dict(config)
    model_type = fields.pop("model_type")
    try:
        # widths the config leaves to its class's defaults are tiny too; a window or chunk it leaves to them is
        # cut like one it names (the plan, reading the config alone, then differs and the model is refused)
        default_config = AutoConfig.for_model(model_type)
        defaults = default_config.to_dict()
        derived = _derived_fields(type(default_config), defaults)
        for key, value in shrink({**defaults, "model_type": model_type}).items():
            if key in defaults and key not in fields and key not in derived \
                    and key not in ("model_type", *WINDOW_FIELDS, *CHUNK_FIELDS):
                fields[key] = value
        for key, small in [*((k, SMALL_WINDOW) for k in WINDOW_FIELDS), *((k, SMALL_CHUNK) for k in CHUNK_FIELDS)]:
            if isinstance(defaults.get(key), int) and key not in fields:
                fields[key] = min(defaults[key], small)
        hf_config = AutoConfig.for_model(model_type, **fields)
        hf_config._attn_implementation = "eager"
        counted = _counted(hf_config, causal, model_type)
        if not causal and causal_if_encoder_decoder and has_causal_lm(hf_config, counted):
            causal = True
            _counted(hf_config, causal, model_type)
        torch.manual_seed(0)
        model = model_class(hf_config, causal).from_config(hf_config, attn_implementation="eager").eval()
        _unzeroed(model)
    except _TooLarge as exc:
        raise ValueError(f"transformers could not build a small model to observe: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - transformers' own refusal, quoted
        raise ValueError(f"transformers {transformers.__version__} could not build a {model_type!r} model from "
                         f"this config: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return hf_config, model, transformers.__version__


def _counted(hf_config: Any, causal: bool, model_type: str) -> torch.nn.Module:
    """The model built on the meta device (nothing allocated), refused where it is still too large to observe."""
    with torch.device("meta"):                      # count first: nothing large is ever allocated
        counted = model_class(hf_config, causal).from_config(hf_config, attn_implementation="eager")
    size = sum(p.numel() for p in counted.parameters())
    if size > MAX_PARAMETERS:
        raise _TooLarge(f"{model_type!r} shrunk to tiny widths still has {size / 1e6:.0f}M parameters (more than "
                        f"{MAX_PARAMETERS / 1e6:.0f}M): its width fields are not ones relviz shrinks")
    held = sum(b.numel() * b.element_size() for b in counted.buffers())
    if held > MAX_BUFFER_BYTES:     # GPT-Neo's causal mask buffer is max_position_embeddings² per layer
        raise _TooLarge(f"{model_type!r} shrunk to tiny widths still holds {held / 2**30:.1f} GiB of buffers "
                        f"(more than {MAX_BUFFER_BYTES / 2**30:.0f} GiB; a mask buffer of its context squared, "
                        "which relviz keeps as the config says)")
    return counted


def runs(model: torch.nn.Module, length: int) -> bool:
    """Whether the model runs on token ids at the shorter probe length (the base model of an encoder-decoder
    whose encoder wants audio or pixels does not)."""
    try:
        with torch.no_grad():
            model(**inputs(model, length), use_cache=False)
    except Exception:  # noqa: BLE001 - transformers' error is quoted when the probes run
        return False
    return True


def transformers_module() -> ModuleType:
    """transformers (the [hf] extra), or a ValueError that says how to install it: the one place the observer and
    the zoo import it, so a server without it is told the same thing wherever it is asked for."""
    try:
        import transformers
    except ImportError as exc:
        raise ValueError("observing a model needs transformers: pip install 'relviz[hf]'") from exc
    return transformers


def auto() -> Any:
    """transformers' auto classes and mappings (``transformers.models.auto.modeling_auto``), guarded as
    ``transformers_module``."""
    return transformers_module().models.auto.modeling_auto


def auto_config() -> Any:
    """transformers' ``CONFIG_MAPPING`` (model_type -> config class), guarded as ``transformers_module``."""
    return transformers_module().CONFIG_MAPPING


def has_causal_lm(hf_config: Any, model: torch.nn.Module) -> bool:
    """An encoder-decoder base model (it takes decoder_input_ids) whose family has a causal LM of its own."""
    return hf_config.model_type in auto().MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and \
        "decoder_input_ids" in inspect.signature(model.forward).parameters


def model_class(hf_config: Any, causal: bool = False) -> Any:
    """transformers' base model class for the config, or its causal LM where asked (a base model that cannot run
    on token ids alone: Whisper's wants audio features) or where it maps the config to no base model (a text
    config of a multimodal family, as Emu3's and Mllama's, or a decoder alone, as TrOCR's)."""
    mappings = auto()
    if hf_config.model_type in mappings.MODEL_MAPPING_NAMES and not causal:
        return mappings.AutoModel
    if hf_config.model_type in mappings.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return mappings.AutoModelForCausalLM
    return _causal_lm_of(hf_config) or mappings.AutoModelForCausalLM


class _Concrete:
    """A modeling class where the auto classes map its config to none: ``from_config`` as theirs."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls

    def from_config(self, config: Any, **kwargs: Any) -> torch.nn.Module:
        return self.cls._from_config(config, **kwargs)


def _causal_lm_of(hf_config: Any) -> _Concrete | None:
    """The causal LM class whose config class is this config's own, in the config's modeling module, among the
    causal LMs transformers maps (Mllama's text config: MllamaForCausalLM, mapped from the composite's
    model_type), or None."""
    import importlib
    package = type(hf_config).__module__.rsplit(".", 1)[0]
    try:
        modeling = importlib.import_module(package + ".modeling_" + package.rsplit(".", 1)[-1])
    except ImportError:
        return None
    for name in auto().MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        cls = getattr(modeling, name, None) if isinstance(name, str) else None
        if cls is not None and getattr(cls, "config_class", None) is type(hf_config):
            return _Concrete(cls)
    return None


def _unzeroed(model: torch.nn.Module) -> None:
    """Weight matrices a family initialises to zero (xLSTM's gates and projections) get random values: a mixer whose
    output starts at zero would look to the probes like a layer that mixes no tokens."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2 and p.is_floating_point() and not bool(p.any()):
                p.copy_(torch.randn(p.shape, generator=generator).to(p.dtype) / p.shape[-1] ** 0.5)


class _TooLarge(Exception):
    pass


def _derived_fields(config_class: type, defaults: Mapping[str, Any]) -> set[str]:
    """The fields a config class derives from the others when they are left out (Qwen2's layer_types from
    num_hidden_layers and max_window_layers, its rope_parameters from rope_theta): filled from the class's defaults,
    they would describe the default model (32 layer types for a 4-layer config) instead of this one."""
    import dataclasses

    try:
        declared = {f.name: f.default for f in dataclasses.fields(config_class)}
    except TypeError:                        # not a dataclass: nothing known to be derived
        return set()
    return {k for k, v in defaults.items() if declared.get(k, dataclasses.MISSING) is not dataclasses.MISSING
            and declared[k] != v}
