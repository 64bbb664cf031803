"""Rule versions on merge by replay (memory/rule_versions.py, `sage memory import --mode replay`):
when merged memories hold different rule texts for one item every text is kept, with the memory
it came from and that memory's utility changes as evidence; which one is current does not depend
on merge order, and merging again changes nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pg_support import pg_server  # noqa: F401  (the server fixture)
from sagekernel import db
from sagekernel.cli import app
from sagekernel.memory.io import export_jsonl, import_jsonl, load_seed
from sagekernel.memory.learners import Workload, episode_of
from sagekernel.memory.policies import make_policy
from sagekernel.memory.rule_versions import Evidence, RuleVersion, current, merge_versions
from sagekernel.memory.store import Store

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"

evidence = st.builds(Evidence, run_id=st.sampled_from(["r1", "r2"]), operator=st.sampled_from(["op1", "op2"]),
                     episode=st.sampled_from(["corr", "opt"]), kind=st.sampled_from(["credited", "counted"]),
                     at=st.sampled_from(["t1", "t2"]), team=st.sampled_from(["", "blue"]),
                     xi=st.none() | st.floats(-1, 1), u_after=st.none() | st.floats(-1, 1))
versions = st.lists(st.builds(RuleVersion, text=st.sampled_from(["tile by 64", "mask the tail", "ab", "ba"]),
                              tokens=st.integers(1, 5), memory=st.sampled_from(["m1", "m2", "m3"]),
                              evidence=st.lists(evidence, max_size=4).map(tuple)), max_size=5)


@settings(max_examples=300, deadline=None)
@given(versions, versions, versions)
def test_version_union_is_order_free_idempotent_and_associative(a: list[RuleVersion], b: list[RuleVersion],
                                                                c: list[RuleVersion]) -> None:
    ab = merge_versions(a, b)
    assert ab == merge_versions(b, a)
    assert merge_versions(ab, b) == ab and merge_versions(ab, ab) == ab
    assert merge_versions(ab, c) == merge_versions(a, merge_versions(b, c))
    assert current(ab) == current(merge_versions(b, a))
    assert len({(v.text, v.memory) for v in ab}) == len(ab)  # one version per (text, memory)
    if ab:  # current: fewest tokens, then the smaller text
        assert current(ab) == min(ab, key=lambda v: (v.tokens, v.text))


RULES = {"a": "Mask the tail of every vector loop with offs < n before loading.",
         "b": "Guard the remainder: load the last partial vector under a mask."}


def _team(conn: Any, name: str, workers: range) -> Store:
    """A memory that learned some episodes, then abstracted its own rule for one shared item."""
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    for w in workers:
        policy = make_policy("sage", conn, run_id=f"{name}{w}", embedder=None)
        for n in range(3):
            policy.learn(*episode_of(work, w, n))
    first = store.list_items(order="id")[0]  # both teams abstract this one, differently
    credited = max(store.all_items(), key=lambda m: (m.n_upd, -m.id))
    own = f"{RULES[name]} Team {name}."
    with db.transaction(conn):
        store.save([replace(first, rule_text=RULES[name], rule_tokens=9)])
        if credited.id != first.id:
            store.save([replace(credited, rule_text=own, rule_tokens=11)])
    return store


def _rules(store: Store) -> dict[str, tuple[str, frozenset[tuple[str, str, int]]]]:
    """Per item (content hash): its rule text and its versions (text, memory, evidence count); an
    item without stored versions holds one, its own text, from this memory."""
    out = {}
    for m in store.all_items():
        vs = store.rule_versions(m.id)
        if vs:
            out[m.content_hash] = (m.rule_text, frozenset((v.text, v.memory, len(v.evidence)) for v in vs))
        elif m.rule_text:
            out[m.content_hash] = (m.rule_text, frozenset({(m.rule_text, store.memory_id(), -1)}))
    return out


def _texts(rules: dict[str, tuple[str, frozenset[tuple[str, str, int]]]]) -> dict[str, object]:
    return {h: (rule, {(t, mem) for t, mem, _ in vs}) for h, (rule, vs) in rules.items()}


def _check_join(tmp_path: Path, connect: Any) -> None:
    teams = {"a": _team(connect("a"), "a", range(0, 2)), "b": _team(connect("b"), "b", range(2, 4))}
    files = {}
    for name, store in teams.items():
        files[name] = tmp_path / f"{name}.jsonl"
        export_jsonl(store.conn, files[name])
    ids = {name: store.memory_id() for name, store in teams.items()}
    assert ids["a"] and ids["b"] and ids["a"] != ids["b"]
    joined = {}
    for order in (("a", "b"), ("b", "a")):
        conn = connect("join" + "".join(order))
        load_seed(conn, SEED)
        for name in order:
            import_jsonl(conn, files[name], mode="replay")
        joined[order] = _rules(Store(conn))
        import_jsonl(conn, files[order[1]], mode="replay")  # merging one again changes nothing
        assert _rules(Store(conn)) == joined[order]
    assert joined[("a", "b")] == joined[("b", "a")]
    # each team's rule is a version held by its memory, with that memory's changes as evidence
    by_text = {v[0]: v for _, vs in joined[("a", "b")].values() for v in vs}
    for name, store in teams.items():
        for text in (RULES[name], f"{RULES[name]} Team {name}."):
            m = next(m for m in store.all_items() if m.rule_text == text)
            assert by_text[text][1] == ids[name]
            assert by_text[text][2] == sum(h.kind in ("credited", "counted") for h in store.history(m.id))
    conflict = [r for r in joined[("a", "b")].values() if len(r[1]) == 2]
    assert set(RULES.values()) in [{t for t, _, _ in vs} for _, vs in conflict]
    # one memory importing the other gives the same rules and versions either way
    export_jsonl(teams["a"].conn, tmp_path / "a0.jsonl")
    import_jsonl(teams["a"].conn, files["b"], mode="replay")
    import_jsonl(teams["b"].conn, tmp_path / "a0.jsonl", mode="replay")
    assert _texts(_rules(teams["a"])) == _texts(_rules(teams["b"]))
    both = {h: r for h, r in _rules(teams["a"]).items() if len(r[1]) > 1}  # a conflict: stored on both sides
    assert both == {h: r for h, r in _rules(teams["b"]).items() if len(r[1]) > 1}
    for m in teams["a"].all_items():  # the current version: fewest tokens, then the smaller text
        vs = teams["a"].rule_versions(m.id)
        if vs:
            assert m.rule_text == min(vs, key=lambda v: (v.tokens, v.text)).text
    before = _rules(teams["a"])
    import_jsonl(teams["a"].conn, tmp_path / "a0.jsonl", mode="replay")  # its own export: unchanged
    assert _rules(teams["a"]) == before


def test_joining_two_memories_keeps_both_rules_as_versions(tmp_path: Path) -> None:
    _check_join(tmp_path, lambda name: db.connect(tmp_path / name))


@pytest.mark.postgres
def test_rule_versions_on_postgres(tmp_path: Path, pg_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from sagekernel.memory.backend import connect_memory

    tag = tmp_path.name[-8:]
    _check_join(tmp_path, lambda name: connect_memory(pg_server.create_database(f"rv_{name}_{tag}")))


def test_conflict_on_one_item_keeps_both_texts_and_show_lists_them(tmp_path: Path) -> None:
    """Two memories that abstracted one item differently: after the merge both texts are
    versions, the current one is the one with fewer tokens, and `sage memory show` lists them."""
    texts = {"a": "Mask the tail.", "b": "Guard the remainder of every vector loop with a mask."}
    files = {}
    for name in ("a", "b"):
        conn = db.connect(tmp_path / name)
        load_seed(conn, SEED)
        store = Store(conn)
        m = store.list_items(order="id")[0]
        with db.transaction(conn):
            store.save([replace(m, rule_text=texts[name], rule_tokens=3)])
        files[name] = tmp_path / f"{name}.jsonl"
        export_jsonl(conn, files[name])
    conn = db.connect(tmp_path / "a")
    import_jsonl(conn, files["b"], mode="replay")
    store = Store(conn)
    first = store.list_items(order="id")[0]
    vs = store.rule_versions(first.id)
    assert sorted(v.text for v in vs) == sorted(texts.values())
    assert first.rule_text == texts["a"]  # fewer tokens under every tokenizer
    assert first.rule_tokens == min(v.tokens for v in vs)
    ws = ["--workspace", str(tmp_path / "a")]
    res = CliRunner().invoke(app, ["memory", "show", str(first.id), *ws, "--json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)["rule_versions"]
    assert sorted(v["rule_text"] for v in shown) == sorted(texts.values())
    res = CliRunner().invoke(app, ["memory", "show", str(first.id), *ws])
    assert res.exit_code == 0 and "rule versions (2)" in res.output and "Guard the remainder" in res.output
