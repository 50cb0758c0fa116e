"""Training loop, evaluation, checkpoints, and the ``python -m relviz train`` command.

- :func:`train` trains a :class:`~relviz.model.RelvizTransformer` on a task and measures its
  accuracy on held-out samples (a fixed evaluation seed) at the training length. It is
  deterministic for a seed and leaves the global RNG alone, so the app can call it in-process.
- :func:`evaluate` measures a model on fresh samples at any length it can run at.
- Checkpoints are two files, ``<dir>/<name>.safetensors`` (weights) and ``<dir>/<name>.json``
  (scheme, model config, task, training settings, measured accuracy, train seconds, relviz
  version). Loading never unpickles anything: safetensors and JSON only, both validated
  against the model the JSON describes; any problem is a ValueError naming the file.
- :func:`list_checkpoints`, :func:`load_checkpoint` and :meth:`Checkpoint.run` are what the
  app calls: list, load by name, run a typed sequence through the model.

The shipped checkpoints (one per scheme, task ``shift``) are rebuilt by
``python -m relviz train --shipped``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from relviz import __version__
from relviz._checks import check_int, resolve_device
from relviz.model import MAX_LENGTH as MODEL_MAX_LENGTH
from relviz.model import SCHEMES, ModelConfig, RelvizTransformer, build_model
from relviz.tasks import DEFAULT_TASK, TASKS, Task, make_task, parse_text, render_tokens, task_param_specs

__all__ = [
    "CHECKPOINT_DIR", "EVAL_SEED", "DEFAULT_TRAINING", "SHIPPED_TASK", "SCHEME_DEFAULTS", "scheme_defaults",
    "TrainProgress", "TrainResult",
    "train", "evaluate", "CheckpointInfo", "Checkpoint", "CheckpointScan", "TextRun", "run_text",
    "save_checkpoint", "load_checkpoint", "read_checkpoint_info", "list_checkpoints",
    "scan_checkpoints", "check_name", "shipped_name", "train_shipped", "add_arguments", "run",
]

#: Where the shipped checkpoints live, and the default directory of every function here.
CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
#: The held-out samples that :func:`train` measures accuracy on.
EVAL_SEED = 2_718_281
#: Evaluation draws about this many tokens (at least 1 sequence, at most EVAL_MAX_SAMPLES).
EVAL_TOKENS = 32_768
EVAL_MAX_SAMPLES = 1024
#: Defaults of the shipped checkpoints (and of the CLI): ≥ 99% on shift for every scheme
#: that can address offset −5, in well under a minute of CPU time.
DEFAULT_TRAINING: dict[str, Any] = {"steps": 1000, "batch_size": 32, "length": 32, "lr": 4e-3, "seed": 0}
#: The task every shipped checkpoint is trained on.
SHIPPED_TASK: dict[str, Any] = {"name": DEFAULT_TASK, "params": {"s": 5}}
#: Where a scheme's defaults depart from ModelConfig's and DEFAULT_TRAINING (the shipped
#: checkpoints and `python -m relviz train --scheme S` use them). ALiBi's penalty only grows
#: with distance, so no head can single out offset −5 by position alone: the model composes
#: it over layers. Measured on shift-by-5, one thread: 2 layers 72 %, 3 layers 84–91 %,
#: 4 layers 92–97.6 %, 5 layers 98.4 %, 6 narrow layers (d_ff 64, lr 1e-2) 99.6 % in 42 s
#: (relviz/checkpoints/README.md has the settings of each).
SCHEME_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "alibi": {"model": {"n_layers": 6, "d_ff": 64}, "training": {"lr": 1e-2}},
}


def scheme_defaults(scheme: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ModelConfig fields, train() arguments) a scheme trains with by default."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; known schemes: {', '.join(SCHEMES)}")
    departures = SCHEME_DEFAULTS.get(scheme, {})
    model = {name: getattr(ModelConfig(), name) for name in ("d_model", "n_layers", "n_heads", "d_ff")}
    return model | departures.get("model", {}), DEFAULT_TRAINING | departures.get("training", {})

FORMAT = "relviz-checkpoint"
FORMAT_VERSION = 1
MAX_JSON_BYTES = 1 << 20
#: What train() accepts; a checkpoint's JSON must describe a run within them.
MAX_STEPS = 1_000_000
MAX_BATCH_SIZE = 4096
MAX_SEED = 2**63 - 1
MAX_WEIGHTS_BYTES = 64 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


# ---------------------------------------------------------------------------------------
# Training


@dataclass(frozen=True)
class TrainProgress:
    """What a progress callback gets: st.progress(p.fraction, text=p.text) in the app."""

    step: int
    steps: int
    loss: float
    seconds: float

    @property
    def fraction(self) -> float:
        return self.step / self.steps

    @property
    def text(self) -> str:
        return f"step {self.step}/{self.steps} · loss {self.loss:.3f} · {self.seconds:.1f} s"


@dataclass
class TrainResult:
    """A trained model (in eval mode) and everything a checkpoint records about it."""

    model: RelvizTransformer
    task: Task
    accuracy: float
    train_seconds: float
    steps: int
    batch_size: int
    length: int
    lr: float
    seed: int
    final_loss: float

    @property
    def model_config(self) -> ModelConfig:
        return self.model.config


def _lr_factor(step: int, steps: int) -> float:
    """Linear warm-up over the first 5% of steps, then cosine decay to zero."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


@dataclass
class Optimization:
    """The optimizer, its schedule and the batch generator of one run: what relviz.train.train
    and the experiments' early-stopping fit share, so both train exactly the same way."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    generator: torch.Generator

    @classmethod
    def for_model(cls, model: RelvizTransformer, *, lr: float, steps: int, seed: int,
                  device: torch.device | str = "cpu") -> Optimization:
        """AdamW, warm-up then cosine decay over ``steps``, batches seeded by ``seed``."""
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, steps))
        return cls(optimizer, scheduler, torch.Generator(device=device).manual_seed(seed))

    def step(self, model: RelvizTransformer, task: Task, batch_size: int, length: int) -> torch.Tensor:
        """One step on a fresh batch: cross-entropy on the positions that count, gradient
        clipping at 1. Returns the loss tensor (reading it with .item() waits for the device)."""
        inputs, targets, mask = task.sample(batch_size, length, self.generator)
        logits, _ = model(inputs)
        loss = F.cross_entropy(logits[mask], targets[mask])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return loss


def freeze(model: RelvizTransformer) -> RelvizTransformer:
    """Eval mode, no gradients: a trained model is read-only from here on (shared by sessions)."""
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def _check_pair(model_config: ModelConfig, task: Task) -> None:
    if not isinstance(model_config, ModelConfig):
        raise ValueError(f"model_config must be a ModelConfig; got {type(model_config).__name__}")
    if not isinstance(task, Task):
        raise ValueError(f"task must be a relviz.tasks.Task; got {type(task).__name__}")
    if model_config.vocab_size != task.vocab_size:
        raise ValueError(f"model_config.vocab_size must equal the task's vocabulary size "
                         f"{task.vocab_size} ({task.alphabet!r}); got {model_config.vocab_size}")


def train(model_config: ModelConfig, task: Task, *, steps: int = DEFAULT_TRAINING["steps"],
          batch_size: int = DEFAULT_TRAINING["batch_size"], length: int = DEFAULT_TRAINING["length"],
          lr: float = DEFAULT_TRAINING["lr"], seed: int = DEFAULT_TRAINING["seed"],
          progress: Callable[[TrainProgress], Any] | None = None,
          device: torch.device | str | None = "cpu") -> TrainResult:
    """Train a fresh model on ``task`` and measure its accuracy on held-out samples.

    AdamW with warm-up and cosine decay, cross-entropy on the positions that count. The
    initial weights and every batch depend only on ``seed`` (the global RNG is not touched);
    accuracy is measured at ``length`` on samples from the fixed :data:`EVAL_SEED`.
    ``progress`` is called about 100 times, and at the last step, with a :class:`TrainProgress`.
    """
    _check_pair(model_config, task)
    steps = check_int("steps", steps, minimum=1, maximum=MAX_STEPS)
    batch_size = check_int("batch_size", batch_size, minimum=1, maximum=MAX_BATCH_SIZE)
    seed = check_int("seed", seed, minimum=0, maximum=MAX_SEED)
    if not _valid_lr(lr):
        raise ValueError(f"lr must be a number in (0, 1]; got {lr!r}")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be a callable taking a TrainProgress, or None")
    device = resolve_device(device)

    model = build_model(model_config, seed=seed).to(device)
    length = task.check_length(model.check_length(length))
    optimization = Optimization.for_model(model, lr=lr, steps=steps, seed=seed, device=device)
    report_every = max(1, steps // 100)
    start = time.perf_counter()
    model.train()
    loss_value = float("nan")
    for step in range(1, steps + 1):
        loss = optimization.step(model, task, batch_size, length)
        if progress is not None and (step % report_every == 0 or step == steps):
            loss_value = loss.item()
            progress(TrainProgress(step, steps, loss_value, time.perf_counter() - start))
    loss_value = loss.item()
    seconds = time.perf_counter() - start
    freeze(model)
    accuracy = evaluate(model, task, length=length, seed=EVAL_SEED)
    return TrainResult(model, task, accuracy, seconds, steps, batch_size, length, float(lr), seed, loss_value)


def eval_samples(length: int) -> int:
    """How many sequences :func:`evaluate` draws by default at a length (≈ EVAL_TOKENS tokens)."""
    return max(1, min(EVAL_MAX_SAMPLES, math.ceil(EVAL_TOKENS / length)))


def evaluate(model: RelvizTransformer, task: Task, *, length: int, seed: int,
             samples: int | None = None) -> float:
    """Token accuracy of ``model`` on ``samples`` fresh sequences of ``task`` at ``length``.

    Raises ValueError (saying why) if the model's scheme cannot run at that length, e.g. a
    learned absolute embedding beyond its max_len. Batches are sized so that the attention
    weights of one batch stay near 64 MB per layer.
    """
    if not isinstance(model, RelvizTransformer):
        raise ValueError(f"model must be a RelvizTransformer; got {type(model).__name__}")
    _check_pair(model.config, task)
    length = task.check_length(model.check_length(length))
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    samples = eval_samples(length) if samples is None else check_int("samples", samples, minimum=1,
                                                                      maximum=1_000_000)
    device = next(model.parameters()).device
    per_batch = max(1, min(256, (1 << 24) // (model.config.n_heads * length * length)))
    generator = torch.Generator(device=device).manual_seed(seed)
    correct = counted = 0
    with torch.inference_mode():
        for start in range(0, samples, per_batch):
            inputs, targets, mask = task.sample(min(per_batch, samples - start), length, generator)
            logits, _ = model(inputs)
            correct += int(((logits.argmax(-1) == targets) & mask).sum())
            counted += int(mask.sum())
    return correct / counted


# ---------------------------------------------------------------------------------------
# Running a typed sequence


@dataclass(frozen=True)
class TextRun:
    """One typed sequence through a model: what the app shows.

    ``attentions``: one [H, L, L] tensor per layer. ``correct`` is True where the prediction
    matches the task's target; ``accuracy`` is None when no position counts (too short).
    """

    text: str
    tokens: torch.Tensor         # [L]
    logits: torch.Tensor         # [L, vocab]
    predictions: torch.Tensor    # [L]
    predicted_text: str
    targets: torch.Tensor        # [L]
    target_text: str             # the task's answer; masked positions shown as "·"
    mask: torch.Tensor           # [L] bool
    correct: torch.Tensor        # [L] bool (False where mask is False)
    accuracy: float | None
    attentions: list[torch.Tensor] = field(repr=False)


def run_text(model: RelvizTransformer, task: Task, text: str) -> TextRun:
    """Parse ``text`` in the task's alphabet, run the model, compare with the task's targets.

    Bad characters and lengths the scheme cannot run at raise ValueError with the reason.
    Safe on a model shared by many users (inference mode; nothing stored on the module).
    """
    _check_pair(model.config, task)
    tokens = parse_text(text, task.alphabet)
    model.check_length(tokens.numel())
    device = next(model.parameters()).device
    with torch.inference_mode():
        logits, attentions = model(tokens.to(device)[None])
    logits = logits[0].cpu()
    predictions = logits.argmax(-1)
    targets, mask = task.targets(tokens)
    correct = (predictions == targets) & mask
    counted = int(mask.sum())
    target_text = "".join(ch if counts else "·"
                          for ch, counts in zip(render_tokens(targets, task.alphabet), mask.tolist()))
    return TextRun(
        text=render_tokens(tokens, task.alphabet), tokens=tokens, logits=logits, predictions=predictions,
        predicted_text=render_tokens(predictions, task.alphabet), targets=targets, target_text=target_text,
        mask=mask, correct=correct, accuracy=int(correct.sum()) / counted if counted else None,
        attentions=[a[0].cpu() for a in attentions])


# ---------------------------------------------------------------------------------------
# Checkpoints


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
    """Write ``<directory>/<name>.safetensors`` and ``<name>.json``; return the JSON path.

    Weights are written first and the JSON last, each through a temporary file and an
    atomic rename: a checkpoint is listed only once both files are complete.
    """
    from safetensors.torch import save_file

    if not isinstance(result, TrainResult):
        raise ValueError(f"result must be a TrainResult from train(); got {type(result).__name__}")
    name = check_name(name)
    directory = _directory(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights_path, json_path = directory / f"{name}.safetensors", directory / f"{name}.json"
    tensors = {key: value.detach().to("cpu", torch.float32).contiguous()
               for key, value in result.model.state_dict().items()}
    tmp = weights_path.with_suffix(".safetensors.tmp")
    save_file(tensors, str(tmp), metadata={"format": FORMAT, "name": name})
    _make_readable(tmp)
    os.replace(tmp, weights_path)
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_metadata(result, name), indent=2) + "\n", encoding="utf-8")
    _make_readable(tmp)
    os.replace(tmp, json_path)
    return json_path


def _make_readable(path: Path) -> None:
    """rw-r--r--, like any file in the repo (safetensors creates its files owner-only)."""
    os.chmod(path, 0o644)


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


def _valid_lr(lr: object) -> bool:
    return not isinstance(lr, bool) and isinstance(lr, (int, float)) and 0 < lr <= 1


def read_checkpoint_info(json_path: str | os.PathLike) -> CheckpointInfo:
    """Read and validate a checkpoint's JSON (not its weights). ValueError names file and problem."""
    json_path = Path(json_path)
    name = json_path.stem

    def fail(problem: str) -> ValueError:
        return ValueError(f"checkpoint {name!r} ({json_path}): {problem}")

    try:
        size = json_path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise fail(f"the JSON file is {size} bytes; a checkpoint's JSON is at most {MAX_JSON_BYTES}")
        data = json.loads(json_path.read_text(encoding="utf-8"))
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
    if not _valid_lr(data["lr"]):
        raise fail(f"'lr' must be a number in (0, 1] (what train() accepts); got {data['lr']!r:.40}")
    if not 0.0 <= data["accuracy"] <= 1.0:
        raise fail(f"'accuracy' must be a fraction from 0 to 1; got {data['accuracy']}")
    if not (math.isfinite(data["train_seconds"]) and data["train_seconds"] >= 0):
        raise fail(f"'train_seconds' must be a finite number >= 0; got {data['train_seconds']}")
    return CheckpointInfo(
        name=name, json_path=json_path, weights_path=json_path.with_suffix(".safetensors"),
        model_config=config, task=task, train_length=data["train_length"], steps=data["steps"],
        batch_size=data["batch_size"], lr=float(data["lr"]), seed=data["seed"],
        accuracy=float(data["accuracy"]), train_seconds=float(data["train_seconds"]),
        relviz_version=data["relviz_version"])


def _load_weights(info: CheckpointInfo, model: RelvizTransformer) -> None:
    """Read the safetensors file (no pickle) and check every tensor against the model."""
    from safetensors.torch import load_file

    path = info.weights_path

    def fail(problem: str) -> ValueError:
        return ValueError(f"checkpoint {info.name!r} ({path}): {problem}")

    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise fail("the weights file does not exist (a checkpoint needs both .json and "
                   ".safetensors)") from exc
    if size > MAX_WEIGHTS_BYTES:
        raise fail(f"the weights file is {size} bytes; the small model's weights are far below "
                   f"{MAX_WEIGHTS_BYTES}")
    try:
        tensors = load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for corrupt headers/data
        raise fail(f"not a valid safetensors file: {exc}") from exc
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        parts = [f"{what} tensors {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"
                 for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
        raise fail(f"the weights do not match a {info.scheme!r} model as the JSON describes it: "
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
    model.load_state_dict(tensors, strict=True)


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
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return Checkpoint(info, model.to(resolve_device(device)))


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


# ---------------------------------------------------------------------------------------
# Command line: python -m relviz train


#: scheme parameter -> (flag, type, help)
_SCHEME_FLAGS: dict[str, tuple[str, type, str]] = {
    "max_len": ("--max-len", int, "learned: number of absolute positions"),
    "clip": ("--clip", int, "shaw: clipping distance k"),
    "num_buckets": ("--num-buckets", int, "t5: number of buckets"),
    "max_distance": ("--max-distance", int, "t5: max_distance"),
    "skew_distances": ("--skew-distances", int, "skew: rows of E_r (distances)"),
    "rope_base": ("--rope-base", float, "rope: base of the rotation frequencies"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = ModelConfig()
    parser.add_argument("--shipped", action="store_true",
                        help="retrain every shipped checkpoint (one per scheme, task shift s=5, the "
                             "default settings below) into --out; options other than --out, --threads, "
                             "--quiet and --json are ignored")
    parser.add_argument("--scheme", choices=list(SCHEMES), default="t5", help="position scheme (default t5)")
    for param, (flag, kind, help_text) in _SCHEME_FLAGS.items():
        parser.add_argument(flag, type=kind, default=None, dest=param, metavar=param.split("_")[-1].upper(),
                            help=f"{help_text} (default {getattr(defaults, param)})")
    parser.add_argument("--bidirectional", action="store_true",
                        help="let queries attend to future keys too (not for skew); default: causal")
    for flag, field_name, help_text in (("--d-model", "d_model", "model width"),
                                        ("--layers", "n_layers", "number of layers"),
                                        ("--heads", "n_heads", "attention heads"),
                                        ("--d-ff", "d_ff", "MLP width")):
        parser.add_argument(flag, type=int, default=None, dest=field_name, metavar="N",
                            help=f"{help_text} (default {getattr(defaults, field_name)}"
                                 f"{_departures_text('model', field_name)})")
    parser.add_argument("--task", choices=list(TASKS), default=DEFAULT_TASK,
                        help=f"task (default {DEFAULT_TASK})")
    for task_name in TASKS:
        for param, flag, default, help_text in task_param_specs(task_name):
            parser.add_argument(f"--{flag}", type=int, default=None, dest=f"task_{task_name}_{param}",
                                metavar=param.upper(),
                                help=f"task {task_name}: {help_text} (default {default})")
    for flag, key, kind, help_text in (("--steps", "steps", int, "optimizer steps"),
                                       ("--batch-size", "batch_size", int, "sequences per step"),
                                       ("--length", "length", int, "training sequence length"),
                                       ("--lr", "lr", float, "peak learning rate (warm-up, cosine decay)"),
                                       ("--seed", "seed", int, "seed of the weights and the batches")):
        parser.add_argument(flag, type=kind, default=None, dest=key,
                            help=f"{help_text} (default {DEFAULT_TRAINING[key]}{_departures_text('training', key)})")
    parser.add_argument("--name", default=None, help="checkpoint name (default <scheme>-<task>)")
    parser.add_argument("--out", default=str(CHECKPOINT_DIR), metavar="DIR",
                        help="directory to write <name>.safetensors and <name>.json to "
                             "(default: the shipped checkpoints, relviz/checkpoints)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: fastest for this small model, especially "
                             "on a shared machine)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the checkpoint summary as JSON")


def _departures_text(part: str, key: str) -> str:
    """What --help adds for a setting some scheme changes by default, e.g. "; alibi 4"."""
    return "".join(f"; {scheme} {values[part][key]}" for scheme, values in SCHEME_DEFAULTS.items()
                   if key in values.get(part, {}))


def _with_defaults(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model fields and training arguments of a run: flags given, else the scheme's defaults."""
    model_fields, training = scheme_defaults(args.scheme)
    model_fields = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in model_fields.items()}
    training = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in training.items()}
    return model_fields, training


class _ProgressBar:
    """A text progress bar on stderr: redrawn in place on a terminal, every 10% otherwise."""

    def __init__(self, label: str, stream=sys.stderr) -> None:
        self.label, self.stream = label, stream
        self.tty = stream.isatty()
        self.last_decile = -1

    def __call__(self, p: TrainProgress) -> None:
        filled = int(30 * p.fraction)
        line = f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {p.text}"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if p.step == p.steps else ""))
        elif int(10 * p.fraction) != self.last_decile:
            self.last_decile = int(10 * p.fraction)
            self.stream.write(line + "\n")
        self.stream.flush()


def _task_from_args(args: argparse.Namespace) -> Task:
    params, stray = {}, []
    for task_name in TASKS:
        for param, flag, _, _ in task_param_specs(task_name):
            value = getattr(args, f"task_{task_name}_{param}")
            if value is None:
                continue
            if task_name == args.task:
                params[param] = value
            else:
                stray.append(f"--{flag} applies to task {task_name}, not {args.task}")
    if stray:
        raise ValueError("; ".join(stray))
    return make_task(args.task, **params)


def _config_from_args(args: argparse.Namespace, task: Task) -> ModelConfig:
    values: dict[str, Any] = {}
    for param, (flag, _, _) in _SCHEME_FLAGS.items():
        value = getattr(args, param)
        if value is None:
            continue
        if param not in SCHEMES[args.scheme]:
            owner = next(s for s, ps in SCHEMES.items() if param in ps)
            raise ValueError(f"{flag} applies to scheme {owner}, not {args.scheme}")
        values[param] = value
    model_fields, _ = _with_defaults(args)
    return ModelConfig(vocab_size=task.vocab_size, scheme=args.scheme, causal=not args.bidirectional,
                       **model_fields, **values)


def run(args: argparse.Namespace) -> int:
    try:
        threads = check_int("--threads", args.threads, minimum=1, maximum=256)
        torch.set_num_threads(threads)
        if args.shipped:
            def factory(scheme: str):
                return None if args.quiet else _ProgressBar(f"{scheme:>10}")
            paths = train_shipped(args.out, progress_factory=factory)
            infos = [read_checkpoint_info(p) for p in paths]
        else:
            task = _task_from_args(args)
            config = _config_from_args(args, task)
            name = check_name(args.name or f"{config.scheme}-{task.name}")
            progress = None if args.quiet else _ProgressBar(name)
            _, training = _with_defaults(args)
            result = train(config, task, progress=progress, **training)
            infos = [read_checkpoint_info(save_checkpoint(result, name, args.out))]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([info.summary() for info in infos], indent=2))
    else:
        for info in infos:
            print(f"{info.name}: {info.scheme} on {info.task.describe()}, accuracy {info.accuracy:.2%} at "
                  f"length {info.train_length}, {info.train_seconds:.1f} s -> {info.json_path}")
    return 0
