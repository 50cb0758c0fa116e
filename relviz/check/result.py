"""What a check returns, for every kind: the verdict, the first mismatching cells, the named cause."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from relviz.check.registry import kind_of

#: The first this-many mismatches are listed.
FIRST_MISMATCHES = 20
#: Float kinds compare with this tolerance (float32 rounding of the same formula passes;
#: bfloat16-rounded slopes, 2^−8 relative error, do not).
RTOL, ATOL = 1e-5, 1e-6


@dataclass(frozen=True)
class Mismatch:
    i: int
    j: int
    offset: int  # j − (q_offset + i) for a position matrix; the frequency pair of a RoPE column
    expected: float
    got: float


@dataclass(frozen=True)
class Cause:
    name: str
    explanation: str
    harmless: bool
    #: Fraction of the compared cells the computed mistake reproduces: 1.0 for a cause (every one); below 1
    #: for the closest partial fit, which is never named as the cause.
    explains: float
    #: The proof: ``reproduce()`` builds the whole array the named mistake gives, and the tolerance of each cell
    #: ((values, tolerance), the same shape as the upload). A verifier compares it with the upload on every
    #: compared cell (relviz.check.mistakes.verify), outside the search that accepted it.
    reproduce: Callable[[], tuple[np.ndarray, np.ndarray]] | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "explanation": self.explanation, "harmless": self.harmless,
                "explains": self.explains}

    def __reduce__(self):
        """A pickled cause (the app's st.cache_data keeps results pickled) carries its verdict without its proof:
        the proof is a closure over the upload, checked once in the process that named the cause (api.confirmed)."""
        return (Cause, (self.name, self.explanation, self.harmless, self.explains))


@dataclass(frozen=True)
class CheckResult:
    """The verdict: every compared cell, the first mismatches, and the named cause when one fits."""

    kind: str
    settings: Any
    fitted: bool
    expected: np.ndarray
    got: np.ndarray
    compared: np.ndarray = field(repr=False)  # bool, the cells that count (all, or j ≤ i where masked)
    mismatch: np.ndarray = field(repr=False)  # bool, compared cells that differ
    first: tuple[Mismatch, ...]
    #: Every named mistake that reproduces the upload on every compared cell (several can coincide
    #: on a small matrix); the first is the one reported as the likely cause.
    causes: tuple[Cause, ...]
    closest: Cause | None
    note: str = ""
    #: The third hover value of each cell where it is not j − i − q_offset (a RoPE cache: the frequency pair)
    third: np.ndarray | None = field(default=None, repr=False)
    #: Another kind whose settings search reproduces the upload exactly (a mistake of kind, not of detail)
    other_kind: str | None = None
    #: When nothing reproduces the upload: the difference described by its structure (relviz.check.difference)
    difference: str = ""

    @property
    def cause(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    @property
    def ok(self) -> bool:
        return not self.mismatch.any()

    @property
    def mismatches(self) -> int:
        return int(self.mismatch.sum())

    @property
    def cells(self) -> int:
        return int(self.compared.sum())

    def used_settings(self) -> dict[str, object]:
        return {name: getattr(self.settings, name) for name in kind_of(self.kind).settings}

    def verdict(self) -> str:
        """One sentence a person reads first."""
        what = kind_of(self.kind).description
        settings = ", ".join(f"{k} = {v}" for k, v in self.used_settings().items()) or "no settings"
        found = " (settings found by search)" if self.fitted else ""
        if self.ok:
            return f"Matches: all {self.cells} compared cells equal relviz's {what} for {settings}{found}."
        text = (f"{self.mismatches} of {self.cells} compared cells differ from relviz's {what} for "
                f"{settings}{found}.")
        if self.cause:
            text += f" Likely cause: {self.cause.name}."
            if len(self.causes) > 1:
                text += " Also consistent with: " + "; ".join(c.name for c in self.causes[1:]) + "."
        elif self.other_kind:
            text += f" It looks like another kind: {kind_of(self.other_kind).description} (see the note)."
        else:
            text += " Nothing relviz computes reproduces it exactly, so no cause is named."
            if self.closest:
                text += (f" Partial: {self.closest.name} reproduces {self.closest.explains:.1%} of the compared "
                         f"cells (the settings above {1 - self.mismatches / max(1, self.cells):.1%}): the closest "
                         "computed fit, not the cause.")
            if self.difference:
                text += " " + self.difference
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "ok": self.ok, "settings": self.used_settings(), "fitted": self.fitted,
            "shape": list(self.got.shape), "cells_compared": self.cells, "mismatches": self.mismatches,
            "first_mismatches": [asdict(m) for m in self.first],
            "cause": self.cause.to_json() if self.cause else None,
            "also_consistent_with": [c.to_json() for c in self.causes[1:]],
            "closest": self.closest.to_json() if self.closest else None,
            "other_kind": self.other_kind, "difference": self.difference, "verdict": self.verdict(),
            "note": self.note,
        }


def partial_cause(name: str, explanation: str, harmless: bool, share: float) -> Cause:
    """A computed mistake as the closest partial fit: it says how much it reproduces and that it is not the cause."""
    return Cause(name, f"Partial: this reproduces {share:.1%} of the compared cells, not all of them: the closest "
                 f"computed fit, not the cause. {explanation}", harmless, share)


def partial_worth_showing(share: float, reference_share: float) -> bool:
    """Whether a computed mistake that reproduces ``share`` of the compared cells is worth showing as the closest
    partial fit when the reference reproduces ``reference_share``: only if it reproduces at least half of the
    cells the reference gets wrong (a mistake that accounts for a sliver of them explains nothing)."""
    return share >= reference_share + 0.5 * (1.0 - reference_share) and share < 1.0


def within(values: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The tolerance ``equal(values, got)`` allows in each cell: 0 where both are integer arrays (indices compare
    exactly), else ATOL + RTOL·|got|."""
    got = np.asarray(got)
    if np.asarray(values).dtype.kind in "iu" and got.dtype.kind in "iu":
        return np.zeros(got.shape)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(got), ATOL + RTOL * np.abs(got.astype(np.float64)), 0.0)


def reproduction(build: Callable[[], np.ndarray], got: np.ndarray) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """A cause's ``reproduce`` from a function that builds its array (``equal``'s tolerance against ``got``)."""
    def reproduce() -> tuple[np.ndarray, np.ndarray]:
        values = np.asarray(build())
        return values, within(values, got)
    return reproduce


def equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cell-wise equality: exact for integers, within RTOL/ATOL for floats (−inf only equals −inf)."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return a == b
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.isclose(a, b, rtol=RTOL, atol=ATOL) | (a == b)


def number(value: np.generic) -> float:
    """A cell as a plain Python number (an int where it is whole)."""
    value = value.item()
    return value if isinstance(value, int) or not math.isfinite(value) or value != int(value) else int(value)
