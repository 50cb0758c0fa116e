"""Bench sections that put relviz beside what a user would pick instead, as ratios.

- ``fused``: every attention function's fused path (the default, need_weights=False) against
  scaled_dot_product_attention with the bias already built (the floor for "SDPA plus a bias"; also
  with is_causal=True beside it, which lets torch skip the future key blocks),
  compiled FlexAttention with a score_mod and a causal block mask (and relviz's own
  backend="flex"), and relviz's own weights path (need_weights=True, what the app draws).
  Time: the implementations take turns in one fresh process per function (rounds interleaved,
  so machine load hits them alike). Memory: one fresh process per implementation and length,
  Δpeak = the resident-set peak a (second) forward adds.
- ``t5bias``: positions.t5_bias (per offset, expanded once) against the previous per-cell build
  (int64 bucket map + gather), Hugging Face's ``T5Attention.compute_bias`` and an
  x-transformers-style build, all in one process, values checked identical.
- ``model``: one training step (forward, backward, AdamW) of the small transformer per scheme,
  against the same model written by hand for SDPA (its relative term as attn_mask) and against
  the floor, plain causal SDPA with no relative term.

Each runs with ``python -m relviz bench --only NAME``. The fused section's functions and implementations
are tables in relviz.bench.fused_cases.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import relviz
from relviz.bench.fused_cases import FLEX_IMPLS, FUNCTIONS, IMPLS, B, D, H, Function, impl_call, inputs
from relviz.bench.report import (BenchContext, Column, SectionResult, Target, mb, ms, proc_status,
                                 reset_peak_rss, time_in_turns)
from relviz.model import SCHEMES, ModelConfig, build_model
from relviz.positions import alibi_bias, expand_toeplitz, offset_range, shaw_clip_index, t5_bias, t5_bucket_map
from relviz.schemes.alibi import Alibi
from relviz.schemes.fire import Fire
from relviz.schemes.kerple import Kerple
from relviz.schemes.rope import Rope, rope_rotate
from relviz.schemes.shaw import Shaw
from relviz.schemes.skew import Skew
from relviz.schemes.t5 import T5
from relviz.skew import distance_table, skew

#: The model section's schemes with --quick (every scheme otherwise): no position, a learned bias, a vector table.
QUICK_MODEL_SCHEMES = ("none", "t5", "shaw")
TIME_TARGET = 1.2
#: Each timed sample repeats its call for at least this long (bench_report.time_in_turns): the
#: sub-10 ms rows (L = 512, the T5 bias at 512) are then means over many calls, not single calls.
SAMPLE_S = 0.05


def load_average() -> str:
    """The 1-minute load average, as ``uptime`` prints it first."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def _allow_recompiles() -> None:
    """Every length and score_mod recompiles flex_attention (dynamic=True does not compile on CPU in
    torch 2.13): without a higher limit dynamo would fall back to eager after 8 and time that."""
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.accumulated_recompile_limit = 512


def run_time_case(spec: dict[str, Any]) -> dict[str, Any]:
    """All implementations of one function at each length, timed in turns in this process.

    One process per function: torch, dynamo and inductor start once, and each length's compile of
    FlexAttention is its own first call (the first length's also pays dynamo's start-up)."""
    function, rounds, impls = FUNCTIONS[spec["function"]], spec["rounds"], spec.get("impls", list(IMPLS))
    if any(IMPLS[impl].compiles for impl in impls):
        _allow_recompiles()
    return {"cases": [_time_one_length(function, length, rounds, impls) for length in spec["lengths"]]}


def _time_one_length(function: Function, length: int, rounds: int, impls: list[str]) -> dict[str, Any]:
    x = inputs(function, length)
    calls, first_call_s, outputs = {}, {}, {}
    with torch.inference_mode():
        for impl in impls:
            start = time.perf_counter()
            call = impl_call(function, IMPLS[impl], x)
            if call is None:
                continue
            outputs[impl] = call()                                  # warm-up (compiles flex)
            first_call_s[impl] = time.perf_counter() - start
            calls[impl] = call
        reference = outputs["weights"]
        max_error = {impl: float((out - reference).abs().max()) for impl, out in outputs.items()}
        del outputs
        times = time_in_turns(calls, rounds, SAMPLE_S)
    steady = {impl: statistics.median(t) for impl, t in times.items()}
    return {"L": length, "median_s": steady, "times_s": times, "max_error": max_error,
            "first_call_s": first_call_s, "load": load_average()}


def run_memory_case(spec: dict[str, Any]) -> dict[str, Any]:
    """One implementation's forward in this (fresh) process: the peak resident memory it adds.

    The inputs and any prebuilt bias exist before the peak is reset: a prebuilt bias is not
    counted against SDPA (it is the bias itself, reported separately). The first call is measured
    apart: it also pages in the library code its kernels run (file-backed, shared, once per
    process: 7-10 MB for relviz's first call at L = 512, 1-2 MB for SDPA's) and compiles flex. The
    steady figure is a second call's. The parent runs this with MALLOC_MMAP_THRESHOLD_ fixed, so
    every tensor over 64 KB is mapped when allocated and unmapped when freed: the second call's peak
    counts all of its own tensors, none hidden in memory the first call freed."""
    function, impl, length = FUNCTIONS[spec["function"]], IMPLS[spec["impl"]], spec["L"]
    x = inputs(function, length)
    if impl.compiles:
        _allow_recompiles()
    with torch.inference_mode():
        call = impl_call(function, impl, x)
        deltas = []
        for _ in range(2):
            reset_peak_rss()
            before, file_before = proc_status("VmHWM"), proc_status("RssFile")
            call()
            deltas.append((proc_status("VmHWM") - before, proc_status("RssFile") - file_before))
    (first, first_file), (steady, _) = deltas
    return {"delta_bytes": steady, "first_call_delta_bytes": first, "first_call_file_bytes": first_file}


def _subprocess(kind: str, spec: dict[str, Any], ctx: BenchContext, env_extra: dict[str, str] | None = None,
                ) -> dict[str, Any]:
    """``python -m relviz.bench.versus KIND SPEC`` (one of _main's cases) in a fresh process, with ``env_extra``."""
    command = [sys.executable, "-m", "relviz.bench.versus", kind, json.dumps(spec)]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(relviz.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra or {})
    with tempfile.TemporaryDirectory(prefix="relviz-inductor-") as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache                  # flex's compile times are cold-cache times
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        ctx.log(f"{kind} {spec} failed: {proc.stderr.strip()[-400:]}")
        return {"error": proc.stderr.strip()[-200:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fused_section(ctx: BenchContext) -> SectionResult:
    lengths = [128] if ctx.quick else [512, 1024, 2048, 4096]
    rounds = 2 if ctx.quick else 5
    # --quick is a smoke run: no FlexAttention (its compile takes 5-15 s per length and score_mod on CPU)
    impls = [name for name, impl in IMPLS.items() if not ((ctx.quick or not ctx.flex) and impl.compiles)]
    rows = []
    for function, about in FUNCTIONS.items():
        ctx.log(f"fused: {function}, L = {lengths}, {', '.join(impls)} (load {load_average()})")
        spec = {"function": function, "lengths": lengths, "rounds": rounds, "impls": impls}
        # --quick: in this process (a smoke run; a fresh process per case costs a torch import)
        timing = run_time_case(spec) if ctx.quick else _subprocess("time", spec, ctx)
        if "error" in timing:
            rows += [{"function": function, "L": length, "note": timing["error"]} for length in lengths]
            continue
        for case in timing["cases"]:
            length, med = case["L"], case["median_s"]
            row: dict[str, Any] = {"function": function, "L": length, "load": case["load"]}
            for impl in IMPLS:
                if impl in med:
                    row[f"{impl}_s"] = med[impl]
            for impl in FLEX_IMPLS:
                row[f"{impl}_compile_s"] = case["first_call_s"].get(impl)
            row["max_error"] = max(case["max_error"].values())
            if "sdpa_prebuilt" in med:
                row["vs_sdpa"] = med["relviz"] / med["sdpa_prebuilt"]
            if "sdpa_causal" in med:
                row["vs_sdpa_causal"] = med["relviz"] / med["sdpa_causal"]
            if "flex" in med:
                row["vs_flex"] = med["relviz"] / med["flex"]
            row["vs_weights"] = med["relviz"] / med["weights"]
            if not ctx.quick:
                measured = ("relviz", "weights") if about.value_term else \
                    ("relviz", "sdpa_prebuilt") + (("flex",) if "flex" in impls else ())
                for impl in measured:
                    memory = _subprocess("memory", {"function": function, "impl": impl, "L": length}, ctx,
                                         {"MALLOC_MMAP_THRESHOLD_": "65536"})       # see run_memory_case
                    row[f"{impl}_delta_bytes"] = memory.get("delta_bytes")
                    row[f"{impl}_first_delta_bytes"] = memory.get("first_call_delta_bytes")
            row["bias_bytes"] = (B if about.per_query else 1) * H * length * length * 4
            rows.append(row)
            ctx.log(f"fused: {function} L={length}: " + ", ".join(
                f"{impl} {med[impl] * 1e3:.1f} ms" for impl in med) + (f", ÷ SDPA {row['vs_sdpa']:.2f}×"
                                                                       if "vs_sdpa" in row else "")
                + "".join(f", {impl} 1st call {row[impl + '_compile_s']:.1f} s" for impl in FLEX_IMPLS
                          if row.get(impl + "_compile_s") is not None) + f" (load {case['load']})")

    targets = []
    for function in (name for name, about in FUNCTIONS.items() if not about.value_term):
        measured = [r for r in rows if r["function"] == function and "vs_sdpa" in r]
        if not measured:
            targets.append(Target(f"{function}: fused ≤ {TIME_TARGET}× SDPA with the bias prebuilt", None,
                                  "not measured"))
            continue
        worst = max(measured, key=lambda r: r["vs_sdpa"])
        targets.append(Target(  # --quick sizes are all overhead: not judged
            f"{function}: fused ≤ {TIME_TARGET}× SDPA with the bias prebuilt at every L",
            None if ctx.quick else worst["vs_sdpa"] <= TIME_TARGET,
            ", ".join(f"L={r['L']}: {r['vs_sdpa']:.2f}×" for r in measured)))
        memory = [r for r in measured if r.get("relviz_delta_bytes") is not None
                  and r.get("sdpa_prebuilt_delta_bytes") is not None]
        if memory:
            over = [r for r in memory if r["relviz_delta_bytes"] > r["sdpa_prebuilt_delta_bytes"] + r["bias_bytes"]]
            targets.append(Target(
                f"{function}: fused adds no more memory than SDPA's own plus the bias",
                not over, ", ".join(f"L={r['L']}: {mb(r['relviz_delta_bytes'])} vs "
                                    f"{mb(r['sdpa_prebuilt_delta_bytes'])} + bias {mb(r['bias_bytes'])}"
                                    for r in memory)))
    causal = [r for r in rows if "vs_sdpa_causal" in r]
    if causal:   # no target in the issue (written before torch accepted is_causal beside attn_mask)
        targets.append(Target("relviz fused ÷ SDPA with the bias prebuilt and is_causal=True (future key blocks "
                              "skipped)", None,
                              ", ".join(f"{r['function']} L={r['L']}: {r['vs_sdpa_causal']:.2f}×" for r in causal)))
    flex = [r for r in rows if "vs_flex" in r]
    if flex:   # no target in the issue: the alternative's figures, beside relviz's
        targets.append(Target("relviz fused ÷ compiled FlexAttention (steady state; its first call beside)", None,
                              ", ".join(f"{r['function']} L={r['L']}: {r['vs_flex']:.2f}× "
                                        f"({r['flex_compile_s']:.0f} s)" for r in flex)))
    errors = [r["max_error"] for r in rows if "max_error" in r]
    targets.append(Target("every implementation's output (relviz's flex backend included) equals the weights "
                          "path's (max |Δ| ≤ 1e-4)",
                          all(e <= 1e-4 for e in errors) if errors else None,
                          f"largest {max(errors):.1e}" if errors else "n/a"))
    speed = lambda x: f"{x:.2f}×"  # noqa: E731
    seconds = lambda x: f"{x:.1f}"  # noqa: E731
    columns = [Column("function", "function"), Column("L", "L"), Column("relviz_s", "relviz fused ms", ms),
               Column("sdpa_prebuilt_s", "SDPA prebuilt ms", ms), Column("vs_sdpa", "÷ SDPA", speed),
               Column("sdpa_causal_s", "+ is_causal ms", ms), Column("vs_sdpa_causal", "÷ it", speed),
               Column("flex_s", "flex ms", ms), Column("vs_flex", "÷ flex", speed),
               Column("flex_compile_s", "flex 1st call s", seconds),
               Column("relviz_flex_s", "relviz flex ms", ms), Column("relviz_flex_compile_s", "its 1st call s", seconds),
               Column("weights_s", "weights-path ms", ms), Column("vs_weights", "÷ weights", speed),
               Column("relviz_delta_bytes", "fused Δpeak", mb),
               Column("sdpa_prebuilt_delta_bytes", "SDPA Δpeak", mb), Column("bias_bytes", "bias", mb),
               Column("flex_delta_bytes", "flex Δpeak", mb), Column("weights_delta_bytes", "weights Δpeak", mb),
               Column("relviz_first_delta_bytes", "fused 1st-call Δpeak", mb),
               Column("sdpa_prebuilt_first_delta_bytes", "SDPA 1st-call Δpeak", mb), Column("load", "load avg")]
    return SectionResult(
        name="fused", title=f"Attention forward, B={B} H={H} D={D} fp32 causal: relviz fused vs SDPA with the "
                            "bias prebuilt, compiled FlexAttention, and relviz's weights path",
        columns=columns, rows=rows, targets=targets,
        notes=["Times: every implementation of one function in one fresh process (all lengths), taking turns "
               f"for {rounds} rounds after a warm-up, each sample at least {SAMPLE_S * 1e3:.0f} ms of repeated calls "
               f"(medians of the per-call means). torch threads = {torch.get_num_threads()}.",
               "SDPA prebuilt: F.scaled_dot_product_attention with the causal bias already built "
               "([1, H, L, L] for T5/ALiBi; [B, H, L, L] for skew/Shaw, whose relative term depends on q), "
               "its construction not timed. flex: torch.compile(flex_attention) as a user would write it, the "
               "relative term in a score_mod and causality as a block mask. relviz flex: relviz's own "
               "backend='flex' (the same kernel; forward only on CPU). '1st call s': the first call at that "
               "length, compile included, with a fresh inductor cache per function (cold: no earlier run's "
               "kernels); the first length's also pays dynamo's start-up. relviz flex compiles right after "
               "flex, whose graph at that length is often the same (T5, ALiBi), so its first call is mostly "
               "a cache hit: flex's column is the cold compile. Every length recompiles: "
               "dynamic=True does not compile on CPU in torch 2.13 (a C++ error in the flex template).",
               "relviz fused: SDPA in chunks of 64 queries up to L = 256 (512 on one torch thread), 128 up "
               "to 1024, 256 beyond (relviz.attention._chunk_size); a causal "
               "chunk attends only to keys up to its last query, so relviz skips about half the blocks. "
               "'+ is_causal': the same prebuilt bias with is_causal=True, which torch 2.13's CPU flash kernel "
               "accepts beside attn_mask (undocumented: the math fallback refuses the pair): it applies both and "
               "skips the key blocks past each block of queries (measured with the skew bias, 2 threads: the "
               "same time at L = 512, 0.77× at 1024, 0.63× at 2048). The issue's target is against SDPA prebuilt "
               "without it. relviz's bias is built inside the timing: per offset for T5/ALiBi (a view, never "
               "[H, L, L]); for skew q·E_rᵀ per chunk, for Shaw q·a_Kᵀ once, which the prebuilt alternative "
               "gets for free.",
               "shaw: key table only (clip 64); shaw_kv: key and value tables — the a^V term needs every "
               "attention weight, so no fused kernel exists and relviz's default runs the weights path "
               "without returning the weights.",
               "Δpeak: one fresh process per implementation, VmHWM after a second forward minus VmHWM before "
               "it (the inputs and any prebuilt bias exist before; large tensors are mapped and unmapped one "
               "by one, MALLOC_MMAP_THRESHOLD_=65536). 1st-call Δpeak: the first forward's, which also pages "
               "in the library code its kernels run (shared, once per process) and, for flex, compiles."])


# ---------------------------------------------------------------------------------------
# T5 bias: per offset vs the per-cell build, Hugging Face's compute_bias, x-transformers


def _xtransformers_bias(embedding: torch.nn.Embedding, length: int, *, num_buckets: int = 32,
                        max_distance: int = 128) -> torch.Tensor:
    """x-transformers' RelativePositionBias.forward (non-causal), transcribed: the relative
    positions of every cell, the bucket formula per cell, an embedding lookup, h i j."""
    q_pos = torch.arange(length, dtype=torch.long)
    k_pos = torch.arange(length, dtype=torch.long)
    rel_pos = k_pos[None, :] - q_pos[:, None]
    n = -rel_pos
    num_buckets //= 2
    ret = (n < 0).long() * num_buckets
    n = torch.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                * (num_buckets - max_exact)).long()
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret = ret + torch.where(is_small, n, val_if_large)
    return embedding(ret).permute(2, 0, 1)                                  # [H, L, L]


def run_t5bias_case(spec: dict[str, Any]) -> dict[str, Any]:
    """One length of the T5 bias section, in this (fresh) process: each alternative takes turns with
    relviz alone, and its ratio comes from that pair.

    At L = 8192 each build writes a fresh 2 GB tensor, and its time is mostly the kernel's: ~580 ms to
    fault in the pages, ~180 ms to unmap them when the result is dropped. With every length and
    build in one process, relviz's build there read 790-1077 ms from run to run (the ratio to the
    previous build 1.55-2.12x over five runs); a fresh process per length reads a steady 800-820 ms."""
    try:
        from transformers import T5Config
        from transformers.models.t5.modeling_t5 import T5Attention
    except ImportError:                                                     # optional: the real-models extra
        T5Attention = None
    length, rounds = spec["L"], spec["rounds"]
    torch.manual_seed(0)
    hf = None
    if T5Attention is not None:
        config = T5Config(d_model=64, d_kv=8, num_heads=H, relative_attention_num_buckets=32,
                          relative_attention_max_distance=128, is_decoder=False)
        hf = T5Attention(config, has_relative_attention_bias=True).eval()
        table = hf.relative_attention_bias.weight.detach()
    else:
        table = torch.randn(32, H)
    embedding = torch.nn.Embedding.from_pretrained(table)

    def ours_call() -> torch.Tensor:
        return t5_bias(table, length)
    others = {                                                              # the alternatives, each against relviz
        "before": lambda: table.transpose(0, 1)[:, t5_bucket_map(length, device="cpu")],
        "xtransformers": lambda: _xtransformers_bias(embedding, length),
    }
    if hf is not None:
        others["hf"] = lambda: hf.compute_bias(length, length, device="cpu")[0]
    row: dict[str, Any] = {"L": length}
    ours_s: list[float] = []
    with torch.inference_mode():
        ours = ours_call()
        row["identical"] = all(bool(torch.equal(call(), ours)) for call in others.values())
        del ours
        for name, call in others.items():
            times = time_in_turns({"relviz": ours_call, name: call}, rounds, SAMPLE_S)
            mine, theirs = statistics.median(times["relviz"]), statistics.median(times[name])
            row[f"{name}_s"], row[f"{name}_ratio"] = theirs, theirs / mine
            ours_s += times["relviz"]
    row["relviz_s"], row["load"] = statistics.median(ours_s), load_average()
    return row


def t5_bias_section(ctx: BenchContext) -> SectionResult:
    lengths = [256] if ctx.quick else [512, 1024, 2048, 4096, 8192]
    rounds = 1 if ctx.quick else 5
    rows = []
    for length in lengths:
        ctx.log(f"t5bias: L={length} (load {load_average()})")
        spec = {"L": length, "rounds": rounds}
        # --quick: in this process (a smoke run; a fresh process per length costs a torch import)
        row = run_t5bias_case(spec) if ctx.quick else _subprocess("t5bias", spec, ctx)
        if "error" in row:
            row = {"L": length, "identical": False, "note": row["error"]}
        rows.append(row)
    targets = []
    at = {r["L"]: r for r in rows}
    if 8192 in at:                                      # a failed run (its row has a note) is a miss
        faster = at[8192].get("before_ratio")
        targets.append(Target("t5_bias ≥ 2× faster than the previous per-cell build at L = 8192",
                              faster is not None and faster >= 2,
                              f"{faster:.2f}×" if faster is not None else at[8192]["note"]))
    if 512 in at and "hf_ratio" in at[512]:
        targets.append(Target("t5_bias not slower than HF compute_bias at L = 512", at[512]["hf_ratio"] >= 1,
                              f"HF takes {at[512]['hf_ratio']:.2f}× relviz's time"))
    targets.append(Target("identical values (HF, x-transformers, previous build)",
                          all(r["identical"] for r in rows), ", ".join(f"L={r['L']}: {r['identical']}" for r in rows)))
    speed = lambda x: f"{x:.2f}×"  # noqa: E731
    return SectionResult(
        name="t5bias", title=f"T5 position bias [H={H}, L, L], 32 buckets / 128, bidirectional: relviz per offset "
                             "vs the alternatives (ratio = their time ÷ relviz's)",
        columns=[Column("L", "L"), Column("relviz_s", "relviz ms", ms), Column("before_s", "before ms", ms),
                 Column("before_ratio", "÷", speed), Column("hf_s", "HF compute_bias ms", ms),
                 Column("hf_ratio", "÷", speed), Column("xtransformers_s", "x-transformers ms", ms),
                 Column("xtransformers_ratio", "÷", speed), Column("identical", "identical"),
                 Column("load", "load avg")],
        rows=rows, targets=targets,
        notes=["relviz: positions.t5_bias — 2L − 1 buckets, one table lookup per (offset, head), one expanding "
               "copy. before: the int64 [L, L] bucket map then a gather of [H, L, L] (relviz until this "
               "change). HF: T5Attention.compute_bias of a tiny T5 (returns a permuted [1, H, L, L] view of "
               "[L, L, H]). x-transformers: RelativePositionBias's per-cell recipe. "
               f"Each length in {'this' if ctx.quick else 'a fresh'} process, each alternative taking turns with "
               f"relviz alone for {rounds} "
               "rounds (its ratio is from that pair; relviz ms: the median over all pairs), each sample at "
               f"least {SAMPLE_S * 1e3:.0f} ms of repeated calls, medians of the per-call means."
               + ("" if any("hf_s" in r for r in rows) else " transformers is not installed: no HF column.")])


# ---------------------------------------------------------------------------------------
# Model train step vs the same model with fused SDPA


def _train_step_call(model: torch.nn.Module, tokens: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        logits = model(tokens)[0]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def _plain_sdpa(model: torch.nn.Module) -> torch.nn.Module:
    """The floor: the same model with every layer's attention replaced by plain SDPA, no relative
    term at all (absolute schemes keep their embeddings)."""
    causal = model.config.causal

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, shared: Any = None,
               need_weights: bool = False):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None
    model.position.attend = attend
    return model


def _with_mask(bias: torch.Tensor, causal: bool) -> torch.Tensor:
    """[..., L, L] bias -> 4-D attn_mask, −inf above the diagonal when causal."""
    length = bias.shape[-1]
    if causal:
        bias = bias.masked_fill(torch.ones(length, length, dtype=torch.bool, device=bias.device).triu(1),
                                float("-inf"))
    return bias.expand(*(1,) * (4 - bias.dim()), *bias.shape) if bias.dim() < 4 else bias


def _toeplitz_user(position, config, causal):
    """T5, ALiBi, KERPLE: the full bias [1, H, L, L] built once per forward (as Hugging Face's T5
    shares position_bias between layers), then attn_mask in every layer."""

    def prepare(length: int, like: torch.Tensor) -> torch.Tensor:
        if isinstance(position, T5):
            bias = t5_bias(position.bias, length, num_buckets=config.num_buckets, max_distance=config.max_distance,
                           bidirectional=not causal)
        elif isinstance(position, Alibi):
            bias = alibi_bias(length, num_heads=config.n_heads, device=like.device)
        else:
            bias = expand_toeplitz(position.bias_per_offset(offset_range(length)), length, length)
        return _with_mask(bias.to(like.dtype), causal)                                     # [1, H, L, L]
    position.prepare = prepare
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (
        F.scaled_dot_product_attention(q, k, v, attn_mask=shared), None)


def _rope_user(position, config, causal):
    base = config.rope_base
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (F.scaled_dot_product_attention(
        rope_rotate(q, base=base), rope_rotate(k, base=base), v, is_causal=causal), None)


def _fire_user(position, config, causal):
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (F.scaled_dot_product_attention(
        q, k, v, attn_mask=_with_mask(position.layers[layer](q.shape[-2]), True)), None)


def _skew_user(position, config, causal):

    def attend(layer, q, k, v, *, shared=None, need_weights=False):
        table = distance_table(position.e_r[layer], q.shape[-2])                           # [L, D]
        bias = skew((q / math.sqrt(q.shape[-1])) @ table.transpose(0, 1))                   # [B, H, L, L]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_with_mask(bias, True)), None
    return attend


def _shaw_user(position, config, causal):
    """Key term only: no SDPA call can add Shaw's a^V value term."""

    def attend(layer, q, k, v, *, shared=None, need_weights=False):
        length, clip = q.shape[-2], config.clip
        rel = (q / math.sqrt(q.shape[-1])) @ position.rel_k[layer].transpose(0, 1)          # [B, H, L, 2·clip + 1]
        index = shaw_clip_index(length, k=clip, device=q.device).expand(*q.shape[:2], length, length)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_with_mask(torch.gather(rel, -1, index), causal)), None
    return attend


def _user_sdpa(model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """The same model as a user would write it for F.scaled_dot_product_attention: the scheme's own
    term, built the usual way and passed as attn_mask (a transcription per scheme class; schemes
    without a relative term: plain SDPA). Returns the model and what its attention leaves out."""
    writers = {T5: _toeplitz_user, Alibi: _toeplitz_user, Kerple: _toeplitz_user, Rope: _rope_user,
               Fire: _fire_user, Skew: _skew_user, Shaw: _shaw_user}
    position, config = model.position, model.config
    writer = writers.get(type(position))
    if writer is None:                                           # no relative term: absolute or none
        return _plain_sdpa(model), ""
    position.attend = writer(position, config, config.causal)
    return model, "key term only: SDPA cannot add Shaw's a^V value term" if writer is _shaw_user else ""


MODEL_TARGET = 1.3


def model_section(ctx: BenchContext) -> SectionResult:
    batch, length = (2, 32) if ctx.quick else (8, 256)
    rounds = 1 if ctx.quick else 7
    rows = []
    tokens = torch.randint(0, 10, (batch, length), generator=torch.Generator().manual_seed(0))
    for scheme in QUICK_MODEL_SCHEMES if ctx.quick else SCHEMES:
        ctx.log(f"model: {scheme} (load {load_average()})")
        config = ModelConfig(scheme=scheme, max_len=max(64, length), skew_distances=32)
        ours = build_model(config, seed=0)
        user, note = _user_sdpa(build_model(config, seed=0))
        with torch.no_grad():                                               # the same model? (Shaw: no a^V)
            difference = float((ours(tokens)[0] - user(tokens)[0]).abs().max())
        calls = {"relviz": _train_step_call(ours, tokens), "sdpa": _train_step_call(user, tokens),
                 "floor": _train_step_call(_plain_sdpa(build_model(config, seed=0)), tokens)}
        for call in calls.values():
            call()                                                          # warm-up
        times = time_in_turns(calls, rounds, SAMPLE_S)
        med = {name: statistics.median(t) for name, t in times.items()}
        rows.append({"scheme": scheme, "relviz_s": med["relviz"], "sdpa_s": med["sdpa"], "floor_s": med["floor"],
                     "ratio": med["relviz"] / med["sdpa"], "floor_ratio": med["relviz"] / med["floor"],
                     "logits_diff": difference, "note": note, "load": load_average()})
    over = [r for r in rows if r["ratio"] > MODEL_TARGET]
    same = [r for r in rows if not r["note"]]
    targets = [Target(f"every scheme's train step ≤ {MODEL_TARGET}× the same model written for fused SDPA "
                      f"(B{batch}×L{length})", None if ctx.quick or not rows else not over,
                      ", ".join(f"{r['scheme']} {r['ratio']:.2f}×" for r in rows)),
               Target("the SDPA model computes the same logits (max |Δ| ≤ 1e-4; Shaw's leaves out a^V)",
                      all(r["logits_diff"] <= 1e-4 for r in same) if same else None,
                      f"largest {max(r['logits_diff'] for r in same):.1e}" if same else "n/a")]
    speed = lambda x: f"{x:.2f}×"  # noqa: E731
    return SectionResult(
        name="model", title=f"Model train step (forward + backward + AdamW), B={batch} L={length}: relviz vs the "
                            "same model written for F.scaled_dot_product_attention, and vs the no-position floor",
        columns=[Column("scheme", "scheme"), Column("relviz_s", "relviz ms", ms),
                 Column("sdpa_s", "same model, SDPA ms", ms), Column("ratio", "÷ SDPA", speed),
                 Column("floor_s", "floor ms", ms), Column("floor_ratio", "÷ floor", speed),
                 Column("logits_diff", "max |Δ logits|", lambda x: f"{x:.1e}"),
                 Column("note", "alternative leaves out"), Column("load", "load avg")],
        rows=rows, targets=targets,
        notes=["Default ModelConfig (d_model 64, 2 layers, 4 heads, d_ff 256), the same weights in all three. "
               "relviz: the model as training runs it (need_weights=False: each layer's fused path). "
               "same model, SDPA: each scheme's term written by hand for F.scaled_dot_product_attention "
               "(T5/ALiBi/KERPLE: the full [1, H, L, L] bias built once per forward, as Hugging Face's T5 "
               "shares position_bias; FIRE, skew, Shaw: the bias per layer; RoPE: rotate, then is_causal). "
               "floor: plain causal SDPA, no relative term at all (absolute schemes keep their embeddings). "
               f"{rounds} rounds taking turns after a warm-up, each sample at least {SAMPLE_S * 1e3:.0f} ms of "
               "repeated steps, medians of the per-step means."])


def _main(argv: list[str]) -> int:
    kind, spec = argv[0], json.loads(argv[1])
    result = {"time": run_time_case, "memory": run_memory_case, "t5bias": run_t5bias_case}[kind](spec)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
