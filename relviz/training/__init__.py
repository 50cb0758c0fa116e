"""Training, evaluation and checkpoints of the small transformer, and ``python -m relviz train``.

One job per module:

- :mod:`relviz.training.loop`: :func:`train` (AdamW, warm-up + cosine, seeded weights and
  batches; the global RNG is left alone, so the app can call it in-process), the per-scheme
  training defaults, :func:`freeze`;
- :mod:`relviz.training.evaluation`: :func:`evaluate` (accuracy on fresh samples at any
  length the model can run at) and :func:`run_text` (one typed sequence, as the app shows it);
- :mod:`relviz.training.checkpoints`: save, load, validate and migrate checkpoints (one
  safetensors file, its description in the header, never a pickle), list them, retrain the
  shipped ones; :mod:`relviz.training.checkpoint_io` writes and reads that file,
  :mod:`relviz.training.checkpoint_legacy` reads the old two-file checkpoints;
- :mod:`relviz.cli.train`: the ``python -m relviz train`` command.

The names below load with their module on first use (:mod:`relviz._lazy`).
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "checkpoints": ("CHECKPOINT_DIR", "Checkpoint", "CheckpointInfo", "CheckpointScan", "check_name",
                    "list_checkpoints", "load_checkpoint", "migrate_checkpoint", "read_checkpoint_info", "save_checkpoint",
                    "scan_checkpoints", "shipped_name", "train_shipped"),
    "evaluation": ("EVAL_SEED", "TextRun", "eval_samples", "evaluate", "run_text"),
    "loop": ("DEFAULT_TRAINING", "SCHEME_DEFAULTS", "SHIPPED_TASK", "Optimization", "TrainProgress", "TrainResult",
             "freeze", "scheme_defaults", "train"),
})
