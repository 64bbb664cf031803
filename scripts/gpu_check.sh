#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py), every row through harness.evaluate: `sage selfcheck` of the
# Triton and CUDA kernels on an NVIDIA GPU, timing sanity (a copy near the bandwidth limit, a
# deliberately slow kernel well below 1x) and every adversarial kernel with the static checks off.
# Prints one table. Not yet run on a GPU: its duration there is unmeasured.
#   bash scripts/gpu_check.sh            # the table
#   bash scripts/gpu_check.sh --json     # the same as JSON
# Exit status: 0 all passed, 1 a check failed, 2 no GPU (nothing was checked).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_DEFAULT_FP_FUSION=1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi missing or lists no device); nothing was checked" >&2
  exit 2
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: torch sees no CUDA device (a CPU-only torch build?); nothing was checked" >&2
  exit 2
fi
"$PY" -c "import triton" 2>/dev/null || echo "gpu_check: WARNING triton is not installed: the Triton rows will fail" >&2
command -v nvcc >/dev/null 2>&1 || echo "gpu_check: WARNING nvcc is not installed: the CUDA rows will fail" >&2
nvidia-smi -L
timeout 1800 "$PY" scripts/gpu_check.py "$@"
status=$?
if [ "$status" = 124 ]; then echo "gpu_check: stopped by the 1800 s time limit" >&2; fi
exit "$status"
