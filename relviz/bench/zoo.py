"""``python -m relviz bench --only zoo`` and ``--only observe``: the sweep over every text family transformers
ships (relviz.zoo), and the first read of a family by the observer in a fresh process (target ≤ 2 s)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

from relviz.bench.report import BenchContext, Column, SectionResult, Target, load_average

__all__ = ["zoo_section", "observe_section", "search_section", "FIRST_READ_FAMILIES"]

#: families whose first read is timed: a plain decoder, a NoPE-global one, hybrids (linear attention, Mamba)
FIRST_READ_FAMILIES = ("llama", "exaone4", "qwen3_next", "bamba", "gemma3_text")
FIRST_READ_TARGET_S = 2.0
#: the whole settings search (every family, every case) finishes within this on the clock
SEARCH_LIMIT_S = 1300

_FIRST_READ = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
start = time.perf_counter()
import transformers
transformers.logging.set_verbosity_error()
imported = time.perf_counter() - start
from relviz.zoo import tiny_config
from relviz.observe import verified_plan
config = tiny_config(sys.argv[1])
start = time.perf_counter()
verified_plan(config)
first = time.perf_counter() - start
start = time.perf_counter()
verified_plan(config)
print(json.dumps({"import_s": imported, "first_s": first, "cached_s": time.perf_counter() - start}))
"""


def observe_section(ctx: BenchContext) -> SectionResult:
    rows = []
    for model_type in FIRST_READ_FAMILIES[:2] if ctx.quick else FIRST_READ_FAMILIES:
        done = subprocess.run([sys.executable, "-c", _FIRST_READ, model_type], capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode:
            rows.append({"family": model_type, "import_s": float("nan"), "first_s": float("nan"),
                         "cached_s": float("nan")})
            ctx.log(f"observe {model_type}: {done.stderr.strip().splitlines()[-1:]}")
            continue
        rows.append({"family": model_type, **json.loads(done.stdout.strip().splitlines()[-1])})
        ctx.log(f"observe {model_type}: first read {rows[-1]['first_s']:.2f} s")
    worst = max(r["first_s"] for r in rows)
    return SectionResult(
        name="observe", title="The observer's first read of a family, in a fresh process (tiny model, a few short forwards)",
        columns=[Column("family", "model_type"), Column("import_s", "import transformers", lambda s: f"{s:.2f} s"),
                 Column("first_s", "first read", lambda s: f"{s:.2f} s"),
                 Column("cached_s", "again (cached)", lambda s: f"{s * 1e3:.1f} ms")],
        rows=rows, targets=[Target(f"first read of a family ≤ {FIRST_READ_TARGET_S:g} s (after the import)",
                                   worst <= FIRST_READ_TARGET_S, f"worst {worst:.2f} s")],
        notes=[f"load average {load_average()}; the import of transformers is paid once per server process"])


def zoo_section(ctx: BenchContext) -> SectionResult:
    from relviz.zoo import summary, sweep, text_families

    families = text_families()
    outcomes = sweep(families[:12] if ctx.quick else families)
    counts = summary(outcomes)
    rows = [{"outcome": "exact", "families": counts["exact"],
             "which": ", ".join(o.model_type for o in outcomes if o.exact)}]
    for group, n in counts["refused"].items():
        rows.append({"outcome": f"refused: {group}", "families": n,
                     "which": ", ".join(o.model_type for o in outcomes if o.group == group)})
    share = counts["exact"] / max(counts["built"], 1)
    return SectionResult(
        name="zoo", title=f"Every text family transformers ships ({counts['families']}), built tiny: exact or refused",
        columns=[Column("outcome", "outcome"), Column("families", "families"), Column("which", "model_types")],
        rows=rows, targets=[Target("0 silent misreadings (every family exact or refused with its reason)",
                                   all(o.exact or o.reason for o in outcomes), "by construction of verified_plan"),
                            Target("≥ 95% of the families transformers builds read exactly", share >= 0.95,
                                   f"{counts['exact']} of {counts['built']} built ({share:.0%})")],
        notes=[f"{counts['families']} families, {counts['built']} built and run by transformers, {counts['exact']} "
               f"exact; sweep {counts['seconds']} s; load average {load_average()}"])


def search_section(ctx: BenchContext) -> SectionResult:
    """relviz.zoo_search over every family (or --search-families), per field varied: exact / refused / transformers
    refuses / silent; the silent cases listed one by one (there must be none)."""
    from relviz.zoo import text_families
    from relviz.zoo_search import EXACT, FIELDS, REFUSED, SILENT, TRANSFORMERS, counts, search

    chosen = ctx.options.get("search_families")
    families = chosen.split(",") if chosen else text_families()[:4] if ctx.quick else text_families()
    seed = ctx.options.get("search_seed") or 0
    per_field = ctx.options.get("search_per_field") or (1 if ctx.quick else None)
    started = time.perf_counter()

    def progress(model_type: str, done: list) -> None:       # one line per family: a long sweep shows it is moving
        outcomes = ", ".join(f"{n} {k}" for k, n in Counter(r.outcome for r in done).most_common())
        ctx.log(f"zoo_search {model_type}: {len(done)} cases, {outcomes}, {sum(r.seconds for r in done):.1f} s")

    # (a quick run's few cases do not pay for the fresh processes' imports)
    workers = ctx.options.get("search_workers") or (1 if ctx.quick else len(os.sched_getaffinity(0)))
    results = search(families, seed=seed, per_field=per_field, progress=progress, workers=workers)
    by_field = counts(results)
    searched = len({r.case.model_type for r in results})
    rows = [{"field": f, **{k: by_field.get(f, {}).get(k, 0) for k in (EXACT, REFUSED, TRANSFORMERS, SILENT)}}
            for f in FIELDS]
    rows.append({"field": "all", **{k: sum(r[k] for r in rows) for k in (EXACT, REFUSED, TRANSFORMERS, SILENT)}})
    silent = [r for r in results if r.outcome == SILENT]
    for r in silent:
        ctx.log(f"SILENT {r.case.model_type} {r.case.field} = {r.case.value}: {r.reason[:300]}")
    seconds = sum(r.seconds for r in results)
    wall = time.perf_counter() - started
    return SectionResult(
        name="zoo_search", title=f"The zoo's settings searched ({len(results)} cases over {searched} of "
                                 f"{len(families)} families (the others: no case applies, or transformers cannot "
                                 "build their defaults), "
                                 f"seed {seed}, {per_field or 'every'} per field)",
        columns=[Column("field", "field varied"), Column(EXACT, "exact"), Column(REFUSED, "refused (reason given)"),
                 Column(TRANSFORMERS, "transformers refuses"), Column(SILENT, "SILENT misreading")],
        rows=rows, targets=[Target("0 silent misreadings (read without refusal, but transformers runs otherwise)",
                                   not silent, f"{len(silent)} silent" + (": " + "; ".join(
                                       f"{r.case.model_type} {r.case.field}={r.case.value}" for r in silent[:8])
                                       if silent else ""))]
        + ([Target(f"the whole sweep ≤ {SEARCH_LIMIT_S:,} s on the clock", wall <= SEARCH_LIMIT_S,
                   f"{wall:.0f} s over {workers} process{'es' if workers > 1 else ''} ({seconds:.0f} s of cases), "
                   f"load average {load_average()}")] if not chosen and not per_field else []),
        notes=[f"python -m relviz bench --only zoo_search --search-seed {seed}"
               + (" --quick" if ctx.quick and not ctx.options.get("search_per_field") else
                  f" --search-per-field {per_field}" if per_field else "")
               + (f" --search-families {chosen}" if chosen else "")
               + f"; {seconds:.0f} s over the cases, {wall:.0f} s on the clock over {workers} process"
               + ("es" if workers > 1 else "") + f"; load average {load_average()}"])
