"""The line-budget gate that scripts/check.sh runs: it passes on the tree as it is, and fails on
growth past the budget, on an unlisted long module and on a stale exemption."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "line_budget.py"
spec = importlib.util.spec_from_file_location("line_budget", SCRIPT)
assert spec is not None and spec.loader is not None
line_budget = importlib.util.module_from_spec(spec)
spec.loader.exec_module(line_budget)


def test_the_tree_is_within_its_budget() -> None:
    lines = line_budget.count_lines()
    assert not any(rel.startswith("tasks/suite/") for rel in lines)
    assert line_budget.problems(lines) == []


def test_growth_an_unlisted_long_module_and_a_stale_exemption_each_fail() -> None:
    lines = line_budget.count_lines()
    grown = dict(lines, **{"agent/new.py": line_budget.BUDGET})
    assert any("over the budget" in p for p in line_budget.problems(grown))
    long_module = dict(lines, **{"agent/new.py": line_budget.MODULE_LINES + 1})
    assert any(p.startswith("agent/new.py") for p in line_budget.problems(long_module))
    listed = next(iter(line_budget.LARGE_MODULES))
    shrunk = dict(lines, **{listed: 10})
    assert any(p.startswith(f"{listed} is listed") for p in line_budget.problems(shrunk))
