"""The memory store: the workspace's SQLite database (`sagekernel.db.connect`) or a shared
PostgreSQL database (memory/backend.py), through one portable SQL dialect.

Only the runner's thread of each learner writes memory, through `MemoryPolicy.learn` (plus
`load_seed` and `import`). Writers call the `save`/`insert_*` methods inside one
`db.transaction` that begins with `lock_writer`; readers (retrieval, CLI, report) never write.
Workspace failures (missing, locked, corrupted, newer schema) are raised by `sagekernel.db` as
WorkspaceError.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from sagekernel.errors import SageError
from sagekernel.memory.backend import WRITER_LOCK_KEY, dialect
from sagekernel.memory.embedding import from_blob, to_blob
from sagekernel.memory.merge import Event
from sagekernel.memory.records import (
    AdoptionRecord,
    HistoryRow,
    HotEntry,
    HotSnapshot,
    Item,
    ItemState,
    Provenance,
    RetrievalScope,
)
from sagekernel.memory.rule_versions import Evidence, RuleVersion
from sagekernel.records import ItemDraft

_COLUMNS = ("id, title, type, category, error_message, wrong_code, correct_code, u, n_ret, n_ado, n_upd, "
            "p_hat, eligible_episodes, state, rule_text, rule_tokens, q1, q2, born_episode, "
            "resident_episodes, promoted_at_episode, source, created_at, content_hash")
_CHUNK = 500  # SQLite host-parameter headroom
# eligible_episodes = max(0, clock − born − resident) and p̂ = min(1, n_ret / max(1, eligible)),
# written with CASE because SQLite's scalar max/min are PostgreSQL's greatest/least.
_ELIGIBLE = "(? - born_episode - resident_episodes)"
_AT_LEAST_ONE = f"(CASE WHEN {_ELIGIBLE} > 1 THEN {_ELIGIBLE} ELSE 1 END)"
_SET_FREQUENCY = (f"eligible_episodes = CASE WHEN {_ELIGIBLE} > 0 THEN {_ELIGIBLE} ELSE 0 END, "
                  f"p_hat = CASE WHEN n_ret < {_AT_LEAST_ONE} "
                  f"THEN CAST(n_ret AS DOUBLE PRECISION) / {_AT_LEAST_ONE} ELSE 1.0 END")
_FREQUENCY_PARAMS = 6  # placeholders in _SET_FREQUENCY
_HISTORY_COLUMNS = ("item_id, kind, clock, run_id, model, target, device, operator, episode, protocol, team, "
                    "xi, u_before, u_after, retrieved, adopted, created_at")


class MemoryStoreError(SageError):
    """A memory item or file the user named is missing or malformed."""


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_stamp() -> str:
    """HotSnapshot created_at format of spec §1.2 (e.g. 20260811_111049)."""
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S")


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i:i + _CHUNK]


@dataclass(frozen=True)
class SnapshotSize:
    """How large one hot-memory snapshot was (what `sage report` plots), read leniently: a
    snapshot whose entries do not parse counts as empty rather than stopping the reader."""

    created_at: str
    n_ops: int
    budget: int
    n_entries: int
    total_tokens: int


class Store:
    """Typed access to the memory tables of one workspace connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.dialect = dialect(conn)
        #: Insertion order of rows without an id column (SQLite's rowid; PostgreSQL's identity id).
        self._order = "rowid" if self.dialect == "sqlite" else "id"
        self.last_stamp = ""  # the stamp of the episode `record_episode` last recorded

    @property
    def shared(self) -> bool:
        """Whether other learners may write this store at the same time (PostgreSQL)."""
        return self.dialect != "sqlite"

    # ---- reads -------------------------------------------------------------------------------
    def count(self, state: ItemState | None = None) -> int:
        if state is None:
            return int(self.conn.execute("SELECT count(*) FROM items").fetchone()[0])
        row = self.conn.execute("SELECT count(*) FROM items WHERE state = ?", (state.value,)).fetchone()
        return int(row[0])

    def get(self, item_id: int) -> Item:
        found = self.get_many([item_id])
        if item_id not in found:
            raise MemoryStoreError(f"no memory item with id {item_id} (see `sage memory list`)")
        return found[item_id]

    def get_many(self, ids: Iterable[int]) -> dict[int, Item]:
        wanted = sorted(set(ids))
        rows: list[sqlite3.Row] = []
        for part in _chunks(wanted):
            marks = ",".join("?" * len(part))
            rows += self.conn.execute(f"SELECT {_COLUMNS} FROM items WHERE id IN ({marks})", part).fetchall()
        return self._hydrate(rows)

    def in_state(self, state: ItemState) -> list[Item]:
        rows = self.conn.execute(f"SELECT {_COLUMNS} FROM items WHERE state = ? ORDER BY id",
                                 (state.value,)).fetchall()
        return list(self._hydrate(rows).values())

    def list_items(self, *, state: ItemState | None = None, order: str = "u", limit: int | None = None,
                   ) -> list[Item]:
        orders = {"u": "u DESC, id", "id": "id", "n_ado": "n_ado DESC, id", "n_ret": "n_ret DESC, id"}
        if order not in orders:
            raise MemoryStoreError(f"unknown order {order!r}; choose one of {', '.join(orders)}")
        where = "WHERE state = ?" if state else ""
        params: list[Any] = [state.value] if state else []
        sql = f"SELECT {_COLUMNS} FROM items {where} ORDER BY {orders[order]}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return list(self._hydrate(self.conn.execute(sql, params).fetchall()).values())

    def index_rows(self) -> list[sqlite3.Row]:
        """Every item's scoring fields (id, u, q1, q2, state, type) and text fields (title,
        error_message, category, wrong_code, correct_code), by id: what the retrieval index loads."""
        return self.conn.execute(
            "SELECT id, u, q1, q2, state, type, title, error_message, category, wrong_code, correct_code "
            "FROM items ORDER BY id").fetchall()

    def all_items(self) -> list[Item]:
        return self.list_items(order="id")

    def _hydrate(self, rows: Sequence[sqlite3.Row]) -> dict[int, Item]:
        items: dict[int, Item] = {}
        for r in rows:
            items[r["id"]] = Item(
                id=r["id"], title=r["title"], type=r["type"], category=r["category"],
                error_message=r["error_message"], wrong_code=r["wrong_code"], correct_code=r["correct_code"],
                u=r["u"], n_ret=r["n_ret"], n_ado=r["n_ado"], n_upd=r["n_upd"], p_hat=r["p_hat"],
                eligible_episodes=r["eligible_episodes"], state=ItemState(r["state"]),
                rule_text=r["rule_text"], rule_tokens=r["rule_tokens"], q1=r["q1"], q2=r["q2"],
                born_episode=r["born_episode"], resident_episodes=r["resident_episodes"],
                promoted_at_episode=r["promoted_at_episode"], source=r["source"],
                created_at=r["created_at"], content_hash=r["content_hash"])
        ids = list(items)
        for table, attr in (("item_adopters", "adopting_ops"), ("item_retrievers", "retrieving_ops")):
            for part in _chunks(ids):
                marks = ",".join("?" * len(part))
                for item_id, op in self.conn.execute(
                        f"SELECT item_id, operator FROM {table} WHERE item_id IN ({marks})", part):
                    getattr(items[item_id], attr).add(op)
        return items

    def adoption_history(self, item_id: int) -> list[AdoptionRecord]:
        rows = self.conn.execute(
            "SELECT run_id, operator, episode, round, item_id, adopted, rationale FROM adoptions "
            f"WHERE item_id = ? ORDER BY {self._order}", (item_id,)).fetchall()
        return [AdoptionRecord(r[0], r[1], r[2], r[3], r[4], None if r[5] is None else bool(r[5]), r[6])
                for r in rows]

    def adoption_rationales(self, item_id: int) -> list[str]:
        """One adoption rationale per distinct adopting operator (input of rule abstraction)."""
        rows = self.conn.execute(
            "SELECT operator, rationale FROM adoptions WHERE item_id = ? AND adopted = 1 "
            f"ORDER BY {self._order}",
            (item_id,)).fetchall()
        seen: dict[str, str] = {}
        for op, why in rows:
            seen.setdefault(op, why)
        return list(seen.values())

    def find_by_hash(self, digest: str) -> int | None:
        row = self.conn.execute("SELECT id FROM items WHERE content_hash = ? LIMIT 1", (digest,)).fetchone()
        return None if row is None else int(row[0])

    def clock(self) -> int:
        """The episode clock: how many episodes this store has learned from."""
        return int(self.conn.execute("SELECT coalesce(max(clock), 0) FROM memory_episodes").fetchone()[0])

    def is_empty(self) -> bool:
        """No item and no learned episode: a workspace whose memory has not been seeded yet."""
        return self.count() == 0 and self.clock() == 0

    def episode_learned(self, run_id: str, operator: str, episode: str) -> bool:
        """Whether this store already learned the episode (run, operator, episode)."""
        return self.conn.execute("SELECT 1 FROM memory_episodes WHERE run_id = ? AND operator = ? "
                                 "AND episode = ?", (run_id, operator, episode)).fetchone() is not None

    def n_ops(self, run_id: str) -> int:
        return int(self.conn.execute("SELECT count(DISTINCT operator) FROM memory_episodes WHERE run_id = ?",
                                     (run_id,)).fetchone()[0])

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else str(row[0])

    def snapshots(self, run_id: str | None = None) -> list[HotSnapshot]:
        sql = "SELECT run_id, created_at, budget, n_ops, entries_json FROM hot_snapshots"
        rows = (self.conn.execute(sql + " WHERE run_id = ? ORDER BY id", (run_id,)) if run_id
                else self.conn.execute(sql + " ORDER BY id")).fetchall()
        return [HotSnapshot(r[0], r[1], r[2], r[3], [HotEntry(**e) for e in json.loads(r[4])]) for r in rows]

    def snapshot_sizes(self, run_id: str) -> list[SnapshotSize]:
        """The run's snapshots in the order of completed operators."""
        out = []
        for r in self.conn.execute("SELECT created_at, budget, n_ops, total_tokens, entries_json "
                                   "FROM hot_snapshots WHERE run_id = ? ORDER BY n_ops, created_at, id",
                                   (run_id,)):
            entries = _entries(r[4])
            total = r[3] if r[3] is not None else sum(_entry_tokens(e) for e in entries)
            out.append(SnapshotSize(str(r[0]), int(r[2] or 0), int(r[1] or 0), len(entries), int(total)))
        return out

    def run_adoptions(self, run_id: str) -> list[AdoptionRecord]:
        """Every adoption decision of the run, by operator, round and item."""
        rows = self.conn.execute(
            "SELECT run_id, operator, episode, round, item_id, adopted, rationale FROM adoptions "
            "WHERE run_id = ? ORDER BY operator, round, item_id", (run_id,)).fetchall()
        return [AdoptionRecord(r[0], r[1], r[2], int(r[3]), int(r[4]), None if r[5] is None else bool(r[5]),
                               r[6]) for r in rows]

    def latest_snapshot(self) -> HotSnapshot | None:
        row = self.conn.execute("SELECT max(id) FROM hot_snapshots").fetchone()
        if row[0] is None:
            return None
        r = self.conn.execute("SELECT run_id, created_at, budget, n_ops, entries_json FROM hot_snapshots "
                              "WHERE id = ?", (row[0],)).fetchone()
        return HotSnapshot(r[0], r[1], r[2], r[3], [HotEntry(**e) for e in json.loads(r[4])])

    def embeddings(self, model: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids, matrix) of every cached embedding of `model`, ordered by id."""
        rows = self.conn.execute("SELECT item_id, dim, vec FROM item_embeddings WHERE model = ? "
                                 "ORDER BY item_id", (model,)).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        mat = np.stack([from_blob(r[2], r[1]) for r in rows])
        return ids, mat

    def embedding_of(self, item_id: int, model: str) -> np.ndarray | None:
        row = self.conn.execute("SELECT dim, vec FROM item_embeddings WHERE item_id = ? AND model = ?",
                                (item_id, model)).fetchone()
        return None if row is None else from_blob(row[1], row[0])

    def history_mark(self) -> int:
        """The newest provenance row's id: every change to an item's utility, counters or content
        writes one, in commit order (ids are taken under the writer lock), so "the rows after this
        mark" are what other learners changed since (policies.py `_sync`)."""
        return int(self.conn.execute("SELECT coalesce(max(id), 0) FROM item_history").fetchone()[0])

    def changed_since(self, mark: int) -> set[int]:
        """Items with a provenance row after `mark`, and every item not cold (UGC moves those
        between validated and consolidated without a row)."""
        rows = self.conn.execute("SELECT DISTINCT item_id FROM item_history WHERE id > ?", (mark,)).fetchall()
        rows += self.conn.execute("SELECT id FROM items WHERE state != 'cold'").fetchall()
        return {int(r[0]) for r in rows}

    def missing_embeddings(self, model: str) -> list[Item]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE id NOT IN (SELECT item_id FROM item_embeddings "
            "WHERE model = ?) ORDER BY id", (model,)).fetchall()
        return list(self._hydrate(rows).values())

    def stats(self) -> dict[str, Any]:
        c = self.conn
        by_state = {s.value: 0 for s in ItemState}
        by_state.update({r[0]: r[1] for r in c.execute("SELECT state, count(*) FROM items GROUP BY state")})
        by_source = {r[0]: r[1] for r in c.execute("SELECT source, count(*) FROM items GROUP BY source")}
        row = c.execute("SELECT count(*), avg(u), min(u), max(u), sum(n_ret), sum(n_ado), "
                        "sum(CASE WHEN u > 0 THEN 1 ELSE 0 END) FROM items").fetchone()
        hot_tokens = c.execute("SELECT coalesce(sum(rule_tokens), 0) FROM items WHERE state = 'consolidated'"
                               ).fetchone()[0]
        return {"items": int(row[0]), "by_state": by_state, "by_source": by_source,
                "u_mean": float(row[1] or 0.0), "u_min": float(row[2] or 0.0), "u_max": float(row[3] or 0.0),
                "positive_u": int(row[6] or 0), "retrievals": int(row[4] or 0), "adoptions": int(row[5] or 0),
                "hot_tokens": int(hot_tokens), "episodes": self.clock(),
                "adoption_records": c.execute("SELECT count(*) FROM adoptions").fetchone()[0],
                "snapshots": c.execute("SELECT count(*) FROM hot_snapshots").fetchone()[0],
                "embedded": c.execute("SELECT count(*) FROM item_embeddings").fetchone()[0]}

    def has_history(self) -> bool:
        """Whether the provenance table exists (a read-only workspace older than migration 0008 has none)."""
        try:
            self.conn.execute("SELECT 1 FROM item_history LIMIT 1")
        except Exception:  # sqlite3 and psycopg name a missing table differently
            return False
        return True

    def run_changes(self, run_id: str) -> dict[str, int]:
        """What one run did to the memory, from its provenance rows: items it distilled, items it
        credited or counted, those of them another run distilled, and other runs with rows."""
        def count(sql: str, *params: str) -> int:
            return int(self.conn.execute(sql, params).fetchone()[0])

        changed = "kind IN ('credited', 'counted')"
        return {
            "created": count("SELECT count(DISTINCT item_id) FROM item_history WHERE run_id = ? AND kind = "
                             "'distilled'", run_id),
            "credited": count(f"SELECT count(DISTINCT item_id) FROM item_history WHERE run_id = ? AND "
                              f"{changed}", run_id),
            "credited_of_other_runs": count(
                "SELECT count(DISTINCT c.item_id) FROM item_history c JOIN item_history d ON d.item_id = "
                "c.item_id AND d.kind = 'distilled' AND d.run_id <> '' AND d.run_id <> ? WHERE c.run_id = ? "
                f"AND c.{changed}", run_id, run_id),
            "other_runs": count("SELECT count(DISTINCT run_id) FROM item_history WHERE run_id <> '' AND "
                                "run_id <> ?", run_id),
        }

    def episode_order(self) -> list[tuple[str, str]]:
        """(run_id, operator) of every learned episode, in the order the memory committed them."""
        rows = self.conn.execute("SELECT run_id, operator FROM memory_episodes ORDER BY clock").fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def history(self, item_id: int) -> list[HistoryRow]:
        """The item's provenance rows, oldest first (creation, then every utility change)."""
        rows = self.conn.execute(f"SELECT {_HISTORY_COLUMNS} FROM item_history WHERE item_id = ? "
                                 "ORDER BY id", (item_id,)).fetchall()
        return [HistoryRow(r[0], r[1], r[2], Provenance(*r[3:11]), r[11], r[12], r[13], bool(r[14]),
                           bool(r[15]), r[16]) for r in rows]

    def events(self, item_ids: Iterable[int] | None = None) -> list[Event]:
        """The utility changes (credited and counted rows) as portable merge events."""
        sql = ("SELECT i.content_hash, h.run_id, h.operator, h.episode, h.kind, h.created_at, h.xi, "
               "h.retrieved, h.adopted FROM item_history h JOIN items i ON i.id = h.item_id "
               "WHERE h.kind IN ('credited', 'counted')")
        if item_ids is None:
            rows = self.conn.execute(sql).fetchall()
        else:
            rows = []
            for part in _chunks(sorted(set(item_ids))):
                rows += self.conn.execute(sql + f" AND h.item_id IN ({','.join('?' * len(part))})",
                                          part).fetchall()
        return [Event(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), bool(r[8])) for r in rows]

    def memory_id(self) -> str:
        """This memory's name in merged rule versions (migration 0009), '' before it."""
        try:
            return self.meta("memory_id") or ""
        except Exception:  # sqlite3 and psycopg name a missing table differently
            return ""

    def rule_versions(self, item_id: int) -> tuple[RuleVersion, ...]:
        """The item's stored rule versions (memory/rule_versions.py), by (text hash, memory)."""
        try:
            rows = self.conn.execute("SELECT rule_text, rule_tokens, memory, evidence FROM rule_versions "
                                     "WHERE item_id = ? ORDER BY text_hash, memory", (item_id,)).fetchall()
        except Exception:  # a read-only workspace older than migration 0009
            return ()
        return tuple(RuleVersion(r[0], int(r[1]), r[2], tuple(Evidence(**e) for e in json.loads(r[3])))
                     for r in rows)

    def ids_with_history(self, **where: str) -> set[int]:
        """Items with at least one provenance row matching every given column (run_id, model,
        target, device, operator, episode, protocol, team)."""
        allowed = set(Provenance.__dataclass_fields__)
        bad = sorted(set(where) - allowed)
        if bad:
            raise MemoryStoreError(f"unknown provenance field(s) {bad}; known: {', '.join(sorted(allowed))}")
        cond = " AND ".join(f"{k} = ?" for k in sorted(where)) or "1 = 1"
        rows = self.conn.execute(f"SELECT DISTINCT item_id FROM item_history WHERE {cond}",
                                 [where[k] for k in sorted(where)]).fetchall()
        return {int(r[0]) for r in rows}

    def ids_in_scope(self, scope: RetrievalScope) -> set[int]:
        """The items `scope` lets a learner retrieve (see RetrievalScope)."""
        ids = self.ids_with_history(**dict(scope.only)) if scope.only else {
            int(r[0]) for r in self.conn.execute("SELECT id FROM items").fetchall()}
        runs = sorted(set(scope.exclude_runs))
        if runs:
            marks = ",".join("?" * len(runs))
            ids -= {int(r[0]) for r in self.conn.execute(
                "SELECT item_id FROM item_history WHERE kind IN ('seeded', 'distilled', 'imported') "
                f"AND run_id IN ({marks})", runs).fetchall()}
        return ids

    # ---- writes (inside db.transaction) ----------------------------------------------------------
    def lock_writer(self) -> None:
        """Take the memory's writer lock for the current transaction (see memory/backend.py):
        PostgreSQL's advisory lock, released at commit or rollback. SQLite's BEGIN IMMEDIATE
        already holds the database's write lock."""
        if self.shared:
            self.conn.execute("SELECT pg_advisory_xact_lock(?)", (WRITER_LOCK_KEY,))

    def add_history(self, rows: Iterable[HistoryRow]) -> None:
        """Append provenance rows (never updated or deleted; the tables' triggers refuse it)."""
        stamp = now_iso()
        self.conn.executemany(
            f"INSERT INTO item_history ({_HISTORY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(h.item_id, h.kind, h.clock, *h.origin.values(), h.xi, h.u_before, h.u_after, int(h.retrieved),
              int(h.adopted), h.created_at or stamp) for h in rows])

    def save_rule_versions(self, item_id: int, versions: Iterable[RuleVersion]) -> None:
        """Write the item's merged versions (each a superset of what is stored under its key)."""
        self.conn.executemany(
            "INSERT INTO rule_versions VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (item_id, text_hash, memory) "
            "DO UPDATE SET rule_tokens = excluded.rule_tokens, evidence = excluded.evidence",
            [(item_id, v.text_hash, v.memory, v.text, v.tokens, json.dumps([e.to_dict() for e in v.evidence]))
             for v in versions])

    def insert_item(self, item: Item) -> int:
        """Insert a new row from `item` (its id is ignored; the new id is returned)."""
        row = self.conn.execute(
            "INSERT INTO items (title, type, category, error_message, wrong_code, correct_code, u, n_ret, "
            "n_ado, n_upd, p_hat, eligible_episodes, state, rule_text, rule_tokens, q1, q2, born_episode, "
            "resident_episodes, promoted_at_episode, created_at, source, content_hash) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (item.title, item.type, item.category, item.error_message, item.wrong_code, item.correct_code,
             item.u, item.n_ret, item.n_ado, item.n_upd, item.p_hat, item.eligible_episodes, item.state.value,
             item.rule_text, item.rule_tokens, item.q1, item.q2, item.born_episode, item.resident_episodes,
             item.promoted_at_episode, item.created_at or now_iso(), item.source, item.content_hash),
        ).fetchone()
        new_id = int(row[0])
        self._add_ops(new_id, item.adopting_ops, item.retrieving_ops)
        return new_id

    def save(self, items: Iterable[Item]) -> None:
        """Write back the statistics, state and rule of existing items (content is immutable)."""
        rows = []
        adopters: list[tuple[int, str]] = []
        retrievers: list[tuple[int, str]] = []
        for m in items:
            rows.append((m.u, m.n_ret, m.n_ado, m.n_upd, m.p_hat, m.eligible_episodes, m.state.value,
                         m.rule_text, m.rule_tokens, m.q1, m.q2, m.resident_episodes, m.promoted_at_episode,
                         m.id))
            adopters += [(m.id, op) for op in m.adopting_ops]
            retrievers += [(m.id, op) for op in m.retrieving_ops]
        self.conn.executemany("INSERT INTO item_adopters VALUES (?, ?) ON CONFLICT DO NOTHING", adopters)
        self.conn.executemany("INSERT INTO item_retrievers VALUES (?, ?) ON CONFLICT DO NOTHING", retrievers)
        self.conn.executemany(
            "UPDATE items SET u=?, n_ret=?, n_ado=?, n_upd=?, p_hat=?, eligible_episodes=?, state=?, "
            "rule_text=?, rule_tokens=?, q1=?, q2=?, resident_episodes=?, promoted_at_episode=? WHERE id=?",
            rows)

    def _add_ops(self, item_id: int, adopters: Iterable[str], retrievers: Iterable[str]) -> None:
        self.conn.executemany("INSERT INTO item_adopters VALUES (?, ?) ON CONFLICT DO NOTHING",
                              [(item_id, op) for op in adopters])
        self.conn.executemany("INSERT INTO item_retrievers VALUES (?, ?) ON CONFLICT DO NOTHING",
                              [(item_id, op) for op in retrievers])

    def add_adoptions(self, records: Iterable[AdoptionRecord]) -> None:
        stamp = now_iso()
        self.conn.executemany(
            "INSERT INTO adoptions (run_id, operator, episode, round, item_id, adopted, rationale, "
            "created_at) VALUES (?,?,?,?,?,?,?,?)",
            [(r.run_id, r.operator, r.episode, r.round, r.item_id,
              None if r.adopted is None else int(r.adopted), r.rationale, stamp) for r in records])

    def record_episode(self, run_id: str, operator: str, episode: str, z: float | None) -> int:
        """Advance the episode clock; returns the new clock value. The episode's stamp
        (`last_stamp`) has microseconds and is strictly later than the previous episode's, so
        ordering by it is ordering by the clock (merge.py replays in that order)."""
        clock = self.clock() + 1
        stamp = datetime.now(UTC)
        row = self.conn.execute("SELECT created_at FROM memory_episodes ORDER BY clock DESC LIMIT 1"
                                ).fetchone()
        if row is not None:
            last = datetime.fromisoformat(str(row[0]).replace("Z", "+00:00"))
            stamp = max(stamp, last + timedelta(microseconds=1))
        self.last_stamp = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.conn.execute("INSERT INTO memory_episodes VALUES (?,?,?,?,?,?)",
                          (clock, run_id, operator, episode, z, self.last_stamp))
        return clock

    def refresh_retrieved(self, clock: int, skip: Iterable[int]) -> None:
        """The same, restricted to retrieved (n_ret > 0) retrievable items not in `skip`."""
        skip_ids = sorted(set(skip))
        # `id NOT IN (NULL)` is NULL for every row, so an empty skip list must leave the clause out
        unless = f" AND id NOT IN ({','.join('?' * len(skip_ids))})" if skip_ids else ""
        self.conn.execute(
            f"UPDATE items SET {_SET_FREQUENCY} WHERE n_ret > 0 AND state != 'consolidated'{unless}",
            ((clock,) * _FREQUENCY_PARAMS) + tuple(skip_ids))

    def write_snapshot(self, snapshot: HotSnapshot) -> int:
        data = snapshot.to_dict()
        row = self.conn.execute(
            "INSERT INTO hot_snapshots (run_id, created_at, budget, n_ops, total_tokens, entries_json) "
            "VALUES (?,?,?,?,?,?) RETURNING id", (snapshot.run_id, snapshot.created_at, snapshot.budget,
                                                  snapshot.n_ops, snapshot.total_tokens,
                                                  json.dumps(data["hot_entries"]))).fetchone()
        return int(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO memory_meta VALUES (?, ?) "
                          "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def set_embedding(self, item_id: int, model: str, vec: np.ndarray) -> None:
        self.conn.execute("INSERT INTO item_embeddings VALUES (?, ?, ?, ?) ON CONFLICT (item_id) DO UPDATE "
                          "SET model = excluded.model, dim = excluded.dim, vec = excluded.vec",
                          (item_id, model, int(vec.shape[0]), to_blob(vec)))


def _entries(text: str | None) -> list[dict[str, object]]:
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _entry_tokens(entry: dict[str, object]) -> int:
    value = entry.get("L", entry.get("tokens", 0))
    return int(value) if isinstance(value, (int, float)) else 0


def draft_to_item(draft: ItemDraft, *, source: str, born_episode: int) -> Item:
    return Item(id=0, title=draft.title.strip(), type=draft.type.strip(), category=draft.category.strip(),
                error_message=draft.error_message.strip(), wrong_code=draft.wrong_code,
                correct_code=draft.correct_code, source=source, born_episode=born_episode)
