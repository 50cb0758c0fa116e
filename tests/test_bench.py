"""Smoke test for python -m relviz bench: it runs (--quick) and writes JSON of the right shape.

No timing assertions here: timings belong to the benchmark itself.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # timeout: a guard against a hang, not a deadline (the quick run took 202 s at load 5-9 with this stop's sections)
    proc = subprocess.run([sys.executable, "-m", "relviz", "bench", "--quick", "--json", str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(path.read_text())


def _sections(data: dict) -> dict[str, dict]:
    return {s["name"]: s for s in data["sections"]}


def test_json_has_header_and_every_section(quick_run) -> None:
    _, data = quick_run
    assert data["quick"] is True
    assert data["cpu_count"] >= 1 and data["torch_threads"] >= 1 and data["memory_total_bytes"] > 0
    sections = _sections(data)
    assert {"t5", "attention", "memory"} <= set(sections)
    for section in sections.values():
        assert section["title"] and section["rows"] and section["columns"]
        assert section["seconds"] >= 0
        for target in section["targets"]:
            assert target["verdict"] in {"PASS", "MISS", "n/a"}
            assert target["passed"] in {True, False, None}


def test_t5_rows(quick_run) -> None:
    rows = _sections(quick_run[1])["t5"]["rows"]
    for row in rows:
        assert row["L"] > 0 and row["relviz_s"] > 0 and row["reference_s"] > 0 and row["speedup"] > 0
        assert row["identical"] is True


def test_attention_rows(quick_run) -> None:
    rows = _sections(quick_run[1])["attention"]["rows"]
    assert {r["method"] for r in rows} == {"skew", "shaw"}
    for row in rows:
        for prefix in ("relviz", "naive"):
            assert row[f"{prefix}_s"] > 0
            assert row[f"{prefix}_peak_bytes"] > 0
            assert row[f"{prefix}_delta_bytes"] > 0
        assert row["time_ratio"] > 0 and row["memory_ratio"] > 0
        assert row["outputs_match"] is True


def test_memory_rows_reproduce_the_paper(quick_run) -> None:
    section = _sections(quick_run[1])["memory"]
    by_scope = {r["scope"]: r for r in section["rows"]}
    assert by_scope["per layer"]["shaw_bytes"] == 2048 * 2048 * 512 * 4
    assert by_scope["per head"]["skew_bytes"] == 2048 * 64 * 4
    assert all(t["passed"] for t in section["targets"])


def test_printed_table(quick_run) -> None:
    out = quick_run[0].stdout
    for text in ("T5 bucket map", "speed-up", "Relative attention", "8.6 GB", "0.52 MB"):
        assert text in out


def test_only_filter_runs_one_section(tmp_path) -> None:
    path = tmp_path / "only.json"
    proc = subprocess.run([sys.executable, "-m", "relviz", "bench", "--quick", "--only", "memory",
                           "--json", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [s["name"] for s in json.loads(path.read_text())["sections"]] == ["memory"]


def test_unknown_section_is_refused() -> None:
    proc = subprocess.run([sys.executable, "-m", "relviz", "bench", "--only", "nope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_versus_sections_put_the_alternative_beside_relviz(quick_run) -> None:
    sections = _sections(quick_run[1])
    fused = sections["fused"]["rows"]
    assert {r["function"] for r in fused} == {"t5", "alibi", "skew", "shaw", "shaw_kv"}
    for row in fused:
        assert row["relviz_s"] > 0 and row["weights_s"] > 0 and row["max_error"] <= 1e-4
        if row["function"] != "shaw_kv":
            assert row["sdpa_prebuilt_s"] > 0 and row["vs_sdpa"] > 0
    for row in sections["t5bias"]["rows"]:
        assert row["identical"] is True and row["relviz_s"] > 0 and row["before_ratio"] > 0
    assert {r["scheme"] for r in sections["model"]["rows"]} >= {"none", "t5", "shaw"}
    for row in sections["model"]["rows"]:   # relviz beside the same model written for SDPA, and the floor
        assert row["relviz_s"] > 0 and row["sdpa_s"] > 0 and row["floor_s"] > 0 and row["ratio"] > 0
        assert row["logits_diff"] <= 1e-4 or row["scheme"] == "shaw"
    for section in ("fused", "t5bias", "model"):
        assert any("load average" in note for note in sections[section]["notes"])


def test_no_flex_leaves_the_compiled_flex_column_out_of_the_fused_section(monkeypatch):
    """--no-flex: the full fused section asks its subprocesses for every implementation but flex."""
    import argparse

    from relviz.bench import report as bench
    from relviz.bench import fused as bench_fused
    from relviz.cli import bench as bench_cli
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    asked: list[list[str]] = []

    def fake_subprocess(kind, spec, ctx):
        asked.append(list(spec["impls"]))
        return {"error": "not run"}

    monkeypatch.setattr(bench_fused, "case_in_fresh_process", fake_subprocess)
    for argv, with_flex in ((["--no-flex"], False), ([], True)):
        args = parser.parse_args(argv)
        asked.clear()
        bench_fused.fused_section(bench.BenchContext(quick=False, log=lambda m: None, flex=not args.no_flex))
        assert asked and all(("flex" in impls) is with_flex for impls in asked)
        assert all("relviz" in impls and "sdpa_prebuilt" in impls for impls in asked)


def test_time_in_turns_repeats_a_short_call_to_fill_each_sample(monkeypatch):
    """A call of 1 ms on a fake clock, samples of at least 50 ms: 50 calls a sample, reported per call;
    a 200 ms call runs once a sample. Each call is first timed once to fix its count."""
    from relviz.bench import report as bench_report
    clock = [0.0]
    monkeypatch.setattr(bench_report.time, "perf_counter", lambda: clock[0])
    counts = {"short": 0, "long": 0}

    def call(name: str, seconds: float):
        def run() -> None:
            counts[name] += 1
            clock[0] += seconds
        return run

    times = bench_report.time_in_turns({"short": call("short", 0.001), "long": call("long", 0.2)}, rounds=3,
                                       min_sample_s=0.05)
    assert counts == {"short": 1 + 3 * 50, "long": 1 + 3}
    assert times["short"] == pytest.approx([0.001] * 3) and times["long"] == pytest.approx([0.2] * 3)
    counts.update(short=0, long=0)
    bench_report.time_in_turns({"short": call("short", 0.001), "long": call("long", 0.2)}, rounds=3)
    assert counts == {"short": 3, "long": 3}                    # without min_sample_s: one call a sample


def test_a_t5bias_length_whose_process_fails_is_a_miss_not_a_pass(monkeypatch):
    """Each T5 bias length runs in its own process: one that fails shows its error and misses the target."""
    from relviz.bench import report as bench
    from relviz.bench import t5bias as bench_t5bias
    asked: list[dict] = []

    def fake_subprocess(kind, spec, ctx):
        asked.append(dict(spec, kind=kind))
        return {"error": "killed"}

    monkeypatch.setattr(bench_t5bias, "case_in_fresh_process", fake_subprocess)
    result = bench_t5bias.t5_bias_section(bench.BenchContext(quick=False, log=lambda m: None))
    assert [a["L"] for a in asked] == [512, 1024, 2048, 4096, 8192] and {a["kind"] for a in asked} == {"t5bias"}
    target = next(t for t in result.targets if "L = 8192" in t.description)
    assert target.passed is False and target.detail == "killed"


def test_view_memory_and_gpu_sections_run_their_code_paths_under_quick(quick_run) -> None:
    sections = _sections(quick_run[1])
    rows = sections["view_memory"]["rows"]
    assert [(r["page"], r["L"]) for r in rows] == [("t5", 2**10), ("t5", 2**12)]
    for row in rows:
        assert row["problems"] == [] and row["peak_bytes"] >= 0 and "retained_bytes" in row
    assert "growth" in rows[1] or rows[0]["peak_bytes"] == 0
    gpu = sections["gpu"]
    if not gpu["rows"]:
        assert "no CUDA" in " ".join(gpu["notes"])
    else:
        assert {r["table"] for r in gpu["rows"]} == {"bandwidth", "attention"}


def test_check_rows_name_what_the_search_found(quick_run) -> None:
    rows = _sections(quick_run[1])["check"]["rows"]
    verdicts = [r["verdict"] for r in rows]
    assert verdicts == ["matches", "max_distance = 300, not 128", "no cause", "matches",
                        "angles computed in bfloat16", "no cause", "base = 31337, not 10000 + first position 7, not 0"]
    assert all(r["seconds"] > 0 for r in rows)


def test_mistakes_rows_hold_every_check_kind_and_no_wrong_verdict(quick_run) -> None:
    from relviz.check.api import REGISTRY

    section = _sections(quick_run[1])["mistakes"]
    rows = {r["kind"]: r for r in section["rows"]}
    assert list(rows) == [*REGISTRY, "all"]
    assert all(r["cases"] == 1 and r["WRONG"] == 0 for kind, r in rows.items() if kind != "all")
    assert rows["all"]["cases"] == len(REGISTRY) and section["targets"][0]["passed"] is True
