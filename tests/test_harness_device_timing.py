"""The device-timing protocol (harness/device_timing.py) through a real sandboxed runtime that times
candidate and reference in one process, as the Triton, CUDA and Ascend C runtimes do on a device:
no GPU needed, the host clock stands in for events."""

from __future__ import annotations

from pathlib import Path

from sagekernel import sandbox
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.device_timing import event_wall_mismatch
from sagekernel.harness.timing import run_timing
from sagekernel.harness.verdict import Stage
from sagekernel.seam import LAUNCH_SYNC_MS
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


def spec(
    tmp_path: Path, source: str, *extra: str, launch_sync_ms: float = LAUNCH_SYNC_MS["cuda"]
) -> RuntimeSpec:
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
        launch_sync_ms=launch_sync_ms,
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


def test_the_plausibility_allowance_is_the_devices_launch_cost() -> None:
    """A 10 us NPU kernel whose call costs 0.15 ms of host wall time (launch through torch_npu's
    queue + synchronise) is plausible on an NPU and would be flagged with CUDA's allowance; a wall
    time half a millisecond over the events is flagged on either; a long kernel never is."""
    npu, cuda = LAUNCH_SYNC_MS["npu"], LAUNCH_SYNC_MS["cuda"]
    assert not event_wall_mismatch(0.01, 0.16, npu)
    assert event_wall_mismatch(0.01, 0.16, cuda)
    assert event_wall_mismatch(0.01, 0.51, npu)
    assert not event_wall_mismatch(1.0, 1.5, npu) and not event_wall_mismatch(1.0, 1.5, cuda)
    assert npu > cuda


def test_the_ascendc_and_triton_npu_runtimes_carry_the_npu_allowance(tmp_path: Path) -> None:
    from sagekernel.targets.base import BuildResult
    from sagekernel.targets.cuda.target import CudaTarget
    from sagekernel.targets.triton.target import TritonTarget

    task = load_task(TASK)
    module = tmp_path / "kernel.py"
    module.write_text("pass\n")
    built = BuildResult(True, "built", {"module": module, "library": module})
    assert TritonTarget().runtime(built, task, "npu").launch_sync_ms == LAUNCH_SYNC_MS["npu"]
    assert TritonTarget().runtime(built, task, "cuda").launch_sync_ms == LAUNCH_SYNC_MS["cuda"]
    assert CudaTarget().runtime(built, task, "cuda").launch_sync_ms == LAUNCH_SYNC_MS["cuda"]
    # ascendc: targets_ascendc/test_project_plans.py::test_runtime_carries_device_slot_logs_and_host_files


def test_an_npu_launch_cost_is_accepted_and_unseen_work_flagged(tmp_path: Path) -> None:
    """Through the real protocol: every call's wall time 150 us over its events (an NPU's launch +
    synchronise) passes under the NPU allowance; the side-stream symptom is still flagged."""
    task = load_task(TASK)
    npu = LAUNCH_SYNC_MS["npu"]
    out = run_timing(task, spec(tmp_path, GOOD, "--launch-us=150", launch_sync_ms=npu), CFG,
                     sandbox.best_kind("auto"), tmp_path / "t")
    assert out.stage is Stage.OK and "event_wall_mismatch" not in out.flags, (out.message, out.flags)
    assert out.timing["launch_sync_allowance_ms"] == npu
    out = run_timing(task, spec(tmp_path, GOOD, "--slow-wall", launch_sync_ms=npu), CFG,
                     sandbox.best_kind("auto"), tmp_path / "t2")
    assert out.stage is Stage.OK and "event_wall_mismatch" in out.flags, (out.message, out.flags)
