"""`sage audit adoptions RUN`: sample a run's ADOPTED records, show item / the structured decision /
the raw reply it was read from / the revision diff side by side, take a person's ratings
(interactive, `--rate`, or `--ratings FILE`) and store them; the automatic lower-bound check is
reported as a share (report/adoption_audit.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sagekernel.errors import SageError
from sagekernel.terminal import Console, printable

audit_app = typer.Typer(help="Audit what a recorded run says it did.", no_args_is_help=True)

RUN_HELP = "WORKSPACE:RUN_ID, WORKSPACE:latest, or WORKSPACE (its newest run)."
_DIFF_LINES = 40
_REPLY_LINES = 24


def _resolve(run: str, workspace: Path | None) -> tuple[Path, str | None]:
    if workspace is not None:
        return workspace, None if run == "latest" else run
    path, sep, run_id = run.rpartition(":")
    if sep and path and Path(path).exists():
        return Path(path), None if run_id == "latest" else run_id
    return Path(run), None


@audit_app.command("adoptions")
def adoptions(
    run: Annotated[str, typer.Argument(help=RUN_HELP, show_default=False)],
    workspace: Annotated[Path | None, typer.Option(help="Workspace directory; RUN is then a run id "
                                                   "(or latest).")] = None,
    sample_size: Annotated[int, typer.Option("--sample", min=1, help="Adopted records to sample.")] = 50,
    seed: Annotated[int, typer.Option(min=0, help="Sampling seed (the same seed shows the same "
                                              "records).")] = 0,
    rate: Annotated[list[str] | None, typer.Option("--rate", help="Store a rating without prompting: "
                                                   "ID=full|partial|unrelated (repeatable).")] = None,
    ratings_file: Annotated[Path | None, typer.Option("--ratings", help="A file of ID=rating lines to "
                                                      "store.")] = None,
    rater: Annotated[str, typer.Option(help="Who rates (ratings are kept per rater).")] = "",
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Prompt for a rating of each unrated record "
                                                          "(default: when stdin is a terminal and no "
                                                          "ratings are given).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print records and shares as JSON.")] = False,
) -> None:
    """Adoption audit (S1 App. D.1): item, rationale and the revision that followed, side by side."""
    from sagekernel import db
    from sagekernel.cli.options import read_text
    from sagekernel.report.adoption_audit import adopted_records, audit_rows, sample, summarize
    from sagekernel.runner.lock import WorkspaceLock
    from sagekernel.runner.ratings import load_ratings, parse_rating, read_ratings_file, save_ratings
    from sagekernel.runner.store import RunStore

    ws, run_id = _resolve(run, workspace)
    given = dict(parse_rating(r) for r in rate or [])
    if ratings_file is not None:
        given = {**read_ratings_file(ratings_file, read_text(ratings_file, "--ratings")), **given}
    prompt = interactive if interactive is not None else (not given and not as_json and sys.stdin.isatty())
    prompt = prompt and not as_json
    writes = bool(given or prompt)
    lock = WorkspaceLock(db.db_path(ws).parent, "sage audit adoptions")
    if writes:  # storing ratings writes the workspace: the one-writer lock, as `sage run` takes
        lock.acquire()
    conn = db.connect(ws, create=False, readonly=not writes)  # reading never migrates
    try:
        store = RunStore(conn)
        if run_id is None:
            runs = store.runs()
            if not runs:
                raise SageError(f"no runs in {ws}; record one with `sage run`")
            run_id = runs[0].run_id
        elif store.run(run_id) is None:
            raise SageError(f"no run {run_id!r} in {ws}")
        records = adopted_records(conn, run_id)
        picked = sample(records, sample_size, seed)
        ids = {r.record_id for r in picked}
        unknown = sorted(set(given) - ids)
        if unknown:
            raise SageError(f"not in this sample (--sample {sample_size} --seed {seed}): "
                            f"{', '.join(unknown)}")
        rows = audit_rows(picked, load_ratings(conn, run_id, rater))
        auto = {r["id"]: bool(r["auto"]["matched"]) for r in rows}
        if given:
            save_ratings(conn, run_id, given, auto, rater)
        console = Console()
        if not as_json:
            console.print(f"run {run_id}: {len(records)} adopted records, showing {len(picked)}")
        if prompt:
            _interactive(console, rows, conn, run_id, auto, rater)
        rows = audit_rows(picked, load_ratings(conn, run_id, rater))
        shares = {"run": run_id, "workspace": str(ws), "seed": seed, "rater": rater,
                  **summarize(rows, len(records))}
    finally:
        conn.close()
        lock.release()
    if as_json:
        typer.echo(json.dumps({**shares, "records": rows}, indent=2))
        return
    if not prompt:
        for row in rows:
            console.print(_panel(row))
    _print_shares(console, shares)


def _panel(row: dict[str, Any]) -> Panel:
    item = Text()
    item.append(printable(f"E{row['item_id']}: {row['title']}\n"), style="bold")
    item.append(printable(row["correct_code"] or "(no code)"))
    decision = row.get("decision") or {}
    why = Text()
    why.append(f"{decision.get('id', '')}: {decision.get('decision', 'ADOPTED')}\n", style="bold green")
    why.append(printable(row["rationale"] or "(no rationale)"))
    why.append(f"\nchannel: {decision.get('channel', 'unknown')}", style="dim")
    reply = _reply_excerpt(row.get("raw_reply"), row.get("evidence") or "")
    diff = Text()
    lines = row["diff"] or ["(no change: the revision repeats the previous candidate or has no code)"]
    for line in lines[:_DIFF_LINES]:
        colour = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
        diff.append(printable(line) + "\n", style=colour)
    if len(lines) > _DIFF_LINES:
        diff.append(f"... {len(lines) - _DIFF_LINES} more diff lines\n", style="dim")
    auto = row["auto"]
    check = ("auto: match" + (" (idiom)" if auto["idiom"] else "")
             + (f" identifiers {', '.join(auto['identifiers'])}" if auto["identifiers"] else "")
             if auto["matched"] else "auto: no match")
    rated = f"  rating: {row['rating']}" if row["rating"] else ""
    body = Table(expand=True, show_lines=False, box=None, padding=(0, 1))
    body.add_column("item", ratio=3)
    body.add_column("structured decision", ratio=2)
    body.add_column("raw reply", ratio=3)
    body.add_column("revision diff (previous -> this round)", ratio=4)
    body.add_row(item, why, reply, diff)
    return Panel(body, title=f"{row['id']} ({row['episode']})", subtitle=check + rated)


def _reply_excerpt(raw: str | None, evidence: str) -> Text:
    """The raw reply around the text the decision was read from (highlighted)."""
    out = Text()
    if raw is None:
        out.append("(no logged reply)\n", style="dim")
        if evidence:
            out.append(printable(evidence), style="bold yellow")
        return out
    lines = raw.splitlines()
    mark = evidence.strip()
    at = next((n for n, line in enumerate(lines) if mark and mark in line.strip()), None)
    start = 0 if at is None else max(0, at - _REPLY_LINES // 3)
    for n, line in enumerate(lines[start:start + _REPLY_LINES], start):
        out.append(printable(line) + "\n", style="bold yellow" if n == at else "")
    if len(lines) > start + _REPLY_LINES or start:
        out.append(f"({len(lines)} lines in all; --json shows them)\n", style="dim")
    return out


def _interactive(console: Console, rows: list[dict[str, Any]], conn: Any, run_id: str,
                 auto: dict[str, bool], rater: str) -> None:
    from sagekernel.runner.ratings import RATINGS, save_ratings

    for row in rows:
        if row["rating"]:
            continue
        console.print(_panel(row))
        answer = typer.prompt("rate: [f]ull, [p]artial, [u]nrelated, [s]kip, [q]uit", default="s")
        answer = answer.strip().lower()
        if answer.startswith("q"):
            break
        grade = next((r for r in RATINGS if answer and r.startswith(answer)), None)
        if grade is not None:
            save_ratings(conn, run_id, {row["id"]: grade}, auto, rater)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _print_shares(console: Console, s: dict[str, Any]) -> None:
    console.print(f"automatic check (a lower bound): {s['auto_matched']}/{s['sampled']} sampled records "
                  f"({_pct(s['auto_share'])}) show the item's idiom or identifiers in the revision")
    r = s["ratings"]
    by = f" by {s['rater']}" if s["rater"] else ""
    console.print(f"ratings{by}: {s['rated']} of {s['sampled']} rated; "
                  f"full {r['full']}, partial {r['partial']}, unrelated {r['unrelated']} "
                  f"(full or partial {_pct(s['full_or_partial_share'])})")


def register(app: typer.Typer) -> None:
    """Attach `sage audit` to the root app."""
    app.add_typer(audit_app, name="audit")
