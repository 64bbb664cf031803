"""Hostile or broken task files: each is loaded in a limited child process, so none can hang
`sage`, exhaust memory, flood the terminal or `--json`, or crash a command. One test per case."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sagekernel.errors import TaskError
from sagekernel.tasks.loader import LoadProblem, LoadReport, load_dir
from sagekernel.tasks.suites import load_suite

FILES = {
    "hang.py": '''
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x): return x
        def get_inputs():
            while True:
                pass
    ''',
    "alloc.py": '''
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x): return x
        def get_inputs():
            hoard = []
            while True:
                hoard.append(bytearray(1 << 27))
    ''',
    "noisy.py": '''
        import torch, torch.nn as nn
        print("x" * 3_000_000)
        class Model(nn.Module):
            def forward(self, x): return x * 2
        def get_inputs():
            print("[/x] [red]not markup{" * 50_000)
            return [torch.randn(4, 4)]
    ''',
    "dies.py": '''
        import os
        os._exit(3)
    ''',
    "segfault.py": '''
        import ctypes
        ctypes.string_at(0)
    ''',
    "recurse.py": '''
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x): return self.forward(x)
        def get_inputs():
            return [torch.randn(2)]
    ''',
    "good.py": '''
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x): return torch.abs(x)
        size = 32
        def get_inputs():
            return [torch.randn(size)]
    ''',
}


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "level1"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    (root / "latin1.py").write_bytes(b"import torch\n# caf\xe9 \xff\nclass Model: pass\n")
    return root.parent


@pytest.fixture(scope="module")
def report(hostile_dir: Path) -> tuple[LoadReport, float]:
    mp = pytest.MonkeyPatch()
    mp.setenv("SAGE_TASK_LOAD_TIMEOUT_S", "10")
    mp.setenv("SAGE_TASK_LOAD_MEM_BYTES", str(2**30))
    start = time.monotonic()
    try:
        loaded = load_dir(hostile_dir, isolate=True)
    finally:
        mp.undo()
    return loaded, time.monotonic() - start


def problem(report: tuple[LoadReport, float], name: str) -> LoadProblem:
    return next(p for p in report[0].problems if p.path.name == name)


def test_a_hanging_reference_is_stopped_and_named(report: tuple[LoadReport, float]) -> None:
    p = problem(report, "hang.py")
    assert p.kind == "timeout" and "longer than 10 s" in p.message and "SAGE_TASK_LOAD_TIMEOUT_S" in p.message
    assert report[1] < 120, "the whole directory, hang included, loads in bounded time"


def test_unbounded_allocation_hits_the_child_memory_limit(report: tuple[LoadReport, float]) -> None:
    p = problem(report, "alloc.py")
    assert p.kind == "memory" and "memory" in p.message, p


def test_megabytes_of_output_are_captured_and_the_file_still_loads(report: tuple[LoadReport, float]) -> None:
    assert [t.name for t in report[0].tasks if t.name == "noisy"] == ["noisy"]


def test_a_file_that_kills_its_interpreter_is_a_problem_not_a_crash(report: tuple[LoadReport, float]) -> None:
    p = problem(report, "dies.py")
    assert p.kind == "crashed" and "exit code 3" in p.message


def test_a_segfault_in_native_code_is_a_problem(report: tuple[LoadReport, float]) -> None:
    p = problem(report, "segfault.py")
    assert p.kind in ("crashed", "memory") and "signal" in p.message


def test_endless_recursion_is_a_rejection(report: tuple[LoadReport, float]) -> None:
    assert "recurs" in problem(report, "recurse.py").message.lower()


def test_non_utf8_file_is_rejected_with_how_to_fix(report: tuple[LoadReport, float]) -> None:
    p = problem(report, "latin1.py")
    assert "not UTF-8" in p.message and "save the file as UTF-8" in p.message


def test_good_files_load_whatever_their_neighbours_do(report: tuple[LoadReport, float]) -> None:
    assert {t.name for t in report[0].tasks} == {"good", "noisy"}


def _sage(*args: str, env: dict[str, str] | None = None,
          timeout: float = 300) -> subprocess.CompletedProcess[str]:
    import os

    src = str(Path(__file__).resolve().parents[1] / "src")
    return subprocess.run([sys.executable, "-c", "from sagekernel.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": src, "SAGE_TASK_LOAD_TIMEOUT_S": "10",
                               "SAGE_TASK_LOAD_MEM_BYTES": str(2**30), **(env or {})})


def test_check_json_stays_valid_json_whatever_the_files_print(hostile_dir: Path) -> None:
    result = _sage("tasks", "check", str(hostile_dir), "--json")
    assert result.returncode == 1, result.stderr[-2000:]
    data = json.loads(result.stdout)  # no task output mixed in
    statuses = {Path(f["path"]).name: f["status"] for f in data["files"]}
    assert statuses["good.py"] == "loaded" and statuses["hang.py"] == "timeout"
    assert "xxxxxxxxxx" not in result.stdout and "Traceback" not in result.stderr


def test_run_reads_directories_as_check_does(hostile_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGE_TASK_LOAD_TIMEOUT_S", "10")
    monkeypatch.setenv("SAGE_TASK_LOAD_MEM_BYTES", str(2**30))
    with pytest.raises(TaskError) as info:
        load_suite(hostile_dir)
    for name in ("hang.py", "dies.py", "latin1.py"):
        assert name in str(info.value)


def test_error_text_is_never_read_as_markup(tmp_path: Path) -> None:
    result = _sage("tasks", "show", "[/x] [bold]oops[/bold", "--suite", "demo")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "[/x] [bold]oops[/bold" in result.stderr
