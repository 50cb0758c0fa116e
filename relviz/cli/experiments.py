"""python -m relviz experiments [--quick] [--out PATH] [--only NAME] [--workers N] [--full-grid] [--ray ADDRESS]."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from relviz.experiments.plan import EXPERIMENTS, FULL_PLAN, QUICK_PLAN, RESULTS_PATH
from relviz.experiments.readings import cost_reading, extrapolation_reading, offset_reading
from relviz.experiments.runner import run_experiments
from relviz.experiments.schema import load_results, validate_results


_ALIASES = {"offset": "offset_resolution", "length": "length_extrapolation", "extrapolation": "length_extrapolation"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: fewer shifts, lengths and steps, the benchmark's --quick sizes "
                             "(a few minutes, results not meaningful)")
    parser.add_argument("--out", default=str(RESULTS_PATH), metavar="PATH",
                        help="results file to write (default: the shipped relviz/experiments_results.json)")
    parser.add_argument("--only", action="append", metavar="NAME",
                        choices=list(EXPERIMENTS) + list(_ALIASES),
                        help="run only this experiment (repeatable): " + ", ".join(EXPERIMENTS)
                             + " (or offset, length); the other sections of an existing --out file are kept")
    parser.add_argument("--settings", action="append", metavar="ID",
                        help="with --only offset or length: run only this setting (repeatable, by id, e.g. kerple) "
                             "and add it to that section of the existing --out file; the other settings are kept "
                             "as they were measured, and the file records which settings this run measured")
    parser.add_argument("--workers", type=int, default=2,
                        help="training processes, one torch thread each (default 2); with --ray, jobs at a time")
    parser.add_argument("--full-grid", action="store_true",
                        help="every offset 1..40 and 10 seeds (a cluster-sized run; the shipped file uses "
                             "13 offsets and 3 seeds)")
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="run the trainings on this Ray cluster (e.g. ray://head:10001 or auto); needs "
                             "pip install 'ray[default]' here and on the cluster")


def run(args: argparse.Namespace) -> int:
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    if args.full_grid:
        plan = plan.replace(shifts=tuple(range(1, 41)), seeds=tuple(range(10)))
    only = [_ALIASES.get(n, n) for n in args.only] if args.only else None
    out = Path(args.out)
    previous = None
    if only and out.exists():
        try:
            previous = load_results(out)
        except ValueError as exc:
            print(f"note: not keeping the other sections of {out}: {exc}", file=sys.stderr)

    def log(message: str) -> None:
        print(f"  ... {message}", file=sys.stderr, flush=True)

    try:
        if args.settings and not only:
            raise ValueError("--settings needs --only offset or --only length")
        data = run_experiments(plan, only=only, workers=args.workers, log=log, previous=previous,
                               ray_address=args.ray, settings=args.settings)
        validate_results(data, str(out))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    run_info = data["run"]
    print(f"wrote {out}: {', '.join(data['experiments'])} in {run_info['wall_seconds'] / 60:.1f} min wall, "
          f"{run_info['cpu_seconds'] / 60:.1f} min CPU, {run_info['workers']} workers; load average "
          f"{run_info['load_average_start']} -> {run_info['load_average_end']}")
    for name, section in data["experiments"].items():
        reading = {"offset_resolution": offset_reading, "length_extrapolation": extrapolation_reading,
                   "cost": cost_reading}[name](section)
        print(f"\n{EXPERIMENTS[name]}")
        for sentence in reading:
            print(f"  - {sentence}")
    return 0
