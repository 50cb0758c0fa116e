"""Numbers in words: one place that puts a noun in the number its count asks for, one that groups
integers into runs ("17–19"), one that lists the numbers a sentence quotes ("0.25, 0.0625"), and one that writes
a negative number with a true minus sign ("−3", as every page and axis writes it, not a hyphen).

Pages and figures print counts that a control can bring to 1 ("1 × 1 patches, T = 1"): "1 pairs" read wrong.
"""
from __future__ import annotations

from collections.abc import Iterable


def runs(values: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted integers grouped into runs of consecutive values: ``runs([3, 17, 18, 19, 40])`` is
    [(3, 3), (17, 19), (40, 40)]. How a run is written is the caller's ("17–19", "17 to 19")."""
    groups: list[list[int]] = []
    for v in values:
        if groups and v == groups[-1][1] + 1:
            groups[-1][1] = v
        else:
            groups.append([v, v])
    return [(a, b) for a, b in groups]


def minus(value: object, spec: str = "") -> str:
    """``value`` formatted with ``spec`` (``str`` where none), its hyphens written as the minus sign U+2212:
    ``minus(-3)`` is "−3", ``minus(-10000, ",.0f")`` "−10,000"."""
    return (format(value, spec) if spec else str(value)).replace("-", "\u2212")


def signed(value: int) -> str:
    """An offset with its sign, the minus a true one: "+2", "0", "−3"."""
    return f"+{value}" if value > 0 else minus(value)


def counted(count: int, noun: str, plural: str | None = None, *, spec: str = ",") -> str:
    """``count`` formatted with ``spec`` (thousands separators by default) and ``noun``, plural unless the count
    is ±1: ``counted(1, "pair")`` is "1 pair", ``counted(4096, "patch", "patches")`` "4,096 patches",
    ``counted(1, "frame", spec="+d")`` "+1 frame"."""
    word = noun if abs(count) == 1 else (plural if plural is not None else noun + "s")
    return f"{count:{spec}} {word}"


def article(count: int) -> str:
    """"a" or "an" before ``count`` read aloud: "an 8 × 8 image", "an 11-frame video", "a 16-frame video". The
    leading group of thousands decides (8, 80, 800, 8,000 and 11, 18, 11,000 start with a vowel sound)."""
    lead = int(f"{abs(int(count)):,}".split(",")[0])
    return "an" if str(lead).startswith("8") or lead in (11, 18) else "a"


def numbers_text(values: Iterable[float], digits: int) -> str:
    """'0.25, 0.0625, …': numbers a sentence quotes, to ``digits`` significant digits."""
    return ", ".join(f"{x:.{digits}g}" for x in values)
