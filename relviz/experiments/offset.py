"""Study 1, offset resolution: accuracy on shift-by-s for a grid of s, per scheme setting and
layer count, one small model per (setting, layers, s, seed).

Sign convention: relative position = key index − query index (j − i); the answer of
shift-by-s sits at j − i = −s.
"""
from __future__ import annotations

import time
from typing import Any

from relviz.experiments.fit import fit, spread
from relviz.experiments.plan import EXPERIMENTS, Plan, Setting, model_setup, plan_dict, training_setup
from relviz.experiments.pool import Job
from relviz.tasks import make_task
from relviz.training.evaluation import EVAL_SEED, eval_samples, evaluate


def offset_job(spec: dict[str, Any]) -> dict[str, Any]:
    cpu = time.process_time()
    plan = Plan(**spec["plan"])
    setting = Setting.from_dict(spec["setting"])
    task = make_task("shift", s=spec["s"])
    length = spec["s"] + plan.counted
    result = fit(plan.model_config(setting, spec["layers"]), task, max_steps=plan.steps_for(spec["layers"]),
                 batch_size=plan.batch_size, length=length, lr=plan.lr, seed=spec["seed"],
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience)
    accuracy = evaluate(result.model, task, length=length, seed=EVAL_SEED)
    return {"accuracy": accuracy, "steps": result.steps, "seconds": result.seconds,
            "cpu_seconds": time.process_time() - cpu}


def offset_jobs(plan: Plan) -> list[Job]:
    jobs = []
    plan_dict_ = plan_dict(plan)
    for setting in plan.offset_settings:
        for layers in plan.layers:
            for s in plan.shifts:
                for seed in plan.seeds:
                    spec = {"plan": plan_dict_, "setting": setting.to_dict(), "layers": layers, "s": s, "seed": seed}
                    jobs.append((offset_job, spec, f"offset {setting.id} {layers}L s={s} seed {seed}"))
    return jobs


def offset_section(plan: Plan, outputs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    answers = [eval_samples(s + plan.counted) * plan.counted for s in plan.shifts]
    results, index = [], 0
    for setting in plan.offset_settings:
        for layers in plan.layers:
            for s in plan.shifts:
                runs = outputs[index: index + len(plan.seeds)]
                index += len(plan.seeds)
                accuracy = [round(r["accuracy"], 5) for r in runs]
                results.append({"setting": setting.id, "layers": layers, "s": s, "accuracy": accuracy,
                                **spread(accuracy), "steps": [r["steps"] for r in runs],
                                "seconds": [round(r["seconds"], 2) for r in runs]})
    return {
        "title": EXPERIMENTS["offset_resolution"],
        "setup": {
            "task": "shift", "shifts": list(plan.shifts), "layers": list(plan.layers), "seeds": list(plan.seeds),
            "counted": plan.counted, "lengths": f"train and evaluation length L = s + {plan.counted}: "
                                                 f"every s has {plan.counted} answers per sequence",
            "model": model_setup(plan),
            "training": training_setup(plan, {str(n): plan.steps_for(n) for n in plan.layers}),
            "evaluation": f"relviz.training.evaluate at the training length, fixed evaluation seed {EVAL_SEED}: "
                          f"{min(answers)}–{max(answers)} answers per model",
            "method": ("One model per (setting, layers, s, seed), trained on shift-by-s alone. For one seed, "
                       "every s starts from the same initial weights and sees the same input batches (the "
                       "targets differ), so the curves over s are paired. Chance is about 10% (10 tokens)."),
        },
        "settings": [s.to_dict() for s in plan.offset_settings],
        "results": results,
        "seconds": round(seconds, 1),
    }
