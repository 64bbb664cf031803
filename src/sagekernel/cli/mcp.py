"""`sage mcp`: argument handling only; the server is in sagekernel.mcp_server."""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import typer

from sagekernel import defaults
from sagekernel.cli.options import MEMORY_HELP, OptionError, shared_memory
from sagekernel.cli.run import _parse_overrides, run_config
from sagekernel.errors import SageError


def mcp_command(
    workspace: Path = typer.Option(Path("sage-workspace"), help="Workspace directory (memory, runs, logs)."),
    target: str = typer.Option(
        "cpu", help="Backend the kernels are written for: cpu, triton, cuda, ascendc."
    ),
    method: str = typer.Option("sage", help="Memory method (as `sage run --method`)."),
    suite: str = typer.Option("demo", help="Suite of operators (as `sage run --suite`)."),
    device: str | None = typer.Option(None, help="The target's device; default: its first."),
    model: str = typer.Option(
        "local",
        help="Model the server itself calls to distil experiences and "
        "abstract resident rules (the coding agent writes the kernels).",
    ),
    schedule: str = typer.Option(
        "given", help="Stream order: given | by-level | level:N | interleave:L2,L3."
    ),
    limit: int | None = typer.Option(None, min=1, help="Only the first N operators of the stream."),
    budget: int = typer.Option(defaults.ROUNDS, min=1, help="T: evaluation rounds per operator."),
    k: int = typer.Option(defaults.K, "-k", help="Experiences retrieved per round."),
    run_id: str | None = typer.Option(
        None, "--run-id", help="Run id (default: new, or the unfinished run with the same configuration)."
    ),
    new: bool = typer.Option(
        False, help="Start a new run even if one with this configuration is unfinished."
    ),
    frozen: bool = typer.Option(False, help="Memory is read-only: no distillation, no updates."),
    memory: str | None = typer.Option(None, "--memory", help=MEMORY_HELP),
    embedder: str = typer.Option("auto", help="Dense retrieval: auto or none (BM25 only)."),
    distill: bool = typer.Option(True, help="Distil new memory items after each episode."),
    diagnostics: bool = typer.Option(
        True, help="Attach diagnostics to the feedback of a crash or wrong result."
    ),
    harness: list[str] = typer.Option([], "--harness", help="Harness override KEY=VALUE (repeatable)."),
    model_opt: list[str] = typer.Option([], "--model-opt", help="Model setting KEY=VALUE (repeatable)."),
    http: bool = typer.Option(False, help="Serve streamable HTTP on 127.0.0.1 instead of stdio."),
    port: int = typer.Option(8765, min=1, max=65535, help="HTTP port (with --http)."),
    token_env: str = typer.Option(
        "SAGE_MCP_TOKEN",
        help="Environment variable holding the HTTP bearer token; unset: a fresh token is printed on stderr.",
    ),
) -> None:
    """Serve SAGE's memory and harness as MCP tools for a coding agent (stdio by default)."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise SageError("`sage mcp` needs the MCP SDK: pip install 'sagekernel[mcp]'") from exc
    from sagekernel.mcp_server.server import serve_http, serve_stdio
    from sagekernel.mcp_server.worker import ServiceWorker
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token_env):
        raise OptionError("--token-env", f"{token_env!r} is not an environment variable name")
    cfg = run_config(
        workspace=workspace,
        suite=suite,
        target=target,
        device=device,
        model=model,
        method=method,
        driver="mcp",
        schedule=schedule,
        limit=limit,
        budget=budget,
        k=k,
        run_id=run_id,
        new=new,
        frozen=frozen,
        memory=shared_memory(memory),
        embedder=embedder,
        distill=distill,
        diagnostics=diagnostics,
        harness=_parse_overrides(harness),
        model_options=_parse_overrides(model_opt, "--model-opt", "timeout_s=300"),
        progress=False,
    )
    _preflight(cfg)
    worker = ServiceWorker(cfg)
    worker.on_open = _announce
    # the run opens on its own thread while the server already answers the client's handshake:
    # opening can take longer than MCP clients wait for a connection (mcp_server/worker.py)
    worker.start()
    print(f"sage mcp: opening the run in {workspace} ({method}, {target})", file=sys.stderr)
    try:
        if http:
            token = os.environ.get(token_env) or secrets.token_urlsafe(24)
            if not os.environ.get(token_env):
                print(f"sage mcp: bearer token {token}", file=sys.stderr)
            print(f"sage mcp: http://127.0.0.1:{port}/mcp", file=sys.stderr)
            serve_http(worker, port=port, token=token)
        else:
            serve_stdio(worker)
    finally:
        worker.stop()
        if worker.summary is not None:
            s = worker.summary
            print(f"sage mcp: run {s.run_id} {s.status}: {s.done}/{s.operators} operators", file=sys.stderr)


def _preflight(cfg: Any) -> None:
    """What can be refused at once is refused before serving (one line naming the option); the
    slow part (suite, memory, embedder, model probe) opens in the background afterwards."""
    from sagekernel import db
    from sagekernel.models.registry import parse_spec
    from sagekernel.runner.config import check_device
    from sagekernel.runner.schedule import check_schedule
    from sagekernel.targets import get_target
    from sagekernel.tasks.suites import check_suite_name

    checks: list[tuple[str, Any]] = [
        ("--workspace", lambda: db.require_directory(cfg.workspace)),
        ("--target", lambda: get_target(cfg.target)),
        ("--device", lambda: check_device(get_target(cfg.target), cfg.device)),
        ("--model", lambda: parse_spec(cfg.model)),
        ("--suite", lambda: check_suite_name(cfg.suite)),
        ("--schedule", lambda: check_schedule(cfg.schedule)),
    ]
    for option, check in checks:
        try:
            check()
        except SageError as exc:
            text = str(exc)
            raise OptionError(option, text.removeprefix(f"{option}: ")) from None
    from sagekernel.runner.lock import WorkspaceLock

    with WorkspaceLock(cfg.workspace, "sage mcp"):  # held by another writer: RunLocked names it, now
        pass


def _announce(worker: Any) -> None:
    try:
        worker.wait_ready(0)
    except BaseException as exc:
        print(f"sage mcp: the run could not be opened: {exc} (every tool call says so)", file=sys.stderr)
        return
    print(f"sage mcp: run {worker.run_id} open", file=sys.stderr)
    model = worker.model.report() if worker.model is not None else {}
    if model.get("state") == "unreachable":
        print(f"sage mcp: the server's model is unreachable; the agent can work, distillation waits "
              f"for it: {model.get('problem')}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Attach `sage mcp` to the root app."""
    app.command("mcp")(mcp_command)
