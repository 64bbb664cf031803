#!/usr/bin/env bash
# Everything CI checks, in one command (README: "Run the tests"):
# install, lint, types, the harness self-check, a real evaluation from a fresh venv, the tests,
# the method's claims on the synthetic oracle (tests/test_oracle_method.py, marker `oracle`),
# then the real coding-agent clients (tests/test_agent_clients.py, marker `clients`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
say() { printf '\033[1m[check]\033[0m %s\n' "$*"; }
bash scripts/setup.sh --dev
say "ruff";   "$PY" -m ruff check src tests benchmarks
say "line budget (scripts/line_budget.py: growth is a decision)"; "$PY" scripts/line_budget.py
say "mypy, with and without the optional runtimes"; "$PY" scripts/typecheck.py
say "sage selfcheck: every hand-written kernel passes, every null-kernel canary fails"
sage selfcheck --suite builtin > /tmp/sage-selfcheck.txt || { tail -60 /tmp/sage-selfcheck.txt; exit 1; }
tail -3 /tmp/sage-selfcheck.txt
say "a fresh virtual environment evaluates a kernel"
bash scripts/venv_check.sh
say "pytest"
"$PY" -m pytest
say "the shared memory against a real PostgreSQL server (tests start and stop their own; marker postgres)"
"$PY" -m pytest -m postgres
say "the method's claims on the synthetic oracle's six hidden worlds (marker oracle; docs/oracle.md)"
"$PY" -m pytest -m oracle
say "the real coding-agent clients (OpenCode, Claude Code from npm) through sage mcp"
bash scripts/test_clients.sh
