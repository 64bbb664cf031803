"""`sage lint TASK CANDIDATE... --target T [--json]`: a target's static checks alone, no build.

The same checks `sage eval` applies before building (file set, names, integrity rules); nothing is
compiled or run, so it works on any machine, for any target. CANDIDATE is the candidate's files
or one folder that holds them (found by the contract's paths, then by file name).
Exit status: 0 no finding, 1 findings, 2 usage errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from sagekernel.cli.options import OptionError, read_text
from sagekernel.terminal import printable


def register(app: typer.Typer) -> None:
    app.command("lint")(lint_command)


def candidate_files(paths: list[Path], wanted: list[str]) -> dict[str, str]:
    """The contract's paths -> text. A folder is searched for the contract's paths (then their file
    names); files match a contract path by their trailing path, then by name; a lone file of a
    one-file target is that file. Anything else keeps its own name, so the lint reports it."""
    if len(paths) == 1 and paths[0].is_dir():
        root = paths[0]
        found = {rel: root / rel for rel in wanted if (root / rel).is_file()}
        for rel in wanted:
            if rel not in found:
                hits = sorted(root.rglob(Path(rel).name))
                if hits:
                    found[rel] = hits[0]
        return {rel: read_text(p, "CANDIDATE") for rel, p in found.items()}
    files: dict[str, str] = {}
    for p in paths:
        posix = p.as_posix()
        match = next((w for w in wanted if posix.endswith(w)), None) or next(
            (w for w in wanted if Path(w).name == p.name), None
        )
        if match is None and len(wanted) == 1 and len(paths) == 1:
            match = wanted[0]
        files[match or p.name] = read_text(p, "CANDIDATE")
    return files


def lint_report(task_spec: str, paths: list[Path], target_name: str) -> dict[str, Any]:
    from sagekernel.candidate import Candidate
    from sagekernel.cli.harness import _load_task, _target_and_device

    target = _target_and_device(target_name, None)
    task = _load_task(task_spec)
    wanted = [f.path for f in target.files(task)]
    files = candidate_files(paths, wanted)
    findings = target.lint(Candidate(files), task)
    return {
        "task": task.name,
        "target": target.name,
        "files": {rel: ("given" if rel in files else "missing") for rel in wanted}
        | {rel: "not in the contract" for rel in files if rel not in wanted},
        "ok": not findings,
        "findings": [
            {"rule": f.rule, "reason": f.reason, "line": f.line, "excerpt": f.excerpt} for f in findings
        ],
    }


def lint_command(
    task: Annotated[str, typer.Argument(help="A task name from the built-in suite, or a task file path.")],
    candidate: Annotated[
        list[Path], typer.Argument(help="The candidate's files, or one folder holding them.")
    ],
    target: Annotated[str, typer.Option("--target", help="cpu, triton, cuda, ascendc, ...")] = "cpu",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run a target's static checks on a candidate (no build, no run)."""
    for p in candidate:
        if not p.exists():
            raise OptionError("CANDIDATE", f"{p} does not exist")
    report = lint_report(task, candidate, target)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        # task names, file names and excerpts come from outside SAGE: escaped before the terminal
        typer.echo(printable(f"{report['task']} on {report['target']}: {len(report['findings'])} finding(s)"))
        for rel, state in report["files"].items():
            typer.echo(printable(f"  {rel}: {state}"))
        for f in report["findings"]:
            where = f" (line {f['line']})" if f["line"] else ""
            typer.echo(printable(f"  [{f['rule']}] {f['reason']}{where}"))
    raise typer.Exit(0 if report["ok"] else 1)
