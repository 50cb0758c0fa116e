"""Experiments: what each position scheme can and cannot do, measured.

``python -m relviz experiments [--quick] [--out PATH] [--only NAME]`` runs three experiments
and writes their results, with their setup and the spread over seeds, to a small JSON file
(shipped as ``relviz/experiments_results.json``, so the app's page opens instantly):

1. ``offset_resolution``: accuracy on shift-by-s (output the token s places back) for a grid
   of s, per scheme and setting (Shaw k = 4 and 16, T5 32/128 and 8/32, ALiBi, sinusoidal),
   with one layer and with two. **One small model is trained per (setting, layers, s, seed)**,
   with exactly relviz.train's loop (AdamW, warm-up + cosine, gradient clipping) plus early
   stopping. One model trained on "shift by the s named in the input" would be cheaper, but
   it measures something else: a single layer can only point at an offset chosen by the input
   if its position term depends on the query (Shaw does; T5, ALiBi and a linear map of
   absolute positions do not), so T5 and ALiBi would fail for a reason unrelated to their
   buckets. Separate models keep the measurement about resolution.
2. ``length_extrapolation``: train every scheme at one length, evaluate at 1× … 8× that
   length. A scheme that cannot run at a length (learned absolute positions beyond max_len)
   is recorded as "cannot run" with the reason.
3. ``cost``: forward time and peak memory against L for each attention implementation, from
   ``python -m relviz bench --only attention --json`` (relviz skew and Shaw against the naive
   L × L × D gather), plus the query-chunked attention of :mod:`relviz.chunked`, each case in
   a fresh process.

Trainings run in worker processes (multiprocessing, spawn), one torch thread each: for this
tiny model one thread per process is several times faster than one process with several.

Everything the page shows is validated on load (:func:`load_results`): a missing or
malformed file raises ValueError with a message saying what is wrong, never a traceback.

Sign convention everywhere: relative position = key index − query index (j − i); the answer
of shift-by-s sits at j − i = −s.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from relviz import __version__
from relviz._checks import check_int
from relviz.model import SCHEMES, ModelConfig, build_model
from relviz.positions import t5_bucket
from relviz.tasks import make_task
from relviz.train import EVAL_SEED, Optimization, eval_samples, evaluate, freeze

__all__ = [
    "FORMAT", "FORMAT_VERSION", "RESULTS_PATH", "EXPERIMENTS", "Setting", "OFFSET_SETTINGS",
    "EXTRAPOLATION_SETTINGS", "Plan", "FULL_PLAN", "QUICK_PLAN", "IMPLEMENTATIONS", "SHAW_TABLE2",
    "ALIBI_HEADLINE", "FitResult", "fit", "spread", "run_experiments", "validate_results",
    "load_results", "exact_shifts", "bucket_starts", "bucket_segments", "offset_matrix", "reach", "offset_reading",
    "extrapolation_reading", "cost_reading", "naive_gather_bytes", "skew_table_bytes",
    "attention_matrix_bytes", "chunked_bytes", "wall_length", "live_offset", "live_extrapolation", "live_cost",
    "live_offset_work", "live_extrapolation_work",
    "add_arguments", "run",
]

FORMAT = "relviz-experiments"
FORMAT_VERSION = 1
#: The shipped results file, read by the app's Experiments page.
RESULTS_PATH = Path(__file__).resolve().parent / "experiments_results.json"
#: A results file larger than this is refused (the shipped one is a few tens of kB).
MAX_RESULTS_BYTES = 4 << 20

#: experiment name -> title, in page order.
EXPERIMENTS: dict[str, str] = {
    "offset_resolution": "Offset resolution: which offsets can one layer tell apart?",
    "length_extrapolation": "Length extrapolation: train short, test long",
    "cost": "Cost: time and memory of relative attention against L",
}

# ---------------------------------------------------------------------------------------
# Published reference points (FACTS.md)

#: Shaw et al. 2018, Table 2: newstest2013 EN-DE BLEU of the base model by clipping distance k.
SHAW_TABLE2: dict[int, float] = {0: 12.5, 1: 25.5, 2: 25.8, 4: 25.9, 16: 25.8, 64: 25.9, 256: 25.8}
#: Press et al. (ALiBi), the headline result.
ALIBI_HEADLINE = ("A 1.3B-parameter ALiBi model trained at length 1024 matches a sinusoidal model trained at "
                  "2048 when both are tested at 2048, training 11% faster and using 11% less memory "
                  "(Press et al., Train Short, Test Long).")


# ---------------------------------------------------------------------------------------
# What is measured: scheme settings and the plan


@dataclass(frozen=True)
class Setting:
    """One scheme with its parameters, e.g. Shaw with k = 4: an id, a label, ModelConfig fields."""

    id: str
    label: str
    scheme: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "scheme": self.scheme, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Setting:
        return cls(data["id"], data["label"], data["scheme"], dict(data["params"]))


OFFSET_SETTINGS: tuple[Setting, ...] = (
    Setting("shaw-k4", "Shaw k = 4", "shaw", {"clip": 4}),
    Setting("shaw-k16", "Shaw k = 16", "shaw", {"clip": 16}),
    Setting("t5-32-128", "T5 32/128", "t5", {"num_buckets": 32, "max_distance": 128}),
    Setting("t5-8-32", "T5 8/32", "t5", {"num_buckets": 8, "max_distance": 32}),
    Setting("alibi", "ALiBi", "alibi", {}),
    Setting("sinusoidal", "sinusoidal (absolute)", "sinusoidal", {}),
)

EXTRAPOLATION_SETTINGS: tuple[Setting, ...] = (
    Setting("none", "no positions (none)", "none", {}),
    Setting("sinusoidal", "sinusoidal", "sinusoidal", {}),
    Setting("learned", "learned (max_len 64)", "learned", {"max_len": 64}),
    Setting("shaw", "Shaw k = 8", "shaw", {"clip": 8}),
    Setting("t5", "T5 32/128", "t5", {"num_buckets": 32, "max_distance": 128}),
    Setting("skew", "skew (32 distances)", "skew", {"skew_distances": 32}),
    Setting("alibi", "ALiBi", "alibi", {}),
    Setting("rope", "RoPE", "rope", {}),
)

#: Attention implementations of the cost experiment: id -> label.
IMPLEMENTATIONS: dict[str, str] = {
    "skew_naive": "naive gather, L × L × D (skew semantics)",
    "shaw_naive": "naive gather, L × L × D, K and V (Shaw)",
    "skew": "relviz skew (L × D table, L² · H logits)",
    "shaw": "relviz Shaw (per-offset products, L² · H logits)",
    "chunked": "query-chunked skew (chunk · L · H)",
}


@dataclass(frozen=True)
class Plan:
    """Every knob of a run. FULL_PLAN is what the shipped file was made with; QUICK_PLAN is a
    smoke run; tests shrink it further with :meth:`replace`."""

    # model (shared by experiments 1 and 2)
    d_model: int = 32
    n_heads: int = 4
    d_ff: int = 64
    # training (shared)
    batch_size: int = 32
    lr: float = 1e-2
    stop_loss: float = 0.05       # early stop once the training loss stays below this ...
    stop_patience: int = 20       # ... for this many consecutive steps
    seeds: tuple[int, ...] = (0, 1, 2)
    # 1. offset resolution
    shifts: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32, 40)
    layers: tuple[int, ...] = (1, 2)
    max_steps: tuple[int, ...] = (300, 800)    # per entry of layers
    counted: int = 12             # train/eval length is s + counted: every s has as many answers
    offset_settings: tuple[Setting, ...] = OFFSET_SETTINGS
    # 2. length extrapolation
    extrap_task_s: int = 5
    extrap_layers: int = 2
    extrap_train_length: int = 32
    extrap_factors: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    extrap_max_steps: int = 800
    extrap_settings: tuple[Setting, ...] = EXTRAPOLATION_SETTINGS
    # 3. cost
    cost_quick: bool = False      # passes --quick to the benchmark (L = 128 only)
    cost_lengths: tuple[int, ...] = (512, 1024, 2048, 4096)   # the chunked cases; the bench has its own
    cost_chunk: int = 128
    cost_repeats: int = 3

    def replace(self, **changes: Any) -> Plan:
        return dataclasses.replace(self, **changes)

    def model_config(self, setting: Setting, n_layers: int) -> ModelConfig:
        return ModelConfig(vocab_size=10, d_model=self.d_model, n_layers=n_layers, n_heads=self.n_heads,
                           d_ff=self.d_ff, scheme=setting.scheme, causal=True, **setting.params)

    def steps_for(self, layers: int) -> int:
        return self.max_steps[self.layers.index(layers)]


FULL_PLAN = Plan()
QUICK_PLAN = Plan(seeds=(0, 1, 2), shifts=(1, 4, 8, 16), max_steps=(80, 120), extrap_max_steps=120,
                  extrap_factors=(1, 2, 4), cost_quick=True, cost_lengths=(128,), cost_chunk=32, cost_repeats=2)


# ---------------------------------------------------------------------------------------
# Training with early stopping


@dataclass
class FitResult:
    model: Any
    steps: int          # optimizer steps actually taken (early stopping may end before max_steps)
    final_loss: float
    seconds: float


def fit(config: ModelConfig, task, *, max_steps: int, batch_size: int, length: int, lr: float, seed: int,
        stop_loss: float = 0.0, stop_patience: int = 0,
        progress: Callable[[int, int, float], Any] | None = None) -> FitResult:
    """relviz.train.train's loop (same optimizer, schedule over max_steps, clipping, seeded
    weights and batches) with early stopping: it ends once the training loss has stayed below
    ``stop_loss`` for ``stop_patience`` consecutive steps (stop_patience 0: never).

    ``progress(step, max_steps, loss)`` is called about 50 times. Returns the model in eval mode.
    """
    max_steps = check_int("max_steps", max_steps, minimum=1, maximum=1_000_000)
    model = build_model(config, seed=seed)
    length = task.check_length(model.check_length(length))
    optimization = Optimization.for_model(model, lr=lr, steps=max_steps, seed=seed)
    report_every = max(1, max_steps // 50)
    start = time.perf_counter()
    model.train()
    below = 0
    loss_value = float("nan")
    step = 0
    for step in range(1, max_steps + 1):
        loss_value = optimization.step(model, task, batch_size, length).item()
        below = below + 1 if loss_value < stop_loss else 0
        done = stop_patience > 0 and below >= stop_patience
        if progress is not None and (step % report_every == 0 or step == max_steps or done):
            progress(step, max_steps, loss_value)
        if done:
            break
    return FitResult(freeze(model), step, loss_value, time.perf_counter() - start)


def spread(values: Iterable[float]) -> dict[str, float]:
    """mean, min, max and sample standard deviation (n − 1; 0 for one value), rounded."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("spread needs at least one value")
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return {"mean": round(mean, 5), "min": round(min(values), 5), "max": round(max(values), 5),
            "std": round(std, 5)}


# ---------------------------------------------------------------------------------------
# Jobs (run in worker processes: plain dicts in, plain dicts out)


def _offset_job(spec: dict[str, Any]) -> dict[str, Any]:
    cpu = time.process_time()
    plan = Plan(**spec["plan"])
    setting = Setting.from_dict(spec["setting"])
    task = make_task("shift", s=spec["s"])
    length = spec["s"] + plan.counted
    result = fit(plan.model_config(setting, spec["layers"]), task, max_steps=plan.steps_for(spec["layers"]),
                 batch_size=plan.batch_size, length=length, lr=plan.lr, seed=spec["seed"],
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience)
    accuracy = evaluate(result.model, task, length=length, seed=EVAL_SEED)
    return {"accuracy": accuracy, "steps": result.steps, "seconds": result.seconds,
            "cpu_seconds": time.process_time() - cpu}


def _extrapolation_job(spec: dict[str, Any]) -> dict[str, Any]:
    cpu = time.process_time()
    plan = Plan(**spec["plan"])
    setting = Setting.from_dict(spec["setting"])
    task = make_task("shift", s=plan.extrap_task_s)
    result = fit(plan.model_config(setting, plan.extrap_layers), task, max_steps=plan.extrap_max_steps,
                 batch_size=plan.batch_size, length=plan.extrap_train_length, lr=plan.lr, seed=spec["seed"],
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience)
    per_length = _evaluate_lengths(result.model, task, plan)
    return {"per_length": per_length, "steps": result.steps, "seconds": result.seconds,
            "cpu_seconds": time.process_time() - cpu}


def _evaluate_lengths(model, task, plan: Plan) -> list[dict[str, Any]]:
    """Accuracy at every evaluation length, or the reason the model cannot run there."""
    out = []
    for factor in plan.extrap_factors:
        length = factor * plan.extrap_train_length
        try:
            model.check_length(length)
        except ValueError as exc:
            out.append({"factor": factor, "eval_length": length, "accuracy": None, "cannot_run": str(exc)})
            continue
        out.append({"factor": factor, "eval_length": length,
                    "accuracy": evaluate(model, task, length=length, seed=EVAL_SEED), "cannot_run": None})
    return out


def _plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan's knobs for a worker (the settings travel separately, one per job)."""
    data = dataclasses.asdict(plan)
    del data["offset_settings"], data["extrap_settings"]
    return data


def _init_worker() -> None:
    torch.set_num_threads(1)
    try:  # Linux: a worker dies with the runner (no orphans left computing after Ctrl-C or kill)
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _run_jobs(jobs: list[tuple[Callable, dict[str, Any], str]], workers: int,
              log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run (function, spec, label) jobs, ``workers`` processes at a time (1: in this process).

    Results come back in job order. The costliest jobs should come first (better packing).
    """
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    total = len(jobs)
    if workers <= 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for index, (fn, spec, label) in enumerate(jobs):
                results[index] = fn(spec)
                log(f"[{index + 1}/{total}] {label}: {_job_summary(results[index])}")
        finally:
            torch.set_num_threads(threads)
        return results  # type: ignore[return-value]
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                                  initializer=_init_worker)
    try:
        futures = {pool.submit(fn, spec): index for index, (fn, spec, _) in enumerate(jobs)}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            index = futures[future]
            results[index] = future.result()
            log(f"[{done}/{total}] {jobs[index][2]}: {_job_summary(results[index])}")
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results  # type: ignore[return-value]


def _job_summary(result: dict[str, Any]) -> str:
    if "accuracy" in result:
        return f"{result['accuracy']:.1%} after {result['steps']} steps ({result['seconds']:.1f} s)"
    first = result["per_length"][0]["accuracy"]
    return f"{first:.1%} at 1x after {result['steps']} steps ({result['seconds']:.1f} s)"


# ---------------------------------------------------------------------------------------
# The experiments


def _model_setup(plan: Plan) -> dict[str, Any]:
    return {"d_model": plan.d_model, "n_heads": plan.n_heads, "d_ff": plan.d_ff, "causal": True,
            "vocab_size": 10}


def _training_setup(plan: Plan, max_steps: dict[str, int]) -> dict[str, Any]:
    return {"optimizer": "AdamW (betas 0.9, 0.98; weight decay 0.01), gradient norm clipped to 1",
            "schedule": "linear warm-up over the first 5% of max_steps, then cosine decay to 0 at max_steps",
            "batch_size": plan.batch_size, "lr": plan.lr, "max_steps": max_steps,
            "stop_loss": plan.stop_loss, "stop_patience": plan.stop_patience}


def _offset_jobs(plan: Plan) -> list[tuple[Callable, dict[str, Any], str]]:
    jobs = []
    plan_dict = _plan_dict(plan)
    for setting in plan.offset_settings:
        for layers in plan.layers:
            for s in plan.shifts:
                for seed in plan.seeds:
                    spec = {"plan": plan_dict, "setting": setting.to_dict(), "layers": layers, "s": s, "seed": seed}
                    jobs.append((_offset_job, spec, f"offset {setting.id} {layers}L s={s} seed {seed}"))
    return jobs


def _offset_section(plan: Plan, outputs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    answers = [eval_samples(s + plan.counted) * plan.counted for s in plan.shifts]
    results, index = [], 0
    for setting in plan.offset_settings:
        for layers in plan.layers:
            for s in plan.shifts:
                runs = outputs[index: index + len(plan.seeds)]
                index += len(plan.seeds)
                accuracy = [round(r["accuracy"], 5) for r in runs]
                results.append({"setting": setting.id, "layers": layers, "s": s, "accuracy": accuracy,
                                **spread(accuracy), "steps": [r["steps"] for r in runs],
                                "seconds": [round(r["seconds"], 2) for r in runs]})
    return {
        "title": EXPERIMENTS["offset_resolution"],
        "setup": {
            "task": "shift", "shifts": list(plan.shifts), "layers": list(plan.layers), "seeds": list(plan.seeds),
            "counted": plan.counted, "lengths": f"train and evaluation length L = s + {plan.counted}: "
                                                 f"every s has {plan.counted} answers per sequence",
            "model": _model_setup(plan),
            "training": _training_setup(plan, {str(n): plan.steps_for(n) for n in plan.layers}),
            "evaluation": f"relviz.train.evaluate at the training length, fixed evaluation seed {EVAL_SEED}: "
                          f"{min(answers)}–{max(answers)} answers per model",
            "method": ("One model per (setting, layers, s, seed), trained on shift-by-s alone. For one seed, "
                       "every s starts from the same initial weights and sees the same input batches (the "
                       "targets differ), so the curves over s are paired. Chance is about 10% (10 tokens)."),
        },
        "settings": [s.to_dict() for s in plan.offset_settings],
        "results": results,
        "seconds": round(seconds, 1),
    }


def _extrapolation_jobs(plan: Plan) -> list[tuple[Callable, dict[str, Any], str]]:
    plan_dict = _plan_dict(plan)
    return [(_extrapolation_job, {"plan": plan_dict, "setting": setting.to_dict(), "seed": seed},
             f"extrapolation {setting.id} seed {seed}")
            for setting in plan.extrap_settings for seed in plan.seeds]


def _extrapolation_section(plan: Plan, outputs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    results, index = [], 0
    for setting in plan.extrap_settings:
        runs = outputs[index: index + len(plan.seeds)]
        index += len(plan.seeds)
        for position, factor in enumerate(plan.extrap_factors):
            cells = [r["per_length"][position] for r in runs]
            reasons = [c["cannot_run"] for c in cells if c["cannot_run"]]
            entry: dict[str, Any] = {"setting": setting.id, "factor": factor,
                                     "eval_length": factor * plan.extrap_train_length}
            if reasons:
                entry |= {"accuracy": None, "mean": None, "min": None, "max": None, "std": None,
                          "cannot_run": reasons[0]}
            else:
                accuracy = [round(c["accuracy"], 5) for c in cells]
                entry |= {"accuracy": accuracy, **spread(accuracy), "cannot_run": None}
            results.append(entry)
    steps = {setting.id: [r["steps"] for r in outputs[i * len(plan.seeds):(i + 1) * len(plan.seeds)]]
             for i, setting in enumerate(plan.extrap_settings)}
    return {
        "title": EXPERIMENTS["length_extrapolation"],
        "setup": {
            "task": "shift", "task_params": {"s": plan.extrap_task_s}, "layers": plan.extrap_layers,
            "train_length": plan.extrap_train_length, "factors": list(plan.extrap_factors),
            "eval_lengths": [f * plan.extrap_train_length for f in plan.extrap_factors],
            "seeds": list(plan.seeds), "model": _model_setup(plan),
            "training": _training_setup(plan, {str(plan.extrap_layers): plan.extrap_max_steps}),
            "steps_taken": steps,
            "evaluation": f"relviz.train.evaluate at each length, evaluation seed {EVAL_SEED} (about 32 000 "
                          "tokens per length)",
            "method": (f"One model per (scheme, seed), trained at L = {plan.extrap_train_length} on shift s = "
                       f"{plan.extrap_task_s}, then evaluated unchanged at every length. A length the model "
                       "cannot run at is recorded with the reason instead of an accuracy."),
        },
        "settings": [s.to_dict() for s in plan.extrap_settings],
        "results": results,
        "seconds": round(seconds, 1),
    }


# -- 3. cost ---------------------------------------------------------------------------


def _repo_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _bench_attention(quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """``python -m relviz bench --only attention --json`` in a subprocess; its parsed JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        command = [sys.executable, "-m", "relviz", "bench", "--only", "attention", "--json", str(out)]
        if quick:
            command.append("--quick")
        log("cost: " + " ".join(command[1:]))
        proc = subprocess.run(command, capture_output=True, text=True, env=_repo_env(), timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"the benchmark failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def _chunked_case(length: int, chunk: int, repeats: int, log: Callable[[str], None]) -> dict[str, Any]:
    from relviz.bench import ATTN_B, ATTN_H

    import psutil

    from relviz.chunked import chunked_extra_bytes
    need = 2 * chunked_extra_bytes(length, chunk=chunk, batch=ATTN_B, heads=ATTN_H)
    available = psutil.virtual_memory().available
    if need > available / 2:
        return {"skipped": f"skipped: needs ~{_fmt_bytes(need)}, {_fmt_bytes(available)} available (limit: half)"}
    log(f"cost: chunked L={length} chunk={chunk}")
    spec = json.dumps({"L": length, "chunk": chunk, "repeats": repeats})
    proc = subprocess.run([sys.executable, "-m", "relviz.chunked", "--case", spec], capture_output=True,
                          text=True, env=_repo_env(), timeout=900)
    if proc.returncode != 0:
        return {"skipped": f"failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cost_row(impl: str, length: int, res: dict[str, Any]) -> dict[str, Any]:
    if "skipped" in res:
        return {"impl": impl, "L": length, "forward_s": None, "peak_bytes": None, "delta_bytes": None,
                "skipped": res["skipped"]}
    return {"impl": impl, "L": length, "forward_s": round(res["forward_s"], 6), "peak_bytes": res["peak_bytes"],
            "delta_bytes": res.get("delta_bytes"), "skipped": None}


def _run_cost(plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    import psutil

    from relviz.bench import ATTN_B, ATTN_D, ATTN_H

    start = time.perf_counter()
    bench = _bench_attention(plan.cost_quick, log)
    section = next(s for s in bench["sections"] if s["name"] == "attention")
    rows = []
    for row in section["rows"]:
        for prefix, suffix in (("relviz", ""), ("naive", "_naive")):
            impl = row["method"] + suffix
            if row.get(f"{prefix}_skipped"):
                rows.append(_cost_row(impl, row["L"], {"skipped": row[f"{prefix}_skipped"]}))
            else:
                rows.append(_cost_row(impl, row["L"], {"forward_s": row[f"{prefix}_s"],
                                                       "peak_bytes": row[f"{prefix}_peak_bytes"],
                                                       "delta_bytes": row[f"{prefix}_delta_bytes"]}))
    for length in plan.cost_lengths:
        rows.append(_cost_row("chunked", length, _chunked_case(length, plan.cost_chunk, plan.cost_repeats, log)))
    return {
        "title": EXPERIMENTS["cost"],
        "setup": {
            "batch": ATTN_B, "heads": ATTN_H, "dim": ATTN_D, "dtype": "float32", "causal": True,
            "lengths": sorted({r["L"] for r in rows}), "chunk": plan.cost_chunk,
            "memory_total_bytes": psutil.virtual_memory().total,
            "bench_torch_threads": bench.get("torch_threads"),
            "source": "python -m relviz bench --only attention --json" + (" --quick" if plan.cost_quick else "")
                      + "; chunked cases: python -m relviz.chunked --case",
            "method": ("Each case runs in a fresh process: one warm-up forward, then the median of "
                       f"{plan.cost_repeats} timed forwards under torch.inference_mode(). Δpeak = peak resident "
                       "memory (VmHWM) minus the peak after the inputs were created. Shaw uses clip = L − 1 "
                       "(every distance its own row). A case whose estimated need exceeds half the available "
                       "memory is skipped, with the reason."),
            "bench_notes": section.get("notes", []),
        },
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
    }


# -- the runner ---------------------------------------------------------------------------


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_experiments(plan: Plan = FULL_PLAN, *, only: Iterable[str] | None = None, workers: int = 2,
                    log: Callable[[str], None] = lambda message: None,
                    previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the selected experiments (default: all) and return the results document.

    ``previous``: an already validated results document whose other experiments are kept
    (``--only`` updates one section of an existing file).
    """
    import psutil

    names = list(only) if only else list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown experiment {', '.join(unknown)}; known: {', '.join(EXPERIMENTS)}")
    workers = check_int("workers", workers, minimum=1, maximum=64)
    wall0, load0 = time.perf_counter(), _load_average()
    cpu0 = _cpu_seconds()
    job_cpu = 0.0
    sections: dict[str, Any] = dict(previous["experiments"]) if previous else {}
    seconds: dict[str, float] = {}

    jobs: list[tuple[Callable, dict[str, Any], str]] = []
    spans: dict[str, tuple[int, int]] = {}
    for name, make in (("offset_resolution", _offset_jobs), ("length_extrapolation", _extrapolation_jobs)):
        if name in names:
            batch = make(plan)
            spans[name] = (len(jobs), len(jobs) + len(batch))
            jobs += batch
    if jobs:
        # costliest first: more layers, more steps, longer sequences
        order = sorted(range(len(jobs)), key=lambda i: -_job_cost(jobs[i][1], plan))
        t0 = time.perf_counter()
        outputs_sorted = _run_jobs([jobs[i] for i in order], workers, log)
        train_seconds = time.perf_counter() - t0
        outputs: list[dict[str, Any]] = [None] * len(jobs)  # type: ignore[list-item]
        for position, i in enumerate(order):
            outputs[i] = outputs_sorted[position]
        job_cpu = sum(r["cpu_seconds"] for r in outputs)
        for name, (a, b) in spans.items():
            share = sum(r["seconds"] for r in outputs[a:b]) / max(1e-9, sum(r["seconds"] for r in outputs))
            seconds[name] = round(train_seconds * share, 1)
            build = _offset_section if name == "offset_resolution" else _extrapolation_section
            sections[name] = build(plan, outputs[a:b], seconds[name])
    if "cost" in names:
        sections["cost"] = _run_cost(plan, log)
        seconds["cost"] = sections["cost"]["seconds"]

    ordered = {name: sections[name] for name in EXPERIMENTS if name in sections}
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    earlier = []
    if previous:  # --only: the sections kept from the previous file keep the record of their run
        earlier = list(previous.get("earlier_runs", [])) + [
            {"created": previous["created"]} | previous["run"]]
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "relviz_version": __version__,
        "torch_version": torch.__version__, "created": created,
        "quick": plan != FULL_PLAN or bool(previous and previous.get("quick")),
        "machine": {"cpu_count": os.cpu_count() or 1, "memory_total_bytes": psutil.virtual_memory().total,
                    "platform": platform.platform()},
        "run": {"experiments": names, "workers": workers, "threads_per_worker": 1,
                "wall_seconds": round(time.perf_counter() - wall0, 1),
                "cpu_seconds": round(_cpu_seconds() - cpu0, 1),
                "training_job_cpu_seconds": round(job_cpu, 1) if jobs else None,
                "load_average_start": load0, "load_average_end": _load_average(),
                "seconds_per_experiment": seconds},
        "earlier_runs": earlier,
        "experiments": ordered,
    }


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the workers, the bench processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _job_cost(spec: dict[str, Any], plan: Plan) -> float:
    if "s" in spec:
        length = spec["s"] + plan.counted
        return spec["layers"] * plan.steps_for(spec["layers"]) * (length + length * length / 32)
    length = plan.extrap_train_length
    return plan.extrap_layers * plan.extrap_max_steps * (length + length * length / 32)


# ---------------------------------------------------------------------------------------
# Schema validation


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


# ---------------------------------------------------------------------------------------
# Reading the results: tables, reach, scheme geometry, sentences


def _settings(section: dict[str, Any]) -> list[Setting]:
    return [Setting.from_dict(s) for s in section["settings"]]


def offset_matrix(section: dict[str, Any], layers: int, key: str = "mean") -> tuple[list[Setting], list[int],
                                                                                    list[list[float]]]:
    """(settings, shifts, rows of ``key`` per s) of the offset experiment for one layer count."""
    shifts = section["setup"]["shifts"]
    lookup = {(r["setting"], r["s"]): r for r in section["results"] if r["layers"] == layers}
    settings = _settings(section)
    return settings, shifts, [[lookup[(s.id, x)][key] for x in shifts] for s in settings]


def reach(values: list[float], shifts: list[int], threshold: float) -> int:
    """Largest s such that every s' ≤ s of the grid scores ≥ threshold (0: not even the first)."""
    best = 0
    for s, v in zip(shifts, values):
        if v < threshold:
            break
        best = s
    return best


def exact_shifts(setting: Setting, shifts: Iterable[int]) -> list[int] | None:
    """The s whose offset −s one layer can single out by position alone, or None for schemes
    without a per-offset table. Shaw: s < k (offset −k is already the clipped end embedding,
    shared with every farther offset); T5: s alone in its (causal, unidirectional) bucket."""
    shifts = list(shifts)
    if setting.scheme == "shaw":
        return [s for s in shifts if s < setting.params["clip"]]
    if setting.scheme == "t5":
        return [s for s in shifts if bucket_width(setting, s) == 1]
    return None


def bucket_starts(setting: Setting, shifts: Iterable[int]) -> tuple[list[int], list[int]]:
    """Of the s that share their T5 bucket (or Shaw's clipped tail): those at the bucket's
    near edge (its smallest distance) and those inside it."""
    exact = set(exact_shifts(setting, shifts) or [])
    starts, inside = [], []
    for first, last, _ in bucket_segments(setting, max(shifts)):
        for s in shifts:
            if s not in exact and first <= s <= last:
                (starts if s == first else inside).append(s)
    return starts, inside


def bucket_width(setting: Setting, s: int) -> int:
    """How many offsets share offset −s's T5 bucket (causal model: unidirectional buckets)."""
    nb, md = setting.params["num_buckets"], setting.params["max_distance"]
    lo, hi = max(1, s - 4 * md), s + 4 * md
    offsets = torch.arange(-hi, -lo + 1)
    buckets = t5_bucket(offsets, num_buckets=nb, max_distance=md, bidirectional=False)
    own = int(t5_bucket(-s, num_buckets=nb, max_distance=md, bidirectional=False))
    return int((buckets == own).sum())


def bucket_segments(setting: Setting, max_s: int) -> list[tuple[int, int, str]]:
    """The offsets s = 1..max_s (answer at j − i = −s) grouped the way one layer sees them:
    (first s, last s, label) per T5 bucket, or Shaw's exact range and its clipped tail."""
    if setting.scheme == "shaw":
        k = setting.params["clip"]
        segments = [(s, s, f"offset −{s}: its own embedding") for s in range(1, min(k, max_s + 1))]
        if max_s >= k:
            segments.append((k, max_s, f"offsets ≤ −{k}: all read the end embedding −{k} (clipped)"))
        return segments
    if setting.scheme == "t5":
        nb, md = setting.params["num_buckets"], setting.params["max_distance"]
        buckets = t5_bucket(-torch.arange(1, max_s + 1), num_buckets=nb, max_distance=md,
                            bidirectional=False).tolist()
        segments, start = [], 1
        for s in range(2, max_s + 2):
            if s == max_s + 1 or buckets[s - 1] != buckets[start - 1]:
                b = buckets[start - 1]
                rng = f"−{start}" if start == s - 1 else f"−{s - 1}…−{start}"
                segments.append((start, s - 1, f"bucket {b}: offsets {rng}"))
                start = s
        return segments
    return []


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _span(values: list[float]) -> str:
    """'17%–92%', or '100%' when the rounded ends agree."""
    lo, hi = _pct(min(values)), _pct(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def offset_reading(section: dict[str, Any], threshold: float = 0.9) -> list[str]:
    """Three sentences on what the offset-resolution data shows, computed from it: one layer
    inside against beyond each setting's exact range; what a second layer recovers; where it
    does not (bucket edges against bucket insides) and the schemes without a per-offset table."""
    shifts = section["setup"]["shifts"]
    layers = section["setup"]["layers"]
    n_seeds = len(section["setup"]["seeds"])
    one, two = min(layers), max(layers)
    settings, _, rows1 = offset_matrix(section, one)
    _, _, rows2 = offset_matrix(section, two)
    parts, others = [], []
    for setting, row in zip(settings, rows1):
        exact = exact_shifts(setting, shifts)
        if exact is None:
            others.append(setting)
            continue
        inside = [v for s, v in zip(shifts, row) if s in exact]
        outside = [(v, s) for s, v in zip(shifts, row) if s not in exact]
        if inside and outside:
            if setting.scheme == "shaw":  # quote the measured range, not the one k implies
                k, first_out = setting.params["clip"], min(s for _, s in outside)
                where = f"s ≤ {max(exact)}"
                beyond = f"from s = {first_out} on (every offset from −{k} back shares the end embedding)"
            else:
                where, beyond = f"where −s has a bucket of its own (s ≤ {max(exact)})", "where it shares one"
            parts.append(f"{setting.label} {_pct(_mean(inside))} {'for ' if setting.scheme == 'shaw' else ''}"
                         f"{where} against {_pct(_mean([v for v, _ in outside]))} {beyond}")
    layer_word = f"{one} layer" + ("s" if one > 1 else "")
    first = (f"With {layer_word} (mean of {n_seeds} seeds): " + "; ".join(parts) + "; chance is about 10%."
             if parts else f"With {layer_word}, no setting in this file has both exact and shared offsets.")
    if one == two:
        return [first, "This file has results for one layer count only.", ""]
    recovered, failed, moves = 0, 0, []
    for setting, r1, r2 in zip(settings, rows1, rows2):
        for v1, v2 in zip(r1, r2):
            if v1 < threshold:
                failed += 1
                recovered += v2 >= threshold
        a, b = reach(r1, shifts, threshold), reach(r2, shifts, threshold)
        if a != b:
            moves.append(f"{setting.label} {a} → {b}")
    second = (f"With {two} layers, {recovered} of the {failed} (setting, s) cells that score below "
              f"{_pct(threshold)} with {one} reach it, and the reach (the largest s up to which every s scores "
              f"{_pct(threshold)} or more) "
              + ("grows: " + ", ".join(moves) if moves else "changes for no setting") + ".")
    third_parts = []
    for setting, r2 in zip(settings, rows2):
        if setting.scheme != "t5":
            continue
        starts, inside = bucket_starts(setting, shifts)
        if starts and inside:
            at = dict(zip(shifts, r2))
            a, b = _mean([at[s] for s in starts]), _mean([at[s] for s in inside])
            if abs(a - b) >= 0.15:
                third_parts.append(
                    f"{setting.label} with {two} layers scores {_pct(a)} at the nearest offset of a shared bucket "
                    f"(s = {', '.join(map(str, starts))}) but {_pct(b)} inside one "
                    f"(s = {', '.join(map(str, inside))})")
    for setting in others:
        r1, r2 = rows1[settings.index(setting)], rows2[settings.index(setting)]
        third_parts.append(f"{setting.label} scores {_span(r1)} with {one} layer and {_span(r2)} with {two}")
    third = ("; ".join(third_parts) + f" (over s = {min(shifts)}…{max(shifts)})." if third_parts
             else "No other pattern stands out in this file.")
    return [first, second, third]


def _extrap_lookup(section: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["setting"], r["factor"]): r for r in section["results"]}


def extrapolation_reading(section: dict[str, Any], threshold: float = 0.9) -> list[str]:
    """Three sentences on the length-extrapolation data, computed from it: who holds up at the
    longest length, who learned the task and then loses it, and who cannot run or never
    learned it at the training length."""
    setup = section["setup"]
    factors, train_length = setup["factors"], setup["train_length"]
    base_f, top = min(factors), max(factors)
    lookup = _extrap_lookup(section)
    holding, dropping, weak, cannot = [], [], [], []
    for setting in _settings(section):
        row = {f: lookup[(setting.id, f)] for f in factors}
        base = row[base_f]["mean"]
        runnable = [f for f in factors if row[f]["cannot_run"] is None]
        last_f = max(runnable) if runnable else None
        if last_f != top:
            bad = min(f for f in factors if row[f]["cannot_run"])
            ok = (f"; at {last_f}×, the longest it runs at, it scores {_pct(row[last_f]['mean'])}"
                  if last_f is not None and last_f > base_f else "")
            cannot.append(f"{setting.label} cannot run from {bad}× (L = {bad * train_length}) on, having no "
                          f"embedding for those positions{ok}")
            continue
        last = row[top]["mean"]
        if base is None or base < threshold:
            weak.append(f"{setting.label} ({_pct(base)} at {base_f}×, {_pct(last)} at {top}×)")
        elif last >= threshold and all(row[f]["mean"] >= threshold for f in runnable):
            holding.append(f"{setting.label} ({_pct(last)})")
        else:
            fall = next(f for f in factors if row[f]["mean"] < threshold)
            dropping.append(f"{setting.label} from {_pct(base)} at {base_f}× to {_pct(row[fall]['mean'])} at "
                            f"{fall}× and {_pct(last)} at {top}×")
    first = (f"Trained at L = {train_length} and tested up to {top}× (L = {top * train_length}), "
             + (", ".join(holding) + f" stay at {_pct(threshold)} or more at every length." if holding
                else f"no scheme stays at {_pct(threshold)} or more at every length."))
    second = ("Learned at the training length but lost on longer sequences: " + "; ".join(dropping) + "."
              if dropping else "No scheme that learned the task at the training length loses it on longer "
                               "sequences.")
    third_parts = cannot + ([("below " if len(weak) > 1 else "below ") + f"{_pct(threshold)} already at the "
                             "training length: " + ", ".join(weak)] if weak else [])
    third = ("; ".join(third_parts) + "." if third_parts else "Every scheme ran at every length tested.")
    return [first, second, third[0].upper() + third[1:]]


# -- cost arithmetic ------------------------------------------------------------------------


def naive_gather_bytes(length: float, dim: int, tables: int = 1, dtype_bytes: int = 4) -> float:
    """The naive path's gathered L × L × D table(s) (Shaw needs two: K and V)."""
    return tables * length * length * dim * dtype_bytes


def skew_table_bytes(length: float, dim: int, dtype_bytes: int = 4) -> float:
    """The skew's distance table: L × D."""
    return length * dim * dtype_bytes


def attention_matrix_bytes(length: float, batch: int, heads: int, dtype_bytes: int = 4) -> float:
    """One [B, H, L, L] tensor (logits or weights): every whole-sequence implementation holds it."""
    return batch * heads * length * length * dtype_bytes


def chunked_bytes(length: float, *, chunk: int, batch: int, heads: int, dim: int, dtype_bytes: int = 4) -> float:
    """The chunked forward's working set: 3 [B, H, chunk, L] temporaries plus q, k, v and the
    output ([B, H, L, D] each). Linear in L."""
    return (3 * batch * heads * min(chunk, length) * length + 4 * batch * heads * length * dim) * dtype_bytes


def wall_length(bytes_of: Callable[[float], float], memory: float) -> float:
    """The L at which ``bytes_of(L)`` (increasing) reaches ``memory``, by bisection."""
    lo, hi = 1.0, 2.0
    while bytes_of(hi) < memory:
        lo, hi = hi, hi * 2
        if hi > 1e15:
            return math.inf
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if bytes_of(mid) < memory else (lo, mid)
    return hi


def _fmt_bytes(n: float) -> str:
    from relviz.memory import format_bytes
    return format_bytes(n)


def cost_rows(section: dict[str, Any], impl: str) -> list[dict[str, Any]]:
    return sorted((r for r in section["rows"] if r["impl"] == impl), key=lambda r: r["L"])


def cost_reading(section: dict[str, Any]) -> list[str]:
    """Three sentences on the cost data, computed from it."""
    setup = section["setup"]
    memory = setup["memory_total_bytes"]
    dim, heads, batch = setup["dim"], setup["heads"], setup["batch"]
    measured = {impl: {r["L"]: r for r in cost_rows(section, impl) if r["skipped"] is None}
                for impl in IMPLEMENTATIONS}
    both = sorted(set(measured["skew"]) & set(measured["skew_naive"]))
    if both:
        n = both[-1]
        ours, naive = measured["skew"][n], measured["skew_naive"][n]
        d_ours, d_naive = ours["delta_bytes"] or ours["peak_bytes"], naive["delta_bytes"] or naive["peak_bytes"]
        first = (f"At L = {n}, the naive gather's forward adds {_fmt_bytes(d_naive)} of peak memory and takes "
                 f"{naive['forward_s'] * 1e3:.0f} ms; the skew adds {_fmt_bytes(d_ours)} and takes "
                 f"{ours['forward_s'] * 1e3:.0f} ms: the naive path needs {d_naive / max(1, d_ours):.1f}× the "
                 f"skew's memory and {naive['forward_s'] / ours['forward_s']:.1f}× its time.")
    else:
        first = "The skew and the naive gather were not both measured at any length in this file."
    wall_naive = wall_length(lambda x: naive_gather_bytes(x, dim), memory)
    wall_attn = wall_length(lambda x: attention_matrix_bytes(x, batch, heads), memory)
    wall_skew = wall_length(lambda x: skew_table_bytes(x, dim), memory)
    skipped = [r["L"] for r in cost_rows(section, "skew_naive") if r["skipped"]]
    second = (f"Extrapolating analytically (fp32, D = {dim}), the naive L × L × D table alone fills this machine's "
              f"{_fmt_bytes(memory)} at L ≈ {wall_naive:,.0f}"
              + (f" (it was already skipped as too large at L = {', '.join(map(str, skipped))})" if skipped else "")
              + f"; the skew's L × D table would need L ≈ {wall_skew:.1e}, "
                f"but its L² · H logits (B = {batch}, H = {heads}) hit the wall at L ≈ {wall_attn:,.0f}.")
    chunk = setup["chunk"]
    common = sorted(set(measured["chunked"]) & set(measured["skew"]))
    if common:
        n = common[-1]
        ch, sk = measured["chunked"][n], measured["skew"][n]
        d_ch, d_sk = ch["delta_bytes"] or ch["peak_bytes"], sk["delta_bytes"] or sk["peak_bytes"]
        wall_chunk = wall_length(lambda x: chunked_bytes(x, chunk=chunk, batch=batch, heads=heads, dim=dim), memory)
        third = (f"Query-chunked attention (chunk = {chunk}) adds {_fmt_bytes(d_ch)} at L = {n} against the skew's "
                 f"{_fmt_bytes(d_sk)} ({d_sk / max(1, d_ch):.1f}× less) and takes {ch['forward_s'] * 1e3:.0f} ms "
                 f"against {sk['forward_s'] * 1e3:.0f} ms; its memory grows linearly in L (3 · chunk · L · H "
                 f"temporaries plus q, k, v and the output), so it would reach the machine's memory only at "
                 f"L ≈ {wall_chunk:,.0f}.")
    else:
        third = "The query-chunked attention was not measured next to the skew in this file."
    return [first, second, third]


# ---------------------------------------------------------------------------------------
# Live cells (the page retrains one setting with a small budget)


def plan_from_setup(section: dict[str, Any]) -> Plan:
    """The plan knobs a stored section was run with (model and training), for a live rerun."""
    model, training = section["setup"]["model"], section["setup"]["training"]
    return Plan(d_model=model["d_model"], n_heads=model["n_heads"], d_ff=model["d_ff"],
                batch_size=training["batch_size"], lr=training["lr"], stop_loss=training["stop_loss"],
                stop_patience=training["stop_patience"])


def live_offset_work(section: dict[str, Any], layers: int, max_steps: int) -> int:
    """Upper bound of :func:`live_offset`'s training work, steps × length × layers summed over
    its models (relviz.training_queue's measure of CPU time)."""
    counted = section["setup"]["counted"]
    return sum(max_steps * (s + counted) * layers for s in section["setup"]["shifts"])


def live_extrapolation_work(section: dict[str, Any], max_steps: int) -> int:
    """Upper bound of :func:`live_extrapolation`'s training work (one model)."""
    setup = section["setup"]
    return max_steps * setup["train_length"] * setup["layers"]


def live_offset(section: dict[str, Any], setting_id: str, layers: int, *, seed: int, max_steps: int,
                shifts: list[int] | None = None,
                progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Retrain one setting × layer count at every s (or ``shifts``), one seed, at most
    ``max_steps`` steps each, with the stored run's model and training settings."""
    plan = plan_from_setup(section)
    setting = next(s for s in _settings(section) if s.id == setting_id)
    counted = section["setup"]["counted"]
    shifts = list(shifts or section["setup"]["shifts"])
    out = []
    for n, s in enumerate(shifts):
        task = make_task("shift", s=s)

        def report(step: int, total: int, loss: float, n: int = n, s: int = s) -> None:
            if progress is not None:
                progress((n + step / total) / len(shifts),
                         f"s = {s} ({n + 1}/{len(shifts)}): step {step}/{total}, loss {loss:.3f}")

        result = fit(plan.model_config(setting, layers), task, max_steps=max_steps, batch_size=plan.batch_size,
                     length=s + counted, lr=plan.lr, seed=seed, stop_loss=plan.stop_loss,
                     stop_patience=plan.stop_patience, progress=report)
        out.append({"s": s, "accuracy": evaluate(result.model, task, length=s + counted, seed=EVAL_SEED),
                    "steps": result.steps})
    if progress is not None:
        progress(1.0, "done")
    return out


def live_extrapolation(section: dict[str, Any], setting_id: str, *, seed: int, max_steps: int,
                       progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Retrain one scheme at the stored training length and evaluate it at every factor."""
    setup = section["setup"]
    plan = plan_from_setup(section).replace(
        extrap_task_s=setup["task_params"]["s"], extrap_layers=setup["layers"],
        extrap_train_length=setup["train_length"], extrap_factors=tuple(setup["factors"]))
    setting = next(s for s in _settings(section) if s.id == setting_id)
    task = make_task("shift", s=plan.extrap_task_s)

    def report(step: int, total: int, loss: float) -> None:
        if progress is not None:
            progress(0.8 * step / total, f"training: step {step}/{total}, loss {loss:.3f}")

    result = fit(plan.model_config(setting, plan.extrap_layers), task, max_steps=max_steps,
                 batch_size=plan.batch_size, length=plan.extrap_train_length, lr=plan.lr, seed=seed,
                 stop_loss=plan.stop_loss, stop_patience=plan.stop_patience, progress=report)
    if progress is not None:
        progress(0.85, "evaluating at every length")
    rows = _evaluate_lengths(result.model, task, plan)
    if progress is not None:
        progress(1.0, "done")
    return rows


def live_cost(impl: str, lengths: list[int], *, chunk: int = 128, repeats: int = 2,
              progress: Callable[[float, str], Any] | None = None) -> list[dict[str, Any]]:
    """Measure one implementation at a few lengths, each case in a fresh process."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLEMENTATIONS)}")
    rows = []
    for n, length in enumerate(lengths):
        if progress is not None:
            progress(n / len(lengths), f"{IMPLEMENTATIONS[impl]} at L = {length}")
        if impl == "chunked":
            res = _chunked_case(length, chunk, repeats, lambda m: None)
        else:
            from relviz.bench import BenchContext, _run_subprocess_case
            method, _, naive = impl.partition("_")
            res = _run_subprocess_case({"method": method, "L": length, "repeats": repeats,
                                        "impl": "naive" if naive else "relviz"},
                                       BenchContext(quick=True, log=lambda m: None))
        rows.append(_cost_row(impl, length, res))
    if progress is not None:
        progress(1.0, "done")
    return rows


# ---------------------------------------------------------------------------------------
# Command line: python -m relviz experiments


_ALIASES = {"offset": "offset_resolution", "length": "length_extrapolation", "extrapolation": "length_extrapolation"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: fewer shifts, lengths and steps, the benchmark's --quick sizes "
                             "(a few minutes, results not meaningful)")
    parser.add_argument("--out", default=str(RESULTS_PATH), metavar="PATH",
                        help="results file to write (default: the shipped relviz/experiments_results.json)")
    parser.add_argument("--only", action="append", metavar="NAME",
                        choices=list(EXPERIMENTS) + list(_ALIASES),
                        help="run only this experiment (repeatable): " + ", ".join(EXPERIMENTS)
                             + " (or offset, length); the other sections of an existing --out file are kept")
    parser.add_argument("--workers", type=int, default=2,
                        help="training processes, one torch thread each (default 2)")


def run(args: argparse.Namespace) -> int:
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    only = [_ALIASES.get(n, n) for n in args.only] if args.only else None
    out = Path(args.out)
    previous = None
    if only and out.exists():
        try:
            previous = load_results(out)
        except ValueError as exc:
            print(f"note: not keeping the other sections of {out}: {exc}", file=sys.stderr)

    def log(message: str) -> None:
        print(f"  ... {message}", file=sys.stderr, flush=True)

    try:
        data = run_experiments(plan, only=only, workers=args.workers, log=log, previous=previous)
        validate_results(data, str(out))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    run_info = data["run"]
    print(f"wrote {out}: {', '.join(data['experiments'])} in {run_info['wall_seconds'] / 60:.1f} min wall, "
          f"{run_info['cpu_seconds'] / 60:.1f} min CPU, {run_info['workers']} workers; load average "
          f"{run_info['load_average_start']} -> {run_info['load_average_end']}")
    for name, section in data["experiments"].items():
        reading = {"offset_resolution": offset_reading, "length_extrapolation": extrapolation_reading,
                   "cost": cost_reading}[name](section)
        print(f"\n{EXPERIMENTS[name]}")
        for sentence in reading:
            print(f"  - {sentence}")
    return 0
