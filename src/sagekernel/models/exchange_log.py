"""The exchange log: every model call attempt appended to the workspace database as it happens.

One row per attempt (migration 0002): request messages and parameters, the reply or the error,
usage (with `cached_tokens`, the prompt tokens a prefix cache served: migration 0006), cost and
latency, tagged with run_id / operator / round (+ free-form tags). Prompts and
replies are full-text indexed (FTS5), which `sage log search` uses.

Tags come from three places, later ones winning: the log's own `run_id`/`tags`, the current
`context(...)` (a contextvar, so each thread / task has its own), and the `tags=` of one call::

    log = ExchangeLog(conn, run_id="20261130_031500_sage")
    model = make_model("local", log=log)
    with log.context(operator="softmax", round=3, episode="opt"):
        model.complete(messages)

Each write is a single autocommitted INSERT, so a crash loses at most the attempt in flight —
unless the caller has a transaction open on the same connection while it calls the model: the
rows then commit (or roll back) with that transaction, since a second connection could not write
while it is held. Call models outside transactions where losing their log on rollback matters.
A connection is only used by the thread that created it: other threads get their own connection
to the same file (sqlite3 objects cannot cross threads).
"""

from __future__ import annotations

import contextvars
import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sagekernel import db
from sagekernel.errors import WorkspaceError
from sagekernel.models.base import Message, Reply

_NO_TAGS: Mapping[str, Any] = MappingProxyType({})
_CONTEXT: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("sage_exchange_tags",
                                                                             default=_NO_TAGS)
_COLUMN_TAGS = ("run_id", "operator", "round")


@contextmanager
def exchange_context(**tags: Any) -> Iterator[None]:
    """Tag every exchange logged inside the block (nests; inner values win)."""
    token = _CONTEXT.set({**_CONTEXT.get(), **tags})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def flatten_messages(messages: Sequence[Message]) -> str:
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in messages)


@dataclass
class Exchange:
    """One logged attempt, as read back."""

    id: int
    created_at: str
    call_id: str
    attempt: int
    status: str
    run_id: str | None
    operator: str | None
    round: int | None
    tags: dict[str, Any]
    model_spec: str
    model: str | None
    messages: list[dict[str, str]]
    params: dict[str, Any]
    reply_text: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float | None
    error: str | None
    extra: dict[str, Any]
    snippet: str | None = None
    cached_tokens: int | None = None  # None: not reported, or a log older than migration 0006

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Exchange:
        keys = row.keys()
        return cls(
            id=row["id"], created_at=row["created_at"], call_id=row["call_id"], attempt=row["attempt"],
            status=row["status"], run_id=row["run_id"], operator=row["operator"], round=row["round"],
            tags=json.loads(row["tags_json"]), model_spec=row["model_spec"], model=row["model"],
            messages=json.loads(row["messages_json"]), params=json.loads(row["params_json"]),
            reply_text=row["reply_text"], finish_reason=row["finish_reason"],
            prompt_tokens=row["prompt_tokens"], completion_tokens=row["completion_tokens"],
            cost_usd=row["cost_usd"], latency_s=row["latency_s"], error=row["error"],
            extra=json.loads(row["extra_json"]), snippet=row["snippet"] if "snippet" in keys else None,
            cached_tokens=row["cached_tokens"] if "cached_tokens" in keys else None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ExchangeLog:
    """Appends exchanges to the `exchanges` table of a workspace database."""

    def __init__(self, conn: sqlite3.Connection, *, run_id: str | None = None,
                 tags: Mapping[str, Any] | None = None) -> None:
        if not has_log(conn):
            raise WorkspaceError(f"the database {db.conn_path(conn)} has no exchange log table "
                                 "(open it with sagekernel.db.connect, which applies the migrations)")
        self._conn = conn
        self._owner = threading.get_ident()
        self._path = db.conn_path(conn)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.run_id = run_id
        self.tags: dict[str, Any] = dict(tags or {})

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection of the thread that created the log (for reading back in tests and tools)."""
        return self._conn

    @classmethod
    def open(cls, workspace: Path | str, *, run_id: str | None = None,
             tags: Mapping[str, Any] | None = None) -> ExchangeLog:
        """Open (creating and migrating if needed) the workspace database and log into it."""
        return cls(db.connect(workspace), run_id=run_id, tags=tags)

    def context(self, **tags: Any) -> AbstractContextManager[None]:
        """`with log.context(operator=..., round=...):` tags the exchanges made inside the block."""
        return exchange_context(**tags)

    def _connection(self) -> sqlite3.Connection:
        if threading.get_ident() == self._owner:
            return self._conn
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if not self._path or self._path == "<memory>":
                raise WorkspaceError("an in-memory exchange log can only be written from the thread that "
                                     "opened it; log to a workspace file instead")
            conn = db.connect(self._path)
            self._local.conn = conn
        return conn

    def record(self, *, call_id: str, attempt: int, status: str, model_spec: str,
               messages: Sequence[Message], params: Mapping[str, Any], reply: Reply | None = None,
               error: str | None = None, latency_s: float | None = None,
               tags: Mapping[str, Any] | None = None) -> int:
        """Append one attempt; returns its row id."""
        merged: dict[str, Any] = {"run_id": self.run_id, **self.tags, **_CONTEXT.get(), **(tags or {})}
        columns = {key: merged.pop(key, None) for key in _COLUMN_TAGS}
        round_value = columns["round"]
        extra = dict(reply.extra) if reply else {}
        if reply is not None and reply.structured is not None:
            extra["structured"] = reply.structured  # the structured answer, beside the text
        row = (
            datetime.now(UTC).isoformat(timespec="milliseconds"), call_id, attempt, status,
            _str_or_none(columns["run_id"]), _str_or_none(columns["operator"]),
            int(round_value) if round_value is not None else None,
            _dumps({k: v for k, v in merged.items() if v is not None}), model_spec,
            reply.model if reply else None,
            _dumps([{"role": m.role, "content": m.content} for m in messages]), _dumps(dict(params)),
            flatten_messages(messages), reply.text if reply else None,
            reply.finish_reason if reply else None, reply.prompt_tokens if reply else None,
            reply.completion_tokens if reply else None, reply.cost_usd if reply else None,
            latency_s if latency_s is not None else (reply.latency_s if reply else None),
            error, _dumps(extra), reply.cached_tokens if reply else None,
        )
        conn = self._connection()
        try:
            with self._lock:
                cur = conn.execute(
                    "INSERT INTO exchanges (created_at, call_id, attempt, status, run_id, operator, round, "
                    "tags_json, model_spec, model, messages_json, params_json, prompt_text, reply_text, "
                    "finish_reason, prompt_tokens, completion_tokens, cost_usd, latency_s, error, "
                    "extra_json, cached_tokens) VALUES (" + ", ".join("?" * len(row)) + ")", row)
        except sqlite3.DatabaseError as exc:
            raise WorkspaceError(f"cannot append to the exchange log in {self._path}: {exc}") from exc
        return int(cur.lastrowid or 0)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# Reading (used by `sage log`, `sage report` and the run summary; works on a read-only connection)

_SELECT = "SELECT e.* FROM exchanges e"


def has_log(conn: sqlite3.Connection) -> bool:
    return "exchanges" in db.tables(conn)


#: The status of a logged attempt: answered, failed and retried, failed for good.
STATUSES = ("ok", "retry", "error")


def list_exchanges(conn: sqlite3.Connection, *, run_id: str | None = None, status: str | None = None,
                   limit: int = 50) -> list[Exchange]:
    """Newest first."""
    where, args = [], []
    if run_id is not None:
        where.append("e.run_id = ?")
        args.append(run_id)
    if status is not None:
        where.append("e.status = ?")
        args.append(status)
    sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY e.id DESC LIMIT ?"
    return [Exchange.from_row(r) for r in conn.execute(sql, [*args, limit])]


def get_exchange(conn: sqlite3.Connection, exchange_id: int) -> Exchange | None:
    row = conn.execute(_SELECT + " WHERE e.id = ?", (exchange_id,)).fetchone()
    return Exchange.from_row(row) if row else None


def search_exchanges(conn: sqlite3.Connection, query: str, *, run_id: str | None = None,
                     limit: int = 20) -> list[Exchange]:
    """Full-text search over prompts and replies, best match first.

    `query` is FTS5 syntax (`softmax AND tiling`, `"shared memory"`, `vector*`); text that is not
    valid FTS5 (e.g. `a-b`) is searched as plain words instead.
    """
    sql = ("SELECT e.*, snippet(exchanges_fts, -1, '«', '»', '…', 12) AS snippet "
           "FROM exchanges_fts JOIN exchanges e ON e.id = exchanges_fts.rowid "
           "WHERE exchanges_fts MATCH ?" + (" AND e.run_id = ?" if run_id is not None else "")
           + " ORDER BY rank LIMIT ?")
    args: list[Any] = [query] + ([run_id] if run_id is not None else []) + [limit]
    try:
        rows = conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # not FTS5 syntax (e.g. "a-b" reads as a column filter)
        words = [w.replace('"', '""') for w in query.split()]
        if not words:
            return []
        args[0] = " ".join(f'"{w}"' for w in words)
        rows = conn.execute(sql, args).fetchall()
    return [Exchange.from_row(r) for r in rows]


def round_answers(conn: sqlite3.Connection, run_id: str, operator: str,
                  round_: int) -> list[tuple[dict[str, Any], str, Any]]:
    """(tags, reply text, structured answer) of each answered call of one round, oldest first."""
    if not has_log(conn):
        return []
    rows = conn.execute("SELECT reply_text, tags_json, extra_json FROM exchanges WHERE run_id = ? AND "
                        "operator = ? AND round = ? AND status = 'ok' ORDER BY id",
                        (run_id, operator, round_)).fetchall()
    return [(json.loads(tags), text or "", json.loads(extra or "{}").get("structured"))
            for text, tags, extra in rows]


# ---------------------------------------------------------------------------------------------
# Spend: the one reading of a run's model usage (`sage run`'s summary, `sage report`, the budget
# of a resumed run), so they cannot count it two ways.

@dataclass(frozen=True)
class Spend:
    """A run's whole model spend from the exchange log, attempts of operators that never finished
    included. `calls` counts `Model.complete` calls (a call and its retries are one call);
    `answered` those that got a reply; `attempts` every logged attempt (retries and failures too).
    Tokens and cost are what the answered attempts reported; `cost_usd` is None when no attempt
    was priced."""

    tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    answered: int = 0
    attempts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_spend(conn: sqlite3.Connection, run_id: str) -> Spend:
    """The spend of `run_id` (an all-zero Spend for a workspace without an exchange log)."""
    if not has_log(conn):
        return Spend()
    row = conn.execute(
        "SELECT coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0), sum(cost_usd), "
        "count(DISTINCT call_id), count(DISTINCT CASE WHEN status = 'ok' THEN call_id END), count(*) "
        "FROM exchanges WHERE run_id = ?", (run_id,)).fetchone()
    return Spend(tokens=int(row[0]), cost_usd=None if row[1] is None else float(row[1]),
                 calls=int(row[2]), answered=int(row[3]), attempts=int(row[4]))


# ---------------------------------------------------------------------------------------------
# Tool calls: what a coding agent asked `sage mcp` (migration 0005), logged beside the exchanges.

_TOOL_CALL_COLUMNS = ("id, created_at, run_id, client, tool, operator, round, status, arguments_json, "
                      "result_json, wall_s")


@dataclass(frozen=True)
class ToolCall:
    """One logged tool call, as read back."""

    id: int
    created_at: str
    run_id: str | None
    client: str
    tool: str
    operator: str | None
    round: int | None
    status: str  # ok | refused | error | undelivered
    arguments: dict[str, Any]
    result: dict[str, Any]
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_tool_call(conn: sqlite3.Connection, *, run_id: str, client: str, tool: str, operator: str | None,
                     round_: int | None, status: str, arguments: Mapping[str, Any], result_json: str,
                     wall_s: float) -> int:
    """Append one tool call; `result_json` is the text the client is sent. Returns its row id."""
    cur = conn.execute(
        f"INSERT INTO tool_calls ({_TOOL_CALL_COLUMNS.removeprefix('id, ')}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (datetime.now(UTC).isoformat(timespec="milliseconds"), run_id, client, tool, operator, round_, status,
         json.dumps(dict(arguments), sort_keys=True, default=str), result_json, wall_s))
    return int(cur.lastrowid or 0)


def mark_tool_call_undelivered(conn: sqlite3.Connection, call_id: int) -> None:
    """The client gave up on this call before its result arrived (timeout, cancellation)."""
    conn.execute("UPDATE tool_calls SET status = 'undelivered' WHERE id = ?", (call_id,))


def has_tool_calls(conn: sqlite3.Connection) -> bool:
    return "tool_calls" in db.tables(conn)


def list_tool_calls(conn: sqlite3.Connection, *, run_id: str | None = None,
                    limit: int = 50) -> list[ToolCall]:
    """The newest `limit` tool calls, oldest first."""
    sql, args = f"SELECT {_TOOL_CALL_COLUMNS} FROM tool_calls", []
    if run_id is not None:
        sql += " WHERE run_id = ?"
        args.append(run_id)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()[::-1]
    return [ToolCall(id=r[0], created_at=r[1], run_id=r[2], client=r[3], tool=r[4], operator=r[5], round=r[6],
                     status=r[7], arguments=json.loads(r[8]), result=json.loads(r[9]), wall_s=float(r[10]))
            for r in rows]


def tool_clients(conn: sqlite3.Connection, run_id: str) -> list[str]:
    """The clients that called the run's tools, in the order they first called."""
    if not has_tool_calls(conn):
        return []
    return [str(c) for (c,) in conn.execute(
        "SELECT client FROM tool_calls WHERE run_id = ? GROUP BY client ORDER BY min(id)", (run_id,))]


def evaluated_arguments(conn: sqlite3.Connection, run_id: str, operator: str,
                        round_: int) -> dict[str, Any] | None:
    """The arguments of the `evaluate` call that spent `round_` (the last one, after a restart)."""
    if not has_tool_calls(conn):
        return None
    row = conn.execute("SELECT arguments_json FROM tool_calls WHERE run_id = ? AND operator = ? AND "
                       "round = ? AND tool = 'evaluate' AND status = 'ok' ORDER BY id DESC LIMIT 1",
                       (run_id, operator, round_)).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def run_logged(conn: sqlite3.Connection, run_id: str) -> bool:
    """Whether any exchange or tool call is tagged with `run_id`."""
    present = db.tables(conn)
    return any(conn.execute(f"SELECT 1 FROM {table} WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
               for table in ("exchanges", "tool_calls") if table in present)
