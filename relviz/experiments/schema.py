"""The results file's schema: :func:`validate_results` and :func:`load_results`.

Everything the page shows is validated on load: a missing or malformed file raises
ValueError with a message saying what is wrong and where, never a traceback.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relviz.experiments.fit import spread
from relviz.experiments.plan import EXPERIMENTS, FORMAT, FORMAT_VERSION, IMPLEMENTATIONS, MAX_RESULTS_BYTES, RESULTS_PATH
from relviz.model import SCHEMES, ModelConfig


class _Checker:
    """Small typed accessors that raise ValueError naming the file and the JSON path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> ValueError:
        return ValueError(f"results file {self.source}: {where}: {problem}")

    def get(self, obj: dict[str, Any], key: str, kind: str, where: str, *, nullable: bool = False) -> Any:
        if key not in obj:
            raise self.fail(where, f"missing key {key!r}")
        return self.check(obj[key], kind, f"{where}.{key}", nullable=nullable)

    def check(self, value: Any, kind: str, where: str, *, nullable: bool = False) -> Any:
        if value is None and nullable:
            return None
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool)
                      and math.isfinite(value),
            "str": isinstance(value, str),
            "bool": isinstance(value, bool),
            "list": isinstance(value, list),
            "dict": isinstance(value, dict),
        }[kind]
        if not ok:
            name = {"int": "an integer", "number": "a finite number", "str": "a string", "bool": "true or false",
                    "list": "a list", "dict": "an object"}[kind]
            raise self.fail(where, f"must be {name}{' or null' if nullable else ''}; got {_short(value)}")
        return value

    def fraction(self, value: Any, where: str, *, nullable: bool = False) -> float | None:
        value = self.check(value, "number", where, nullable=nullable)
        if value is not None and not 0.0 <= value <= 1.0:
            raise self.fail(where, f"must be an accuracy from 0 to 1; got {value}")
        return value

    def int_list(self, obj: dict[str, Any], key: str, where: str, *, minimum: int = 1) -> list[int]:
        values = self.get(obj, key, "list", where)
        if not values:
            raise self.fail(f"{where}.{key}", "must not be empty")
        for i, v in enumerate(values):
            self.check(v, "int", f"{where}.{key}[{i}]")
            if v < minimum:
                raise self.fail(f"{where}.{key}[{i}]", f"must be >= {minimum}; got {v}")
        if len(set(values)) != len(values):
            raise self.fail(f"{where}.{key}", f"has repeated values: {values}")
        return values


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return (text[:60] + "…") if len(text) > 60 else text


def _check_spread(c: _Checker, entry: dict[str, Any], where: str, n_seeds: int, *, nullable: bool = False) -> None:
    accuracy = c.get(entry, "accuracy", "list", where, nullable=nullable)
    if accuracy is None:
        for key in ("mean", "min", "max", "std"):
            c.get(entry, key, "number", where, nullable=True)
        return
    if len(accuracy) != n_seeds:
        raise c.fail(f"{where}.accuracy", f"must hold one accuracy per seed ({n_seeds}); got {len(accuracy)}")
    for i, a in enumerate(accuracy):
        c.fraction(a, f"{where}.accuracy[{i}]")
    for key in ("mean", "min", "max"):
        c.fraction(c.get(entry, key, "number", where), f"{where}.{key}")
    std = c.get(entry, "std", "number", where)
    if std < 0:
        raise c.fail(f"{where}.std", f"must be >= 0; got {std}")
    expected = spread(accuracy)
    for key in ("mean", "min", "max"):
        if abs(entry[key] - expected[key]) > 1e-3:
            raise c.fail(f"{where}.{key}", f"is {entry[key]} but the per-seed accuracies give {expected[key]}")


def _check_settings(c: _Checker, section: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    settings = c.get(section, "settings", "list", where)
    if not settings:
        raise c.fail(f"{where}.settings", "must not be empty")
    out = {}
    for i, s in enumerate(settings):
        w = f"{where}.settings[{i}]"
        c.check(s, "dict", w)
        sid = c.get(s, "id", "str", w)
        c.get(s, "label", "str", w)
        scheme = c.get(s, "scheme", "str", w)
        if scheme not in SCHEMES:
            raise c.fail(f"{w}.scheme", f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
        params = c.get(s, "params", "dict", w)
        try:
            ModelConfig(scheme=scheme, **params)
        except (TypeError, ValueError) as exc:
            raise c.fail(f"{w}.params", f"not valid for scheme {scheme!r}: {exc}") from None
        if sid in out:
            raise c.fail(f"{w}.id", f"repeated setting id {sid!r}")
        out[sid] = s
    return out


def _check_common(c: _Checker, section: dict[str, Any], where: str) -> dict[str, Any]:
    c.check(section, "dict", where)
    c.get(section, "title", "str", where)
    setup = c.get(section, "setup", "dict", where)
    c.get(section, "seconds", "number", where)
    return setup


def _check_training_setup(c: _Checker, setup: dict[str, Any], where: str, texts: tuple[str, ...]) -> list[int]:
    """The setup keys both training experiments have: seeds, model, training and ``texts``; returns the seeds."""
    seeds = c.int_list(setup, "seeds", f"{where}.setup", minimum=0)
    for key in ("model", "training"):
        c.get(setup, key, "dict", f"{where}.setup")
    for key in texts:
        c.get(setup, key, "str", f"{where}.setup")
    return seeds


def _results(c: _Checker, section: dict[str, Any], where: str,
             settings: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(where, entry, setting id) of every result entry, each an object naming a listed setting."""
    for i, entry in enumerate(c.get(section, "results", "list", where)):
        w = f"{where}.results[{i}]"
        c.check(entry, "dict", w)
        sid = c.get(entry, "setting", "str", w)
        if sid not in settings:
            raise c.fail(f"{w}.setting", f"unknown setting {sid!r}; the section lists {', '.join(settings)}")
        yield w, entry, sid


def _check_offset(c: _Checker, section: dict[str, Any]) -> None:
    where = "experiments.offset_resolution"
    setup = _check_common(c, section, where)
    shifts = c.int_list(setup, "shifts", f"{where}.setup")
    layers = c.int_list(setup, "layers", f"{where}.setup")
    seeds = _check_training_setup(c, setup, where, ("task", "lengths", "method"))
    c.get(setup, "counted", "int", f"{where}.setup")
    settings = _check_settings(c, section, where)
    seen = set()
    for w, entry, sid in _results(c, section, where, settings):
        n_layers = c.get(entry, "layers", "int", w)
        s = c.get(entry, "s", "int", w)
        if n_layers not in layers or s not in shifts:
            raise c.fail(w, f"layers {n_layers}, s {s} are not in the setup's layers {layers} / shifts {shifts}")
        if (sid, n_layers, s) in seen:
            raise c.fail(w, f"repeats setting {sid!r}, layers {n_layers}, s = {s}")
        seen.add((sid, n_layers, s))
        _check_spread(c, entry, w, len(seeds))
        steps = c.get(entry, "steps", "list", w)
        if len(steps) != len(seeds) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                               for x in steps):
            raise c.fail(f"{w}.steps", f"must be one step count (>= 1) per seed; got {_short(steps)}")
    missing = len(settings) * len(layers) * len(shifts) - len(seen)
    if missing:
        raise c.fail(f"{where}.results", f"{missing} (setting, layers, s) combinations have no result")


def _check_extrapolation(c: _Checker, section: dict[str, Any]) -> None:
    where = "experiments.length_extrapolation"
    setup = _check_common(c, section, where)
    factors = c.int_list(setup, "factors", f"{where}.setup")
    train_length = c.get(setup, "train_length", "int", f"{where}.setup")
    seeds = _check_training_setup(c, setup, where, ("task", "method"))
    c.get(setup, "task_params", "dict", f"{where}.setup")
    settings = _check_settings(c, section, where)
    seen = set()
    for w, entry, sid in _results(c, section, where, settings):
        factor = c.get(entry, "factor", "int", w)
        if factor not in factors:
            raise c.fail(f"{w}.factor", f"{factor} is not in the setup's factors {factors}")
        length = c.get(entry, "eval_length", "int", w)
        if length != factor * train_length:
            raise c.fail(f"{w}.eval_length", f"must be factor × train_length = {factor * train_length}; got {length}")
        reason = c.get(entry, "cannot_run", "str", w, nullable=True)
        _check_spread(c, entry, w, len(seeds), nullable=reason is not None)
        if reason is None and entry["accuracy"] is None:
            raise c.fail(w, "has neither an accuracy nor a 'cannot_run' reason")
        if (sid, factor) in seen:
            raise c.fail(w, f"repeats setting {sid!r} at factor {factor}")
        seen.add((sid, factor))
    missing = len(settings) * len(factors) - len(seen)
    if missing:
        raise c.fail(f"{where}.results", f"{missing} (setting, factor) combinations have no result")


def _check_cost(c: _Checker, section: dict[str, Any]) -> None:
    where = "experiments.cost"
    setup = _check_common(c, section, where)
    for key in ("batch", "heads", "dim", "chunk", "memory_total_bytes"):
        value = c.get(setup, key, "int", f"{where}.setup")
        if value < 1:
            raise c.fail(f"{where}.setup.{key}", f"must be >= 1; got {value}")
    for key in ("source", "method"):
        c.get(setup, key, "str", f"{where}.setup")
    rows = c.get(section, "rows", "list", where)
    if not rows:
        raise c.fail(f"{where}.rows", "must not be empty")
    for i, row in enumerate(rows):
        w = f"{where}.rows[{i}]"
        c.check(row, "dict", w)
        impl = c.get(row, "impl", "str", w)
        if impl not in IMPLEMENTATIONS:
            raise c.fail(f"{w}.impl", f"unknown implementation {impl!r}; known: {', '.join(IMPLEMENTATIONS)}")
        if c.get(row, "L", "int", w) < 1:
            raise c.fail(f"{w}.L", "must be >= 1")
        skipped = c.get(row, "skipped", "str", w, nullable=True)
        for key, kind in (("forward_s", "number"), ("peak_bytes", "int"), ("delta_bytes", "int")):
            value = c.get(row, key, kind, w, nullable=True)
            if value is None and skipped is None and key != "delta_bytes":
                raise c.fail(f"{w}.{key}", "is null but the row is not marked as skipped")
            if value is not None and key != "delta_bytes" and value < 0:
                raise c.fail(f"{w}.{key}", f"must be >= 0; got {value}")


_SECTION_CHECKS = {"offset_resolution": _check_offset, "length_extrapolation": _check_extrapolation,
                   "cost": _check_cost}


def validate_results(data: Any, source: str = "<data>") -> dict[str, Any]:
    """Check a results document against the schema; return it, or raise ValueError saying what
    is wrong and where (e.g. ``experiments.cost.rows[3].L: must be an integer; got "x"``)."""
    c = _Checker(source)
    c.check(data, "dict", "top level")
    fmt = c.get(data, "format", "str", "top level")
    if fmt != FORMAT:
        raise c.fail("format", f"must be {FORMAT!r}; got {fmt!r} (not a relviz experiments file?)")
    version = c.get(data, "format_version", "int", "top level")
    if version != FORMAT_VERSION:
        raise c.fail("format_version", f"this relviz reads version {FORMAT_VERSION}; got {version}")
    for key in ("relviz_version", "torch_version", "created"):
        c.get(data, key, "str", "top level")
    c.get(data, "quick", "bool", "top level")
    machine = c.get(data, "machine", "dict", "top level")
    c.get(machine, "cpu_count", "int", "machine")
    c.get(machine, "memory_total_bytes", "int", "machine")
    run_info = c.get(data, "run", "dict", "top level")
    runs = [("run", run_info)]
    if "earlier_runs" in data:
        earlier = c.get(data, "earlier_runs", "list", "top level")
        runs += [(f"earlier_runs[{i}]", c.check(r, "dict", f"earlier_runs[{i}]")) for i, r in enumerate(earlier)]
    for where, info in runs:
        for key in ("wall_seconds", "cpu_seconds"):
            c.get(info, key, "number", where)
        c.get(info, "workers", "int", where)
        names = c.get(info, "experiments", "list", where)
        if not all(isinstance(n, str) and n in EXPERIMENTS for n in names):
            raise c.fail(f"{where}.experiments", f"must list experiment names from {', '.join(EXPERIMENTS)}; "
                                                 f"got {_short(names)}")
    experiments = c.get(data, "experiments", "dict", "top level")
    if not experiments:
        raise c.fail("experiments", "holds no experiment")
    for name, section in experiments.items():
        if name not in _SECTION_CHECKS:
            raise c.fail("experiments", f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
        _SECTION_CHECKS[name](c, section)
    return data


def load_results(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read and validate a results file (default: the shipped one); any problem is a ValueError."""
    path = Path(RESULTS_PATH if path is None else path)
    if not path.exists():
        raise ValueError(f"results file {path} does not exist: run `python -m relviz experiments` "
                         "(or `--quick` for a smoke run) to create it")
    if not path.is_file():
        raise ValueError(f"results file {path} is not a file")
    size = path.stat().st_size
    if size > MAX_RESULTS_BYTES:
        raise ValueError(f"results file {path} is {size} bytes; a results file is far below {MAX_RESULTS_BYTES}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"results file {path} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"results file {path} is not valid JSON: {exc}") from None
    return validate_results(data, str(path))
