"""``python -m relviz checkpoints``: list the available checkpoints (a table, or JSON); ``--bind``
binds older pairs (adds the weights' hash to the JSON and the description to the weights)."""
from __future__ import annotations

import argparse
import json
import sys

from pathlib import Path

from relviz.training.checkpoints import CHECKPOINT_DIR, bind_checkpoint, scan_checkpoints


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=str(CHECKPOINT_DIR),
                        help=f"directory to list (default: the shipped checkpoints, {CHECKPOINT_DIR})")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list: name, scheme, task, train_length, accuracy, ...")
    parser.add_argument("--bind", action="store_true",
                        help="bind every pair in --dir written without a weights hash (an older relviz): "
                             "records the hash in the JSON and the scheme, model and task in the weights "
                             "(tensors unchanged, checked bit for bit). Only for pairs you trust.")


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def run(args: argparse.Namespace) -> int:
    if args.bind:
        for json_path in sorted(Path(args.dir).glob("*.json")):
            try:
                bound = bind_checkpoint(json_path)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"{'bound' if bound else 'already bound'}: {json_path.stem}")
    scan = scan_checkpoints(args.dir)
    for name, problem in scan.problems.items():
        print(f"warning: skipped {name}: {problem}", file=sys.stderr)
    rows = [info.summary() for info in scan.checkpoints]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no checkpoints in {args.dir}")
        return 0
    header = ("name", "scheme", "params", "task", "train_length", "accuracy", "steps", "seconds")
    table = [header] + [
        (r["name"], r["scheme"] + ("" if r["causal"] else " (bidir.)"), _params(r["scheme_params"]),
         f"{r['task']}({_params(r['task_params'])})", str(r["train_length"]), f"{r['accuracy']:.2%}",
         str(r["steps"]), f"{r['train_seconds']:.1f}")
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    return 0
