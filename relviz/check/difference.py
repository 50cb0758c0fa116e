"""When nothing relviz computes reproduces an upload: the difference described by its structure.

Which rows, columns, offsets (j − i) or frequency pairs differ, and how: a constant shift, a scale, the
same values in another order (a permutation), or none of these. Words about where and how, never a cause.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from relviz._words import minus, runs
from relviz.check.registry import kind_of

#: Most ranges a list of indices shows before "… (n in all)".
MAX_RANGES = 6


def ranges(indices: np.ndarray) -> str:
    """Sorted integers as "3, 17–19, 40" (at most MAX_RANGES groups shown)."""
    values = sorted({int(v) for v in indices})
    groups = runs(values)

    words = [minus(a) if a == b else (f"{minus(a)}, {minus(b)}" if b == a + 1 else f"{minus(a)} to {minus(b)}")
             for a, b in groups[:MAX_RANGES]]
    text = ", ".join(words)
    return text + (f", … ({len(values)} in all)" if len(groups) > MAX_RANGES else "")


def _how(expected: np.ndarray, got: np.ndarray) -> str:
    """How the differing values relate to the reference's (both finite)."""
    if expected.size == 0:
        return "the differing cells are −inf on one side only"
    delta = got - expected
    if np.allclose(delta, delta[0], rtol=1e-9, atol=1e-12):
        return f"each is off by {minus(delta[0], '+.6g')} (a constant shift)"
    nonzero = expected != 0
    if nonzero.all():
        ratio = got / expected
        if np.allclose(ratio, ratio[0], rtol=1e-6, atol=0):
            return f"each is {ratio[0]:.6g} times the reference (a scale)"
    if np.allclose(np.sort(got), np.sort(expected), rtol=1e-9, atol=1e-12):
        return "they hold the reference's values in another order (a permutation)"
    return (f"no constant shift, scale or permutation relates them (largest difference "
            f"{np.abs(delta).max():.3g})")


def describe(result: Any) -> str:
    """Where and how ``result`` (a CheckResult with mismatches) differs, in a sentence or two."""
    mismatch = np.asarray(result.mismatch)
    if not mismatch.any():
        return ""
    count, cells = int(mismatch.sum()), max(1, int(np.asarray(result.compared).sum()))
    expected = np.asarray(result.expected, dtype=np.float64)
    got = np.asarray(result.got, dtype=np.float64)
    text = f"The difference: {count} of {cells} compared cells ({count / cells:.1%})"
    if mismatch.ndim == 1 or min(mismatch.shape) == 1:
        text += f", at {'index' if count == 1 else 'indices'} {ranges(np.flatnonzero(mismatch.ravel()))}"
    else:
        row, column, third = kind_of(result.kind).labels
        rows, cols = np.flatnonzero(mismatch.any(axis=1)), np.flatnonzero(mismatch.any(axis=0))
        where = []
        if len(rows) < mismatch.shape[0]:
            every = mismatch[rows].sum() == np.asarray(result.compared)[rows].sum()
            where.append(f"{'every compared cell of ' if every else ''}{row} = {ranges(rows)}")
        if len(cols) < mismatch.shape[1]:
            where.append(f"{column} = {ranges(cols)}")
        labels = result.third if result.third is not None else (
            np.arange(mismatch.shape[1])[None, :] - np.arange(mismatch.shape[0])[:, None]
            - getattr(result.settings, "q_offset", 0))
        labels = np.broadcast_to(labels, mismatch.shape)
        differing = np.unique(labels[mismatch])
        compared = np.asarray(result.compared)
        systematic = all(mismatch[(labels == v) & compared].all() for v in differing[:64])
        if len(differing) < len(np.unique(labels[compared])) and systematic:
            where.append(f"every cell at {third} {ranges(differing)}")
        text += (", only where " + " and ".join(where)) if where else ", spread over every row and column"
    finite = mismatch & np.isfinite(expected) & np.isfinite(got)
    return text + "; " + _how(expected[finite], got[finite]) + "."
