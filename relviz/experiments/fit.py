"""Training with early stopping: relviz.training's loop, ended once the loss has settled."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from relviz._checks import check_int
from relviz.model import ModelConfig, build_model
from relviz.training.loop import Optimization, freeze

@dataclass
class FitResult:
    model: Any
    steps: int          # optimizer steps actually taken (early stopping may end before max_steps)
    final_loss: float
    seconds: float


def fit(config: ModelConfig, task, *, max_steps: int, batch_size: int, length: int, lr: float, seed: int,
        stop_loss: float = 0.0, stop_patience: int = 0,
        progress: Callable[[int, int, float], Any] | None = None) -> FitResult:
    """relviz.training.train's loop (same optimizer, schedule over max_steps, clipping, seeded
    weights and batches) with early stopping: it ends once the training loss has stayed below
    ``stop_loss`` for ``stop_patience`` consecutive steps (stop_patience 0: never).

    ``progress(step, max_steps, loss)`` is called about 50 times. Returns the model in eval mode.
    """
    max_steps = check_int("max_steps", max_steps, minimum=1, maximum=1_000_000)
    model = build_model(config, seed=seed)
    length = task.check_length(model.check_length(length))
    optimization = Optimization.for_model(model, lr=lr, steps=max_steps, seed=seed)
    report_every = max(1, max_steps // 50)
    start = time.perf_counter()
    model.train()
    below = 0
    loss_value = float("nan")
    step = 0
    for step in range(1, max_steps + 1):
        loss_value = optimization.step(model, task, batch_size, length).item()
        below = below + 1 if loss_value < stop_loss else 0
        done = stop_patience > 0 and below >= stop_patience
        if progress is not None and (step % report_every == 0 or step == max_steps or done):
            progress(step, max_steps, loss_value)
        if done:
            break
    return FitResult(freeze(model), step, loss_value, time.perf_counter() - start)


def spread(values: Iterable[float]) -> dict[str, float]:
    """mean, min, max and sample standard deviation (n − 1; 0 for one value), rounded."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("spread needs at least one value")
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return {"mean": round(mean, 5), "min": round(min(values), 5), "max": round(max(values), 5),
            "std": round(std, 5)}
