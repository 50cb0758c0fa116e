"""Command line: python -m relviz train (one scheme, or ``--shipped`` for all of them)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from relviz._checks import check_int
from relviz.model import SCHEMES, ModelConfig
from relviz.schemes import all_params, get_scheme, param_owner
from relviz.tasks import DEFAULT_TASK, TASKS, Task, make_task, task_param_specs
from relviz.training.checkpoints import CHECKPOINT_DIR, check_name, read_checkpoint_info, save_checkpoint, train_shipped
from relviz.training.loop import DEFAULT_TRAINING, SCHEME_DEFAULTS, TrainProgress, scheme_defaults, train


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = ModelConfig()
    parser.add_argument("--shipped", action="store_true",
                        help="retrain every shipped checkpoint (one per scheme, task shift s=5, the "
                             "default settings below) into --out; options other than --out, --threads, "
                             "--quiet and --json are ignored")
    parser.add_argument("--scheme", choices=list(SCHEMES), default="t5", help="position scheme (default t5)")
    for param in all_params():
        parser.add_argument(param.flag, type=param.kind, default=None, dest=param.name,
                            metavar=param.name.split("_")[-1].upper(),
                            help=f"{param.help} (default {param.default}; {param.range_text()})")
    parser.add_argument("--bidirectional", action="store_true",
                        help="let queries attend to future keys too (not for the causal-only schemes: "
                             + ", ".join(n for n in SCHEMES if get_scheme(n).causal_only) + "); default: causal")
    for flag, field_name, help_text in (("--d-model", "d_model", "model width"),
                                        ("--layers", "n_layers", "number of layers"),
                                        ("--heads", "n_heads", "attention heads"),
                                        ("--d-ff", "d_ff", "MLP width")):
        parser.add_argument(flag, type=int, default=None, dest=field_name, metavar="N",
                            help=f"{help_text} (default {getattr(defaults, field_name)}"
                                 f"{_departures_text('model', field_name)})")
    parser.add_argument("--task", choices=list(TASKS), default=DEFAULT_TASK,
                        help=f"task (default {DEFAULT_TASK})")
    for task_name in TASKS:
        for param, flag, default, help_text in task_param_specs(task_name):
            parser.add_argument(f"--{flag}", type=int, default=None, dest=f"task_{task_name}_{param}",
                                metavar=param.upper(),
                                help=f"task {task_name}: {help_text} (default {default})")
    for flag, key, kind, help_text in (("--steps", "steps", int, "optimizer steps"),
                                       ("--batch-size", "batch_size", int, "sequences per step"),
                                       ("--length", "length", int, "training sequence length"),
                                       ("--lr", "lr", float, "peak learning rate (warm-up, cosine decay)"),
                                       ("--seed", "seed", int, "seed of the weights and the batches")):
        parser.add_argument(flag, type=kind, default=None, dest=key,
                            help=f"{help_text} (default {DEFAULT_TRAINING[key]}{_departures_text('training', key)})")
    parser.add_argument("--name", default=None, help="checkpoint name (default <scheme>-<task>)")
    parser.add_argument("--out", default=str(CHECKPOINT_DIR), metavar="DIR",
                        help="directory to write <name>.safetensors and <name>.json to "
                             "(default: the shipped checkpoints, relviz/checkpoints)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: fastest for this small model, especially "
                             "on a shared machine)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the checkpoint summary as JSON")


def _departures_text(part: str, key: str) -> str:
    """What --help adds for a setting some scheme changes by default, e.g. "; alibi 4"."""
    return "".join(f"; {scheme} {values[part][key]}" for scheme, values in SCHEME_DEFAULTS.items()
                   if key in values.get(part, {}))


def _with_defaults(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model fields and training arguments of a run: flags given, else the scheme's defaults."""
    model_fields, training = scheme_defaults(args.scheme)
    model_fields = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in model_fields.items()}
    training = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in training.items()}
    return model_fields, training


class _ProgressBar:
    """A text progress bar on stderr: redrawn in place on a terminal, every 10% otherwise."""

    def __init__(self, label: str, stream=sys.stderr) -> None:
        self.label, self.stream = label, stream
        self.tty = stream.isatty()
        self.last_decile = -1

    def __call__(self, p: TrainProgress) -> None:
        filled = int(30 * p.fraction)
        line = f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {p.text}"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if p.step == p.steps else ""))
        elif int(10 * p.fraction) != self.last_decile:
            self.last_decile = int(10 * p.fraction)
            self.stream.write(line + "\n")
        self.stream.flush()


def _task_from_args(args: argparse.Namespace) -> Task:
    params, stray = {}, []
    for task_name in TASKS:
        for param, flag, _, _ in task_param_specs(task_name):
            value = getattr(args, f"task_{task_name}_{param}")
            if value is None:
                continue
            if task_name == args.task:
                params[param] = value
            else:
                stray.append(f"--{flag} applies to task {task_name}, not {args.task}")
    if stray:
        raise ValueError("; ".join(stray))
    return make_task(args.task, **params)


def _config_from_args(args: argparse.Namespace, task: Task) -> ModelConfig:
    values: dict[str, Any] = {}
    for param in all_params():
        value = getattr(args, param.name)
        if value is None:
            continue
        if param_owner(param.name) != args.scheme:
            raise ValueError(f"{param.flag} applies to scheme {param_owner(param.name)}, not {args.scheme}")
        values[param.name] = value
    model_fields, _ = _with_defaults(args)
    return ModelConfig(vocab_size=task.vocab_size, scheme=args.scheme, causal=not args.bidirectional,
                       **model_fields, **values)


def run(args: argparse.Namespace) -> int:
    try:
        threads = check_int("--threads", args.threads, minimum=1, maximum=256)
        torch.set_num_threads(threads)
        if args.shipped:
            def factory(scheme: str):
                return None if args.quiet else _ProgressBar(f"{scheme:>10}")
            paths = train_shipped(args.out, progress_factory=factory)
            infos = [read_checkpoint_info(p) for p in paths]
        else:
            task = _task_from_args(args)
            config = _config_from_args(args, task)
            name = check_name(args.name or f"{config.scheme}-{task.name}")
            progress = None if args.quiet else _ProgressBar(name)
            _, training = _with_defaults(args)
            result = train(config, task, progress=progress, **training)
            infos = [read_checkpoint_info(save_checkpoint(result, name, args.out))]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([info.summary() for info in infos], indent=2))
    else:
        for info in infos:
            print(f"{info.name}: {info.scheme} on {info.task.describe()}, accuracy {info.accuracy:.2%} at "
                  f"length {info.train_length}, {info.train_seconds:.1f} s -> {info.path}")
    return 0
