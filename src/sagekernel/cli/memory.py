"""`sage memory list|show|stats|export|import|replay` and `sage simulate` (argument handling only)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel import defaults
from sagekernel.cli.options import MEMORY_HELP, at_least, choice, output_file, shared_memory
from sagekernel.errors import SageError
from sagekernel.terminal import Console

console = Console()
memory_app = typer.Typer(help="Inspect, export, import and replay the learning memory.", no_args_is_help=True)

WorkspaceOpt = typer.Option(Path("."), "--workspace", "-w", help="Workspace directory (holds sage.db).")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
MemoryOpt = typer.Option(None, "--memory", help=MEMORY_HELP)


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _open(workspace: Path, memory: str | None = None, *, write: bool = False) -> sqlite3.Connection:
    """The shared memory `--memory` (or SAGE_MEMORY_URL) names, else the workspace's."""
    from sagekernel.memory.backend import open_memory

    conn: sqlite3.Connection = open_memory(shared_memory(memory), workspace, write=write)
    return conn


def _provenance_filter(**given: str | None) -> dict[str, str]:
    return {k: v for k, v in given.items() if v is not None}


@memory_app.command("list")
def list_cmd(workspace: Path = WorkspaceOpt,
             state: str = typer.Option(None, help="cold | validated | consolidated"),
             order: str = typer.Option("u", help="u | id | n_ado | n_ret"),
             limit: int = typer.Option(50, min=0, help="Rows to show (0 = all)."),
             run: str = typer.Option(None, "--run", help="Only items this run created or credited."),
             model: str = typer.Option(None, help="Only items created or credited with this model spec."),
             target: str = typer.Option(None, help="Only items created or credited on this target."),
             device: str = typer.Option(None, help="Only items created or credited on this device."),
             operator: str = typer.Option(None, help="Only items created or credited by this operator."),
             team: str = typer.Option(None, help="Only items created or credited by this team (SAGE_TEAM)."),
             memory: str = MemoryOpt,
             as_json: bool = JsonOpt) -> None:
    """List memory items with utility, counts, state and rule tokens (filtered by provenance)."""
    from sagekernel.memory.records import ItemState
    from sagekernel.memory.store import Store

    try:
        st = ItemState(state) if state else None
    except ValueError as exc:
        raise SageError(f"--state: unknown state {state!r}; choose cold, validated or consolidated") from exc
    conn = _open(workspace, memory)
    store = Store(conn)
    where = _provenance_filter(run_id=run, model=model, target=target, device=device, operator=operator,
                               team=team)
    if where:
        keep = store.ids_with_history(**where)
        items = [m for m in store.list_items(state=st, order=order) if m.id in keep][: limit or None]
    else:
        items = store.list_items(state=st, order=order, limit=limit or None)
    if as_json:
        _print_json([m.to_dict() for m in items])
        return
    table = Table(title=f"memory items ({len(items)} shown)")
    for col in ("id", "state", "u", "n_ret", "n_ado", "|O|", "p̂", "L", "type", "title"):
        table.add_column(col, justify="right" if col not in ("state", "type", "title") else "left")
    for m in items:
        table.add_row(str(m.id), m.state.value, f"{m.u:+.3f}", str(m.n_ret), str(m.n_ado),
                      str(len(m.adopting_ops)), f"{m.p_hat:.2f}", str(m.rule_tokens or ""), escape(m.type),
                      escape(m.title[:70]))
    console.print(table)


#: Characters of one text field `memory show` prints; the rest is counted (`--json` has it all).
SHOW_CHARS = 4000


def _clip(text: str | None) -> str:
    text = text or ""
    if len(text) <= SHOW_CHARS:
        return text
    return text[:SHOW_CHARS] + f"\n... ({len(text) - SHOW_CHARS} more characters; --json shows all)"


@memory_app.command("show")
def show_cmd(item_id: int, workspace: Path = WorkspaceOpt, memory: str = MemoryOpt,
             as_json: bool = JsonOpt) -> None:
    """Show one item with its adoption history and its provenance (creation, every utility change)."""
    from dataclasses import asdict

    from sagekernel.memory.store import Store

    store = Store(_open(workspace, memory))
    m = store.get(item_id)
    history = store.adoption_history(item_id)
    changes = store.history(item_id) if _has_history(store) else []
    versions = store.rule_versions(item_id)
    if as_json:
        _print_json({**m.to_dict(), "adoptions": [h.__dict__ for h in history],
                     "history": [asdict(h) for h in changes],
                     "rule_versions": [v.to_dict() for v in versions]})
        return
    console.print(f"[bold]#{m.id} {escape(_clip(m.title))}[/]  "
                  + escape(f"({m.type}, {m.category}, {m.state.value}, source {m.source})"))
    console.print(f"u={m.u:+.4f}  n_ret={m.n_ret}  n_ado={m.n_ado}  n_upd={m.n_upd}  p̂={m.p_hat:.3f}  "
                  f"eligible={m.eligible_episodes}  L={m.rule_tokens}  O={sorted(m.adopting_ops)}")
    console.print("[dim]error:[/] " + escape(_clip(m.error_message)))
    console.print("[dim]wrong:[/]\n" + escape(_clip(m.wrong_code)) + "\n[dim]correct:[/]\n"
                  + escape(_clip(m.correct_code)))
    if m.rule_text:
        console.print("[dim]resident rule:[/]\n" + escape(_clip(m.rule_text)))
    if versions:  # merged memories held different texts (memory/rule_versions.py)
        console.print(f"[bold]rule versions ({len(versions)})[/]: the current one has the fewest tokens "
                      "(then the smaller text)")
        for v in versions:
            runs = sorted({e.run_id for e in v.evidence if e.run_id})
            teams = sorted({e.team for e in v.evidence if e.team})
            credits = [e for e in v.evidence if e.kind == "credited"]
            last = next((e.u_after for e in reversed(credits) if e.u_after is not None), None)
            mark = "current" if v.text == m.rule_text else "version"
            console.print(escape(f"{mark}  L={v.tokens}  memory {v.memory}  {len(credits)} credits"
                                 + ("" if last is None else f" (u → {last:+.3f})")
                                 + f"  runs {', '.join(runs) or '-'}  teams {', '.join(teams) or '-'}"),
                          soft_wrap=True)
            console.print("  " + escape(_clip(v.text)))
    table = Table(title=f"adoption history ({len(history)})")
    for col in ("run", "operator", "episode", "round", "adopted", "rationale"):
        table.add_column(col)
    for h in history:
        table.add_row(escape(h.run_id), escape(h.operator), escape(h.episode), str(h.round),
                      {True: "yes", False: "no", None: "⊥"}[h.adopted], escape(h.rationale[:80]))
    console.print(table)
    console.print(f"[bold]history ({len(changes)})[/]: its creation and every utility change, oldest first")
    for c in changes:  # one line each: a table this wide is cut to nothing in a terminal
        o = c.origin
        moved = "" if c.u_after is None else f"  u {c.u_before:+.3f} → {c.u_after:+.3f}"
        xi = "" if c.xi is None else f"  ξ={c.xi:+.3f}"
        marks = "".join((" retrieved" if c.retrieved else "", " adopted" if c.adopted else ""))
        console.print(escape(f"clock {c.clock:>5}  {c.kind:<9}{xi}{moved}{marks}  run {o.run_id or '-'}  "
                             f"op {o.operator or '-'}/{o.episode or '-'}  model {o.model or '-'}  target "
                             f"{o.target or '-'}/{o.device or '-'}  protocol {o.protocol or '-'}  team "
                             f"{o.team or '-'}"), soft_wrap=True)


def _has_history(store: Any) -> bool:
    """A read-only workspace older than migration 0008 has no provenance table."""
    return bool(store.has_history())


@memory_app.command("stats")
def stats_cmd(workspace: Path = WorkspaceOpt, memory: str = MemoryOpt, as_json: bool = JsonOpt) -> None:
    """Summary of the store: items by state and source, utilities, hot tokens, episodes."""
    from sagekernel.memory.store import Store

    data = Store(_open(workspace, memory)).stats()
    if as_json:
        _print_json(data)
        return
    table = Table(title="memory stats", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in data.items():
        shown = ", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else (
            f"{value:+.4f}" if isinstance(value, float) else str(value))
        table.add_row(key, shown)
    console.print(table)


@memory_app.command("export")
def export_cmd(file: Path, workspace: Path = WorkspaceOpt, memory: str = MemoryOpt,
               as_json: bool = JsonOpt) -> None:
    """Export every item (with adoption history) to a JSON Lines file."""
    from sagekernel.memory.io import export_jsonl

    n = export_jsonl(_open(workspace, memory), file)
    if as_json:
        _print_json({"exported": n, "file": str(file)})
    else:
        console.print(escape(f"exported {n} items to {file}"))


@memory_app.command("import")
def import_cmd(file: Path, workspace: Path = WorkspaceOpt,
               mode: str = typer.Option("refuse", help="refuse: only into an empty store; merge: same "
                                        "content hash -> skipped, else a new id; replay: as merge, then "
                                        "utilities recomputed from both sides' utility changes "
                                        "(order-free, idempotent)"),
               memory: str = MemoryOpt,
               as_json: bool = JsonOpt) -> None:
    """Import a memory export into this workspace (or into the shared memory --memory names)."""
    from contextlib import nullcontext

    from sagekernel.memory.io import IMPORT_MODES, import_jsonl
    from sagekernel.runner.lock import WorkspaceLock

    choice(mode, IMPORT_MODES, "--mode")
    url = shared_memory(memory)
    # a run writing the workspace memory meanwhile would crash; a shared memory takes its writer lock
    with WorkspaceLock(workspace, "sage memory import") if url is None else nullcontext():
        conn = _open(workspace, url, write=True)
        try:
            result = import_jsonl(conn, file, mode=mode)
        finally:
            conn.close()
    if as_json:
        _print_json(result)
    else:
        console.print(f"imported {result['imported']} items, skipped {result['skipped']} already present"
                      + (f"; recomputed {result['replayed']} from the union of utility changes"
                         if "replayed" in result else ""))


@memory_app.command("replay")
def replay_cmd(workspace: Path = WorkspaceOpt, run: str = typer.Option(None, help="Only this run's traces."),
               gamma: float = typer.Option(defaults.GAMMA, help="Reranking strength used to compare orders."),
               write_to: Path = typer.Option(None, help="Write a copy of the bank with replayed utilities."),
               variant: str = typer.Option("atu", help="Utilities for --write-to: relevance|uniform|atu"),
               limit: int = typer.Option(30, min=0, help="Rows in the table."),
               as_json: bool = JsonOpt) -> None:
    """Fixed-bank replay (spec §9): recompute utilities under relevance-only, uniform credit and ATU."""
    from sagekernel.runner.bank_replay import VARIANTS, replay_workspace

    at_least(gamma, 0, "--gamma")
    output_file(write_to, "--write-to")
    choice(variant, VARIANTS, "--variant")

    data = replay_workspace(workspace, run, gamma=gamma, write_to=write_to, variant=variant)
    if as_json:
        _print_json(data)
        return
    console.print(f"replayed {data['episodes']} episodes ({data['rounds']} rounds); rounds whose order "
                  f"changes vs relevance: uniform {data['reordered_rounds']['uniform']}, "
                  f"atu {data['reordered_rounds']['atu']}")
    table = Table(title="replayed utilities")
    for col in ("id", "state", "stored u", "uniform", "atu", "title"):
        table.add_column(col, justify="left" if col in ("state", "title") else "right")
    rows = sorted(data["items"], key=lambda r: -abs(r["atu"] - r["uniform"]))[:limit]
    for r in rows:
        table.add_row(str(r["id"]), r["state"], f"{r['stored_u']:+.3f}", f"{r['uniform']:+.3f}",
                      f"{r['atu']:+.3f}", escape(r["title"][:60]))
    console.print(table)
    if "written_to" in data:
        console.print(escape(f"wrote the bank with {data['written_variant']} utilities to "
                             f"{data['written_to']}"))


def simulate_cmd(items: int = typer.Option(200, help="Items in the synthetic store."),
                 operators: int = typer.Option(60, help="Operators in the stream."),
                 seeds: int = typer.Option(5, help="Seeds (means are reported)."),
                 as_json: bool = JsonOpt) -> None:
    """Synthetic stream: precision@5 and success under relevance-only, uniform credit and ATU."""
    from sagekernel.memory.simulate import SimConfig, simulate

    if items < 10 or operators < 1 or seeds < 1:
        raise SageError("simulate needs --items >= 10, --operators >= 1 and --seeds >= 1")
    data = simulate(SimConfig(items=items, operators=operators), seeds=seeds)
    if as_json:
        _print_json(data)
        return
    table = Table(title=f"simulated stream: {items} items, {operators} operators, mean of {seeds} seeds")
    for col in ("method", "precision@5", "success rate", "utility AUC"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, row in data["methods"].items():
        table.add_row(name, f"{row['precision_at_5']:.3f}", f"{row['success_rate']:.3f}",
                      f"{row['utility_auc']:.3f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
    app.add_typer(memory_app, name="memory")
    app.command("simulate")(simulate_cmd)
