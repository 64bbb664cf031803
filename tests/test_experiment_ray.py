"""The Ray backend on a local Ray instance (2 CPUs): two streams as Ray tasks, and the worker
running one of them killed (SIGKILL) in the middle: Ray retries the task and the stream resumes
from its last recorded operator. Skipped when Ray (the optional extra `.[ray]`) is absent."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from experiment_support import write_spec
from sagekernel import db
from sagekernel.experiment.api import run_experiment
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.status import experiment_status

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'sagekernel[ray]')")

BLOCKS = """
[[streams]]
name = "{method}"
methods = ["refinement", "sage"]
models = ["scripted"]
"""
SHIPPED = """
[[streams]]
name = "shipped"
methods = ["sage"]
models = ["scripted"]
limit = 2
"""


def query(ws: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = db.connect(ws, create=False, readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def test_streams_run_as_ray_tasks_and_a_killed_worker_resumes(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "exp.toml", BLOCKS, budget=3)
    root = tmp_path / "run"
    exp = ExperimentDir(root)
    killed: dict[str, Any] = {}
    stop = threading.Event()

    def kill_mid_stream() -> None:
        while not stop.is_set():
            if exp.exists:
                rows = {r.name: r for r in experiment_status(exp)}
                row = rows["sage"]
                outcome = exp.outcome("sage")
                if (
                    row.done >= 1
                    and row.total
                    and row.done < row.total
                    and outcome
                    and outcome.state == "running"
                ):
                    killed["before"] = query(
                        exp.workspace("sage"),
                        "SELECT position, recorded_at FROM operator_results ORDER BY position",
                    )
                    killed["pid"] = outcome.pid
                    os.kill(outcome.pid, signal.SIGKILL)
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_mid_stream, daemon=True)
    watcher.start()
    try:
        _, outcome = run_experiment(
            spec, directory=root, ray="local", ray_init={"num_cpus": 2, "num_gpus": 0}, live=False
        )
        # no shared directory: the workspace travels to the task and back (the same Ray instance)
        (tmp_path / "ship").mkdir()
        shipped_spec = write_spec(tmp_path / "ship" / "exp.toml", SHIPPED, budget=2)
        shipped, ship_outcome = run_experiment(
            shipped_spec, directory=tmp_path / "ship" / "run", ray="local", ray_ship=True, live=False
        )
    finally:
        stop.set()
        ray.shutdown()
    assert ship_outcome.ok and ship_outcome.finished == ["shipped"], ship_outcome
    assert query(shipped.workspace("shipped"), "SELECT run_id, status FROM runs") == [("shipped", "finished")]
    assert query(shipped.workspace("shipped"), "SELECT count(*) FROM operator_results") == [(2,)]
    shipped_outcome = shipped.outcome("shipped")
    assert shipped_outcome is not None and shipped_outcome.state == "finished"
    assert outcome.ok, outcome
    assert sorted(outcome.finished) == ["refinement", "sage"]
    assert "pid" in killed, "the watcher never found the stream in the middle"
    for name in ("refinement", "sage"):
        assert query(exp.workspace(name), "SELECT run_id, status FROM runs") == [(name, "finished")]
        assert query(exp.workspace(name), "SELECT count(*) FROM operator_results") == [(3,)]
    after = query(
        exp.workspace("sage"), "SELECT position, recorded_at FROM operator_results ORDER BY position"
    )
    assert after[: len(killed["before"])] == killed["before"]  # resumed: earlier operators not redone
    resumed = exp.outcome("sage")
    assert resumed is not None and resumed.attempt == 2 and resumed.pid != killed["pid"]
    assert resumed.device.startswith("ray")
