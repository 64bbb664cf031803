"""Device pinning (issue 24, audit T1): a worker given a device slot, or `sage run --device cuda:N`,
and every child it starts -- sandboxed ones included, whose environment the sandbox rebuilds --
see only that card; two workers get disjoint cards; the verdict records what its runtimes were
given. No GPU or NPU needed: what is checked is the environment each process receives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sagekernel import sandbox
from sagekernel.devices import (
    DeviceError,
    DeviceSlot,
    parse_devices,
    selection_env,
    split_device,
)
from sagekernel.experiment import scheduler
from sagekernel.targets.base import BuildResult, RuntimeSpec
from sagekernel.tasks.loader import load_task

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TASK = HERE / "fixtures" / "tasks" / "relu_rows.py"
PINS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_VISIBLE_DEVICES")


@pytest.fixture(autouse=True)
def unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from a process pinned to nothing (whatever the machine running it sets)."""
    for var in PINS:
        monkeypatch.delenv(var, raising=False)


def pin(monkeypatch: pytest.MonkeyPatch, slot: DeviceSlot) -> None:
    for key, value in slot.env().items():
        monkeypatch.setenv(key, value)


def test_a_device_number_pins_one_card_and_a_plain_name_pins_nothing() -> None:
    assert split_device("cuda") == ("cuda", None)
    assert split_device(None) == (None, None)
    assert split_device("cuda:1") == ("cuda", DeviceSlot("cuda", (1,)))
    assert split_device("gpu:0") == ("cuda", DeviceSlot("cuda", (0,)))
    assert split_device("npu:3") == ("npu", DeviceSlot("npu", (3,)))
    for bad in ("interpreter:0", "cpu-twin:1", "cuda:x", "cuda:-1", "npu:", "cuda:0,1"):
        with pytest.raises(DeviceError):
            split_device(bad)


def test_a_cuda_slot_numbers_cards_as_nvidia_smi_does() -> None:
    """CUDA's own default order is fastest first: without PCI_BUS_ID, cuda:1 could be another card."""
    env = DeviceSlot("cuda", (1,)).env()
    assert env == {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert DeviceSlot("npu", (2,)).env() == {"ASCEND_RT_VISIBLE_DEVICES": "2"}
    environ = {"CUDA_VISIBLE_DEVICES": "1", "PATH": "/bin", "ASCEND_VISIBLE_DEVICES": "0", "HOME": "/h"}
    assert selection_env(environ) == {"CUDA_VISIBLE_DEVICES": "1", "ASCEND_VISIBLE_DEVICES": "0"}


def _runtime_specs(tmp_path: Path) -> dict[str, RuntimeSpec]:
    """Each device target's real runtime spec (what the harness hands the sandbox)."""
    from sagekernel.targets.ascendc.target import AscendCTarget
    from sagekernel.targets.cuda.target import CudaTarget
    from sagekernel.targets.triton.target import TritonTarget

    task = load_task(TASK)
    lib = tmp_path / "k.so"
    lib.write_bytes(b"\0")
    module = tmp_path / "kernel.py"
    module.write_text("pass\n")
    workdir = tmp_path / "wd"
    (workdir / "ext").mkdir(parents=True)
    ext = workdir / "ext" / "sage_ext.so"
    ext.write_bytes(b"\0")
    ascend_built = BuildResult(True, "built", {"module": ext}, {"plan": {"workdir": str(workdir)}})
    return {
        "cuda": CudaTarget().runtime(BuildResult(True, "built", {"library": lib}), task, "cuda"),
        "triton-cuda": TritonTarget().runtime(BuildResult(True, "built", {"module": module}), task, "cuda"),
        "triton-npu": TritonTarget().runtime(BuildResult(True, "built", {"module": module}), task, "npu"),
        "ascendc-npu": AscendCTarget().runtime(ascend_built, task, "npu"),
    }


def _child_env(spec: RuntimeSpec, kind: str, scratch: Path) -> dict[str, str]:
    """The environment the sandbox gives a runtime started from `spec` (both layers' spelling)."""
    cmd = sandbox.SandboxCommand(argv=list(spec.argv), ro_binds=list(spec.ro_binds), env=dict(spec.env),
                                 device_nodes=list(spec.device_nodes))
    argv, env, _ = sandbox.command_line(cmd, kind=kind, limits=sandbox.Limits(wall_s=1), result_fd=9,
                                        scratch_dir=scratch)
    if kind != "bwrap":
        return env
    return {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}


@pytest.mark.parametrize("kind", ["bwrap", "process"])
def test_every_device_runtime_is_given_the_workers_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        kind: str) -> None:
    """cuda, triton (cuda and npu) and ascendc: the runtime's environment carries the slot of the
    process that starts it, in either sandbox layer; two slots give two disjoint cards."""
    specs = _runtime_specs(tmp_path)
    seen: dict[str, list[str]] = {name: [] for name in specs}
    for index in (0, 1):
        for name, spec in specs.items():
            kind_of_card = "npu" if name.endswith("npu") else "cuda"
            monkeypatch.undo()
            for var in PINS:
                monkeypatch.delenv(var, raising=False)
            pin(monkeypatch, DeviceSlot(kind_of_card, (index,)))
            env = _child_env(spec, kind, tmp_path)
            var = "ASCEND_RT_VISIBLE_DEVICES" if kind_of_card == "npu" else "CUDA_VISIBLE_DEVICES"
            seen[name].append(env[var])
            if kind_of_card == "cuda":
                assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert all(cards == ["0", "1"] for cards in seen.values()), seen


def test_an_unpinned_process_gives_its_children_no_selection(tmp_path: Path) -> None:
    env = _child_env(_runtime_specs(tmp_path)["cuda"], "process", tmp_path)
    assert not set(PINS) & set(env)


_WORKER = """
import json, os, sys
from pathlib import Path
from sagekernel import sandbox
from sagekernel.devices import pin_current_process, slot_from_label
pin_current_process(slot_from_label(sys.argv[1]))  # as experiment/worker.py main() does
probe = ("import os; os.write(int(os.environ['SAGE_RESULT_FD']), "
         "os.environ.get('CUDA_VISIBLE_DEVICES', 'unset').encode())")
cmd = sandbox.SandboxCommand(argv=[sys.executable, "-I", "-S", "-c", probe], python=True)
res = sandbox.run(cmd, kind=sandbox.best_kind("auto"), limits=sandbox.Limits(wall_s=60),
                  scratch_dir=Path(sys.argv[2]))
print(json.dumps({"worker": os.environ.get("CUDA_VISIBLE_DEVICES"), "child": res.channel.decode(),
                  "kind": res.kind, "tail": res.output_tail}))
"""


def test_two_workers_and_their_sandboxed_children_see_disjoint_cards(tmp_path: Path) -> None:
    """Two real worker processes started as the scheduler starts them (its environment, then the
    worker's own pinning), each starting a real sandboxed child: each child sees its worker's card."""
    views = []
    for n, slot in enumerate(parse_devices(["cuda:0,1"])):
        scratch = tmp_path / f"w{n}"
        scratch.mkdir()
        env = scheduler._env(slot)
        env["PYTHONPATH"] = f"{SRC}:{env['PYTHONPATH']}"
        out = subprocess.run([sys.executable, "-c", _WORKER, slot.label, str(scratch)], env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        views.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert [v["worker"] for v in views] == ["0", "1"], views
    assert [v["child"] for v in views] == ["0", "1"], views


RELU = (
    "#include <stdint.h>\n"
    "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {\n"
    "  for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0 ? x[i] : 0;\n}\n"
)


def test_the_verdict_records_the_card_its_runtimes_were_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from sagekernel.harness.config import HarnessConfig
    from sagekernel.harness.evaluate import evaluate
    from sagekernel.targets import get_target

    task = load_task(TASK)
    pin(monkeypatch, DeviceSlot("cuda", (1,)))
    pinned = evaluate(task, RELU, get_target("cpu"), HarnessConfig(skip_timing=True))
    assert pinned.correct, pinned.message
    assert pinned.sandbox["device_selection"]["CUDA_VISIBLE_DEVICES"] == "1"
    for var in PINS:
        monkeypatch.delenv(var, raising=False)
    free = evaluate(task, RELU, get_target("cpu"), HarnessConfig(skip_timing=True))
    assert free.correct and "device_selection" not in free.sandbox


@pytest.mark.slow  # one interpreter evaluation: half a minute on a loaded machine
def test_the_runtime_itself_reports_the_card_it_was_started_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through the shared device loop (devloop/, which the cuda and triton runtimes run):
    the triton runtime on the interpreter, in the sandbox, reports the selection it was started
    with, and the verdict keeps it beside what the harness gave (no GPU needed for the interpreter)."""
    pytest.importorskip("triton")
    from sagekernel.harness.config import HarnessConfig
    from sagekernel.harness.evaluate import evaluate
    from sagekernel.targets import get_target

    suite = SRC / "sagekernel" / "tasks" / "suite" / "level2"
    pin(monkeypatch, DeviceSlot("cuda", (1,)))
    cfg = HarnessConfig(skip_timing=True, held_out_shape=False, canaries=False, fresh_process_recheck=False,
                        trials=1, variant_trials=0, coverage_trials=False, call_timeout_s=30.0)
    verdict = evaluate(load_task(suite / "softmax.py"), (suite / "softmax.triton.py").read_text(),
                       get_target("triton"), cfg, device="interpreter")
    assert verdict.correct, verdict.message
    want = {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert want.items() <= verdict.sandbox["device_view"].items()  # as the runtime saw its environment
    assert verdict.sandbox["device_selection"] == want  # as the harness gave it


def test_a_device_number_on_the_command_line_is_checked_before_anything_runs(tmp_path: Path) -> None:
    """`--device cpu:0`: a CPU has no cards to pin; `--device cuda:x` is not a number. Each refused
    with one line naming the option (the valid forms pin the process: pinned_device)."""
    import contextlib
    import io

    from sagekernel.cli import main

    def sage(*argv: str) -> tuple[int, str]:
        err = io.StringIO()
        old = sys.argv
        sys.argv = ["sage", *argv]
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                main()
            return 0, err.getvalue()
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue()
        finally:
            sys.argv = old

    kernel = tmp_path / "k.c"
    kernel.write_text(RELU)
    for bad, why in (("cpu:0", "cuda:N and npu:N"), ("cuda:x", "not a device number")):
        for argv in (["eval", str(TASK), str(kernel)], ["run", "--workspace", str(tmp_path / "ws")]):
            code, err = sage(*argv, "--device", bad)
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --device"), err
            assert why in err, err


def test_pinned_device_pins_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from sagekernel.cli.options import pinned_device

    assert pinned_device("npu:2") == "npu"
    import os

    assert os.environ["ASCEND_RT_VISIBLE_DEVICES"] == "2"
    assert pinned_device("cuda") == "cuda" and "CUDA_VISIBLE_DEVICES" not in os.environ
