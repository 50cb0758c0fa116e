"""``python -m relviz evaluate NAME``: a checkpoint's accuracy on fresh samples, at any length.

A length the checkpoint's scheme cannot run at (e.g. a learned absolute embedding beyond
its max_len) prints the reason and exits with status 2, not a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from relviz.training.checkpoints import CHECKPOINT_DIR, load_checkpoint
from relviz.training.evaluation import eval_samples


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="checkpoint name (see python -m relviz checkpoints)")
    parser.add_argument("--length", type=int, default=None,
                        help="sequence length (default: the training length)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fresh samples")
    parser.add_argument("--samples", type=int, default=None,
                        help="number of sequences (default: about 32768 tokens' worth, at most 1024)")
    parser.add_argument("--dir", default=str(CHECKPOINT_DIR), help="checkpoint directory")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", action="store_true", help='print {"accuracy": ..., ...} as JSON')


def run(args: argparse.Namespace) -> int:
    try:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1; got {args.threads}")
        torch.set_num_threads(args.threads)
        checkpoint = load_checkpoint(args.name, args.dir)
        info = checkpoint.info
        length = info.train_length if args.length is None else args.length
        accuracy = checkpoint.evaluate(length=length, seed=args.seed, samples=args.samples)
    except ValueError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    samples = eval_samples(length) if args.samples is None else args.samples
    result = {"name": info.name, "scheme": info.scheme, "task": info.task.name, "length": length,
              "train_length": info.train_length, "seed": args.seed, "samples": samples,
              "accuracy": accuracy, "recorded_accuracy": info.accuracy}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{info.name} ({info.scheme}, {info.task.describe()}): accuracy {accuracy:.2%} at length "
              f"{length} on {samples} fresh sequences (seed {args.seed}); trained at length "
              f"{info.train_length} with {info.accuracy:.2%}")
    return 0
