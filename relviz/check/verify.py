"""Checking the checker's verdicts without its search, on the seeded mistakes of relviz.check.mistakes.

The rule (docs/ARCHITECTURE.md, DESIGN.md): relviz names a cause only when it reproduces every compared cell, and
otherwise says plainly that it cannot tell. ``verify`` holds a verdict to it from the outside: "ok" must equal the
reference rebuilt at the settings the verdict reports; each named cause must carry its proof (``Cause.reproduce``),
and the whole array that proof rebuilds must equal the upload on every compared cell within the kind's tolerance; a
verdict with no cause must say that no cause is named, and a partial fit must say it is partial. ``sweep`` counts
the outcomes per kind (``python -m relviz bench --only mistakes``; a seeded subset runs in
tests/test_check_mistakes.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relviz.check.mistakes import MistakeCase, case, family_of, kinds

#: A case's outcome, when the verdict holds up.
OUTCOMES = ("ok", "named", "cannot tell", "refused")


class Wrong(AssertionError):
    """The verdict breaks the rule: 'ok' for a wrong upload, or a named cause whose proof does not reproduce it."""


def _agrees(values: np.ndarray, tol: np.ndarray, got: np.ndarray, compared: np.ndarray) -> np.ndarray:
    values, got = np.asarray(values, dtype=np.float64), np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (np.abs(values - got) <= tol) | (values == got) | ~compared


def by_name(kind: str, name: str, got: np.ndarray, settings: Any) -> list[np.ndarray]:
    """Every array relviz builds for the named mistake ``name`` of ``kind`` at ``settings`` (its own list of named
    mistakes, read by name: the words, not the search's proof); [] for a name that list does not hold (a
    composition the search names)."""
    from relviz.check.matrix import MATRIX_KINDS, _full, _grid, _shaped
    from relviz.check.rope import ROPE_KINDS
    from relviz.check.rope_causes import variants
    from relviz.check.vision import MROPE_CAUSES, ROPE2D_CAUSES, MropeSettings, Rope2DSettings

    shape = tuple(got.shape)
    if kind in MATRIX_KINDS:
        grid = _grid(kind, shape)
        out = []
        for v in MATRIX_KINDS[kind].variants:
            if v.name == name:
                built = v.candidates(grid, settings, got) if v.candidates is not None else [v.build(grid, settings)]
                out += [_shaped(np.broadcast_to(np.asarray(b), _full(grid)), shape) for b in built if b is not None]
        return out
    if kind in ROPE_KINDS:
        rows, width = shape
        return [ROPE_KINDS[kind].build(recipe, np.arange(rows), width).double().numpy()
                for cause, recipe in variants(ROPE_KINDS[kind], settings, rows) if cause.name == name]
    table = ROPE2D_CAUSES if isinstance(settings, Rope2DSettings) else MROPE_CAUSES if isinstance(
        settings, MropeSettings) else ()
    return [np.asarray(v) for n, _, build in table if n == name and (v := build(settings)) is not None]


def verify(kind: str, got: np.ndarray, result: Any) -> str:
    """The outcome (one of OUTCOMES) of ``result``, the checker's verdict on ``got``; Wrong when it breaks the rule."""
    from relviz.check.matrix import MATRIX_KINDS, fits_another_kind, reference
    from relviz.check.result import equal

    got = np.asarray(got)
    compared = np.broadcast_to(np.asarray(result.compared, dtype=bool), got.shape)
    if result.ok:
        values, tol = family_of(kind).reference(kind, result.settings, got)
        bad = ~_agrees(np.asarray(values).reshape(got.shape), np.asarray(tol).reshape(got.shape), got, compared)
        if bad.any():
            raise Wrong(f"'ok', but {int(bad.sum())} compared cells differ from the reference at {result.settings}")
        return "ok"
    if result.causes:
        for cause in result.causes:
            if cause.reproduce is None:
                raise Wrong(f"cause {cause.name!r} carries no proof")
            values, tol = cause.reproduce()
            values, tol = np.asarray(values), np.broadcast_to(np.asarray(tol, dtype=np.float64), np.shape(values))
            if values.shape != got.shape:
                raise Wrong(f"cause {cause.name!r} rebuilds shape {values.shape}, not {got.shape}")
            bad = ~_agrees(values, tol, got, compared)
            if bad.any() or cause.explains != 1.0:
                cell = tuple(int(v) for v in np.argwhere(bad)[0]) if bad.any() else None
                raise Wrong(f"cause {cause.name!r} reproduces all but {int(bad.sum())} of {int(compared.sum())} "
                            f"compared cells (first {cell}: rebuilt {values[cell] if cell else None}, got "
                            f"{got[cell] if cell else None})")
            named = by_name(kind, cause.name, got, result.settings)
            if named and not any(n.shape == got.shape and _agrees(n, tol, got, compared).all() for n in named):
                raise Wrong(f"cause {cause.name!r} is one of relviz's named mistakes, and that mistake built by its "
                            "name does not reproduce the upload (the proof and the words disagree)")
        return "named"
    if result.other_kind:
        other = fits_another_kind(kind, got)
        if other is None or other.kind != result.other_kind or kind not in MATRIX_KINDS:
            raise Wrong(f"says it is kind {result.other_kind}, which does not reproduce it")
        built = reference(other.kind, tuple(got.shape), other.settings)
        if not (equal(built, got) | ~np.broadcast_to(other.compared, got.shape)).all():
            raise Wrong(f"says it is kind {other.kind} at {other.used_settings()}, whose reference differs")
        return "named"
    if result.closest is not None and result.closest.explains >= 1.0:
        raise Wrong(f"closest fit {result.closest.name!r} claims every cell but is not named")
    if "no cause is named" not in result.verdict():
        raise Wrong(f"no cause, but the verdict does not say so: {result.verdict()}")
    return "cannot tell"


@dataclass
class Tally:
    """One kind's outcomes over a sweep, its seconds, and each WRONG case (seed, how it was made, why)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*OUTCOMES, "WRONG"), 0))
    #: verdicts whose search accepted a cause that the last gate (relviz.check.api.confirmed) took back
    gated: int = 0
    seconds: float = 0.0
    wrong: list[tuple[int, str, str]] = field(default_factory=list)


def _origin(exc: BaseException) -> str:
    """The file of the innermost frame that raised ``exc``."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename if tb is not None else ""


def _raised_by_relviz(exc: BaseException) -> bool:
    """Whether relviz raised ``exc`` itself (a refusal naming what was wrong), not a library under it."""
    return Path(_origin(exc)).resolve().is_relative_to(Path(__file__).resolve().parents[1])


def run_case(c: MistakeCase) -> tuple[str, str]:
    """(outcome, why): the check of one case and its verification (a ValueError naming a field is 'refused'); why is
    the verdict, and the note when the last gate took a cause back."""
    from relviz.check.api import GATED, check

    try:
        result = check(c.kind, c.got, c.given)
    except ValueError as exc:
        if not _raised_by_relviz(exc):   # numpy or torch refusing an operation: a crash, not a refusal
            return "WRONG", f"crashed: {type(exc).__name__} from {_origin(exc)}: {exc}"
        return "refused", str(exc)
    why = result.verdict() + (" | " + result.note if GATED in result.note else "")
    try:
        return verify(c.kind, c.got, result), why
    except Wrong as exc:
        return "WRONG", f"{exc}; verdict: {why}"


def sweep(per_kind: int, *, seed: int = 0, only: list[str] | None = None, budget_s: float | None = None,
          log: Callable[[str], None] | None = None) -> dict[str, Tally]:
    """``per_kind`` seeded cases (seeds ``seed`` …) of every registered kind (or ``only``), each checked and
    verified; with ``budget_s``, a kind stops early once its checks have taken that many seconds (at least one
    case runs), so a slow kind (a RoPE cache's settings search) does not hold the sweep."""
    from relviz.check.api import GATED

    out: dict[str, Tally] = {}
    for kind in only or kinds():
        tally = out.setdefault(kind, Tally())
        for n in range(per_kind):
            if budget_s is not None and n and tally.seconds >= budget_s:
                break
            c = case(kind, seed + n)
            start = time.perf_counter()
            outcome, why = run_case(c)
            tally.seconds += time.perf_counter() - start
            tally.counts[outcome] += 1
            tally.gated += f" | {GATED}" in why
            if outcome == "WRONG":
                tally.wrong.append((c.seed, c.recipe, why))
                if log:
                    log(f"WRONG {kind} seed {c.seed} ({c.recipe}): {why[:400]}")
    return out
