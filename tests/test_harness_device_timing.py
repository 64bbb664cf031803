"""The device-timing protocol (harness/device_timing.py) through a real sandboxed runtime that times
candidate and reference in one process, as the Triton, CUDA and Ascend C runtimes do on a device:
no GPU needed, the host clock stands in for events."""

from __future__ import annotations

from pathlib import Path

from sagekernel import sandbox
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.timing import run_timing
from sagekernel.harness.verdict import Stage
from sagekernel.targets.base import RuntimeSpec
from sagekernel.tasks.loader import load_task

HERE = Path(__file__).resolve().parent
RUNTIME = HERE / "fixtures" / "runtimes"
CHILDREN = Path(sandbox.__file__).resolve().parent / "harness" / "children"
TASK = HERE / "fixtures" / "tasks" / "relu_rows.py"
GOOD = (
    "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        return torch.clamp(x, min=0)\n"
)
STALE = (
    "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.last = None\n    def forward(self, x):\n        if self.last is None:\n"
    "            self.last = torch.clamp(x, min=0)\n        return self.last\n"
)


def spec(tmp_path: Path, source: str, *extra: str) -> RuntimeSpec:
    module = tmp_path / "kernel.py"
    module.write_text(source)
    argv = [
        *sandbox.python_argv("/box/rt/host_timed_runtime.py"),
        "/box/children",
        *sandbox.site_paths(),
        *extra,
    ]
    return RuntimeSpec(
        argv=argv,
        ro_binds=[(str(RUNTIME), "/box/rt"), (str(CHILDREN), "/box/children")],
        python=True,
        address_space_bytes=None,
        reference_in_process=True,
        name="host-timed",
        artifact=module,
    )


CFG = HarnessConfig(iters=12, rounds=3, warmup=2)


def test_the_device_protocol_times_both_sides_in_one_process(tmp_path: Path) -> None:
    task = load_task(TASK)
    out = run_timing(task, spec(tmp_path, GOOD), CFG, sandbox.best_kind("auto"), tmp_path / "t")
    assert out.stage is Stage.OK, out.message
    assert out.timing["method"] == "device_events_interleaved_in_process"
    assert out.candidate_ms and out.reference_ms and out.speedup
    assert out.timing["distinct_input_sets"] == out.timing["warmup"] + out.timing["iters"]
    assert "event_wall_mismatch" not in out.flags


def test_a_stale_output_is_caught_by_the_device_recheck(tmp_path: Path) -> None:
    task = load_task(TASK)
    out = run_timing(task, spec(tmp_path, STALE), CFG, sandbox.best_kind("auto"), tmp_path / "t")
    assert out.stage is Stage.CORRECTNESS and "wrong result during timing" in out.message, out.message


def test_wall_time_far_above_event_time_is_flagged(tmp_path: Path) -> None:
    task = load_task(TASK)
    out = run_timing(
        task, spec(tmp_path, GOOD, "--slow-wall"), CFG, sandbox.best_kind("auto"), tmp_path / "t"
    )
    assert out.stage is Stage.OK and "event_wall_mismatch" in out.flags, (out.message, out.flags)
