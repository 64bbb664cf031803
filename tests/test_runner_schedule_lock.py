"""Stream schedules and the workspace lock (runner/schedule.py, runner/lock.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagekernel.errors import RunLocked
from sagekernel.runner.lock import LOCK_NAME, WorkspaceLock
from sagekernel.runner.schedule import ScheduleError, order
from sagekernel.tasks.task import Task


def _task(name: str, level: int) -> Task:
    return Task(name=name, level=level, category="c", description="", source_path=Path(f"{name}.py"),
                inputs=[], outputs=[])


SUITE = [_task("a3", 3), _task("b1", 1), _task("c2", 2), _task("d3", 3), _task("e2", 2), _task("f2", 2)]


def names(tasks: list[Task]) -> list[str]:
    return [t.name for t in tasks]


def test_schedules():
    assert names(order(SUITE, "given")) == ["a3", "b1", "c2", "d3", "e2", "f2"]
    assert names(order(SUITE, "by-level")) == ["b1", "c2", "e2", "f2", "a3", "d3"]
    assert names(order(SUITE, "level:2")) == ["c2", "e2", "f2"]
    assert names(order(SUITE, "level:L3")) == ["a3", "d3"]
    assert names(order(SUITE, "interleave:L2,L3")) == ["c2", "a3", "e2", "d3", "f2"]
    assert names(order(SUITE, "interleave:3,1")) == ["a3", "b1", "d3"]


@pytest.mark.parametrize("bad", ["level:9", "shuffle", "level:", "interleave:L2,L2", "level:x", "given:1"])
def test_bad_schedules(bad: str):
    with pytest.raises(ScheduleError):
        order(SUITE, bad)


def test_lock_excludes_a_live_run_and_names_it(tmp_path: Path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "run_id": "other-run"}))
        with pytest.raises(RunLocked, match="other-run") as info:
            WorkspaceLock(tmp_path, "mine").acquire()
        assert str(holder.pid) in str(info.value)
        assert f"delete {tmp_path / LOCK_NAME}" in str(info.value)  # the way out when the pid was reused
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_dead_pid_is_taken_over(tmp_path: Path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": dead.pid, "run_id": "crashed"}))
    with WorkspaceLock(tmp_path, "mine"):
        info = json.loads((tmp_path / LOCK_NAME).read_text())
        assert info["run_id"] == "mine" and info["pid"] == os.getpid()
        with pytest.raises(RunLocked):  # a second holder in another process would be refused too
            other = WorkspaceLock(tmp_path, "second")
            other.path.write_text(json.dumps({**info, "pid": 1}))  # pid 1 is alive
            other.acquire()
    assert (tmp_path / LOCK_NAME).exists()  # not ours any more (pid 1), so release left it


def test_lock_released_on_exit(tmp_path: Path):
    with WorkspaceLock(tmp_path, "mine"):
        assert (tmp_path / LOCK_NAME).exists()
    assert not (tmp_path / LOCK_NAME).exists()
    with WorkspaceLock(tmp_path, "again"):  # can be taken again
        pass
