"""The one thread that owns the opened run: every tool call is executed there, in arrival order.

SQLite connections, the memory policy and the harness's sessions belong to the thread that
made them, and the runner is the single memory writer: so the server's transports (stdio, HTTP,
any number of SDK worker threads) only queue calls here.

Opening the run (workspace lock, suite, seed memory, the model probe, the embedder) takes seconds
to tens of seconds on a loaded machine, longer than MCP clients wait for a connection; so `start`
returns at once, the server answers the handshake and `tools/list` meanwhile, the thread opens the
run, and tool calls queue until it is open (`status` answers at once with `ready: false`). If the
run cannot be opened (the workspace is locked by another server, a bad suite) every later call is
answered with that reason.

Who may drive the run: its owner. Over stdio the owner is the process at the other end; over HTTP
it is whoever holds the bearer token, so a client reconnecting with a new MCP session (each
`opencode run` is one) continues the run.

A result the client never received (its call timed out or was cancelled while the run's thread
was still working) is not lost: it is logged as `undelivered` and handed to the next call, in
`missed_results`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from sagekernel.errors import SageError
from sagekernel.limits import tool_arguments_problem
from sagekernel.mcp_server.results import NotJsonClean, to_json_text
from sagekernel.mcp_server.server_model import PatientModel
from sagekernel.mcp_server.service import KernelService, ToolError
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import RunSummary, opened_run

TOOLS = ("status", "open_operator", "retrieve", "evaluate", "diagnose", "finish_operator")


@dataclass(frozen=True)
class Caller:
    """Who made a call: `owner` decides whether it may drive the run, `label` is what the log keeps
    (the client's name and version from its handshake, and its session)."""

    owner: str = "stdio"
    label: str = "stdio"


@dataclass
class Answer:
    """One call's outcome: status ok | refused | error, the JSON text the client receives, and the
    tool-call log row (to mark it undelivered)."""

    status: str
    text: str
    row: int | None = None

    @property
    def result(self) -> dict[str, Any]:
        return dict(json.loads(self.text))


_Job = tuple[str, dict[str, Any], Caller, "Future[Answer]"]


def _error(message: str) -> Answer:
    return Answer("error", json.dumps({"error": message}))


class ServiceWorker:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self._jobs: queue.Queue[_Job | Callable[[KernelService], None] | None] = queue.Queue()
        self.opened = threading.Event()  # set once opening ended (open, or failed)
        self._opened_at: float | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="sage-mcp-run", daemon=True)
        self.model: PatientModel | None = None
        self.owner: str | None = None
        self.run_id: str | None = None
        self.summary: RunSummary | None = None
        self._missed: list[dict[str, Any]] = []  # results the client never received, for the next call
        self._missed_lock = threading.Lock()
        self._service: KernelService | None = None
        self.on_open: Callable[[ServiceWorker], None] | None = None  # told once the run is open (or failed)

    # ---- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin opening the run on its thread; returns at once (see `wait_ready`)."""
        self._opened_at = time.monotonic()
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the run is open; raises what opening raised. False on timeout."""
        if not self.opened.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True

    @property
    def ready(self) -> bool:
        return self.opened.is_set() and self._error is None

    def stop(self) -> None:
        """Close the run: finished if every operator has a result, else interrupted (resumable)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    # ---- calls ------------------------------------------------------------------------------------
    def submit(self, tool: str, arguments: dict[str, Any], caller: Caller = Caller()) -> Future[Answer]:
        """Queue one tool call; its Answer arrives on the future once the run's thread served it."""
        future: Future[Answer] = Future()
        if tool not in TOOLS:
            future.set_result(_error(f"unknown tool {tool!r}"))
        elif too_large := tool_arguments_problem(tool, arguments):
            # refused before the run's thread sees it: nothing evaluated, logged or stored
            future.set_result(_error(too_large))
        elif self.opened.is_set() and self._error is not None:
            future.set_result(_error(f"the run could not be opened: {self._error}"))
        elif not self._thread.is_alive() and self.opened.is_set():
            future.set_result(_error("the run has closed"))
        elif tool == "status" and not self.opened.is_set():
            future.set_result(Answer("ok", to_json_text(self._opening_status())))
        else:
            self._jobs.put((tool, arguments, caller, future))
        return future

    def call(
        self, tool: str, arguments: dict[str, Any], caller: Caller = Caller()
    ) -> tuple[str, dict[str, Any]]:
        """(status, result) of one tool call, waiting for it (scripts and tests)."""
        answer = self.submit(tool, arguments, caller).result()
        return answer.status, answer.result

    def undelivered(self, tool: str, answer: Answer) -> None:
        """The client never received `answer` (it gave up on the call): keep it for the next call and
        mark its log row. Called as the answer is set (on the run's thread, before the next queued
        call is served) or at once if it already was."""
        result = answer.result
        with self._missed_lock:
            self._missed.append({"tool": tool, "round": result.get("round"), "status": answer.status,
                                 "result": result})
        if answer.row is None:
            return
        row = answer.row
        if threading.current_thread() is self._thread and self._service is not None:
            self._service.mark_undelivered(row)
        else:
            self._jobs.put(lambda service: service.mark_undelivered(row))

    def _opening_status(self) -> dict[str, Any]:
        waited = time.monotonic() - (self._opened_at or time.monotonic())
        return {
            "ready": False,
            "state": f"opening the run ({waited:.0f} s so far: workspace, memory, embedder); "
            "other tools wait for it",
            "run_id": self.run_id,
            "workspace": str(self.cfg.workspace),
            "method": self.cfg.method,
            "target": self.cfg.target,
            "suite": self.cfg.suite,
            "budget_per_operator": self.cfg.budget,
        }

    # ---- the run's thread -------------------------------------------------------------------------
    def _patient(self, model: Any) -> PatientModel:
        self.model = PatientModel(model)
        return self.model

    def _main(self) -> None:
        try:
            with opened_run(self.cfg, finished=lambda r: not r.pending(), wrap_model=self._patient) as opened:
                if isinstance(opened, RunSummary):
                    raise SageError(opened.message)
                service = self._service = KernelService(opened, server_model=self.model)
                self.run_id = opened.runner.run_id
                self.opened.set()
                if self.on_open is not None:
                    self.on_open(self)
                while (job := self._jobs.get()) is not None:
                    if callable(job):
                        job(service)
                    else:
                        self._serve(service, *job)
            self.summary = opened.summary
        except BaseException as exc:  # reported by wait_ready and every later call
            self._error = exc
            if not self.opened.is_set() and self.on_open is not None:
                self.opened.set()
                self.on_open(self)
        finally:
            self.opened.set()
            while True:  # answer whatever is still queued
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if isinstance(job, tuple):
                    why = f"could not be opened: {self._error}" if self._error else "has closed"
                    job[3].set_result(_error(f"the run {why}"))

    def _serve(self, service: KernelService, tool: str, arguments: dict[str, Any], caller: Caller,
               future: Future[Answer]) -> None:
        started = time.perf_counter()
        status, result = "ok", {}
        try:
            if tool != "status" and self.owner not in (None, caller.owner):
                raise ToolError(
                    f"this workspace is driven by another client ({self.owner}); one client writes "
                    "one workspace"
                )
            if tool != "status":
                self.owner = caller.owner
            result = getattr(service, tool)(**arguments)
            status = "refused" if result.get("status") == "refused" else "ok"
        except (SageError, TypeError, ValueError) as exc:  # bad arguments or a user-facing problem
            status, result = "error", {"error": str(exc)}
        except Exception as exc:
            status, result = "error", {"error": f"{type(exc).__name__}: {exc}"}
        with self._missed_lock:
            if self._missed and status != "error":
                result = {**result, "missed_results": self._missed}
                self._missed = []
        try:
            text = to_json_text(result)
        except NotJsonClean as exc:  # a server bug, told as such rather than as an SDK failure
            status, text = "error", to_json_text({"error": f"internal error: the result is not JSON: {exc}"})
        service.log_client = caller.label
        row = None
        try:
            row = service.log(tool, arguments, text, status, started, result.get("round"))
        finally:
            future.set_result(Answer(status, text, row))
