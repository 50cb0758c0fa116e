"""relviz.experiments (runner, schema, readings), relviz.chunked, and the shipped results file.

The runner is exercised on a tiny plan (seconds): trainings in-process, the benchmark's
attention cases run in-process too (the real command runs each in a fresh subprocess).
"""
from __future__ import annotations

import copy
import json
import math
import os
import re

import pytest
import torch

from relviz import experiments as ex
from relviz.attention import skew_attention
from relviz.chunked import chunked_skew_attention
from relviz.experiments.fit import fit
from relviz.model import SCHEMES, ModelConfig
from relviz.tasks import make_task
from relviz.training import train

TINY = ex.QUICK_PLAN.replace(
    seeds=(0, 1, 2), shifts=(1, 5), max_steps=(4, 4), extrap_max_steps=4, extrap_factors=(1, 2, 3),
    offset_settings=(ex.OFFSET_SETTINGS[0], ex.OFFSET_SETTINGS[3]),
    extrap_settings=(ex.EXTRAPOLATION_SETTINGS[2], ex.EXTRAPOLATION_SETTINGS[6]),
    batch_size=4, d_model=8, n_heads=2, d_ff=16, cost_lengths=(128,), cost_chunk=32, cost_repeats=1)


def _in_process_cost(monkeypatch) -> None:
    """Run the cost experiment's cases in this process: the benchmark's own attention section
    (its JSON, as `python -m relviz bench --json` writes it) and the chunked case."""
    from relviz.bench import sections as bench
    from relviz.experiments import cases, cost

    def bench_attention(quick, log):
        ctx = bench.BenchContext(quick=True, log=log)
        return {"torch_threads": torch.get_num_threads(), "sections": [bench.attention_section(ctx).to_json()]}

    def in_process(spec, log, run=None):
        return cases.run_case(spec)

    monkeypatch.setattr(bench, "run_in_fresh_process", in_process)
    monkeypatch.setattr(cost, "run_in_fresh_process", in_process)
    monkeypatch.setattr(cost, "bench_attention", bench_attention)


def tiny_results(monkeypatch) -> dict:
    _in_process_cost(monkeypatch)
    return ex.run_experiments(TINY, workers=1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        data = tiny_results(mp)
    finally:
        mp.undo()
    path = tmp_path_factory.mktemp("exp") / "tiny.json"
    path.write_text(json.dumps(data))
    return data, path


# ---------------------------------------------------------------------------------------
# The runner


def test_tiny_run_writes_the_schema(tiny):
    data, path = tiny
    assert ex.load_results(path) == data
    assert list(data["experiments"]) == list(ex.EXPERIMENTS)
    offset = data["experiments"]["offset_resolution"]
    assert offset["setup"]["seeds"] == [0, 1, 2] and offset["setup"]["shifts"] == [1, 5]
    assert len(offset["results"]) == 2 * 2 * 2
    for r in offset["results"]:
        assert len(r["accuracy"]) == 3 and r["min"] <= r["mean"] <= r["max"]
        assert r["steps"] == [4, 4, 4]
    extrap = data["experiments"]["length_extrapolation"]
    learned = {r["factor"]: r for r in extrap["results"] if r["setting"] == "learned"}
    # learned max_len 64, trained at 32: runs at 2x (64), cannot run at 3x (96), with the reason
    assert learned[2]["cannot_run"] is None and learned[2]["accuracy"] is not None
    assert learned[3]["accuracy"] is None and "max_len=64" in learned[3]["cannot_run"]
    cost = data["experiments"]["cost"]
    impls = {r["impl"] for r in cost["rows"]}
    assert impls == set(ex.IMPLEMENTATIONS)
    assert all(r["skipped"] is None and r["forward_s"] > 0 for r in cost["rows"])
    run = data["run"]
    assert run["wall_seconds"] >= 0 and run["cpu_seconds"] >= 0 and data["quick"] is True


def test_runs_are_seeded(tiny, monkeypatch):
    again = ex.run_experiments(TINY, only=["offset_resolution"], workers=1)
    first = [r["accuracy"] for r in tiny[0]["experiments"]["offset_resolution"]["results"]]
    assert [r["accuracy"] for r in again["experiments"]["offset_resolution"]["results"]] == first


def test_cli_only_updates_one_section(tiny, tmp_path, monkeypatch, capsys):
    from relviz.__main__ import main

    data, path = tiny
    out = tmp_path / "results.json"
    out.write_text(path.read_text())
    from relviz.cli import experiments as cli
    monkeypatch.setattr(cli, "QUICK_PLAN", TINY.replace(extrap_factors=(1, 2)))
    assert main(["experiments", "--quick", "--only", "length", "--workers", "1", "--out", str(out)]) == 0
    new = ex.load_results(out)
    assert new["experiments"]["offset_resolution"] == data["experiments"]["offset_resolution"]
    assert new["experiments"]["length_extrapolation"]["setup"]["factors"] == [1, 2]
    # the kept sections keep the record of the run that measured them
    assert new["run"]["experiments"] == ["length_extrapolation"]
    assert new["earlier_runs"][-1]["experiments"] == list(ex.EXPERIMENTS)
    assert new["earlier_runs"][-1]["created"] == data["created"]
    printed = capsys.readouterr().out
    assert "wrote" in printed and "Length extrapolation" in printed


def test_fit_is_train_without_early_stopping():
    config = ModelConfig(scheme="shaw", clip=2, d_model=8, n_heads=2, d_ff=16, n_layers=1)
    task = make_task("shift", s=2)
    ours = fit(config, task, max_steps=6, batch_size=4, length=10, lr=1e-2, seed=3)
    reference = train(config, task, steps=6, batch_size=4, length=10, lr=1e-2, seed=3)
    assert ours.steps == 6
    for (name, a), (_, b) in zip(ours.model.state_dict().items(), reference.model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_fit_stops_early_and_reports_progress():
    config = ModelConfig(scheme="t5", d_model=8, n_heads=2, d_ff=16, n_layers=1)
    calls = []
    result = fit(config, make_task("shift", s=1), max_steps=500, batch_size=4, length=8, lr=1e-2, seed=0,
                    stop_loss=100.0, stop_patience=7, progress=lambda *a: calls.append(a))
    assert result.steps == 7 and calls[-1][0] == 7


def test_spread():
    assert ex.spread([0.5, 1.0, 0.75]) == {"mean": 0.75, "min": 0.5, "max": 1.0, "std": 0.25}
    assert ex.spread([0.3])["std"] == 0.0
    with pytest.raises(ValueError):
        ex.spread([])


# ---------------------------------------------------------------------------------------
# Schema validation


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist.*python -m relviz experiments"):
        ex.load_results(tmp_path / "nope.json")


def test_malformed_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ex.load_results(bad)
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not UTF-8|not valid JSON"):
        ex.load_results(bad)


def _broken(data, edit):
    data = copy.deepcopy(data)
    edit(data)
    return data


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.clear(), "missing key 'format'"),
    (lambda d: d.update(format="something-else"), "must be 'relviz-experiments'"),
    (lambda d: d.update(format_version=99), "reads version 1"),
    (lambda d: d.update(quick="yes"), r"quick: must be true or false"),
    (lambda d: d["experiments"].update(nonsense={}), "unknown experiment 'nonsense'"),
    (lambda d: d["experiments"]["offset_resolution"]["results"][0].update(accuracy=["x", 0.1, 0.1]),
     r"results\[0\]\.accuracy\[0\]: must be a finite number"),
    (lambda d: d["experiments"]["offset_resolution"]["results"][0].update(accuracy=[0.5, 0.5]),
     "one accuracy per seed"),
    (lambda d: d["experiments"]["offset_resolution"]["results"][0].update(mean=0.99),
     "the per-seed accuracies give"),
    (lambda d: d["experiments"]["offset_resolution"]["results"][0].update(max=1.5), "from 0 to 1"),
    (lambda d: d["experiments"]["offset_resolution"]["results"].pop(), "have no result"),
    (lambda d: d["experiments"]["offset_resolution"]["results"][0].update(layers=True), "must be an integer"),
    (lambda d: d["experiments"]["offset_resolution"]["settings"][0].update(scheme="bogus"), "unknown scheme"),
    (lambda d: d["experiments"]["offset_resolution"]["settings"][0]["params"].update(clip=-1), "not valid for"),
    (lambda d: d["experiments"]["length_extrapolation"]["results"][0].update(eval_length=7), "factor × train_length"),
    (lambda d: d["experiments"]["length_extrapolation"]["results"][0].update(
        accuracy=None, mean=None, min=None, max=None, std=None), "must be a list"),
    (lambda d: d["experiments"]["cost"]["rows"][0].update(impl="magic"), "unknown implementation"),
    (lambda d: d["experiments"]["cost"]["rows"][0].update(L="big"), r"rows\[0\]\.L: must be an integer"),
    (lambda d: d["experiments"]["cost"]["rows"][0].update(forward_s=None), "not marked as skipped"),
    (lambda d: d["experiments"]["cost"]["setup"].pop("memory_total_bytes"), "missing key 'memory_total_bytes'"),
    (lambda d: d.update(experiments=[]), "experiments: must be an object"),
    (lambda d: d.update(earlier_runs=[{"wall_seconds": 1}]), r"earlier_runs\[0\]: missing key 'cpu_seconds'"),
    (lambda d: d["run"].update(experiments=["x"]), r"run\.experiments\[0\]: unknown experiment 'x'"),
])
def test_wrong_content_gives_a_clear_message(tiny, tmp_path, edit, message):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(_broken(tiny[0], edit)))
    with pytest.raises(ValueError, match=message) as info:
        ex.load_results(path)
    assert str(path) in str(info.value)


def test_nan_is_refused(tiny):
    data = _broken(tiny[0], lambda d: d["experiments"]["cost"]["rows"][0].update(forward_s=float("nan")))
    with pytest.raises(ValueError, match="finite number"):
        ex.validate_results(json.loads(json.dumps(data)))


# ---------------------------------------------------------------------------------------
# The shipped results


def test_shipped_results_are_complete():
    data = ex.load_results()
    assert list(data["experiments"]) == list(ex.EXPERIMENTS) and data["quick"] is False
    offset = data["experiments"]["offset_resolution"]
    assert len(offset["setup"]["seeds"]) >= 3 and max(offset["setup"]["shifts"]) == 40
    assert offset["setup"]["layers"] == [1, 2]
    ids = {s["id"] for s in offset["settings"]}
    assert {"shaw-k4", "shaw-k16", "t5-32-128", "t5-8-32", "alibi", "sinusoidal"} <= ids
    extrap = data["experiments"]["length_extrapolation"]
    assert {s["scheme"] for s in extrap["settings"]} == set(SCHEMES)
    assert extrap["setup"]["factors"] == list(range(1, 9))
    learned = [r for r in extrap["results"] if r["setting"] == "learned" and r["factor"] > 2]
    assert learned and all(r["cannot_run"] for r in learned)
    cost = data["experiments"]["cost"]
    assert {r["impl"] for r in cost["rows"]} == set(ex.IMPLEMENTATIONS)
    runs = [data["run"]] + data.get("earlier_runs", [])
    assert all(r["workers"] == 2 for r in runs)
    assert {n for r in runs for n in r["experiments"]} == set(ex.EXPERIMENTS)
    assert len(json.dumps(data)) < 200_000


def test_readings_are_three_sentences_from_the_data():
    data = ex.load_results()
    offset = data["experiments"]["offset_resolution"]
    for reading in (ex.offset_reading(offset, 0.9),
                    ex.extrapolation_reading(data["experiments"]["length_extrapolation"]),
                    ex.cost_reading(data["experiments"]["cost"])):
        assert len(reading) == 3 and all(len(s) > 20 for s in reading)
        # lengths read as the page writes them ("L ≈ 1,234,205"), never "L ≈ 9.9e+07" beside them
        assert not any(re.search(r"\d\.?\d*e[+-]\d", s) for s in reading), reading
    # the numbers quoted for Shaw k = 4 are the stored means
    first = ex.offset_reading(offset, 0.9)[0]
    rows = {(r["setting"], r["layers"], r["s"]): r["mean"] for r in offset["results"]}
    inside = [rows[("shaw-k4", 1, s)] for s in offset["setup"]["shifts"] if s <= 3]
    beyond = [rows[("shaw-k4", 1, s)] for s in offset["setup"]["shifts"] if s >= 4]
    quoted = re.search(r"Shaw k = 4 (\d+)% for s ≤ 3 against (\d+)% from s = 4 on", first)
    assert quoted, first
    assert int(quoted.group(1)) == round(100 * sum(inside) / len(inside))
    assert int(quoted.group(2)) == round(100 * sum(beyond) / len(beyond))
    # a range is quoted only as far as it was measured: Shaw k = 16's exact offsets end at the
    # largest measured s below 16, not at 15
    exact16 = max(s for s in offset["setup"]["shifts"] if s < 16)
    assert re.search(rf"Shaw k = 16 \d+% for s ≤ {exact16} against \d+% from s = 16 on", first), first


def test_page_lines_come_from_the_results():
    """The Experiments page prints these as they are: each line follows the numbers it reads."""
    data = copy.deepcopy(ex.load_results())
    runs = data.get("earlier_runs", []) + [data["run"]]
    line = ex.provenance(data)
    assert line.startswith(f"relviz {data['relviz_version']}, torch {data['torch_version']} · ")
    assert line.count(" wall clock with ") == len(runs) and "quick run" not in line
    data["quick"], data["run"]["workers"] = True, 7
    line = ex.provenance(data)
    assert line.endswith(" · **quick run: not meaningful**") and "with 7 worker processes" in line
    offset = data["experiments"]["offset_resolution"]
    table = ex.offset_table(offset)
    labels = {s["label"] for s in offset["settings"]}
    assert len(table) == len(offset["results"]) and {r["setting"] for r in table} == labels
    assert [r["steps"] for r in table] == [max(r["steps"]) for r in offset["results"]]
    setup = copy.deepcopy(data["experiments"]["length_extrapolation"]["setup"])
    setup["task_params"]["s"], setup["factors"] = 1, [1, 3]
    assert "on shift s = 1, then run unchanged on sequences up to 3× longer. The answer is still 1 token back" \
        in ex.extrapolation_setup_sentence(setup)
    cost_setup = data["experiments"]["cost"]["setup"] | {"chunk": 17, "heads": 3}
    assert "H = 3," in ex.cost_setup_sentence(cost_setup) and "handles 17 queries" in ex.cost_setup_sentence(cost_setup)


def test_live_summaries_and_skipped_cases():
    assert ex.live_offset_label("Shaw k = 4", 1, 7, 50) == "live: Shaw k = 4, 1 layer, seed 7, ≤ 50 steps"
    assert ex.live_offset_label("T5", 2, 0, 5) == "live: T5, 2 layers, seed 0, ≤ 5 steps"
    assert ex.live_offset_summary([{"s": 1, "accuracy": 1.0}, {"s": 5, "accuracy": 0.25}]) == "s = 1: 100%, s = 5: 25%"
    assert ex.live_extrapolation_summary([{"factor": 1, "accuracy": 0.5}, {"factor": 3, "accuracy": None}]) \
        == "1×: 50%, 3×: cannot run"
    rows = [{"L": 256, "skipped": None, "delta_bytes": 0, "peak_bytes": 2_000_000, "forward_s": 0.0123},
            {"L": 512, "skipped": "too large", "delta_bytes": None, "peak_bytes": None, "forward_s": None}]
    assert ex.live_cost_summary(rows) == "L = 256: 2 MB, 12 ms, L = 512: too large"  # Δpeak 0: the peak
    cost = copy.deepcopy(ex.load_results()["experiments"]["cost"])
    skipped = [r for r in cost["rows"] if r["skipped"]]
    summary = ex.skipped_cost_summary(cost)
    assert summary.startswith("Not measured: ") and summary.count(" at L = ") == len(skipped) >= 1
    for r in cost["rows"]:
        r["skipped"] = None
    assert ex.skipped_cost_summary(cost) is None


def test_reading_follows_the_threshold(tiny):
    offset = tiny[0]["experiments"]["offset_resolution"]
    low, high = ex.offset_reading(offset, 0.0)[1], ex.offset_reading(offset, 1.0)[1]
    assert "0 of the 0" in low and "below 100%" in high


# ---------------------------------------------------------------------------------------
# Scheme geometry drawn beside the accuracy


def test_t5_bucket_segments_match_the_reference():
    t5 = ex.Setting("t5", "T5 8/32", "t5", {"num_buckets": 8, "max_distance": 32})
    assert [(a, b) for a, b, _ in ex.bucket_segments(t5, 40)] == [(1, 1), (2, 2), (3, 3), (4, 6), (7, 11),
                                                                   (12, 19), (20, 40)]
    big = ex.Setting("t5b", "T5 32/128", "t5", {"num_buckets": 32, "max_distance": 128})
    segments = ex.bucket_segments(big, 40)
    assert segments[:15] == [(s, s, segments[s - 1][2]) for s in range(1, 16)]
    assert [(a, b) for a, b, _ in segments[15:18]] == [(16, 18), (19, 20), (21, 23)]
    assert ex.exact_shifts(t5, [1, 2, 3, 4, 8]) == [1, 2, 3]
    assert ex.bucket_width(t5, 5) == 3 and ex.bucket_width(big, 17) == 3


def test_shaw_segments_and_exact_range():
    # clip(j − i, −k, k): offset −k already reads the end embedding that every farther offset shares
    shaw = ex.Setting("s", "Shaw k = 4", "shaw", {"clip": 4})
    assert [(a, b) for a, b, _ in ex.bucket_segments(shaw, 40)] == [(1, 1), (2, 2), (3, 3), (4, 40)]
    assert ex.exact_shifts(shaw, [1, 3, 4, 5, 40]) == [1, 3]
    assert ex.bucket_starts(shaw, [1, 3, 4, 5, 40]) == ([4], [5, 40])
    assert ex.exact_shifts(ex.Setting("a", "ALiBi", "alibi"), [1, 2]) is None


def test_reach():
    assert ex.reach([1.0, 0.95, 0.5, 1.0], [1, 2, 3, 4], 0.9) == 2
    assert ex.reach([0.2, 1.0], [1, 2], 0.9) == 0


def test_memory_wall_arithmetic():
    memory = 24e9
    naive = ex.wall_length(lambda x: ex.naive_gather_bytes(x, 64), memory)
    assert naive == pytest.approx(math.sqrt(memory / (64 * 4)), rel=1e-6)
    assert ex.naive_gather_bytes(2048, 512) == 2048 * 2048 * 512 * 4  # the Music Transformer's 8.6 GB
    assert ex.skew_table_bytes(2048, 512) == 2048 * 512 * 4


# ---------------------------------------------------------------------------------------
# Query-chunked attention


@pytest.mark.parametrize("length, rows, chunk", [(1, 1, 1), (7, 3, 2), (16, 16, 5), (33, 40, 8), (50, 20, 64),
                                                 (64, 64, 16)])
def test_chunked_equals_skew_attention(length, rows, chunk):
    gen = torch.Generator().manual_seed(length)
    q, k, v = (torch.randn(2, 3, length, 8, generator=gen) for _ in range(3))
    e_r = torch.randn(rows, 8, generator=gen)
    expected = skew_attention(q, k, v, e_r)[0]
    assert torch.allclose(chunked_skew_attention(q, k, v, e_r, chunk=chunk), expected, atol=1e-5)


def test_chunked_has_gradients_and_checks_arguments():
    q, k, v = (torch.randn(1, 2, 9, 4, requires_grad=True) for _ in range(3))
    e_r = torch.randn(9, 4, requires_grad=True)
    chunked_skew_attention(q, k, v, e_r, chunk=4).sum().backward()
    assert e_r.grad is not None and q.grad is not None
    with pytest.raises(ValueError, match="chunk"):
        chunked_skew_attention(q, k, v, e_r, chunk=0)
    with pytest.raises(ValueError, match="e_r must have shape"):
        chunked_skew_attention(q, k, v, torch.randn(9, 5))
    with pytest.raises(ValueError, match="one shape"):
        chunked_skew_attention(q, k[:, :, :4], v, e_r)


def test_live_cost_measures_one_case_in_a_fresh_process():
    steps = []
    rows = ex.live_cost("chunked", [64], chunk=16, repeats=1, progress=lambda f, m: steps.append(f))
    assert rows[0]["impl"] == "chunked" and rows[0]["L"] == 64 and rows[0]["skipped"] is None
    assert rows[0]["forward_s"] > 0 and rows[0]["peak_bytes"] > 0 and steps[-1] == 1.0
    with pytest.raises(ValueError, match="unknown implementation"):
        ex.live_cost("fast", [64])


def test_the_shipped_results_come_from_the_full_plan():
    """The page shows the shipped file as the measured result: every section from a run of FULL_PLAN
    (a later run may add settings to a section: --only length --settings ID; earlier_runs keeps the rest)."""
    data = ex.load_results()
    runs = [data["run"]] + data.get("earlier_runs", [])
    assert data["quick"] is False and {n for r in runs for n in r["experiments"]} == set(ex.EXPERIMENTS)
    assert [s["id"] for s in data["experiments"]["length_extrapolation"]["settings"]] == \
        [s.id for s in ex.FULL_PLAN.extrap_settings]
    offset = data["experiments"]["offset_resolution"]["setup"]
    assert offset["shifts"] == list(ex.FULL_PLAN.shifts) and offset["seeds"] == list(ex.FULL_PLAN.seeds)
    assert [s["id"] for s in data["experiments"]["offset_resolution"]["settings"]] == \
        [s.id for s in ex.FULL_PLAN.offset_settings]


def _square(spec):
    import torch
    return {"accuracy": 1.0, "steps": spec["n"] * spec["n"], "seconds": 0.0, "threads": torch.get_num_threads()}


def test_run_jobs_on_joblib_processes_keeps_job_order_and_one_thread_each():
    from relviz.experiments.pool import run_jobs
    jobs = [(_square, {"n": n}, f"job {n}") for n in range(6)]
    lines = []
    results = run_jobs(jobs, 2, lines.append)
    assert [r["steps"] for r in results] == [n * n for n in range(6)]
    assert all(r["threads"] == 1 for r in results)
    assert len(lines) == 6 and all(line.startswith("[") for line in lines)


def test_cpu_time_counts_the_worker_processes():
    """With joblib workers the run's CPU time includes theirs (they outlive the run, so the
    parent's children times never see them): at least the trainings' own CPU."""
    plan = TINY.replace(seeds=(0,), max_steps=(40, 40))
    run = ex.run_experiments(plan, only=["offset_resolution"], workers=2)["run"]
    assert run["engine"] == "joblib loky" and run["training_job_cpu_seconds"] > 0.5
    assert run["cpu_seconds"] >= run["training_job_cpu_seconds"]


def test_run_jobs_on_a_local_ray_instance(monkeypatch):
    """--ray ADDRESS: the same jobs through joblib's Ray backend (Ray is an optional extra)."""
    ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'ray[default]'")
    from relviz.experiments.pool import run_jobs
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "300")   # a busy machine starts the raylet slowly
    from pathlib import Path
    here = Path(__file__).resolve().parent        # the workers import relviz and this module like a cluster would
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": f"{here.parent}{os.pathsep}{here}"}})
    try:
        address = ray.get_runtime_context().gcs_address
        jobs = [(_square, {"n": n}, f"job {n}") for n in range(4)]
        results = run_jobs(jobs, 2, lambda line: None, ray_address=address)
        assert [r["steps"] for r in results] == [0, 1, 4, 9]
    finally:
        ray.shutdown()


def test_ray_without_ray_installed_says_what_to_install(monkeypatch):
    import builtins

    from relviz.experiments.pool import run_jobs
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ValueError, match="pip install 'ray"):
        run_jobs([(_square, {"n": 1}, "x")], 2, lambda line: None, ray_address="auto")
