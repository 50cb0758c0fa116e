"""scripts/gpu_check.sh --dry-run: the GPU script's steps on the CPU at tiny sizes, so it cannot rot here.

On a machine with CUDA the same script runs the CUDA tests and relviz.bench.gpu at full size; these
tests check what it writes and that every implementation it compares gives the same output.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from relviz.bench import gpu as bench_gpu
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("gpu-check")
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc, out


def test_the_cuda_tests_ran_and_skip_with_their_message_without_a_gpu(dry_run) -> None:
    text = (dry_run[1] / "cuda-tests.txt").read_text()
    if torch.cuda.is_available():
        assert " passed" in text and "failed" not in text, text
    else:
        assert text.count("CUDA not available on this machine") >= 3, text


def test_every_bandwidth_row_is_measured_against_its_floor(dry_run) -> None:
    result = json.loads((dry_run[1] / "gpu.json").read_text())
    assert result["dry_run"] is True and "not GPU figures" in result["device"]
    rows = [r for r in result["rows"] if r["table"] == "bandwidth"]
    assert [r["what"].split(" [")[0].split(" per")[0] for r in rows] == ["T5 bucket map", "T5 bias", "ALiBi bias"]
    for row in rows:
        assert row["L"] == bench_gpu.DRY.map_length and row["op_s"] > 0 and row["floor_s"] > 0
        assert row["ratio"] == pytest.approx(row["op_s"] / row["floor_s"])


def test_every_attention_implementation_gives_the_same_output(dry_run) -> None:
    result = json.loads((dry_run[1] / "gpu.json").read_text())
    rows = [r for r in result["rows"] if r["table"] == "attention"]
    mechanisms = {r["mechanism"] for r in rows}
    assert len(mechanisms) == 3 and all("skipped" not in r for r in rows)
    for mechanism in mechanisms:
        impls = {r["impl"]: r for r in rows if r["mechanism"] == mechanism}
        assert "SDPA, bias prebuilt" in impls and any(name.startswith("FlexAttention") for name in impls)
        for name, row in impls.items():
            assert row["max_abs_diff"] < 1e-4, (mechanism, name, row["max_abs_diff"])
            assert row["forward_s"] > 0 and row["forward_vs_flex"] > 0
            assert ("fwd_bwd_s" in row) != name.startswith("FlexAttention")    # no flex backward on CPU
        if "relviz auto" in impls:
            assert impls["relviz auto"]["runs"] == "sdpa"                    # on CPU "auto" is SDPA


def test_the_markdown_names_the_device_and_says_it_is_a_dry_run(dry_run) -> None:
    text = (dry_run[1] / "gpu.md").read_text()
    assert text.startswith("# relviz GPU check: CPU") and "not GPU figures" in text
    assert text.count("| T5 bias (bidirectional) |") == 4 and "| sliding window" in text
    assert "gpu.md" in dry_run[0].stdout


def test_a_row_cut_by_the_budget_or_memory_is_written_with_its_reason() -> None:
    result = {"device": "X", "torch": "t", "relviz": "r", "started": "now", "sizes": {}, "dry_run": False,
              "rows": [{"table": "bandwidth", "what": "T5 bucket map [L, L] int64", "L": 65536, "bytes": 34e9,
                        "skipped": "needs ~75.6 GB, 70.0 GB free"},
                       {"table": "attention", "mechanism": "ALiBi (causal)", "L": 32768, "impl": "relviz auto",
                        "skipped": "the script's time budget ran out"}]}
    text = bench_gpu.markdown(result)
    assert "needs ~75.6 GB, 70.0 GB free |" in text and "the script's time budget ran out |" in text
    assert "not GPU figures" not in text


def test_without_cuda_the_full_run_refuses_and_points_to_the_dry_run(tmp_path, capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert bench_gpu.main(["--out", str(tmp_path)]) == 2
    assert "--dry-run" in capsys.readouterr().err
