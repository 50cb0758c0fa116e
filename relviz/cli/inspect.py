"""``python -m relviz inspect PATH``: a Hugging Face checkpoint's position plan per layer (text, or JSON)."""
from __future__ import annotations

import argparse
import json
import sys

from relviz.hf import inspect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a model directory (config.json + *.safetensors), or a Hub id owner/name "
                                     "(needs huggingface_hub and internet; downloads only config.json and the "
                                     "position tensors)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON: model_type, the plan per layer (each layer's mechanisms and their settings), "
                             "config, notes, and the small tables (T5 bias tables, ALiBi slopes, RoPE inv_freq)")
    parser.add_argument("--no-hub", action="store_true", help="treat PATH as a local directory only")
    parser.add_argument("--time", type=int, default=0, metavar="N",
                        help="also run inspect N times and print the median time and the memory it added "
                             "(after the import of torch, which dominates a cold command)")


def _rows(values: list[float], per_line: int = 8) -> str:
    return "\n".join("    " + "  ".join(f"{v:.6g}" for v in values[k:k + per_line])
                     for k in range(0, len(values), per_line))


def _time(path: str, repeat: int, allow_hub: bool) -> None:
    import statistics
    import time

    import psutil

    process = psutil.Process()
    before = process.memory_info().rss
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        inspect(path, allow_hub=allow_hub)
        seconds.append(time.perf_counter() - start)
    grown = (process.memory_info().rss - before) / 1e6
    print(f"inspect: median {statistics.median(seconds) * 1e3:.2f} ms, min {min(seconds) * 1e3:.2f} ms over "
          f"{repeat} runs; resident memory +{grown:.1f} MB", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        positions = inspect(args.path, allow_hub=not args.no_hub)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.time > 0:
        _time(args.path, args.time, not args.no_hub)
    summary = positions.to_json()
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    read_from = sorted({p.read_from for p in positions.all_layers()})
    origin = "" if positions.in_family_table else f" (not in the family table; layers {'; '.join(read_from)})"
    print(f"{summary['source']}: model_type {positions.model_type}{origin}")
    for note in positions.notes:
        print(f"  note: {note}")
    for stack in positions.stack_names:
        runs = positions.runs(stack)
        print(f"  {stack}: {len(positions.plans[stack])} layers")
        for first, last, plan in runs:
            where = f"layer {first}" if first == last else f"layers {first}-{last}"
            print(f"    {where}: {plan.label()}")
            for mechanism in plan.mechanisms:
                print(f"      {mechanism.describe()}")
    if "rope_inv_freq" in summary:
        print(f"  first rotation: attention scaling {summary['rope_attention_scaling']:.6g}; "
              "inv_freq θ_i (radians per position):\n" + _rows(summary["rope_inv_freq"]))
    if "alibi_slopes" in summary:
        print("  ALiBi slopes per head:\n" + _rows(summary["alibi_slopes"]))
    if positions.tensors_read:
        print(f"  tensors read: {', '.join(positions.tensors_read)}")
    return 0
