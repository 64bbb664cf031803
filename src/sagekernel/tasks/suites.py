"""Named task suites.

- ``builtin``: every task under ``tasks/suite/`` (levels as folders);
- ``level1`` / ``level2`` / ``level3``: one level of the built-in suite;
- ``demo``: three small operators a 1.5B model can solve (abs, swish, rms_norm);
- ``paper_eval``: the paper's evaluation subset of NPUKernelBench (Table 3: 88 operators, 20 L1 +
  50 L2 + 18 L3; membership and the Level-2 rule in tasks/npukb_subset.py), selected from an
  NPUKernelBench checkout: ``paper_eval:/path/to/NPUKernelBench``, or ``paper_eval`` with the
  root in ``SAGE_NPUKERNELBENCH``. Only the selected operator folders are loaded.
- ``paper_xccl``: the paper's xCCL transfer set (Table 4: 16 operators). The design spec gives its
  size and results but not its operators, so its membership is unknown: `paper_suite_status` says
  so and asking for it is a `TaskError` that says why, rather than a guessed list.

`load_suite` also accepts a directory path (an external KernelBench-style task dir); such
directories are loaded in a child process with time and memory limits (tasks/isolate.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sagekernel.errors import TaskError
from sagekernel.tasks.loader import LoadProblem, LoadReport, load_dir, load_task
from sagekernel.tasks.npukb_subset import PAPER_LEVEL1, PAPER_LEVEL2_NAMED
from sagekernel.tasks.task import Task

SUITE_ROOT = Path(__file__).resolve().parent / "suite"

#: The demo suite, as paths relative to SUITE_ROOT, in stream order.
DEMO_FILES = ("level1/abs.py", "level2/swish.py", "level2/rms_norm.py")

SUITE_NAMES = ("builtin", "demo", "level1", "level2", "level3", "paper_eval", "paper_xccl")


@dataclass(frozen=True)
class PaperSuite:
    """A suite the paper names. `operators` is None while the operator names are not known."""

    name: str
    source: str
    size: int
    per_level: dict[int, int]
    operators: tuple[str, ...] | None


PAPER_SUITES = {
    "paper_eval": PaperSuite("paper_eval", "SAGE paper Table 3 / section 4.2: the NPUKernelBench subset",
                             88, {1: 20, 2: 50, 3: 18}, PAPER_LEVEL1 + PAPER_LEVEL2_NAMED),
    "paper_xccl": PaperSuite("paper_xccl", "SAGE paper Table 4 / section 4.3: xCCL transfer operators",
                             16, {}, None),
}


def paper_suite_status(name: str) -> dict[str, object]:
    """Which of a paper suite's operators the built-in suite has, and which it lacks."""
    suite = PAPER_SUITES[name]
    if suite.operators is None:
        return {"name": name, "source": suite.source, "size": suite.size, "per_level": suite.per_level,
                "known": False, "present": [], "absent": [],
                "note": "the design spec gives this suite's size and results but not its operator "
                        "names, so which built-in tasks belong to it is unknown"}
    if name == "paper_eval":
        return _paper_eval_status(suite)
    have = {t.name for t in load_dir(SUITE_ROOT).tasks}
    return {"name": name, "source": suite.source, "size": suite.size, "per_level": suite.per_level,
            "known": True, "present": [o for o in suite.operators if o in have],
            "absent": [o for o in suite.operators if o not in have], "note": ""}


def _paper_eval_status(suite: PaperSuite) -> dict[str, object]:
    """The named operators, and which of them the checkout in ``SAGE_NPUKERNELBENCH`` has (by folder)."""
    from sagekernel.tasks.npukernelbench import benchmark_root, operator_files, operator_layout

    text = os.environ.get(NPUKB_ROOT_ENV, "")
    root = benchmark_root(Path(text).expanduser()) if text else None
    have = {operator_layout(f)[0] for f in operator_files(root)} if root is not None else set()
    named = suite.operators or ()
    return {"name": suite.name, "source": suite.source, "size": suite.size, "per_level": suite.per_level,
            "known": True, "present": [o for o in named if o in have],
            "absent": [o for o in named if o not in have] if root is not None else [],
            "note": "selected from an NPUKernelBench checkout (paper_eval:/path/to/NPUKernelBench, or "
                    f"{NPUKB_ROOT_ENV}): the 20 named Level-1 operators, every Level-3 operator and 50 "
                    "Level-2 operators by the rule in sagekernel/tasks/npukb_subset.py"}


#: Where ``paper_eval`` finds the NPUKernelBench root when the suite name does not give it.
NPUKB_ROOT_ENV = "SAGE_NPUKERNELBENCH"


def paper_eval_report(root_text: str, *, isolate: bool = True, sandbox: str = "auto") -> LoadReport:
    """The ``paper_eval`` subset of the NPUKernelBench checkout at `root_text` (or the env's)."""
    from sagekernel.tasks.loader import add_unique, load_one
    from sagekernel.tasks.npukb_subset import Operator, paper_subset
    from sagekernel.tasks.npukernelbench import benchmark_root, operator_files, operator_layout

    text = root_text or os.environ.get(NPUKB_ROOT_ENV, "")
    if not text:
        raise TaskError(f"suite 'paper_eval' selects from NPUKernelBench: give its root as "
                        f"paper_eval:/path/to/NPUKernelBench or set {NPUKB_ROOT_ENV}")
    root = benchmark_root(Path(text).expanduser().resolve())
    if root is None:
        raise TaskError(f"suite 'paper_eval': {text} holds no NPUKernelBench operator folders "
                        "(level<N>/<Category>/<Op>/validation/module.py)")
    files = operator_files(root)
    layout = {f: operator_layout(f) for f in files}
    subset = paper_subset(Operator(n, lv, cat) for n, lv, cat, _ in layout.values())
    wanted = set(subset.names)
    chosen = [f for f in files if layout[f][0] in wanted]
    report = LoadReport(root=root)
    if isolate:
        from sagekernel.tasks.isolate import load_files_isolated

        results = load_files_isolated(chosen, root, sandbox_kind=sandbox)
    else:
        results = [load_one(f, root) for f in chosen]
    seen: dict[str, Path] = {}
    for result in results:
        if isinstance(result, LoadProblem):
            report.problems.append(result)
        else:
            add_unique(report, result, seen)
    for name in subset.missing:
        report.problems.append(LoadProblem(root / name, f"{root}: the paper's operator {name} is not in "
                                           "this checkout", "rejected"))
    return report


def check_suite_name(name: str) -> None:
    """Refuse a suite that `suite_report` would not know (a name or a directory), without loading
    it (`sage mcp` checks its options before it serves, and loads the suite later)."""
    head, sep, _ = name.partition(":")
    if (head == "paper_eval" and (sep or name == "paper_eval")) or name in PAPER_SUITES:
        return
    if name in ("builtin", "demo", "level1", "level2", "level3") or Path(name).expanduser().is_dir():
        return
    raise TaskError(f"unknown suite {name!r}: use one of {', '.join(SUITE_NAMES)} "
                    "or a directory of task files")


def suite_report(name: str, *, isolate: bool = True, sandbox: str = "auto") -> LoadReport:
    """Load a named suite or a directory and return the full report (tasks and problems).
    A directory is loaded in limited child processes unless `isolate` is False, confined by the
    sandbox layer `sandbox` (the harness setting of that name)."""
    head, sep, tail = name.partition(":")
    if head == "paper_eval" and (sep or name == "paper_eval"):
        return paper_eval_report(tail, isolate=isolate, sandbox=sandbox)
    if name in PAPER_SUITES:
        status = paper_suite_status(name)
        if not status["known"]:
            raise TaskError(f"suite {name!r} ({PAPER_SUITES[name].source}, {PAPER_SUITES[name].size} "
                            f"operators): {status['note']}; use builtin, level1..3 or a directory")
        report = LoadReport(root=SUITE_ROOT)
        wanted = set(PAPER_SUITES[name].operators or ())
        report.tasks = [t for t in load_dir(SUITE_ROOT).tasks if t.name in wanted]
        return report
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
        return load_dir(path, isolate=isolate, sandbox=sandbox)
    raise TaskError(f"unknown suite {name!r}: use one of {', '.join(SUITE_NAMES)} "
                    "or a directory of task files")


def load_suite(name: str | Path, *, strict: bool = True, isolate: bool = True,
               sandbox: str = "auto") -> list[Task]:
    """The tasks of a named suite (`SUITE_NAMES`) or of a directory.

    With `strict` (the default) any file that fails to load raises a `TaskError` listing every
    problem; with ``strict=False`` broken files are skipped.
    """
    report = suite_report(str(name), isolate=isolate, sandbox=sandbox)
    if strict and report.problems:
        lines = "\n".join(f"  - {p.message}" for p in report.problems)
        raise TaskError(f"{len(report.problems)} task file(s) in {report.root} failed to load:\n{lines}\n"
                        f"(`sage tasks check {report.root}` lists every file; fix these files or move them "
                        "out of the directory to run the rest)")
    return report.tasks


def find_task(name: str, suite: str | Path = "builtin") -> Task:
    """One task of a suite by name, with a clear error listing the names available."""
    tasks = load_suite(suite, strict=False)
    for task in tasks:
        if task.name == name:
            return task
    names = ", ".join(sorted(t.name for t in tasks))
    raise TaskError(f"no task named {name!r} in suite {str(suite)!r}; available: {names}")
