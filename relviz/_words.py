"""Counts in words: one place that puts a noun in the number its count asks for.

Pages and figures print counts that a control can bring to 1 ("1 × 1 patches, T = 1"): "1 pairs" read wrong.
"""
from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None, *, spec: str = ",") -> str:
    """``count`` formatted with ``spec`` (thousands separators by default) and ``noun``, plural unless the count
    is ±1: ``counted(1, "pair")`` is "1 pair", ``counted(4096, "patch", "patches")`` "4,096 patches",
    ``counted(1, "frame", spec="+d")`` "+1 frame"."""
    word = noun if abs(count) == 1 else (plural if plural is not None else noun + "s")
    return f"{count:{spec}} {word}"
