#!/usr/bin/env bash
# A new user's install, checked for real: a fresh virtual environment, the package installed into
# it, and one evaluation of an honest kernel through the sandbox (the Python reference timer must
# import torch from the venv, not from the base interpreter).
#   bash scripts/venv_check.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
venv="${1:-$(mktemp -d)/venv}"
say() { printf '\033[1m[venv-check]\033[0m %s\n' "$*"; }
say "creating $venv"
"$PY" -m venv "$venv"
# torch from the same pinned CPU build setup.sh uses; the package itself without the heavy extras
"$venv/bin/python" -m pip install -q "torch==2.13.0"
"$venv/bin/python" -m pip install -q -e .
out="$(mktemp)"
"$venv/bin/sage" eval abs src/sagekernel/tasks/suite/level1/abs.cpu.c --json > "$out"
"$venv/bin/python" - "$out" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["stage"] == "ok" and v["correct"], v["message"]
assert v["speedup"] and v["timing"]["method"], v
print(f"venv evaluation ok: speedup {v['speedup']:.2f}x, sandbox {v['sandbox']['kind']}")
PY
