"""`sage eval --target ascendc --plan TASK FILES...`: print what an evaluation would execute.

Shows the file mapping, the static findings, the build plan (the exact commands, working
directories and environment) and the run plan (the runtime's argv, environment, binds, device
nodes and the timing protocol). Needs no CANN; nothing is built or run. Also runnable as
`python -m sagekernel.targets.ascendc.plan TASK FILES...`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names
from sagekernel.targets.ascendc.plans import describe
from sagekernel.targets.ascendc.runtime.ascendc_runtime import protocol_text
from sagekernel.targets.ascendc.target import AscendCTarget
from sagekernel.targets.base import BuildResult
from sagekernel.tasks.task import Task


def load_task_spec(spec: str) -> Task:
    """A task file loaded in the loading child (tasks/isolate.py, as `sage eval` loads it), or a
    built-in task by name."""
    from sagekernel.errors import TaskError
    from sagekernel.tasks.isolate import load_files_isolated
    from sagekernel.tasks.suites import find_task

    path = Path(spec).expanduser()
    if not (path.suffix == ".py" and path.is_file()):
        return find_task(spec)
    (loaded,) = load_files_isolated([path.resolve()], None)
    if not isinstance(loaded, Task):
        raise TaskError(loaded.message)
    return loaded


def candidate_from_paths(paths: list[Path], expected: list[str]) -> tuple[Candidate, list[str]]:
    """Map files given on the command line to the contract's paths (by trailing path, then by file
    name). A single directory is searched for the contract's paths."""
    if len(paths) == 1 and paths[0].is_dir():
        root = paths[0]
        found = {rel: (root / rel) for rel in expected if (root / rel).is_file()}
        found.update(
            {rel: p for rel in expected if rel not in found for p in sorted(root.rglob(Path(rel).name))[:1]}
        )
        return Candidate({rel: p.read_text(encoding="utf-8") for rel, p in found.items()}), []
    files: dict[str, str] = {}
    unmatched = []
    for p in paths:
        text = p.read_text(encoding="utf-8")
        posix = p.as_posix()
        rel = next((e for e in expected if posix.endswith(e)), None) or next(
            (e for e in expected if Path(e).name == p.name), None
        )
        if rel is None:
            unmatched.append(str(p))
            files[p.name] = text  # kept: the lint reports it as an unexpected file
        else:
            files[rel] = text
    return Candidate(files), unmatched


def plan_report(
    task: Task,
    paths: list[Path],
    *,
    device: str = "npu",
    workdir: Path | None = None,
    target: AscendCTarget | None = None,
) -> dict[str, Any]:
    target = target or AscendCTarget()
    expected = [f.path for f in target.files(task)]
    if len(paths) == 1 and paths[0].is_dir() and is_benchmark_task(task):  # its layout, helpers too
        found, _ = target.folder_files(task, paths[0])
        candidate = Candidate({rel: f.read_text(encoding="utf-8") for rel, f in found.items()})
        unmatched: list[str] = []
    else:
        candidate, unmatched = candidate_from_paths(paths, expected)
    wd = workdir or Path(tempfile.gettempdir()) / f"sage-ascendc-{task.name}-{candidate.digest}"
    build = target.plan(candidate, task, wd, device=device)
    ok, why = target.available(device)
    pseudo = BuildResult(
        True, "planned", {k: Path(v) for k, v in build.artifacts.items()}, {"plan": build.to_dict()}
    )
    spec = target.runtime(pseudo, task, device)
    return {
        "task": task.name,
        "device": device,
        "available": ok,
        "availability": why,
        "config": {"template": build.template, "build_path": build.path, "soc": target.config.soc},
        "files": _file_states(target, task, candidate, expected),
        "unmatched": unmatched,
        "lint": [f.__dict__ for f in target.lint(candidate, task)],
        "build": build.to_dict(),
        "build_script": describe(build),
        "run": {
            "argv": spec.argv,
            "env": spec.env,
            "ro_binds": spec.ro_binds,
            "device_nodes": spec.device_nodes,
            "reference_in_process": spec.reference_in_process,
            "timed": device == "npu",
            "timing": protocol_text(target.timing_protocol)
            if device == "npu"
            else "not timed (CPU twin debug is functional only)",
        },
    }


def _file_states(
    target: AscendCTarget, task: Task, candidate: Candidate, expected: list[str]
) -> dict[str, str]:
    """Each file of the plan: given, MISSING, or (the benchmark's layout) a msOpGen stub the
    project's own host sources replace (benchmark_project.replaced_stubs)."""
    if not is_benchmark_task(task):
        return {rel: "given" if rel in candidate.files else "MISSING" for rel in expected}
    from sagekernel.targets.ascendc.benchmark_project import replaced_stubs

    states = {rel: "given" for rel in sorted(candidate.files)}
    states.update({rel: "MISSING" for rel in target.missing_files(task, candidate)})
    states.update({rel: "replaced msOpGen stub (the project has its own host sources)"
                   for rel in replaced_stubs(candidate.files, op_names(task))})
    return states


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"task {report['task']} on {report['device']}: template {report['config']['template']}, "
        f"build path {report['config']['build_path']}, SoC {report['config']['soc']}",
        f"available here: {'yes' if report['available'] else 'no'} ({report['availability']})",
        "",
        "files:",
    ]
    lines += [f"  {rel}: {state}" for rel, state in report["files"].items()]
    lines += [f"  (not in the contract: {u})" for u in report["unmatched"]]
    lines += ["", f"static findings: {len(report['lint'])}"]
    lines += [
        f"  [{f['rule']}] {f['reason']}" + (f" (line {f['line']})" if f["line"] else "")
        for f in report["lint"]
    ]
    lines += ["", report["build_script"], "", "# run plan"]
    run = report["run"]
    lines += [f"export {k}={shlex.quote(str(v))}" for k, v in sorted(run["env"].items())]
    lines += [shlex.join(run["argv"])]
    lines += [f"# bind (read-only) {src} -> {dst}" for src, dst in run["ro_binds"]]
    lines += [
        f"# device nodes: {', '.join(run['device_nodes']) or 'none'}",
        f"# reference timed in-process: {run['reference_in_process']}",
        f"# timing: {run['timing']}",
    ]
    return "\n".join(lines)


def print_plan(
    task_spec: str,
    paths: list[Path],
    *,
    device: str = "npu",
    as_json: bool = False,
    workdir: Path | None = None,
) -> int:
    """Print the plan; returns the exit status (0: planned without static findings, 1 otherwise)."""
    report = plan_report(load_task_spec(task_spec), paths, device=device, workdir=workdir)
    print(json.dumps(report, indent=2, default=str) if as_json else format_report(report))
    return 0 if not report["lint"] and not report["build"]["problems"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sagekernel.targets.ascendc.plan", description=__doc__)
    p.add_argument("task")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--device", default="npu", choices=("npu", "cpu-twin"))
    p.add_argument("--workdir", type=Path)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    return print_plan(a.task, a.files, device=a.device, as_json=a.json, workdir=a.workdir)


if __name__ == "__main__":
    sys.exit(main())
