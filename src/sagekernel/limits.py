"""Limits on what SAGE accepts from outside: one home for each, documented in docs/limits.md.

Every externally supplied payload has a limit and a clear refusal that names it. Kernel sources
are kilobytes; a payload many times larger is a mistake or an attack, and storing it (a tool call
is logged, a candidate is stored) multiplies its cost: 20 MB of code sent over MCP once grew a
workspace to 70 MB. Limits elsewhere, by their modules: memory import fields
(`memory.io.MAX_FIELD_CHARS`), task files loaded in a limited child (`tasks/isolate.py`),
compiler logs kept (`targets/*/build.py`), the harness channel (`sandbox.MAX_CHANNEL_BYTES`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Bytes of one candidate's source, all its files together (UTF-8): MCP `evaluate`/`diagnose`,
#: `sage eval` kernel files.
MAX_SOURCE_BYTES = 1 << 20
#: Bytes of the JSON-encoded arguments of one MCP tool call (a source at its limit, with its
#: adoption decisions and diagnosis, fits).
MAX_TOOL_ARGUMENTS_BYTES = MAX_SOURCE_BYTES + (256 << 10)


def source_problem(files: Mapping[str, str]) -> str | None:
    """Why a candidate's files are too large (None: they are not)."""
    size = sum(len(text.encode("utf-8", "surrogatepass")) for text in files.values())
    if size > MAX_SOURCE_BYTES:
        return (f"the candidate's source is {size:,} bytes; at most {MAX_SOURCE_BYTES:,} are accepted "
                "(docs/limits.md)")
    return None


def tool_arguments_problem(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """Why one MCP tool call's arguments are too large (None: they are not)."""
    size = len(json.dumps(dict(arguments), default=str).encode("utf-8", "surrogatepass"))
    if size > MAX_TOOL_ARGUMENTS_BYTES:
        return (f"refused: the arguments of {tool} are {size:,} bytes; at most {MAX_TOOL_ARGUMENTS_BYTES:,} "
                "are accepted (a kernel source at most "
                f"{MAX_SOURCE_BYTES:,}; docs/limits.md). Nothing was evaluated or stored")
    return None
