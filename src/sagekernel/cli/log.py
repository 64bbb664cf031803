"""`sage log list|show|search|tools`: read the model exchange log and the MCP tool-call log of a workspace
(read-only)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.text import Text

from sagekernel import db
from sagekernel.cli.options import OptionError, choice
from sagekernel.errors import SageError
from sagekernel.models.exchange_log import (
    STATUSES,
    Exchange,
    get_exchange,
    has_log,
    has_tool_calls,
    list_exchanges,
    list_tool_calls,
    run_logged,
    search_exchanges,
)
from sagekernel.runner.store import RunStore
from sagekernel.terminal import Console, printable

log_app = typer.Typer(name="log", help="Inspect the LLM exchange log (every prompt, reply, retry and error).",
                      no_args_is_help=True, add_completion=False)

WorkspaceOpt = typer.Option(Path("."), "--workspace", "-w", help="Workspace directory (or its sage.db).")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
RunOpt = typer.Option(None, "--run", help="Only exchanges of this run id.")


def register(app: typer.Typer) -> None:
    """Attach `sage log ...` to the root app."""
    app.add_typer(log_app, name="log")


def _open(workspace: Path) -> sqlite3.Connection:
    conn = db.connect(workspace, readonly=True)
    if not has_log(conn):
        conn.close()
        raise SageError(f"the workspace {workspace} has no exchange log yet (no model call was made in it)")
    return conn


def _known_run(conn: sqlite3.Connection, run: str | None) -> None:
    """Refuse a --run that names no run and no logged exchange (an empty list would hide a typo)."""
    if run is None:
        return
    if run_logged(conn, run) or ("runs" in db.tables(conn) and RunStore(conn).run(run) is not None):
        return
    conn.close()
    raise OptionError("--run", f"no run {run!r} in this workspace (`sage log list` shows the run ids)")


def _summary(ex: Exchange) -> dict[str, Any]:
    data = ex.to_dict()
    for key in ("messages", "params", "extra"):
        data.pop(key)
    return data


def _print_rows(rows: list[Exchange], title: str, *, snippet: bool = False) -> None:
    """One line per exchange (id, UTC time, run, operator/round, status, tokens, latency, cost | text),
    cut to the terminal width; `sage log show ID` has everything."""
    out = Console(highlight=False)
    out.print(title, style="bold", markup=False)
    for ex in rows:
        text = (ex.snippet or "") if snippet else (ex.error if ex.status != "ok" else ex.reply_text) or ""
        where = "" if ex.operator is None else ex.operator + ("" if ex.round is None else f"/{ex.round}")
        fields = [
            f"#{ex.id:<4}", ex.created_at[11:19], ex.run_id or "-", where or "-",
            ex.status + (f"#{ex.attempt}" if ex.attempt > 1 or ex.status == "retry" else ""),
            (f"{ex.prompt_tokens}+{ex.completion_tokens}tok"
             + (f" ({ex.cached_tokens} cached)" if ex.cached_tokens is not None else "")
             if ex.prompt_tokens is not None else "-"),
            f"{ex.latency_s:.2f}s" if ex.latency_s is not None else "-",
            f"${ex.cost_usd:.4f}" if ex.cost_usd is not None else "$?",
        ]
        line = Text(printable("  ".join(fields) + " | " + " ".join(text.split())))
        line.stylize("red" if ex.status == "error" else "yellow" if ex.status == "retry" else "")
        out.print(line, no_wrap=True, overflow="ellipsis", crop=True)


@log_app.command("list")
def list_cmd(workspace: Path = WorkspaceOpt, run: str | None = RunOpt,
             status: str | None = typer.Option(None, "--status", help="ok | retry | error"),
             limit: int = typer.Option(50, "--limit", "-n", min=1, help="Newest N exchanges."),
             as_json: bool = JsonOpt) -> None:
    """List exchanges, newest first."""
    if status is not None:
        choice(status, STATUSES, "--status")
    conn = _open(workspace)
    _known_run(conn, run)
    try:
        rows = list_exchanges(conn, run_id=run, status=status, limit=limit)
    finally:
        conn.close()
    if as_json:
        typer.echo(json.dumps([_summary(r) for r in rows], indent=2, ensure_ascii=False))
        return
    _print_rows(rows, f"{len(rows)} exchange(s)" + (f" in run {run}" if run else "") + ", newest first")


@log_app.command("show")
def show_cmd(exchange_id: int = typer.Argument(..., help="Exchange id (from `sage log list`)."),
             workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt) -> None:
    """Show one exchange in full: messages, parameters, reply, usage, error."""
    conn = _open(workspace)
    try:
        ex = get_exchange(conn, exchange_id)
    finally:
        conn.close()
    if ex is None:
        raise SageError(f"no exchange {exchange_id} in {db.db_path(workspace)} (see `sage log list`)")
    if as_json:
        typer.echo(json.dumps(ex.to_dict(), indent=2, ensure_ascii=False))
        return
    out = Console(highlight=False)
    out.print(f"[bold]exchange {ex.id}[/]  " + escape(f"{ex.created_at}  status={ex.status}  "
                                                     f"attempt={ex.attempt}  call={ex.call_id[:12]}"))
    tags = {"run": ex.run_id, "operator": ex.operator, "round": ex.round, **ex.tags}
    out.print("model: " + (ex.model_spec + (f" ({ex.model})" if ex.model else "")), markup=False)
    out.print("tags: " + ", ".join(f"{k}={v}" for k, v in tags.items() if v is not None), markup=False)
    out.print("params: " + json.dumps(ex.params, ensure_ascii=False), markup=False)
    if ex.prompt_tokens is not None:
        cost = f"${ex.cost_usd:.6f}" if ex.cost_usd is not None else "unknown"
        cached = f" ({ex.cached_tokens} from the prefix cache)" if ex.cached_tokens is not None else ""
        out.print(f"usage: {ex.prompt_tokens} prompt{cached} + {ex.completion_tokens} completion tokens, "
                  f"latency {ex.latency_s or 0:.3f}s, cost {cost}, finish={ex.finish_reason}", markup=False)
    if ex.extra:
        out.print("extra: " + json.dumps(ex.extra, ensure_ascii=False), markup=False)
    for m in ex.messages:
        out.rule(f"{m['role']}")
        out.print(m["content"], markup=False)
    if ex.reply_text is not None:
        out.rule("reply")
        out.print(ex.reply_text, markup=False)
    if ex.error:
        out.rule("error", style="red")
        out.print(ex.error, markup=False)


@log_app.command("search")
def search_cmd(query: str = typer.Argument(..., help="FTS5 query over prompts and replies, e.g. 'softmax AND "
                                                      "\"shared memory\"'."),
               workspace: Path = WorkspaceOpt, run: str | None = RunOpt,
               limit: int = typer.Option(20, "--limit", "-n", min=1), as_json: bool = JsonOpt) -> None:
    """Full-text search over prompts and replies, best match first."""
    conn = _open(workspace)
    _known_run(conn, run)
    try:
        rows = search_exchanges(conn, query, run_id=run, limit=limit)
    finally:
        conn.close()
    if as_json:
        typer.echo(json.dumps([_summary(r) for r in rows], indent=2, ensure_ascii=False))
        return
    _print_rows(rows, f"{len(rows)} match(es) for {query!r}, best first", snippet=True)


@log_app.command("tools")
def tools_cmd(workspace: Path = WorkspaceOpt, run: str | None = RunOpt,
              limit: int = typer.Option(50, min=1, help="Show the last N tool calls."),
              full: bool = typer.Option(False, help="With each call's arguments and result."),
              as_json: bool = JsonOpt) -> None:
    """The tool calls a coding agent made through `sage mcp` (refused and failed calls included)."""
    conn = db.connect(workspace, readonly=True)
    _known_run(conn, run)
    try:
        if not has_tool_calls(conn):
            raise SageError(f"the workspace {workspace} has no tool-call log (an older SAGE wrote it)")
        rows = [c.to_dict() for c in list_tool_calls(conn, run_id=run, limit=limit)]
    finally:
        conn.close()
    if as_json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return
    out = Console(highlight=False)
    out.print(f"{len(rows)} tool call(s)", style="bold", markup=False)
    for r in rows:
        where = r["operator"] or ""
        where += "" if r["round"] is None else f"/{r['round']}"
        what = r["result"].get("error") or r["result"].get("message") or r["result"].get("status") or ""
        line = f"{r['id']:>4} {r['created_at'][11:19]} {r['tool']:<15} {r['status']:<7} {r['wall_s']:>6.2f}s "
        out.print(f"{line}{where:<16} {what}", markup=False, overflow="ellipsis", no_wrap=True)
        if full:
            detail = {"arguments": r["arguments"], "result": r["result"]}
            out.print(json.dumps(detail, indent=2), markup=False)
