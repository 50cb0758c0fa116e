"""What one script run of the server costs, for ``python -m relviz bench --only class`` (off unless asked).

Exists so that the class benchmark can say where a page's first run and a slider move spend the server's
CPU (the page's own work, figure building, serialisation, Streamlit's work, imports) inside the real server
process, which no outside profiler here can see. It does nothing unless the server was started with
``RELVIZ_RUN_PROFILE`` naming a folder (the benchmark starts its own servers so; a deployment never sets
it); then app.py's ``begin``/``end`` around each run append one JSON line per run to
``<folder>/runs-<pid>.jsonl``: the page and the CPU seconds of app.py's body (``time.thread_time``). With
``RELVIZ_RUN_PROFILE_SAMPLE=1`` a sampler thread also takes every working thread's stack each millisecond and
counts it in one category (:func:`category`) in ``<folder>/samples-<pid>.json``; the benchmark reads the counts
before and after each visit. Sampling slows the server, so it runs on a server of its own.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ENV_FOLDER", "ENV_SAMPLE", "CATEGORIES", "RunProfile", "begin", "end", "category"]

#: The folder the runs are written to (unset: the module does nothing).
ENV_FOLDER = "RELVIZ_RUN_PROFILE"
#: "1": also sample the script thread's stack (a profile server; its CPU figures are not the plain ones).
ENV_SAMPLE = "RELVIZ_RUN_PROFILE_SAMPLE"
#: The categories a sample falls in, in the order a report lists them.
CATEGORIES = ("import", "serialisation", "figure building", "streamlit", "script")
SAMPLE_EVERY_S = 0.001

_REPO = str(Path(__file__).resolve().parents[2])
_STREAMLIT = f"{os.sep}streamlit{os.sep}"
_PLOTLY = (f"{os.sep}plotly{os.sep}", f"plotly_utils{os.sep}")  # plotly and its helper package, by path
#: Functions that turn a figure or a message into bytes (plotly's JSON, the json module, protobuf).
_SERIALISE = {"to_json", "to_json_plotly", "to_plotly_json", "to_dict", "encode", "iterencode", "dumps",
              "SerializeToString", "clean_to_json_compatible", "to_typed_array_spec", "_serialize"}


def category(frames: list[tuple[str, str]]) -> str:
    """The category of one sample, given its stack as (file, function) pairs from the innermost frame out.

    import: under an import; serialisation: under plotly's or json's encoding or a protobuf serialisation;
    figure building: under relviz.figures or plotly's figure classes (not serialising); then the innermost
    frame that is Streamlit's or relviz's own decides (numpy, torch and the standard library count for their
    caller): streamlit, or script (the page and the relviz library)."""
    if any(name.startswith("<frozen importlib") for name, _ in frames):
        return "import"
    if any(function in _SERIALISE and (any(p in name for p in _PLOTLY) or _STREAMLIT in name
                                        or name.endswith(f"json{os.sep}encoder.py")
                                        or name.endswith(f"json{os.sep}__init__.py"))
           for name, function in frames):
        return "serialisation"
    if any(f"relviz{os.sep}figures{os.sep}" in name or any(p in name for p in _PLOTLY) for name, _ in frames):
        return "figure building"
    for name, _ in frames:
        if _STREAMLIT in name:
            return "streamlit"
        if name.startswith(_REPO):
            return "script"
    return "streamlit"   # no frame of either: Streamlit's script runner around the run


@dataclass
class RunProfile:
    """One run being measured: its thread's CPU clock, the wall clock and the collector's total at the start."""

    started_cpu: float
    started_wall: float
    started_gc: float = 0.0


#: Seconds the cyclic garbage collector ran in this process so far (any thread), and collections per generation.
_GC = {"seconds": 0.0, "started": 0.0, "collections": [0, 0, 0]}


def _gc_clock(phase: str, info: dict) -> None:
    """gc.callbacks: time each collection (the collector runs in the thread whose allocation triggered it)."""
    if phase == "start":
        _GC["started"] = time.perf_counter()
    else:
        _GC["seconds"] += time.perf_counter() - _GC["started"]
        _GC["collections"][info.get("generation", 2)] += 1


#: (file, function) of a thread's innermost Python frame while it waits (not counted as work).
_IDLE = {("threading.py", "wait"), ("selectors.py", "select"), ("queue.py", "get"),
         ("threading.py", "_wait_for_tstate_lock"),
         ("base_events.py", "_run_once"), ("threading.py", "join"), ("concurrent/futures/thread.py", "_worker"),
         ("thread.py", "_worker"), ("polling_path_watcher.py", "task")}
_SAMPLER: list[threading.Thread] = []
_LOCK = threading.Lock()


def _idle(stack: list[tuple[str, str]]) -> bool:
    name, function = stack[0]
    return any(name.endswith(file) and function == func for file, func in _IDLE)


def _sample_process(folder: Path) -> None:
    """Every millisecond, each working thread's stack (not this one's) into its category; the counts so far
    written to ``samples-<pid>.json`` every 0.2 s (the benchmark reads them before and after each visit)."""
    own = threading.get_ident()
    counts: Counter = Counter()
    functions: Counter = Counter()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"samples-{os.getpid()}.json"
    written = time.monotonic()
    while True:
        time.sleep(SAMPLE_EVERY_S)
        for ident, frame in sys._current_frames().items():  # the standard library's stack snapshot (CPython)
            if ident == own:
                continue
            stack = []
            while frame is not None:
                stack.append((frame.f_code.co_filename, frame.f_code.co_name))
                frame = frame.f_back
            if not stack or _idle(stack):
                continue
            kind = category(stack)
            counts[kind] += 1
            mine = next(((n, f) for n, f in stack if n.startswith(_REPO) or _STREAMLIT in n
                         or any(p in n for p in _PLOTLY)), stack[0])
            functions[f"{kind}: {_short(mine[0])}:{mine[1]} < {_short(stack[0][0])}:{stack[0][1]}"] += 1
        if time.monotonic() - written > 0.2:
            written = time.monotonic()
            partial = target.with_suffix(".tmp")
            partial.write_text(json.dumps({"counts": counts, "functions": dict(functions.most_common(400))}))
            partial.replace(target)


def _short(path: str) -> str:
    for marker in (_REPO + os.sep, f"site-packages{os.sep}", f"python3.11{os.sep}"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def begin() -> RunProfile | None:
    """At the start of app.py's run: None unless the server measures its runs (``RELVIZ_RUN_PROFILE``)."""
    if not os.environ.get(ENV_FOLDER):
        return None
    with _LOCK:
        if _gc_clock not in gc.callbacks:
            gc.callbacks.append(_gc_clock)
    if os.environ.get(ENV_SAMPLE) == "1":
        with _LOCK:
            if not _SAMPLER:
                sys.setswitchinterval(0.0005)   # the sampler gets the interpreter often enough to see short runs
                _SAMPLER.append(threading.Thread(target=_sample_process, args=(Path(os.environ[ENV_FOLDER]),),
                                                 daemon=True, name="relviz-run-sampler"))
                _SAMPLER[0].start()
    return RunProfile(time.thread_time(), time.perf_counter(), _GC["seconds"])


def end(profile: RunProfile | None, page: str) -> None:
    """At the end of app.py's run (also after an error or a page switch): one JSON line for this run."""
    if profile is None:
        return
    cpu = time.thread_time() - profile.started_cpu
    wall = time.perf_counter() - profile.started_wall
    record = {"page": page or "home", "thread_cpu_s": round(cpu, 6), "wall_s": round(wall, 6),
              "gc_s": round(_GC["seconds"] - profile.started_gc, 6), "gc_total_s": round(_GC["seconds"], 6),
              "gc_collections": list(_GC["collections"]),
              "pid": os.getpid(), "time": time.time()}
    folder = Path(os.environ[ENV_FOLDER])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"runs-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
