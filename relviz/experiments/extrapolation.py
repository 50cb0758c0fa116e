"""Study 2, length extrapolation: train every scheme at one length, evaluate at 1× … 8× it.

A scheme that cannot run at a length (learned absolute positions beyond max_len) is recorded
as "cannot run" with the reason.
"""
from __future__ import annotations

import time
from typing import Any

from relviz.experiments.fit import fit, spread
from relviz.experiments.plan import EXPERIMENTS, Plan, Setting, model_setup, plan_dict, training_setup
from relviz.experiments.pool import Job
from relviz.tasks import make_task
from relviz.training.evaluation import EVAL_SEED, evaluate


def extrapolation_job(spec: dict[str, Any]) -> dict[str, Any]:
    cpu = time.process_time()
    plan = Plan(**spec["plan"])
    setting = Setting.from_dict(spec["setting"])
    task = make_task("shift", s=plan.extrap_task_s)
    result = fit(plan.model_config(setting, plan.extrap_layers), task, max_steps=plan.extrap_max_steps,
                 batch_size=plan.batch_size, length=plan.extrap_train_length, lr=plan.lr, seed=spec["seed"],
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience)
    per_length = evaluate_lengths(result.model, task, plan)
    return {"per_length": per_length, "steps": result.steps, "seconds": result.seconds,
            "cpu_seconds": time.process_time() - cpu}


def evaluate_lengths(model, task, plan: Plan) -> list[dict[str, Any]]:
    """Accuracy at every evaluation length, or the reason the model cannot run there."""
    out = []
    for factor in plan.extrap_factors:
        length = factor * plan.extrap_train_length
        try:
            model.check_length(length)
        except ValueError as exc:
            out.append({"factor": factor, "eval_length": length, "accuracy": None, "cannot_run": str(exc)})
            continue
        out.append({"factor": factor, "eval_length": length,
                    "accuracy": evaluate(model, task, length=length, seed=EVAL_SEED), "cannot_run": None})
    return out


def extrapolation_jobs(plan: Plan) -> list[Job]:
    plan_dict_ = plan_dict(plan)
    return [(extrapolation_job, {"plan": plan_dict_, "setting": setting.to_dict(), "seed": seed},
             f"extrapolation {setting.id} seed {seed}")
            for setting in plan.extrap_settings for seed in plan.seeds]


def extrapolation_section(plan: Plan, outputs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    results, index = [], 0
    for setting in plan.extrap_settings:
        runs = outputs[index: index + len(plan.seeds)]
        index += len(plan.seeds)
        for position, factor in enumerate(plan.extrap_factors):
            cells = [r["per_length"][position] for r in runs]
            reasons = [c["cannot_run"] for c in cells if c["cannot_run"]]
            entry: dict[str, Any] = {"setting": setting.id, "factor": factor,
                                     "eval_length": factor * plan.extrap_train_length}
            if reasons:
                entry |= {"accuracy": None, "mean": None, "min": None, "max": None, "std": None,
                          "cannot_run": reasons[0]}
            else:
                accuracy = [round(c["accuracy"], 5) for c in cells]
                entry |= {"accuracy": accuracy, **spread(accuracy), "cannot_run": None}
            results.append(entry)
    steps = {setting.id: [r["steps"] for r in outputs[i * len(plan.seeds):(i + 1) * len(plan.seeds)]]
             for i, setting in enumerate(plan.extrap_settings)}
    return {
        "title": EXPERIMENTS["length_extrapolation"],
        "setup": {
            "task": "shift", "task_params": {"s": plan.extrap_task_s}, "layers": plan.extrap_layers,
            "train_length": plan.extrap_train_length, "factors": list(plan.extrap_factors),
            "eval_lengths": [f * plan.extrap_train_length for f in plan.extrap_factors],
            "seeds": list(plan.seeds), "model": model_setup(plan),
            "training": training_setup(plan, {str(plan.extrap_layers): plan.extrap_max_steps}),
            "steps_taken": steps,
            "evaluation": f"relviz.training.evaluate at each length, evaluation seed {EVAL_SEED} (about 32 000 "
                          "tokens per length)",
            "method": (f"One model per (scheme, seed), trained at L = {plan.extrap_train_length} on shift s = "
                       f"{plan.extrap_task_s}, then evaluated unchanged at every length. A length the model "
                       "cannot run at is recorded with the reason instead of an accuracy."),
        },
        "settings": [s.to_dict() for s in plan.extrap_settings],
        "results": results,
        "seconds": round(seconds, 1),
    }
