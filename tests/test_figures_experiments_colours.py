"""Experiments' colours: distinct within a chart, and one setting keeps its colour across charts."""
from __future__ import annotations

import json
from pathlib import Path

from relviz.figures.experiments import setting_colours

RESULTS = Path(__file__).resolve().parents[1] / "relviz" / "experiments_results.json"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[k:k + 2], 16) for k in (1, 3, 5))


def _far(a: str, b: str) -> bool:
    return sum(abs(x - y) for x, y in zip(_rgb(a), _rgb(b))) > 90


def test_colours_are_distinct_in_each_chart_and_shared_across_charts():
    sections = json.loads(RESULTS.read_text())["experiments"]
    offset = setting_colours(sections["offset_resolution"]["settings"])
    extrapolation = setting_colours(sections["length_extrapolation"]["settings"])
    for colours in (offset, extrapolation):
        values = list(colours.values())
        for a in range(len(values)):
            for b in range(a + 1, len(values)):
                assert _far(values[a], values[b]), (values[a], values[b])
    # the collisions the issue saw: Shaw k = 16 vs sinusoidal (across charts), sinusoidal vs skew
    assert _far(offset["shaw-k16"], extrapolation["sinusoidal"])
    assert _far(extrapolation["sinusoidal"], extrapolation["skew"])
    # the same scheme and parameters keep their colour from one chart to the next
    assert offset["sinusoidal"] == extrapolation["sinusoidal"]
    assert offset["t5-32-128"] == extrapolation["t5"] and offset["alibi"] == extrapolation["alibi"]
    # two variants of one scheme in one chart get two shades of its colour
    assert _far(offset["shaw-k4"], offset["shaw-k16"]) and _far(offset["t5-32-128"], offset["t5-8-32"])
