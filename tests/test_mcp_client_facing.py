"""What a real MCP client meets (docs/mcp.md; the real clients themselves: test_agent_clients.py).

- `diagnose` of a kernel that runs to completion (wrong values) is a normal, JSON-clean result, and
  the tool-call log holds exactly what the client received;
- the handshake and `tools/list` are answered while the run is still opening (a slow model probe);
- the server's own model being down does not stop the agent; `status` says so;
- a result the client gave up on is handed to its next call and logged `undelivered`;
- `open_operator` shows the target knowledge trimmed as `sage run`'s prompt does;
- the skills name only tools and arguments the server has, and agree with it on refusals.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")

from openai_server import OpenAITestServer
from sagekernel.mcp_server.client import connect_stdio
from sagekernel.mcp_server.results import NotJsonClean, check_json_clean, to_json_text
from sagekernel.mcp_server.worker import Caller, ServiceWorker
from sagekernel.runner.config import RunConfig
from test_e2e_run import FAST, TASKS, Script, kernel, prepare, query
from test_mcp_server import decision, server_args

REPO = Path(__file__).resolve().parent.parent
WRONG_VALUES = kernel("e2e_double").replace("2.0f * x[i]", "x[i]")  # runs to completion, wrong


def test_json_boundary_names_what_json_cannot_carry() -> None:
    with pytest.raises(NotJsonClean, match=r"result\.d\.outputs\[0\] is a bytes"):
        check_json_clean({"d": {"outputs": [b"\xff\x00"]}})
    with pytest.raises(NotJsonClean, match="nan"):
        to_json_text({"x": float("nan")})
    assert json.loads(to_json_text({"a": [1, 2.5, None, "é"], "b": (1,)})) == {
        "a": [1, 2.5, None, "é"],
        "b": [1],
    }


class SlowModels(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint whose model list (the server's start-up probe) takes `delay` s."""

    def __init__(self, delay: float) -> None:
        self.answered = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(delay)
                data = json.dumps({"data": [{"id": "test-model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                outer.answered.set()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()


async def open_then_diagnose(args: list[str], probe: SlowModels) -> dict[str, Any]:
    async with connect_stdio(args) as client:  # initialize
        tools = {t.name: t for t in (await client.session.list_tools()).tools}
        out: dict[str, Any] = {"probed_before_tools": probe.answered.is_set(), "tools": tools}
        notes: list[str] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            notes.append(message or "")

        opened = await client.session.call_tool("open_operator", {}, progress_callback=progress)
        out["opened"], out["progress"] = opened.structured_content, notes  # it waited for the run
        out["report"] = await client.call("diagnose", code=WRONG_VALUES)
        items = (await client.call("retrieve"))["items"]
        adoptions = [decision(i) for i in items]
        with pytest.raises(Exception):  # noqa: B017 -- the SDK's timeout error: the client gives up
            await client.session.call_tool(
                "evaluate", {"code": kernel("e2e_double"), "adoptions": adoptions}, read_timeout_seconds=0.2
            )
        out["status"] = await client.call("status")  # waits behind the evaluation, then hands it over
        return out


def test_the_handshake_is_answered_while_the_run_opens_and_diagnose_results_are_clean(tmp_path: Path) -> None:
    """The run opens behind the handshake (a model probe that takes 8 s) and a call meanwhile waits,
    with progress notifications; `diagnose` of a kernel that runs to completion with wrong values --
    raw output bytes in the harness's report -- is a normal, typed result, and the log holds
    exactly what the client received; an evaluation the client stops waiting for reaches its next
    call."""
    ws = tmp_path / "slow"
    prepare(ws)
    probe = SlowModels(delay=8.0)
    try:
        args = server_args(ws, f"http://127.0.0.1:{probe.server_address[1]}/v1")
        out = anyio.run(open_then_diagnose, args, probe)
    finally:
        probe.shutdown()
    assert len(out["tools"]) == 6 and not out["probed_before_tools"]  # listed before the run opened
    assert out["opened"]["operator"] == "e2e_double"
    assert any("open_operator" in note and "waiting for the run" in note for note in out["progress"])
    report = out["report"]
    assert (
        report["diagnostics"]["ran"] is True and report["mismatch"]["got"] != report["mismatch"]["expected"]
    )
    assert "first mismatch" in report["text"] and "outputs" not in report["diagnostics"]
    schema = out["tools"]["diagnose"].output_schema or {}
    assert {"mismatch", "diagnostics", "text"} <= set(schema["properties"])  # a typed output schema
    (logged,) = query(ws, "SELECT result_json, status FROM tool_calls WHERE tool = 'diagnose'")
    assert logged[1] == "ok" and json.loads(logged[0]) == report
    # the evaluation the client gave up on: finished, logged undelivered, handed to the next call
    (missed,) = out["status"]["missed_results"]
    assert missed["tool"] == "evaluate" and missed["result"]["verdict"]["correct"] is True
    assert query(ws, "SELECT status FROM tool_calls WHERE tool = 'evaluate'") == [("undelivered",)]


def worker_config(ws: Path, model_url: str) -> RunConfig:
    return RunConfig(
        workspace=ws,
        suite=str(TASKS),
        model=f"openai:test-model@{model_url}",
        driver="mcp",
        schedule="by-level",
        budget=3,
        k=10,
        embedder="none",
        harness=FAST,
        progress=False,
        model_options={"max_retries": 0},
    )


def test_the_server_model_being_down_does_not_stop_the_agent(tmp_path: Path) -> None:
    ws = tmp_path / "down"
    prepare(ws)
    worker = ServiceWorker(worker_config(ws, "http://127.0.0.1:9/v1"))  # nothing listens there
    worker.start()
    try:
        assert worker.wait_ready(120)  # the run opens although its model's probe failed
        _, status = worker.call("status", {})
        worker.call("open_operator", {})
        items = worker.call("retrieve", {})[1]["items"]
        _, answer = worker.call(
            "evaluate", {"code": kernel("e2e_double"), "adoptions": [decision(i) for i in items]}
        )
    finally:
        worker.stop()
    assert status["ready"] is True and status["server_model"]["state"] == "unreachable"
    assert "unreachable" in status["server_model"]["problem"]
    assert answer["status"] == "evaluated" and answer["verdict"]["correct"] is True


def test_a_result_the_client_gave_up_on_reaches_its_next_call(tmp_path: Path) -> None:
    ws = tmp_path / "missed"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        worker = ServiceWorker(worker_config(ws, srv.base_url))
        worker.start()
        try:
            me = Caller("stdio", "test-client (stdio)")
            worker.call("open_operator", {}, me)
            items = worker.call("retrieve", {}, me)[1]["items"]
            evaluation = worker.submit(
                "evaluate", {"code": kernel("e2e_double"), "adoptions": [decision(i) for i in items]}, me
            )
            worker.undelivered("evaluate", evaluation.result())  # the client timed out meanwhile
            _status, now = worker.call("status", {}, me)
            _, later = worker.call("status", {}, me)
            worker.call("finish_operator", {}, me)
        finally:
            worker.stop()
    (missed,) = now["missed_results"]
    assert missed["tool"] == "evaluate" and missed["round"] == 1 and missed["result"]["verdict"]["correct"]
    assert "missed_results" not in later  # handed over once
    assert query(ws, "SELECT tool, status FROM tool_calls WHERE tool = 'evaluate'") == [
        ("evaluate", "undelivered")
    ]
    assert query(ws, "SELECT DISTINCT client FROM tool_calls") == [("test-client (stdio)",)]
    # `sage report` credits the agent that wrote the kernels, not the server's distillation model
    from typer.testing import CliRunner

    from sagekernel.cli import app

    shown = CliRunner().invoke(app, ["report", str(ws), "--json"])
    assert shown.exit_code == 0, shown.output
    (run,) = json.loads(shown.stdout)["runs"]
    assert run["model"] == "test-client via MCP"


def test_open_operator_shows_the_knowledge_as_sage_run_does(tmp_path: Path) -> None:
    from sagekernel.agent.knowledge import knowledge_for
    from sagekernel.targets import get_target

    ws = tmp_path / "know"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        worker = ServiceWorker(worker_config(ws, srv.base_url))
        worker.start()
        try:
            _, opened = worker.call("open_operator", {})
        finally:
            worker.stop()
    shown = knowledge_for(get_target("cpu").knowledge(), opened["category"])
    assert opened["knowledge"] == {
        "quick_reference": shown.quick_reference,
        "debugging_guide": shown.debugging_guide,
        "example": shown.example,
        "notes": shown.notes,
    }
    assert "<!-- for:" not in json.dumps(opened["knowledge"])
    assert opened["diagnostics_available"] and any(
        "AddressSanitizer" in d for d in opened["diagnostics_available"]
    )


# ---- the skills against the tool schemas ------------------------------------------------------------
SKILLS = sorted((REPO / "skills").glob("*/SKILL.md"))


def tool_schemas() -> tuple[dict[str, set[str]], set[str]]:
    """Each tool's argument names, and every top-level result field, from the server clients see."""
    from sagekernel.mcp_server.server import build_server

    server = build_server(ServiceWorker(RunConfig(workspace=Path("unused"))))
    tools = anyio.run(server.list_tools)
    arguments = {t.name: set((t.input_schema or {}).get("properties", {})) for t in tools}
    fields = {f for t in tools for f in (t.output_schema or {}).get("properties", {})}
    return arguments, fields


#: Fields inside a result's objects that the skills name (`budget`, `verdict`, an adoption).
NESTED = {"rounds_left", "t_best_ms", "stage", "correct", "decision", "id", "rationale"}
#: Words in backticks that are values or kernel-side names, not the server's vocabulary.
VALUES = {
    "refused",
    "runtime",
    "correctness",
    "false",
    "true",
    "sage",
    "printf",
    "device_print",
    "tl.device_print",
}


@pytest.mark.parametrize("skill", SKILLS, ids=lambda p: p.parent.name)
def test_every_tool_argument_and_field_a_skill_names_exists(skill: Path) -> None:
    arguments, fields = tool_schemas()
    known = set(arguments) | set().union(*arguments.values()) | fields | NESTED | VALUES
    text = skill.read_text()
    for tool, args in re.findall(r"`([a-z_]+)\(([^`)]*)\)`", text):  # `retrieve(query=...)`
        assert tool in arguments, f"{skill.parent.name} calls {tool}(), which is no tool"
        for name in re.findall(r"([a-z_]+)=", args):
            assert name in arguments[tool], f"{tool}() has no argument {name!r}"
    for quoted in re.findall(r"`([^`]+)`", text):
        if quoted.startswith("{"):  # an example adoption record (may end in "...")
            keys = set(re.findall(r'"(\w+)":', quoted))
            assert {"id", "decision"} <= keys <= {"id", "decision", "rationale"}, quoted
            continue
        word = re.match(r"^([a-z_][a-z_.]*)(: .*)?$", quoted)
        if word is None or word.group(1) in VALUES:
            continue  # code, ids (`E<n>`), command lines, values
        for part in word.group(1).split("."):  # `budget.rounds_left`
            assert part in known, f"{skill.parent.name} names `{quoted}`, which the server does not have"
    assert {"evaluate", "retrieve", "diagnose"} <= set(re.findall(r"`([a-z_]+)`", text))


def test_the_generator_skill_agrees_with_the_server_on_refusals() -> None:
    """The server keeps no decision from a refused call: the skill must say to send them all again."""
    text = (REPO / "skills" / "sage-kernel-generator" / "SKILL.md").read_text()
    hook = text[text.index("## The trace-completeness hook") :]
    assert "Answer exactly the missing ids" not in hook
    assert re.search(r"EVERY\s+retrieved\s+experience\s+of\s+the\s+round", hook)
    assert re.search(r"keeps\s+nothing\s+from\s+a\s+refused\s+call", hook)
    assert "missed_results" in text  # what to do after a client timeout


# ---- the server's model: a report at start, a wait when an operator finishes ----------------------
class FlakyEndpoint:
    """A model whose endpoint is down for the first `down` calls (probe and complete alike)."""

    name = "flaky"

    def __init__(self, down: int, broken: bool = False) -> None:
        self.down, self.broken, self.calls = down, broken, 0

    def _hit(self) -> None:
        from sagekernel.errors import ModelError

        self.calls += 1
        if self.calls <= self.down:
            raise ModelError("the model endpoint http://127.0.0.1:9/v1 is unreachable")

    def probe(self) -> None:
        self._hit()

    def complete(self, messages: Any, **kwargs: Any) -> str:
        from sagekernel.errors import ModelError

        self._hit()
        if self.broken:
            raise ModelError("HTTP 401: bad key")
        return "a lesson"


def test_the_server_model_waits_for_its_endpoint_and_fails_fast_when_it_answers() -> None:
    from sagekernel.errors import ModelError
    from sagekernel.mcp_server.server_model import PatientModel

    waiting = PatientModel(FlakyEndpoint(down=3), wait_s=5, poll_s=0.01)
    waiting.probe()  # down: reported, not raised
    assert waiting.report()["state"] == "unreachable"
    assert waiting.complete([]) == "a lesson"  # waited (probing) until the endpoint came back
    assert waiting.report()["state"] == "ready"
    broken = PatientModel(FlakyEndpoint(down=0, broken=True), wait_s=60, poll_s=10)
    started = time.monotonic()
    with pytest.raises(ModelError, match="401"):
        broken.complete([])  # the endpoint answers its probe: the call's own error, at once
    assert time.monotonic() - started < 5
    gone = PatientModel(FlakyEndpoint(down=10**6), wait_s=0.05, poll_s=0.01)
    with pytest.raises(ModelError, match="unreachable"):
        gone.complete([])  # waited enough
