"""``python -m relviz check FILE --kind t5 ...``: compare a matrix your code produced with relviz's reference.

FILE is a .npy (read with allow_pickle=False) or CSV file ("-" reads CSV from standard input). Give
the settings, or pass --fit to let relviz search a bounded grid for the best-fitting ones. Exit
status: 0 when every compared cell matches, 1 on a mismatch, 2 when the file or the settings are
refused (the message says why). --json prints the verdict, the first mismatches and the cause.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from relviz.check import FIRST_MISMATCHES, KINDS, MAX_BYTES, Settings, check, load_matrix


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help='a .npy or CSV file with the matrix ("-": CSV on standard input)')
    parser.add_argument("--kind", required=True, choices=list(KINDS),
                        help="; ".join(f"{k}: {v}" for k, v in KINDS.items()))
    parser.add_argument("--fit", action="store_true",
                        help="search a bounded grid for the settings that fit best (ignores the settings below)")
    parser.add_argument("--q-offset", type=int, default=0, help="query i sits at key position q_offset + i (default 0)")
    parser.add_argument("--k", type=int, default=3, help="Shaw clipping distance (kind shaw; default 3)")
    parser.add_argument("--num-buckets", type=int, default=32, help="T5 num_buckets (default 32)")
    parser.add_argument("--max-distance", type=int, default=128, help="T5 max_distance (default 128)")
    direction = parser.add_mutually_exclusive_group()
    direction.add_argument("--bidirectional", dest="bidirectional", action="store_true", default=True,
                           help="T5 encoder buckets (default)")
    direction.add_argument("--unidirectional", dest="bidirectional", action="store_false",
                           help="T5 decoder buckets")
    parser.add_argument("--num-heads", type=int, default=8, help="ALiBi head count (default 8)")
    parser.add_argument("--head", type=int, default=0, help="ALiBi head shown, from 0 (default 0)")
    parser.add_argument("--alibi-bias-max", type=float, default=8.0,
                        help="ALiBi: MPT's alibi_bias_max, slopes 2^(−max·h/n) (default 8, Press et al.)")
    parser.add_argument("--causal", action="store_true",
                        help="ALiBi: compare only keys j ≤ i (your upper triangle is masked)")
    parser.add_argument("--full", action="store_true",
                        help="skew: compare the garbage upper triangle too (default: only j ≤ i)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _read(path: str) -> bytes:
    if path == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        file = Path(path)
        if not file.is_file():
            raise ValueError(f"FILE {path!r} is not a readable file")
        with file.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    return data


def run(args: argparse.Namespace) -> int:
    try:
        matrix = load_matrix(_read(args.file), name=args.file)
        settings = None if args.fit else Settings(
            q_offset=args.q_offset, k=args.k, num_buckets=args.num_buckets, max_distance=args.max_distance,
            bidirectional=args.bidirectional, num_heads=args.num_heads, head=args.head, causal=args.causal,
            full=args.full, alibi_bias_max=args.alibi_bias_max)
        result = check(args.kind, matrix, settings)
    except (ValueError, OSError) as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json()))
        return 0 if result.ok else 1
    print(result.verdict())
    if result.first:
        print(f"\nfirst {min(len(result.first), FIRST_MISMATCHES)} mismatches (j − i = key − query):")
        print(f"{'i':>5} {'j':>5} {'j − i':>7} {'expected':>14} {'got':>14}")
        for m in result.first:
            print(f"{m.i:>5} {m.j:>5} {m.offset:>7} {m.expected!s:>14} {m.got!s:>14}")
    if result.cause:
        print(f"\nlikely cause: {result.cause.name}\n  {result.cause.explanation}")
        if result.cause.harmless:
            print("  (an equivalent convention, not a bug, if your model uses it throughout)")
    if result.note:
        print(f"\n{result.note}")
    return 0 if result.ok else 1
