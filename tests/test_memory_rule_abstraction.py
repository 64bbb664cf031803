"""The rule abstraction (spec §6.4) is asked before the update's transaction, never inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.memory.policies import make_policy
from test_memory_store import episode, seeded

DUMP = "SELECT id, u, n_ret, n_ado, state, rule_text FROM items ORDER BY id"


def test_the_model_is_asked_outside_any_transaction_and_its_text_is_used(workspace: Path) -> None:
    conn = seeded(workspace)
    calls: list[tuple[int, bool]] = []

    def abstract(item, why):  # type: ignore[no-untyped-def]
        calls.append((item.id, conn.in_transaction))
        return f"RULE {item.id}: {len(why)} rationales"

    policy = make_policy("sage", conn, run_id="r1", embedder=None, abstract_rule=abstract)
    for k in range(1, 5):
        policy.learn(episode(policy, f"op{k}", adopt=2)[1])
    assert calls and not any(in_tx for _, in_tx in calls)
    rules = dict(conn.execute("SELECT id, rule_text FROM items WHERE rule_text != ''").fetchall())
    assert {i for i, _ in calls} == set(rules)
    assert all(text.startswith(f"RULE {i}:") for i, text in rules.items())


def test_the_dry_run_changes_nothing_and_names_what_learn_would_ask(workspace: Path) -> None:
    conn = seeded(workspace)
    asked: list[int] = []
    policy = make_policy("sage", conn, run_id="r1", embedder=None,
                         abstract_rule=lambda item, why: asked.append(item.id) or "")
    for k in range(1, 3):
        policy.learn(episode(policy, f"op{k}", adopt=2)[1])
    assert asked == []  # two adopting operators: nothing validated yet (K_ado = 3)
    _, trace = episode(policy, "op3", adopt=2)
    before = conn.execute(DUMP).fetchall()
    requests = policy.rule_requests([(trace, [])])
    assert conn.execute(DUMP).fetchall() == before and not conn.in_transaction
    assert requests and all(r.rationales for r in requests)
    texts = {r.item.id: f"from the model {r.item.id}" for r in requests}
    with db.transaction(conn):  # the runner's unit: result, update and marker together
        policy.learn(trace, rules=texts)
    assert asked == []  # no call while the transaction was held
    got = dict(conn.execute("SELECT id, rule_text FROM items WHERE rule_text != ''").fetchall())
    assert {i: got[i] for i in texts} == texts


def test_learning_inside_a_held_transaction_needs_the_rules(workspace: Path) -> None:
    conn = seeded(workspace)
    policy = make_policy("sage", conn, run_id="r1", embedder=None, abstract_rule=lambda item, why: "x")
    _, trace = episode(policy, "op1", adopt=2)
    with pytest.raises(RuntimeError, match="needs `rules`"), db.transaction(conn):
        policy.learn(trace)
    with pytest.raises(RuntimeError, match="before the update's transaction"), db.transaction(conn):
        policy.rule_requests([(trace, [])])
