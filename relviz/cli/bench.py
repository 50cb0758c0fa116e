"""``python -m relviz bench``: run the sections of relviz.bench.sections, print each table beside the
machine's load, and write them as JSON with ``--json``."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

import relviz
from relviz.bench.report import BenchContext, format_table
from relviz.bench.sections import SECTIONS



def add_arguments(parser: argparse.ArgumentParser) -> None:
    names = [s.name for s in SECTIONS]
    parser.add_argument("--quick", action="store_true",
                        help="small sizes only: a smoke test that finishes in seconds")
    parser.add_argument("--only", action="append", choices=names, metavar="SECTION",
                        help=f"run only this section (repeatable); one of: {', '.join(names)}")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--no-flex", action="store_true",
                        help="leave out the compiled FlexAttention columns of the fused section "
                             "(each length and score_mod compiles, 5-15 s each on CPU)")
    group = parser.add_argument_group("the class section (--only class; relviz/bench/class_load.py)")
    group.add_argument("--class-students", type=int, metavar="N", help="students who open the link (default 30)")
    group.add_argument("--class-seconds", type=float, metavar="S",
                       help="how long each student moves the slider after arriving (default 120)")
    group.add_argument("--class-arrive", type=float, metavar="S",
                       help="every student opens the link within S seconds (default 10)")
    group.add_argument("--class-page", metavar="PAGE[?QUERY]",
                       help="the link the class opens: a page name (its tour step's link) or page?query "
                            "(default shaw)")
    group.add_argument("--class-pages", metavar="P1,P2",
                       help="the pages whose server CPU per run is measured (default every page with a slider; "
                            "'' for none); each PAGE[?QUERY][#KEY]: #KEY moves the slider with that URL key")
    group.add_argument("--class-modes", metavar="one,per-core",
                       help="one process, and/or one process per core behind nginx (default both)")
    group.add_argument("--class-tabs", type=int, metavar="N", help="Chromium tabs that open the link too (default 2)")
    group = parser.add_argument_group("the slider section (--only slider; relviz/bench/slider.py)")
    group.add_argument("--slider-pages", metavar="P1,P2",
                       help="only these pages' cases (e.g. your_model; default every page)")
    group = parser.add_argument_group("the settings search (--only zoo_search; relviz/zoo_search.py)")
    group.add_argument("--search-seed", type=int, default=0, metavar="N", help="the seed that draws the cases (0)")
    group.add_argument("--search-per-field", type=int, metavar="N",
                       help="at most N cases per field varied (default: every case; --quick: 1, of the first 4 families)")
    group.add_argument("--search-families", metavar="T1,T2", help="only these model_types (default every family)")
    group.add_argument("--search-workers", type=int, metavar="N",
                       help="processes that classify the cases, a family to each (default: the CPUs this process may "
                            "use, 1 with --quick; 1 runs them here)")
    group = parser.add_argument_group("the checker's mistakes (--only mistakes; relviz/check/mistakes.py)")
    group.add_argument("--mistakes-seed", type=int, default=0, metavar="N", help="the first seed of the cases (0)")
    group.add_argument("--mistakes-per-kind", type=int, metavar="N", help="cases per check kind (300; --quick: 1)")
    group.add_argument("--mistakes-budget", type=float, metavar="S",
                       help="seconds of checks after which a kind stops early (120; --quick: 1)")
    group.add_argument("--mistakes-kinds", metavar="K1,K2", help="only these check kinds (default every kind)")


def run(args: argparse.Namespace) -> int:
    selected = [s for s in SECTIONS if not args.only or s.name in args.only]

    def log(message: str) -> None:
        print(f"  ... {message}", file=sys.stderr, flush=True)

    options = {key.removeprefix("class_"): value for key, value in vars(args).items() if key.startswith("class_")}
    options["slider_pages"] = getattr(args, "slider_pages", None)
    options.update({key: value for key, value in vars(args).items() if key.startswith(("search_", "mistakes_"))})
    ctx = BenchContext(quick=bool(args.quick), log=log, flex=not args.no_flex, options=options)
    import psutil
    header = {
        "relviz_version": relviz.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "quick": ctx.quick,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(f"relviz {header['relviz_version']} bench, torch {header['torch_version']}, "
          f"{header['cpu_count']} CPUs, {header['torch_threads']} torch threads"
          f"{', quick' if ctx.quick else ''}. Timings are noisy on a shared machine.", flush=True)
    results = []
    for section in selected:
        start = time.perf_counter()
        load_before = _load_average()
        result = section.run(ctx)
        result.seconds = time.perf_counter() - start
        # The machine may be shared: every figure is read beside the load it was measured under.
        result.notes.append(f"load average (1, 5, 15 min) before: {load_before}; after: {_load_average()}")
        results.append(result)
        print("\n" + format_table(result), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(header | {"sections": [r.to_json() for r in results]}, out, indent=2)
        print(f"\nwrote {args.json}")
    return 0


def _load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"
