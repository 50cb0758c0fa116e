"""One attention forward measured alone in a fresh process: the cases of the cost study.

Each implementation the Experiments page compares (``plan.IMPLEMENTATIONS``) is one :class:`Case`
here: how to build its inputs and its call, and how much memory it needs (with a 2x margin, so a
case that would not fit is skipped, not swapped). ``python -m relviz bench --only attention`` runs
the same cases, so the study's figures and the benchmark's are one measurement.

``python -m relviz.experiments.cases --case JSON`` runs one case and prints its result as a JSON line.
Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from relviz.attention import shaw_attention, skew_attention
from relviz.chunked import chunked_extra_bytes, chunked_skew_attention
from relviz.measure import measure_forward
from relviz.memory import format_bytes
from relviz.reference import naive_shaw_attention, naive_skew_attention

__all__ = ["ATTN_B", "ATTN_H", "ATTN_D", "Case", "CASES", "run_case", "run_in_fresh_process"]

#: The shape every case runs at: batch, heads, head width (fp32, causal).
ATTN_B, ATTN_H, ATTN_D = 1, 8, 64

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator]   # q, k, v [B, H, L, D]; the generator


@dataclass(frozen=True)
class Case:
    """One implementation: ``call(spec, inputs)`` builds its tables from the generator and returns the
    forward as a zero-argument call (the output [B, H, L, D]); ``need_bytes(spec)`` is what it needs."""

    call: Callable[[dict[str, Any], Inputs], Callable[[], torch.Tensor]]
    need_bytes: Callable[[dict[str, Any]], int]


def _distance_table(length: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(length, ATTN_D, generator=gen)                            # E_r [L, D]


def _shaw_tables(length: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    clip = length - 1                                                             # every distance its own row
    return (torch.randn(2 * clip + 1, ATTN_D, generator=gen), torch.randn(2 * clip + 1, ATTN_D, generator=gen),
            clip)


def _skew(spec: dict[str, Any], x: Inputs) -> Callable[[], torch.Tensor]:
    q, k, v, gen = x
    e_r = _distance_table(spec["L"], gen)
    return lambda: skew_attention(q, k, v, e_r)[0]


def _skew_naive(spec: dict[str, Any], x: Inputs) -> Callable[[], torch.Tensor]:
    q, k, v, gen = x
    e_r = _distance_table(spec["L"], gen)
    return lambda: naive_skew_attention(q, k, v, e_r, 1 / math.sqrt(ATTN_D))[0]


def _shaw(spec: dict[str, Any], x: Inputs) -> Callable[[], torch.Tensor]:
    q, k, v, gen = x
    rel_k, rel_v, clip = _shaw_tables(spec["L"], gen)
    return lambda: shaw_attention(q, k, v, rel_k, rel_v, clip=clip, causal=True)[0]


def _shaw_naive(spec: dict[str, Any], x: Inputs) -> Callable[[], torch.Tensor]:
    q, k, v, gen = x
    rel_k, rel_v, clip = _shaw_tables(spec["L"], gen)
    return lambda: naive_shaw_attention(q, k, v, rel_k, rel_v, clip, 1 / math.sqrt(ATTN_D))[0]


def _chunked(spec: dict[str, Any], x: Inputs) -> Callable[[], torch.Tensor]:
    q, k, v, gen = x
    e_r = _distance_table(spec["L"], gen)
    return lambda: chunked_skew_attention(q, k, v, e_r, chunk=spec["chunk"])


def _naive_need(tables: int) -> Callable[[dict[str, Any]], int]:
    """The naive path's gathered L × L × D table(s) (shared by the heads: L²·D values each) plus ~3
    [B, H, L, L] attention tensors, with a 2x margin."""
    def need(spec: dict[str, Any]) -> int:
        length = spec["L"]
        return 2 * (tables * length * length * ATTN_D * 4 + 3 * ATTN_B * ATTN_H * length * length * 4)
    return need


def _relviz_need(spec: dict[str, Any]) -> int:
    length = spec["L"]
    return 2 * (4 * ATTN_B * ATTN_H * length * length * 4 + 8 * length * length)


def _chunked_need(spec: dict[str, Any]) -> int:
    return 2 * chunked_extra_bytes(spec["L"], chunk=spec["chunk"], batch=ATTN_B, heads=ATTN_H)


#: implementation (the keys of plan.IMPLEMENTATIONS) -> its case.
CASES: dict[str, Case] = {
    "skew_naive": Case(_skew_naive, _naive_need(1)),
    "shaw_naive": Case(_shaw_naive, _naive_need(2)),               # a^K and a^V: two gathered tables
    "skew": Case(_skew, _relviz_need),
    "shaw": Case(_shaw, _relviz_need),
    "chunked": Case(_chunked, _chunked_need),
}


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process: ``spec`` = {"impl": a key of CASES, "L", "repeats"[, "chunk"]}."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(ATTN_B, ATTN_H, spec["L"], ATTN_D, generator=gen) for _ in range(3))
    return measure_forward(CASES[spec["impl"]].call(spec, (q, k, v, gen)), spec["repeats"])


def run_in_fresh_process(spec: dict[str, Any], log: Callable[[str], None],
                         run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> dict[str, Any]:
    """:func:`run_case` in a fresh process started by ``run`` (the app passes a bounded runner); a case
    whose need exceeds half the available memory, or whose process fails, gives {"skipped": why}."""
    import psutil

    need = CASES[spec["impl"]].need_bytes(spec)
    available = psutil.virtual_memory().available
    if need > available / 2:
        return {"skipped": f"skipped: needs ~{format_bytes(need)}, {format_bytes(available)} available (limit: half)"}
    log(f"attention: {spec['impl']} L={spec['L']}")
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = run([sys.executable, "-m", "relviz.experiments.cases", "--case", json.dumps(spec)], capture_output=True,
               text=True, env=env, timeout=900)
    if proc.returncode != 0:
        return {"skipped": f"failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m relviz.experiments.cases")
    parser.add_argument("--case", required=True, help='JSON spec {"impl": ..., "L": ..., "repeats": ...[, "chunk"]}')
    args = parser.parse_args(argv)
    spec = json.loads(args.case)
    torch.set_num_threads(int(spec.get("threads", torch.get_num_threads())))
    print(json.dumps(run_case(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
