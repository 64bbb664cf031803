"""Task code that runs outside `evaluate`/`diagnose` -- the Triton contract's reading of
`Model.__init__`, the Ascend C calibration's device reference, `sage ascendc plan`'s task file --
runs in the sandboxed task child (tasks/task_child.py) or the loading child (tasks/isolate.py),
never in `sage`'s process; and an import-graph guard so a new in-process path fails here.

Each hostile file below acts at module level or in its forward, and only where the host's
environment holds the secret (never in a loading child, whose environment is cut down): loading
it is harmless, and what follows must be too."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
import torch

from sagekernel import sandbox
from sagekernel.harness.config import HarnessConfig
from sagekernel.targets import get_target
from sagekernel.targets.ascendc import calibrate
from sagekernel.targets.ascendc.plan import load_task_spec
from sagekernel.tasks import task_child
from sagekernel.tasks.isolate import load_files_isolated
from sagekernel.tasks.modules import task_module
from sagekernel.tasks.reference import device_outputs, init_parameters
from sagekernel.tasks.suites import load_suite
from sagekernel.tasks.task import Task

needs_bwrap = pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap unavailable")
SECRET = "SAGE_TEST_PROVIDER_API_KEY"

#: Writes the host's secret to `{leak}` (outside its folder) wherever it finds it: at import
#: (`{where}` == "module") or in its forward ("forward").
HOSTILE = '''
import os, torch, torch.nn as nn
N = 64
def leak():
    if os.environ.get("{secret}"):
        try:
            open({leak!r}, "w").write(os.environ["{secret}"])
        except OSError:
            pass
if {where!r} == "module":
    leak()
class Model(nn.Module):
    """Scaled ReLU."""
    def __init__(self, scale, shift=0.0):
        super().__init__()
        self.scale, self.shift = scale, shift
    def forward(self, x):
        if {where!r} == "forward":
            leak()
        return torch.relu(x) * self.scale + self.shift
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return [2.0]
'''


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.name: t for t in load_suite("builtin")}


@pytest.fixture(autouse=True)
def _fresh_children():
    yield
    task_child.close_all()


def hostile(tmp_path: Path, where: str) -> tuple[Path, Path]:
    """(the task file, where it would leak to)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "outside").mkdir()
    leak = tmp_path / "outside" / "leaked.txt"
    path = tmp_path / "tasks" / f"scaled_relu_{where}.py"
    path.write_text(HOSTILE.format(secret=SECRET, leak=str(leak), where=where))
    return path, leak


def loaded(path: Path) -> Task:
    (task,) = load_files_isolated([path], None)
    assert isinstance(task, Task), task
    return task


@needs_bwrap
def test_the_triton_contract_of_a_hostile_task_leaks_nothing(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path, leak = hostile(tmp_path, "module")
    task = loaded(path)
    monkeypatch.setenv(SECRET, "sk-host-secret")
    contract = get_target("triton").contract(task)  # CPU only: no GPU is asked for
    assert "def __init__(self, scale, shift)" in contract
    assert not leak.exists()
    # what the contract did before: reading the signature here runs the file here, and it leaks
    assert init_parameters(task) == ["scale", "shift"] and leak.read_text() == "sk-host-secret"


def test_a_sound_tasks_init_signature_is_what_it_was_in_process(tasks: dict[str, Task]) -> None:
    import inspect

    from sagekernel.targets.triton.contract import init_signature

    chosen = [*[t for t in tasks.values() if t.attrs][:3], tasks["abs"]]
    for task in chosen:
        before = list(inspect.signature(task_module(task).Model.__init__).parameters)[1:]
        assert init_signature(task) == ", ".join(before), task.name
    assert any(init_signature(t) for t in chosen)


@needs_bwrap
def test_the_calibration_runs_a_hostile_reference_in_its_sandbox(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path, leak = hostile(tmp_path, "forward")
    task = loaded(path)
    monkeypatch.setenv(SECRET, "sk-host-secret")
    got = calibrate.calibrate_task(task, "cpu", HarnessConfig(trials=1, held_out_shape=False))
    assert got.ok and got.trials >= 1, got
    assert not leak.exists()
    device_outputs(task, [torch.randn(64)], task.sizes, 0, None, "cpu")  # in-process, as before
    assert leak.read_text() == "sk-host-secret"


def test_the_device_reference_is_identical_in_its_sandbox(tasks: dict[str, Task]) -> None:
    task = tasks["softmax"]
    x = [torch.randn(*[task.sizes[d] for d in spec.dims]) for spec in task.inputs]
    here = device_outputs(task, x, task.sizes, 7, None, "cpu")
    with task_child.confined():
        there = device_outputs(task, x, task.sizes, 7, None, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(here, there, strict=True))


@needs_bwrap
def test_ascendc_plan_loads_its_task_file_in_the_loading_child(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path, leak = hostile(tmp_path, "module")
    monkeypatch.setenv(SECRET, "sk-host-secret")
    assert load_task_spec(str(path)).name == "scaled_relu_module"
    assert not leak.exists()


@pytest.mark.npu
def test_the_calibration_on_the_npu_runs_in_the_task_child(tasks: dict[str, Task]) -> None:
    """The device side (torch_npu and the board's /dev/davinci* inside the task child): unrun here."""
    got = calibrate.calibrate_task(tasks["abs"], "npu", HarnessConfig(trials=1))
    assert got.ok, got


# ------------------------------------------------------------------ the guard

SRC = Path(__file__).resolve().parents[1] / "src"
#: The functions that run a task file's code in the calling process.
IN_PROCESS = {
    "sagekernel.tasks.modules": {"task_module", "import_task_module", "bound_sizes", "module_ints"},
    "sagekernel.tasks.inputs": {"instantiate", "call_forward", "call_init_inputs", "call_get_inputs",
                                "call_get_args", "call_input_groups"},
    "sagekernel.tasks.params": {"load_params"},
    "sagekernel.tasks.npukernelbench": {"import_operator"},
    "sagekernel.tasks.loader": {"load_task", "load_one"},
}
#: Who may import them, and why that is not `sage`'s process running untrusted code.
MAY_RUN_TASK_CODE = {
    # the functions behind the seam: each asks tasks/confine.py first, and runs the code here only
    # where no task child is open (inside a child, or a library caller: see ROUTED_CALLERS)
    "sagekernel.tasks.reference", "sagekernel.tasks.inputs", "sagekernel.tasks.sizegen",
    "sagekernel.tasks.npukb_rule",
    # loading: runs in the loading child (tasks/isolate.py); in-process only for the built-in
    # suite, which is sage's own code (tasks/suites.py)
    "sagekernel.tasks.modules", "sagekernel.tasks.loader", "sagekernel.tasks.metadata",
    "sagekernel.tasks.infer", "sagekernel.tasks.groups", "sagekernel.tasks.sizepolicy",
    "sagekernel.tasks.npukernelbench", "sagekernel.tasks.suites",
    # the children themselves
    "sagekernel.tasks.isolate_child", "sagekernel.tasks.confine_child",
    "sagekernel.harness.children.reference_runner",  # the reference timer, in the candidate sandbox
}
#: Modules outside tasks/ that call the seam's functions (which run the code here when no task
#: child is open), and what holds one open for them.
ROUTED_CALLERS = {
    "sagekernel.harness.trials": "evaluate/diagnose hold `confined` open",
    "sagekernel.harness.timing": "evaluate holds `confined` open",
    "sagekernel.harness.timed_recheck": "evaluate holds `confined` open",
    "sagekernel.harness.roofline": "evaluate holds `confined` open",
    "sagekernel.harness.correctness": "evaluate holds `confined` open",
    "sagekernel.targets.triton.target": "its runtime spec is built inside evaluate",
    "sagekernel.targets.triton.diagnose": "diagnose holds `confined` open",
    "sagekernel.targets.triton.contract": "init_signature opens `confined`",
    "sagekernel.targets.ascendc.calibrate": "calibrate_task opens `confined`",
    "sagekernel.harness.children.reference_runner": "a child in the candidate sandbox",
}
SEAM = {"sagekernel.tasks.reference", "sagekernel.tasks.inputs", "sagekernel.tasks.loader",
        "sagekernel.tasks.sizegen", "sagekernel.tasks.npukb_rule"}
#: The seam's functions that run task code (or ask the child to).
SEAM_FUNCTIONS = {"attrs_bound", "make_model", "init_parameters", "device_outputs", "reference_outputs",
                  "declared_precision_outputs", "init_arguments", "param_tensors", "reference_work",
                  "trial_tensors", "input_sets", "checked_outputs", "build_inputs", "held_out_plan",
                  "case_check"}


def _imports(src: Path = SRC) -> dict[str, set[tuple[str, str]]]:
    """Per module, the (module, name) pairs it imports by name (function-level imports included)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for path in (src / "sagekernel").rglob("*.py"):
        name = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        found = out.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {(node.module, a.name) for a in node.names}
                found |= {(f"{node.module}.{a.name}", "*") for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {(a.name, "*") for a in node.names}
    return out


def _runs_here(imports: dict[str, set[tuple[str, str]]]) -> set[str]:
    return {m for m, pairs in imports.items()
            if any(name in IN_PROCESS.get(mod, ()) or (name == "*" and mod in IN_PROCESS)
                   for mod, name in pairs)}


def _seam_callers(imports: dict[str, set[tuple[str, str]]]) -> set[str]:
    return {m for m, pairs in imports.items() if not m.startswith("sagekernel.tasks.")
            and any(mod in SEAM and name in SEAM_FUNCTIONS for mod, name in pairs)}


def test_only_the_children_and_the_seam_import_what_runs_task_code_in_process() -> None:
    imports = _imports()
    assert _runs_here(imports) - MAY_RUN_TASK_CODE == set(), "a new in-process path into task files"
    callers = _seam_callers(imports)
    assert callers - set(ROUTED_CALLERS) == set(), "a caller of the seam that holds no task child"
    assert not set(ROUTED_CALLERS) - callers, "a listed caller is gone: delete its line"


def test_the_guard_sees_a_new_in_process_path(tmp_path: Path) -> None:
    module = tmp_path / "sagekernel" / "agent" / "new_prompt.py"
    module.parent.mkdir(parents=True)
    module.write_text(textwrap.dedent("""
        def f(task):
            from sagekernel.tasks.modules import task_module
            from sagekernel.tasks.reference import make_model
            return task_module(task), make_model(task)
    """))
    imports = _imports(tmp_path)
    assert _runs_here(imports) == _seam_callers(imports) == {"sagekernel.agent.new_prompt"}
