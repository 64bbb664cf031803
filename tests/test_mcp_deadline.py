"""`sage mcp` keeps the runner's evaluation deadline although it evaluates on a worker thread: a
task whose reference hangs only as the harness runs it (float64, in the trusted process) gets an
error result within the deadline, its operator is recorded as failed with the reason, and the same
server evaluates the next operator normally."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")

from openai_server import OpenAITestServer
from sagekernel.harness.config import HarnessConfig
from sagekernel.mcp_server.client import ToolCallError, connect_stdio
from sagekernel.runner.config import evaluation_deadline_s
from test_e2e_run import FAST, TASKS, Script, kernel, prepare, query
from test_evaluation_deadline import HANGS_IN_FLOAT64
from test_mcp_server import decision, server_args

#: Small harness limits, so that the deadline (3 x their sum) is short.
LIMITS = {"build_timeout_s": 3.0, "start_timeout_s": 1.5, "timing_timeout_s": 0.5, "call_timeout_s": 0.1}
DEADLINE_S = evaluation_deadline_s(HarnessConfig(**{**FAST, **LIMITS}))


def args_for(ws: Path, suite: Path, url: str) -> list[str]:
    args = server_args(ws, url)
    args[args.index("--suite") + 1] = str(suite)
    return [*args, *(a for key, value in LIMITS.items() for a in ("--harness", f"{key}={json.dumps(value)}"))]


async def evaluate_operator(client: Any, name: str) -> dict[str, Any]:
    opened = await client.call("open_operator", name=name)
    assert opened["operator"] == name
    got = await client.call("retrieve")
    adoptions = [decision(i) for i in got["items"]]
    rules = [{"id": r["id"], "decision": "NOT ADOPTED", "rationale": "not needed"}
             for r in got["resident_rules"]]
    return await client.call("evaluate", code=kernel(name), adoptions=adoptions + rules)  # type: ignore[no-any-return]


async def session(args: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with connect_stdio(args) as client:
        started = time.monotonic()
        with pytest.raises(ToolCallError) as hung:
            await evaluate_operator(client, "e2e_double")
        out["elapsed"], out["error"] = time.monotonic() - started, str(hung.value)
        out["status"] = await client.call("status")
        out["next"] = await evaluate_operator(client, "e2e_negate")
    return out


def test_an_evaluation_that_hangs_under_sage_mcp_fails_in_time_and_the_server_goes_on(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "e2e_double.py").write_text(HANGS_IN_FLOAT64)
    shutil.copy(TASKS / "e2e_negate.py", suite / "e2e_negate.py")
    ws = tmp_path / "ws"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        got = anyio.run(session, args_for(ws, suite, srv.base_url))
    assert "took longer than" in got["error"] and "recorded as failed" in got["error"]
    assert DEADLINE_S - 1 < got["elapsed"] < DEADLINE_S + 20
    assert got["status"]["pending_operators"] == ["e2e_negate"] and "open_operator" not in got["status"]
    assert got["next"]["status"] == "evaluated" and got["next"]["verdict"]["correct"] is True
    errors = dict(query(ws, "SELECT operator, error FROM operator_results"))
    assert "EvaluationTimeout" in errors["e2e_double"] and "took longer than" in errors["e2e_double"]
