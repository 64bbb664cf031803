"""Stream schedules and the workspace lock (runner/schedule.py, runner/lock.py)."""

from __future__ import annotations

import json
import os
import signal
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


_HOLD = """
import sys, time
from sagekernel.runner.lock import WorkspaceLock
lock = WorkspaceLock(sys.argv[1], "other-run")
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def _holder(ws: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(ws)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_lock_excludes_a_live_run_and_names_it(tmp_path: Path):
    holder = _holder(tmp_path)
    try:
        with pytest.raises(RunLocked, match="other-run") as info:
            WorkspaceLock(tmp_path, "mine").acquire()
        assert str(holder.pid) in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_a_killed_run_is_free_at_once(tmp_path: Path):
    holder = _holder(tmp_path)
    holder.send_signal(signal.SIGKILL)  # kill -9: no cleanup runs in the holder
    holder.wait()
    with WorkspaceLock(tmp_path, "mine"):
        info = json.loads((tmp_path / LOCK_NAME).read_text())
        assert info["run_id"] == "mine" and info["pid"] == os.getpid()


def test_a_leftover_lock_file_naming_a_live_pid_does_not_block(tmp_path: Path):
    """Only a held flock excludes: a file naming some live process (pid reuse) is not a lock."""
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "run_id": "ghost"}))
    with WorkspaceLock(tmp_path, "mine") as lock:
        assert lock.held


def test_lock_released_on_exit(tmp_path: Path):
    with WorkspaceLock(tmp_path, "mine"), pytest.raises(RunLocked, match="'mine'"):
        WorkspaceLock(tmp_path, "second").acquire()  # flock is per open file, even in one process
    with WorkspaceLock(tmp_path, "again"):  # can be taken again
        pass
