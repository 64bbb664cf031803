"""One definition each: the transaction helper, the writing methods, the literal filter (the knob
defaults: tests/test_config_consistency.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.memory.literals import mentions_literal, size_literals
from sagekernel.memory.methods import VARIANTS, WRITING_METHODS


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
