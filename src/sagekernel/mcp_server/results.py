"""What each tool returns, as typed records: the MCP output schemas, and the one JSON boundary.

Every result crosses `to_json_text` on the run's thread before anything else sees it: the text it
returns is what the tool-call log stores AND what the transport sends (server.py parses it back),
so the log and the client cannot disagree, and a value JSON cannot carry (raw bytes, a float
NaN, an object) fails there as a tool error that names it, instead of inside the MCP SDK as an
opaque "Error executing tool". The TypedDicts below give clients the output schema of each tool
(`tools/list` carries it); nested values stay loosely typed (docs/mcp.md lists their fields).
"""

from __future__ import annotations

import json
import math
from typing import Any

from typing_extensions import TypedDict


class NotJsonClean(ValueError):
    """A tool result holds a value JSON cannot carry; `path` says where."""


def check_json_clean(value: Any, path: str = "result") -> None:
    """Raise `NotJsonClean` unless `value` is plain JSON (dict with str keys, list, str, finite
    number, bool, None). Tuples count as lists."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJsonClean(f"{path} is {value!r}, which JSON cannot carry")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJsonClean(f"{path} has a non-string key {key!r}")
            check_json_clean(item, f"{path}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_json_clean(item, f"{path}[{i}]")
        return
    raise NotJsonClean(f"{path} is a {type(value).__name__}, which JSON cannot carry")


def to_json_text(result: dict[str, Any]) -> str:
    """The result as the JSON text the client receives (compact); `NotJsonClean` if it is not plain
    JSON."""
    check_json_clean(result)
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class MissedResult(TypedDict, total=False):
    """A result the client never received (it cancelled or timed out), handed over by the next call."""

    tool: str
    round: int | None
    status: str
    result: dict[str, Any]


class _Recoverable(TypedDict, total=False):
    missed_results: list[MissedResult]


class StatusResult(_Recoverable, total=False):
    ready: bool
    state: str
    run_id: str | None
    workspace: str
    method: str
    target: str
    suite: str
    budget_per_operator: int
    pending_operators: list[str]
    done_operators: int
    open_operator: str
    budget: dict[str, Any]
    server_model: dict[str, Any]


class OpenOperatorResult(_Recoverable, total=False):
    operator: str
    level: int
    category: str
    description: str
    reference: str
    contract: str
    target: str
    language: str
    files: list[dict[str, Any]]
    knowledge: dict[str, Any]
    resident_rules: list[dict[str, Any]]
    budget: dict[str, Any]
    pending_operators: list[str]
    diagnostics_available: list[str]


class RetrieveResult(_Recoverable, total=False):
    round: int
    episode: str
    items: list[dict[str, Any]]
    added_by_query: list[str]
    resident_rules: list[dict[str, Any]]
    feedback: str | None
    current_code: str | None
    history: list[dict[str, Any]]
    best_ms: float | None
    reference_ms: float | None
    budget: dict[str, Any]
    instruction: str


class EvaluateResult(_Recoverable, total=False):
    status: str
    round_spent: bool
    round: int
    episode: str
    verdict: dict[str, Any]
    feedback: str | None
    missing: list[str]
    conflicting: list[str]
    unknown: list[str]
    invalid: list[str]  # why a record did not validate (agent/decisions.py)
    message: str
    budget: dict[str, Any]
    operator_finished: bool
    result: dict[str, Any]
    next: str


class DiagnoseResult(_Recoverable, total=False):
    round_spent: bool
    operator: str
    target: str
    available: bool
    message: str
    text: str | None
    shape: dict[str, int]
    diagnostics: dict[str, Any] | None
    mismatch: dict[str, Any] | None
    seconds: float


class FinishResult(_Recoverable, total=False):
    status: str
    result: dict[str, Any]
    pending_operators: list[str]
