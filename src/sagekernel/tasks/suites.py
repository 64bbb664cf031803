"""Named task suites.

- ``builtin``: every task under ``tasks/suite/`` (levels as folders);
- ``level1`` / ``level2`` / ``level3``: one level of the built-in suite;
- ``demo``: three small operators a 1.5B model can solve (abs, swish, rms_norm).

`load_suite` also accepts a directory path (an external KernelBench-style task dir).
"""

from __future__ import annotations

from pathlib import Path

from sagekernel.errors import TaskError
from sagekernel.tasks.loader import LoadReport, load_dir, load_task
from sagekernel.tasks.task import Task

SUITE_ROOT = Path(__file__).resolve().parent / "suite"

#: The demo suite, as paths relative to SUITE_ROOT, in stream order.
DEMO_FILES = ("level1/abs.py", "level2/swish.py", "level2/rms_norm.py")

SUITE_NAMES = ("builtin", "demo", "level1", "level2", "level3")


def suite_report(name: str) -> LoadReport:
    """Load a named suite or a directory and return the full report (tasks and problems)."""
    if name == "builtin":
        return load_dir(SUITE_ROOT)
    if name in ("level1", "level2", "level3"):
        return load_dir(SUITE_ROOT / name)
    if name == "demo":
        report = LoadReport(root=SUITE_ROOT)
        for rel in DEMO_FILES:
            report.tasks.append(load_task(SUITE_ROOT / rel))
        return report
    path = Path(name).expanduser()
    if path.is_dir():
        return load_dir(path)
    raise TaskError(f"unknown suite {name!r}: use one of {', '.join(SUITE_NAMES)} "
                    "or a directory of task files")


def load_suite(name: str | Path, *, strict: bool = True) -> list[Task]:
    """The tasks of a named suite (`SUITE_NAMES`) or of a directory.

    With `strict` (the default) any file that fails to load raises a `TaskError` listing every
    problem; with ``strict=False`` broken files are skipped.
    """
    report = suite_report(str(name))
    if strict and report.problems:
        lines = "\n".join(f"  - {p.message}" for p in report.problems)
        raise TaskError(f"{len(report.problems)} task file(s) in {report.root} failed to load:\n{lines}")
    return report.tasks


def find_task(name: str, suite: str | Path = "builtin") -> Task:
    """One task of a suite by name, with a clear error listing the names available."""
    tasks = load_suite(suite, strict=False)
    for task in tasks:
        if task.name == name:
            return task
    names = ", ".join(sorted(t.name for t in tasks))
    raise TaskError(f"no task named {name!r} in suite {str(suite)!r}; available: {names}")
