"""A small client over the SDK's own `ClientSession`, for scripted sessions (tests, transcripts).

`connect_stdio(args)` spawns `sage mcp ARGS` with the SDK's `stdio_client` and yields a
`ToolClient`, whose `call(tool, **arguments)` returns the tool's structured result (raising
`ToolCallError` on a tool error) and appends every exchange to `transcript`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


class ToolCallError(Exception):
    """The server answered a tool call with an error result."""


@dataclass
class ToolClient:
    session: ClientSession
    transcript: list[dict[str, Any]] = field(default_factory=list)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, {k: v for k, v in arguments.items() if v is not None})
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        data = result.structured_content if isinstance(result.structured_content, dict) else None
        self.transcript.append(
            {
                "tool": tool,
                "arguments": arguments,
                "is_error": result.is_error,
                "result": data if data is not None else text,
            }
        )
        if result.is_error:
            raise ToolCallError(text)
        if data is None:
            data = json.loads(text)
        return data

    async def tools(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]


def sage_command(args: Sequence[str]) -> StdioServerParameters:
    """`sage mcp ARGS` with this interpreter and this import path (a source checkout works too)."""
    paths = [p for p in sys.path if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return StdioServerParameters(
        command=sys.executable, args=["-c", "from sagekernel.cli import main; main()", "mcp", *args], env=env
    )


@asynccontextmanager
async def connect_http(url: str, token: str) -> AsyncIterator[ToolClient]:
    """A session over streamable HTTP with the bearer token (`sage mcp --http`)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield ToolClient(session)


@asynccontextmanager
async def connect_stdio(args: Sequence[str], errlog: Any = None) -> AsyncIterator[ToolClient]:
    async with (
        stdio_client(sage_command(args), errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield ToolClient(session)
