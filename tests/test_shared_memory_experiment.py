"""`sage experiment`: streams whose block says `run = { memory = "postgresql://…" }` learn into one
shared memory at once; the others keep their own workspace memory (by spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiment_support import write_spec
from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel import db
from sagekernel.experiment.api import run_experiment
from sagekernel.memory.backend import connect_memory
from sagekernel.memory.store import Store

pytestmark = pytest.mark.postgres


def test_streams_share_one_memory_by_spec(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    blocks = f"""
[[streams]]
name = "{{method}}-shared"
methods = ["sage", "sage-uniform-credit"]
models = ["scripted"]
limit = 2
run = {{ memory = "{pg_url}" }}

[[streams]]
name = "sage-own"
methods = ["sage"]
models = ["scripted"]
limit = 1
"""
    spec = write_spec(tmp_path / "exp.toml", blocks)
    exp, outcome = run_experiment(spec, directory=tmp_path / "run", workers=2)
    assert outcome.ok, outcome
    shared = Store(connect_memory(pg_url))
    runs = {r[0] for r in shared.conn.execute("SELECT DISTINCT run_id FROM memory_episodes").fetchall()}
    assert runs == {"sage-shared", "sage-uniform-credit-shared"}
    assert shared.clock() == 2 * 2 * 2  # two streams x two operators x corr/opt
    for name in ("sage-shared", "sage-uniform-credit-shared"):
        assert Store(db.connect(exp.workspace(name), readonly=True)).clock() == 0
    own = Store(db.connect(exp.workspace("sage-own"), readonly=True))
    assert own.clock() == 2 and own.count() > 0  # its own memory, seeded and learned in its workspace
