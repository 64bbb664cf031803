"""Store, seed loading, export/import, crash safety and the policies end to end (lexical mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.errors import SageError, WorkspaceError
from sagekernel.memory.io import export_jsonl, import_jsonl, load_seed
from sagekernel.memory.policies import METHODS, make_policy
from sagekernel.memory.records import ItemState
from sagekernel.memory.store import Store
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, ItemDraft, RoundTrace
from sagekernel.runner.bank_replay import replay_workspace

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"


def seeded(ws: Path):  # type: ignore[no-untyped-def]
    conn = db.connect(ws)
    load_seed(conn, SEED)
    return conn


def episode(policy, op: str, adopt: int, correct: bool = True, query: str = "expf implicit declaration"):  # type: ignore[no-untyped-def]
    got = policy.retrieve(query, operator=op, category="Elementwise", episode=EpisodeKind.CORR)
    dec = [AdoptionDecision(r.item_id, n < adopt, f"{op} used it" if n < adopt else "not relevant")
           for n, r in enumerate(got)]
    rt = RoundTrace(round=1, episode=EpisodeKind.CORR, retrieved=got, decisions=dec, correct=correct)
    return got, EpisodeTrace(op, "Elementwise", 1, EpisodeKind.CORR, [rt], success=correct)


def test_seed_load_and_round_trip(workspace: Path, tmp_path: Path) -> None:
    conn = seeded(workspace)
    store = Store(conn)
    n = sum(1 for line in SEED.read_text().splitlines() if line.strip())
    assert store.count() == n and store.stats()["by_source"] == {"seed": n}
    with pytest.raises(SageError, match="already has"):
        load_seed(conn, SEED)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "x", "type": "fix"}\n{"title": ""}\n')
    with pytest.raises(SageError, match=r"bad.jsonl:2: invalid memory item \(title"):
        load_seed(db.connect(tmp_path / "other"), bad)


def test_policy_learns_with_atu_writes_items_and_snapshots(workspace: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("sage", conn, run_id="r1", embedder=None)
    got, trace = episode(policy, "op1", adopt=2)
    draft = ItemDraft("Hoist the division out of the loop", "performance", "Elementwise",
                      "division in the hot loop", "y[i]=x[i]/s;", "float r=1.0f/s; y[i]=x[i]*r;", "op1")
    policy.learn(trace, [draft, draft])  # the second copy is deduplicated
    store = Store(conn)
    u = {m.id: m.u for m in store.get_many(r.item_id for r in got).values()}
    assert [round(u[r.item_id], 4) for r in got] == [0.25, 0.25, -0.1, -0.1, -0.1]
    assert store.count() == 31 and store.stats()["by_source"]["distilled"] == 1
    assert len(store.adoption_history(got[0].item_id)) == 1
    assert store.clock() == 1 and len(store.snapshots("r1")) == 1
    for k in range(2, 5):  # three more operators adopt the same top items: they consolidate
        policy.learn(episode(policy, f"op{k}", adopt=2)[1])
    hot = policy.resident_rules()
    assert hot and all(r.tokens > 0 and r.rule_text for r in hot)
    hot_ids = {r.item_id for r in hot}
    assert all(store.get(i).state is ItemState.CONSOLIDATED for i in hot_ids)
    again, _ = episode(policy, "op9", adopt=0)
    assert not hot_ids & {r.item_id for r in again}  # consolidated items never appear in R_t
    snap = store.latest_snapshot()
    assert snap is not None and {e.id for e in snap.hot_entries} == hot_ids and snap.n_ops == 4


def test_crash_inside_learn_leaves_store_unchanged(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = seeded(workspace)
    policy = make_policy("sage", conn, run_id="r1", embedder=None)
    _, trace = episode(policy, "op1", adopt=2)
    before = json.dumps([m.to_dict() for m in Store(conn).all_items()])

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Store, "write_snapshot", boom)  # fails after credit, adoptions and new items
    with pytest.raises(RuntimeError):
        policy.learn(trace, [ItemDraft("new", "fix", "c", "e", "w", "c", "op1")])
    store = Store(conn)
    assert json.dumps([m.to_dict() for m in store.all_items()]) == before
    assert store.clock() == 0 and store.stats()["adoption_records"] == 0


def test_frozen_static_rag_and_refinement_never_write(workspace: Path) -> None:
    conn = seeded(workspace)
    for method, frozen in (("sage", True), ("static-rag", False), ("refinement", False)):
        policy = make_policy(method, conn, run_id="r", frozen=frozen, embedder=None)
        got, trace = episode(policy, "op", adopt=1)
        assert (got == []) == (method == "refinement")
        policy.learn(trace, [ItemDraft("t", "fix", "c", "e", "w", "c", "op")])
    assert Store(conn).clock() == 0 and Store(conn).count() == 30
    assert set(METHODS) >= {"sage-uniform-credit", "sage-no-ugc", "sage-random-ugc", "value-memory"}
    with pytest.raises(SageError, match="unknown memory method"):
        make_policy("magic", conn, run_id="r")


def test_value_memory_updates_q_per_round(workspace: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("value-memory", conn, run_id="r", embedder=None)
    got, trace = episode(policy, "op", adopt=0, correct=False)
    policy.learn(trace)
    items = Store(conn).get_many(r.item_id for r in got)
    assert all(m.q1 == pytest.approx(-0.1) and m.u == 0.0 and m.n_ret == 1 for m in items.values())


def test_uniform_credit(workspace: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("sage-uniform-credit", conn, run_id="r", embedder=None)
    got, trace = episode(policy, "op", adopt=1)
    policy.learn(trace)
    store = Store(conn)
    assert all(m.u == pytest.approx(0.5) for m in store.get_many(r.item_id for r in got).values())


def test_export_import_refuse_and_merge(workspace: Path, tmp_path: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("sage", conn, run_id="r", embedder=None)
    policy.learn(episode(policy, "op", adopt=2)[1])
    out = tmp_path / "mem.jsonl"
    assert export_jsonl(conn, out) == 30
    header = json.loads(out.read_text().splitlines()[0])
    assert header["format"] == "sagekernel.memory" and header["schema_version"] == 1
    fresh = db.connect(tmp_path / "fresh")
    assert import_jsonl(fresh, out) == {"imported": 30, "skipped": 0}
    a = [m.to_dict() for m in Store(conn).all_items()]
    b = [m.to_dict() for m in Store(fresh).all_items()]
    strip = ("id", "born_episode", "created_at", "eligible_episodes")
    assert [{k: v for k, v in x.items() if k not in strip} for x in a] == \
        [{k: v for k, v in x.items() if k not in strip} for x in b]
    # eligible episodes (the column is only refreshed for retrieved items) survive as clock − born − resident
    def eligible(store: Store, xs: list[dict]) -> list[int]:  # type: ignore[type-arg]
        return [store.clock() - x["born_episode"] - x["resident_episodes"] for x in xs]

    assert eligible(Store(conn), a) == eligible(Store(fresh), b) and eligible(Store(conn), a)[0] == 1
    with pytest.raises(SageError, match="already has 30 items"):
        import_jsonl(fresh, out, mode="refuse")
    extra = tmp_path / "extra.jsonl"
    lines = out.read_text().splitlines()
    new = json.loads(lines[1]) | {"title": "A brand new item"}
    header = {**json.loads(lines[0]), "items": 2}  # an edited export states its own item count
    extra.write_text("\n".join([json.dumps(header), lines[1], json.dumps(new)]) + "\n")
    assert import_jsonl(fresh, extra, mode="merge") == {"imported": 1, "skipped": 1}
    assert Store(fresh).list_items(order="id")[-1].source == "import"
    future = tmp_path / "future.jsonl"
    future.write_text(json.dumps(header | {"schema_version": 99}) + "\n")
    with pytest.raises(SageError, match="schema version 99"):
        import_jsonl(db.connect(tmp_path / "f2"), future)


def test_workspace_errors_surface(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="no SAGE workspace"):
        db.connect(tmp_path / "missing", create=False)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "sage.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(WorkspaceError, match="corrupted"):
        db.connect(tmp_path / "bad")


def test_replay_recomputes_without_mutating(workspace: Path, tmp_path: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("static-rag", conn, run_id="r", embedder=None)
    conn.execute("INSERT INTO runs VALUES ('r', 'now', NULL, 'finished', 'sage', 'm', 'cpu', 's', 'o', "
                 "30, 0, '{}')")
    got, trace = episode(policy, "op", adopt=2)
    conn.execute("INSERT INTO round_traces VALUES ('r', 'op', 1, 'corr', 1, 1, NULL, ?, 'now')",
                 (json.dumps(trace.rounds[0].to_dict()),))
    conn.close()
    data = replay_workspace(workspace, "r", write_to=tmp_path / "copy")
    by_id = {r["id"]: r for r in data["items"]}
    first = got[0].item_id
    assert by_id[first]["atu"] == pytest.approx(0.25) and by_id[first]["uniform"] == pytest.approx(0.5)
    assert by_id[got[4].item_id]["atu"] == pytest.approx(-0.1) and by_id[first]["stored_u"] == 0.0
    assert by_id[first]["relevance"] == 0.0 and data["episodes"] == 1
    copy = Store(db.connect(tmp_path / "copy"))
    assert max(m.u for m in copy.all_items()) == pytest.approx(0.25)
