"""relviz.measure.time_calls: the count of calls measure_forward's callers fix.

No timing assertions (timings belong to ``python -m relviz bench``): what is checked is how many
calls ran and how many times came back.
"""
from __future__ import annotations

from relviz.measure import time_calls


def test_time_calls_times_exactly_the_calls_asked_for():
    """measure_forward's contract: N timed calls after the warm-up, no more (torch.utils.benchmark.Timer
    cannot promise it: relviz.measure.time_calls says why it is kept)."""
    calls = [0]

    def fn() -> None:
        calls[0] += 1
    assert len(time_calls(fn, repeats=3, warmup=2)) == 3 and calls[0] == 5
