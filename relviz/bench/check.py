"""``python -m relviz bench --only check``: how long the checker's fit-then-explain search takes on large uploads.

A 1024 × 1024 T5 map and a 4096 × 128 RoPE cos cache, each correct (settings searched), with a mistake the
search has to explain (for RoPE also settings on no grid, read from the data), and corrupted by noise or random rows (nothing to name: the search's worst case, it
tries everything). Targets (issue 31): ≤ 2 s for the T5 map and ≤ 3 s for the cos cache, on this CPU.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from relviz.bench.report import BenchContext, Column, SectionResult, Target, load_average


def _cases(quick: bool) -> list[tuple[str, str, Callable[[], object]]]:
    """(family, case, the call) per case; each call runs relviz.check.check on an upload built beforehand."""
    import relviz.check as C
    from relviz.check.rope import rope_settings, variant_cache
    from relviz.positions import t5_bucket_map

    side, rows, head = (256, 512, 64) if quick else (1024, 4096, 128)
    t5 = t5_bucket_map(side, side, max_distance=300, device="cpu").numpy()
    rows_off = t5 + (np.arange(side)[:, None] % 97 == 3)
    rope = rope_settings(head_dim=head, base=500000.0, max_position_embeddings=max(rows, 4096))
    cos = variant_cache("rope_cos", "", (rows, head), rope)
    bf16 = variant_cache("rope_cos", "angles computed in bfloat16", (rows, head), rope)
    noisy = cos + np.random.default_rng(0).normal(0, 1e-3, cos.shape)
    odd = rope_settings(head_dim=head, base=31337.0, q_offset=7, max_position_embeddings=max(rows + 7, 4096))
    beyond = variant_cache("rope_cos", "", (rows, head), odd)        # settings on no grid: read from the data
    t5_name, rope_name = f"T5 map {side} × {side}", f"RoPE cos cache {rows} × {head}"
    return [
        (t5_name, "correct, settings searched (max_distance 300: on no grid)", lambda: C.check("t5", t5)),
        (t5_name, "max_distance not passed on (given 128)", lambda: C.check("t5", t5, C.Settings())),
        (t5_name, "every 97th row off by one, settings searched (no cause)", lambda: C.check("t5", rows_off)),
        (rope_name, "correct, settings searched", lambda: C.check("rope_cos", cos)),
        (rope_name, "angles in bfloat16, settings searched", lambda: C.check("rope_cos", bf16)),
        (rope_name, "noise, settings searched (no cause)", lambda: C.check("rope_cos", noisy)),
        (rope_name, "base 31337 from position 7 (given 10000 from 0)",
         lambda: C.check("rope_cos", beyond, rope_settings(head_dim=head))),
    ]


def check_section(ctx: BenchContext) -> SectionResult:
    rows = []
    for family, case, call in _cases(ctx.quick):
        ctx.log(f"check: {family}, {case}")
        call()  # warm-up: imports, caches
        times, cpu = [], []
        for _ in range(1 if ctx.quick else 3):
            start, start_cpu = time.perf_counter(), time.process_time()
            result = call()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        cause = result.cause.name if result.cause else ("matches" if result.ok else "no cause")
        rows.append({"family": family, "case": case, "seconds": statistics.median(times),
                     "cpu_seconds": statistics.median(cpu), "verdict": cause})
    targets = []
    for family, limit in (("T5 map", 2.0), ("RoPE cos cache", 3.0)):
        mine = [r for r in rows if r["family"].startswith(family)]
        worst = max(r["seconds"] for r in mine)
        measured = not ctx.quick
        targets.append(Target(f"{mine[0]['family']}: every case ≤ {limit:g} s", worst <= limit if measured else None,
                              f"worst {worst:.2f} s" + ("" if measured else " (--quick: smaller uploads)")))
    return SectionResult(
        name="check", title="Checker: fit, then explain (relviz.check.check)",
        columns=[Column("family", "upload"), Column("case", "case"),
                 Column("seconds", "median s", lambda s: f"{s:.2f}"),
                 Column("cpu_seconds", "CPU s", lambda s: f"{s:.2f}"), Column("verdict", "named cause")],
        rows=rows, targets=targets,
        notes=[f"load average at the end: {load_average()}; wall-clock seconds on a loaded machine exceed the CPU "
               "seconds this process used (torch may use several threads: CPU s can exceed wall s)"])
