"""``python -m relviz checkpoints``: list the available checkpoints (a table, or JSON);
``python -m relviz checkpoints migrate DIR`` rewrites old two-file checkpoints as single files."""
from __future__ import annotations

import argparse
import json
import sys

from pathlib import Path

from relviz.training.checkpoints import CHECKPOINT_DIR, migrate_checkpoint, scan_checkpoints


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=str(CHECKPOINT_DIR),
                        help=f"directory to list (default: the shipped checkpoints, {CHECKPOINT_DIR})")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list: name, scheme, task, train_length, accuracy, ...")
    actions = parser.add_subparsers(dest="action")
    migrate = actions.add_parser(
        "migrate", help="rewrite every old checkpoint in DIR (NAME.safetensors + NAME.json) as one file",
        description="Rewrite every old checkpoint in DIR (NAME.safetensors + NAME.json, format version 1) as one "
                    "NAME.safetensors with its description in the header. Each tensor is checked bit for bit "
                    "before the new file replaces the old weights; NAME.json is removed only after that.")
    migrate.add_argument("directory", help="directory holding the old checkpoints")
    migrate.add_argument("--trust-unbound", action="store_true",
                         help="also migrate pairs whose JSON records no weights hash (written before the hash "
                              "binding): only pairs you know belong together")


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _migrate(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        print(f"error: {directory} is not a directory", file=sys.stderr)
        return 2
    status = 0
    names = {path.name.removesuffix(suffix) for suffix in (".json", ".safetensors")
             for path in directory.glob(f"*{suffix}")}
    for name in sorted(names):
        try:
            print(f"{migrate_checkpoint(name, directory, trust_unbound=args.trust_unbound)}: {name}")
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


def run(args: argparse.Namespace) -> int:
    if args.action == "migrate":
        return _migrate(args)
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
