"""Task code cannot leave processes behind: whatever a task file starts dies with its loading child
(clean exit, a process that left the group with setsid included), and the loading child dies with
`sage` itself (kill -9 while loading tasks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sagekernel.tasks.isolate import load_files_isolated
from sagekernel.tasks.task import Task

FORKS = '''
    import os, time
    import torch, torch.nn as nn
    for escape in (False, True):  # one stays in the group, one leaves it
        pid = os.fork()
        if pid == 0:
            if escape:
                os.setsid()
            time.sleep(300)
            os._exit(0)
        with open(os.path.join(os.environ["SAGE_TEST_PIDS"], f"child-{escape}"), "w") as f:
            f.write(str(pid))
    class Model(nn.Module):
        """Doubles x."""
        def forward(self, x):
            return x * 2
    def get_inputs():
        return [torch.randn(8)]
    def get_init_inputs():
        return []
'''
HANGS = """
    import os
    with open(os.path.join(os.environ["SAGE_TEST_PIDS"], "loader"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_dead(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_processes_a_task_file_starts_do_not_outlive_its_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("SAGE_TEST_PIDS", str(pids))
    task = tmp_path / "forks.py"
    task.write_text(textwrap.dedent(FORKS))
    [outcome] = load_files_isolated([task], tmp_path)
    assert isinstance(outcome, Task), outcome
    started = [int(p.read_text()) for p in pids.glob("child-*")]
    assert len(started) == 2
    assert _wait_dead(started) == []


def test_killing_sage_while_it_loads_tasks_leaves_no_loader(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    task = tmp_path / "hangs.py"
    task.write_text(textwrap.dedent(HANGS))
    script = (
        "import sys\nfrom pathlib import Path\nfrom sagekernel.tasks.isolate import load_files_isolated\n"
        "load_files_isolated([Path(sys.argv[1])], None, timeout_s=300)\n"
    )
    sage = subprocess.Popen(
        [sys.executable, "-c", script, str(task)], env={**os.environ, "SAGE_TEST_PIDS": str(pids)}
    )
    loader = pids / "loader"
    deadline = time.monotonic() + 120
    while not loader.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    assert loader.exists()
    os.kill(sage.pid, signal.SIGKILL)
    sage.wait()
    assert _wait_dead([int(loader.read_text())]) == []
