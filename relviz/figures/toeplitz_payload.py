"""Plotly's arrays of a Toeplitz figure in the smallest JSON that holds them exactly.

Every hover field of a Toeplitz matrix is a function of the offset, but plotly wants one value per
cell. Hover data travel in the smallest encoding that holds them exactly, chosen by measuring the
encoded size (plotly escapes every "/" of its base64, so small negative integers cost far more than
their byte count); the colour values travel unshifted where that costs nothing.
"""
from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from relviz._words import minus


def _b64_json_chars(array: np.ndarray) -> int:
    """Characters the array's base64 takes in plotly's JSON (each "/" is escaped as \\u002f)."""
    data = base64.b64encode(np.ascontiguousarray(array).tobytes())
    return len(data) + 5 * data.count(b"/")


def exact_dtypes(values: list[np.ndarray]) -> list[np.dtype]:
    """The dtypes plotly decodes that hold every value exactly (integers up to 16 bits, float32)."""
    if not all(np.issubdtype(v.dtype, np.integer) for v in values):
        return [np.dtype(np.float32)]
    lo = min(int(v.min()) for v in values)
    hi = max(int(v.max()) for v in values)
    fits = [np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16)
            if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max]
    return fits + [np.dtype(np.float32) if max(-lo, hi) < 2**24 else np.dtype(np.float64)]


@dataclass(frozen=True)
class Encoded:
    array: np.ndarray | None
    order: tuple[str, ...]  # labels in storage order (a zero pad is not listed)
    chars: int


def encode_fields(cells: list[tuple[str, np.ndarray]]) -> Encoded:
    """The customdata array of minimum JSON size: dtype, field order and an optional zero pad.

    A zero pad makes a cell's record 6 bytes for two int16 fields, which puts the high byte of
    the first field where base64 rarely turns it into an escaped "/".
    """
    if not cells:
        return Encoded(None, (), 0)
    labels = [label for label, _ in cells]
    values = [v for _, v in cells]
    shape = values[0].shape
    rows = shape[0]
    sample = slice(None, None, max(1, rows // 32))  # cost ranking on every ~32nd row
    best: tuple[int, np.dtype, tuple[int, ...]] | None = None
    for dtype in exact_dtypes(values):
        pads = (0, 1) if dtype.itemsize == 2 and len(cells) == 2 else (0,)
        for pad in pads:
            for perm in itertools.permutations(range(len(cells) + pad)):
                stacked = np.stack([values[p][sample] if p < len(cells) else np.zeros_like(values[0][sample])
                                    for p in perm], axis=-1).astype(dtype)
                cost = _b64_json_chars(stacked)
                if best is None or cost < best[0]:
                    best = (cost, dtype, perm)
    _, dtype, perm = best
    array = np.stack([values[p] if p < len(cells) else np.zeros(shape, dtype=values[0].dtype) for p in perm],
                     axis=-1).astype(dtype)
    order = tuple(labels[p] if p < len(cells) else "" for p in perm)
    return Encoded(array, order, _b64_json_chars(array) + 40)


def unshifted_z(trace: go.Heatmap, values: np.ndarray, discrete_range: tuple[int, int] | None) -> bool:
    """Make %{z} show the true value when that costs no payload; True if it does.

    matrix_heatmap sends discrete values shifted to start at 0. When the values fit one
    signed byte they can travel unshifted (same size) with the colour range shifted instead.
    Integer values on a continuous scale travel in the cheaper of int16 and float32.
    """
    if discrete_range is None:
        if np.issubdtype(values.dtype, np.integer) and values.size and \
                -2**15 <= int(values.min()) and int(values.max()) < 2**15:
            small = values.astype(np.int16)
            if _b64_json_chars(small) < _b64_json_chars(values.astype(np.float32)):
                trace.z = small
        return True
    lo, hi = discrete_range
    if lo == 0:
        return True
    if -128 <= lo and hi <= 127:
        trace.z = values.astype(np.int8)
        trace.zmin, trace.zmax = lo - 0.5, hi + 0.5
        bar = trace.colorbar
        step = bar.tickvals[1] - bar.tickvals[0] if len(bar.tickvals) > 1 else 1
        ticks = [v for v in range(lo, hi + 1) if v % step == 0]  # round numbers of the true values
        bar.tickvals, bar.ticktext = ticks, [minus(v) for v in ticks]
        return True
    return False
