"""The one thread that owns the opened run: every tool call is executed there, in arrival order.

SQLite connections, the memory policy and the harness's sessions belong to the thread that
made them, and the runner is the single memory writer: so the server's transports (stdio, HTTP,
any number of SDK worker threads) only queue calls here. The workspace lock is taken when the run
opens, before the server answers anything: a second server on the same workspace fails to start.
Over HTTP the first client session that calls a tool owns the workspace; another is refused.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

from sagekernel.errors import SageError
from sagekernel.limits import tool_arguments_problem
from sagekernel.mcp_server.service import KernelService, ToolError
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import RunSummary, opened_run

TOOLS = ("status", "open_operator", "retrieve", "evaluate", "diagnose", "finish_operator")
_Job = tuple[str, dict[str, Any], str, "Future[tuple[str, dict[str, Any]]]"]


class ServiceWorker:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="sage-mcp-run", daemon=True)
        self.owner: str | None = None
        self.run_id: str | None = None
        self.summary: RunSummary | None = None

    def start(self) -> None:
        """Open the run (lock, resume, probe the model); raises what opening raised."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Close the run: finished if every operator has a result, else interrupted (resumable)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    def call(self, tool: str, arguments: dict[str, Any], client: str = "stdio") -> tuple[str, dict[str, Any]]:
        """(status "ok" | "refused" | "error", result) of one tool call, executed on the run's thread."""
        if tool not in TOOLS:
            return "error", {"error": f"unknown tool {tool!r}"}
        too_large = tool_arguments_problem(tool, arguments)
        if too_large:  # refused before the run thread sees it: nothing evaluated, logged or stored
            return "error", {"error": too_large}
        future: Future[tuple[str, dict[str, Any]]] = Future()
        self._jobs.put((tool, arguments, client, future))
        return future.result()

    def _main(self) -> None:
        try:
            with opened_run(self.cfg, finished=lambda r: not r.pending()) as opened:
                if isinstance(opened, RunSummary):
                    raise SageError(opened.message)
                service = KernelService(opened)
                self.run_id = opened.runner.run_id
                self._ready.set()
                while (job := self._jobs.get()) is not None:
                    self._serve(service, *job)
            self.summary = opened.summary
        except BaseException as exc:  # reported by start() or, once serving, ends the server
            self._error = exc
        finally:
            self._ready.set()
            while True:  # answer whatever is still queued
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[3].set_result(("error", {"error": f"the run has closed: {self._error or 'stopped'}"}))

    def _serve(
        self,
        service: KernelService,
        tool: str,
        arguments: dict[str, Any],
        client: str,
        future: Future[tuple[str, dict[str, Any]]],
    ) -> None:
        started = time.perf_counter()
        status, result = "ok", {}
        try:
            if tool != "status" and self.owner not in (None, client):
                raise ToolError(
                    f"this workspace is driven by another client session ({self.owner}); one "
                    "client writes one workspace"
                )
            if tool != "status":
                self.owner = client
            result = getattr(service, tool)(**arguments)
            status = "refused" if result.get("status") == "refused" else "ok"
        except (SageError, TypeError, ValueError) as exc:  # bad arguments or a user-facing problem
            status, result = "error", {"error": str(exc)}
        except Exception as exc:
            status, result = "error", {"error": f"{type(exc).__name__}: {exc}"}
        service.log_client = client
        try:
            service.log(tool, arguments, result, status, started, result.get("round"))
        finally:
            future.set_result((status, result))
