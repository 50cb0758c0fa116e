"""Fit, then explain: the smallest set of differences that reproduces a position matrix exactly.

A list of known mistakes misses most real ones, which are a known setting or step done differently
(max_distance not passed on, a clamp left out, the log in bfloat16) or two of them at once. This search
composes them: the kind's settings (derived from the upload's values, not a grid), one step of its formula
computed differently, and the transformations real bugs apply (the sign of j − i flipped, which for a
Toeplitz matrix is also its transpose; positions off by one, i.e. another q_offset; values off by a
constant or scaled). A hypothesis is kept only when it reproduces every compared cell; the one with the
fewest differences from the given settings is the cause. Nothing here guesses: each hypothesis is computed.

Each kind says what can differ in a ``Space`` (relviz.check.matrix_spaces); this engine never names a kind.
Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from relviz._words import minus
from relviz.check.difference import describe
from relviz.check.matrix import _searched, compare, spec_of
from relviz.check.result import ATOL, RTOL, Cause, CheckResult, partial_worth_showing, reproduction

if TYPE_CHECKING:
    from relviz.check.matrix import Settings

#: Most hypotheses one search evaluates (each on one value per offset: at most q_len + k_len − 1 cells).
MAX_HYPOTHESES = 40_000


@dataclass(frozen=True)
class FormulaStep:
    """One step of a kind's formula done differently (``name`` ""): the reference itself).

    ``per_offset(n, settings)``: the values at offsets n = j − (q_offset + i) (None: no such step there)."""

    name: str
    text: str
    per_offset: Callable[[np.ndarray, "Settings"], "np.ndarray | None"]
    harmless: bool = False
    #: What the kind's settings derivation needs to know of the step (e.g. T5: {"clamp": False})
    options: Mapping[str, object] = field(default_factory=dict)
    #: A sentence computed for the upload's offsets (a precision step: how large the error, where offsets collapse)
    note: Callable[[np.ndarray, "Settings"], str] | None = None


@dataclass(frozen=True)
class Space:
    """What can differ in a kind's matrix, for the search.

    ``steps[0]`` is the reference; ``settings(n, values, given, step)`` derives the settings worth trying
    from the upload's values at offsets n (after a known anchor's shift is removed); ``anchor``: the value
    every setting gives at n = 0 (None: it depends on the settings); ``shift``: values may be off by a
    constant (an index); ``scales``: factors a bias may be multiplied by (1 first); ``flip``: the sign of
    j − i may be flipped; ``why``: per setting, why code ends up with another value.
    """

    steps: tuple[FormulaStep, ...]
    settings: Callable[[np.ndarray, np.ndarray, "Settings", FormulaStep], Iterable["Settings"]]
    anchor: float | None = 0.0
    shift: bool = False
    scales: tuple[float, ...] = (1.0,)
    flip: bool = True
    why: Mapping[str, str] = field(default_factory=dict)
    searched: tuple[str, ...] = ()


SIGN_PHRASE = "sign flipped: i − j instead of j − i"
SCALE_PHRASES = {-1.0: "bias sign flipped (+ instead of −)", 2.0: "bias added twice",
                 -2.0: "bias sign flipped and added twice"}


@dataclass(frozen=True)
class Hypothesis:
    """Settings, one step, and the transformations that together reproduce the upload."""

    settings: "Settings"
    step: FormulaStep
    flipped: bool = False
    shift: float = 0.0
    scale: float = 1.0

    def cost(self, given: "Settings | None", base: "Settings", names: tuple[str, ...]) -> tuple[int, int, int]:
        """(differences from ``given``, of them value shifts or scales, of them settings): fewer is a better
        explanation; at a tie a step of the formula beats another setting's value, which beats a bare shift
        (a short upload leaves a setting such as max_distance free over a range, where one step is specific).
        ``given`` None: the settings were searched, so a setting other than the search's ``base`` costs nothing."""
        settings = len(self.differences(base, names)) - len(self.differences(base, names, settings=False))
        count = len(self.differences(given, names)) if given is not None \
            else len(self.differences(base, names)) - settings
        return count, int(bool(self.shift)) + int(self.scale != 1.0), settings if given is not None else 0

    def differences(self, given: "Settings | None", names: tuple[str, ...], *, settings: bool = True) -> list[str]:
        """The differences from ``given`` as short phrases (given None, or ``settings`` False: only steps and
        transformations)."""
        out: list[str] = []
        if given is not None and settings:
            for name in names:
                new, old = getattr(self.settings, name), getattr(given, name)
                if new != old:
                    out.append(f"{name} = {new}, not {old}")
            delta = self.settings.q_offset - given.q_offset
            if delta:
                out.append(f"positions off by {minus(delta, '+d')} (q_offset = {self.settings.q_offset}, "
                           f"not {given.q_offset})")
        if self.step.name:
            out.append(self.step.name)
        if self.flipped:
            out.append(SIGN_PHRASE)
        if self.shift:
            out.append(f"values off by {minus(self.shift, '+g')}")
        if self.scale != 1.0:
            out.append(SCALE_PHRASES.get(self.scale, f"values × {self.scale:g}"))
        return out

    def cause(self, given: "Settings", names: tuple[str, ...], space: Space, description: str,
              share: float = 1.0, searched: bool = False, offsets: np.ndarray | None = None) -> Cause:
        """The hypothesis as a cause, its settings compared with ``given`` (``share`` < 1: a partial fit, which
        says so and is never the cause; ``searched``: the user gave no settings, so no setting was "not passed
        on"; ``offsets``: the upload's j − i, for a step's computed note)."""
        phrases = self.differences(given, names) or ["the settings found"]
        name = " + ".join(phrases)
        if share < 1.0:
            parts = [f"relviz's {description} with " + "; ".join(phrases) + f" reproduces {share:.1%} of the "
                     "compared cells, not all of them: it is the closest computed fit, not the cause."]
        else:
            parts = [f"Your matrix is relviz's {description} with " + "; ".join(phrases)
                     + ": that reproduces every compared cell."]
        if not searched:
            for setting in names:
                if getattr(self.settings, setting) != getattr(given, setting) and setting in space.why:
                    parts.append(space.why[setting])
            if self.settings.q_offset != given.q_offset:
                parts.append("One position range starts elsewhere (e.g. counted from 1, or a cache offset added "
                             "on one side only): query i sits at key position i + q_offset.")
        if self.step.name:
            parts.append(self.step.text)
            if self.step.note is not None and offsets is not None:
                n = np.asarray(offsets) - self.settings.q_offset
                parts.append(self.step.note(-n if self.flipped else n, self.settings))
        if self.flipped:
            parts.append("Your code computes query − key; relviz, T5 and Shaw et al. use key − query (j − i). "
                         "For a matrix that depends on j − i only, the transpose gives the same picture.")
        if self.shift:
            parts.append(f"Every value is {minus(self.shift, '+g')} from the formula's: an index shifted somewhere.")
        if self.scale != 1.0:
            parts.append(f"Every value is {self.scale:g} times the formula's.")
        harmless = self.step.harmless and len(phrases) == 1
        return Cause(name, " ".join(parts), harmless, share)

    def build(self, shape: tuple[int, int]) -> np.ndarray:
        """[q_len, k_len]: the whole matrix this hypothesis gives (its step per offset, flipped, scaled, shifted)."""
        from relviz.check.matrix import Grid  # the engine's grid (matrix imports this module's users)

        def per_offset(n: np.ndarray) -> np.ndarray:
            built = self.step.per_offset(-n if self.flipped else n, self.settings)
            return self.scale * np.asarray(built, dtype=np.float64) + self.shift

        return Grid(*shape).toeplitz(per_offset, self.settings.q_offset)

    def proven(self, cause: Cause, got: np.ndarray) -> Cause:
        """``cause`` with its proof: the whole matrix rebuilt from this hypothesis, for any verifier to compare."""
        return replace(cause, reproduce=reproduction(lambda: self.build(got.shape), got))


def diagonals(got: np.ndarray, compared: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(offset j − i, its value, its number of compared cells, whether every compared cell of a diagonal agrees)
    per diagonal with a compared cell. Where two compared cells of one diagonal differ (the upload is not a
    function of j − i there), the value is the diagonal's most common one: hypotheses fitted to those can only
    be partial fits."""
    q_len, k_len = got.shape
    a, b = got[1:, 1:], got[:-1, :-1]
    both = compared[1:, 1:] & compared[:-1, :-1]
    if got.dtype.kind in "iu":
        same = a == b                                                          # indices: exact, and 5x faster
    else:
        with np.errstate(invalid="ignore"):
            same = np.isclose(a, b, rtol=3 * RTOL, atol=3 * ATOL) | (a == b)
    toeplitz = bool((same | ~both).all())
    d = (np.arange(k_len)[None, :] - np.arange(q_len)[:, None])                    # [q, k] j − i
    index = (d + q_len - 1)[compared]
    values = np.full(q_len + k_len - 1, np.nan)
    values[index] = got[compared]
    counts = np.bincount(index, minlength=q_len + k_len - 1)
    if not toeplitz:
        for diagonal in range(q_len + k_len - 1):
            cells = got.diagonal(diagonal - (q_len - 1))[compared.diagonal(diagonal - (q_len - 1))]
            if cells.size:
                found, times = np.unique(cells, return_counts=True)
                values[diagonal] = found[times.argmax()]
    present = counts > 0
    offsets = np.arange(-(q_len - 1), k_len)
    return offsets[present], values[present], counts[present], toeplitz


def _share(got: np.ndarray, compared: np.ndarray, offsets: np.ndarray, candidate: np.ndarray) -> float:
    """The share of the compared cells equal to ``candidate`` (one value per offset in ``offsets``)."""
    q_len, k_len = got.shape
    full = np.full(q_len + k_len - 1, np.nan)
    full[offsets + q_len - 1] = candidate
    index = (np.arange(k_len)[None, :] - np.arange(q_len)[:, None] + q_len - 1)[compared]
    return float(_agree(full[index], got[compared]).mean())


def _exact(got: np.ndarray, compared: np.ndarray, offsets: np.ndarray, candidate: np.ndarray) -> bool:
    """Whether ``candidate`` (one value per offset) equals every compared cell of ``got``."""
    return _share(got, compared, offsets, candidate) == 1.0


def _agree(built: np.ndarray, values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isclose(built, values, rtol=RTOL, atol=ATOL) | (built == values)


@dataclass
class Found:
    """The search's result: the exact hypotheses of fewest differences, and the closest partial one."""

    exact: list[tuple[tuple[int, int, int], Hypothesis]] = field(default_factory=list)
    partial: tuple[float, Hypothesis] | None = None
    evaluated: int = 0

    @property
    def best(self) -> list[Hypothesis]:
        if not self.exact:
            return []
        low = min(cost for cost, _ in self.exact)
        return [h for cost, h in self.exact if cost == low]


def search(space: Space, names: tuple[str, ...], got: np.ndarray, compared: np.ndarray, base: "Settings",
           given: "Settings | None", q_offsets: Iterable[int]) -> Found:
    """Every hypothesis the space allows at the given query offsets that reproduces ``got`` on every compared
    cell, with its number of differences from ``given`` (None: settings free); the closest partial one by the
    share of compared cells it reproduces."""
    found = Found()
    offsets, values, counts, toeplitz = diagonals(np.asarray(got), compared)
    got = np.asarray(got, dtype=np.float64)
    total = float(counts.sum())
    for q_offset in dict.fromkeys(q_offsets):
        n = offsets - q_offset
        for flipped in ((False, True) if space.flip else (False,)):
            m = -n if flipped else n
            anchor_shift = 0.0
            if space.shift and space.anchor is not None and (m == 0).any():
                anchor_shift = float(values[m == 0][0]) - space.anchor
            for step in space.steps:
                for s in space.settings(m, values - anchor_shift, replace(base, q_offset=q_offset), step):
                    if found.evaluated >= MAX_HYPOTHESES:
                        return found
                    found.evaluated += 1
                    built = step.per_offset(m, s)
                    if built is None:
                        continue
                    built = np.asarray(built, dtype=np.float64)
                    for scale in space.scales:
                        shift = 0.0
                        candidate = scale * built
                        if space.shift:
                            shift = float(values[0] - candidate[0])
                            candidate = candidate + shift
                        agree = _agree(candidate, values)
                        h = Hypothesis(replace(s, q_offset=q_offset), step, flipped, shift, scale)
                        if agree.all():
                            # one value per diagonal agrees; the hypothesis is exact only if every compared cell
                            # does (a diagonal's cells may differ by less than the Toeplitz test's tolerance, yet
                            # one of them by more than the comparison's from the hypothesis)
                            share = 1.0 if toeplitz and _exact(got, compared, offsets, candidate) \
                                else _share(got, compared, offsets, candidate)
                            if share == 1.0:
                                found.exact.append((h.cost(given, base, names), h))
                            elif found.partial is None or share > found.partial[0]:
                                found.partial = (share, h)
                        else:
                            share = float(counts[agree].sum()) / total
                            if found.partial is None or share > found.partial[0]:
                                found.partial = (share, h)
    return found


def fewest(causes: Iterable[Cause]) -> tuple[Cause, ...]:
    """The causes, less each one whose differences hold every difference of another and more: with the settings
    searched, 'max_distance = 200, not 128 + sign flipped' reproduces a 16 × 16 map exactly when 'sign flipped'
    alone does (the extra setting changes nothing at its offsets), and adds nothing but noise to the list."""
    causes = list(causes)
    parts = [frozenset(c.name.split(" + ")) for c in causes]
    return tuple(c for c, mine in zip(causes, parts) if not any(other < mine for other in parts))


def explain(result: CheckResult, given: "Settings | None") -> CheckResult:
    """Fit, then explain: the smallest set of differences from ``given`` (None: the
    settings were searched) that reproduces every compared cell becomes the cause; else the closest partial
    fit, with the share of compared cells it reproduces, and the difference described by its structure."""
    from relviz.check.matrix_spaces import SPACES  # here: matrix_spaces (whole_spaces through it) imports this
    from relviz.check.whole_spaces import explain_whole  # module for Space and FormulaStep

    if result.ok:
        return result
    spec = spec_of(result.kind)
    whole = explain_whole(result, given, spec.description)   # the kinds that are not a function of j − i
    if whole is not None:
        return whole if whole.causes else replace(whole, difference=describe(whole))
    space = SPACES.get(spec.name)
    got = np.asarray(result.got)
    if space is not None and got.ndim == 2:
        q_len, k_len = got.shape
        span = np.arange(-(q_len - 1), k_len)                                                    # every j − i
        base = result.settings
        offsets = [base.q_offset, base.q_offset + 1, base.q_offset - 1, 0, k_len - q_len]
        found = search(space, tuple(n for n in spec.settings if n not in ("q_offset", "causal")), got,
                       result.compared, base, given, offsets)
        best = found.best
        names = tuple(n for n in spec.settings if n not in ("q_offset", "causal"))
        if result.causes:  # named mistakes fit: add the search's own named ones that fit as well (same names)
            searched = _searched(spec)
            extra = [h.proven(h.cause(base, names, space, spec.description, searched=given is None, offsets=span), got)
                     for h in best]
            extra = [c for c in extra if c.name in searched and c.name not in [k.name for k in result.causes]]
            return replace(result, causes=fewest(result.causes + tuple(extra)))
        if best and given is None and best[0].cost(given, base, names)[0] == 0:
            return compare(result.kind, got, best[0].settings, fitted=True)  # settings beyond the fit's grid
        if best and given is None and best[0].settings != base:
            # settings were searched: report the hypothesis's own settings, and its step alone as the cause
            base = best[0].settings
            result = compare(result.kind, got, base, fitted=True)
            if result.causes:
                return result
        if best:
            causes = []
            for h in best:
                cause = h.proven(h.cause(base, names, space, spec.description, searched=given is None, offsets=span),
                                 got)
                if cause.name and cause.name not in [c.name for c in causes]:
                    causes.append(cause)
            if causes:
                return replace(result, causes=fewest(causes)[:8], closest=None)
        if found.partial is not None:
            share, h = found.partial
            reference_share = 1.0 - result.mismatches / max(1, result.cells)
            if partial_worth_showing(share, reference_share) and (result.closest is None or share > result.closest.explains):
                result = replace(result, closest=h.cause(base, names, space, spec.description, share,
                                                         searched=given is None))
    return result if result.causes else replace(result, difference=describe(result))
