"""One definition each: knob defaults, the transaction helper, the writing methods, the literal filter."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from sagekernel import db, defaults
from sagekernel.agent.loop import AgentConfig
from sagekernel.cli.run import run_command
from sagekernel.memory.literals import mentions_literal, size_literals
from sagekernel.memory.policies import VARIANTS, WRITING_METHODS, make_policy
from sagekernel.memory.records import MemoryConfig
from sagekernel.runner.config import RunConfig


def test_every_default_comes_from_sagekernel_defaults() -> None:
    agent, run, memory = AgentConfig(), RunConfig(), MemoryConfig()
    cli = {name: p.default.default for name, p in inspect.signature(run_command).parameters.items()
           if hasattr(p.default, "default")}
    assert agent.rounds == run.budget == defaults.ROUNDS
    assert agent.k == run.k == memory.k == cli["k"] == defaults.K
    assert run.gamma == memory.gamma == cli["gamma"] == defaults.GAMMA
    assert run.hot_budget == memory.budget_tokens == cli["hot_budget"] == defaults.HOT_BUDGET
    assert run.max_new_items == memory.max_new_items == defaults.MAX_NEW_ITEMS
    assert agent.max_reasks == run.max_reasks == cli["max_reasks"] == defaults.MAX_REASKS
    assert agent.temperature == run.temperature == cli["temperature"] == defaults.TEMPERATURE
    assert agent.max_tokens == run.max_tokens_per_call == defaults.MAX_TOKENS
    assert inspect.signature(make_policy).parameters["gamma"].default == defaults.GAMMA


def test_writing_methods_follow_the_variants() -> None:
    assert set(WRITING_METHODS) == {m for m, v in VARIANTS.items() if v.credit != "none"}
    assert "static-rag" not in WRITING_METHODS and "sage" in WRITING_METHODS


def test_one_transaction_helper_joins_a_held_transaction(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "ws")
    conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(RuntimeError), db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with db.transaction(conn):  # joins: the outer unit decides
            conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("roll the whole unit back")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


@pytest.mark.parametrize("text, hit", [("for (i = 0; i < 4096; ++i)", True), ("4096.0f", True),
                                       ("x4096", False), ("14096", False), ("1.4096", False),
                                       ("N=4096", True), ("unroll by 4", False)])
def test_the_size_literal_filter(text: str, hit: bool) -> None:
    sizes = size_literals([{"N": 4096, "U": 4}])
    assert sizes == {"4096"}  # single digits reveal no shape
    assert mentions_literal(text, sizes) is hit
