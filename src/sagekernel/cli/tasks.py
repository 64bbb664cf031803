"""`sage tasks ...`: list, show and check operator task files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from sagekernel.tasks.task import Task

tasks_app = typer.Typer(name="tasks", help="Operator tasks: list suites, show one task, check a task dir.",
                        no_args_is_help=True)
console = Console()


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
    app.add_typer(tasks_app, name="tasks")


def _task_json(task: Task) -> dict[str, Any]:
    return {
        "name": task.name, "level": task.level, "category": task.category,
        "description": task.description, "source_path": str(task.source_path), "dtype": task.dtype,
        "inputs": [{"name": t.name, "dims": list(t.dims), "dtype": t.dtype} for t in task.inputs],
        "outputs": [{"name": t.name, "dims": list(t.dims), "dtype": t.dtype} for t in task.outputs],
        "attrs": task.attrs, "sizes": task.sizes, "variants": task.variants,
        "atol": task.atol, "rtol": task.rtol,
        "reference_kernels": {k: str(v) for k, v in task.reference_kernels.items()},
    }


def _shape(dims: tuple[str, ...]) -> str:
    return escape("[" + ",".join(dims) + "]")


@tasks_app.command("list")
def list_tasks(
    directory: Annotated[Path | None,
                         typer.Argument(help="A directory of task files (instead of --suite).")] = None,
    suite: Annotated[str, typer.Option("--suite", "-s",
                                       help="builtin, demo, level1, level2, level3")] = "builtin",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the tasks of a suite or directory (files that fail to load are skipped; see `check`)."""
    from sagekernel.tasks.suites import suite_report

    report = suite_report(str(directory) if directory is not None else suite)
    tasks = report.tasks
    if report.problems:
        err = Console(stderr=True)
        err.print(f"[yellow]{len(report.problems)} file(s) failed to load and are not listed; "
                  f"see `sage tasks check {escape(str(report.root))}`[/]")
    if as_json:
        typer.echo(json.dumps([_task_json(t) for t in tasks], indent=2))
        return
    table = Table(title=f"{len(tasks)} tasks ({directory or suite})")
    for col in ("name", "level", "category", "dtype", "inputs", "sizes", "variants"):
        table.add_column(col, no_wrap=col in ("name", "dtype"), overflow="fold")
    for t in tasks:
        table.add_row(
            t.name, str(t.level), t.category, t.dtype,
            " ".join(f"{s.name}{_shape(s.dims)}" for s in t.inputs) or "-",
            " ".join(f"{k}={v}" for k, v in t.sizes.items()),
            str(len(t.variants)),
        )
    console.print(table)


@tasks_app.command("show")
def show_task(
    name: Annotated[str, typer.Argument(help="Task name.")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite name or task directory.")] = "builtin",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (metadata, contract, source).")] = False,
) -> None:
    """Show one task: metadata, the CPU kernel contract and the reference source."""
    from sagekernel.targets.cpu.contract import contract_text
    from sagekernel.tasks.suites import find_task

    task = find_task(name, suite)
    contract = contract_text(task)
    if as_json:
        payload = {**_task_json(task), "cpu_contract": contract, "source": task.source}
        typer.echo(json.dumps(payload, indent=2))
        return
    console.print(f"[bold]{escape(task.name)}[/]  level {task.level}  {escape(task.category)}  "
                  f"({escape(str(task.source_path))})")
    if task.description:
        console.print(escape(task.description))
    meta = Table(show_header=False, box=None)
    meta.add_column(style="cyan")
    meta.add_column()
    for s in task.inputs:
        meta.add_row("input", f"{s.name} {s.dtype} {_shape(s.dims)}")
    for s in task.outputs:
        meta.add_row("output", f"{s.name} {s.dtype} {_shape(s.dims)}")
    meta.add_row("sizes", ", ".join(f"{k}={v}" for k, v in task.sizes.items()))
    for i, v in enumerate(task.variants):
        meta.add_row(f"variant {i}", ", ".join(f"{k}={x}" for k, x in v.items()))
    if task.attrs:
        meta.add_row("attrs", ", ".join(f"{k}={v}" for k, v in task.attrs.items()))
    meta.add_row("tolerance", f"atol={task.atol:g} rtol={task.rtol:g}")
    meta.add_row("kernels", ", ".join(task.reference_kernels) or "none")
    console.print(meta)
    console.rule("CPU contract")
    console.print(Syntax(contract, "c", word_wrap=True))
    console.rule("reference")
    console.print(Syntax(task.source, "python", word_wrap=True))


@tasks_app.command("check")
def check_tasks(
    directory: Annotated[Path, typer.Argument(help="Directory of task files to validate.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Load every task file under DIRECTORY and report problems per file (exit code 1 if any)."""
    from sagekernel.tasks.loader import load_dir

    report = load_dir(directory)
    if as_json:
        typer.echo(json.dumps({
            "root": str(report.root),
            "tasks": [t.name for t in report.tasks],
            "problems": [{"path": str(p.path), "message": p.message} for p in report.problems],
        }, indent=2))
    else:
        for t in report.tasks:
            console.print(f"[green]ok[/]   {t.source_path.relative_to(report.root)}  ({t.name})")
        for p in report.problems:
            rel = escape(str(p.path.relative_to(report.root)))
            console.print(f"[red]FAIL[/] {rel}\n     {escape(p.message)}")
        console.print(f"{len(report.tasks)} loaded, {len(report.problems)} with problems")
    if report.problems:
        raise typer.Exit(code=1)
