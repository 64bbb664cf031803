"""The `sage` command. Argument handling only: every command calls into a module.

Sub-commands live one file per area (memory, tasks, harness, log, run, report, experiment) to keep each
file short; this file wires them together and turns `SageError`s into plain messages.
"""

from __future__ import annotations

import errno
import sqlite3
import sys

import typer
from rich.console import Console
from rich.markup import escape

from sagekernel.errors import SageError

app = typer.Typer(
    name="sage",
    help="SAGE: an LLM agent that writes and optimises compute kernels, with a memory that learns "
         "which experiences help (ATU) and keeps the best as resident rules (UGC).",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
err_console = Console(stderr=True)


def _register() -> None:
    # Imported here so `sage --help` stays fast and each area owns its own file.
    from sagekernel.cli import audit, doctor, experiment, harness, lint, log, mcp, memory, report, run, tasks

    for module in (memory, tasks, harness, log, run, mcp, report, audit, doctor, experiment, lint):
        module.register(app)


_register()


def db_explain(exc: sqlite3.Error) -> SageError:
    from pathlib import Path

    from sagekernel.db import _explain

    return _explain(exc, Path("(workspace)"))


def main() -> None:
    try:
        app()
    except SageError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(2)
    except sqlite3.Error as exc:  # a database failure below the layers that explain their own
        err_console.print(f"[bold red]error:[/] {escape(str(db_explain(exc)))}")
        sys.exit(2)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        err_console.print(f"[bold red]error:[/] {escape(f'{exc.strerror or exc}{where}{full}')}")
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)
