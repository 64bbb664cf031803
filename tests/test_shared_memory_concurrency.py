"""Learners on many machines at once (memory/backend.py): N processes applying episode updates to one
memory concurrently end with exactly the memory a serial replay of the same updates, in the order
the memory committed them, produces (no credit lost, none applied twice), and the resident set is
never over budget nor out of step with the items' states."""

from __future__ import annotations

import itertools
import multiprocessing
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel import db
from sagekernel.memory.backend import connect_memory
from sagekernel.memory.io import load_seed
from sagekernel.memory.learners import Workload, commit_order, fingerprint, learner, replay_serially
from sagekernel.memory.records import ItemState, MemoryConfig
from sagekernel.memory.store import Store

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
CFG = MemoryConfig(budget_tokens=60)
WORKERS, EPISODES = 4, 10

pytestmark = pytest.mark.postgres


def _open_pg(url: str) -> Any:
    return connect_memory(url)


def _open_sqlite(path: str) -> Any:
    return db.connect(path, timeout_s=60)


def _run_learners(open_conn: Any, work: Workload) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=learner, args=(open_conn, work, w, EPISODES, CFG, start))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WORKERS


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_concurrent_learners_equal_a_serial_replay(backend: str, workspace: Path, tmp_path: Path,
                                                   request: pytest.FixtureRequest) -> None:
    if backend == "postgres":
        open_conn = partial(_open_pg, request.getfixturevalue("pg_url"))
    else:
        open_conn = partial(_open_sqlite, str(tmp_path / "shared"))
    conn = open_conn()
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    _run_learners(open_conn, work)

    order = commit_order(conn)
    assert len(order) == WORKERS * EPISODES == store.clock()
    switches = sum(a[0] != b[0] for a, b in itertools.pairwise(order))
    if backend == "postgres":  # the learners really interleaved (SQLite's busy wait may let one run ahead)
        assert switches > WORKERS
    serial = db.connect(workspace)
    load_seed(serial, SEED)
    replay_serially(serial, work, order, CFG)
    assert fingerprint(store.all_items()) == fingerprint(Store(serial).all_items())
    credited = conn.execute("SELECT count(*) FROM item_history WHERE kind = 'credited'").fetchone()[0]
    assert sum(m.n_upd for m in store.all_items()) == credited > WORKERS * EPISODES  # 0 lost updates
    hot = store.in_state(ItemState.CONSOLIDATED)
    assert hot and sum(m.rule_tokens for m in hot) <= CFG.budget_tokens
    snap = store.latest_snapshot()
    assert snap is not None and {e.id for e in snap.hot_entries} == {m.id for m in hot}
