"""Every externally supplied payload has a documented limit (sagekernel/limits.py, docs/limits.md)
and a clear refusal: an oversized MCP tool call is refused before anything is evaluated, logged or
stored; an oversized kernel file is refused by `sage eval` in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")

from openai_server import OpenAITestServer
from sagekernel.limits import MAX_SOURCE_BYTES, MAX_TOOL_ARGUMENTS_BYTES
from sagekernel.mcp_server.worker import ServiceWorker
from sagekernel.runner.config import RunConfig
from test_cli_values import invoke
from test_e2e_run import FAST, TASKS, Script, kernel, prepare, query


def test_an_oversized_mcp_payload_is_refused_and_not_stored(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        worker = ServiceWorker(
            RunConfig(
                workspace=ws,
                suite=str(TASKS),
                model=f"openai:test-model@{srv.base_url}",
                driver="mcp",
                schedule="by-level",
                budget=3,
                k=10,
                embedder="none",
                harness=FAST,
                progress=False,
            )
        )
        worker.start()
        try:
            assert worker.call("open_operator", {})[0] == "ok"
            huge = kernel("e2e_double") + "// " + "x" * (MAX_TOOL_ARGUMENTS_BYTES + 1) + "\n"
            status, result = worker.call("evaluate", {"code": huge})
            assert (
                status == "error"
                and "refused" in result["error"]
                and f"{MAX_SOURCE_BYTES:,}" in result["error"]
            )
            size = (ws / "sage.db").stat().st_size + sum(p.stat().st_size for p in ws.glob("sage.db-wal"))
            assert size < MAX_SOURCE_BYTES  # stored nowhere (not twice, as the log and the candidate did)
        finally:
            worker.stop()
    assert query(ws, "SELECT count(*) FROM candidates") == [(0,)]
    assert query(ws, "SELECT count(*) FROM tool_calls WHERE tool = 'evaluate'") == [(0,)]


def test_an_oversized_kernel_file_is_refused_in_one_line(tmp_path: Path) -> None:
    big = tmp_path / "kernel.c"
    big.write_text("// " + "x" * MAX_SOURCE_BYTES + "\n")
    code, _, err = invoke(["eval", "softmax", str(big), "--skip-timing"])
    assert code == 2 and err.count("\n") == 1 and f"at most {MAX_SOURCE_BYTES:,}" in err, err
