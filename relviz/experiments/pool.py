"""The job pool: (function, spec, label) jobs in worker processes, plain dicts in and out.

Trainings run in worker processes (multiprocessing, spawn), one torch thread each: for this
tiny model one thread per process is several times faster than one process with several.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable
from typing import Any

import torch

#: A job: (function run in a worker, its plain-dict spec, a label for the log).
Job = tuple[Callable[[dict[str, Any]], dict[str, Any]], dict[str, Any], str]


def _init_worker() -> None:
    torch.set_num_threads(1)
    try:  # Linux: a worker dies with the runner (no orphans left computing after Ctrl-C or kill)
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_jobs(jobs: list[Job], workers: int,
              log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run (function, spec, label) jobs, ``workers`` processes at a time (1: in this process).

    Results come back in job order. The costliest jobs should come first (better packing).
    """
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    total = len(jobs)
    if workers <= 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for index, (fn, spec, label) in enumerate(jobs):
                results[index] = fn(spec)
                log(f"[{index + 1}/{total}] {label}: {_job_summary(results[index])}")
        finally:
            torch.set_num_threads(threads)
        return results  # type: ignore[return-value]
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                                  initializer=_init_worker)
    try:
        futures = {pool.submit(fn, spec): index for index, (fn, spec, _) in enumerate(jobs)}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            index = futures[future]
            results[index] = future.result()
            log(f"[{done}/{total}] {jobs[index][2]}: {_job_summary(results[index])}")
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results  # type: ignore[return-value]


def _job_summary(result: dict[str, Any]) -> str:
    if "accuracy" in result:
        return f"{result['accuracy']:.1%} after {result['steps']} steps ({result['seconds']:.1f} s)"
    first = result["per_length"][0]["accuracy"]
    return f"{first:.1%} at 1x after {result['steps']} steps ({result['seconds']:.1f} s)"
