"""Live cells: the page retrains one setting with a small budget, next to the stored run."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import relviz.experiments.cost as cost
from relviz.experiments.bounded_child import run_bounded
from relviz.experiments.cases import run_in_fresh_process
from relviz.experiments.extrapolation import evaluate_lengths
from relviz.experiments.fit import fit
from relviz.experiments.plan import IMPLEMENTATIONS, Plan
from relviz.experiments.readings import settings_of
from relviz.tasks import make_task
from relviz.training.evaluation import EVAL_SEED, evaluate


def plan_from_setup(section: dict[str, Any]) -> Plan:
    """The plan knobs a stored section was run with (model and training), for a live rerun."""
    model, training = section["setup"]["model"], section["setup"]["training"]
    return Plan(d_model=model["d_model"], n_heads=model["n_heads"], d_ff=model["d_ff"],
                batch_size=training["batch_size"], lr=training["lr"], stop_loss=training["stop_loss"],
                stop_patience=training["stop_patience"])


def live_offset_work(section: dict[str, Any], layers: int, max_steps: int) -> int:
    """Upper bound of :func:`live_offset`'s training work, steps × length × layers summed over
    its models (relviz.app.training_queue's measure of CPU time)."""
    counted = section["setup"]["counted"]
    return sum(max_steps * (s + counted) * layers for s in section["setup"]["shifts"])


def live_extrapolation_work(section: dict[str, Any], max_steps: int) -> int:
    """Upper bound of :func:`live_extrapolation`'s training work (one model)."""
    setup = section["setup"]
    return max_steps * setup["train_length"] * setup["layers"]


def live_offset(section: dict[str, Any], setting_id: str, layers: int, *, seed: int, max_steps: int,
                shifts: list[int] | None = None,
                progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Retrain one setting × layer count at every s (or ``shifts``), one seed, at most
    ``max_steps`` steps each, with the stored run's model and training settings."""
    plan = plan_from_setup(section)
    setting = next(s for s in settings_of(section) if s.id == setting_id)
    counted = section["setup"]["counted"]
    shifts = list(shifts or section["setup"]["shifts"])
    out = []
    for n, s in enumerate(shifts):
        task = make_task("shift", s=s)

        def report(step: int, total: int, loss: float, n: int = n, s: int = s) -> None:
            if progress is not None:
                progress((n + step / total) / len(shifts),
                         f"s = {s} ({n + 1}/{len(shifts)}): step {step}/{total}, loss {loss:.3f}")

        result = fit(plan.model_config(setting, layers), task, max_steps=max_steps, batch_size=plan.batch_size,
                     length=s + counted, lr=plan.lr, seed=seed, stop_loss=plan.stop_loss,
                     stop_patience=plan.stop_patience, progress=report)
        out.append({"s": s, "accuracy": evaluate(result.model, task, length=s + counted, seed=EVAL_SEED),
                    "steps": result.steps})
    if progress is not None:
        progress(1.0, "done")
    return out


def live_extrapolation(section: dict[str, Any], setting_id: str, *, seed: int, max_steps: int,
                       progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Retrain one scheme at the stored training length and evaluate it at every factor."""
    setup = section["setup"]
    plan = plan_from_setup(section).replace(
        extrap_task_s=setup["task_params"]["s"], extrap_layers=setup["layers"],
        extrap_train_length=setup["train_length"], extrap_factors=tuple(setup["factors"]))
    setting = next(s for s in settings_of(section) if s.id == setting_id)
    task = make_task("shift", s=plan.extrap_task_s)

    def report(step: int, total: int, loss: float) -> None:
        if progress is not None:
            progress(0.8 * step / total, f"training: step {step}/{total}, loss {loss:.3f}")

    result = fit(plan.model_config(setting, plan.extrap_layers), task, max_steps=max_steps,
                 batch_size=plan.batch_size, length=plan.extrap_train_length, lr=plan.lr, seed=seed,
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience, progress=report)
    if progress is not None:
        progress(0.85, "evaluating at every length")
    rows = evaluate_lengths(result.model, task, plan)
    if progress is not None:
        progress(1.0, "done")
    return rows


def live_cost(impl: str, lengths: list[int], *, chunk: int = 128, repeats: int = 2,
              progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Measure one implementation at a few lengths, each case in a fresh process that is bounded
    (one thread, an address-space cap, a time limit) and dies with the server
    (relviz.experiments.bounded_child.run_bounded)."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLEMENTATIONS)}")
    rows = []
    for n, length in enumerate(lengths):
        if progress is not None:
            progress(n / len(lengths), f"{IMPLEMENTATIONS[impl]} at L = {length}")
        res = run_in_fresh_process({"impl": impl, "L": length, "repeats": repeats, "chunk": chunk},
                                   lambda m: None, run=run_bounded)
        rows.append(cost.cost_row(impl, length, res))
    if progress is not None:
        progress(1.0, "done")
    return rows
