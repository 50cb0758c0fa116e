"""``python -m relviz check FILE --kind t5 ...``: compare what your code produced with relviz's reference.

FILE is a .npy (read with allow_pickle=False) or CSV file ("-" reads CSV from standard input). Or
``--callable FILE.py:NAME``: relviz imports your own function from your own file and calls it with the
reference inputs (the signature per kind is listed by --help). Give the settings (RoPE kinds: the flags,
or --config config.json), or pass --fit to let relviz search a bounded grid for the best-fitting ones.
Exit status: 0 when every compared cell matches, 1 on a mismatch, 2 when the file, the function or the
settings are refused (the message says why). --json prints the verdict, the first mismatches and the cause.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from relviz.check.api import KINDS, REGISTRY, check, kind_of, load
from relviz.check.callables import call, load_callable
from relviz.check.reading import MAX_BYTES
from relviz.check.result import FIRST_MISMATCHES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help='a .npy or CSV file with the matrix ("-": CSV on standard input)')
    parser.add_argument("--kind", required=True, choices=list(KINDS),
                        help="; ".join(f"{k}: {v}" for k, v in KINDS.items()))
    parser.add_argument("--callable", metavar="FILE.py:NAME",
                        help="check your own function instead of a file; relviz calls it as: "
                             + "; ".join(f"{k}: {kind.signature}" for k, kind in REGISTRY.items() if kind.signature))
    parser.add_argument("--seq-len", type=int, default=64,
                        help="with --callable: the sequence length relviz calls your function with (default 64)")
    parser.add_argument("--fit", action="store_true",
                        help="search a bounded grid for the settings that fit best (ignores the settings below)")
    parser.add_argument("--q-offset", type=int, default=0,
                        help="query i sits at key position q_offset + i; RoPE: row m holds position q_offset + m")
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
    rope = parser.add_argument_group("RoPE kinds (rope_cos, rope_sin, rope_angles)")
    rope.add_argument("--config", metavar="config.json",
                      help="read head_dim, θ, partial rotary and the scaling rule from a Hugging Face config.json")
    rope.add_argument("--layer", type=int,
                      help="with --config: the settings of this layer (from 0) of the model's per-layer plan; a layer "
                           "without rotation expects cos 1, sin 0")
    rope.add_argument("--head-dim", type=int, help="dims per head (default: the cache's width)")
    rope.add_argument("--base", type=float, default=10000.0, help="θ's base, rope_theta (default 10000)")
    rope.add_argument("--rotary-dim", type=int, help="how many dims rotate (default: all; partial rotary)")
    rope.add_argument("--layout", choices=["half", "interleaved"],
                      help="pairs (i, i + d/2) as Llama/GPT-NeoX (half, the default) or (2i, 2i + 1) as GPT-J")
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


def _checked(args: argparse.Namespace):
    kind = kind_of(args.kind)
    if args.callable:
        if args.file:
            raise ValueError("give a FILE or --callable, not both")
        call_settings = kind.from_args(args, None)
        got = call(args.kind, load_callable(args.callable), call_settings, args.seq_len)
        settings = None if args.fit else call_settings
    else:
        if not args.file:
            raise ValueError("give a FILE (or --callable FILE.py:NAME)")
        got = load(args.kind, _read(args.file), name=args.file)
        settings = None if args.fit else kind.from_args(args, tuple(got.shape))
    return check(args.kind, got, settings)


def run(args: argparse.Namespace) -> int:
    try:
        result = _checked(args)
    except (ValueError, OSError) as exc:
        if args.json:
            _write(json.dumps({"error": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    code = 0 if result.ok else 1
    if args.json:
        _write(json.dumps(result.to_json()))
        return code
    lines = [result.verdict()]
    if result.first:
        row, column, offset = kind_of(result.kind).labels
        lines += [f"\nfirst {min(len(result.first), FIRST_MISMATCHES)} mismatches:",
                  f"{row:>5} {column:>6} {offset:>7} {'expected':>14} {'got':>14}"]
        lines += [f"{m.i:>5} {m.j:>6} {m.offset:>7} {m.expected!s:>14} {m.got!s:>14}" for m in result.first]
    if result.cause:
        lines.append(f"\nlikely cause: {result.cause.name}\n  {result.cause.explanation}")
        if result.cause.harmless:
            lines.append("  (an equivalent convention, not a bug, if your model uses it throughout)")
    if result.note:
        lines.append(f"\n{result.note}")
    _write("\n".join(lines))
    return code


def _write(text: str) -> None:
    """Print ``text``; a reader that closed the pipe early (``| head``) ends the output quietly: no traceback, and
    none at exit when Python flushes standard output again."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
