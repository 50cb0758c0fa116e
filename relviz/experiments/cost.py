"""Study 3, cost: forward time and peak memory against L for each attention implementation.

The rows come from ``python -m relviz bench --only attention --json`` (relviz skew and Shaw
against the naive L × L × D gather) plus the query-chunked attention of :mod:`relviz.chunked`,
each case in a fresh process. The byte formulas extrapolate the measurements to the memory wall.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relviz.chunked import chunked_bytes
from relviz.experiments.cases import ATTN_B, ATTN_D, ATTN_H, run_in_fresh_process
from relviz.experiments.plan import EXPERIMENTS, Plan
from relviz.memory import attention_matrix_bytes, format_bytes, naive_gather_bytes, skew_table_bytes

__all__ = ["bench_attention", "chunked_case", "cost_row", "run_cost", "wall_length", "fmt_bytes",
           # the byte formulas, from relviz.memory and relviz.chunked (one formula each)
           "naive_gather_bytes", "skew_table_bytes", "attention_matrix_bytes", "chunked_bytes"]


def _repo_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def bench_attention(quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """``python -m relviz bench --only attention --json`` in a subprocess; its parsed JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        command = [sys.executable, "-m", "relviz", "bench", "--only", "attention", "--json", str(out)]
        if quick:
            command.append("--quick")
        log("cost: " + " ".join(command[1:]))
        proc = subprocess.run(command, capture_output=True, text=True, env=_repo_env(), timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"the benchmark failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def chunked_case(length: int, chunk: int, repeats: int, log: Callable[[str], None],
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> dict[str, Any]:
    """The query-chunked forward at ``length`` in a fresh process (relviz.experiments.cases)."""
    return run_in_fresh_process({"impl": "chunked", "L": length, "chunk": chunk, "repeats": repeats}, log, run)


def cost_row(impl: str, length: int, res: dict[str, Any]) -> dict[str, Any]:
    if "skipped" in res:
        return {"impl": impl, "L": length, "forward_s": None, "peak_bytes": None, "delta_bytes": None,
                "skipped": res["skipped"]}
    return {"impl": impl, "L": length, "forward_s": round(res["forward_s"], 6), "peak_bytes": res["peak_bytes"],
            "delta_bytes": res.get("delta_bytes"), "skipped": None}


def run_cost(plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    import psutil

    start = time.perf_counter()
    bench = bench_attention(plan.cost_quick, log)
    section = next(s for s in bench["sections"] if s["name"] == "attention")
    rows = []
    for row in section["rows"]:
        for prefix, suffix in (("relviz", ""), ("naive", "_naive")):
            impl = row["method"] + suffix
            if row.get(f"{prefix}_skipped"):
                rows.append(cost_row(impl, row["L"], {"skipped": row[f"{prefix}_skipped"]}))
            else:
                rows.append(cost_row(impl, row["L"], {"forward_s": row[f"{prefix}_s"],
                                                       "peak_bytes": row[f"{prefix}_peak_bytes"],
                                                       "delta_bytes": row[f"{prefix}_delta_bytes"]}))
    for length in plan.cost_lengths:
        rows.append(cost_row("chunked", length, chunked_case(length, plan.cost_chunk, plan.cost_repeats, log)))
    return {
        "title": EXPERIMENTS["cost"],
        "setup": {
            "batch": ATTN_B, "heads": ATTN_H, "dim": ATTN_D, "dtype": "float32", "causal": True,
            "lengths": sorted({r["L"] for r in rows}), "chunk": plan.cost_chunk,
            "memory_total_bytes": psutil.virtual_memory().total,
            "bench_torch_threads": bench.get("torch_threads"),
            "source": "python -m relviz bench --only attention --json" + (" --quick" if plan.cost_quick else "")
                      + "; chunked cases: python -m relviz.experiments.cases --case",
            "method": ("Each case runs in a fresh process: one warm-up forward, then the median of "
                       f"{plan.cost_repeats} timed forwards under torch.inference_mode(). Δpeak = peak resident "
                       "memory (VmHWM) minus the peak after the inputs were created. Shaw uses clip = L − 1 "
                       "(every distance its own row). A case whose estimated need exceeds half the available "
                       "memory is skipped, with the reason."),
            "bench_notes": section.get("notes", []),
        },
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
    }


def wall_length(bytes_of: Callable[[float], float], memory: float) -> float:
    """The L at which ``bytes_of(L)`` (increasing) reaches ``memory``, by bisection."""
    lo, hi = 1.0, 2.0
    while bytes_of(hi) < memory:
        lo, hi = hi, hi * 2
        if hi > 1e15:
            return math.inf
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if bytes_of(mid) < memory else (lo, mid)
    return hi


def fmt_bytes(n: float) -> str:
    return format_bytes(n)
