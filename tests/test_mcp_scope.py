"""`sage mcp --retrieve-only KEY=VALUE` and `--exclude-run RUN` restrict what the server's `retrieve`
tool returns exactly as they restrict `sage run` (one RunConfig field, one RetrievalScope)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'sagekernel[mcp]')")

from sagekernel.mcp_server.client import connect_stdio
from test_mcp_server import server_args

DEAD_MODEL = "http://127.0.0.1:9"  # the model only distils, after an operator: never reached here


async def first_retrieval(args: list[str]) -> list[str]:
    async with connect_stdio(args) as client:
        await client.call("open_operator")
        return [item["id"] for item in (await client.call("retrieve"))["items"]]


def test_the_retrieval_scope_options_restrict_the_servers_retrieve(tmp_path: Path) -> None:
    plain = anyio.run(first_retrieval, server_args(tmp_path / "plain", DEAD_MODEL))
    assert plain, "the seeded memory retrieves something for the first operator"
    only_other_team = anyio.run(first_retrieval, [
        *server_args(tmp_path / "scoped", DEAD_MODEL), "--retrieve-only", "team=nobody"])
    assert only_other_team == []
