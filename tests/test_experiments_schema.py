"""The results file's published JSON Schema (relviz/experiments/results.schema.json) and the
checks relviz.experiments.schema adds to it.

tests/test_experiments.py checks the messages for a run's own output; here: the schema file is
a valid draft 2020-12 schema that documents every field, agrees with the code's names, accepts
the shipped file as any jsonschema user would read it, and hostile documents are refused with
the field named.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from relviz import experiments as ex
from relviz.experiments import schema
from relviz.experiments.plan import MAX_RESULTS_BYTES

DRAFT = "https://json-schema.org/draft/2020-12/schema"


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    return json.loads(ex.RESULTS_PATH.read_text(encoding="utf-8"))


def test_the_schema_file_is_a_valid_draft_2020_12_schema():
    published = schema.load_schema()
    assert published["$schema"] == DRAFT
    jsonschema.Draft202012Validator.check_schema(published)


def _fields(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, subschema) of every named field of the schema, at any depth."""
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            yield f"{where}.{name}", sub
        for key, sub in node.items():
            if key != "if":  # a condition's subschema names fields it tests, not fields of the format
                yield from _fields(sub, f"{where}.{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _fields(sub, f"{where}[{i}]")


def test_the_schema_describes_every_field():
    published = schema.load_schema()
    defs = published["$defs"]
    missing = [where for where, sub in _fields(published)
               if "description" not in sub and "description" not in defs.get(sub.get("$ref", "#/").split("/")[-1], {})]
    assert missing == []
    assert len(list(_fields(published))) > 100  # the walk found the fields


def test_the_schema_names_what_the_code_knows():
    """The names the schema lists are the code's: experiments, implementations, the format."""
    published = schema.load_schema()
    defs = published["$defs"]
    assert defs["experiment_name"]["enum"] == list(ex.EXPERIMENTS)
    assert list(published["properties"]["experiments"]["properties"]) == list(ex.EXPERIMENTS)
    assert defs["implementation"]["enum"] == list(ex.IMPLEMENTATIONS)
    assert published["properties"]["format"]["const"] == ex.FORMAT
    assert published["properties"]["format_version"]["const"] == ex.FORMAT_VERSION


def test_the_shipped_file_validates_against_the_published_schema(shipped):
    """As a user of the schema reads it (plain jsonschema), and through relviz's own checks."""
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in jsonschema.Draft202012Validator(schema.load_schema()).iter_errors(shipped)]
    assert errors == []
    assert ex.validate_results(copy.deepcopy(shipped)) == shipped
    assert ex.load_results() == shipped


def test_the_validator_is_built_once(monkeypatch, shipped):
    schema._validator.cache_clear()
    loads = []
    real = schema.load_schema
    monkeypatch.setattr(schema, "load_schema", lambda: loads.append(1) or real())
    for _ in range(3):
        ex.validate_results(shipped)
    assert loads == [1]
    schema._validator.cache_clear()  # the next user builds it from the real loader


def _edit(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with the field at ``path`` (keys and indices, '/'-separated) set, or
    deleted where ``value`` is ``_DELETE``."""
    data = copy.deepcopy(data)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split("/")]
    node = data
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return data


_DELETE = object()
OFFSET = "experiments/offset_resolution"
EXTRAP = "experiments/length_extrapolation"
COST = "experiments/cost"
NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("path, value, message", [
    # wrong types
    ("machine/cpu_count", "2", r"machine\.cpu_count: must be an integer; got \"2\""),
    ("created", 5, r"created: must be a string; got 5"),
    (f"{OFFSET}/settings/0/params", [], r"offset_resolution\.settings\[0\]\.params: must be an object"),
    (f"{COST}/rows/0/L", 512.0, r"cost\.rows\[0\]\.L: must be an integer; got 512\.0"),
    (f"{OFFSET}/results/0/steps/0", True, r"results\[0\]\.steps\[0\]: must be an integer; got true"),
    ("format_version", "1", r"format_version: must be 1; got \"1\""),
    # NaN and infinity, where a finite number is required
    (f"{OFFSET}/results/3/accuracy/1", NAN, r"results\[3\]\.accuracy\[1\]: must be a finite number; got nan"),
    ("run/wall_seconds", INF, r"run\.wall_seconds: must be a finite number; got inf"),
    (f"{COST}/rows/0/forward_s", NAN, r"rows\[0\]\.forward_s: must be a finite number or null; got nan"),
    # ranges, empties and repeats
    (f"{OFFSET}/results/0/std", -0.1, r"results\[0\]\.std: must be >= 0; got -0\.1"),
    (f"{COST}/rows/0/delta_bytes", -131072, r"rows\[0\]\.delta_bytes: must be >= 0; got -131072"),
    (f"{EXTRAP}/results/0/min", 1.2, r"results\[0\]\.min: must be from 0 to 1; got 1\.2"),
    (f"{OFFSET}/setup/shifts", [1, 2, 2], r"setup\.shifts: has repeated values: \[1, 2, 2\]"),
    (f"{OFFSET}/setup/seeds", [], r"setup\.seeds: must not be empty"),
    (f"{COST}/rows", [], r"cost\.rows: must not be empty"),
    (f"{OFFSET}/setup/training/max_steps", {"0": 5}, r"max_steps: must match .*; got '0'"),
    (f"{EXTRAP}/setup/training/lr", 0, r"training\.lr: must be > 0; got 0"),
    # unknown names where the format lists them (other objects may carry extra keys)
    ("run/seconds_per_experiment/nonsense", 1.0, r"run\.seconds_per_experiment: unknown experiment 'nonsense'"),
    (f"{COST}/rows/2/impl", "magic", r"rows\[2\]\.impl: unknown implementation 'magic'; known: skew_naive"),
    # conditional fields: null only where the entry says why
    (f"{EXTRAP}/results/0/mean", None,
     r"results\[0\]\.mean: must be a finite number when the result has per-seed accuracies; got null"),
    (f"{COST}/rows/1/peak_bytes", None,
     r"rows\[1\]\.peak_bytes: must be an integer when the row is not marked as skipped; got null"),
    # what only Python checks: references and arithmetic across fields
    (f"{OFFSET}/settings/1/id", "shaw-k4", r"offset_resolution\.settings\[1\]\.id: repeated setting id 'shaw-k4'"),
    (f"{EXTRAP}/results/5/setting", "ghost", r"results\[5\]\.setting: unknown setting 'ghost'; the section lists none,"),
    (f"{OFFSET}/results/0/steps", [5, 5], r"results\[0\]\.steps: must hold one step count per seed \(3\)"),
    (f"{EXTRAP}/setup/train_length", 16, r"results\[0\]\.eval_length: must be factor × train_length = 16; got 32"),
    # missing keys the page reads
    (f"{EXTRAP}/setup/task_params", {}, r"setup\.task_params: missing key 's'"),
    (f"{OFFSET}/setup/training/stop_patience", _DELETE, r"setup\.training: missing key 'stop_patience'"),
])
def test_hostile_documents_are_refused_with_the_field_named(shipped, path, value, message):
    with pytest.raises(ValueError, match=message) as info:
        ex.validate_results(_edit(shipped, path, value), "hostile.json")
    assert str(info.value).startswith("results file hostile.json: ")


def test_not_an_object_or_another_format(shipped):
    with pytest.raises(ValueError, match=r"top level: must be an object; got \[\]"):
        ex.validate_results([])
    with pytest.raises(ValueError, match=r"format: must be 'relviz-experiments'; got 'other' \(not a relviz"):
        ex.validate_results(_edit(shipped, "format", "other"))
    with pytest.raises(ValueError, match=r"format_version: this relviz reads version 1; got 2"):
        ex.validate_results(_edit(shipped, "format_version", 2))


def test_nan_written_in_a_file_is_refused_with_the_field_named(shipped, tmp_path):
    """Python's json writes and reads NaN, which JSON has not: the loaded file is refused."""
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(_edit(shipped, f"{COST}/rows/4/peak_bytes", NAN)))
    assert "NaN" in path.read_text()
    with pytest.raises(ValueError, match=r"cost\.rows\[4\]\.peak_bytes: must be an integer or null; got nan"):
        ex.load_results(path)


def test_a_huge_file_is_refused_before_it_is_parsed(shipped, tmp_path):
    """The only size limit is the file's (MAX_RESULTS_BYTES): a huge array is not read at all."""
    path = tmp_path / "huge.json"
    huge = _edit(shipped, f"{OFFSET}/results/0/seconds", [0.5] * (MAX_RESULTS_BYTES // 4))
    path.write_text(json.dumps(huge))
    with pytest.raises(ValueError, match=r"huge\.json is \d+ bytes; a results file is far below"):
        ex.load_results(path)


def test_the_validator_reads_the_published_schema_with_its_references_inlined():
    """What the validator compiles is the published schema, $refs replaced by their definitions."""
    published = schema.load_schema()
    inlined = schema._inline(published, published["$defs"])
    assert "$ref" not in json.dumps(inlined) and "$defs" not in inlined
    jsonschema.Draft202012Validator.check_schema(inlined)
    run = inlined["properties"]["run"]  # a reference with its own description keeps the field's words
    assert run["description"] == published["properties"]["run"]["description"]
    assert run["required"] == published["$defs"]["run"]["required"]
    earlier = inlined["properties"]["earlier_runs"]["items"]  # a reference with other keywords: allOf
    assert earlier["properties"]["created"]["type"] == "string"
    assert earlier["allOf"][0]["required"] == published["$defs"]["run"]["required"]


def test_a_forward_never_adds_negative_memory(monkeypatch):
    """VmHWM is per process: a measurement in another thread may reset it between measure_forward's two
    reads. The delta it reports is clamped at zero (a negative one crashed the cost reading)."""
    import torch

    from relviz import measure

    readings = iter([1000, 5_000_000, 4_868_928])        # VmRSS, VmHWM before, VmHWM after (reset meanwhile)
    monkeypatch.setattr(measure, "proc_status", lambda field: next(readings))
    result = measure.measure_forward(lambda: torch.ones(2), repeats=1)
    assert result["peak_bytes"] - result["baseline_bytes"] == -131072   # the reads did go down
    assert result["delta_bytes"] == 0
