"""Command line: python -m relviz {bench,train,checkpoints,evaluate,...}.

Installed with pip, the ``relviz`` console script is this same entry point (``main``).

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int``; this file only dispatches, so the modules never step on each other.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import relviz

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("relviz.cli.bench", "time and measure memory of the core functions and the app"),
    "train": ("relviz.cli.train", "train a small transformer with one position scheme"),
    "checkpoints": ("relviz.cli.checkpoints", "list the available checkpoints; migrate old two-file ones"),
    "evaluate": ("relviz.cli.evaluate", "evaluate a checkpoint on fresh samples"),
    "experiments": ("relviz.cli.experiments", "run the experiments (offset resolution, length extrapolation, cost)"),
    "check": ("relviz.cli.check", "compare a matrix your code produced with relviz's reference; name the cause"),
    "inspect": ("relviz.cli.inspect", "a Hugging Face checkpoint's position structure (T5, ALiBi, RoPE, learned)"),
    "schemes": ("relviz.cli.schemes", "list the position schemes, their parameters and defaults"),
}


def main(argv: list[str] | None = None) -> int:
    # "relviz" when run as the installed console script, "python -m relviz" otherwise.
    prog = "relviz" if os.path.basename(sys.argv[0]) == "relviz" else "python -m relviz"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"relviz {relviz.__version__}")
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--version":  # answer before importing every subcommand (and torch)
        parser.parse_args(argv[:1])
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a subcommand whose module is not written yet
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
