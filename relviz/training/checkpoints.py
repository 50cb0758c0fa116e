"""Checkpoints: save, load, validate and migrate — the one module that says what a checkpoint is.

A checkpoint is one file, ``<dir>/<name>.safetensors``: the weights, and in the safetensors
header's metadata (key ``relviz``) a JSON document saying what they are: scheme, model config,
task, training settings, measured accuracy, train seconds, relviz version. Weights and
description cannot come apart, and a save replaces the file atomically
(relviz.training.checkpoint_io), so a crash leaves the old checkpoint or the new one.
Loading never unpickles anything: safetensors' own reader, the document validated field by
field, every tensor checked against the model the document describes; any problem is a
ValueError naming the file.

Old checkpoints (format version 1: ``<name>.safetensors`` + ``<name>.json``, bound by a hash)
still load, read-only (relviz.training.checkpoint_legacy); :func:`migrate_checkpoint`
(``python -m relviz checkpoints migrate DIR``) rewrites one as a single file, tensors checked
bit for bit.

:func:`list_checkpoints`, :func:`load_checkpoint` and :meth:`Checkpoint.run` are what the
app calls: list, load by name, run a typed sequence through the model. The shipped checkpoints
(one per scheme, task ``shift``) are rebuilt by ``python -m relviz train --shipped``
(:func:`train_shipped`).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from relviz import __version__
from relviz._checks import resolve_device
from relviz.model import MAX_LENGTH as MODEL_MAX_LENGTH
from relviz.model import SCHEMES, ModelConfig, RelvizTransformer, build_model
from relviz.tasks import TASKS, Task, make_task
import relviz.training.checkpoint_io as io
import relviz.training.checkpoint_legacy as legacy
from relviz.training.evaluation import EVAL_SEED, TextRun, eval_samples, evaluate, run_text
from relviz.training.loop import (
    MAX_BATCH_SIZE, MAX_SEED, MAX_STEPS, SHIPPED_TASK, TrainProgress, TrainResult, freeze, scheme_defaults, train,
    valid_lr,
)

__all__ = ["CHECKPOINT_DIR", "FORMAT", "FORMAT_VERSION", "CheckpointInfo", "Checkpoint", "CheckpointScan",
           "check_name", "save_checkpoint", "load_checkpoint", "read_checkpoint_info", "list_checkpoints",
           "migrate_checkpoint", "scan_checkpoints", "shipped_name", "train_shipped"]

#: Where the shipped checkpoints live, and the default directory of every function here.
CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
FORMAT = "relviz-checkpoint"
#: 2: one safetensors file, the document in its header. 1: the old pair (read-only).
FORMAT_VERSION = 2
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_name(name: object) -> str:
    """A checkpoint name: letters, digits, '_', '.', '-' (no path separators), 1–100 chars."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith((".json", ".safetensors")):
        raise ValueError(f"checkpoint name must be 1-100 letters, digits, '_', '.' or '-', starting with "
                         f"a letter or digit, without a file extension; got {name!r}")
    return name


def _directory(directory: str | os.PathLike | None) -> Path:
    return CHECKPOINT_DIR if directory is None else Path(directory)


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint's validated description: everything but the weights."""

    name: str
    #: The checkpoint's file, ``<name>.safetensors``.
    path: Path
    model_config: ModelConfig
    task: Task
    train_length: int
    steps: int
    batch_size: int
    lr: float
    seed: int
    accuracy: float
    train_seconds: float
    relviz_version: str
    #: An old pair's JSON (format version 1, read-only until migrated); None for a single file.
    legacy_json: Path | None = None

    @property
    def scheme(self) -> str:
        return self.model_config.scheme

    def summary(self) -> dict[str, Any]:
        """JSON-ready listing entry (``python -m relviz checkpoints --json``)."""
        return {
            "name": self.name, "scheme": self.scheme, "scheme_params": self.model_config.scheme_params(),
            "causal": self.model_config.causal, "task": self.task.name, "task_params": self.task.params(),
            "train_length": self.train_length, "accuracy": self.accuracy, "steps": self.steps,
            "seed": self.seed, "train_seconds": self.train_seconds, "relviz_version": self.relviz_version,
            "weights_bytes": self.path.stat().st_size if self.path.exists() else None,
            "format_version": legacy.VERSION if self.legacy_json else FORMAT_VERSION,
        }


def _document(result: TrainResult) -> dict[str, Any]:
    config = result.model_config
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "scheme": config.scheme, "scheme_params": config.scheme_params(), "model": config.to_dict(),
        "task": result.task.name, "task_params": result.task.params(),
        "train_length": result.length, "steps": result.steps, "batch_size": result.batch_size,
        "lr": result.lr, "seed": result.seed, "accuracy": result.accuracy,
        "eval_seed": EVAL_SEED, "eval_samples": eval_samples(result.length),
        "train_seconds": round(result.train_seconds, 2), "final_loss": result.final_loss,
        "relviz_version": __version__, "torch_version": torch.__version__,
    }


def _remove_old_json(directory: Path, name: str) -> None:
    """An old pair's JSON beside a single file is stale (the single file wins): remove it."""
    (directory / f"{name}{legacy.JSON_SUFFIX}").unlink(missing_ok=True)


def save_checkpoint(result: TrainResult, name: str, directory: str | os.PathLike | None = None) -> Path:
    """Write ``<directory>/<name>.safetensors`` (weights, description in the header); return its path.

    The file is replaced atomically: a crash leaves the previous checkpoint or the new one. An old
    pair's ``<name>.json`` is removed after the new file is in place.
    """
    if not isinstance(result, TrainResult):
        raise ValueError(f"result must be a TrainResult from train(); got {type(result).__name__}")
    name = check_name(name)
    directory = _directory(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {key: value.detach().to("cpu", torch.float32).contiguous()
               for key, value in result.model.state_dict().items()}
    path = directory / f"{name}{io.SUFFIX}"
    io.write(path, tensors, json.dumps(_document(result)))
    _remove_old_json(directory, name)
    return path


#: Document key -> allowed types; numbers accept int too.
_REQUIRED: dict[str, tuple[type, ...]] = {
    "format": (str,), "format_version": (int,), "scheme": (str,), "scheme_params": (dict,),
    "model": (dict,), "task": (str,), "task_params": (dict,), "train_length": (int,), "steps": (int,),
    "batch_size": (int,), "lr": (int, float), "seed": (int,), "accuracy": (int, float),
    "train_seconds": (int, float), "relviz_version": (str,),
}


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join({"str": "a string", "int": "an integer", "float": "a number", "dict": "an object"}
                       [t.__name__] for t in types)


def _validate(data: Any, version: int, fail: io.Fail) -> tuple[ModelConfig, Task]:
    """Check a description field by field (``version``: what its place allows); its model and task."""
    if not isinstance(data, dict):
        raise fail(f"the description must be a JSON object; got {type(data).__name__}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise fail(f"the description lacks required keys: {', '.join(missing)}")
    for key, types in _REQUIRED.items():
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise fail(f"{key!r} must be {_type_names(types)}; got {value!r:.80}")
    if data["format"] != FORMAT:
        raise fail(f"'format' must be {FORMAT!r}; got {data['format']!r:.80}")
    if data["format_version"] != version:
        raise fail(f"'format_version' {data['format_version']} is not supported here (this relviz reads "
                   f"version {FORMAT_VERSION} in a checkpoint's header, {legacy.VERSION} in an old pair's JSON); "
                   "retrain it with python -m relviz train")
    if data["scheme"] not in SCHEMES:
        raise fail(f"unknown scheme {data['scheme']!r:.80}; known schemes: {', '.join(SCHEMES)}")
    if data["task"] not in TASKS:
        raise fail(f"unknown task {data['task']!r:.80}; known tasks: {', '.join(TASKS)}")
    try:
        config = ModelConfig.from_dict(data["model"])
        task = make_task(data["task"], **data["task_params"])
    except (TypeError, ValueError) as exc:
        raise fail(f"invalid model or task: {exc}") from exc
    if config.scheme != data["scheme"]:
        raise fail(f"'scheme' is {data['scheme']!r} but the model config says {config.scheme!r}")
    if config.scheme_params() != data["scheme_params"]:
        raise fail(f"'scheme_params' {data['scheme_params']} disagree with the model config "
                   f"{config.scheme_params()}")
    if config.vocab_size != task.vocab_size:
        raise fail(f"the model's vocab_size {config.vocab_size} does not match task {task.name!r} "
                   f"({task.vocab_size} tokens)")
    limits = {"train_length": (1, MODEL_MAX_LENGTH), "steps": (1, MAX_STEPS),
              "batch_size": (1, MAX_BATCH_SIZE), "seed": (0, MAX_SEED)}
    for key, (low, high) in limits.items():
        if not low <= data[key] <= high:
            raise fail(f"{key!r} must be from {low} to {high} (what train() accepts); got {data[key]!r:.40}")
    if not valid_lr(data["lr"]):
        raise fail(f"'lr' must be a number in (0, 1] (what train() accepts); got {data['lr']!r:.40}")
    if not 0.0 <= data["accuracy"] <= 1.0:
        raise fail(f"'accuracy' must be a fraction from 0 to 1; got {data['accuracy']}")
    if not (math.isfinite(data["train_seconds"]) and data["train_seconds"] >= 0):
        raise fail(f"'train_seconds' must be a finite number >= 0; got {data['train_seconds']}")
    return config, task


@dataclass(frozen=True)
class _Contents:
    """What one read of a checkpoint found: its info, its raw document, its tensors (if asked)."""

    info: CheckpointInfo
    document: dict[str, Any]
    tensors: dict[str, torch.Tensor]


def _failing(name: str, where: Path) -> io.Fail:
    return lambda problem: ValueError(f"checkpoint {name!r} ({where}): {problem}")


def _header_document(metadata: dict[str, str], fail: io.Fail) -> Any:
    """The JSON document in a single file's header, size-bounded and parsed."""
    text = metadata[io.METADATA_KEY]
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > io.MAX_DOCUMENT_BYTES:
        raise fail(f"the description in the header is {size} bytes; a checkpoint's is at most "
                   f"{io.MAX_DOCUMENT_BYTES}")
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise fail("the description in the header is nested too deeply to be a checkpoint's") from exc
    except json.JSONDecodeError as exc:
        raise fail(f"the description in the header (metadata {io.METADATA_KEY!r}) is not valid JSON: {exc}") from exc


def _read(directory: Path, name: str, *, tensors: bool, trust_unbound: bool = False) -> _Contents:
    """Read checkpoint ``name`` once: a single file, or else an old pair (validated as before)."""
    path, json_path = directory / f"{name}{io.SUFFIX}", directory / f"{name}{legacy.JSON_SUFFIX}"
    fail = _failing(name, path)
    if not path.exists() and json_path.exists():
        raise fail(f"the weights file {path.name} is missing (an old checkpoint is a pair: {json_path.name} "
                   f"and {path.name})")
    metadata, loaded = io.read(path, fail, tensors=tensors)
    if io.METADATA_KEY in metadata:
        data = _header_document(metadata, fail)
        config, task = _validate(data, FORMAT_VERSION, fail)
        old = None
    elif json_path.exists():
        old, fail_json = json_path, _failing(name, json_path)
        data = legacy.read_json(json_path, fail_json)
        config, task = _validate(data, legacy.VERSION, fail_json)
        legacy.check_hash_recorded(data, json_path, fail_json, trust_unbound=trust_unbound)
        if tensors:
            legacy.check_binding(data, path, metadata, fail, trust_unbound=trust_unbound)
    else:
        raise fail(f"the file holds no relviz description (header metadata {io.METADATA_KEY!r}) and there is no "
                   f"old-style {json_path.name} beside it: not a relviz checkpoint")
    info = CheckpointInfo(
        name=name, path=path, legacy_json=old, model_config=config, task=task,
        train_length=data["train_length"], steps=data["steps"], batch_size=data["batch_size"],
        lr=float(data["lr"]), seed=data["seed"], accuracy=float(data["accuracy"]),
        train_seconds=float(data["train_seconds"]), relviz_version=data["relviz_version"])
    return _Contents(info, data, loaded)


def read_checkpoint_info(path: str | os.PathLike) -> CheckpointInfo:
    """Read and validate a checkpoint's description (not its weights) from its file
    (``<name>.safetensors``; for an old pair either file). ValueError names file and problem."""
    path = Path(path)
    return _read(path.parent, path.stem, tensors=False).info


def _check_tensors(tensors: dict[str, torch.Tensor], model: RelvizTransformer, scheme: str, fail: io.Fail) -> None:
    """Every tensor the model needs, nothing else, float32, the right shapes, finite."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        parts = [f"{what} tensors {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"
                 for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
        raise fail(f"the weights do not match a {scheme!r} model as its description says: " + "; ".join(parts))
    for key, reference in expected.items():
        tensor = tensors[key]
        if tensor.shape != reference.shape:
            raise fail(f"tensor {key!r} has shape {tuple(tensor.shape)}; the model its description says "
                       f"needs {tuple(reference.shape)}")
        if tensor.dtype != torch.float32:
            raise fail(f"tensor {key!r} has dtype {tensor.dtype}; expected torch.float32")
        if not torch.isfinite(tensor).all():
            raise fail(f"tensor {key!r} holds NaN or infinite values")


def _read_model(directory: Path, name: str, *, trust_unbound: bool = False) -> tuple[_Contents, RelvizTransformer]:
    """Read a checkpoint and build its model with its weights, every tensor checked."""
    contents = _read(directory, name, tensors=True, trust_unbound=trust_unbound)
    info = contents.info
    model = build_model(info.model_config, seed=0)
    _check_tensors(contents.tensors, model, info.scheme, _failing(name, info.path))
    model.load_state_dict(contents.tensors, strict=True)
    return contents, model


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def _identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Same names, dtypes and shapes, equal values and the same bits (torch.equal alone takes -0.0 == 0.0)."""
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k])
        and torch.equal(_bits(a[k]), _bits(b[k])) for k in a)


def migrate_checkpoint(name: str, directory: str | os.PathLike | None = None, *, trust_unbound: bool = False) -> str:
    """Rewrite the old pair ``<name>.json`` + ``<name>.safetensors`` as one file; say what was done.

    The pair is read as strictly as a load reads it (hash, description, every tensor); the new
    file is written beside it and read back before it replaces the old weights: the same tensor
    names, dtypes, shapes and bits, and the same description (minus the hash and the name, at
    format version 2). Only then is the old JSON removed. A migration interrupted at any point
    leaves a checkpoint that loads, and running it again finishes it. ``trust_unbound``: also
    migrate pairs written before the hash binding (only pairs you know belong together).
    ``python -m relviz checkpoints migrate DIR``.
    """
    name = check_name(name)
    directory = _directory(directory)
    json_path, target = directory / f"{name}{legacy.JSON_SUFFIX}", directory / f"{name}{io.SUFFIX}"
    fail = _failing(name, target)
    contents, _ = _read_model(directory, name, trust_unbound=trust_unbound)
    if contents.info.legacy_json is None:
        if not json_path.exists():
            return "already one file"
        old = legacy.upgraded(legacy.read_json(json_path, _failing(name, json_path)), FORMAT_VERSION)
        if old != contents.document:
            return f"already one file; {json_path.name} beside it describes something else: left alone"
        _remove_old_json(directory, name)  # a migration interrupted after its rename
        return f"already one file; removed the old {json_path.name}"
    document = legacy.upgraded(contents.document, FORMAT_VERSION)
    _validate(document, FORMAT_VERSION, fail)

    def verify(tmp: Path) -> None:
        metadata, written = io.read(tmp, fail, tensors=True)
        if not _identical(written, contents.tensors):
            raise fail("the rewritten tensors differ from the old pair's; nothing was replaced")
        if io.METADATA_KEY not in metadata or _header_document(metadata, fail) != document:
            raise fail("the rewritten description differs from the old pair's; nothing was replaced")

    io.write(target, contents.tensors, json.dumps(document), check=verify)
    migrated, _ = _read_model(directory, name)  # read back as every load will read it
    if migrated.info.legacy_json is not None or not _identical(migrated.tensors, contents.tensors):
        raise fail("the migrated file does not read back as the old pair; the old JSON is kept")
    _remove_old_json(directory, name)
    return "migrated"


@dataclass
class Checkpoint:
    """A loaded checkpoint: its info and its model (eval mode, no gradients)."""

    info: CheckpointInfo
    model: RelvizTransformer

    @property
    def task(self) -> Task:
        return self.info.task

    def run(self, text: str) -> TextRun:
        """Run a typed sequence (see :func:`run_text`)."""
        return run_text(self.model, self.info.task, text)

    def evaluate(self, *, length: int | None = None, seed: int = 0, samples: int | None = None) -> float:
        """Accuracy on fresh samples (default: at the training length)."""
        length = self.info.train_length if length is None else length
        return evaluate(self.model, self.info.task, length=length, seed=seed, samples=samples)


def load_checkpoint(name: str, directory: str | os.PathLike | None = None, *,
                    device: torch.device | str | None = "cpu") -> Checkpoint:
    """Load checkpoint ``name`` from ``directory`` (default: the shipped ones), fully validated."""
    name = check_name(name)
    directory = _directory(directory)
    if not any((directory / f"{name}{suffix}").exists() for suffix in (io.SUFFIX, legacy.JSON_SUFFIX)):
        available = [info.name for info in list_checkpoints(directory)]
        raise ValueError(f"no checkpoint named {name!r} in {directory}; available: "
                         f"{', '.join(available) or 'none'}")
    contents, model = _read_model(directory, name)
    return Checkpoint(contents.info, freeze(model).to(resolve_device(device)))


@dataclass(frozen=True)
class CheckpointScan:
    """Every checkpoint in a directory: the valid ones, and why the others cannot be listed."""

    checkpoints: list[CheckpointInfo]
    problems: dict[str, str]


def scan_checkpoints(directory: str | os.PathLike | None = None) -> CheckpointScan:
    """Validate every ``*.safetensors`` (and old pair's ``*.json``) in ``directory`` (cheap: the header
    or JSON only; the weights are checked on load)."""
    directory = _directory(directory)
    names = sorted({path.stem for suffix in (io.SUFFIX, legacy.JSON_SUFFIX)
                    for path in directory.glob(f"*{suffix}")}) if directory.is_dir() else []
    infos, problems = [], {}
    for name in names:
        try:
            infos.append(_read(directory, name, tensors=False).info)
        except ValueError as exc:
            problems[name] = str(exc)
    return CheckpointScan(infos, problems)


def list_checkpoints(directory: str | os.PathLike | None = None) -> list[CheckpointInfo]:
    """The valid checkpoints in ``directory`` (default: shipped), sorted by name."""
    return scan_checkpoints(directory).checkpoints


# ---------------------------------------------------------------------------------------
# Shipped checkpoints


def shipped_name(scheme: str) -> str:
    """Name of the shipped checkpoint for a scheme, e.g. ``t5-shift``."""
    return f"{scheme}-{SHIPPED_TASK['name']}"


def train_shipped(directory: str | os.PathLike | None = None, *, schemes: list[str] | None = None,
                  progress_factory: Callable[[str], Callable[[TrainProgress], Any] | None] | None = None,
                  ) -> list[Path]:
    """Retrain the shipped checkpoints (default config per scheme, task shift s=5)."""
    task = make_task(SHIPPED_TASK["name"], **SHIPPED_TASK["params"])
    paths = []
    for scheme in schemes or list(SCHEMES):
        model_fields, training = scheme_defaults(scheme)
        config = ModelConfig(scheme=scheme, vocab_size=task.vocab_size, **model_fields)
        progress = progress_factory(scheme) if progress_factory else None
        result = train(config, task, progress=progress, **training)
        paths.append(save_checkpoint(result, shipped_name(scheme), directory))
    return paths
