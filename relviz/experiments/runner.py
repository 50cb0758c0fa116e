"""The runner: the selected studies' jobs in one pool (costliest first), then the results document."""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from relviz import __version__
from relviz._checks import check_int
from relviz.experiments.cost import run_cost
from relviz.experiments.extrapolation import extrapolation_jobs, extrapolation_section
from relviz.experiments.offset import offset_jobs, offset_section
from relviz.experiments.plan import EXPERIMENTS, FORMAT, FORMAT_VERSION, FULL_PLAN, Plan
from relviz.experiments.pool import Job, run_jobs


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_experiments(plan: Plan = FULL_PLAN, *, only: Iterable[str] | None = None, workers: int = 2,
                    log: Callable[[str], None] = lambda message: None,
                    previous: dict[str, Any] | None = None, ray_address: str | None = None,
                    settings: Iterable[str] | None = None) -> dict[str, Any]:
    """Run the selected experiments (default: all) and return the results document.

    ``ray_address``: train on that Ray cluster instead of local processes (pool.run_jobs).

    ``previous``: an already validated results document whose other experiments are kept
    (``--only`` updates one section of an existing file). ``settings``: run only the settings
    with these ids and add them to ``previous``'s sections, whose other settings are kept as
    they were measured (the document's ``run`` records which settings this run measured).
    """
    import psutil

    names = list(only) if only else list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown experiment {', '.join(unknown)}; known: {', '.join(EXPERIMENTS)}")
    workers = check_int("workers", workers, minimum=1, maximum=64)
    quick = plan != FULL_PLAN or bool(previous and previous.get("quick"))
    settings = list(settings) if settings else None
    if settings:
        plan = _only_settings(plan, names, settings, previous)
    wall0, load0 = time.perf_counter(), _load_average()
    own0 = _own_cpu_seconds()
    job_cpu = 0.0       # the training jobs' own CPU time, measured in whichever process ran them
    outside_cpu = 0.0   # CPU of work outside this process: the jobs in worker processes, the bench subprocesses
    sections: dict[str, Any] = dict(previous["experiments"]) if previous else {}
    seconds: dict[str, float] = {}

    jobs: list[Job] = []
    spans: dict[str, tuple[int, int]] = {}
    for name, make in (("offset_resolution", offset_jobs), ("length_extrapolation", extrapolation_jobs)):
        if name in names:
            batch = make(plan)
            spans[name] = (len(jobs), len(jobs) + len(batch))
            jobs += batch
    if jobs:
        # costliest first: more layers, more steps, longer sequences
        order = sorted(range(len(jobs)), key=lambda i: -_job_cost(jobs[i][1], plan))
        t0 = time.perf_counter()
        outputs_sorted = run_jobs([jobs[i] for i in order], workers, log, ray_address=ray_address)
        train_seconds = time.perf_counter() - t0
        outputs: list[dict[str, Any]] = [None] * len(jobs)  # type: ignore[list-item]
        for position, i in enumerate(order):
            outputs[i] = outputs_sorted[position]
        job_cpu = sum(r["cpu_seconds"] for r in outputs)
        if workers > 1 or ray_address is not None:  # run_jobs ran them in worker processes
            outside_cpu += job_cpu
        for name, (a, b) in spans.items():
            share = sum(r["seconds"] for r in outputs[a:b]) / max(1e-9, sum(r["seconds"] for r in outputs))
            seconds[name] = round(train_seconds * share, 1)
            build = offset_section if name == "offset_resolution" else extrapolation_section
            sections[name] = build(plan, outputs[a:b], seconds[name])
            if settings:
                sections[name] = _merge_settings(previous["experiments"][name], sections[name])
    if "cost" in names:
        children0 = _children_cpu_seconds()
        sections["cost"] = run_cost(plan, log)
        outside_cpu += _children_cpu_seconds() - children0
        seconds["cost"] = sections["cost"]["seconds"]

    ordered = {name: sections[name] for name in EXPERIMENTS if name in sections}
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    earlier = []
    if previous:  # --only: the sections kept from the previous file keep the record of their run
        earlier = list(previous.get("earlier_runs", [])) + [
            {"created": previous["created"]} | previous["run"]]
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "relviz_version": __version__,
        "torch_version": torch.__version__, "created": created,
        "quick": quick,
        "machine": {"cpu_count": os.cpu_count() or 1, "memory_total_bytes": psutil.virtual_memory().total,
                    "platform": platform.platform()},
        "run": {"experiments": names, "workers": workers, "threads_per_worker": 1,
                "engine": f"ray ({ray_address})" if ray_address else ("joblib loky" if workers > 1 else "in process"),
                "wall_seconds": round(time.perf_counter() - wall0, 1),
                "cpu_seconds": round(_own_cpu_seconds() - own0 + outside_cpu, 1),
                "training_job_cpu_seconds": round(job_cpu, 1) if jobs else None,
                "load_average_start": load0, "load_average_end": _load_average(),
                "seconds_per_experiment": seconds} | ({"settings": settings} if settings else {}),
        "earlier_runs": earlier,
        "experiments": ordered,
    }


#: Setup keys that must agree for new settings to join a section measured earlier.
_SAME_SETUP = ("task", "task_params", "layers", "train_length", "factors", "seeds", "model", "shifts", "counted")


def _only_settings(plan: Plan, names: list[str], ids: list[str], previous: dict[str, Any] | None) -> Plan:
    """The plan restricted to the settings ``ids`` (which must be in the plan), checked against ``previous``."""
    if previous is None:
        raise ValueError("adding settings needs an existing results file to add them to")
    if "cost" in names:
        raise ValueError("settings apply to the training experiments only (offset_resolution, length_extrapolation)")
    changes = {}
    for name, attr in (("offset_resolution", "offset_settings"), ("length_extrapolation", "extrap_settings")):
        if name not in names:
            continue
        if name not in previous["experiments"]:
            raise ValueError(f"the results file has no {name} section to add settings to")
        known = {s.id: s for s in getattr(plan, attr)}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ValueError(f"unknown setting {', '.join(unknown)} for {name}; known: {', '.join(known)}")
        changes[attr] = tuple(known[i] for i in ids)
    return plan.replace(**changes)


def _merge_settings(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with ``new``'s settings added (or replaced, for an id measured again)."""
    for key in _SAME_SETUP:
        if old["setup"].get(key) != new["setup"].get(key):
            raise ValueError(f"cannot add settings to a section measured with another setup: {key} is "
                             f"{old['setup'].get(key)!r} there and {new['setup'].get(key)!r} now")
    ids = {s["id"] for s in new["settings"]}
    merged = dict(old)
    merged["settings"] = [s for s in old["settings"] if s["id"] not in ids] + new["settings"]
    merged["results"] = [r for r in old["results"] if r["setting"] not in ids] + new["results"]
    if "steps_taken" in old["setup"]:
        merged["setup"] = dict(old["setup"], steps_taken=old["setup"]["steps_taken"] | new["setup"]["steps_taken"])
    merged["seconds"] = round(old["seconds"] + new["seconds"], 1)
    return merged


def _own_cpu_seconds() -> float:
    """CPU time of this process alone."""
    t = os.times()
    return t.user + t.system


def _children_cpu_seconds() -> float:
    """CPU time of this process's finished, waited-for children (the bench subprocesses).

    Not used for the trainings: joblib's loky workers (and Ray's) outlive the run, so their CPU never
    shows here; each job measures its own instead.
    """
    t = os.times()
    return t.children_user + t.children_system


def _job_cost(spec: dict[str, Any], plan: Plan) -> float:
    if "s" in spec:
        length = spec["s"] + plan.counted
        return spec["layers"] * plan.steps_for(spec["layers"]) * (length + length * length / 32)
    length = plan.extrap_train_length
    return plan.extrap_layers * plan.extrap_max_steps * (length + length * length / 32)
