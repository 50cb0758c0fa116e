"""Training, evaluation and checkpoints of the small transformer, and ``python -m relviz train``.

One job per module:

- :mod:`relviz.training.loop`: :func:`train` (AdamW, warm-up + cosine, seeded weights and
  batches; the global RNG is left alone, so the app can call it in-process), the per-scheme
  training defaults, :func:`freeze`;
- :mod:`relviz.training.evaluation`: :func:`evaluate` (accuracy on fresh samples at any
  length the model can run at) and :func:`run_text` (one typed sequence, as the app shows it);
- :mod:`relviz.training.checkpoints`: save, load and validate checkpoints (safetensors +
  JSON, never a pickle), list them, retrain the shipped ones;
- :mod:`relviz.training.cli`: the ``python -m relviz train`` command.
"""
from __future__ import annotations

from relviz.training.checkpoints import (
    CHECKPOINT_DIR, Checkpoint, CheckpointInfo, CheckpointScan, check_name, list_checkpoints, load_checkpoint,
    read_checkpoint_info, save_checkpoint, scan_checkpoints, shipped_name, train_shipped,
)
from relviz.training.evaluation import EVAL_SEED, TextRun, eval_samples, evaluate, run_text
from relviz.training.loop import (
    DEFAULT_TRAINING, SCHEME_DEFAULTS, SHIPPED_TASK, Optimization, TrainProgress, TrainResult, freeze,
    scheme_defaults, train,
)

__all__ = [
    "CHECKPOINT_DIR", "EVAL_SEED", "DEFAULT_TRAINING", "SHIPPED_TASK", "SCHEME_DEFAULTS", "scheme_defaults",
    "TrainProgress", "TrainResult", "Optimization", "freeze",
    "train", "evaluate", "eval_samples", "CheckpointInfo", "Checkpoint", "CheckpointScan", "TextRun", "run_text",
    "save_checkpoint", "load_checkpoint", "read_checkpoint_info", "list_checkpoints",
    "scan_checkpoints", "check_name", "shipped_name", "train_shipped",
]
