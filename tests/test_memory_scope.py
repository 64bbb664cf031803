"""Retrieval restricted by provenance (memory/records.py RetrievalScope, `sage run --retrieve-only
KEY=VALUE --exclude-run RUN`): only items made or credited with the given provenance are retrieved,
never items an excluded run created."""

from __future__ import annotations

from pathlib import Path

from sagekernel import db
from sagekernel.memory.io import load_seed
from sagekernel.memory.learners import Workload, episode_of
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import Provenance, RetrievalScope
from sagekernel.memory.store import Store
from sagekernel.records import EpisodeKind

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"


def _two_teams(ws: Path) -> Store:
    conn = db.connect(ws)
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    for w, team in ((0, "red"), (1, "blue")):
        policy = make_policy("sage", conn, run_id=f"w{w}", embedder=None,
                             provenance=Provenance(target="cpu", team=team))
        for n in range(5):
            policy.learn(*episode_of(work, w, n))
    return store


def _ids(store: Store, scope: RetrievalScope | None, query: str) -> set[int]:
    policy = make_policy("static-rag", store.conn, run_id="reader", embedder=None, scope=scope)
    got = policy.retrieve(query, operator="x", category="Elementwise", episode=EpisodeKind.CORR, k=50)
    return {r.item_id for r in got}


def test_retrieval_is_restricted_by_provenance(workspace: Path) -> None:
    store = _two_teams(workspace)
    red = store.ids_with_history(team="red")
    made_by_w0 = {m.id for m in store.all_items() if m.title.startswith("Learner 0 ")}
    assert made_by_w0 and made_by_w0 <= red
    query = "vectorise the tail loop scalar tail learner finding"
    everything = _ids(store, None, query)
    assert made_by_w0 <= everything and everything - red  # unrestricted: both teams' and unused seeds
    only_red = _ids(store, RetrievalScope(only=(("team", "red"),)), query)
    assert only_red and only_red <= red and made_by_w0 <= only_red
    without_w0 = _ids(store, RetrievalScope(exclude_runs=("w0",)), query)
    assert without_w0 and not without_w0 & made_by_w0
    assert _ids(store, RetrievalScope(only=(("target", "npu"),)), query) == set()
