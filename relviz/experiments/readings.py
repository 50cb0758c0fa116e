"""Reading the results: tables, reach, the geometry of Shaw's clip and T5's buckets, and the
sentences the page prints under each chart (computed from the data, never written by hand)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from relviz.experiments.cost import attention_matrix_bytes, chunked_bytes, fmt_bytes, naive_gather_bytes, skew_table_bytes, wall_length
from relviz.experiments.plan import IMPLEMENTATIONS, Setting
from relviz.memory import format_bytes
from relviz.schemes import get_scheme


def settings_of(section: dict[str, Any]) -> list[Setting]:
    return [Setting.from_dict(s) for s in section["settings"]]


def offset_matrix(section: dict[str, Any], layers: int, key: str = "mean") -> tuple[list[Setting], list[int],
                                                                                    list[list[float]]]:
    """(settings, shifts, rows of ``key`` per s) of the offset experiment for one layer count."""
    shifts = section["setup"]["shifts"]
    lookup = {(r["setting"], r["s"]): r for r in section["results"] if r["layers"] == layers}
    settings = settings_of(section)
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
    without a per-offset table (the scheme's module says which: Shaw s < k, T5 a bucket of its own)."""
    return get_scheme(setting.scheme).exact_shifts(setting.params, list(shifts))


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
    """How many offsets share offset −s's bucket (schemes with buckets: T5)."""
    return get_scheme(setting.scheme).bucket_width(setting.params, s)


def bucket_segments(setting: Setting, max_s: int) -> list[tuple[int, int, str]]:
    """The offsets s = 1..max_s (answer at j − i = −s) grouped the way one layer sees them:
    (first s, last s, label) per T5 bucket, or Shaw's exact range and its clipped tail."""
    return get_scheme(setting.scheme).offset_segments(setting.params, max_s)


def exact_range_words(setting: Setting, exact: list[int], first_out: int) -> tuple[str, str]:
    """(where the exact range is, what lies beyond) in the offset study's first sentence: the scheme's words."""
    return get_scheme(setting.scheme).exact_range_words(setting.params, exact, first_out)


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
            where, beyond = exact_range_words(setting, exact, min(s for _, s in outside))
            parts.append(f"{setting.label} {_pct(_mean(inside))} {where} against "
                         f"{_pct(_mean([v for v, _ in outside]))} {beyond}")
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
        if not get_scheme(setting.scheme).bucketed:
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
    for setting in settings_of(section):
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
        first = (f"At L = {n}, the naive gather's forward adds {fmt_bytes(d_naive)} of peak memory and takes "
                 f"{naive['forward_s'] * 1e3:.0f} ms; the skew adds {fmt_bytes(d_ours)} and takes "
                 f"{ours['forward_s'] * 1e3:.0f} ms: the naive path needs {d_naive / max(1, d_ours):.1f}× the "
                 f"skew's memory and {naive['forward_s'] / ours['forward_s']:.1f}× its time.")
    else:
        first = "The skew and the naive gather were not both measured at any length in this file."
    wall_naive = wall_length(lambda x: naive_gather_bytes(x, dim), memory)
    wall_attn = wall_length(lambda x: attention_matrix_bytes(x, batch, heads), memory)
    wall_skew = wall_length(lambda x: skew_table_bytes(x, dim), memory)
    skipped = [r["L"] for r in cost_rows(section, "skew_naive") if r["skipped"]]
    second = (f"Extrapolating analytically (fp32, D = {dim}), the naive L × L × D table alone fills this machine's "
              f"{fmt_bytes(memory)} at L ≈ {wall_naive:,.0f}"
              + (f" (it was already skipped as too large at L = {', '.join(map(str, skipped))})" if skipped else "")
              + f"; the skew's L × D table would need L ≈ {wall_skew:,.0f}, "
                f"but its L² · H logits (B = {batch}, H = {heads}) hit the wall at L ≈ {wall_attn:,.0f}.")
    chunk = setup["chunk"]
    common = sorted(set(measured["chunked"]) & set(measured["skew"]))
    if common:
        n = common[-1]
        ch, sk = measured["chunked"][n], measured["skew"][n]
        d_ch, d_sk = ch["delta_bytes"] or ch["peak_bytes"], sk["delta_bytes"] or sk["peak_bytes"]
        wall_chunk = wall_length(lambda x: chunked_bytes(x, chunk=chunk, batch=batch, heads=heads, dim=dim), memory)
        third = (f"Query-chunked attention (chunk = {chunk}) adds {fmt_bytes(d_ch)} at L = {n} against the skew's "
                 f"{fmt_bytes(d_sk)} ({d_sk / max(1, d_ch):.1f}× less) and takes {ch['forward_s'] * 1e3:.0f} ms "
                 f"against {sk['forward_s'] * 1e3:.0f} ms; its memory grows linearly in L (3 · chunk · L · H "
                 f"temporaries plus q, k, v and the output), so it would reach the machine's memory only at "
                 f"L ≈ {wall_chunk:,.0f}.")
    else:
        third = "The query-chunked attention was not measured next to the skew in this file."
    return [first, second, third]


# ---------------------------------------------------------------------------------------
# The page's lines about a run and its live reruns (computed from the results, so the page only prints them)


def _run_line(info: dict[str, Any], created: str, cpu_count: int) -> str:
    job_cpu = info.get("training_job_cpu_seconds")
    load = info.get("load_average_start")
    return (f"{', '.join(n.replace('_', ' ') for n in info['experiments'])}: measured {created[:10]} in "
            f"{info['wall_seconds'] / 60:.0f} min wall clock with {info['workers']} worker processes on "
            f"{cpu_count} cores" + (f" shared with other work (load average {load[0]:.1f} at "
                                    "the start)" if load else "")
            + (f"; the trainings used {job_cpu / 60:.0f} CPU-minutes, about {job_cpu / 60 / info['workers']:.0f} "
               f"min on {info['workers']} free cores" if job_cpu else ""))


def provenance(results: dict[str, Any]) -> str:
    """Where the numbers come from: versions, then one line per run that measured a section (earlier runs
    first, each with its own date), and a warning on a quick run."""
    runs = [(r, r.get("created", results["created"])) for r in results.get("earlier_runs", [])]
    runs.append((results["run"], results["created"]))
    cpu_count = results["machine"]["cpu_count"]
    return (f"relviz {results['relviz_version']}, torch {results['torch_version']} · "
            + " · ".join(_run_line(info, created, cpu_count) for info, created in runs)
            + (" · **quick run: not meaningful**" if results["quick"] else ""))


def offset_table(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Every stored offset-resolution cell as a table row: the setting's label, layers, s, the accuracy over
    the seeds (mean, min, max, std) and the most optimizer steps any seed took."""
    labels = {s["id"]: s["label"] for s in section["settings"]}
    return [{"setting": labels[r["setting"]], "layers": r["layers"], "s": r["s"], "mean": r["mean"],
             "min": r["min"], "max": r["max"], "std": r["std"], "steps": max(r["steps"])}
            for r in section["results"]]


def extrapolation_setup_sentence(setup: dict[str, Any]) -> str:
    """What the length study trains and evaluates, from its setup."""
    s = setup["task_params"]["s"]
    return (f"Every scheme is trained at L = {setup['train_length']} on shift s = {s}, then run unchanged on "
            f"sequences up to {max(setup['factors'])}× longer. The answer is still {s} token{'s' if s != 1 else ''} "
            "back; what changes is how many positions the model has never seen, and how many keys compete for attention.")


def cost_setup_sentence(setup: dict[str, Any]) -> str:
    """What the cost study measures and why each implementation's memory grows as it does, from its setup."""
    return (f"One attention forward (B = {setup['batch']}, H = {setup['heads']}, D = {setup['dim']}, fp32, causal) "
            "for each implementation, each case in a fresh process. The **naive** path gathers one embedding per "
            "(i, j): an L × L × D table. The **skew** multiplies the queries by one vector per distance (L × D) "
            "and shifts the result into place, but still holds L × L logits per head. **Query-chunked** attention "
            f"handles {setup['chunk']} queries at a time, so only chunk × L logits per head exist at once.")


def live_offset_label(setting_label: str, layers: int, seed: int, max_steps: int) -> str:
    """The legend name of a live offset-resolution rerun."""
    return (f"live: {setting_label}, {layers} layer{'s' if layers > 1 else ''}, seed {seed}, "
            f"≤ {max_steps} steps")


def live_offset_summary(rows: list[dict[str, Any]]) -> str:
    """A live offset rerun's accuracy at each s, in words."""
    return ", ".join(f"s = {r['s']}: {r['accuracy']:.0%}" for r in rows)


def live_extrapolation_summary(rows: list[dict[str, Any]]) -> str:
    """A live length rerun's accuracy at each length factor; a length it cannot run at says so."""
    return ", ".join(f"{r['factor']}×: " + ("cannot run" if r["accuracy"] is None else f"{r['accuracy']:.0%}")
                     for r in rows)


def live_cost_summary(rows: list[dict[str, Any]]) -> str:
    """A live cost measurement at each L: the reason it was skipped, or its peak-memory growth and time."""
    return ", ".join(f"L = {r['L']}: " + (r["skipped"] if r["skipped"] else
                                         f"{format_bytes(max(1, r['delta_bytes'] or r['peak_bytes']))}, "
                                         f"{r['forward_s'] * 1e3:.0f} ms") for r in rows)


def skipped_cost_summary(section: dict[str, Any]) -> str | None:
    """The cost cases the stored run did not measure, each with its reason; None when every case ran."""
    skipped = [r for r in section["rows"] if r["skipped"]]
    if not skipped:
        return None
    return "Not measured: " + "; ".join(f"{IMPLEMENTATIONS[r['impl']]} at L = {r['L']} ({r['skipped']})"
                                        for r in skipped)


# ---------------------------------------------------------------------------------------
# What the studies are, and how to read their charts (the Experiments page)

#: What the page measures, and where its numbers come from.
INTRO = ("What each scheme can and cannot do. The other pages show what each scheme *computes*; this one shows what "
         "that does to a model: small transformers trained on **shift-by-s** (output the token s places back, so the "
         "answer sits at **j − i = −s**), measured over several seeds. Every number here comes from "
         "`python -m relviz experiments`; the text under each chart is generated from those numbers.")

#: Why one layer may fail shift-by-s, and how a second one composes.
ONE_LAYER = ("A single attention layer finds \"the token s back\" only if its position term can single out the offset "
             "−s. **Shaw** has one embedding per offset up to k, then every farther key reads the same one; **T5** "
             "gives each offset a bucket, and far offsets share one. A second layer can compose: copy a token one "
             "step, then look a few steps further back.")

#: How to read the offset-resolution chart and the strip under it.
OFFSET_CHART = ("Solid: 1 layer, dashed: 2 layers; the band spans the seeds (min–max). The strip below the chart shares "
                "its s axis: each bar is a group of offsets that **one layer sees as the same position** (a T5 bucket, "
                "or Shaw's clipped tail). Dotted lines mark the same edges on the chart.")

#: Shaw et al.'s ablation beside the offset study.
SHAW_REFERENCE = ("**Published reference.** Shaw et al. found translation quality flat from k = 2 on (their Table 2, "
                  "below): with 6 layers composing, a small k loses nothing there. One layer on shift-by-s is where the "
                  "clipping shows.")

#: What the table of stored cells holds.
STORED_CELLS = ("Every stored cell: accuracy over the seeds, and the most optimizer steps any seed took (early stopping "
                "ends a run once its training loss stays near zero).")

#: Why the study trains one model per s.
ONE_MODEL_PER_S = ("Why one model per s, not one model told s in its input: a single layer of T5, ALiBi or an absolute "
                   "scheme cannot choose *which* offset to attend to from the input (their position terms do not "
                   "depend on the query), so that design would measure this limitation instead of resolution.")

#: How to read the extrapolation chart.
EXTRAPOLATION_CHART = ("Lines: mean over seeds, band: min–max. **✕** at the bottom: the model **cannot run** at that "
                       "length (hover for the reason) — recorded, not crashed.")

#: Why ALiBi's published extrapolation does not carry over to shift-by-s.
ALIBI_ON_SHIFT = ("That result is language modelling, where recent tokens matter most. Shift-by-s asks for attention "
                  "peaked at one exact offset, which a penalty growing with distance does not give by itself: compare "
                  "ALiBi's row in section 1. The shipped ALiBi checkpoint (Live attention) needed 6 layers to reach "
                  "99.6% at s = 5; with 2 it stalls near 72%.")


def cost_chart_caption(memory_total_bytes: float) -> str:
    """How to read the memory chart: measured diamonds, analytic lines, and this machine's memory."""
    return ("Diamonds: measured Δpeak (peak resident memory minus the peak before the forward). Lines: the analytic "
            "size of each structure, fp32; dashed and shaded beyond the longest measured L, where they are "
            "extrapolated, not measured. The black line is this machine's memory "
            f"({format_bytes(memory_total_bytes)}).")
