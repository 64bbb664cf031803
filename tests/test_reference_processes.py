"""Task code the harness runs while it judges -- get_inputs(), the reference forward, parameters,
init arguments -- is confined like the loading child (tasks/confine.py), and leaves nothing behind.

Each task here misbehaves only when the harness computes references: its forward (or get_inputs)
acts only at sizes other than the published ones, which loading never runs and every evaluation
does (its held-out shapes, tasks/sizegen.py). Loading it succeeds; judging it must contain it.
A sound task gives the same inputs, parameters and references in the task child as in-process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from sagekernel import sandbox
from sagekernel.errors import TaskError
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.trials import plan_trials
from sagekernel.harness.verdict import Stage
from sagekernel.targets import get_target
from sagekernel.tasks import confine, task_child
from sagekernel.tasks.inputs import build_inputs
from sagekernel.tasks.loader import load_task
from sagekernel.tasks.record import task_to_json
from sagekernel.tasks.reference import (
    declared_precision_outputs,
    init_arguments,
    param_tensors,
    reference_outputs,
)
from sagekernel.tasks.suites import load_suite
from sagekernel.tasks.task import Task
from test_task_processes import SPAWN, gone, token, with_token

BWRAP = sandbox.bwrap_works()
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap unavailable")

#: A ReLU task whose forward runs `{act}` at any size but the published N=256 (the harness's
#: held-out shapes); `{inputs_act}` runs the same way inside get_inputs().
TASK = '''
import os, torch, torch.nn as nn
N = 256
HARNESS_ONLY = lambda n: n != 256
class Model(nn.Module):
    """ReLU."""
    def forward(self, x):
        bump = 0.0
        if HARNESS_ONLY(x.shape[0]):
{act}
        return torch.relu(x) + bump
def get_inputs():
    if HARNESS_ONLY(N):
{inputs_act}
    return [torch.randn(N)]
def get_init_inputs():
    return []
'''
KERNEL = """#include <stdint.h>
void sage_kernel(const float* restrict x, float* restrict out, int64_t N) {
    for (int64_t i = 0; i < N; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
QUICK = HarnessConfig(skip_timing=True)


def source(act: str, inputs_act: str) -> str:
    return SPAWN + TASK.format(act=textwrap.indent(textwrap.dedent(act).strip(), " " * 12),
                               inputs_act=textwrap.indent(textwrap.dedent(inputs_act).strip(), " " * 8))


def harness_task(folder: Path, name: str, act: str, inputs_act: str = "pass") -> Task:
    """The task record `sage tasks check` gives the file (loaded here, quickly, from its sound
    twin: the loader's own size probes would run the harness-only branch in this process), with
    the file on disk then turned hostile, as a file that passes loading and misbehaves later."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(source("pass", "pass"))
    task = load_task(path, folder)
    path.write_text(source(act, inputs_act))
    return task


def assert_contained_references(task: Task, kind: str) -> None:
    """The harness plans every trial with the task child in layer `kind`; the reference's
    harness-only branch ran (held-out shapes) and got nothing it tried: it added no bump."""
    with task_child.confined(kind):
        plan = plan_trials(task, QUICK)
    assert any(t.shape_label.startswith("held-out") for t in plan.trials)
    for trial in plan.trials:
        assert torch.equal(trial.expected[0], torch.relu(trial.inputs[0])), trial.describe()


@pytest.fixture(autouse=True)
def _fresh_children():
    yield
    task_child.close_all()


# ------------------------------------------------------------------ the file system

@needs_bwrap
def test_a_reference_cannot_write_outside_or_into_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    tasks = tmp_path / "tasks"
    # another instance: patching the harness's own code (its package is bound read-only)
    harness_code = Path(confine.__file__).with_name(f"sage_test_{token().replace('.', '_')}.py")
    targets = [outside / "escaped.txt", tasks / "own-folder.txt", harness_code]
    task = harness_task(tasks, "writer", f"""
        for target in {[str(t) for t in targets]!r}:
            try:
                open(target, "w").write("x")
                bump = 1.0
            except OSError:
                pass
    """)
    assert_contained_references(task, "bwrap")
    assert not any(t.exists() for t in targets)


# ------------------------------------------------------------------ the network

@pytest.mark.skipif(sandbox.best_kind("auto") == "process", reason="no layer without network here")
def test_a_reference_has_no_network(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    unix_path = tmp_path / "agent.sock"  # another instance: a Unix socket beside the tasks (an agent)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_path))
    unix.listen(1)
    unix.setblocking(False)
    task = harness_task(tmp_path / "tasks", "network", f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=3).close()
            bump = 1.0
        except OSError:
            pass
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect({str(unix_path)!r})
            bump = 1.0
        except OSError:
            pass
    """)
    try:
        assert_contained_references(task, "auto")
        for sock in (listener, unix):
            with pytest.raises(BlockingIOError):
                sock.accept()
    finally:
        listener.close()
        unix.close()


# ------------------------------------------------------------------ the host's secrets

@needs_bwrap
def test_a_reference_reads_no_secret_of_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-{token()}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    private = tmp_path / "workspace" / "credentials.txt"  # another instance: a file beside the tasks
    private.parent.mkdir()
    private.write_text(secret)
    task = harness_task(tmp_path / "tasks", "reader", f"""
        if any(v.startswith("sk-") for v in os.environ.values()):
            bump = 1000.0
        try:
            open({str(private)!r}).read()
            bump = 1000.0
        except OSError:
            pass
    """)
    assert_contained_references(task, "bwrap")
    # in-process (before), the reference saw both:
    assert float(reference_outputs(task, [torch.ones(300)], {"N": 300})[0].max()) >= 1000.0


# ------------------------------------------------------------------ processes

@pytest.mark.parametrize("kind", ["bwrap", "process"] if BWRAP else ["process"])
def test_processes_a_reference_starts_do_not_outlive_the_call(tmp_path: Path, kind: str) -> None:
    tok, daemon_tok = token(), token()
    task = harness_task(tmp_path / "tasks", "forks", f"""
        spawn({tok!r}, False)
        spawn({daemon_tok!r}, True)  # a daemon that left the group (setsid, double fork)
    """, inputs_act=f"spawn({tok!r}, False)")  # another instance: get_inputs() forks
    with task_child.confined(kind):
        plan_trials(task, QUICK)
        assert gone(tok) and gone(daemon_tok)  # reaped after each call, the child still warm
    assert gone(tok) and gone(daemon_tok)


# ------------------------------------------------------------------ a native call that never returns

@pytest.mark.parametrize("where", ["forward", "get_inputs"])
def test_a_native_call_that_never_returns_is_stopped_as_the_tasks_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    tok = token()
    hang = f"""
        import ctypes
        spawn({tok!r}, True)
        ctypes.CDLL(None).{"pause()" if where == "forward" else "sleep(100000)"}
    """
    tasks = tmp_path / "tasks"
    task = harness_task(tasks, "hangs", hang if where == "forward" else "pass",
                        inputs_act=hang if where == "get_inputs" else "pass")
    cpu = get_target("cpu")
    monkeypatch.setenv("SAGE_TASK_LOAD_TIMEOUT_S", "4")
    t0 = time.monotonic()
    verdict = evaluate(task, KERNEL, cpu, QUICK)
    assert time.monotonic() - t0 < 60
    assert verdict.stage == Stage.BROKEN_TASK and "broken_task" in verdict.flags, verdict.message
    assert "took longer than 4 s" in verdict.message and "hangs.py" in verdict.message
    assert gone(tok)  # the child and what it started were killed
    sound = harness_task(tasks, "sound", "pass")  # the next operator proceeds (a fresh child)
    assert evaluate(sound, KERNEL, cpu, QUICK).stage == Stage.OK


def test_a_reference_that_kills_its_child_is_the_tasks_fault(tmp_path: Path) -> None:
    task = harness_task(tmp_path / "tasks", "suicide", "import signal; os.kill(os.getpid(), signal.SIGKILL)")
    verdict = evaluate(task, KERNEL, get_target("cpu"), QUICK)
    assert verdict.stage == Stage.BROKEN_TASK and "died (signal 9)" in verdict.message


def test_killing_sage_while_a_reference_hangs_leaves_no_child(tmp_path: Path) -> None:
    tok = token()
    task = harness_task(tmp_path / "tasks", "spins", f"""
        spawn({tok!r}, False)
        while True:
            pass
    """)
    script = textwrap.dedent(f"""
        from sagekernel.harness.config import HarnessConfig
        from sagekernel.harness.trials import plan_trials
        from sagekernel.tasks.task_child import confined
        from sagekernel.tasks.record import task_from_json
        task = task_from_json({task_to_json(task)!r})
        with confined("auto"):
            plan_trials(task, HarnessConfig())
    """)
    sage = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])})
    try:
        deadline = time.monotonic() + 120
        while not with_token(tok) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert with_token(tok)
        os.kill(sage.pid, signal.SIGKILL)
        sage.wait()
        assert gone(tok, 20)
    finally:
        for pid in with_token(tok):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ a sound task: the same values

LINEAR = """
import torch, torch.nn as nn
B, K, M = 8, 32, 16
class Model(nn.Module):
    \"\"\"A linear layer: its weight and bias are the kernel's parameters.\"\"\"
    def __init__(self, k, m):
        super().__init__()
        self.fc = nn.Linear(k, m)
    def forward(self, x):
        return self.fc(x)
def get_inputs():
    return [torch.randn(B, K)]
def get_init_inputs():
    return [K, M]
"""


def test_a_sound_task_gives_identical_values_in_its_sandbox(tmp_path: Path) -> None:
    (tmp_path / "linear.py").write_text(LINEAR)
    chosen = [t for t in load_suite("builtin") if t.name in ("abs", "addcdiv")]
    chosen.append(load_task(tmp_path / "linear.py", tmp_path))
    assert len(chosen) == 3 and chosen[-1].params and chosen[1].coverage.attr_domains
    for task in chosen:
        seed, sizes = 12345, dict(task.sizes)
        here = (build_inputs(task, sizes, seed, "normal"), param_tensors(task, sizes, 7))
        refs = (reference_outputs(task, here[0], sizes, seed=7),
                declared_precision_outputs(task, here[0], sizes, seed=7))
        init = init_arguments(task, sizes)
        with task_child.confined("auto"):
            there = (build_inputs(task, sizes, seed, "normal"), param_tensors(task, sizes, 7))
            confined_refs = (reference_outputs(task, there[0], sizes, seed=7),
                             declared_precision_outputs(task, there[0], sizes, seed=7))
            confined_init = init_arguments(task, sizes)
        for a, b in zip([*here[0], *here[1], *refs[0], *(refs[1] or [])],
                        [*there[0], *there[1], *confined_refs[0], *(confined_refs[1] or [])], strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), task.name
        assert confined_init == init, task.name


def test_a_sound_task_gets_the_same_verdict_in_its_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    [task] = [t for t in load_suite("builtin") if t.name == "abs"]
    cpu = get_target("cpu")
    source = task.reference_kernels["cpu"].read_text()
    confined = evaluate(task, source, cpu, QUICK)
    monkeypatch.setattr(confine, "child_for", lambda task: None)  # in-process, as before
    here = evaluate(task, source, cpu, QUICK)
    assert confined.stage == here.stage == Stage.OK
    assert confined.message == here.message


def test_a_sandbox_asked_for_that_does_not_work_is_refused_as_the_loader_refuses(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "bwrap_works", lambda: False)
    with pytest.raises(TaskError, match="sandbox 'bwrap' was asked for, but bubblewrap"), \
            task_child.confined("bwrap"):
        pass
    [task] = [t for t in load_suite("builtin") if t.name == "abs"]
    verdict = evaluate(task, task.reference_kernels["cpu"].read_text(), get_target("cpu"),
                       HarnessConfig(skip_timing=True, sandbox="bwrap"))
    assert verdict.stage == Stage.PARSE and "sandbox 'bwrap' was asked for" in verdict.message


@needs_bwrap
def test_sage_eval_loads_its_task_file_in_the_loading_child(tmp_path: Path) -> None:
    """`sage eval FILE.py` used to import the file in `sage`'s own process: what its module-level
    code writes outside its folder (or into sage's package) now never reaches the host."""
    from typer.testing import CliRunner

    from sagekernel.cli import app

    escaped = tmp_path / "elsewhere" / "escaped.txt"
    escaped.parent.mkdir()
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    path = tasks / "relu.py"
    path.write_text(f"try:\n    open({str(escaped)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
                    + source("pass", "pass"))
    kernel = tmp_path / "relu.c"
    kernel.write_text(KERNEL)
    result = CliRunner().invoke(app, ["eval", str(path), str(kernel), "--skip-timing", "--sandbox", "bwrap"])
    assert result.exit_code == 0, result.output
    assert "correct" in result.output and not escaped.exists()


def test_a_reference_that_outgrows_its_memory_limit_is_the_tasks_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task child's data segment is limited (SAGE_TASK_LOAD_MEM_BYTES): an allocation past it
    at the harness's shapes fails there, never in `sage`, and the verdict is broken_task."""
    task = harness_task(tmp_path / "tasks", "hog", "bump = float(torch.ones(2**30, dtype=torch.float64)[0])")
    monkeypatch.setenv("SAGE_TASK_LOAD_MEM_BYTES", str(2 << 30))
    verdict = evaluate(task, KERNEL, get_target("cpu"), QUICK)
    assert verdict.stage == Stage.BROKEN_TASK, verdict.message
    assert "memory" in verdict.message and "hog.py" in verdict.message
