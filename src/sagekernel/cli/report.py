"""`sage report RUN [RUN ...]`: the paper's metrics, tables and figures from recorded runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from sagekernel.cli.options import at_least, output_file
from sagekernel.errors import SageError
from sagekernel.terminal import Console

RUN_HELP = ("A workspace directory (all its runs with finished operators), WORKSPACE:RUN_ID, or "
            "WORKSPACE:latest (its newest run). Several runs print a Table 1 comparison.")


REPORT_MEMORY_HELP = ("The memory the runs learned into: a PostgreSQL URL (to give its password) or a "
                      "workspace directory / .db file. Default: the memory each run recorded (its "
                      "workspace's, its shared memory, with the password from $SAGE_MEMORY_URL or "
                      "~/.pgpass, or its frozen snapshot). A run that learned into another memory is "
                      "refused.")


def report(
    runs: Annotated[list[str], typer.Argument(help=RUN_HELP, show_default=False)],
    html: Annotated[Path | None, typer.Option("--html", help="Write one self-contained HTML report "
                                              "(tables and plots, opens offline) to this path.")] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Write the per-run numbers as CSV.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON, not tables.")] = False,
    fast_p: Annotated[float, typer.Option("--fast-p", help="p of Fast_p: a solved operator counts as fast "
                                          "when T_ref/T_best > p.")] = 1.0,
    memory: Annotated[str | None, typer.Option("--memory", help=REPORT_MEMORY_HELP)] = None,
) -> None:
    """Report runs: CR, ER (per level), Fast_p, S_self, speedups, spend, and the memory."""
    from sagekernel.report.build import build, notes_for, to_csv, to_json
    from sagekernel.report.html import write_html
    from sagekernel.report.load import load
    from sagekernel.report.tables import render_terminal

    at_least(fast_p, 0, "--fast-p")
    output_file(html, "--html")
    output_file(csv, "--csv")
    loaded = load(runs, memory)
    reports = build(loaded, fast_p)
    notes = [*loaded.notes, *notes_for(reports)]
    out = Console(stderr=as_json)  # with --json, stdout carries only the JSON
    if as_json:
        typer.echo(json.dumps(to_json(reports, notes), indent=2))
    else:
        render_terminal(Console(), reports, notes)
    try:
        if html is not None:
            out.print(escape(f"wrote {write_html(html, reports, notes)}"))
        if csv is not None:
            csv.parent.mkdir(parents=True, exist_ok=True)
            csv.write_text(to_csv(reports), encoding="utf-8")
            out.print(escape(f"wrote {csv}"))
    except OSError as exc:
        where = exc.filename or "its path"
        raise SageError(f"cannot write the report to {where}: {exc.strerror or exc}") from exc


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
    app.command("report")(report)
