"""The core on one GPU: ``python -m relviz.bench.gpu --out DIR`` (run by ``scripts/gpu_check.sh``).

Two tables, written with the GPU's name to ``DIR/gpu.json`` and ``DIR/gpu.md`` after every row (a run
cut short by its time budget keeps what it measured):

- **bandwidth**: the T5 bucket map [L, L] int64 and the per-offset T5 and ALiBi biases expanded to
  [H, L, L] at L = 65,536, each against the memory-bandwidth floor for the bytes it writes: a
  device-to-device ``copy_`` of half those bytes into the other half moves the same bytes through
  memory (read + write) as the op writes (it reads only its 2L − 1 per-offset values).
- **attention**: relviz's fused attention (``backend="auto"``: compiled FlexAttention on CUDA, SDPA
  elsewhere; and ``backend="sdpa"``) against SDPA with the bias prebuilt as [1, H, L, L] and against
  FlexAttention compiled with a ``score_mod`` (T5 bias per offset; ALiBi computed in the kernel;
  a sliding window as a block mask), bf16, forward and forward + backward.

``--dry-run`` runs every code path on the CPU at tiny sizes, FlexAttention eagerly (compiling takes
seconds to a minute per kernel) and without its backward (torch has none on CPU): the test suite runs
it, so the script cannot rot where no GPU is. Its figures are not GPU figures and say so.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import relviz
from relviz import flex as flex_module
from relviz.attention import alibi_attention, t5_attention
from relviz.bench.report import Column, SectionResult, Target
from relviz.positions import alibi_bias_offsets, alibi_slopes, expand_toeplitz, offset_range, t5_bias_offsets, t5_bucket

__all__ = ["Sizes", "FULL", "DRY", "run", "markdown"]


@dataclass(frozen=True)
class Sizes:
    """What one run measures. ``budget_s``: rows not started by then are skipped (and say so)."""

    map_length: int
    map_heads: int
    lengths: tuple[int, ...]
    heads: int
    dim: int
    window: int
    dtype: str
    repeats: int
    compiled: bool
    budget_s: float


FULL = Sizes(map_length=65_536, map_heads=1, lengths=(4096, 16_384, 32_768), heads=8, dim=128, window=1024,
             dtype="bfloat16", repeats=5, compiled=True, budget_s=240.0)
DRY = Sizes(map_length=192, map_heads=2, lengths=(96,), heads=2, dim=16, window=24, dtype="float32", repeats=1,
            compiled=False, budget_s=60.0)

#: Goals from issue 25.
MAP_GOAL = 1.2
FLEX_GOAL = 1.1
#: a row's role: relviz's automatic backend (the row says which kernel ran), or the FlexAttention reference
ROLE_AUTO, ROLE_FLEX = "auto", "flex"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], Any], device: torch.device, repeats: int) -> tuple[float, float]:
    """(first call, median of ``repeats`` later calls) in seconds; the first includes any compile."""
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def _free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.empty_cache()                       # blocks the caching allocator holds count as used
        return torch.cuda.mem_get_info(device)[0]
    import psutil
    return psutil.virtual_memory().available


def _peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


# ---------------------------------------------------------------------------------------
# Bandwidth: the bucket map and the per-offset biases against a copy of the same bytes


def _floor(nbytes: int, device: torch.device, repeats: int) -> float:
    """Seconds to copy nbytes / 2 into another nbytes / 2 on the device: nbytes through memory."""
    half = nbytes // 2
    src = torch.empty(half, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    _, copy_s = _time(lambda: dst.copy_(src), device, repeats)
    del src, dst
    return copy_s


def bandwidth_rows(device: torch.device, sizes: Sizes) -> list[tuple[str, int, Callable[[], torch.Tensor]]]:
    """(what, bytes written, build) for each expansion at sizes.map_length; no build runs here."""
    length, heads = sizes.map_length, sizes.map_heads
    offsets = offset_range(length, device=device)                                    # [2L − 1]
    table = torch.randn(32, heads, generator=torch.Generator().manual_seed(0)).to(device)
    cells = length * length
    return [
        ("T5 bucket map [L, L] int64", cells * 8,
         lambda: expand_toeplitz(t5_bucket(offsets), length, length)),
        (f"T5 bias per offset -> [{heads}, L, L] float32", heads * cells * 4,
         lambda: expand_toeplitz(t5_bias_offsets(table, length), length, length)),
        (f"ALiBi bias per offset -> [{heads}, L, L] float32", heads * cells * 4,
         lambda: expand_toeplitz(alibi_bias_offsets(length, num_heads=heads, device=device), length, length)),
    ]


def _bandwidth_row(what: str, nbytes: int, build, device: torch.device, sizes: Sizes) -> dict[str, Any]:
    row: dict[str, Any] = {"table": "bandwidth", "what": what, "L": sizes.map_length, "bytes": nbytes}
    if 2.2 * nbytes > _free_bytes(device):
        return row | {"skipped": f"needs ~{2.2 * nbytes / 1e9:.1f} GB, {_free_bytes(device) / 1e9:.1f} GB free"}
    _, op_s = _time(build, device, sizes.repeats)
    floor_s = _floor(nbytes, device, sizes.repeats)
    return row | {"op_s": op_s, "floor_s": floor_s, "ratio": op_s / floor_s,
                  "floor_GBps": nbytes / floor_s / 1e9, "goal": MAP_GOAL}


# ---------------------------------------------------------------------------------------
# Attention: relviz fused vs SDPA with a prebuilt bias vs compiled FlexAttention


def _flex_kernel(device: torch.device, compiled: bool):
    from torch.nn.attention.flex_attention import flex_attention
    return flex_module.compiled(device.type) if compiled else flex_attention


def attention_cases(length: int, device: torch.device, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """Per mechanism: relviz's calls, the prebuilt-bias SDPA call and the FlexAttention call."""
    from torch.nn.attention.flex_attention import create_block_mask

    heads, dim, dtype = sizes.heads, sizes.dim, getattr(torch, sizes.dtype)
    gen = torch.Generator().manual_seed(length)
    q, k, v = (torch.randn(1, heads, length, dim, generator=gen).to(device, dtype).requires_grad_() for _ in range(3))
    # torch refuses FlexAttention on CPU for inputs that require grad, even under no_grad
    fq, fk, fv = (q, k, v) if device.type == "cuda" else (q.detach(), k.detach(), v.detach())
    table = torch.randn(32, heads, generator=gen).to(device, dtype)
    scale = 1 / math.sqrt(dim)
    kernel = _flex_kernel(device, sizes.compiled)
    t5 = dict(num_buckets=32, max_distance=128, bidirectional=True)
    per_offset_t5 = t5_bias_offsets(table, length, **t5)                                 # [H, 2L − 1]
    slopes = alibi_slopes(heads, device=device).to(dtype)
    window = sizes.window

    def t5_mod(score, b, h, q_idx, kv_idx):
        return score + per_offset_t5[h, kv_idx - q_idx + length - 1]

    def alibi_mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx)

    def in_window(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window)

    def prebuilt_t5():
        return expand_toeplitz(per_offset_t5, length, length)[None].contiguous()       # [1, H, L, L]

    def prebuilt_alibi():
        per_offset = alibi_bias_offsets(length, num_heads=heads, device=device)
        per_offset = per_offset.masked_fill(offset_range(length, device=device) > 0, float("-inf"))
        return expand_toeplitz(per_offset.to(dtype), length, length)[None].contiguous()

    def prebuilt_window():
        rows = torch.arange(length, device=device)
        distance = rows[:, None] - rows[None, :]
        return ((distance >= 0) & (distance < window))[None, None]                       # [1, 1, L, L] bool

    return {
        "T5 bias (bidirectional)": {
            "relviz auto": lambda: t5_attention(q, k, v, table, **t5, scale=scale)[0],
            "relviz sdpa": lambda: t5_attention(q, k, v, table, **t5, scale=scale, backend="sdpa")[0],
            "bias": prebuilt_t5, "flex": lambda: kernel(fq, fk, fv, score_mod=t5_mod, scale=scale),
            "qkv": (q, k, v), "bias_bytes": heads * length * length * q.element_size()},
        "ALiBi (causal)": {
            "relviz auto": lambda: alibi_attention(q, k, v, causal=True, scale=scale)[0],
            "relviz sdpa": lambda: alibi_attention(q, k, v, causal=True, scale=scale, backend="sdpa")[0],
            "bias": prebuilt_alibi,
            "flex": lambda: kernel(fq, fk, fv, score_mod=alibi_mod, scale=scale,
                                   block_mask=flex_module.causal_block_mask(length, str(device))),
            "qkv": (q, k, v), "bias_bytes": heads * length * length * q.element_size()},
        f"sliding window {window} (causal)": {
            "bias": prebuilt_window,
            "flex": lambda mask=create_block_mask(in_window, None, None, length, length, device=str(device)):
                kernel(fq, fk, fv, scale=scale, block_mask=mask),
            "qkv": (q, k, v), "bias_bytes": length * length},
    }


def _attention_rows(mechanism: str, case: dict[str, Any], length: int, device: torch.device,
                    sizes: Sizes, deadline: float) -> list[dict[str, Any]]:
    q, k, v = case["qkv"]
    rows = []
    reference = None
    # (label, call, role): "auto" rows say which kernel relviz chose; "flex" rows are what the goal compares to
    calls = [(name, case[name], role) for name, role in (("relviz auto", ROLE_AUTO), ("relviz sdpa", ""))
             if name in case]
    bias = None
    if 3 * case["bias_bytes"] < _free_bytes(device):
        bias = case["bias"]()
        calls.append(("SDPA, bias prebuilt", lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, scale=1 / math.sqrt(sizes.dim)), ""))
    else:
        rows.append({"skipped": f"SDPA with the bias prebuilt needs {case['bias_bytes'] / 1e9:.1f} GB for it"})
    calls.append(("FlexAttention compiled" if sizes.compiled else "FlexAttention (eager: dry run)", case["flex"],
                  ROLE_FLEX))
    for impl, call, role in calls:
        row: dict[str, Any] = {"table": "attention", "mechanism": mechanism, "L": length, "impl": impl,
                               "role": role}
        if time.monotonic() > deadline:
            rows.append(row | {"skipped": "the script's time budget ran out"})
            continue
        if role == ROLE_AUTO:
            row["runs"] = flex_module.resolve_backend("auto", device, sizes.dim)
        _peak_reset(device)
        # Forward as in training (grad enabled): under no_grad FlexAttention would compile another kernel per
        # score_mod and shape, seconds each, and the script has 6½ minutes.
        row["forward_first_s"], row["forward_s"] = _time(call, device, sizes.repeats)
        with torch.no_grad():
            out = call().float()
        reference = out if reference is None else reference
        row["max_abs_diff"] = float((out - reference).abs().max())
        if role == ROLE_FLEX and device.type == "cpu":
            row["backward"] = "no FlexAttention backward on CPU"
        else:
            def step():
                call().backward(torch.ones_like(q))
            row["fwd_bwd_first_s"], row["fwd_bwd_s"] = _time(step, device, sizes.repeats)
            for t in (q, k, v):
                t.grad = None
        row["peak_bytes"] = _peak(device)
        rows.append(row)
    del bias
    flex_rows = {r["mechanism"]: r for r in rows if r.get("role") == ROLE_FLEX and "forward_s" in r}
    for row in rows:
        ref = flex_rows.get(row.get("mechanism"))
        if ref and "forward_s" in row:
            row["forward_vs_flex"] = row["forward_s"] / ref["forward_s"]
            if "fwd_bwd_s" in row and "fwd_bwd_s" in ref:
                row["fwd_bwd_vs_flex"] = row["fwd_bwd_s"] / ref["fwd_bwd_s"]
    return rows


# ---------------------------------------------------------------------------------------
# The run and its files


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    return f"CPU ({platform.processor() or platform.machine()}), dry run: not GPU figures"


def run(device: torch.device, sizes: Sizes, out_dir: Path | None = None,
        log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Measure both tables; after every row the results so far are written to out_dir."""
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 64          # this process compiles one kernel per score_mod and shape
    deadline = time.monotonic() + sizes.budget_s
    result = {"device": device_name(device), "torch": torch.__version__, "relviz": relviz.__version__,
              "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "sizes": asdict(sizes),
              "dry_run": device.type != "cuda", "rows": []}

    def add(rows: list[dict[str, Any]]) -> None:
        result["rows"].extend(rows)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "gpu.json").write_text(json.dumps(result, indent=2))
            (out_dir / "gpu.md").write_text(markdown(result))

    for what, nbytes, build in bandwidth_rows(device, sizes):
        log(f"bandwidth: {what}")
        add([_bandwidth_row(what, nbytes, build, device, sizes)])
    for length in sizes.lengths:
        for mechanism, case in attention_cases(length, device, sizes).items():
            log(f"attention: {mechanism} L={length}")
            add(_attention_rows(mechanism, case, length, device, sizes, deadline))
            del case
        _peak_reset(device)
    add([])
    return result


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x * 1e3:.2f}"


def _ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}x"


def markdown(result: dict[str, Any]) -> str:
    """The two tables as markdown, headed by the device, torch and the date."""
    lines = [f"# relviz GPU check: {result['device']}", "",
             f"torch {result['torch']}, relviz {result['relviz']}, started {result['started']}; sizes "
             f"{json.dumps(result['sizes'])}.", ""]
    if result["dry_run"]:
        lines += ["**Dry run on the CPU at tiny sizes: these are not GPU figures.**", ""]
    lines += ["## Bucket map and per-offset biases against a copy of the same bytes", "",
              "| what | L | bytes written | op ms | copy floor ms | op ÷ floor | floor GB/s | note |",
              "|---|---|---|---|---|---|---|---|"]
    for r in (r for r in result["rows"] if r.get("table") == "bandwidth"):
        lines.append(f"| {r['what']} | {r['L']} | {r['bytes'] / 1e9:.2f} GB | {_ms(r.get('op_s'))} | "
                     f"{_ms(r.get('floor_s'))} | {_ratio(r.get('ratio'))} | "
                     f"{r['floor_GBps']:.0f} | {r.get('skipped', '')} |" if "op_s" in r else
                     f"| {r['what']} | {r['L']} | {r['bytes'] / 1e9:.2f} GB | | | | | {r.get('skipped', '')} |")
    lines += ["", f"Goal: the bucket map within {MAP_GOAL}x of the floor.", "",
              "## Attention: relviz fused vs SDPA with the bias prebuilt vs FlexAttention", "",
              "| mechanism | L | implementation | forward ms | ÷ flex | fwd + bwd ms | ÷ flex | first call s | "
              "peak MB | max abs diff | note |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in result["rows"] if r.get("table") == "attention"):
        note = r.get("skipped") or r.get("backward") or (f"runs {r['runs']}" if "runs" in r else "")
        peak = "" if r.get("peak_bytes") is None else f"{r['peak_bytes'] / 1e6:.0f}"
        first = "" if "forward_first_s" not in r else f"{r['forward_first_s']:.1f}"
        diff = "" if "max_abs_diff" not in r else f"{r['max_abs_diff']:.1e}"
        lines.append(f"| {r['mechanism']} | {r['L']} | {r['impl']} | {_ms(r.get('forward_s'))} | "
                     f"{_ratio(r.get('forward_vs_flex'))} | {_ms(r.get('fwd_bwd_s'))} | {_ratio(r.get('fwd_bwd_vs_flex'))}"
                     f" | {first} | {peak} | {diff} | {note} |")
    lines += ["", f"Goal: relviz's fused attention ≤ {FLEX_GOAL}x compiled FlexAttention. Forward: with grad "
              "enabled, as in training; 'first call s': the first forward (the compile, for FlexAttention). "
              "'max abs diff': against the first implementation of the row's mechanism and length (bf16; ALiBi's "
              "bias −m·|j − i| rounds to bf16 in relviz and in the prebuilt bias).", ""]
    return "\n".join(lines)


def gpu_section(ctx):
    """``python -m relviz bench --only gpu``: the same run on CUDA; without one, the dry run under
    ``--quick`` (its figures say they are not GPU figures) and otherwise a note."""

    title = "The core on one GPU: bucket map vs a copy of the same bytes; attention vs SDPA and FlexAttention"
    columns = [Column("table", "table"), Column("what", "what"), Column("mechanism", "mechanism"), Column("L", "L"),
               Column("impl", "implementation"), Column("op_s", "op ms", _ms), Column("floor_s", "floor ms", _ms),
               Column("forward_s", "forward ms", _ms), Column("fwd_bwd_s", "fwd+bwd ms", _ms),
               Column("forward_vs_flex", "fwd ÷ flex", _ratio), Column("ratio", "op ÷ floor", _ratio),
               Column("skipped", "note")]
    if torch.cuda.is_available():
        device, sizes = torch.device("cuda"), FULL
    elif ctx.quick:
        device, sizes = torch.device("cpu"), DRY
    else:
        return SectionResult(name="gpu", title=title, columns=columns, rows=[],
                             notes=["skipped: no CUDA device here (--quick runs the CPU dry run of the code paths)"])
    result = run(device, sizes, log=ctx.log)
    maps = [r for r in result["rows"] if r.get("what", "").startswith("T5 bucket map") and "ratio" in r]
    targets = [Target(f"T5 bucket map within {MAP_GOAL}x of the copy floor at L = {sizes.map_length}",
                      maps[0]["ratio"] <= MAP_GOAL if maps and not result["dry_run"] else None,
                      f"{maps[0]['ratio']:.2f}x" if maps else "not measured")]
    auto = [r for r in result["rows"] if r.get("role") == ROLE_AUTO and "forward_vs_flex" in r]
    targets.append(Target(f"relviz fused (auto) ≤ {FLEX_GOAL}x compiled FlexAttention",
                          all(r["forward_vs_flex"] <= FLEX_GOAL and r.get("fwd_bwd_vs_flex", 0) <= FLEX_GOAL
                              for r in auto) if auto and not result["dry_run"] else None,
                          ", ".join(f"{r['mechanism']} L={r['L']}: {r['forward_vs_flex']:.2f}x" for r in auto)))
    return SectionResult(name="gpu", title=f"{title} ({result['device']})", columns=columns, rows=result["rows"],
                         targets=targets, notes=[f"device: {result['device']}; torch {result['torch']}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m relviz.bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu.json and gpu.md")
    parser.add_argument("--dry-run", action="store_true", help="every code path on the CPU at tiny sizes")
    args = parser.parse_args(argv)
    if args.dry_run:
        device, sizes = torch.device("cpu"), DRY
    elif torch.cuda.is_available():
        device, sizes = torch.device("cuda"), FULL
    else:
        print("no CUDA device here: run with --dry-run for the CPU check of the code paths", file=sys.stderr)
        return 2
    run(device, sizes, args.out, log=lambda message: print(f"  ... {message}", file=sys.stderr, flush=True))
    print((args.out / "gpu.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
