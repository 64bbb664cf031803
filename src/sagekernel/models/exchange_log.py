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
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='exchanges'").fetchone()
        if not has_table:
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
# Reading (used by `sage log`; works on a read-only connection)

_SELECT = "SELECT e.* FROM exchanges e"


def has_log(conn: sqlite3.Connection) -> bool:
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='exchanges'").fetchone() is not None


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
