"""`sage eval` (judge one kernel file) and `sage selfcheck` (a suite's kernels and canaries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel.cli.options import OptionError, pinned_device, read_text
from sagekernel.errors import SageError
from sagekernel.terminal import Console

console = Console()


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
    app.command("eval")(eval_command)
    app.command("selfcheck")(selfcheck_command)


def _load_task(spec: str, sandbox: str = "auto") -> Any:
    """A task named by a file (loaded in the loading child, confined by `sandbox`, as `sage tasks
    check` loads it) or by its name in the built-in suite."""
    from sagekernel.errors import TaskError
    from sagekernel.tasks.isolate import load_files_isolated
    from sagekernel.tasks.loader import find_reference_kernels
    from sagekernel.tasks.record import LoadProblem
    from sagekernel.tasks.suites import find_task

    path = Path(spec).expanduser()
    if path.suffix == ".py" and path.is_file():
        (loaded,) = load_files_isolated([path.resolve()], None, sandbox_kind=sandbox)
        if isinstance(loaded, LoadProblem):
            raise TaskError(loaded.message)
        loaded.reference_kernels = find_reference_kernels(path.resolve())
        return loaded
    return find_task(spec)


def _config(skip_timing: bool, threads: int, sandbox: str, baseline: str = "eager",
            target: str = "cpu") -> Any:
    from sagekernel.harness.baseline import baseline_problem
    from sagekernel.harness.config import HarnessConfig, HarnessConfigError

    problem = baseline_problem(baseline, target)
    if problem:
        raise OptionError("--baseline", problem)
    try:
        return HarnessConfig(skip_timing=skip_timing, threads=threads, sandbox=sandbox, baseline=baseline)
    except HarnessConfigError as exc:  # "harness setting threads: ..." -> "--threads: ..."
        setting = str(exc).split(":", 1)[0].removeprefix("harness setting ")
        raise OptionError(f"--{setting}", str(exc).split(":", 1)[1].strip()) from None


def _target_and_device(target: str, device: str | None) -> Any:
    """The target, and a check that it has `device` (before any task is loaded or anything run)."""
    from sagekernel.targets import get_target

    try:
        target_obj = get_target(target)
    except SageError as exc:
        raise OptionError("--target", str(exc)) from None
    names = [d.name for d in target_obj.devices()]
    if device is not None and device not in names:
        raise OptionError("--device", f"target {target!r} has no device {device!r}; its devices: "
                                      f"{', '.join(names)}")
    return target_obj


def _folder_candidate(target: Any, task: Any, path: Path, wanted: list[str]) -> dict[str, Path]:
    """The files of a candidate kept as a folder, by the target's relative paths (NPUKernelBench's
    op_host/, op_kernel/ layout): the target's own reader when it has one (ascendc: helper files
    too), else each of `wanted` under `path`. A missing one is named."""
    from sagekernel.candidate import folder_files

    reader = getattr(target, "folder_files", None)
    found, missing = reader(task, path) if reader is not None else folder_files(path, wanted)
    if missing:
        raise OptionError("KERNEL_FILE", f"{path} is a folder without {', '.join(missing)} (the target's "
                                         f"files, by path: {', '.join(wanted)})")
    return found


def eval_command(
    task: Annotated[str, typer.Argument(help="A task name from the built-in suite, or a task file path.")],
    kernel_file: Annotated[
        Path,
        typer.Argument(
            help="The candidate kernel source (C or C++), or a folder holding the target's files by "
            "path (NPUKernelBench's op_host/, op_kernel/ layout).", exists=True, dir_okay=True, readable=True
        ),
    ],
    target: Annotated[str, typer.Option("--target", "-t", help="Target name.")] = "cpu",
    device: Annotated[
        str | None,
        typer.Option("--device", "-d", help="The target's device (default: its first); cuda:N or npu:N also "
                                            "pins the evaluation to card N."),
    ] = None,
    skip_timing: Annotated[bool, typer.Option("--skip-timing", help="Stop after correctness.")] = False,
    threads: Annotated[int, typer.Option("--threads", help="Threads for candidate and reference.")] = 1,
    sandbox: Annotated[str, typer.Option("--sandbox", help="auto, bwrap, unshare or process.")] = "auto",
    baseline: Annotated[str, typer.Option("--baseline", help="What the speedup is over: eager, compile "
                                                          "(torch.compile) or best (cpu target).")] = "eager",
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    plan: Annotated[bool, typer.Option("--plan", help="ascendc: print the build and run plans.")] = False,
    more_files: Annotated[list[Path] | None, typer.Argument(help="Further files (multi-file).")] = None,
) -> None:
    """Judge one candidate against a task: lint, build, correctness, timing, quarantine. A
    multi-file target takes every file; each is matched to the target's file list by its path or
    name."""
    if plan:  # the plan printer lives with the target (sagekernel.targets.ascendc.plan)
        from sagekernel.targets.ascendc.plan import print_plan

        if target != "ascendc":
            raise typer.BadParameter("--plan is implemented for --target ascendc", param_hint="--plan")

        raise typer.Exit(print_plan(task, [kernel_file, *(more_files or [])], as_json=as_json))
    from sagekernel.candidate import Candidate
    from sagekernel.harness.evaluate import evaluate

    device = pinned_device(device)  # cuda:N / npu:N: this process and its children see card N only
    target_obj = _target_and_device(target, device)
    config = _config(skip_timing, threads, sandbox, baseline, target)
    task_obj = _load_task(task, config.sandbox)
    wanted = [f.path for f in target_obj.files(task_obj)]
    files: dict[str, str] = {}
    if kernel_file.is_dir():
        for rel, file in _folder_candidate(target_obj, task_obj, kernel_file, wanted).items():
            files[rel] = read_text(file, "KERNEL_FILE")
    given = [*([] if kernel_file.is_dir() else [kernel_file]), *(more_files or [])]
    texts = {path: read_text(path, "KERNEL_FILE") for path in given}
    for path in given:
        # a full path match first: op_host/equal.cpp and op_kernel/equal.cpp share a file name
        match = next((w for w in wanted if str(path).endswith("/" + w) or str(path) == w), None) or \
            next((w for w in wanted if Path(w).name == path.name), None)
        if match is None and len(wanted) == 1 and len(given) == 1:
            match = wanted[0]  # a single-file target takes its one file under any name
        if match is None:
            raise typer.BadParameter(f"{path} is none of the target's files: {', '.join(wanted)}")
        files[match] = texts[path]
    verdict = evaluate(task_obj, Candidate(files), target_obj, config, device=device)
    if as_json:
        typer.echo(json.dumps(verdict.to_dict(), indent=2, default=str))
    else:
        colour = "green" if verdict.ok else "red"
        console.print(
            f"[bold {colour}]{verdict.stage.value.upper()}[/] {escape(task_obj.name)} "
            f"({escape(str(kernel_file))})"
        )
        console.print(escape(verdict.message))
        console.print(f"evidence: {verdict.evidence}" + ("; [bold red]SUSPECT[/] (no credit): "
                      + escape(", ".join(verdict.quarantine)) if verdict.suspect else ""))
        for f in verdict.lint:
            where = f" line {f.line}" if f.line else ""
            console.print(
                f"  [yellow]{escape(f.rule)}[/]{where}: {escape(f.reason)}"
                + (f"\n    {escape(f.excerpt)}" if f.excerpt else "")
            )
        table = Table(show_header=False, box=None)
        if (
            verdict.candidate_ms is not None
            and verdict.reference_ms is not None
            and verdict.speedup is not None
        ):
            table.add_row("candidate", f"{verdict.candidate_ms:.4f} ms")
            table.add_row("reference", f"{verdict.reference_ms:.4f} ms")
            table.add_row("speedup", f"{verdict.speedup:.2f}x over {verdict.timing.get('baseline', 'eager')}")
            iv = verdict.timing.get("speedup_interval") or {}
            if iv:
                table.add_row("95% interval", f"{iv['low']:.2f}x - {iv['high']:.2f}x ({iv['rounds']} rounds)")
            roof = verdict.timing.get("roofline") or {}
            reached = f"{roof['fraction']:.3f} of the {roof['bound']} bound" if "fraction" in roof else None
            table.add_row("roofline", reached or escape(str(roof.get("unavailable", "-"))))
        for k, v in verdict.durations_s.items():
            table.add_row(f"{k} time", f"{v:.3f} s")
        table.add_row(
            "sandbox",
            escape(f"{verdict.sandbox.get('kind', '?')}, seccomp {verdict.sandbox.get('seccomp', '?')}"),
        )
        if verdict.flags:
            table.add_row("flags", escape(", ".join(verdict.flags)))
        console.print(table)
    raise typer.Exit(0 if verdict.ok else 1)


def selfcheck_command(
    suite: Annotated[
        str, typer.Option("--suite", "-s", help="builtin, demo, level1..3, or a directory.")
    ] = "builtin",
    target: Annotated[str, typer.Option("--target", "-t", help="Target name.")] = "cpu",
    device: Annotated[
        str | None, typer.Option("--device", "-d", help="The target's device (default: its first).")
    ] = None,
    skip_timing: Annotated[
        bool, typer.Option("--skip-timing", help="Reference kernels: correctness only.")
    ] = False,
    baseline: Annotated[str, typer.Option("--baseline", help="What the speedup is over: eager, compile "
                                                          "(torch.compile) or best (cpu target).")] = "eager",
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Every hand-written kernel must pass the full harness; every null-kernel canary must fail.
    The cpu target needs a kernel for every task; other targets check the tasks they have one for."""
    from rich.progress import Progress

    from sagekernel.selfcheck import planned_checks, run_selfcheck
    from sagekernel.tasks.suites import load_suite

    _target_and_device(target, device)
    tasks = load_suite(suite, strict=False)
    if target != "cpu":
        tasks = [t for t in tasks if target in t.reference_kernels]
    config = _config(skip_timing, 1, "auto", baseline, target)
    with Progress(console=Console(stderr=True), transient=True, disable=as_json) as progress:
        bar = progress.add_task("selfcheck", total=planned_checks(tasks, target))
        rows = run_selfcheck(
            tasks,
            config,
            target,
            device,
            starting=lambda task, label: progress.update(bar, description=f"{task.name} {label}"),
            done=lambda _row: progress.advance(bar),
        )
    failures = [r for r in rows if not r.ok]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "suite": suite,
                    "tasks": len(tasks),
                    "checks": len(rows),
                    "failures": len(failures),
                    "rows": [r.__dict__ for r in rows],
                },
                indent=2,
            )
        )
    else:
        table = Table(
            title=f"selfcheck {suite}: {len(tasks)} tasks, {len(rows)} checks, {len(failures)} failures"
        )
        for col in ("task", "kernel", "expect", "stage", "ok", "seconds", "speedup", "95% interval",
                    "roofline", "message"):
            table.add_column(col, overflow="fold", max_width=60 if col == "message" else None)
        # failures last, and listed again under the table: a log's tail is what people read
        for r in sorted(rows, key=lambda r: (not r.ok, r.task, r.kernel)):
            table.add_row(
                escape(r.task),
                r.kernel,
                r.expect,
                r.stage,
                "[green]yes[/]" if r.ok else "[red]NO[/]",
                f"{r.seconds:.2f}",
                f"{r.speedup:.2f}x" if r.speedup else "",
                f"{r.speedup_low:.2f}–{r.speedup_high:.2f}x" if r.speedup_low and r.speedup_high else "",
                f"{r.roofline_fraction:.2f}" if r.roofline_fraction else "",
                "" if r.ok else escape(r.message[:300]),
            )
        console.print(table)
        for r in failures:
            console.print(
                f"[red]FAILED[/] {escape(r.task)} {r.kernel} (expected {r.expect}, stage {r.stage}): "
                f"{escape(r.message)}",
                soft_wrap=True,
            )
        console.print(f"{len(rows) - len(failures)} of {len(rows)} checks as expected", soft_wrap=True)
    raise typer.Exit(1 if failures else 0)
