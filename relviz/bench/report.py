"""The benchmark's framework: sections, their results and targets, and the plain-text table.

``python -m relviz bench`` (relviz.bench.sections) and its app section (relviz.bench.app) both build
on this module, so neither imports the other's internals.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Mapping
from typing import Any, Callable

from relviz.measure import proc_status, reset_peak_rss, time_calls
from relviz.memory import format_bytes

__all__ = ["Target", "Column", "SectionResult", "BenchContext", "Section", "format_table", "ms", "ratio",
           "bytes_text", "mb", "time_calls", "time_in_turns", "proc_status", "reset_peak_rss", "SAMPLE_S",
           "load_average"]


@dataclass
class Target:
    """A performance goal. passed is None when the run did not measure it (e.g. --quick)."""

    description: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "MISS", None: "n/a"}[self.passed]


@dataclass
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str] = str


@dataclass
class SectionResult:
    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "columns": [c.key for c in self.columns],
            "rows": self.rows,
            "targets": [asdict(t) | {"verdict": t.verdict} for t in self.targets],
            "notes": self.notes,
            "seconds": self.seconds,
        }


@dataclass
class BenchContext:
    quick: bool
    log: Callable[[str], None]
    #: time torch.compile(flex_attention) beside relviz (each length compiles for 5-15 s on CPU)
    flex: bool = True
    #: a section's own settings from the command line (e.g. the class section's students and seconds)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    name: str
    title: str
    run: Callable[[BenchContext], SectionResult]


def _cell(column: Column, row: dict[str, Any]) -> str:
    value = row.get(column.key)
    if value is None:
        return "—"
    return column.fmt(value)


def format_table(result: SectionResult) -> str:
    """A plain-text table, then the targets and notes."""
    headers = [c.header for c in result.columns]
    cells = [[_cell(c, row) for c in result.columns] for row in result.rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [f"== {result.title} ({result.seconds:.1f} s) ==",
             "  ".join(h.rjust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    for target in result.targets:
        lines.append(f"  [{target.verdict}] {target.description}: {target.detail}")
    for note in result.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def ratio(x: float) -> str:
    return f"{x:.1f}x"


def bytes_text(n: float) -> str:
    return format_bytes(n)


def mb(n: float) -> str:
    return f"{n / 1e6:.0f} MB"


#: Each timed sample repeats its call for at least this long (time_in_turns): the
#: sub-10 ms rows (L = 512, the T5 bias at 512) are then means over many calls, not single calls.
SAMPLE_S = 0.05


def load_average() -> str:
    """The 1-minute load average, as ``uptime`` prints it first."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def time_in_turns(calls: Mapping[str, Callable[[], Any]], rounds: int,
                  min_sample_s: float = 0.0) -> dict[str, list[float]]:
    """Wall-clock seconds per call of each call in each of ``rounds`` rounds; within a round the calls
    take turns, so a change of machine load hits every implementation alike. Call each once first.

    With ``min_sample_s``, each sample repeats its call enough times to last about that long (the count
    is fixed per call from one timed call before the rounds, so every round times the same work) and
    reports the mean: a 5 ms kernel is then not judged on five single calls, where one scheduler
    hiccup or a cold first round decides the median.

    Why by hand and not torch.utils.benchmark.Timer: Timer measures one statement from start to end,
    so two implementations timed one after the other see different loads on a shared machine (2 cores
    among five engineers here: the load average went from 4.2 to 8.7 within three minutes), and the
    ratio these sections report takes the drift; taking turns cancels it. A turn cannot be a Timer
    call either: Timer.timeit(n) first runs max(n // 100, 2) warm-up calls (three times the work of a
    one-call sample of a 1 s case), and every Timer call sets torch's thread count, after which small
    ops ran slower on a loaded machine (relviz.measure.time_calls has the figures)."""
    repeats = {name: 1 for name in calls}
    if min_sample_s > 0:
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            once = max(time.perf_counter() - start, 1e-6)
            repeats[name] = max(1, math.ceil(min_sample_s / once))
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(repeats[name]):
                call()
            times[name].append((time.perf_counter() - start) / repeats[name])
    return times
