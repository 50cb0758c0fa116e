"""The bounds of in-app training and measuring (relviz.app.training_queue enforces them).

A module of plain numbers, free of torch, so that a page or a link validator can read the bounds
without loading the model code.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrainingCaps", "CAPS"]


@dataclass(frozen=True)
class TrainingCaps:
    """The bounds of one in-app training run and of a session (see the module docstring)."""

    max_layers: int = 3
    max_heads: int = 4
    d_model: int = 64
    max_steps: int = 800
    min_steps: int = 10
    min_length: int = 8
    max_length: int = 48
    #: steps × length × layers: 600 steps at length 32 with 2 layers (≈ 15–30 s on one core).
    max_work: int = 38_400
    #: The same measure summed over every model an experiment's live cell trains (≈ 2 minutes).
    max_cell_work: int = 150_000
    max_parameters: int = 250_000
    #: A run that takes longer than this (a very busy machine) is stopped.
    max_seconds: float = 120.0
    max_concurrent: int = 1
    max_models_per_session: int = 3
    #: Runs one visitor (one client address) may start per window, across reloads and tabs.
    max_trainings_per_session: int = 12
    #: Runs one client address starts per window (several visitors behind one NAT share it).
    max_trainings_per_address: int = 48
    #: Runs the whole server starts per window, every visitor together.
    max_trainings_per_server: int = 120
    #: The quota window (seconds): a run counts against both budgets for this long.
    quota_window_s: float = 3600.0
    # scheme parameters: each scheme declares its own app range (relviz.schemes, Param.app_min/app_max)
    max_task_param: int = 32

    def describe(self) -> str:
        """One paragraph for the page and the README."""
        return (f"at most {self.max_layers} layers, {self.max_heads} heads, d_model {self.d_model}, "
                f"{self.max_parameters:,} parameters; {self.min_steps}–{self.max_steps} steps at length "
                f"{self.min_length}–{self.max_length}, and steps × length × layers ≤ {self.max_work:,}; "
                f"stopped after {self.max_seconds:.0f} s; {self.max_concurrent} training at a time on the "
                f"server; {self.max_trainings_per_session} runs per visitor and {self.max_trainings_per_server} "
                f"on the whole server per {self.quota_window_s / 60:.0f} minutes, the last "
                f"{self.max_models_per_session} models kept")


CAPS = TrainingCaps()
