"""Real Hugging Face checkpoints: their position plan, layer by layer, read exactly, without loading the model.

``inspect(path)`` reads ``config.json`` and, only where a layer's position mechanism has weights, just
those tensors from ``*.safetensors`` (``safe_open``: the header and the named tensors, nothing else;
sharded checkpoints through ``model.safetensors.index.json``). Pickled checkpoints (``.bin``, ``.pt``,
``.pth``, ``.ckpt``, ``.pkl``) are never opened: loading a pickle can run code, and nothing from a
checkpoint is executed (no remote code). transformers is not needed; the tests compare every result
with what transformers computes and applies.

Which mechanisms a model_type applies on which layers is data (``relviz.mechanisms.families``); each
mechanism reads its own config fields (``relviz.mechanisms``); ``relviz.model_plan.read_plan`` puts them
together per layer. The result is a :class:`relviz.model_plan.ModelPlan` (also known here as ModelPositions).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from relviz._checks import check_int
from relviz.mechanisms.families import READ, family_of
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.t5_bias import T5Bias
from relviz.model_plan import ModelPlan, read_plan
from relviz.schemes.view_kinds import SimilarityMatrix, norms_and_cosine

__all__ = ["ModelPositions", "ModelPlan", "AttentionPattern", "inspect", "from_config", "config_from_text", "SUPPORTED",
           "PICKLE_SUFFIXES", "MAX_CONFIG_BYTES"]

#: the model_types in the family table (others with RoPE settings are read as standard rotary decoders)
SUPPORTED: tuple[str, ...] = READ
ModelPositions = ModelPlan
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
MAX_CONFIG_BYTES = 4 << 20
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
INDEX_NAME = "model.safetensors.index.json"


# ---------------------------------------------------------------------------------------
# Reading only what is needed


class _Tensors:
    """Names and lazy reads of a directory's safetensors, one shard opened per read."""

    def __init__(self, directory: Path, fetch: Callable[[str], Path] | None = None) -> None:
        self.directory = directory
        self.fetch = fetch or (lambda name: directory / name)
        self.read: list[str] = []           # the tensors actually read, for the record
        index = self._file(INDEX_NAME)
        if index is not None:
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{INDEX_NAME} is not a valid safetensors index: {exc}") from exc
            if not isinstance(weight_map, dict):
                raise ValueError(f"{INDEX_NAME}: weight_map must map tensor names to shard files")
            self.where = {str(k): str(v) for k, v in weight_map.items()}
        else:
            single = self._file("model.safetensors")
            self.where = {}
            if single is not None:
                for name in self._keys(single):
                    self.where[name] = "model.safetensors"

    def _file(self, name: str) -> Path | None:
        try:
            path = self.fetch(name)
        except FileNotFoundError:
            return None
        return path if path is not None and path.is_file() else None

    @staticmethod
    def _keys(path: Path) -> list[str]:
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as handle:
                return list(handle.keys())
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types on corrupt files
            raise ValueError(f"{path.name} is not a readable safetensors file: {exc}") from exc

    def find(self, suffix: str) -> str | None:
        """The one tensor name ending in ``suffix`` (prefixes differ between model classes)."""
        hits = sorted(n for n in self.where if n == suffix or n.endswith("." + suffix))
        return hits[0] if hits else None

    def get(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        shard = self.where[name]
        if Path(shard).name != shard or not shard.endswith(".safetensors"):
            raise ValueError(f"{INDEX_NAME} names shard {shard!r}: only .safetensors files in the same directory")
        path = self._file(shard)
        if path is None:
            raise ValueError(f"shard {shard} (holding {name}) is missing from {self.directory}")
        try:
            with safe_open(str(path), framework="pt") as handle:
                tensor = handle.get_tensor(name)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"could not read {name} from {shard}: {exc}") from exc
        self.read.append(name)
        return tensor


def _refuse_pickles(directory: Path) -> None:
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES) \
        if directory.is_dir() else []
    if pickles:
        raise ValueError(f"this model's weights are only in {pickles[0]}: relviz never opens pickled checkpoints "
                         f"({', '.join(PICKLE_SUFFIXES)}), since loading a pickle can run arbitrary code. Convert "
                         "it to safetensors (e.g. transformers' save_pretrained(..., safe_serialization=True)).")
    raise ValueError(f"no model.safetensors or {INDEX_NAME} in {directory}")


def config_from_text(text: str | bytes, name: str = "config.json") -> dict[str, Any]:
    """A config.json's text (UTF-8) as a dict, or a ValueError naming ``name``: the one parse of a config's
    text (a model directory's here, the checker's ``--config`` and pasted text in relviz.check.rope_model)."""
    try:
        config = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{name} must hold a JSON object; got {type(config).__name__}")
    return config


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"no config.json in {path.parent}: not a Hugging Face model directory")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"config.json is {path.stat().st_size:,} bytes: larger than {MAX_CONFIG_BYTES:,}, refused")
    return config_from_text(path.read_bytes())


# ---------------------------------------------------------------------------------------
# Hub ids


def _hub_fetcher(repo_id: str) -> Callable[[str], Path]:
    """Download one named file of ``repo_id`` (cached by huggingface_hub) when first asked for."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError as exc:
        raise ValueError(f"{repo_id!r} is not a local directory, and reading a Hub model needs huggingface_hub: "
                         "pip install 'relviz[hf]' (or pip install huggingface_hub)") from exc

    def fetch(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name))
        except LocalEntryNotFoundError as exc:  # (a subclass of EntryNotFoundError: test it first)
            raise ValueError(f"could not download {name} of {repo_id}: no internet connection (or the Hub is "
                             "disabled here, HF_HUB_OFFLINE)") from exc
        except EntryNotFoundError as exc:
            raise FileNotFoundError(name) from exc
        except Exception as exc:  # noqa: BLE001 - network, auth, missing repo: say which file and why
            raise ValueError(f"could not download {name} of {repo_id}: {type(exc).__name__}: {exc}") from exc

    return fetch


# ---------------------------------------------------------------------------------------
# The entry point


def can_observe() -> bool:
    """Whether transformers is installed, so a model_type outside the family table can be observed."""
    return importlib.util.find_spec("transformers") is not None


def _read(config: dict[str, Any], source: str, observe: bool | None) -> ModelPositions:
    """The family table's reading; observed (relviz.observe.verified_plan) when asked, or by default for a
    model_type outside the table while transformers is installed (else marked unverified, layer by layer)."""
    try:
        plan = read_plan(config, source=source) if observe is not True else None
    except ValueError:
        if observe is False or not can_observe() or family_of(str(config.get("model_type")), dict(config))[0]:
            raise
        plan = None                              # outside the table without RoPE: the observer derives its entry
    if observe is False or (plan is not None and (plan.in_family_table or not can_observe())):
        return plan
    from relviz.observe import verified_plan

    return verified_plan(config, source=source)


def inspect(path: str | os.PathLike[str], *, allow_hub: bool = True, observe: bool | None = None) -> ModelPositions:
    """Read a model directory's position structure (or, with ``allow_hub``, a Hub id "owner/name").

    Only config.json and the position tensors are read; the result says which tensors. ``observe``: check the
    reading against the model transformers builds from the config (None: for model_types outside the family
    table, when transformers is installed; True: always; False: never).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a directory path or a Hub id; got {type(path).__name__}")
    text = os.fspath(path)
    directory = Path(text)
    fetch: Callable[[str], Path] | None = None
    if directory.is_dir():
        config_path = directory / "config.json"
        source = str(directory)
    elif HUB_ID.match(text) and not text.startswith((".", "/")) and allow_hub:
        fetch = _hub_fetcher(text)
        try:
            config_path = fetch("config.json")
        except FileNotFoundError as exc:
            raise ValueError(f"{text} has no config.json on the Hub") from exc
        directory = config_path.parent
        source = f"hub:{text}"
    else:
        raise ValueError(f"{text!r} is not a model directory" + (" (and Hub ids are disabled here)"
                                                                  if HUB_ID.match(text) else ""))
    config = _read_config(config_path)
    plan = _read(config, source, observe)
    if not any(m.needs_weights for layer in plan.all_layers() for m in layer.mechanisms):
        plan.directory = directory               # its own attention can run on text (a tokenizer permitting)
        return plan                              # rotation, ALiBi, windows: the config says it all
    tensors = _Tensors(directory, fetch)
    if not tensors.where:
        _refuse_pickles(directory)

    def tensor(suffix: str) -> torch.Tensor | None:
        name = tensors.find(suffix)
        return None if name is None else tensors.get(name)

    observed = plan
    plan = read_plan(config, source=source, tensor=tensor, family=observed.observed_entry)
    if observed.observed_entry is not None:      # the observer's marks and notes stay with the weights' reading
        for stack, layers in plan.plans.items():
            plan.plans[stack] = [dataclasses.replace(p, read_from=o.read_from)
                                 for p, o in zip(layers, observed.plans[stack])]
        plan.notes = observed.notes
    plan.directory = directory
    plan.tensors_read = list(tensors.read)
    return plan


def from_config(config: dict[str, Any], *, source: str = "config", observe: bool | None = False) -> ModelPositions:
    """The plan a config alone determines: e.g. a published config.json's fields, typed in as a preset.

    Mechanisms whose values live in weights (T5 tables, learned positions, sinks) are listed with their
    settings; their tables need :func:`inspect` on a model directory. ``observe`` as :func:`inspect`'s.
    """
    return _read(config, source, observe)


# ---------------------------------------------------------------------------------------
# What the app shows: the operator's list, the existing views' data, the model's own attention

MODELS_ENV = "RELVIZ_MODELS"
ALLOW_HUB_ENV = "RELVIZ_ALLOW_HUB"
MAX_MODEL_MB_ENV = "RELVIZ_MAX_MODEL_MB"
DEFAULT_MAX_MODEL_MB = 500
MAX_TOKENS = 64
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "spiece.model", "vocab.txt", "vocab.json")


def configured_models(env: dict[str, str] | None = None) -> dict[str, str]:
    """name -> directory (or "hub:owner/name") from RELVIZ_MODELS, the operator's list.

    Entries are separated by the path separator (':' on Linux); each is a directory, "name=directory",
    or "hub:owner/name" (kept only when RELVIZ_ALLOW_HUB=1). Missing directories are skipped.
    """
    env = os.environ if env is None else env
    allow_hub = env.get(ALLOW_HUB_ENV, "") == "1"
    models: dict[str, str] = {}
    for entry in (e.strip() for e in env.get(MODELS_ENV, "").split(os.pathsep)):
        if not entry:
            continue
        name, _, target = entry.partition("=") if "=" in entry else ("", "", entry)
        if target.startswith("hub:"):
            if allow_hub and HUB_ID.match(target[4:]):
                models[name or target[4:]] = target
            continue
        directory = Path(target).expanduser()
        if (directory / "config.json").is_file():
            models[name or directory.name] = str(directory.resolve())
    return models


def open_configured(target: str) -> ModelPositions:
    """inspect() of an entry of configured_models (a directory, or hub:owner/name)."""
    return inspect(target[4:]) if target.startswith("hub:") else inspect(target, allow_hub=False)


def weights_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def has_tokenizer(directory: Path | None) -> bool:
    return directory is not None and any((Path(directory) / name).is_file() for name in TOKENIZER_FILES)


def max_model_bytes(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        megabytes = float(env.get(MAX_MODEL_MB_ENV, DEFAULT_MAX_MODEL_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MODEL_MB
    return int(max(megabytes, 0) * 1e6)


def bias_curve(positions: ModelPositions, *, stack: str = "encoder", layer: int = 0, extent: int = 160):
    """The learned bias of every head against j − i (relviz.schemes.BiasCurve, as the Live attention page
    draws it for a relviz T5 model)."""

    positions.bias_table(stack=stack, layer=layer)          # ValueError when this layer has no table in hand
    return positions.layer(layer, stack=stack).find(T5Bias).curve(extent)


def learned_similarity(positions: ModelPositions, n: int):
    """Cosine between the first ``n`` position vectors (relviz.schemes.SimilarityMatrix;
    relviz.schemes.view_kinds.relative_share says how much of it depends on j − i alone)."""

    table = positions.position_embeddings()
    n = check_int("n", n, minimum=3, maximum=table.shape[0])
    _, cosine = norms_and_cosine([table[:n]])                                   # [1, n, n]
    return SimilarityMatrix("learned absolute: cosine between position vectors p_i, p_j", "position",
                            torch.arange(n).numpy(), cosine[0].astype("float32"))


def check_runnable(directory: Path, *, max_bytes: int | None = None) -> None:
    """Refuse to run a model above the operator's size limit or without a tokenizer (ValueError says which)."""
    size, limit = weights_bytes(directory), max_model_bytes() if max_bytes is None else max_bytes
    if size > limit:
        raise ValueError(f"this model's weights are {size / 1e6:,.0f} MB; the operator allows running models up to "
                         f"{limit / 1e6:,.0f} MB here ({MAX_MODEL_MB_ENV})")
    if not has_tokenizer(directory):
        raise ValueError(f"no tokenizer files in this model directory (one of {', '.join(TOKENIZER_FILES)})")


def load_model(directory: Path, *, max_bytes: int | None = None):
    """(tokenizer, model) with eager attention, from safetensors only; refuses models above max_bytes."""
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise ValueError("running the model needs transformers: pip install 'relviz[hf]'") from exc
    check_runnable(directory, max_bytes=max_bytes)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model = AutoModel.from_pretrained(str(directory), attn_implementation="eager", use_safetensors=True).eval()
    return tokenizer, model


def model_attention(tokenizer, model, text: str, *, max_tokens: int = MAX_TOKENS) -> tuple[list[str], torch.Tensor]:
    """(tokens, attention [layers, heads, L, L]) of the model's self-attention on ``text`` (the encoder's for
    encoder-decoder models), at most ``max_tokens`` tokens."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string")
    max_tokens = check_int("max_tokens", max_tokens, minimum=1, maximum=512)
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_tokens)
    ids = encoded["input_ids"][:, :max_tokens]
    with torch.inference_mode():
        if getattr(model.config, "is_encoder_decoder", False):
            out = model.get_encoder()(input_ids=ids, output_attentions=True)
        else:
            out = model(input_ids=ids, output_attentions=True)
    found = [a[0] for a in (out.attentions or ()) if a is not None]           # hybrids: attending layers only
    if not found:
        raise ValueError("this model returns no attention weights (none of its layers runs softmax attention "
                         "with output_attentions)")
    attentions = torch.stack(found).float()                                  # [layers, heads, L, L]
    return tokenizer.convert_ids_to_tokens(ids[0].tolist()), attentions
