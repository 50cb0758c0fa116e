"""Checkpoints: save, load and validate — the one module that reads and writes them.

A checkpoint is two files, ``<dir>/<name>.safetensors`` (weights) and ``<dir>/<name>.json``
(scheme, model config, task, training settings, measured accuracy, train seconds, relviz
version), bound to each other: the JSON records the weights' SHA-256 and the weights' metadata
record the scheme, model and task (relviz.training.checkpoint_files, which also writes the pair
so that a crash leaves the old pair or the new one). Loading never unpickles anything:
safetensors and JSON only, both validated against the model the JSON describes and against each
other; any problem is a ValueError naming the file.
:func:`list_checkpoints`, :func:`load_checkpoint` and :meth:`Checkpoint.run` are what the
app calls: list, load by name, run a typed sequence through the model.

The shipped checkpoints (one per scheme, task ``shift``) are rebuilt by
``python -m relviz train --shipped`` (:func:`train_shipped`).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from relviz import __version__
from relviz._checks import resolve_device
from relviz.model import MAX_LENGTH as MODEL_MAX_LENGTH
from relviz.model import SCHEMES, ModelConfig, RelvizTransformer, build_model
from relviz.tasks import TASKS, Task, make_task
import relviz.training.checkpoint_files as files
from relviz.training.evaluation import EVAL_SEED, TextRun, eval_samples, evaluate, run_text
from relviz.training.loop import (
    MAX_BATCH_SIZE, MAX_SEED, MAX_STEPS, SHIPPED_TASK, TrainProgress, TrainResult, freeze, scheme_defaults, train,
    valid_lr,
)

__all__ = ["CHECKPOINT_DIR", "FORMAT", "FORMAT_VERSION", "CheckpointInfo", "Checkpoint", "CheckpointScan",
           "check_name", "save_checkpoint", "bind_checkpoint", "load_checkpoint", "read_checkpoint_info", "list_checkpoints",
           "scan_checkpoints", "shipped_name", "train_shipped"]

#: Where the shipped checkpoints live, and the default directory of every function here.
CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
FORMAT = "relviz-checkpoint"
FORMAT_VERSION = 1
MAX_JSON_BYTES = 1 << 20
MAX_WEIGHTS_BYTES = 64 << 20
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
    """A checkpoint's validated JSON: everything but the weights."""

    name: str
    json_path: Path
    weights_path: Path
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
    #: SHA-256 of the weights file the JSON belongs to.
    weights_sha256: str = ""
    #: The JSON's description the weights' metadata must repeat (checkpoint_files.BOUND_KEYS).
    bound: dict[str, Any] = field(default_factory=dict, compare=False)

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
            "weights_bytes": self.weights_path.stat().st_size if self.weights_path.exists() else None,
        }


def _metadata(result: TrainResult, name: str) -> dict[str, Any]:
    config = result.model_config
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
        "scheme": config.scheme, "scheme_params": config.scheme_params(), "model": config.to_dict(),
        "task": result.task.name, "task_params": result.task.params(),
        "train_length": result.length, "steps": result.steps, "batch_size": result.batch_size,
        "lr": result.lr, "seed": result.seed, "accuracy": result.accuracy,
        "eval_seed": EVAL_SEED, "eval_samples": eval_samples(result.length),
        "train_seconds": round(result.train_seconds, 2), "final_loss": result.final_loss,
        "relviz_version": __version__, "torch_version": torch.__version__,
    }


def save_checkpoint(result: TrainResult, name: str, directory: str | os.PathLike | None = None) -> Path:
    """Write ``<directory>/<name>.safetensors`` and ``<name>.json`` as a bound pair; return the JSON path.

    See relviz.training.checkpoint_files: a crash at any moment leaves the old pair or the new
    pair, and temporary files of an interrupted write are removed by the next one.
    """
    if not isinstance(result, TrainResult):
        raise ValueError(f"result must be a TrainResult from train(); got {type(result).__name__}")
    name = check_name(name)
    directory = _directory(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {key: value.detach().to("cpu", torch.float32).contiguous()
               for key, value in result.model.state_dict().items()}
    return files.write_pair(directory, name, tensors, _metadata(result, name))


#: JSON key -> allowed types; numbers accept int too.
_REQUIRED: dict[str, tuple[type, ...]] = {
    "format": (str,), "format_version": (int,), "scheme": (str,), "scheme_params": (dict,),
    "model": (dict,), "task": (str,), "task_params": (dict,), "train_length": (int,), "steps": (int,),
    "batch_size": (int,), "lr": (int, float), "seed": (int,), "accuracy": (int, float),
    "train_seconds": (int, float), "relviz_version": (str,),
}


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join({"str": "a string", "int": "an integer", "float": "a number", "dict": "an object"}
                       [t.__name__] for t in types)


def read_checkpoint_info(json_path: str | os.PathLike) -> CheckpointInfo:
    """Read and validate a checkpoint's JSON (not its weights). ValueError names file and problem."""
    json_path = Path(json_path)
    name = json_path.stem

    def fail(problem: str) -> ValueError:
        return ValueError(f"checkpoint {name!r} ({json_path}): {problem}")

    try:
        source = files.resolve_json(json_path) if json_path.exists() else json_path
        size = source.stat().st_size
        if size > MAX_JSON_BYTES:
            raise fail(f"the JSON file is {size} bytes; a checkpoint's JSON is at most {MAX_JSON_BYTES}")
        data = json.loads(source.read_text(encoding="utf-8"))
    except RecursionError as exc:
        raise fail("the JSON file is nested too deeply to be a checkpoint") from exc
    except FileNotFoundError as exc:
        raise fail("the JSON file does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read the JSON file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise fail(f"the JSON file is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise fail(f"the JSON must be an object; got {type(data).__name__}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise fail(f"the JSON lacks required keys: {', '.join(missing)}")
    for key, types in _REQUIRED.items():
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise fail(f"{key!r} must be {_type_names(types)}; got {value!r:.80}")
    if data["format"] != FORMAT:
        raise fail(f"'format' must be {FORMAT!r}; got {data['format']!r:.80}")
    if data["format_version"] != FORMAT_VERSION:
        raise fail(f"'format_version' {data['format_version']} is not supported (this relviz reads "
                   f"version {FORMAT_VERSION}); retrain it with python -m relviz train")
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
    digest = data.get(files.HASH_KEY)
    if digest is None:
        raise fail(f"the JSON records no {files.HASH_KEY!r}, so nothing binds it to its weights (written by "
                   "an older relviz). If you trust this pair, bind it: python -m relviz checkpoints --bind "
                   f"--dir {json_path.parent}")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise fail(f"{files.HASH_KEY!r} must be 64 lowercase hex digits; got {digest!r:.80}")
    return CheckpointInfo(
        weights_sha256=digest, bound={key: data[key] for key in files.BOUND_KEYS if key in data},
        name=name, json_path=json_path, weights_path=json_path.with_suffix(".safetensors"),
        model_config=config, task=task, train_length=data["train_length"], steps=data["steps"],
        batch_size=data["batch_size"], lr=float(data["lr"]), seed=data["seed"],
        accuracy=float(data["accuracy"]), train_seconds=float(data["train_seconds"]),
        relviz_version=data["relviz_version"])


def _read_weights(path: Path, fail: Callable[[str], ValueError]) -> tuple[bytes, dict[str, torch.Tensor],
                                                                          dict[str, str] | None]:
    """The weights file's bytes, tensors and metadata, read once (no pickle)."""
    from safetensors.torch import load

    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise fail("the weights file does not exist (a checkpoint needs both .json and "
                   ".safetensors)") from exc
    if size > MAX_WEIGHTS_BYTES:
        raise fail(f"the weights file is {size} bytes; the small model's weights are far below "
                   f"{MAX_WEIGHTS_BYTES}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read the weights file: {exc.strerror or exc}") from exc
    try:
        tensors = load(data)
        header_length = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8:8 + header_length]).get("__metadata__")
    except Exception as exc:  # safetensors raises its own error types for corrupt headers/data
        raise fail(f"not a valid safetensors file: {exc}") from exc
    return data, tensors, metadata


def _check_tensors(tensors: dict[str, torch.Tensor], model: RelvizTransformer, scheme: str,
                   fail: Callable[[str], ValueError]) -> None:
    """Every tensor the model needs, nothing else, float32, the right shapes, finite."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        parts = [f"{what} tensors {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"
                 for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
        raise fail(f"the weights do not match a {scheme!r} model as the JSON describes it: "
                   + "; ".join(parts))
    for key, reference in expected.items():
        tensor = tensors[key]
        if tensor.shape != reference.shape:
            raise fail(f"tensor {key!r} has shape {tuple(tensor.shape)}; the model the JSON describes "
                       f"needs {tuple(reference.shape)}")
        if tensor.dtype != torch.float32:
            raise fail(f"tensor {key!r} has dtype {tensor.dtype}; expected torch.float32")
        if not torch.isfinite(tensor).all():
            raise fail(f"tensor {key!r} holds NaN or infinite values")


def _load_weights(info: CheckpointInfo, model: RelvizTransformer) -> None:
    """Read the safetensors file (no pickle), check that it is the one the JSON records (hash)
    and describes (metadata), and check every tensor against the model."""
    path = info.weights_path

    def fail(problem: str) -> ValueError:
        return ValueError(f"checkpoint {info.name!r} ({path}): {problem}")

    data, tensors, metadata = _read_weights(path, fail)
    digest = files.sha256_bytes(data)
    if digest != info.weights_sha256:
        raise fail(f"these weights are not the ones the JSON was written with (SHA-256 {digest[:16]}…, the "
                   f"JSON records {info.weights_sha256[:16]}…): the files were edited, mixed up or left by "
                   "an interrupted save. Restore the pair or retrain it.")
    mismatch = files.metadata_mismatch(metadata, info.bound)
    if mismatch:
        raise fail(f"the weights do not belong to this JSON: {mismatch}")
    _check_tensors(tensors, model, info.scheme, fail)
    model.load_state_dict(tensors, strict=True)


def bind_checkpoint(json_path: str | os.PathLike) -> bool:
    """Bind an older checkpoint's pair (no hash, no metadata) in place; False if already bound.

    The weights are validated against the model the JSON describes, rewritten with the metadata
    (the same tensors, bit for bit: checked after writing) and the hash is added to the JSON,
    through checkpoint_files.write_pair. Only for pairs you trust: binding asserts they belong
    together. ``python -m relviz checkpoints --bind``.
    """
    json_path = Path(json_path)
    try:
        read_checkpoint_info(json_path)
        return False
    except ValueError as exc:
        if files.HASH_KEY not in str(exc):
            raise
    data = json.loads(json_path.read_text(encoding="utf-8"))
    data.pop(files.HASH_KEY, None)
    weights = json_path.with_suffix(".safetensors")

    def fail(problem: str) -> ValueError:
        return ValueError(f"checkpoint {json_path.stem!r} ({weights}): {problem}")

    config = ModelConfig.from_dict(data["model"])
    _, tensors, _ = _read_weights(weights, fail)
    _check_tensors(tensors, build_model(config, seed=0), config.scheme, fail)
    files.write_pair(json_path.parent, json_path.stem, tensors, data)
    _, written, _ = _read_weights(weights, fail)
    if written.keys() != tensors.keys() or not all(
            written[key].dtype == tensors[key].dtype and torch.equal(written[key], tensors[key]) for key in tensors):
        raise fail("the rewritten weights differ from the original ones")
    read_checkpoint_info(json_path)
    return True


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
    json_path = directory / f"{name}.json"
    if not json_path.exists():
        available = [info.name for info in list_checkpoints(directory)]
        raise ValueError(f"no checkpoint named {name!r} in {directory}; available: "
                         f"{', '.join(available) or 'none'}")
    info = read_checkpoint_info(json_path)
    model = build_model(info.model_config, seed=0)
    _load_weights(info, model)
    return Checkpoint(info, freeze(model).to(resolve_device(device)))


@dataclass(frozen=True)
class CheckpointScan:
    """Every checkpoint in a directory: the valid ones, and why the others cannot be listed."""

    checkpoints: list[CheckpointInfo]
    problems: dict[str, str]


def scan_checkpoints(directory: str | os.PathLike | None = None) -> CheckpointScan:
    """Validate every ``*.json`` in ``directory`` (cheap: the weights are checked on load)."""
    directory = _directory(directory)
    infos, problems = [], {}
    for json_path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            info = read_checkpoint_info(json_path)
            if not info.weights_path.exists():
                raise ValueError(f"checkpoint {info.name!r} ({json_path}): its weights file "
                                 f"{info.weights_path.name} is missing")
        except ValueError as exc:
            problems[json_path.stem] = str(exc)
        else:
            infos.append(info)
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
