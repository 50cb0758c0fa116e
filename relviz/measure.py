"""Measuring a call in this process: wall-clock times and the peak resident memory it adds.

The experiments' cost study (relviz.experiments.cases) and ``python -m relviz bench`` both measure
this way; the memory figures read Linux's /proc (None elsewhere).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["time_calls", "proc_status", "reset_peak_rss", "measure_forward"]


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of exactly ``repeats`` calls after ``warmup`` untimed ones.

    Why not torch.utils.benchmark.Timer (tried for issue 23): Timer cannot time a fixed number of
    single calls, which measure_forward's callers fix (the cost study's "N timed forwards", the Live
    page's two forwards under a CPU-time cap): its autoranges choose their own count after a warm-up of
    their own, and Timer.timeit(n) first runs max(n // 100, 2) extra calls. Where a count is free, Timer
    and this loop agree on a quiet machine (t5_bucket_map(128): Timer's median 0.0375 ms, this loop's
    0.0372 ms, load 0.2). On a loaded one Timer's torch.set_num_threads around each measurement (to the
    same count) was followed by slow small ops for the rest of the process: t5_bucket_map(128) 0.035 ms
    before, 8-21 ms after, in 6 of 7 fresh processes at load 4.7-6.4 (not seen at load 0.2), which
    would make the bench's figures depend on the load they were taken under more than they do."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def proc_status(key: str) -> int | None:
    """A memory figure of this process from /proc/self/status (VmRSS, VmHWM…), in bytes; None without /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def measure_forward(fn: Callable[[], torch.Tensor], repeats: int) -> dict[str, Any]:
    """Time ``fn`` (which returns the attention output) and read this process's peak memory.

    The peak counter is reset after the inputs exist, so the delta is what the forward adds.
    The first, untimed call warms up and gives the checksum that proves implementations agree.
    """
    reset = reset_peak_rss()
    baseline_rss = proc_status("VmRSS")
    baseline_hwm = proc_status("VmHWM")
    with torch.inference_mode():
        output = fn()
        checksum = [float(output.double().sum()), float(output.double().norm())]
        del output
        times = time_calls(fn, repeats=repeats, warmup=0)
    peak = proc_status("VmHWM")
    result = {"forward_s": statistics.median(times), "times_s": times, "checksum": checksum,
              "hwm_reset": reset, "baseline_bytes": baseline_hwm, "baseline_rss_bytes": baseline_rss,
              "peak_bytes": peak}
    if peak is not None and baseline_hwm is not None:
        # VmHWM is per process: another measurement in the same process (the tests run cases in
        # threads) may reset it between the two reads, and the difference came out negative (-131072
        # seen), which the readings refused. A forward adds no less than nothing.
        result["delta_bytes"] = max(0, peak - baseline_hwm)
    return result
