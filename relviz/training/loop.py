"""The training loop: :func:`train` and what it shares with the experiments' early-stopping fit.

:func:`train` trains a :class:`~relviz.model.RelvizTransformer` on a task and measures its
accuracy on held-out samples (a fixed evaluation seed) at the training length. It is
deterministic for a seed and leaves the global RNG alone, so the app can call it in-process.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from relviz._checks import check_int, resolve_device
from relviz.model import ModelConfig, RelvizTransformer, build_model
from relviz.schemes import REGISTRY, get_scheme
from relviz.tasks import DEFAULT_TASK, Task
from relviz.training.evaluation import EVAL_SEED, check_pair, evaluate

__all__ = ["DEFAULT_TRAINING", "SHIPPED_TASK", "SCHEME_DEFAULTS", "scheme_defaults", "MAX_STEPS", "MAX_BATCH_SIZE",
           "MAX_SEED", "valid_lr", "TrainProgress", "TrainResult", "Optimization", "freeze", "train"]

#: Defaults of the shipped checkpoints (and of the CLI): ≥ 99% on shift for every scheme
#: that can address offset −5, in well under a minute of CPU time.
DEFAULT_TRAINING: dict[str, Any] = {"steps": 1000, "batch_size": 32, "length": 32, "lr": 4e-3, "seed": 0}
#: The task every shipped checkpoint is trained on.
SHIPPED_TASK: dict[str, Any] = {"name": DEFAULT_TASK, "params": {"s": 5}}
#: Where a scheme's defaults depart from ModelConfig's and DEFAULT_TRAINING (the shipped
#: checkpoints and `python -m relviz train --scheme S` use them): each scheme declares its own
#: (``Scheme.training_defaults``, with the measurements that chose them).
SCHEME_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    name: cls.training_defaults for name, cls in REGISTRY.items() if cls.training_defaults}


def scheme_defaults(scheme: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ModelConfig fields, train() arguments) a scheme trains with by default."""
    departures = get_scheme(scheme).training_defaults
    model = {name: getattr(ModelConfig(), name) for name in ("d_model", "n_layers", "n_heads", "d_ff")}
    return model | departures.get("model", {}), DEFAULT_TRAINING | departures.get("training", {})
#: What train() accepts; a checkpoint's description must describe a run within them.
MAX_STEPS = 1_000_000
MAX_BATCH_SIZE = 4096
MAX_SEED = 2**63 - 1


def valid_lr(lr: object) -> bool:
    """What train() accepts as a learning rate: a number in (0, 1]."""
    return not isinstance(lr, bool) and isinstance(lr, (int, float)) and 0 < lr <= 1


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
    """The optimizer, its schedule and the batch generator of one run: what relviz.training.train
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
    check_pair(model_config, task)
    steps = check_int("steps", steps, minimum=1, maximum=MAX_STEPS)
    batch_size = check_int("batch_size", batch_size, minimum=1, maximum=MAX_BATCH_SIZE)
    seed = check_int("seed", seed, minimum=0, maximum=MAX_SEED)
    if not valid_lr(lr):
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
