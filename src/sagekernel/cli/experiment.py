"""`sage experiment`: argument handling only; the work is in sagekernel.experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel.cli.options import OptionError, at_least, output_file, read_text
from sagekernel.cli.run_options import with_run_options
from sagekernel.errors import SageError
from sagekernel.runner.config import EXPERIMENT
from sagekernel.terminal import Console, printable

app = typer.Typer(
    help="Experiments: the paper's matrices of streams (methods x models x schedules ...) as one "
    "command, resumable, with parallel workers or Ray.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

WHAT_HELP = (
    "An experiment file (TOML), a preset name (`sage experiment presets`), or an experiment "
    "directory to continue."
)


def _overrides(
    model: list[str],
    suite: str | None,
    target: str | None,
    device: str | None,
    budget: int | None,
    limit: int | None,
    memory: str | None = None,
) -> object:
    from sagekernel.experiment.spec import Overrides

    models = {}
    for pair in model:
        label, sep, spec = pair.partition("=")
        if not sep or not label.strip() or not spec.strip():
            raise SageError(
                f"--model expects LABEL=SPEC (e.g. qwen=openai:qwen@http://host/v1), got {pair!r}"
            )
        models[label.strip()] = spec.strip()
    return Overrides(
        models=models,
        blocks={"suite": suite, "target": target, "device": device, "budget": budget, "limit": limit},
        memory=memory,
    )


def _shared_memory(value: str | None) -> str | None:
    """`--memory`: a PostgreSQL URL, checked like `sage run --memory`; unlike there, an experiment
    does not fall back on $SAGE_MEMORY_URL (which streams share a memory is the spec's choice)."""
    if value is None:
        return None
    from sagekernel.memory.backend import MemoryBackendError, connect_memory, memory_url

    if not value.strip():
        raise OptionError("--memory", "give a PostgreSQL URL, postgresql://user@host:port/db")
    try:
        url = memory_url(value.strip())
        assert url is not None
        connect_memory(url).close()  # reachable and migrated before the experiment directory is written
    except MemoryBackendError as exc:
        raise OptionError("--memory", str(exc).split(": ", 1)[-1]) from None
    return url


def _check_blocks(suite: str | None, target: str | None, device: str | None, ray: str | None) -> None:
    """Refuse an unknown --suite, --target or --device and a malformed --ray before the experiment
    directory is written (each stream would otherwise fail on its own, after the plan was made)."""
    from sagekernel.targets import get_target, target_names
    from sagekernel.tasks.suites import SUITE_NAMES

    if suite is not None and suite not in SUITE_NAMES and not Path(suite).expanduser().is_dir():
        raise OptionError("--suite", f"unknown suite {suite!r}: use one of {', '.join(SUITE_NAMES)} or a "
                                     "directory of task files")
    if target is not None:
        try:
            get_target(target)
        except SageError as exc:
            raise OptionError("--target", str(exc)) from None
    if device is not None:
        names = {d.name for t in ([target] if target else target_names()) for d in get_target(t).devices()}
        if device not in names:
            raise OptionError("--device", f"no target has a device {device!r}; devices: "
                                          f"{', '.join(sorted(names))}")
    if ray is not None and ray not in ("auto", "local") and ":" not in ray:
        raise OptionError("--ray", f"{ray!r} is no cluster address (HOST:PORT or ray://HOST:PORT), auto "
                                   "or local")


@app.command("run")
@with_run_options(EXPERIMENT)
def run_command(
    what: Annotated[str, typer.Argument(help=WHAT_HELP, show_default=False)],
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir", help="Experiment directory (default: experiments/<name>). Rerun to continue it."
        ),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Streams at once on this machine.")] = 1,
    devices: Annotated[
        list[str],
        typer.Option(
            "--devices", help="Device slots, one per worker: cuda:0,1 | npu:0,1 | cpu:0-1,2-3 (repeatable)."
        ),
    ] = [],  # noqa: B006
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Run on Ray: a cluster ADDRESS, auto (the running cluster), or local (start one here).",
        ),
    ] = None,
    ray_ship: Annotated[
        bool,
        typer.Option("--ray-ship", help="With --ray: ship each workspace to its task and back (workers "
                     "that do not see the experiment directory)."),
    ] = False,
    model: Annotated[
        list[str], typer.Option("--model", help="Replace a model: LABEL=SPEC (repeatable).")
    ] = [],  # noqa: B006
    suite: Annotated[str | None, typer.Option(help="Use this suite in every block.")] = None,
    target: Annotated[str | None, typer.Option(help="Use this target in every block.")] = None,
    device: Annotated[str | None, typer.Option(help="The target's device in every block.")] = None,
    budget: Annotated[int | None, typer.Option(min=1, help="T, rounds per operator, in every block.")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N operators of each stream.")
    ] = None,
    stream: Annotated[
        list[str],
        typer.Option("--stream", help="Run only these streams (repeatable; donors must be finished)."),
    ] = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON on stdout.")] = False,
    progress: Annotated[bool, typer.Option(help="Show the live view (on stderr).")] = True,
    **settings: Any,
) -> None:
    """Run (or continue) every unfinished stream of an experiment; finished streams are never rerun."""
    from sagekernel.experiment.api import run_experiment

    _check_blocks(suite, target, device, ray)
    shared = _shared_memory(settings.pop("memory"))
    overrides = _overrides(model, suite, target, device, budget, limit, shared)
    assert not settings, settings  # every knob of the EXPERIMENT surface is handled above
    exp, outcome = run_experiment(
        what,
        directory=directory,
        overrides=overrides,  # type: ignore[arg-type]
        workers=workers,
        devices=devices,
        ray=ray,
        ray_ship=ray_ship,
        live=progress,
        only=set(stream) or None,
    )
    data = {
        "directory": str(exp.root),
        "finished": outcome.finished,
        "failed": outcome.failed,
        "blocked": outcome.blocked,
        "wall_s": round(outcome.wall_s, 3),
    }
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        console = Console()
        console.print(
            escape(
                f"{exp.root}: {len(outcome.finished)} streams finished, {len(outcome.failed)} "
                f"failed, {len(outcome.blocked)} blocked ({outcome.wall_s:.1f} s)"
            )
        )
        for name, why in outcome.failed.items():
            console.print(escape(f"  failed {name}: {why}"))
        for name in outcome.blocked:
            console.print(escape(f"  blocked {name}: its donor did not finish"))
        console.print(escape(f"report: sage experiment report {exp.root}"))
    if not outcome.ok:
        raise typer.Exit(3)


@app.command("status")
def status_command(
    directory: Annotated[Path, typer.Argument(help="The experiment directory.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Every stream's progress: state, operator in flight, done/total, CR, ER."""
    from sagekernel.experiment.layout import ExperimentDir
    from sagekernel.experiment.live import status_table
    from sagekernel.experiment.status import experiment_status

    exp = ExperimentDir(directory)
    name = exp.name
    rows = experiment_status(exp)
    if as_json:
        print(
            json.dumps(
                {"experiment": name, "directory": str(directory), "streams": [r.to_dict() for r in rows]},
                indent=2,
            )
        )
        return
    Console().print(status_table(rows, title=f"experiment {name} ({directory})"))
    for r in rows:
        if r.message and r.state in ("failed", "interrupted"):
            Console().print(escape(f"{r.name}: {r.message}"))


@app.command("report")
def report_command(
    directory: Annotated[Path, typer.Argument(help="The experiment directory.", show_default=False)],
    html: Annotated[Path | None, typer.Option("--html", help="Write one self-contained HTML file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the tables and figures as JSON.")] = False,
    fast_p: Annotated[float, typer.Option("--fast-p", help="p of Fast_p.")] = 1.0,
) -> None:
    """The paper-shaped tables of an experiment: Table 1, Table 2, Figure 5, Figure 4, Table 7, Sec. 4.3."""
    from sagekernel.experiment import html as html_report
    from sagekernel.experiment.api import build_report, experiment_report

    at_least(fast_p, 0, "--fast-p")
    output_file(html, "--html")
    if as_json:
        print(json.dumps(experiment_report(directory, fast_p), indent=2))
    exp, streams, tables, notes = build_report(directory, fast_p)
    out = Console(stderr=as_json)
    if not as_json:
        for note in notes:
            out.print(f"[yellow]note:[/] {escape(note)}")
        for t in tables:
            table = Table(title=t.title, title_justify="left", header_style="bold")
            for i, h in enumerate(t.header):
                table.add_column(h, justify="left" if i < html_report.LEFT.get(t.key, 1) else "right")
            for row in t.rows:
                table.add_row(*(escape(c) for c in row))
            out.print(table)
            if t.note:
                out.print(f"[dim]{escape(t.note)}[/]")
    if html is not None:
        data = exp.plan_data()
        path = html_report.write(
            html, data["name"], data.get("description", ""), exp.root, streams, tables, notes
        )
        out.print(escape(f"wrote {path}"))


@app.command("presets")
def presets_command(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The built-in experiments, named after the paper's."""
    from sagekernel.experiment import presets

    items = {name: presets.description(name) for name in presets.names()}
    if as_json:
        print(json.dumps(items, indent=2))
        return
    for name, text in items.items():
        typer.echo(printable(f"{name:20} {text}"))


@app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="A preset name or an experiment file.", show_default=False)],
    streams: Annotated[bool, typer.Option("--streams", help="List the streams it expands to.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --streams: JSON.")] = False,
) -> None:
    """Print a preset's TOML (copy it to make your own), or the streams a preset or file expands to."""
    from pathlib import Path

    from sagekernel.experiment import presets
    from sagekernel.experiment.plan import expand
    from sagekernel.experiment.spec import load

    path = Path(name)
    is_file = path.suffix == ".toml" or path.is_file()
    if is_file and not path.is_file():
        from sagekernel.experiment.spec import ExperimentSpecError

        raise ExperimentSpecError(f"no experiment file {path}")
    if not streams:
        typer.echo(printable(read_text(path, "NAME") if is_file else presets.text(name)), nl=False)
        return
    plan = expand(load(path) if is_file else presets.load(name))
    if as_json:
        print(json.dumps([s.to_dict() for s in plan], indent=2))
        return
    for s in plan:
        donor = f"  from {s.donor} ({s.memory})" if s.donor else ""
        typer.echo(printable(f"{s.name:40} {s.method:20} {s.model:10} {s.schedule:18} T={s.budget}{donor}"))


def register(root: typer.Typer) -> None:
    """Attach `sage experiment` to the root app."""
    root.add_typer(app, name="experiment")
