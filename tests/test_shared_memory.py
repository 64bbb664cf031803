"""The shared memory on a real PostgreSQL server (memory/backend.py): the same store interface and
results as SQLite, provenance per item and per utility change, the `--memory` commands, and a
learner killed mid-update leaving nothing half-written."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel import db
from sagekernel.memory.backend import connect_memory, memory_url
from sagekernel.memory.io import export_jsonl, import_jsonl, load_seed
from sagekernel.memory.learners import HOT_ITEMS, Workload, episode_of, fingerprint
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import ItemState, MemoryConfig, Provenance
from sagekernel.memory.store import Store
from test_cli_values import invoke

pytestmark = pytest.mark.postgres

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
CFG = MemoryConfig(budget_tokens=60)  # a small hot budget: residents are promoted and demoted
ORIGIN = Provenance(model="scripted:x", target="cpu", device="host", protocol="p1", team="blue")


def _learn_sequence(conn) -> Store:  # type: ignore[no-untyped-def]
    """Seed, then 24 deterministic episodes of 3 learners (credits, new items, UGC churn)."""
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    policies = {w: make_policy("sage", conn, run_id=f"w{w}", embedder=None, config=CFG,
                               provenance=ORIGIN) for w in range(3)}
    for n in range(8):
        for w in range(3):
            trace, drafts = episode_of(work, w, n)
            policies[w].learn(trace, drafts)
    return store


def test_postgres_learns_exactly_what_sqlite_learns(pg_url: str, workspace: Path) -> None:  # noqa: F811
    lite = _learn_sequence(db.connect(workspace))
    pg = _learn_sequence(connect_memory(pg_url))
    assert pg.shared and not lite.shared
    a, b = fingerprint(lite.all_items()), fingerprint(pg.all_items())
    assert a == b and len(a) == 30 + 6  # 30 seeds, 6 distilled items (one in four episodes)
    assert any(v[4] == "consolidated" for v in a.values())  # UGC promoted something
    assert pg.clock() == lite.clock() == 24
    assert [s.hot_entries for s in pg.snapshots()] == [s.hot_entries for s in lite.snapshots()]
    p_stats, l_stats = pg.stats(), lite.stats()
    assert p_stats.pop("u_mean") == pytest.approx(l_stats.pop("u_mean"))  # avg's summation order differs
    assert p_stats == l_stats
    first = min(m.id for m in pg.list_items(order="n_ado")[:1])
    assert pg.adoption_history(first) == lite.adoption_history(first)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_provenance_is_recorded_per_change_and_immutable(backend: str, workspace: Path, request) -> None:  # type: ignore[no-untyped-def]
    conn = db.connect(workspace) if backend == "sqlite" else connect_memory(request.getfixturevalue("pg_url"))
    store = _learn_sequence(conn)
    hot = store.list_items(order="n_ret")[0]
    rows = store.history(hot.id)
    assert rows[0].kind == "seeded" and rows[0].origin.run_id == SEED.name
    credits = [r for r in rows if r.kind == "credited"]
    assert len(credits) == hot.n_upd  # one immutable row per utility change, none lost
    assert all(r.origin.model == "scripted:x" and r.origin.target == "cpu" and r.origin.device == "host"
               and r.origin.protocol == "p1" and r.origin.team == "blue" for r in credits)
    assert {r.origin.run_id for r in credits} <= {"w0", "w1", "w2"}
    assert credits[-1].u_after == pytest.approx(hot.u)
    assert all(b.u_before == pytest.approx(a.u_after) for a, b in itertools.pairwise(credits))
    assert sum(r.adopted for r in credits) == hot.n_ado and sum(r.retrieved for r in credits) == hot.n_ret
    made = [m for m in store.all_items() if m.source == "distilled"]
    assert made and all(store.history(m.id)[0].kind == "distilled" for m in made)
    for m in made:  # each distilled item names the run and operator that distilled it
        origin = store.history(m.id)[0].origin
        assert origin.operator.startswith(f"{origin.run_id}-op") and m.title.endswith(origin.operator)
        assert m.id in store.ids_with_history(run_id=origin.run_id, operator=origin.operator)
    for sql in ("UPDATE item_history SET xi = 1", "DELETE FROM item_history"):
        with pytest.raises(Exception, match="immutable"), db.transaction(conn):
            conn.execute(sql)
    assert len(store.history(hot.id)) == len(rows)


def test_memory_commands_open_the_shared_memory(pg_url: str, workspace: Path, tmp_path: Path,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store = _learn_sequence(connect_memory(pg_url))
    hot = store.list_items(order="n_ret")[0]
    code, out, err = invoke(["memory", "show", str(hot.id), "--memory", pg_url, "--json"])
    assert code == 0, err
    shown = json.loads(out)
    assert shown["n_upd"] == hot.n_upd and len(shown["history"]) == 1 + hot.n_upd
    code, out, _ = invoke(["memory", "show", str(hot.id), "--memory", pg_url])
    assert code == 0 and "credited" in out and "scripted:x" in out and "w0-op" in out
    monkeypatch.setenv("SAGE_MEMORY_URL", pg_url)  # the environment names it when --memory does not
    code, out, _ = invoke(["memory", "list", "--run", "w2", "--json", "--limit", "0"])
    listed = {m["id"] for m in json.loads(out)}
    assert code == 0 and listed == store.ids_with_history(run_id="w2") and hot.id in listed | {hot.id}
    code, out, _ = invoke(["memory", "list", "--team", "red", "--json"])
    assert code == 0 and json.loads(out) == []
    code, out, _ = invoke(["memory", "stats", "--json"])
    assert code == 0 and json.loads(out)["episodes"] == 24
    dump = tmp_path / "team.jsonl"
    code, _, err = invoke(["memory", "export", str(dump)])
    assert code == 0, err
    code, out, err = invoke(["memory", "import", str(dump), "--mode", "merge", "--json"])
    assert code == 0 and json.loads(out) == {"imported": 0, "skipped": 36}, err
    monkeypatch.delenv("SAGE_MEMORY_URL")
    conn = db.connect(workspace)
    assert import_jsonl(conn, dump) == {"imported": 36, "skipped": 0}
    assert fingerprint(Store(conn).all_items()).keys() == fingerprint(store.all_items()).keys()
    export_jsonl(conn, tmp_path / "again.jsonl")


def test_memory_url_is_a_postgres_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGE_MEMORY_URL", raising=False)
    assert memory_url(None) is None
    monkeypatch.setenv("SAGE_MEMORY_URL", "postgresql://a@h/db")
    assert memory_url(None) == "postgresql://a@h/db" and memory_url("postgres://b@h/x") == "postgres://b@h/x"
    with pytest.raises(Exception, match="not a PostgreSQL URL"):
        memory_url("sqlite:///x.db")


KILLED = textwrap.dedent("""
    import os, sys
    from sagekernel.memory.backend import connect_memory
    from sagekernel.memory.learners import Workload, episode_of
    from sagekernel.memory.policies import make_policy
    from sagekernel.memory.store import Store
    conn = connect_memory(sys.argv[1])
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    policy = make_policy("sage", conn, run_id="doomed", embedder=None)
    def die(*a, **k):
        os.kill(os.getpid(), 9)  # the learner dies inside its update, after credits and new items
    store.write_snapshot = die
    policy.store.write_snapshot = die
    policy.learn(*episode_of(work, 0, 0))
""")


def test_a_learner_killed_mid_update_leaves_nothing_half_written(pg_url: str) -> None:  # noqa: F811
    conn = connect_memory(pg_url)
    load_seed(conn, SEED)
    store = Store(conn)
    before = (fingerprint(store.all_items()), store.clock(), store.stats())
    n_rows = conn.execute("SELECT count(*) FROM item_history").fetchone()[0]
    proc = subprocess.run([sys.executable, "-c", KILLED, pg_url], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ,
                               "PYTHONPATH": str(Path(__file__).parents[1] / "src")}, check=False)
    assert proc.returncode == -9, proc.stderr
    assert (fingerprint(store.all_items()), store.clock(), store.stats()) == before
    assert conn.execute("SELECT count(*) FROM item_history").fetchone()[0] == n_rows
    assert conn.execute("SELECT count(*) FROM adoptions").fetchone()[0] == 0
    # and the writer lock died with it: the next learner updates at once
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    make_policy("sage", conn, run_id="next", embedder=None).learn(*episode_of(work, 0, 0))
    assert store.clock() == 1 and len(work.seed_ids) >= HOT_ITEMS


def test_the_shared_memory_learns_an_episode_once(pg_url: str) -> None:  # noqa: F811
    """The learner's marker is in its workspace, the update here: a learner that crashed between the
    two commits and learns the episode again on resume must not apply it twice."""
    conn = connect_memory(pg_url)
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    policy = make_policy("sage", conn, run_id="r", embedder=None)
    policy.learn(*episode_of(work, 0, 0))
    once = (fingerprint(store.all_items()), store.clock())
    make_policy("sage", conn, run_id="r", embedder=None).learn(*episode_of(work, 0, 0))  # the resumed learner
    assert (fingerprint(store.all_items()), store.clock()) == once
    make_policy("sage", conn, run_id="r2", embedder=None).learn(*episode_of(work, 0, 0))  # another run
    assert store.clock() == 2


def test_a_learners_index_catches_up_with_the_others(pg_url: str) -> None:  # noqa: F811
    """Retrieval sees other learners' new items, credits and residents: after a sync, a learner's
    incrementally patched index equals one freshly loaded from the shared memory."""
    from sagekernel.memory.retrieval import RetrievalIndex
    from sagekernel.records import EpisodeKind

    conn = connect_memory(pg_url)
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    reader = make_policy("sage", conn, run_id="reader", embedder=None, config=CFG)
    others = [make_policy("sage", connect_memory(pg_url), run_id=f"w{w}", embedder=None, config=CFG)
              for w in range(2)]

    def same_as_fresh() -> None:
        fresh = RetrievalIndex(Store(connect_memory(pg_url)), None)
        mine = reader.index  # type: ignore[attr-defined]
        for attr in ("ids", "u", "q1", "q2", "state"):
            assert getattr(mine, attr).tolist() == getattr(fresh, attr).tolist(), attr
        query = "vectorise the tail loop learner finding"
        assert mine.lexical(query, 50) == pytest.approx(fresh.lexical(query, 50))

    for n in range(8):
        for w, policy in enumerate(others):
            policy.learn(*episode_of(work, w, n))
        got = reader.retrieve("tail loop", operator="x", category="Elementwise", episode=EpisodeKind.CORR)
        same_as_fresh()
        assert not {r.item_id for r in got} & {m.id for m in store.in_state(ItemState.CONSOLIDATED)}
        reader.learn(*episode_of(work, 7, n))
        same_as_fresh()
    assert store.in_state(ItemState.CONSOLIDATED) and store.count() > 30
