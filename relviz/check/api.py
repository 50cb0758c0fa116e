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
from relviz.check.result import FIRST_MISMATCHES, Cause, CheckResult, Mismatch

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
    result = kind_of(kind).check(got, settings)
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


def load(kind: str, data: bytes, *, name: str = "upload") -> np.ndarray:
    """Read an upload for ``kind`` (its side bound: a RoPE cache has more rows than a position matrix)."""
    return load_matrix(data, name=name, max_side=kind_of(kind).max_side)
