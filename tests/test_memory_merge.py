"""Merge by replay (memory/merge.py, `sage memory import --mode replay`): the merged statistics do
not depend on merge order, merging a memory with itself changes nothing, and a memory's own
utility changes replayed reproduce exactly its live utilities."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sagekernel import db
from sagekernel.memory.io import export_jsonl, import_jsonl, load_seed
from sagekernel.memory.learners import Workload, episode_of, fingerprint
from sagekernel.memory.merge import Event, fold, union
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import MemoryConfig
from sagekernel.memory.store import Store

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
ETA = MemoryConfig().eta_min

events = st.builds(
    Event, item=st.sampled_from(["a", "b", "c"]), run_id=st.sampled_from(["r1", "r2"]),
    operator=st.sampled_from(["op1", "op2", "op3"]), episode=st.sampled_from(["corr", "opt"]),
    kind=st.sampled_from(["credited", "counted"]),
    at=st.integers(0, 50).map(lambda n: f"2026-12-02T10:00:00.{n:06d}Z"),
    xi=st.floats(-0.2, 1.0, allow_nan=False), retrieved=st.booleans(), adopted=st.booleans())
memories = st.lists(events, max_size=25)


def _stats(evs: frozenset[Event]) -> dict[str, tuple[object, ...]]:
    return {k: (r.u, r.n_upd, r.n_ret, r.n_ado, sorted(r.adopting_ops), sorted(r.retrieving_ops))
            for k, r in fold(evs, ETA).items()}


@settings(max_examples=200, deadline=None)
@given(memories, memories, memories)
def test_merge_is_order_free_idempotent_and_associative(a: list[Event], b: list[Event],
                                                        c: list[Event]) -> None:
    assert _stats(union(a, b)) == _stats(union(b, a))
    assert _stats(union(a, a)) == _stats(union(a))
    assert _stats(union(union(a, b), c)) == _stats(union(a, union(b, c)))
    assert union(union(a, b), b) == union(a, b)


def _learned(ws: Path, workers: range, episodes: int) -> Store:
    conn = db.connect(ws)
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    for w in workers:
        policy = make_policy("sage", conn, run_id=f"w{w}", embedder=None)
        for n in range(episodes):
            policy.learn(*episode_of(work, w, n))
    return store


def _utilities(store: Store) -> dict[str, tuple[object, ...]]:
    return {h: v[:4] + v[10:12] for h, v in fingerprint(store.all_items()).items()}  # u, counts, operators


def test_a_memorys_own_changes_replay_to_its_live_state(tmp_path: Path) -> None:
    store = _learned(tmp_path / "a", range(3), 6)
    live = {m.content_hash: (m.u, m.n_upd, m.n_ret, m.n_ado, sorted(m.adopting_ops), sorted(m.retrieving_ops))
            for m in store.all_items() if m.n_upd}
    assert live and _stats(union(store.events())) == live


def test_importing_by_replay_is_order_free_and_idempotent(tmp_path: Path) -> None:
    team_a = _learned(tmp_path / "a", range(0, 2), 6)  # two teams, different learners, shared seeds
    team_b = _learned(tmp_path / "b", range(2, 4), 6)
    files = {}
    for name, store in (("a", team_a), ("b", team_b)):
        files[name] = tmp_path / f"{name}.jsonl"
        export_jsonl(store.conn, files[name])
    joined = {}
    for order in (("a", "b"), ("b", "a")):
        conn = db.connect(tmp_path / f"join-{''.join(order)}")
        load_seed(conn, SEED)
        for name in order:
            import_jsonl(conn, files[name], mode="replay")
        joined[order] = _utilities(Store(conn))
        again = import_jsonl(conn, files[order[0]], mode="replay")  # merging one twice changes nothing
        assert again["replayed"] == 0 and _utilities(Store(conn)) == joined[order]
    assert joined[("a", "b")] == joined[("b", "a")]
    # the union's changes are both teams': every item's n_ret and n_upd are the sums of the two sides'
    a, b = _utilities(team_a), _utilities(team_b)
    none = (0,) * 4
    for i in (1, 3):
        assert all(v[i] == a.get(h, none)[i] + b.get(h, none)[i] for h, v in joined[("a", "b")].items())
    assert any(a.get(h, none)[3] and b.get(h, none)[3] for h in joined[("a", "b")])  # both credited one
    # a memory merged with (an export of) itself is unchanged
    before = _utilities(team_a)
    assert import_jsonl(team_a.conn, files["a"], mode="replay")["replayed"] == 0
    assert _utilities(team_a) == before
