"""The MCP adapter: SAGE's tools on the official `mcp` SDK (MCPServer), over stdio or HTTP.

Each tool is a thin async function that queues its call on the run's thread (worker.py) and
returns the service's result, already JSON-checked there, as structured content with a typed
output schema (results.py); a refused evaluation is a normal result (status "refused"), a call
that cannot be served is a tool error. While a call runs the client gets a progress notification
every PROGRESS_EVERY_S (when it asked for progress); a call the client abandons hands its result
to the next call. Streamable HTTP binds to 127.0.0.1 only and requires `Authorization: Bearer
<token>` on every request. docs/mcp.md documents the tools and their schemas.
"""

from __future__ import annotations

import hmac
import signal
import threading
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as SdkToolError

from sagekernel.agent.decisions import Decision
from sagekernel.mcp_server.results import (
    DiagnoseResult,
    EvaluateResult,
    FinishResult,
    OpenOperatorResult,
    RetrieveResult,
    StatusResult,
)
from sagekernel.mcp_server.worker import Caller, ServiceWorker

INSTRUCTIONS = """SAGE kernel harness and experience memory. Workflow per operator: open_operator ->
retrieve -> write a kernel -> evaluate (with an adoption record {id, decision: ADOPTED or NOT
ADOPTED, rationale} for EVERY retrieved experience E<n> and each resident rule R<n>; an evaluation
with any experience missing is refused and spends no round) -> repeat until the budget ends or
finish_operator. Use diagnose (no round spent) after a crash or a wrong result.
Never read other operators' implementations; never special-case the test inputs."""


#: How often a running tool call tells the client it is still working (MCP progress notification).
PROGRESS_EVERY_S = 5.0
#: How long `status` waits for the run to open before it answers `ready: false`.
STATUS_WAITS_S = 20.0
#: How often the event loop looks at a queued call (cheap: a future's flag).
_POLL_S = 0.1


def caller_of(ctx: Context | None) -> Caller:
    """Who is calling: the owner (stdio: the process at the other end; HTTP: the bearer token's holder,
    whichever MCP session it opens) and a label for the log (the client's name and version)."""
    name = ""
    try:
        params = ctx.session.client_params if ctx is not None else None
        info = getattr(params, "client_info", None)
        if info is not None:
            name = f"{info.name} {info.version}".strip()
    except (AttributeError, ValueError):  # no request context (a direct call)
        pass
    headers = getattr(ctx, "headers", None) if ctx is not None else None
    if headers:
        session = headers.get("mcp-session-id") or ""
        where = f"http {session[:12]}" if session else "http"
        return Caller(owner="bearer-token", label=f"{name} ({where})" if name else where)
    return Caller(owner="stdio", label=f"{name} (stdio)" if name else "stdio")


def build_server(worker: ServiceWorker) -> Any:
    """The MCPServer with SAGE's six tools, each served by `worker`."""
    server: Any = MCPServer("sage", instructions=INSTRUCTIONS)

    async def call(tool: str, arguments: dict[str, Any], ctx: Context | None) -> Any:
        if tool == "status" and not worker.ready:  # short of a client's timeout; then `ready: false`
            await anyio.to_thread.run_sync(worker.opened.wait, STATUS_WAITS_S)
        future = worker.submit(tool, arguments, caller_of(ctx))
        started = last_note = time.monotonic()
        try:
            while not future.done():
                await anyio.sleep(_POLL_S)
                now = time.monotonic()
                if ctx is not None and now - last_note >= PROGRESS_EVERY_S:
                    last_note = now
                    waiting = "" if worker.ready else " (waiting for the run to open)"
                    await ctx.report_progress(now - started, None, f"{tool}: {now - started:.0f} s{waiting}")
        except BaseException:  # cancelled or timed out by the client: the result must not be lost
            future.add_done_callback(lambda f: worker.undelivered(tool, f.result()))
            raise
        answer = future.result()
        if answer.status == "error":
            # is_error=True, with the message for the agent
            raise SdkToolError(answer.result.get("error", "error"))
        return answer.result

    @server.tool()
    async def status(ctx: Context) -> StatusResult:
        """The run this server drives: run id, method, target, pending operators, the open operator
        and its budget."""
        return await call("status", {}, ctx)

    @server.tool()
    async def open_operator(ctx: Context, name: str | None = None) -> OpenOperatorResult:
        """Open the next pending operator of the run (or the one named): its description, PyTorch
        reference, kernel contract, the files to write, the target's knowledge (quick reference,
        debugging guide, example), the resident rules and the round budget. Reopening the open
        operator returns it again."""
        return await call("open_operator", {"name": name}, ctx)

    @server.tool()
    async def retrieve(ctx: Context, query: str | None = None, k: int | None = None) -> RetrieveResult:
        """The experiences retrieved for the current round (ids E<n>, text, relevance, utility), the
        resident rules (R<n>), the latest feedback and the current kernel. Idempotent within a
        round; `query` adds your own search, whose items then need decisions too. No round is spent."""
        return await call("retrieve", {"query": query, "k": k}, ctx)

    @server.tool()
    async def evaluate(
        ctx: Context,
        adoptions: list[Decision] | None = None,
        code: str | None = None,
        files: dict[str, str] | None = None,
        diagnosis: str = "",
    ) -> EvaluateResult:
        """Judge a candidate kernel: `code` (single-file targets) or `files` (path -> text), with an
        adoption record (id, decision ADOPTED or NOT ADOPTED, rationale) for EVERY experience
        retrieved since the last evaluation (E<n>) and for each resident rule (R<n>; ADOPTED: the
        candidate follows it). Refused (status "refused", missing ids named, no round spent) while
        any experience lacks a valid record; otherwise one round of the budget is spent and the
        verdict returned (stage, correct, latencies, feedback)."""
        return await call(
            "evaluate",
            {
                "adoptions": [a.model_dump() for a in adoptions or []],
                "code": code,
                "files": files,
                "diagnosis": diagnosis,
            },
            ctx,
        )

    @server.tool()
    async def diagnose(
        ctx: Context, code: str | None = None, files: dict[str, str] | None = None
    ) -> DiagnoseResult:
        """Localise a failure without spending a round: the target's diagnostics on a small shape
        (cpu: -Wall -Wextra warnings, AddressSanitizer/UBSan naming the faulting line and buffer,
        the kernel's printf output; triton: traceback and device_print output) and the first
        mismatching element against the reference (index, expected, got, neighbourhood)."""
        return await call("diagnose", {"code": code, "files": files}, ctx)

    @server.tool()
    async def finish_operator(ctx: Context) -> FinishResult:
        """End the open operator now (the budget ending does it too): its result is recorded, then
        the memory learns from its episodes (ATU credit, UGC, distillation) exactly as `sage run`."""
        return await call("finish_operator", {}, ctx)

    return server


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await self.app(scope, receive, send)


def _sigterm_as_exit() -> None:
    """SIGTERM ends the server like Ctrl-C does: through the caller's `finally`, which closes the run
    (interrupted, resumable). Without it the default action kills the process mid-way (uvicorn
    re-raises the signal after its own shutdown), leaving the run marked running."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def serve_stdio(worker: ServiceWorker) -> None:
    server = build_server(worker)
    _sigterm_as_exit()
    anyio.run(server.run_stdio_async)


def serve_http(worker: ServiceWorker, *, port: int, token: str, host: str = "127.0.0.1") -> None:
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("the HTTP transport binds to the loopback interface only")
    server = build_server(worker)
    _sigterm_as_exit()
    app = BearerAuth(server.streamable_http_app(host=host), token)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
