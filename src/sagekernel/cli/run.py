"""`sage run`: argument handling only; the work is in sagekernel.runner.run."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel.cli.run_options import run_config, with_run_options
from sagekernel.runner.config import RUN
from sagekernel.terminal import Console


@with_run_options(RUN)
def run_command(
    as_json: bool = typer.Option(False, "--json", help="Print the final summary as JSON on stdout."),
    **settings: Any,
) -> None:
    """Run the agent over a stream of operators, learning as it goes (resumable: rerun to continue)."""
    from sagekernel.agent.exceptions import RunInterrupted
    from sagekernel.runner.progress import QuietProgress, RichProgress
    from sagekernel.runner.run import RunSummary, run

    cfg = run_config(settings)
    console = Console()
    try:
        summary = run(cfg, progress=RichProgress() if cfg.progress and not as_json else QuietProgress())
    except RunInterrupted as exc:
        if isinstance(exc.summary, RunSummary):
            _print(exc.summary, console, as_json)  # its message says how to resume
        else:
            Console(stderr=True).print(f"[yellow]{escape(str(exc))}[/]")
        raise typer.Exit(130) from None
    _print(summary, console, as_json)


def _print(summary: Any, console: Console, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.to_dict(), indent=2, sort_keys=True))
        return
    table = Table(title=escape(f"run {summary.run_id} ({summary.status})"), show_header=True,
                  header_style="bold")
    for col in ("#", "operator", "level", "compiled", "correct", "rounds", "T_first ms", "T_best ms",
                "speedup"):
        table.add_column(col, justify="left" if col == "operator" else "right")
    for r in summary.results:
        table.add_row(str(r["position"] + 1), escape(str(r["operator"])), str(r["level"]),
                      "yes" if r["compiled"] else "no", "yes" if r["correct"] else "no",
                      str(r["rounds_used"]), _ms(r["t_first_ms"]), _ms(r["t_best_ms"]),
                      f"{r['speedup']:.2f}x" if r["speedup"] else "-")
    console.print(table)
    for r in summary.results:
        if r.get("error"):
            console.print(escape(f"operator {r['operator']} failed and was recorded as such: {r['error']}"))
    fast, s_self = _pct(summary.fast_1), f"{summary.s_self:.2f}x" if summary.s_self is not None else "-"
    console.print(escape(f"{summary.method} on {summary.suite}: {summary.done}/{summary.operators} "
                         "operators, "
                         f"CR {_pct(summary.cr)}, ER {_pct(summary.er)}, Fast_1.0 {fast}, S_self {s_self}, "
                         f"{summary.prompt_tokens + summary.completion_tokens} tokens "
                         f"(workspace {summary.workspace})"))
    if summary.message:
        console.print(escape(summary.message))


def _pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def register(app: typer.Typer) -> None:
    """Attach `sage run` to the root app."""
    app.command("run")(run_command)
