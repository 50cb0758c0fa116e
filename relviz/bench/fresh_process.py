"""One bench case in a fresh Python process: ``python -m relviz.bench.fresh_process KIND SPEC``.

Why a fresh process: the fused section (relviz.bench.fused) times each function's implementations
and reads each implementation's memory peak in a process of its own, and the T5 bias section
(relviz.bench.t5bias) runs each length in one, so no case inherits another's heap, torch/dynamo
state or compiled kernels (and flex's first calls are cold-cache compiles). The kinds of case are
data (``CASES``: kind -> the module and function that run it in the child), so this module imports
no section and the sections import only it.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import relviz
from relviz.bench.report import BenchContext

#: kind -> (module, function): the function takes the JSON spec and returns a JSON-able dict.
CASES: dict[str, tuple[str, str]] = {
    "time": ("relviz.bench.fused", "run_time_case"),
    "memory": ("relviz.bench.fused", "run_memory_case"),
    "t5bias": ("relviz.bench.t5bias", "run_t5bias_case"),
}


def case_in_fresh_process(kind: str, spec: dict[str, Any], ctx: BenchContext,
                          env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    """``python -m relviz.bench.fresh_process KIND SPEC`` (one of ``CASES``) in a fresh process, with
    ``env_extra``; ``{"error": ...}`` if it fails."""
    command = [sys.executable, "-m", "relviz.bench.fresh_process", kind, json.dumps(spec)]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(relviz.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra or {})
    with tempfile.TemporaryDirectory(prefix="relviz-inductor-") as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache                  # flex's compile times are cold-cache times
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        ctx.log(f"{kind} {spec} failed: {proc.stderr.strip()[-400:]}")
        return {"error": proc.stderr.strip()[-200:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main(argv: list[str]) -> int:
    kind, spec = argv[0], json.loads(argv[1])
    module, function = CASES[kind]
    result = getattr(importlib.import_module(module), function)(spec)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
