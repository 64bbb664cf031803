"""Portable memory files: seed loading, and export/import as JSON Lines.

Export format (schema version 1): the first line is a header
  {"format": "sagekernel.memory", "schema_version": 1, "exported_at": ..., "items": N, "tokenizer": ...}
then one line per item: {"kind": "item", <Item.to_dict()>, "adoptions": [...]}.
Embeddings are not exported (recomputed on load); value-memory PopArt statistics are not either.

Import (one transaction):
- mode "refuse": the store must be empty; everything is restored as it was (states, statistics,
  sources, adoption history).
- mode "merge": an item whose content hash is already stored is skipped (the local copy and its
  statistics win); any other item gets a new id, source "import", and a consolidated item comes
  in as validated (the next UGC rebuild decides residency under the local budget).
- mode "replay" (merge by replay, memory/merge.py): items come in as in "merge", and every utility
  change of the file (its "history") that the store lacks is appended; each item that gained one
  has u, n_upd, n_ret, n_ado and its operators recomputed from the union of both sides' changes,
  so the result does not depend on the order memories are merged in, and merging one twice (or a
  memory with itself) changes nothing.
In both modes eligible_episodes is preserved by setting born_episode = clock − eligible − resident.

Import validates before it writes: the header's schema version must be an int from 1 to
SCHEMA_VERSION (0, negatives, strings and bools are refused), the file must hold as many items
as the header declares (a truncated export is refused, not half-imported), and no text field may
exceed `MAX_FIELD_CHARS` (code and rules are kernels, not megabytes). Export writes a temporary
file and renames it; on any write error (a full disk) the temporary file is removed, so neither a
0-byte nor a truncated export is left under any name.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagekernel import db
from sagekernel.memory.embedding import tokenizer_name
from sagekernel.memory.records import AdoptionRecord, HistoryRow, Item, ItemState, Provenance
from sagekernel.memory.store import MemoryStoreError, Store, now_iso

FORMAT = "sagekernel.memory"
SCHEMA_VERSION = 1
#: The longest text an item field may hold on import (characters).
MAX_FIELD_CHARS = 200_000
#: The longest short field (title, type, category).
MAX_SHORT_CHARS = 2_000


class _Adoption(BaseModel):
    model_config = ConfigDict(extra="ignore")
    run_id: str
    operator: str
    episode: str
    round: int
    adopted: bool | None
    rationale: str = Field("", max_length=MAX_FIELD_CHARS)


class _Event(BaseModel):
    """One utility change of an exported item (merge by replay, memory/merge.py)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    kind: str = Field(pattern="^(credited|counted)$")
    run_id: str = Field("", max_length=MAX_SHORT_CHARS)
    operator: str = Field("", max_length=MAX_SHORT_CHARS)
    episode: str = Field("", max_length=MAX_SHORT_CHARS)
    at: str = Field(min_length=1, max_length=64)
    clock: int = 0
    xi: float | None = Field(None, ge=-1.0, le=1.0)
    u_before: float | None = None
    u_after: float | None = None
    retrieved: bool = False
    adopted: bool = False
    model: str = Field("", max_length=MAX_SHORT_CHARS)
    target: str = Field("", max_length=MAX_SHORT_CHARS)
    device: str = Field("", max_length=MAX_SHORT_CHARS)
    protocol: str = Field("", max_length=MAX_SHORT_CHARS)
    team: str = Field("", max_length=MAX_SHORT_CHARS)


class _Evidence(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    run_id: str = Field("", max_length=MAX_SHORT_CHARS)
    operator: str = Field("", max_length=MAX_SHORT_CHARS)
    episode: str = Field("", max_length=MAX_SHORT_CHARS)
    kind: str = Field(pattern="^(credited|counted)$")
    at: str = Field("", max_length=64)
    team: str = Field("", max_length=MAX_SHORT_CHARS)
    xi: float | None = Field(None, ge=-1.0, le=1.0)
    u_after: float | None = None


class _Version(BaseModel):
    """One version of the item's resident rule (memory/rule_versions.py)."""

    model_config = ConfigDict(extra="ignore")
    rule_text: str = Field(min_length=1, max_length=MAX_FIELD_CHARS)
    memory: str = Field(min_length=1, max_length=MAX_SHORT_CHARS)
    evidence: list[_Evidence] = []


class _ItemLine(BaseModel):
    """One item line; also the seed format (only title and type are required)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)  # a NaN u/Q would spread to reranking
    id: int = 0
    title: str = Field(min_length=1, max_length=MAX_SHORT_CHARS)
    type: str = Field(min_length=1, max_length=MAX_SHORT_CHARS)
    category: str = Field("", max_length=MAX_SHORT_CHARS)
    error_message: str = Field("", max_length=MAX_FIELD_CHARS)
    wrong_code: str = Field("", max_length=MAX_FIELD_CHARS)
    correct_code: str = Field("", max_length=MAX_FIELD_CHARS)
    code_diff: dict[str, str] | None = None
    u: float = Field(0.0, ge=-1.0, le=1.0)
    n_ret: int = Field(0, ge=0)
    n_ado: int = Field(0, ge=0)
    n_upd: int = Field(0, ge=0)
    adopting_ops: list[str] = []
    retrieving_ops: list[str] = []
    p_hat: float = Field(0.0, ge=0.0, le=1.0)
    eligible_episodes: int = Field(0, ge=0)
    state: ItemState = ItemState.COLD
    rule_text: str = Field("", max_length=MAX_FIELD_CHARS)
    rule_tokens: int = Field(0, ge=0)
    q1: float = 0.0
    q2: float = 0.0
    resident_episodes: int = Field(0, ge=0)
    promoted_at_episode: int | None = None
    source: str = "seed"
    created_at: str = ""
    adoptions: list[_Adoption] = []
    history: list[_Event] = []
    rule_versions: list[_Version] = []

    def to_item(self, *, clock: int) -> Item:
        wrong, correct = self.wrong_code, self.correct_code
        if self.code_diff:
            wrong = self.code_diff.get("wrong_code", wrong)
            correct = self.code_diff.get("correct_code", correct)
        return Item(
            id=self.id, title=self.title.strip(), type=self.type.strip(), category=self.category.strip(),
            error_message=self.error_message.strip(), wrong_code=wrong, correct_code=correct, u=self.u,
            n_ret=self.n_ret, n_ado=self.n_ado, n_upd=self.n_upd, adopting_ops=set(self.adopting_ops),
            retrieving_ops=set(self.retrieving_ops), p_hat=self.p_hat,
            eligible_episodes=self.eligible_episodes,
            state=self.state, rule_text=self.rule_text, rule_tokens=self.rule_tokens, q1=self.q1, q2=self.q2,
            born_episode=clock - self.eligible_episodes - self.resident_episodes,
            resident_episodes=self.resident_episodes, promoted_at_episode=self.promoted_at_episode,
            source=self.source, created_at=self.created_at or now_iso())


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise MemoryStoreError(f"no such memory file: {path}" if not path.exists()
                               else f"{path} is not a file (pass a .jsonl memory file)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        bad = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise MemoryStoreError(f"{path}:{bad}: not UTF-8 text (is this a JSON Lines memory file?)") from exc
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MemoryStoreError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise MemoryStoreError(f"{path}:{number}: expected a JSON object per line")
        yield number, data


def _parse(path: Path, number: int, data: dict[str, Any]) -> _ItemLine:
    try:
        return _ItemLine.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "string_too_long":
            limit = (first.get("ctx") or {}).get("max_length")
            raise MemoryStoreError(f"{path}:{number}: item field {where} is too long "
                                   f"({len(str(first.get('input', '')))} characters, at most {limit}); "
                                   "shorten it in the file or leave the item out") from exc
        raise MemoryStoreError(f"{path}:{number}: invalid memory item ({where}: {first['msg']})") from exc


def load_seed(conn: sqlite3.Connection, path: Path | str) -> int:
    """Load a JSON Lines seed file (one item per line, spec §1.1 fields) into an EMPTY store, as
    source 'seed'. Returns the number of items written. Embeddings are computed by the policy."""
    path = Path(path)
    store = Store(conn)
    if store.count():
        raise MemoryStoreError(f"the memory store already has {store.count()} items; seed only an empty "
                               "store (or use `sage memory import --mode merge`)")
    parsed = [_parse(path, n, d) for n, d in _lines(path) if d.get("format") != FORMAT]
    with db.transaction(conn):
        store.lock_writer()
        if store.count():  # a shared memory that another learner seeded since the check above
            return 0
        seen: set[str] = set()
        for line in parsed:
            item = _fresh(line.to_item(clock=0))
            if item.content_hash in seen:
                continue
            seen.add(item.content_hash)
            new_id = store.insert_item(item)
            store.add_history([HistoryRow(new_id, "seeded", 0, Provenance(run_id=path.name))])
    return len(seen)


def _fresh(item: Item) -> Item:
    """A seed item starts with the §5 defaults whatever the file says."""
    return Item(id=0, title=item.title, type=item.type, category=item.category,
                error_message=item.error_message, wrong_code=item.wrong_code, correct_code=item.correct_code,
                source="seed", created_at=item.created_at)


def export_jsonl(conn: sqlite3.Connection, path: Path | str) -> int:
    """Write every item with its adoption history; returns the number of items."""
    store = Store(conn)
    items = store.all_items()
    path = Path(path)
    if path.is_dir():
        raise MemoryStoreError(f"{path} is a directory; name the export file (e.g. {path / 'memory.jsonl'})")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    clock = store.clock()
    try:
        _write_export(tmp, store, items, clock)
        tmp.replace(path)  # a crash never leaves a half-written export under the final name
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise MemoryStoreError(f"could not write the export {path}: {exc.strerror or exc}"
                               + (" (the disk is full)" if exc.errno in (28, 27) else "")
                               + "; nothing was left behind") from exc
    return len(items)


def _write_export(tmp: Path, store: Store, items: list[Item], clock: int) -> None:
    with tmp.open("w", encoding="utf-8") as fh:
        header = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "exported_at": now_iso(),
                  "items": len(items), "tokenizer": tokenizer_name(), "episodes": clock,
                  "memory_id": store.memory_id()}
        fh.write(json.dumps(header) + "\n")
        for m in items:
            data = m.to_dict()
            # `items.eligible_episodes` is only materialised for touched/retrieved items (see
            # store.refresh_retrieved); clock − born − resident is its true value in every state,
            # and import rebuilds born_episode from it.
            data["eligible_episodes"] = max(0, clock - m.born_episode - m.resident_episodes)
            for key in ("born_episode", "content_hash"):
                data.pop(key)
            data["kind"] = "item"
            data["adoptions"] = [{"run_id": a.run_id, "operator": a.operator, "episode": a.episode,
                                  "round": a.round, "adopted": a.adopted, "rationale": a.rationale}
                                 for a in store.adoption_history(m.id)]
            data["history"] = [_event_dict(h) for h in store.history(m.id)
                               if h.kind in ("credited", "counted")]
            versions = store.rule_versions(m.id)
            if versions:
                data["rule_versions"] = [v.to_dict() for v in versions]
            fh.write(json.dumps(data, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _event_dict(h: HistoryRow) -> dict[str, Any]:
    o = h.origin
    return {"kind": h.kind, "run_id": o.run_id, "operator": o.operator, "episode": o.episode,
            "at": h.created_at, "clock": h.clock, "xi": h.xi, "u_before": h.u_before, "u_after": h.u_after,
            "retrieved": h.retrieved, "adopted": h.adopted, "model": o.model, "target": o.target,
            "device": o.device, "protocol": o.protocol, "team": o.team}


#: How `import_jsonl` treats a non-empty store (see the module docstring).
IMPORT_MODES = ("refuse", "merge", "replay")


def import_jsonl(conn: sqlite3.Connection, path: Path | str, *, mode: str = "refuse") -> dict[str, int]:
    """Import an export file; returns {"imported": n, "skipped": n} (and "replayed": items whose
    statistics were recomputed, in mode replay). See the module docstring."""
    if mode not in IMPORT_MODES:
        raise MemoryStoreError(f"unknown import mode {mode!r}; use {', '.join(IMPORT_MODES)}")
    path = Path(path)
    lines = list(_lines(path))
    if not lines or lines[0][1].get("format") != FORMAT:
        raise MemoryStoreError(f"{path} is not a SAGE memory export (its first line must be the "
                               f'{{"format": "{FORMAT}", ...}} header)')
    header = lines[0][1]
    version = header.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise MemoryStoreError(f"{path} declares memory schema version {version!r}, which is not a "
                               f"schema version (this SAGE reads versions 1 to {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise MemoryStoreError(f"{path} has memory schema version {version}; this SAGE reads up to "
                               f"{SCHEMA_VERSION} (upgrade sagekernel)")
    declared = header.get("items")
    if declared is not None and (isinstance(declared, bool) or not isinstance(declared, int) or declared < 0):
        raise MemoryStoreError(f"{path}: the header's item count {declared!r} is not a count")
    if isinstance(declared, int) and declared != len(lines) - 1:
        what = "shorter" if declared > len(lines) - 1 else "longer"
        raise MemoryStoreError(f"{path} is {what} than its header declares ({len(lines) - 1} items, the "
                               f"header says {declared}); the export is truncated or was edited. "
                               "Nothing was imported")
    parsed = [_parse(path, n, d) for n, d in lines[1:]]
    store = Store(conn)
    existing = store.count()
    if existing and mode == "refuse":
        raise MemoryStoreError(f"the memory store already has {existing} items; import into an empty "
                               "workspace, or pass --mode merge (same content -> skipped, else a new id)")
    imported = skipped = 0
    with db.transaction(conn):
        store.lock_writer()
        clock = store.clock()
        if mode == "replay":
            memory = str(header.get("memory_id") or "") or f"file:{path.name}"
            return _import_replay(store, parsed, clock, path.name, memory)
        for line in parsed:
            item = line.to_item(clock=clock)
            if store.find_by_hash(item.content_hash) is not None:
                skipped += 1
                continue
            if existing:
                item.source = "import"
                if item.state is ItemState.CONSOLIDATED:
                    item.state = ItemState.VALIDATED
            new_id = store.insert_item(item)
            store.add_adoptions(AdoptionRecord(a.run_id, a.operator, a.episode, a.round, new_id, a.adopted,
                                               a.rationale) for a in line.adoptions)
            store.add_history([HistoryRow(new_id, "imported", clock, Provenance(run_id=path.name))])
            imported += 1
    return {"imported": imported, "skipped": skipped}


def _import_replay(store: Store, parsed: list[_ItemLine], clock: int, source: str,
                   memory: str) -> dict[str, int]:
    """Merge by replay (memory/merge.py), inside the caller's transaction: new items come in, every
    utility change the file has and the store lacks is appended to the store's history, and each
    item that gained one has u, n_upd, n_ret, n_ado and its operators recomputed from the union.
    The file's resident rules join the store's as versions (`_merge_rules`)."""
    from dataclasses import replace

    from sagekernel.memory.merge import fold

    imported = skipped = 0
    gained: set[int] = set()
    for line in parsed:
        item = line.to_item(clock=clock)
        item_id = store.find_by_hash(item.content_hash)
        if item_id is None:
            item = replace(item, u=0.0, n_upd=0, n_ret=0, n_ado=0, adopting_ops=set(), retrieving_ops=set(),
                           source="import", state=ItemState.VALIDATED if item.state is ItemState.CONSOLIDATED
                           else item.state)
            item_id = store.insert_item(item)
            store.add_adoptions(AdoptionRecord(a.run_id, a.operator, a.episode, a.round, item_id, a.adopted,
                                               a.rationale) for a in line.adoptions)
            store.add_history([HistoryRow(item_id, "imported", clock, Provenance(run_id=source))])
            imported += 1
            gained.add(item_id)
            _merge_rules(store, item_id, line, memory, new=True)
        else:
            skipped += 1
            _merge_rules(store, item_id, line, memory)
        known = {(e.run_id, e.operator, e.episode, e.kind) for e in store.events([item_id])}
        new = [HistoryRow(item_id, e.kind, e.clock,
                          Provenance(e.run_id, e.model, e.target, e.device, e.operator, e.episode, e.protocol,
                                     e.team),
                          e.xi, e.u_before, e.u_after, e.retrieved, e.adopted, e.at)
               for e in line.history if (e.run_id, e.operator, e.episode, e.kind) not in known]
        if new:
            store.add_history(new)
            gained.add(item_id)
    if gained:
        cfg_eta = _eta_min()
        items = store.get_many(gained)
        replayed = fold(store.events(gained), cfg_eta)
        store.save(replace(m, u=r.u, n_upd=r.n_upd, n_ret=r.n_ret, n_ado=r.n_ado,
                           adopting_ops=m.adopting_ops | r.adopting_ops,
                           retrieving_ops=m.retrieving_ops | r.retrieving_ops)
                   for m in items.values() if (r := replayed.get(m.content_hash)) is not None)
    return {"imported": imported, "skipped": skipped, "replayed": len(gained)}


def _merge_rules(store: Store, item_id: int, line: _ItemLine, memory: str, *, new: bool = False) -> None:
    """Unite the item's rule versions with the file's (memory/rule_versions.py), before the file's
    utility changes are appended (each side's evidence is its own memory's changes). Versions
    are stored once a text came from another memory; the item takes the current version."""
    from dataclasses import replace

    from sagekernel.memory.embedding import count_tokens
    from sagekernel.memory.rule_versions import Evidence, RuleVersion, current, merge_versions, side

    def counted(vs: Iterable[RuleVersion]) -> tuple[RuleVersion, ...]:
        return tuple(replace(v, tokens=max(1, count_tokens(v.text))) for v in vs)

    stored = (RuleVersion(v.rule_text, 0, v.memory, tuple(Evidence(**e.model_dump()) for e in v.evidence))
              for v in line.rule_versions)
    theirs = counted(side(tuple(stored), line.rule_text, 0, memory,
                          (Evidence(e.run_id, e.operator, e.episode, e.kind, e.at, e.team, e.xi, e.u_after)
                           for e in line.history)))
    m = store.get(item_id)
    here = store.memory_id()
    own = (Evidence(h.origin.run_id, h.origin.operator, h.origin.episode, h.kind, h.created_at, h.origin.team,
                    h.xi, h.u_after) for h in store.history(item_id) if h.kind in ("credited", "counted"))
    ours = () if new else counted(side(store.rule_versions(item_id), m.rule_text, 0, here, own))
    merged = merge_versions(ours, theirs)
    if any(v.memory != here for v in merged):
        store.save_rule_versions(item_id, merged)
    win = current(merged)
    if win is not None and (win.text, win.tokens) != (m.rule_text, m.rule_tokens):
        store.save([replace(m, rule_text=win.text, rule_tokens=win.tokens)])


def _eta_min() -> float:
    from sagekernel.memory.records import MemoryConfig

    return MemoryConfig().eta_min
