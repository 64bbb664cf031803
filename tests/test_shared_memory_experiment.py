"""`sage experiment`: streams whose block says `run = { memory = "postgresql://…" }` learn into one
shared memory at once; the others keep their own workspace memory (by spec)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiment_support import write_spec
from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel import db
from sagekernel.experiment.api import run_experiment
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.memory.backend import connect_memory
from sagekernel.memory.store import Store
from test_cli_values import invoke

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


def test_the_memory_option_shares_one_memory_between_the_streams(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    """`sage experiment run --memory URL`: the streams (no donors) learn into the shared memory, their
    workspaces keep none, and `sage report` on a stream reads the shared memory its run recorded."""
    blocks = """
[[streams]]
name = "{method}-cli"
methods = ["sage", "sage-uniform-credit"]
models = ["scripted"]
limit = 1
"""
    spec = write_spec(tmp_path / "exp.toml", blocks)
    code, out, err = invoke(["experiment", "run", str(spec), "--dir", str(tmp_path / "run"), "--workers", "2",
                             "--no-progress", "--json", "--memory", pg_url])
    assert code == 0, err
    assert sorted(json.loads(out)["finished"]) == ["sage-cli", "sage-uniform-credit-cli"]
    shared = Store(connect_memory(pg_url))
    runs = {r[0] for r in shared.conn.execute("SELECT DISTINCT run_id FROM memory_episodes").fetchall()}
    assert runs == {"sage-cli", "sage-uniform-credit-cli"} and shared.clock() == 2 * 2
    exp = ExperimentDir(tmp_path / "run")
    for name in runs:
        assert Store(db.connect(exp.workspace(name), readonly=True)).clock() == 0
        code, out, err = invoke(["report", str(exp.workspace(name)), "--json"])
        assert code == 0, err
        memory = json.loads(out)["runs"][0]["memory"]
        assert memory["where"].startswith("postgresql://") and memory["n_items"] == shared.count()
        assert memory["provenance"]["other_runs"] >= 1  # the other stream's rows are in the same memory
    code, _, err = invoke(["experiment", "run", str(tmp_path / "run")])  # continuing: nothing left to run
    assert code == 0, err
