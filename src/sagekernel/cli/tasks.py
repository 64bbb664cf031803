"""`sage tasks ...`: list, show and check operator task files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from sagekernel.tasks.task import Task
from sagekernel.terminal import Console, printable

tasks_app = typer.Typer(name="tasks", help="Operator tasks: list suites, show one task, check a task dir.",
                        no_args_is_help=True)
console = Console()


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
    app.add_typer(tasks_app, name="tasks")


def _task_json(task: Task) -> dict[str, Any]:
    from sagekernel.tasks.record import task_to_json

    return task_to_json(task)


def _summary(tasks: list[Task]) -> list[dict[str, Any]]:
    """Task counts by (level, category), sorted."""
    counts: dict[tuple[int, str], int] = {}
    for t in tasks:
        counts[(t.level, t.category)] = counts.get((t.level, t.category), 0) + 1
    return [{"level": lv, "category": cat, "tasks": n} for (lv, cat), n in sorted(counts.items())]


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
    """List the tasks of a suite or directory, summarised by level and category (files that fail
    to load are counted; `check` says why)."""
    from sagekernel.tasks.suites import suite_report

    report = suite_report(str(directory) if directory is not None else suite)
    tasks = report.tasks
    if report.problems:
        err = Console(stderr=True)
        err.print(f"[yellow]{len(report.problems)} file(s) failed to load and are not listed; "
                  f"see `sage tasks check {escape(str(report.root))}`[/]")
    if as_json:
        typer.echo(json.dumps({"root": str(report.root), "tasks": [_task_json(t) for t in tasks],
                               "summary": _summary(tasks), "not_loaded": len(report.problems)}, indent=2))
        return
    table = Table(title=escape(f"{len(tasks)} tasks ({directory or suite})"))
    for col in ("name", "level", "category", "dtype", "inputs", "sizes", "variants"):
        table.add_column(col, no_wrap=col in ("name", "dtype"), overflow="fold")
    for t in tasks:
        table.add_row(
            escape(t.name), str(t.level), escape(t.category), t.dtype,
            " ".join(f"{s.name}{_shape(s.dims)}" for s in t.inputs) or "-",
            escape(" ".join(f"{k}={v}" for k, v in t.sizes.items())),
            str(len(t.variants)),
        )
    console.print(table)
    summary = Table(title="by level and category")
    for col in ("level", "category", "tasks"):
        summary.add_column(col)
    for row in _summary(tasks):
        summary.add_row(str(row["level"]), escape(row["category"]), str(row["tasks"]))
    console.print(summary)


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
    for s in task.params:
        meta.add_row("param", f"{s.name} {s.dtype} {_shape(s.dims)} ({escape(s.origin)})")
    for s in task.outputs:
        meta.add_row("output", f"{s.name} {s.dtype} {_shape(s.dims)}")
    meta.add_row("sizes", escape(", ".join(f"{k}={v}" for k, v in task.sizes.items())))
    if task.published_sizes:
        meta.add_row("published", escape(", ".join(f"{k}={v}" for k, v in task.published_sizes.items())))
    if task.size_note:
        meta.add_row("size policy", escape(task.size_note))
    if task.layout_note:
        meta.add_row("layout", escape(task.layout_note))
    for i, g in enumerate(task.groups):
        meta.add_row(f"group {i}", escape(f"{g.name}: " + ", ".join(
            f"{x.name} {x.dtype} [{','.join(str(g.sizes[d]) for d in x.dims)}]" for x in g.inputs)))
    if task.companion_files:
        meta.add_row("reads", escape(", ".join(str(p.relative_to(task.task_dir)) if p.is_relative_to(
            task.task_dir) else str(p) for p in task.companion_files)))
    for i, v in enumerate(task.variants):
        meta.add_row(f"variant {i}", ", ".join(f"{k}={x}" for k, x in v.items()))
    if task.attrs:
        meta.add_row("attrs", escape(", ".join(f"{k}={v}" for k, v in task.attrs.items())))
    meta.add_row("tolerance", f"atol={task.atol:g} rtol={task.rtol:g}")
    meta.add_row("kernels", escape(", ".join(task.reference_kernels) or "none"))
    strings = [f"{a.name}={a.value!r}" for a in task.forward_args if a.kind == "string"]
    if strings:
        meta.add_row("string attrs", escape(", ".join(strings)))
    bench = task.benchmark
    if bench is not None:
        rule = "custom_check_precision" if bench.custom_check else (
            f"abs<={bench.max_abs_error:g} or rel<={bench.max_rel_error:g}")
        meta.add_row("benchmark", escape(f"{bench.format}: {bench.case_count} cases, rule {rule}, "
                                         f"kernel_gen_ops.{bench.kernel_op or '?'}"))
        if bench.left_out:
            meta.add_row("left out", escape(", ".join(bench.left_out)))
        if bench.skeleton:
            meta.add_row("skeleton", escape(", ".join(sorted(bench.skeleton))))
    console.print(meta)
    if task.specification:
        console.rule("specification")
        console.print(escape(task.specification))
    console.rule("CPU contract")
    console.print(Syntax(printable(contract), "c", word_wrap=True))
    console.rule("reference")
    console.print(Syntax(printable(task.source), "python", word_wrap=True))


@tasks_app.command("check")
def check_tasks(
    directory: Annotated[Path, typer.Argument(help="Directory of task files to validate.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: one entry per file.")] = False,
) -> None:
    """Load every task file under DIRECTORY, each in a limited child process, and say per file
    whether it loaded or why not (exit code 1 if any did not)."""
    from sagekernel.tasks.isolate import WEAKER_LAYER
    from sagekernel.tasks.loader import load_dir

    report = load_dir(directory, isolate=True)
    entries: list[dict[str, Any]] = [
        {"path": str(t.source_path), "status": "loaded", "name": t.name, "level": t.level,
                "category": t.category, "groups": len(t.groups), "params": len(t.params),
                "sizes": t.sizes, "published_sizes": t.published_sizes, "size_note": t.size_note,
                **({"benchmark": {"format": t.benchmark.format, "cases": t.benchmark.case_count,
                                  "left_out": t.benchmark.left_out}} if t.benchmark is not None else {})}
        for t in report.tasks]
    entries += [{"path": str(p.path), "status": p.kind, "device": p.device or None, "reason": p.message}
                for p in report.problems]
    entries.sort(key=lambda e: e["path"])
    if as_json:
        counts: dict[str, int] = {}
        for e in entries:
            counts[e["status"]] = counts.get(e["status"], 0) + 1
        typer.echo(json.dumps({
            "root": str(report.root), "sandbox": report.sandbox, "counts": counts, "files": entries,
            "tasks": [t.name for t in report.tasks],
            "problems": [{"path": str(p.path), "message": p.message, "kind": p.kind}
                         for p in report.problems],
        }, indent=2))
    else:
        for t in report.tasks:
            console.print(f"[green]ok[/]   {escape(str(t.source_path.relative_to(report.root)))}  "
                          f"({escape(t.name)})")
        for p in report.problems:
            rel = escape(str(p.path.relative_to(report.root)))
            label = "NEEDS " + escape(p.device) if p.kind == "needs_device" else p.kind.upper()
            console.print(f"[red]{label}[/] {rel}\n     {escape(p.message)}")
        console.print(f"{len(report.tasks)} loaded, {len(report.problems)} with problems")
        weaker = WEAKER_LAYER.get(report.sandbox)
        console.print(f"loaded in sandbox {report.sandbox}" + (
            f"[yellow] -- the files ran with {weaker}; install bubblewrap to confine them[/]"
            if weaker else ""))
    if report.problems:
        raise typer.Exit(code=1)


@tasks_app.command("suites")
def list_suites(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The named suites, and for the paper's suites which operators the built-in suite has."""
    from sagekernel.tasks.suites import PAPER_SUITES, SUITE_NAMES, paper_suite_status

    rows: list[dict[str, Any]] = [
        {"name": n, **(paper_suite_status(n) if n in PAPER_SUITES else {"known": True})} for n in SUITE_NAMES]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        line = f"[bold]{escape(str(row['name']))}[/]"
        if row["name"] in PAPER_SUITES:
            line += f"  {escape(str(row['source']))}, {row['size']} operators: "
            line += escape(str(row["note"])) if not row["known"] else (
                f"{len(row['present'])} present, absent: {escape(', '.join(row['absent'])) or 'none'}")
        console.print(line)
