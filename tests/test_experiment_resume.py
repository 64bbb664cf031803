"""A killed experiment continues: kill -9 the `sage experiment run` process while a stream is in
the middle, rerun it, and the store records show that the finished stream and the finished
operators were not run again, and that the stream in flight resumed where it stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiment_support import write_spec
from sagekernel import db
from sagekernel.experiment.api import run_experiment
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.status import experiment_status

SRC = Path(__file__).resolve().parents[1] / "src"
BLOCKS = """
[[streams]]
name = "first"
methods = ["refinement"]
models = ["scripted"]
[[streams]]
name = "second"
methods = ["sage"]
models = ["scripted"]
"""


def query(ws: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = db.connect(ws, create=False, readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def test_kill_9_then_rerun_resumes_unfinished_streams_and_reruns_nothing(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "exp.toml", BLOCKS, budget=3)
    root = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sagekernel.cli import main; main()",
            "experiment",
            "run",
            str(spec),
            "--dir",
            str(root),
            "--workers",
            "1",
            "--no-progress",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    exp = ExperimentDir(root)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert time.monotonic() < deadline, "the experiment never reached the middle of its second stream"
            assert proc.poll() is None, "the experiment ended before it could be killed"
            if exp.exists:
                rows = {r.name: r for r in experiment_status(exp)}
                if rows["first"].state == "finished" and rows["second"].done >= 1:
                    break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    outcome = exp.outcome("second")
    assert outcome is not None and outcome.state == "running"
    worker = outcome.pid
    for _ in range(600):  # the worker dies with its parent (PR_SET_PDEATHSIG)
        if not alive(worker):
            break
        time.sleep(0.05)
    assert not alive(worker), "the stream's worker outlived the killed experiment"

    first = exp.workspace("first")
    second = exp.workspace("second")
    first_before = (
        query(first, "SELECT status, finished_at FROM runs"),
        query(first, "SELECT position, recorded_at FROM operator_results"),
        query(first, "SELECT count(*) FROM exchanges"),
    )
    second_before = query(second, "SELECT position, recorded_at FROM operator_results ORDER BY position")
    assert first_before[0][0][0] == "finished" and 1 <= len(second_before) < 3
    assert query(second, "SELECT status FROM runs")[0][0] != "finished"
    status = {r.name: r.state for r in experiment_status(exp)}
    assert status == {"first": "finished", "second": "interrupted"}

    _, result = run_experiment(root, live=False)  # the directory alone continues it
    assert result.ok
    assert (
        query(first, "SELECT status, finished_at FROM runs"),
        query(first, "SELECT position, recorded_at FROM operator_results"),
        query(first, "SELECT count(*) FROM exchanges"),
    ) == first_before  # not run again
    after = query(second, "SELECT position, recorded_at FROM operator_results ORDER BY position")
    assert after[: len(second_before)] == second_before  # finished operators kept, not redone
    assert [p for p, _ in after] == [0, 1, 2]
    assert query(second, "SELECT run_id, status FROM runs") == [("second", "finished")]
    resumed = exp.outcome("second")
    assert resumed is not None and resumed.attempt == 2 and resumed.pid != worker
