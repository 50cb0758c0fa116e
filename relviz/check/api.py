"""The checker's entry points (``check``, ``load``, the kinds and their settings), re-exported by
:mod:`relviz.check`. Importing this module registers the kinds (relviz.check.matrix_kinds, relviz.check.rope, relviz.check.vision)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from relviz.check import matrix_kinds as _matrix_kinds  # noqa: F401  (registers the matrix kinds)
from relviz.check import rope as _rope  # noqa: F401  (registers the RoPE kinds)
from relviz.check import vision as _vision  # noqa: F401  (registers the 2-D RoPE and M-RoPE kinds)
from relviz.check.difference import describe
from relviz.check.matrix import MATRIX_KINDS, FitWork, Settings, fit, fits_another_kind, reference, variant_matrix
from relviz.check.matrix_kinds import MAX_HEADS, SEED_NOTEBOOK, SIGN  # noqa: F401  (re-exported)
from relviz.check.reading import MAX_BYTES, MAX_SIDE, load_matrix, parse_text
from relviz.check.registry import REGISTRY, Kind, kind_of
from relviz.check.result import FIRST_MISMATCHES, Cause, CheckResult, Mismatch, partial_cause, partial_worth_showing

__all__ = [
    "KINDS", "SETTINGS_OF", "check", "load", "Settings", "CheckResult", "Cause", "Mismatch",
    "reference", "variant_matrix", "load_matrix", "parse_text", "fit", "FitWork", "Kind", "kind_of",
    "MAX_BYTES", "MAX_SIDE", "MAX_HEADS", "FIRST_MISMATCHES", "SIGN", "SEED_NOTEBOOK",
]

#: What can be checked: kind -> what it holds.
KINDS: dict[str, str] = {name: kind.description for name, kind in REGISTRY.items()}
#: The settings each kind uses (what the CLI and the page ask for, and what a result reports).
SETTINGS_OF: dict[str, tuple[str, ...]] = {name: kind.settings for name, kind in REGISTRY.items()}


def check(kind: str, got: Any, settings: Any = None) -> CheckResult:
    """Compare ``got`` (an array) with relviz's reference for ``kind`` at ``settings`` (the kind's settings
    type: ``Settings`` for the position matrices, ``RopeSettings`` for RoPE (``rope_settings``, ``settings_from_config``)); None searches for them."""
    got = np.asarray(got)
    result = confirmed(kind_of(kind).check(got, settings))
    if not result.ok and not result.causes and kind in MATRIX_KINDS:
        other = fits_another_kind(kind, got)
        if other is not None:
            found = ", ".join(f"{k} = {v}" for k, v in other.used_settings().items()) or "no settings"
            text = (f"It is another kind: relviz's {kind_of(other.kind).description} for {found} matches every "
                    f"compared cell (--kind {other.kind}).")
            result = replace(result, note=(result.note + " " + text).strip(), other_kind=other.kind)
    if not result.ok and not result.causes and not result.other_kind and not result.difference:
        result = replace(result, difference=describe(result))
    return result


#: How a verdict's note begins when the last gate took a cause back (relviz.check.verify counts them).
GATED = "A computed mistake"


def _share(cause: Cause, result: CheckResult) -> float:
    """The share of ``result``'s compared cells that ``cause``'s proof reproduces (0 without a proof)."""
    if cause.reproduce is None:
        return 0.0
    values, tol = cause.reproduce()
    got = np.asarray(result.got, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != got.shape:
        return 0.0
    compared = np.broadcast_to(np.asarray(result.compared, dtype=bool), got.shape)
    with np.errstate(invalid="ignore"):
        agree = (np.abs(values - got) <= np.broadcast_to(tol, got.shape)) | (values == got)
    return float((agree & compared).sum()) / max(1, int(compared.sum()))


def confirmed(result: CheckResult) -> CheckResult:
    """The last gate of every kind: a cause stays named only if its proof (``Cause.reproduce``, the whole array it
    rebuilds) equals the upload on every cell the verdict compares. A search may accept a hypothesis on other cells
    (one value per offset, sampled rows, the compared cells of other settings); one that fails here becomes the
    closest partial fit, which says it is partial."""
    if not result.causes:
        return result
    shares = [(_share(c, result), c) for c in result.causes]
    kept = tuple(c for share, c in shares if share == 1.0)
    if len(kept) == len(shares):
        return result
    closest = result.closest
    dropped = [c.name for share, c in shares if share < 1.0]
    note = (f"{GATED} ({'; '.join(dropped)}) fit the cells the search compared but not every cell this verdict "
            "compares, so it is not named.")
    reference_share = 1.0 - result.mismatches / max(1, result.cells)
    for share, c in sorted(shares, key=lambda item: -item[0]):
        if share < 1.0 and partial_worth_showing(share, reference_share) and (closest is None
                                                                             or share > closest.explains):
            closest = partial_cause(c.name, c.explanation, c.harmless, share)
    return replace(result, causes=kept, closest=None if kept else closest, note=(result.note + " " + note).strip())


def load(kind: str, data: bytes, *, name: str = "upload") -> np.ndarray:
    """Read an upload for ``kind`` (its side bound: a RoPE cache has more rows than a position matrix)."""
    return load_matrix(data, name=name, max_side=kind_of(kind).max_side)
