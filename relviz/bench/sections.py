"""The sections of ``python -m relviz bench`` (relviz.cli.bench runs them): time and measure the memory
of the core functions.

Sections (``--only NAME`` runs some of them; ``--quick`` uses small sizes for a CI smoke run;
``--json PATH`` also writes the results as JSON):

- ``t5``: positions.t5_bucket_map (per offset + Toeplitz expansion) against T5's reference
  formula evaluated on every cell of the L × L relative-position matrix (relviz.reference).
- ``attention``: attention.skew_attention and attention.shaw_attention against the naive
  path that gathers the relative embeddings into an L × L × D tensor
  (relviz.reference): forward time and peak memory, each case in a fresh subprocess
  (relviz.experiments.cases, the cases the Experiments page's cost study runs).
- ``memory``: the Music Transformer memory example (relviz.memory), pure arithmetic.

To add a section, write ``def my_section(ctx: BenchContext) -> SectionResult`` and append
``Section("name", "Title", my_section)`` to ``SECTIONS``; ``--only`` and the JSON pick it up.

Timings are medians after a warm-up run; they are noisy on a shared machine. Nothing here
is asserted by the test suite: targets are printed as PASS / MISS for people to read.
"""
from __future__ import annotations

import importlib
import statistics
from typing import Any

import torch

from relviz.bench.report import BenchContext, Column, Section, SectionResult, Target, time_calls
from relviz.bench.report import bytes_text as _bytes
from relviz.bench.report import mb as _mb
from relviz.bench.report import ms as _ms
from relviz.bench.report import ratio as _ratio
from relviz.experiments.cases import ATTN_B, ATTN_D, ATTN_H, run_in_fresh_process
from relviz.memory import format_bytes, relative_term_bytes
from relviz.positions import relative_positions, t5_bucket_map
from relviz.reference import t5_bucket_map_per_cell

# ---------------------------------------------------------------------------------------
# Section: T5 buckets


def t5_section(ctx: BenchContext) -> SectionResult:
    lengths = [128, 256] if ctx.quick else [512, 1024, 2048, 4096, 8192]
    target_length = 8192
    rows = []
    for length in lengths:
        ctx.log(f"t5: L={length}")
        positions = relative_positions(length, device="cpu")   # built outside the timing
        ours = t5_bucket_map(length, device="cpu")
        reference = t5_bucket_map_per_cell(positions)
        identical = bool(torch.equal(ours, reference))
        del ours, reference
        ours_s = statistics.median(time_calls(lambda: t5_bucket_map(length, device="cpu"),
                                              repeats=5))
        ref_s = statistics.median(time_calls(lambda: t5_bucket_map_per_cell(positions),
                                             repeats=3))
        del positions
        rows.append({"L": length, "relviz_s": ours_s, "reference_s": ref_s,
                     "speedup": ref_s / ours_s, "identical": identical})
    targets = []
    at_target = [r for r in rows if r["L"] == target_length]
    if at_target:
        r = at_target[0]
        targets += [
            Target(f"t5_bucket_map >= 10x faster than the reference at L = {target_length}",
                   r["speedup"] >= 10, f"{r['speedup']:.1f}x"),
            Target(f"t5_bucket_map under 1 s at L = {target_length}",
                   r["relviz_s"] < 1.0, f"{r['relviz_s'] * 1e3:.0f} ms"),
        ]
    else:
        targets.append(Target(f"targets at L = {target_length}", None, "not measured (--quick)"))
    targets.append(Target("identical to the reference at every L", all(r["identical"] for r in rows),
                          ", ".join(f"L={r['L']}: {r['identical']}" for r in rows)))
    return SectionResult(
        name="t5", title="T5 bucket map (32 buckets, max_distance 128, bidirectional)",
        columns=[Column("L", "L"), Column("relviz_s", "relviz ms", _ms),
                 Column("reference_s", "reference ms", _ms), Column("speedup", "speed-up", _ratio),
                 Column("identical", "identical")],
        rows=rows, targets=targets,
        notes=["relviz: one bucket per offset (2L − 1 values), then the Toeplitz expansion (one "
               "copy of L × L int64); reference: T5's formula on every cell of the precomputed "
               "relative-position matrix (its construction is not timed). Medians of 5 / 3 runs "
               f"after a warm-up, torch threads = {torch.get_num_threads()}."])


# ---------------------------------------------------------------------------------------
# Section: attention, relviz vs the naive L × L × D gather, in fresh subprocesses

#: The method rows of the attention section: (method, relviz's case, the naive case), keys of CASES.
ATTENTION_PAIRS = (("skew", "skew", "skew_naive"), ("shaw", "shaw", "shaw_naive"))


def attention_section(ctx: BenchContext) -> SectionResult:
    lengths = [128] if ctx.quick else [512, 1024, 2048, 4096]
    repeats = 2 if ctx.quick else 3
    target_length = 2048
    rows = []
    for method, relviz_impl, naive_impl in ATTENTION_PAIRS:
        for length in lengths:
            ours = run_in_fresh_process({"impl": relviz_impl, "L": length, "repeats": repeats}, ctx.log)
            naive = run_in_fresh_process({"impl": naive_impl, "L": length, "repeats": repeats}, ctx.log)
            row: dict[str, Any] = {"method": method, "L": length}
            for prefix, res in (("relviz", ours), ("naive", naive)):
                if "skipped" in res:
                    row[f"{prefix}_skipped"] = res["skipped"]
                    continue
                row[f"{prefix}_s"] = res["forward_s"]
                row[f"{prefix}_peak_bytes"] = res["peak_bytes"]
                row[f"{prefix}_delta_bytes"] = res.get("delta_bytes")
                row[f"{prefix}_checksum"] = res["checksum"]
            if "relviz_s" in row and "naive_s" in row:
                row["time_ratio"] = row["naive_s"] / row["relviz_s"]
                if row["relviz_delta_bytes"] and row["naive_delta_bytes"]:
                    row["memory_ratio"] = row["naive_delta_bytes"] / row["relviz_delta_bytes"]
                a, b = row["relviz_checksum"], row["naive_checksum"]
                row["outputs_match"] = all(abs(x - y) <= 1e-4 * max(1.0, abs(y)) for x, y in zip(a, b))
            row["note"] = "; ".join(f"{p}: {row[p + '_skipped']}" for p in ("relviz", "naive")
                                    if p + "_skipped" in row) or None
            rows.append(row)

    targets = []
    for method, _, _ in ATTENTION_PAIRS:
        row = next((r for r in rows if r["method"] == method and r["L"] == target_length), None)
        if row is None:
            targets.append(Target(f"{method} targets at L = {target_length}", None, "not measured (--quick)"))
            continue
        if "memory_ratio" in row:
            targets.append(Target(
                f"{method}: peak memory >= 2.5x below the naive path at L = {target_length}",
                row["memory_ratio"] >= 2.5,
                f"{row['memory_ratio']:.1f}x (Δpeak {_mb(row['relviz_delta_bytes'])} vs "
                f"{_mb(row['naive_delta_bytes'])})"))
        else:
            targets.append(Target(f"{method}: memory at L = {target_length}", None, row.get("note") or "n/a"))
        if "time_ratio" in row:
            targets.append(Target(
                f"{method}: forward time no worse than the naive path at L = {target_length}",
                row["relviz_s"] <= row["naive_s"],
                f"{row['relviz_s'] * 1e3:.0f} ms vs {row['naive_s'] * 1e3:.0f} ms"))
    matches = [r["outputs_match"] for r in rows if "outputs_match" in r]
    targets.append(Target("relviz and naive outputs agree (checksums)", all(matches) if matches else None,
                          f"{sum(matches)}/{len(matches)} cases"))
    return SectionResult(
        name="attention",
        title=f"Relative attention forward, B={ATTN_B} H={ATTN_H} D={ATTN_D} fp32, causal: "
              "relviz vs naive L×L×D gather",
        columns=[Column("method", "method"), Column("L", "L"),
                 Column("relviz_s", "relviz ms", _ms), Column("naive_s", "naive ms", _ms),
                 Column("time_ratio", "naive/relviz time", _ratio),
                 Column("relviz_delta_bytes", "relviz Δpeak", _mb),
                 Column("naive_delta_bytes", "naive Δpeak", _mb),
                 Column("memory_ratio", "naive/relviz Δpeak", _ratio),
                 Column("relviz_peak_bytes", "relviz peak", _mb),
                 Column("naive_peak_bytes", "naive peak", _mb),
                 Column("outputs_match", "match"), Column("note", "note")],
        rows=rows, targets=targets,
        notes=["skew: skew_attention (table of L distances) vs logits = q·kᵀ + gather_relative(q, E, "
               "index) with the gathered L × L × D table. shaw: shaw_attention with rel_k and rel_v, "
               "clip = L − 1 (every distance its own row, the worst case), causal, vs a^K and a^V "
               "both gathered to L × L × D.",
               "Each case runs in a fresh subprocess: peak = VmHWM at the end; Δpeak = peak minus "
               "the VmHWM after imports and input creation (reset to the RSS via "
               "/proc/self/clear_refs). One warm-up run, then the median of "
               f"{repeats} timed runs under torch.inference_mode().",
               "A case is skipped when its estimated need exceeds half the available memory; the "
               "naive gathered table is shared by the heads (L²·D values, 4.3 GB at L = 4096), "
               "not L²·D·H."])


# ---------------------------------------------------------------------------------------
# Section: the Music Transformer memory example


def memory_section(ctx: BenchContext) -> SectionResult:
    length, dim, heads = 2048, 512, 8
    sizes = relative_term_bytes(length, dim, heads)
    rows = [
        {"scope": "per layer", "dims": f"D = {dim}", "shaw_bytes": sizes.shaw_per_layer,
         "skew_bytes": sizes.skew_per_layer, "ratio": sizes.shaw_per_layer / sizes.skew_per_layer},
        {"scope": "per head", "dims": f"D_h = {dim // heads}", "shaw_bytes": sizes.shaw_per_head,
         "skew_bytes": sizes.skew_per_head, "ratio": sizes.shaw_per_head / sizes.skew_per_head},
    ]
    expected = {"shaw_per_layer": "8.6 GB", "skew_per_layer": "4.2 MB",
                "shaw_per_head": "1.1 GB", "skew_per_head": "0.52 MB"}
    shown = {key: format_bytes(getattr(sizes, key)) for key in expected}
    targets = [Target("reproduces 8.6 GB vs 4.2 MB per layer and 1.1 GB vs 0.52 MB per head",
                      shown == expected, ", ".join(f"{k} = {v}" for k, v in shown.items()))]
    return SectionResult(
        name="memory",
        title=f"Music Transformer memory example: relative term, L = {length}, D = {dim}, "
              f"H = {heads}, fp32",
        columns=[Column("scope", "scope"), Column("dims", "width"),
                 Column("shaw_bytes", "Shaw L²·D", _bytes), Column("skew_bytes", "skew L·D", _bytes),
                 Column("ratio", "ratio", lambda x: f"{x:.0f}x")],
        rows=rows, targets=targets,
        notes=["relviz.memory.relative_term_bytes; decimal units. The paper quotes "
               "\"8.5 GB to 4.2 MB\" (2048²·512·4 B = 8.59 GB)."])


#: The benchmark's sections, in order. Append a Section to add one.
SECTIONS: list[Section] = [
    Section("t5", "T5 bucket map vs the per-cell reference", t5_section),
    Section("attention", "skew/shaw attention vs the naive L × L × D gather", attention_section),
    Section("memory", "Music Transformer memory example", memory_section),
    Section("fused", "Attention fused path vs SDPA with a prebuilt bias, FlexAttention, the weights path",
            lambda ctx: importlib.import_module("relviz.bench.fused").fused_section(ctx)),
    Section("t5bias", "T5 bias per offset vs HF compute_bias, x-transformers, the per-cell build",
            lambda ctx: importlib.import_module("relviz.bench.t5bias").t5_bias_section(ctx)),
    Section("model", "Model train step vs the same model with fused SDPA",
            lambda ctx: importlib.import_module("relviz.bench.model_step").model_section(ctx)),
    Section("gpu", "The core on one GPU (scripts/gpu_check.sh): bucket map, biases, attention vs FlexAttention",
            lambda ctx: importlib.import_module("relviz.bench.gpu").gpu_section(ctx)),
    Section("app", "App rerun time and figure sizes",
            lambda ctx: importlib.import_module("relviz.bench.app").app_section(ctx)),
    Section("slider", "Slider -> charts settled in Chromium at each large page's largest setting",
            lambda ctx: importlib.import_module("relviz.bench.slider").slider_section(ctx)),
    Section("view_memory", "Server memory of one view at 2^16, 2^18, 2^20 positions (O(L))",
            lambda ctx: importlib.import_module("relviz.bench.memory").view_memory_section(ctx)),
    Section("class", "A class of N students opens the lecture's link at once, one process and one per core",
            lambda ctx: importlib.import_module("relviz.bench.class_load").class_section(ctx)),
    Section("first_paint", "First paint in Chromium vs a minimal Streamlit + Plotly app",
            lambda ctx: importlib.import_module("relviz.bench.first_paint").first_paint_section(ctx)),
    Section("check", "Checker: fit, then explain on a 1024 × 1024 T5 map and a 4096 × 128 cos cache",
            lambda ctx: importlib.import_module("relviz.bench.check").check_section(ctx)),
    Section("mistakes", "Checker: seeded mistakes no list holds, every verdict verified",
            lambda ctx: importlib.import_module("relviz.bench.mistakes").mistakes_section(ctx)),
    Section("observe", "The observer's first read of a family (a fresh process)",
            lambda ctx: importlib.import_module("relviz.bench.zoo").observe_section(ctx)),
    Section("zoo", "Every text family transformers ships, built tiny: exact or refused",
            lambda ctx: importlib.import_module("relviz.bench.zoo").zoo_section(ctx)),
    Section("vision_zoo", "Every image and video position family transformers ships: exact, refused or WRONG",
            lambda ctx: importlib.import_module("relviz.bench.vision_zoo").vision_zoo_section(ctx)),
    Section("zoo_search", "The zoo's settings searched: position fields varied per family, exact, refused or silent",
            lambda ctx: importlib.import_module("relviz.bench.zoo").search_section(ctx)),
]
