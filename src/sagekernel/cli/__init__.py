"""The `sage` command. Argument handling only: every command calls into a module.

Sub-commands live one file per area (memory, tasks, harness, log, run, report, experiment) to keep each
file short; this file wires them together and turns `SageError`s into plain messages.
"""

from __future__ import annotations

import errno
import signal
import sqlite3
import sys

import pydantic
import typer
from rich.markup import escape

from sagekernel.errors import SageError
from sagekernel.terminal import Console

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
#: The option parser's own errors (typer vendors click, so they are found through typer's classes).
_USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ABORT: tuple[type[BaseException], ...] = (typer.Abort, getattr(sys.modules[_USAGE_ERROR.__module__], "Abort",
                                                                typer.Abort))


def _register() -> None:
    # Imported here so `sage --help` stays fast and each area owns its own file.
    from sagekernel.cli import (
        audit,
        doctor,
        experiment,
        harness,
        lint,
        log,
        mcp,
        memory,
        peaks,
        report,
        run,
        tasks,
    )

    for module in (memory, tasks, harness, log, run, mcp, report, audit, doctor, experiment, lint, peaks):
        module.register(app)


_register()


def db_explain(exc: sqlite3.Error) -> SageError:
    from pathlib import Path

    from sagekernel.db import _explain

    return _explain(exc, Path("(workspace)"))


def _error(text: str) -> None:
    """One line on stderr (never wrapped: an error is read in logs and grepped)."""
    err_console.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)


def main() -> None:
    """Run `sage`; every failure a user can cause ends in one line naming what to fix, exit 2."""
    try:
        code = app(standalone_mode=False)
    except _USAGE_ERROR as exc:  # a bad or missing option or argument value, found by the parser
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        _error(f"{exc.format_message()}{hint}")  # type: ignore[attr-defined]
        sys.exit(2)
    except _ABORT:  # Ctrl-C at a prompt
        _interrupted()
    except SageError as exc:
        _error(str(exc))
        sys.exit(2)
    except pydantic.ValidationError as exc:  # a settings model built from options the command did not map
        from sagekernel.cli.options import from_validation

        _error(str(from_validation(exc)))
        sys.exit(2)
    except sqlite3.Error as exc:  # a database failure below the layers that explain their own
        _error(str(db_explain(exc)))
        sys.exit(2)
    except UnicodeDecodeError as exc:  # a file that should be text is not (options.read_text names it)
        _error(f"a file given is not UTF-8 text ({exc.reason} at byte {exc.start})")
        sys.exit(2)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        _error(f"{exc.strerror or exc}{where}{full}")
        sys.exit(2)
    except KeyboardInterrupt:
        _interrupted()
    if code == 130:  # a command that was interrupted and said so: more Ctrl-Cs must not cut the exit
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code if isinstance(code, int) else 0)


def _interrupted() -> None:
    """Ctrl-C: say so once and leave; further Ctrl-Cs while leaving are ignored (a triple Ctrl-C
    used to print a traceback from the cleanup it interrupted)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    err_console.print("[yellow]interrupted[/]")
    sys.exit(130)
