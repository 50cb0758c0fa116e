"""The results file's schema: :func:`validate_results` and :func:`load_results`.

The format is published as a JSON Schema (draft 2020-12), ``results.schema.json`` beside this
module (:data:`SCHEMA_PATH`), with a description of every field. It says the types, ranges and
required keys, the names of the experiments and the cost study's implementations, and which
fields may be null only when the entry says why (a ``cannot_run`` length, a ``skipped`` cost
row). ``jsonschema`` checks it, with one validator built per process.

Python keeps only what a JSON Schema cannot say:

- the format gate first: a file whose ``format`` or ``format_version`` is another is told so,
  rather than listed the fields it lacks;
- a setting's ``scheme`` is in relviz's registry and its ``params`` build a ModelConfig (the
  registry grows with the mechanisms; the file format does not change with it);
- setting ids are unique in a section and every result names one of them (references);
- one accuracy and one step count per seed of the setup; ``mean``, ``min`` and ``max`` agree
  with the per-seed accuracies (arithmetic across fields);
- every result's grid point (layers and s, or factor) is in the setup's lists, none twice and
  none missing; ``eval_length`` = factor × ``train_length``.

Every problem is a ValueError naming the file, the field's path
(``experiments.cost.rows[3].L``) and what is allowed, never a traceback.
"""
from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relviz.experiments.fit import spread
from relviz.experiments.plan import FORMAT, FORMAT_VERSION, MAX_RESULTS_BYTES, RESULTS_PATH
from relviz.model import SCHEMES, ModelConfig

if TYPE_CHECKING:  # imported where the validator is built: `import relviz.show` need not load jsonschema
    import jsonschema

#: The published JSON Schema of the results file.
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")

Fail = Callable[[str, str], ValueError]

_TYPE_NAMES = {"integer": "an integer", "number": "a finite number", "string": "a string", "boolean": "true or false",
               "array": "a list", "object": "an object", "null": "null"}
_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def load_schema() -> dict[str, Any]:
    """The published schema, parsed (a fresh dict each call)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _finite_number(checker: Any, value: Any) -> bool:
    # A JSON number is never NaN or infinite; Python's json module reads them, so refuse them here.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(checker: Any, value: Any) -> bool:
    # An integer written as an integer: 512.0 is refused, as relviz indexes and loops with these.
    return isinstance(value, int) and not isinstance(value, bool)


_ANNOTATIONS = frozenset({"title", "description", "$comment"})


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by its definition (the schema has no recursion).

    The published file keeps its ``$defs`` for readers; the validator gets them inlined, which
    validates the shipped file about a third faster (jsonschema resolves a ``$ref`` on every use).
    """
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _inline(value, defs) for key, value in node.items() if key != "$defs"}
    ref = out.pop("$ref", None)
    if ref is None:
        return out
    target = _inline(defs[ref.removeprefix("#/$defs/")], defs)
    if set(out) <= _ANNOTATIONS:  # a reference with a description of its own: the field's words win
        return target | out
    return out | {"allOf": [target, *out.get("allOf", [])]}


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    """The schema's validator, built once per process (the schema is read and compiled once)."""
    import jsonschema

    schema = load_schema()
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine_many({"number": _finite_number, "integer": _integer})
    return jsonschema.validators.extend(base, type_checker=checker)(_inline(schema, schema["$defs"]))


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return (text[:60] + "…") if len(text) > 60 else text


def _where(path: Sequence[str | int]) -> str:
    """``experiments.cost.rows[3].L`` from jsonschema's path of keys and indices."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "top level"


def _bound(keyword: str) -> Callable[[Any, dict, Any, str], str]:
    def message(allowed: Any, schema: dict, value: Any, when: str) -> str:
        bound = (f"from {schema['minimum']} to {schema['maximum']}" if "minimum" in schema and "maximum" in schema
                 else f"{_BOUNDS[keyword]} {allowed}")
        return f"must be {bound}{when}; got {_short(value)}"
    return message


def _not_empty(allowed: Any, schema: dict, value: Any, when: str) -> str | None:
    return "must not be empty" if allowed == 1 else None


#: jsonschema keyword -> what is wrong and what is allowed (allowed, subschema, value, condition) -> words,
#: in the words of the old hand-written checks; None falls back to jsonschema's own message.
_MESSAGES: dict[str, Callable[[Any, dict, Any, str], str | None]] = {
    "required": lambda allowed, schema, value, when: f"missing key {next(k for k in allowed if k not in value)!r}",
    "type": lambda allowed, schema, value, when: "must be " + " or ".join(
        _TYPE_NAMES[t] for t in ([allowed] if isinstance(allowed, str) else allowed)) + f"{when}; got {_short(value)}",
    # the subschema's title names the kind of thing: "unknown implementation 'x'"
    "enum": lambda allowed, schema, value, when:
        f"unknown {schema.get('title', 'value')} {value!r}; known: {', '.join(map(str, allowed))}",
    "const": lambda allowed, schema, value, when: f"must be {allowed!r}; got {_short(value)}",
    **{keyword: _bound(keyword) for keyword in _BOUNDS},
    "minItems": _not_empty, "minProperties": _not_empty, "minLength": _not_empty,
    "uniqueItems": lambda allowed, schema, value, when: f"has repeated values: {_short(value)}",
    "pattern": lambda allowed, schema, value, when: f"must match {allowed!r}; got {value!r}",
}


def _problem(error: jsonschema.ValidationError) -> str:
    """What is wrong and what is allowed, looked up by the rule that failed (``_MESSAGES``)."""
    schema = error.schema
    # A rule that holds only under a condition (inside an if/then) states the condition in its description.
    when = f" {schema['description']}" if "then" in error.absolute_schema_path and "description" in schema else ""
    words = _MESSAGES.get(error.validator)
    message = words(error.validator_value, schema, error.instance, when) if words else None
    return message or error.message  # a keyword the schema gains later still gets jsonschema's own words


# ---------------------------------------------------------------------------------------
# The checks a JSON Schema cannot express (the document has passed the schema)


def _check_settings(fail: Fail, section: dict[str, Any], where: str) -> dict[str, None]:
    """Each setting's scheme is registered and its params are valid for it; ids are unique (in order)."""
    ids: dict[str, None] = {}
    for i, s in enumerate(section["settings"]):
        w = f"{where}.settings[{i}]"
        if s["scheme"] not in SCHEMES:
            raise fail(f"{w}.scheme", f"unknown scheme {s['scheme']!r}; known: {', '.join(SCHEMES)}")
        try:
            ModelConfig(scheme=s["scheme"], **s["params"])
        except (TypeError, ValueError) as exc:
            raise fail(f"{w}.params", f"not valid for scheme {s['scheme']!r}: {exc}") from None
        if s["id"] in ids:
            raise fail(f"{w}.id", f"repeated setting id {s['id']!r}")
        ids[s["id"]] = None
    return ids


def _results(fail: Fail, section: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, entry) of every result, each naming a setting of the section; the spread checked."""
    ids = _check_settings(fail, section, where)
    n_seeds = len(section["setup"]["seeds"])
    for i, entry in enumerate(section["results"]):
        w = f"{where}.results[{i}]"
        if entry["setting"] not in ids:
            raise fail(f"{w}.setting", f"unknown setting {entry['setting']!r}; the section lists {', '.join(ids)}")
        accuracy = entry["accuracy"]
        if accuracy is not None:
            if len(accuracy) != n_seeds:
                raise fail(f"{w}.accuracy", f"must hold one accuracy per seed ({n_seeds}); got {len(accuracy)}")
            expected = spread(accuracy)
            for key in ("mean", "min", "max"):
                if abs(entry[key] - expected[key]) > 1e-3:
                    raise fail(f"{w}.{key}", f"is {entry[key]} but the per-seed accuracies give {expected[key]}")
        yield w, entry


def _check_offset(fail: Fail, section: dict[str, Any], where: str) -> None:
    setup = section["setup"]
    layers, shifts, n_seeds = setup["layers"], setup["shifts"], len(setup["seeds"])
    seen = set()
    for w, entry in _results(fail, section, where):
        n_layers, s = entry["layers"], entry["s"]
        if n_layers not in layers or s not in shifts:
            raise fail(w, f"layers {n_layers}, s {s} are not in the setup's layers {layers} / shifts {shifts}")
        if (entry["setting"], n_layers, s) in seen:
            raise fail(w, f"repeats setting {entry['setting']!r}, layers {n_layers}, s = {s}")
        seen.add((entry["setting"], n_layers, s))
        if len(entry["steps"]) != n_seeds:
            raise fail(f"{w}.steps", f"must hold one step count per seed ({n_seeds}); got {_short(entry['steps'])}")
    missing = len(section["settings"]) * len(layers) * len(shifts) - len(seen)
    if missing:
        raise fail(f"{where}.results", f"{missing} (setting, layers, s) combinations have no result")


def _check_extrapolation(fail: Fail, section: dict[str, Any], where: str) -> None:
    setup = section["setup"]
    factors, train_length = setup["factors"], setup["train_length"]
    seen = set()
    for w, entry in _results(fail, section, where):
        factor = entry["factor"]
        if factor not in factors:
            raise fail(f"{w}.factor", f"{factor} is not in the setup's factors {factors}")
        if entry["eval_length"] != factor * train_length:
            raise fail(f"{w}.eval_length",
                       f"must be factor × train_length = {factor * train_length}; got {entry['eval_length']}")
        if (entry["setting"], factor) in seen:
            raise fail(w, f"repeats setting {entry['setting']!r} at factor {factor}")
        seen.add((entry["setting"], factor))
    missing = len(section["settings"]) * len(factors) - len(seen)
    if missing:
        raise fail(f"{where}.results", f"{missing} (setting, factor) combinations have no result")


#: experiment name -> its cross-field checks (the cost section has none: the schema says it all).
_SECTION_CHECKS: dict[str, Callable[[Fail, dict[str, Any], str], None]] = {
    "offset_resolution": _check_offset, "length_extrapolation": _check_extrapolation}


def validate_results(data: Any, source: str = "<data>") -> dict[str, Any]:
    """Check a results document against the schema; return it, or raise ValueError saying what
    is wrong and where (e.g. ``experiments.cost.rows[3].L: must be an integer; got "x"``)."""
    def fail(where: str, problem: str) -> ValueError:
        return ValueError(f"results file {source}: {where}: {problem}")

    if isinstance(data, dict):  # the format gate: another kind of file, or another version, says so first
        fmt, version = data.get("format"), data.get("format_version")
        if isinstance(fmt, str) and fmt != FORMAT:
            raise fail("format", f"must be {FORMAT!r}; got {fmt!r} (not a relviz experiments file?)")
        if _integer(None, version) and version != FORMAT_VERSION:
            raise fail("format_version", f"this relviz reads version {FORMAT_VERSION}; got {version}")
    error = next(_validator().iter_errors(data), None)  # the first, in the schema's order
    if error is not None:
        raise fail(_where(error.absolute_path), _problem(error))
    for name, section in data["experiments"].items():
        if name in _SECTION_CHECKS:
            _SECTION_CHECKS[name](fail, section, f"experiments.{name}")
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
