"""``python -m relviz bench --only mistakes``: the checker on mistakes no list holds (relviz.check.mistakes), every
verdict verified from outside its search (relviz.check.verify).

Per registered kind: seeded cases (seeds --mistakes-seed …), each a named mistake at these or other settings, two or
three composed, a transformation real bugs apply, or noise; the counts of verdicts that hold up ('ok' that equals the
reference, a named cause whose proof reproduces every compared cell, 'no cause is named', or a refusal naming the
field) and of WRONG ones, with the seconds the checks took; and how many verdicts the last gate
(relviz.check.api.confirmed) kept from naming a cause a search had accepted on fewer cells. Target: 0 WRONG.
"""
from __future__ import annotations

from relviz.bench.report import BenchContext, Column, SectionResult, Target, load_average


def mistakes_section(ctx: BenchContext) -> SectionResult:
    from relviz.check.verify import OUTCOMES, sweep

    per_kind = ctx.options.get("mistakes_per_kind") or (1 if ctx.quick else 300)
    seed = ctx.options.get("mistakes_seed") or 0
    budget = ctx.options.get("mistakes_budget") or (1.0 if ctx.quick else 120.0)
    chosen = ctx.options.get("mistakes_kinds")
    tallies = sweep(per_kind, seed=seed, only=chosen.split(",") if chosen else None, budget_s=budget,
                    log=ctx.log)
    rows = []
    for kind, tally in tallies.items():
        cases = sum(tally.counts.values())
        rows.append({"kind": kind, "cases": cases, **{k: tally.counts[k] for k in OUTCOMES},
                     "WRONG": tally.counts["WRONG"], "gated": tally.gated, "seconds": tally.seconds,
                     "per_case": tally.seconds / max(1, cases)})
        ctx.log(f"mistakes {kind}: {cases} cases, {tally.counts}, {tally.seconds:.1f} s")
    totals = {k: sum(r[k] for r in rows) for k in ("cases", *OUTCOMES, "WRONG", "gated", "seconds")}
    rows.append({"kind": "all", **totals, "per_case": totals["seconds"] / max(1, totals["cases"])})
    wrong = [(kind, w) for kind, tally in tallies.items() for w in tally.wrong]
    return SectionResult(
        name="mistakes", title=f"Checker: seeded mistakes no list holds, every verdict verified (seed {seed})",
        columns=[Column("kind", "kind"), Column("cases", "cases"), Column("ok", "ok (= reference)"),
                 Column("named", "named (proof reproduces)"), Column("cannot tell", "no cause named"),
                 Column("refused", "refused (field named)"), Column("WRONG", "WRONG"),
                 Column("gated", "cause taken back by the last gate"),
                 Column("seconds", "s", lambda s: f"{s:.1f}"), Column("per_case", "s / case", lambda s: f"{s:.2f}")],
        rows=rows,
        targets=[Target("0 WRONG verdicts (ok for a wrong upload, or a cause that does not reproduce it)", not wrong,
                        f"{len(wrong)} WRONG" + ("".join(f"; {kind} seed {s} ({how})" for kind, (s, how, _)
                                                         in wrong[:6]) if wrong else ""))],
        notes=[f"python -m relviz bench --only mistakes --mistakes-seed {seed} --mistakes-per-kind {per_kind} "
               f"--mistakes-budget {budget:g}: each kind stops after {budget:g} s of checks (a RoPE cache's settings "
               f"search costs seconds per case); load average at the end {load_average()}"])
