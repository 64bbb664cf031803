"""`sage mcp` driven by the SDK's own client over stdio, with scripted candidates.

The scripted agent (`drive`) writes exactly what the e2e test's scripted model (test_e2e_run.Script)
writes -- the same kernels, the same adoption decisions, the same missing decision in the very
first round -- so the workspace it leaves must equal that of the `sage run` of the same stream:
items and utilities, adopters, results, traces (re-asks included: the refused evaluation is the
gate's re-ask), episode updates, memory episodes. Also: the refusal itself, the diagnose tool on
an out-of-bounds write, a second server refused by the workspace lock, a killed server resumed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")

from openai_server import OpenAITestServer
from sagekernel.errors import RunLocked
from sagekernel.mcp_server.client import ToolCallError, ToolClient, connect_http, connect_stdio, sage_command
from sagekernel.mcp_server.worker import ServiceWorker
from sagekernel.runner.config import RunConfig
from test_e2e_run import (
    ANCHOR,
    FAST,
    TASKS,
    Script,
    broken,
    final_state,
    kernel,
    prepare,
    query,
    reference,  # noqa: F401  (the module-scoped `sage run` of the same stream)
)


def server_args(ws: Path, url: str) -> list[str]:
    """`sage mcp` with the configuration of test_e2e_run.config (the model only distils)."""
    harness = [a for key, value in FAST.items() for a in ("--harness", f"{key}={json.dumps(value)}")]
    return [
        "--workspace",
        str(ws),
        "--suite",
        str(TASKS),
        "--model",
        f"openai:test-model@{url}",
        "--method",
        "sage",
        "--schedule",
        "by-level",
        "--budget",
        "3",
        "-k",
        "10",
        "--embedder",
        "none",
        *harness,
    ]


def decision(item: dict[str, Any]) -> dict[str, Any]:
    adopted = item["title"] == ANCHOR
    return {
        "id": item["id"],
        "decision": "ADOPTED" if adopted else "NOT ADOPTED",
        "rationale": "it is exactly this loop" if adopted else "not needed here",
    }


async def drive_operator(client: ToolClient, *, stop_after: int | None = None) -> dict[str, Any]:
    """One operator as test_e2e_run.Script would write it; returns the last evaluate answer."""
    op = (await client.call("open_operator"))["operator"]
    while True:
        got = await client.call("retrieve")
        n, opt = got["round"], got["episode"] == "opt"
        adoptions = [decision(i) for i in got["items"]]
        code = broken(op) if opt or (op == "e2e_double" and n == 1) else kernel(op)
        rules = [{"id": r["id"], "decision": "ADOPTED", "rationale": "the flat loop is this rule"}
                 for r in got["resident_rules"]]
        if op == "e2e_double" and n == 1:  # one decision missing: refused, no round spent
            refused = await client.call("evaluate", code=code, adoptions=adoptions[:-1] + rules)
            assert refused["status"] == "refused" and refused["round_spent"] is False
            assert refused["missing"] == [adoptions[-1]["id"]]
            assert refused["budget"]["rounds_used"] == 0
        answer = await client.call(
            "evaluate", code=code, adoptions=adoptions + rules, diagnosis="write the flat loop"
        )
        assert answer["status"] == "evaluated" and answer["round"] == n
        if answer["operator_finished"] or (stop_after is not None and n >= stop_after):
            return answer


async def drive(args: list[str]) -> list[dict[str, Any]]:
    async with connect_stdio(args) as client:
        assert set(await client.tools()) == {
            "status",
            "open_operator",
            "retrieve",
            "evaluate",
            "diagnose",
            "finish_operator",
        }
        while (await client.call("status"))["pending_operators"]:
            last = await drive_operator(client)
            assert last["result"]["correct"]
        with pytest.raises(ToolCallError, match="run is finished"):
            await client.call("open_operator")
        return client.transcript


def test_a_whole_stream_through_the_server_equals_sage_run(
    tmp_path: Path,
    reference: tuple[Path, Any],  # noqa: F811
):
    ws = tmp_path / "mcp"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        transcript = anyio.run(drive, server_args(ws, srv.base_url))
    assert final_state(ws) == final_state(reference[0])
    assert query(
        ws, "SELECT driver FROM (SELECT json_extract(config_json, '$.cfg.driver') AS driver FROM runs)"
    ) == [("mcp",)]
    # the exchange log: every tool call, the refusal included; the model only distilled and abstracted
    logged = query(ws, "SELECT tool, status FROM tool_calls ORDER BY id")
    assert [t for t, _ in logged] == [e["tool"] for e in transcript]
    assert [s for _, s in logged].count("refused") == 1
    from typer.testing import CliRunner

    from sagekernel.cli import app

    shown = CliRunner().invoke(app, ["log", "tools", "-w", str(ws), "--json", "--limit", "1000"])
    assert shown.exit_code == 0 and [r["tool"] for r in json.loads(shown.stdout)] == [t for t, _ in logged]
    assert logged[-1] == ("open_operator", "error")
    purposes = {json.loads(t).get("purpose") for (t,) in query(ws, "SELECT tags_json FROM exchanges")}
    assert purposes <= {"distill", "abstract-rule"} and "distill" in purposes
    assert query(ws, "SELECT status FROM runs") == [("finished",)]


OOB = """#include <stdint.h>
#include <stdio.h>
void sage_kernel(const float* restrict x, float* restrict out, int64_t N) {
  printf("debug: N=%lld\\n", (long long)N);
  for (int64_t i = 0; i < N; ++i)
    out[i + 1] = 2.0f * x[i];
}
"""


async def diagnose_and_lock(args: list[str], ws: Path) -> dict[str, Any]:
    async with connect_stdio(args) as client:
        await client.call("open_operator", name="e2e_double")
        before = await client.call("status")
        report = await client.call("diagnose", code=OOB)
        assert (await client.call("status"))["budget"] == before["budget"], "diagnose spends no round"
        # a second server on the same workspace is refused while this one holds it (the same
        # configuration: it would resume this very run)
        cfg = RunConfig(
            workspace=ws,
            suite=str(TASKS),
            model="openai:test-model@http://127.0.0.1:9/v1",
            driver="mcp",
            schedule="by-level",
            budget=3,
            k=10,
            embedder="none",
            harness=FAST,
            progress=False,
        )
        second = ServiceWorker(cfg)
        second.start()  # returns at once: the run opens on the worker's thread
        with pytest.raises(RunLocked) as locked:
            second.wait_ready(60)
        status, answer = second.call("open_operator", {})
        assert status == "error" and "could not be opened" in answer["error"]
        assert "in use by run" in answer["error"]
        report["second"] = str(locked.value)
        return report


def test_diagnose_names_the_out_of_bounds_line_and_a_second_server_is_refused(tmp_path: Path):
    ws = tmp_path / "diag"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        report = anyio.run(diagnose_and_lock, server_args(ws, srv.base_url), ws)
    fault = report["diagnostics"]["fault"]
    assert fault["line"] == 6 and fault["path"] == "kernel.c"  # out[i + 1] = ...
    assert report["diagnostics"]["fault_kind"] == "heap-buffer-overflow"
    assert report["diagnostics"]["fault_buffer"] == "out"
    assert "kernel.c line 6" in report["text"] and "WRITE of size 4" in report["text"]
    assert "debug: N=" in report["text"]  # the kernel's own printf from the debug run
    assert "in use by run" in report["second"]
    assert query(ws, "SELECT count(*) FROM round_traces") == [(0,)]


async def one_round_then_wait(args: list[str], started: Any) -> None:
    async with connect_stdio(args) as client:
        await drive_operator(client)  # e2e_double (by-level: first) finishes
        await drive_operator(client, stop_after=1)  # e2e_negate: one round, then the server dies
        started.set()
        await anyio.sleep(60)  # cancelled once the server is killed


def test_a_killed_server_resumes_to_the_same_state(
    tmp_path: Path,
    reference: tuple[Path, Any],  # noqa: F811
):
    ws = tmp_path / "killed"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        args = server_args(ws, srv.base_url)

        async def kill_mid_operator() -> None:
            started = anyio.Event()
            with contextlib.suppress(Exception):  # the client's session dies with its server
                async with anyio.create_task_group() as tg:
                    tg.start_soon(one_round_then_wait, args, started)
                    await started.wait()
                    os.kill(json.loads((ws / "sage-run.lock").read_text())["pid"], signal.SIGKILL)
                    await anyio.sleep(0.5)
                    tg.cancel_scope.cancel()

        anyio.run(kill_mid_operator)
        run_id = query(ws, "SELECT run_id, status FROM runs")
        assert len(run_id) == 1 and run_id[0][1] == "running"
        assert query(ws, "SELECT count(*) FROM round_traces WHERE operator = 'e2e_negate'") == [(1,)]
        assert query(ws, "SELECT operator FROM operator_results") == [("e2e_double",)]
        anyio.run(drive, args)  # the same command resumes the run; e2e_negate restarts from scratch
    assert query(ws, "SELECT run_id, status FROM runs") == [(run_id[0][0], "finished")]
    assert final_state(ws) == final_state(reference[0])


def test_the_cli_reports_a_missing_sdk_plainly() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\nfrom sagekernel.cli import main\n"
        "sys.argv = ['sage', 'mcp', '--workspace', '/nonexistent']\nmain()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=sage_command([]).env
    )
    assert proc.returncode == 2 and re.search(r"pip install 'sagekernel\[mcp\]'", proc.stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_needs_the_bearer_token_and_a_new_session_continues(tmp_path: Path) -> None:
    ws = tmp_path / "http"
    prepare(ws)
    port, token = free_port(), "s3cret-token"
    with OpenAITestServer(fallback=Script()) as srv:
        params = sage_command([*server_args(ws, srv.base_url), "--http", "--port", str(port)])
        proc = subprocess.Popen(
            [params.command, *params.args],
            env={**(params.env or {}), "SAGE_MCP_TOKEN": token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(
                        urllib.request.Request(url, method="POST", data=b"{}"), timeout=2
                    ):
                        pass
                except urllib.error.HTTPError as exc:
                    assert exc.code == 401, exc.code  # up, and refusing a request without the token
                    break
                except OSError:
                    assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                    time.sleep(0.3)

            async def sessions() -> tuple[dict[str, Any], dict[str, Any]]:
                async with connect_http(url, token) as first:
                    opened = await first.call("open_operator")
                # a new MCP session with the same token (a second `opencode run`) continues the run
                async with connect_http(url, token) as second:
                    again = await second.call("retrieve")
                return opened, again

            opened, again = anyio.run(sessions)
            assert opened["operator"] == "e2e_double" and again["round"] == 1 and again["items"]
            wrong = urllib.request.Request(
                url, method="POST", data=b"{}", headers={"Authorization": "Bearer x"}
            )
            with pytest.raises(urllib.error.HTTPError) as denied:
                urllib.request.urlopen(wrong, timeout=5)
            assert denied.value.code == 401
        finally:
            proc.send_signal(signal.SIGTERM)  # as a service manager stops it
            proc.wait(timeout=30)
    assert query(ws, "SELECT count(DISTINCT client) FROM tool_calls") == [(2,)]
    assert query(ws, "SELECT status FROM runs") == [("interrupted",)]  # closed, resumable


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "mcp"


def _without_model(args: list[str]) -> list[str]:
    at = args.index("--model")
    return args[:at] + args[at + 2 :]


def test_the_example_client_configs_are_valid_sage_mcp_command_lines() -> None:
    """examples/mcp: the Claude Code, OpenCode and Codex registrations are the same `sage mcp`
    command line, and the CLI accepts it as written (the servers above run the same options)."""
    import tomllib

    import typer

    from sagekernel.cli import app

    claude = json.loads((EXAMPLES / ".mcp.json").read_text())["mcpServers"]["sage"]
    opencode = json.loads((EXAMPLES / "opencode.json").read_text())["mcp"]["sage"]
    codex = tomllib.loads((EXAMPLES / "codex-config.toml").read_text())["mcp_servers"]["sage"]
    assert claude["command"] == codex["command"] == opencode["command"][0] == "sage"
    assert claude["args"][0] == "mcp"
    assert _without_model(claude["args"]) == _without_model(opencode["command"][1:])
    assert _without_model(claude["args"]) == _without_model(codex["args"])
    group = typer.main.get_command(app)
    mcp_command = group.commands["mcp"]  # type: ignore[attr-defined]
    for args in (claude["args"], opencode["command"][1:], codex["args"]):
        params = mcp_command.make_context("mcp", list(args[1:])).params
        assert params["suite"] == "demo" and params["budget"] == 30 and params["target"] == "cpu"
        assert params["model"].split(":")[0] in ("anthropic", "openai") and not params["http"]
