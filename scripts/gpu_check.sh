#!/usr/bin/env bash
# The core on one NVIDIA GPU, in under 6½ minutes: the CUDA tests, then the GPU bench
# (python -m relviz.bench.gpu), whose figures go to OUT/gpu.json and OUT/gpu.md with the GPU's name.
#
#   scripts/gpu_check.sh [--dry-run] [--out DIR]      (DIR defaults to gpu-check/)
#
# --dry-run: the same steps on the CPU at tiny sizes (the CUDA tests skip with their message); the
# test suite runs it (tests/test_gpu_check.py), so the script cannot rot on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

out=gpu-check
dry=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=(--dry-run) ;;
    --out) out="$2"; shift ;;
    *) echo "usage: scripts/gpu_check.sh [--dry-run] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
mkdir -p "$out"
start=$SECONDS

if [ ${#dry[@]} -eq 0 ]; then
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA device: use --dry-run")'
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/nvidia-smi.csv" 2>&1 || true
fi

# 1. The CUDA tests (each file's CUDA tests; they skip with a message where there is no GPU). A failure
# does not stop the script: the bench still runs, and the script exits with the tests' status at the end.
echo "== CUDA tests"
tests_rc=0
timeout 90 "$python" -m pytest -q -rs -p no:cacheprovider -k cuda \
  tests/test_attention.py tests/test_positions.py tests/test_skew.py 2>&1 | tee "$out/cuda-tests.txt" || tests_rc=$?

# 2. The GPU bench: the bandwidth rows first, then attention by length; its own budget is 240 s
# (FULL.budget_s), and the files are rewritten after every mechanism, so a timeout keeps the rows done.
# Caps: 90 s + 290 s, so the whole script ends within 6½ minutes.
echo "== GPU bench"
timeout 290 "$python" -m relviz.bench.gpu --out "$out" "${dry[@]}"
echo "== done in $((SECONDS - start)) s; figures in $out/gpu.md and $out/gpu.json"
if [ "$tests_rc" -ne 0 ]; then
  echo "== the CUDA tests FAILED (status $tests_rc): see $out/cuda-tests.txt" >&2
  exit "$tests_rc"
fi
