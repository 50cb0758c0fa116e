"""The ``t5bias`` bench section: positions.t5_bias (per offset, expanded once) against the previous
per-cell build (int64 bucket map + gather), Hugging Face's ``T5Attention.compute_bias`` and an
x-transformers-style build, values checked identical.

Why its own process per length (``run_t5bias_case`` through relviz.bench.fresh_process): at L = 8192
each build writes a fresh 2 GB tensor, whose time is mostly the kernel's; see run_t5bias_case.
``python -m relviz bench --only t5bias``.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from relviz.bench.fresh_process import case_in_fresh_process
from relviz.bench.fused_cases import H
from relviz.bench.report import (SAMPLE_S, BenchContext, Column, SectionResult, Target, load_average, ms,
                                 time_in_turns)
from relviz.positions import t5_bias, t5_bucket_map


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
        row = run_t5bias_case(spec) if ctx.quick else case_in_fresh_process("t5bias", spec, ctx)
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

