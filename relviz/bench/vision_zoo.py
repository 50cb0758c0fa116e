"""``python -m relviz bench --only vision_zoo``: every image and video position family transformers ships, found by
walking its source (relviz.vision_zoo), each case exact against transformers, refused with a reason, or WRONG."""
from __future__ import annotations

import time

from relviz.bench.report import BenchContext, Column, SectionResult, Target, load_average

__all__ = ["vision_zoo_section"]


def vision_zoo_section(ctx: BenchContext) -> SectionResult:
    from relviz.vision_zoo import EXACT, REFUSED, UNRUN, WRONG, counts, discover, sweep

    families = discover()
    start = time.perf_counter()
    outcomes = sweep(families, quick=ctx.quick, progress=lambda f, done: ctx.log(
        f"vision_zoo {f.kind} {f.module}: " + ", ".join(f"{o.case} {o.status}" for o in done)[:200]))
    seconds = time.perf_counter() - start
    by_kind = counts(outcomes)
    rows = [{"kind": kind, **tally} for kind, tally in by_kind.items()]
    rows.append({"kind": "all", **{k: sum(r[k] for r in rows) for k in ("families", "cases", EXACT, REFUSED, WRONG,
                                                                         UNRUN)}})
    wrong = [o for o in outcomes if o.status == WRONG]
    for o in wrong:
        ctx.log(f"WRONG {o.family.kind} {o.family.module} {o.case}: {o.reason}")
    exact_families = sorted({f"{o.family.module} ({o.family.kind})" for o in outcomes if o.status == EXACT})
    return SectionResult(
        name="vision_zoo", title=f"Every image and video position family transformers ships ({len(families)} found by "
                                 "walking its modeling source): exact, refused with a reason, or WRONG",
        columns=[Column("kind", "marker"), Column("families", "families"), Column("cases", "cases"),
                 Column(EXACT, "exact"), Column(REFUSED, "refused (reason given)"), Column(WRONG, "WRONG"),
                 Column(UNRUN, "not run (reason given)")],
        rows=rows, targets=[Target("0 WRONG (every case exact or refused with its reason)", not wrong,
                                   f"{len(wrong)} WRONG" + (": " + "; ".join(f"{o.family.module} {o.case}"
                                                                             for o in wrong[:8]) if wrong else ""))],
        notes=[f"exact: {', '.join(exact_families)}",
               f"python -m relviz bench --only vision_zoo{' --quick' if ctx.quick else ''}: {seconds:.0f} s over "
               f"{len(outcomes)} cases; load average {load_average()}"])
