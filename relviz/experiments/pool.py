"""The job pool: (function, spec, label) jobs in worker processes, plain dicts in and out.

Locally the jobs run on joblib's loky processes (workers exit when this process dies: no orphans
left computing after Ctrl-C or a kill); given a Ray address they run on that cluster through
joblib's Ray backend, the same code path. One torch thread per job: for this tiny model one
thread per process is several times faster than one process with several.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

#: A job: (function run in a worker, its plain-dict spec, a label for the log).
Job = tuple[Callable[[dict[str, Any]], dict[str, Any]], dict[str, Any], str]


def _run_job(index: int, fn: Callable[[dict[str, Any]], dict[str, Any]],
             spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    torch.set_num_threads(1)
    return index, fn(spec)


def _ray_backend(address: str) -> None:
    """Connect to the Ray cluster at ``address`` and register joblib's Ray backend (Ray is optional)."""
    try:
        import ray
        from ray.util.joblib import register_ray
    except ImportError as exc:
        raise ValueError("--ray needs Ray on this machine and the cluster: pip install 'ray[default]'") from exc
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    register_ray()


def run_jobs(jobs: list[Job], workers: int, log: Callable[[str], None], *,
             ray_address: str | None = None) -> list[dict[str, Any]]:
    """Run (function, spec, label) jobs, ``workers`` at a time (1 and no Ray: in this process).

    Results come back in job order. The costliest jobs should come first (better packing).
    With ``ray_address`` the jobs run on that Ray cluster, ``workers`` at a time.
    """
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    total = len(jobs)
    if workers <= 1 and ray_address is None:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for index, (fn, spec, label) in enumerate(jobs):
                results[index] = fn(spec)
                log(f"[{index + 1}/{total}] {label}: {_job_summary(results[index])}")
        finally:
            torch.set_num_threads(threads)
        return results  # type: ignore[return-value]
    from joblib import Parallel, delayed, parallel_config

    if ray_address is not None:
        _ray_backend(ray_address)
        config = dict(backend="ray", n_jobs=workers)
        order = "list"                         # joblib's Ray backend returns a list only (logged at the end)
    else:
        config = dict(backend="loky", n_jobs=workers, inner_max_num_threads=1)
        order = "generator_unordered"          # each result logged as soon as it is done
    with parallel_config(**config):
        outputs = Parallel(return_as=order)(
            delayed(_run_job)(index, fn, spec) for index, (fn, spec, _) in enumerate(jobs))
        for done, (index, result) in enumerate(outputs, start=1):
            results[index] = result
            log(f"[{done}/{total}] {jobs[index][2]}: {_job_summary(result)}")
    return results  # type: ignore[return-value]


def _job_summary(result: dict[str, Any]) -> str:
    if "accuracy" in result:
        return f"{result['accuracy']:.1%} after {result['steps']} steps ({result['seconds']:.1f} s)"
    first = result["per_length"][0]["accuracy"]
    return f"{first:.1%} at 1x after {result['steps']} steps ({result['seconds']:.1f} s)"
