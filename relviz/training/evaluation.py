"""Evaluation: a model's accuracy on fresh samples, and one typed sequence through it.

- :func:`evaluate` measures a model on fresh samples at any length it can run at.
- :func:`run_text` runs a typed sequence and compares it with the task's targets: what the
  app shows (and :meth:`relviz.training.checkpoints.Checkpoint.run` calls).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from relviz._checks import check_int
from relviz.model import ModelConfig, RelvizTransformer
from relviz.tasks import Task, parse_text, render_tokens

__all__ = ["EVAL_SEED", "EVAL_TOKENS", "EVAL_MAX_SAMPLES", "check_pair", "eval_samples", "evaluate", "TextRun",
           "run_text"]

#: The held-out samples that :func:`train` measures accuracy on.
EVAL_SEED = 2_718_281
#: Evaluation draws about this many tokens (at least 1 sequence, at most EVAL_MAX_SAMPLES).
EVAL_TOKENS = 32_768
EVAL_MAX_SAMPLES = 1024


def check_pair(model_config: ModelConfig, task: Task) -> None:
    """ValueError unless ``model_config`` is a ModelConfig and ``task`` a Task of its vocabulary."""
    if not isinstance(model_config, ModelConfig):
        raise ValueError(f"model_config must be a ModelConfig; got {type(model_config).__name__}")
    if not isinstance(task, Task):
        raise ValueError(f"task must be a relviz.tasks.Task; got {type(task).__name__}")
    if model_config.vocab_size != task.vocab_size:
        raise ValueError(f"model_config.vocab_size must equal the task's vocabulary size "
                         f"{task.vocab_size} ({task.alphabet!r}); got {model_config.vocab_size}")


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
    check_pair(model.config, task)
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
    check_pair(model.config, task)
    tokens = parse_text(text, task.alphabet)
    model.check_length(tokens.numel())
    device = next(model.parameters()).device
    with torch.inference_mode():
        logits, attentions = model(tokens.to(device)[None], need_weights=True)
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
