"""Real coding-agent clients (OpenCode, Claude Code) driving `sage mcp`, as a user would run them.

Marked `clients` (not in the default run): `scripts/test_clients.sh` installs the clients at the
versions pinned in tests/clients/package.json and runs `pytest -m clients`. Without the clients on
PATH (or in $SAGE_AGENT_CLIENTS, a node_modules/.bin) every test here is skipped.

Each client talks to a local model server speaking its real protocol (tests/agent_model_server.py)
that plays one scripted agent: status -> open the operator -> retrieve -> evaluate without adoption
decisions (refused) -> evaluate a kernel that runs but is wrong -> diagnose -> retrieve -> the fix
-> finish. The project configuration is the shipped example (examples/mcp) with only the server's
arguments changed (a one-operator suite, the scripted distiller), and the client is run with
exactly the command and settings docs/mcp.md gives. Afterwards the workspace must hold the whole
session, and the model must have seen every result, `diagnose`'s included, as a normal result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_model_server import FINAL, AgentModelServer

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")
pytestmark = pytest.mark.clients

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "mcp"
PROMPT = "Use the sage tools: open the next operator and solve it."
#: The scripted session's SAGE calls, in order, with the status the tool-call log must give each.
SESSION = [
    ("status", "ok"),
    ("open_operator", "ok"),
    ("retrieve", "ok"),
    ("evaluate", "refused"),
    ("evaluate", "ok"),
    ("diagnose", "ok"),
    ("retrieve", "ok"),
    ("evaluate", "ok"),
    ("finish_operator", "ok"),
]
CLIENT_LIMIT_S = 600  # one client run, start to exit (a loaded 2-core machine)


def _client(name: str) -> str:
    where = os.environ.get("SAGE_AGENT_CLIENTS")
    found = shutil.which(name, path=where) if where else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (scripts/test_clients.sh installs the pinned clients)")
    return found


@pytest.fixture
def sage_bin(tmp_path: Path) -> Path:
    """A `sage` on PATH that runs this checkout (the configs say `sage mcp ...`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "sage"
    shim.write_text(
        f"#!/bin/sh\nPYTHONPATH={REPO / 'src'}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "
        '-c "from sagekernel.cli import main; main()" "$@"\n'
    )
    shim.chmod(0o755)
    return bin_dir


@pytest.fixture
def model_server() -> Iterator[AgentModelServer]:
    with AgentModelServer() as server:
        yield server


def suite(tmp_path: Path, names: list[str]) -> Path:
    """A suite of copies of examples/mcp/tasks/scale2.py under `names` (y = 2x)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    text = (EXAMPLES / "tasks" / "scale2.py").read_text()
    for name in names:
        (tasks / f"{name}.py").write_text(text.replace('"name": "scale2"', f'"name": "{name}"'))
    return tasks


def server_args(tasks: Path) -> list[str]:
    """The example's `sage mcp` arguments with the test's suite and the scripted distiller."""
    return [
        "mcp",
        "--workspace",
        "sage-workspace",
        "--suite",
        str(tasks),
        "--target",
        "cpu",
        "--method",
        "sage",
        "--budget",
        "3",
        "--embedder",
        "none",
        "--model",
        f"scripted:{EXAMPLES / 'distiller.json'}",
    ]


def client_env(home: Path, sage_bin: Path, clients: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "OPENCODE_"))}
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(sage_bin), clients, env.get("PATH", "")]),
        OPENCODE_DISABLE_AUTOUPDATE="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        **extra,
    )
    return env


def with_fake_provider(config: dict[str, Any], port: int) -> dict[str, Any]:
    """The example's OpenCode config plus the user's model provider (here the fake model server)."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "fake",
        "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "dummy"},
        "models": {"sage-agent": {"name": "sage-agent", "tool_call": True}},
    }
    return {**config, "provider": {"fake": provider}, "model": "fake/sage-agent"}


def run_client(
    argv: list[str], cwd: Path, env: dict[str, str], out: Path
) -> subprocess.CompletedProcess[str]:
    # PWD too: OpenCode takes its project directory from it, not from the process's cwd
    proc = subprocess.run(
        argv, cwd=cwd, env={**env, "PWD": str(cwd)}, capture_output=True, text=True, timeout=CLIENT_LIMIT_S
    )
    out.write_text(
        f"$ {' '.join(argv)}\nrc={proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc


def opencode_run(project: Path, env: dict[str, str], out: Path) -> subprocess.CompletedProcess[str]:
    return run_client([_client("opencode"), "run", "--format", "json", PROMPT], project, env, out)


def claude_run(
    project: Path, config: str, env: dict[str, str], out: Path
) -> subprocess.CompletedProcess[str]:
    argv = [
        _client("claude"),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        config,
        "--allowedTools",
        "mcp__sage",
        "--",
        PROMPT,
    ]
    return run_client(argv, project, {**env, "MCP_TIMEOUT": "180000"}, out)


def query(workspace: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(workspace / "sage.db")
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def check_session(workspace: Path, server: AgentModelServer, operator: str, log_file: Path) -> None:
    """The model saw every result as a normal one, and the workspace holds the session."""
    finals = [e for e in server.log if e.get("reply") == "final"]
    assert finals, f"the agent never finished; see {log_file}"
    seen = {}
    for call in finals[-1]["calls"]:
        assert not call["is_error"], call
        seen.setdefault(call["tool"], []).append(call["text"])
    assert [c["tool"] for c in finals[-1]["calls"]] == [t for t, _ in SESSION]
    refused, wrong, fixed = (json.loads(t[t.index("{") :]) for t in seen["evaluate"])
    assert refused["status"] == "refused" and refused["round_spent"] is False and refused["missing"]
    assert wrong["verdict"]["stage"] == "correctness" and not wrong["verdict"]["correct"]
    diagnosis = json.loads(seen["diagnose"][0][seen["diagnose"][0].index("{") :])
    assert diagnosis["mismatch"]["expected"] != diagnosis["mismatch"]["got"]
    assert "first mismatch" in diagnosis["text"]
    assert fixed["verdict"]["correct"] is True
    rows = query(
        workspace,
        f"SELECT tool, status FROM tool_calls WHERE operator = '{operator}' OR "
        "(operator IS NULL AND tool = 'status') ORDER BY id",
    )
    assert rows[-len(SESSION) :] == SESSION
    assert query(
        workspace, f"SELECT correct, rounds_used FROM operator_results WHERE operator = '{operator}'"
    ) == [(1, 2)]
    assert query(workspace, f"SELECT count(*) FROM round_traces WHERE operator = '{operator}'") == [(2,)]


def agent_label(workspace: Path) -> list[str]:
    return [c for (c,) in query(workspace, "SELECT DISTINCT client FROM tool_calls ORDER BY id")]


def test_opencode_over_stdio(tmp_path: Path, sage_bin: Path, model_server: AgentModelServer) -> None:
    opencode = _client("opencode")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    config = json.loads((EXAMPLES / "opencode.json").read_text())
    config["mcp"]["sage"]["command"] = ["sage", *server_args(suite(tmp_path, ["scale2"]))]
    (project / "opencode.json").write_text(
        json.dumps(with_fake_provider(config, model_server.port), indent=2)
    )
    env = client_env(home, sage_bin, str(Path(opencode).parent))
    proc = opencode_run(project, env, tmp_path / "opencode.log")
    assert proc.returncode == 0, (tmp_path / "opencode.log").read_text()[-3000:]
    assert FINAL in proc.stdout
    ws = project / "sage-workspace"
    check_session(ws, model_server, "scale2", tmp_path / "opencode.log")
    assert agent_label(ws)[0].startswith("opencode ")
    report = subprocess.run(["sage", "report", str(ws)], env=env, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "opencode" in report.stdout, report.stdout + report.stderr


def test_claude_code_over_stdio(tmp_path: Path, sage_bin: Path, model_server: AgentModelServer) -> None:
    claude = _client("claude")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    config = json.loads((EXAMPLES / ".mcp.json").read_text())
    config["mcpServers"]["sage"]["args"] = server_args(suite(tmp_path, ["scale2"]))
    (project / ".mcp.json").write_text(json.dumps(config, indent=2))
    env = client_env(
        home,
        sage_bin,
        str(Path(claude).parent),
        ANTHROPIC_API_KEY="dummy",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model_server.port}",
    )
    proc = claude_run(project, ".mcp.json", env, tmp_path / "claude.log")
    assert proc.returncode == 0, (tmp_path / "claude.log").read_text()[-3000:]
    assert FINAL in proc.stdout
    ws = project / "sage-workspace"
    check_session(ws, model_server, "scale2", tmp_path / "claude.log")
    assert agent_label(ws)[0].startswith("claude-code ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_one_server_two_client_runs(
    tmp_path: Path, sage_bin: Path, model_server: AgentModelServer
) -> None:
    """`sage mcp --http` started once; `opencode run` solves the first operator, then a second client
    run (Claude Code, with the token) reconnects and solves the next: the token holder's sessions
    continue the run."""
    opencode, claude = _client("opencode"), _client("claude")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    port, token = _free_port(), "test-token-5f0e"
    remote = json.loads((EXAMPLES / "opencode-remote.json").read_text())
    remote["mcp"]["sage"]["url"] = f"http://127.0.0.1:{port}/mcp"
    (project / "opencode.json").write_text(
        json.dumps(with_fake_provider(remote, model_server.port), indent=2)
    )
    claude_config = json.loads((EXAMPLES / "claude-http.mcp.json").read_text())
    claude_config["mcpServers"]["sage"]["url"] = f"http://127.0.0.1:{port}/mcp"
    (project / "claude-http.mcp.json").write_text(json.dumps(claude_config, indent=2))
    env = client_env(
        home,
        sage_bin,
        os.pathsep.join({str(Path(opencode).parent), str(Path(claude).parent)}),
        SAGE_MCP_TOKEN=token,
        ANTHROPIC_API_KEY="dummy",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model_server.port}",
    )
    tasks = suite(tmp_path, ["scale2", "scale2_again"])
    server_log = (tmp_path / "sage-http.log").open("w")
    server = subprocess.Popen(
        ["sage", *server_args(tasks), "--http", "--port", str(port)],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # the server answers at once (the run opens in the background)
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None and time.monotonic() < deadline, (
                tmp_path / "sage-http.log"
            ).read_text()
            time.sleep(0.2)
        first = opencode_run(project, env, tmp_path / "opencode.log")
        assert first.returncode == 0 and FINAL in first.stdout, (tmp_path / "opencode.log").read_text()[
            -3000:
        ]
        check_session(project / "sage-workspace", model_server, "scale2", tmp_path / "opencode.log")
        second = claude_run(project, "claude-http.mcp.json", env, tmp_path / "claude.log")
        assert second.returncode == 0 and FINAL in second.stdout, (tmp_path / "claude.log").read_text()[
            -3000:
        ]
        check_session(project / "sage-workspace", model_server, "scale2_again", tmp_path / "claude.log")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
        server_log.close()
    ws = project / "sage-workspace"
    labels = agent_label(ws)
    assert labels[0].startswith("opencode ") and labels[-1].startswith("claude-code "), labels
    assert all("(http" in label for label in labels)
    assert query(ws, "SELECT count(*) FROM tool_calls WHERE status = 'error'") == [(0,)]
    assert query(ws, "SELECT status FROM runs") == [("finished",)]
