"""The Triton target: KernelBench-style Python modules with @triton.jit kernels.

Devices: `interpreter` (TRITON_INTERPRET=1 on CPU tensors: real execution, correctness only),
`cuda` (an NVIDIA GPU: correctness and timing), `npu` (triton-ascend with torch_npu on an
Ascend NPU: correctness and timing).
"""

from __future__ import annotations

from pathlib import Path

from sagekernel import sandbox
from sagekernel.candidate import Candidate
from sagekernel.devices import gpu_device_nodes, npu_device_nodes
from sagekernel.seam import LAUNCH_SYNC_MS, LintFinding
from sagekernel.targets.base import (
    BuildResult,
    DeviceInfo,
    Evidence,
    FileSpec,
    Knowledge,
    RuntimeSpec,
    load_knowledge,
)
from sagekernel.targets.device_host import (
    DEVICE_LOOP_EVIDENCE,
    RUNTIME_MOUNT,
    cuda_available,
    find_module,
    npu_available,
    stage_runtime,
)
from sagekernel.targets.diagnostics import DiagnosticProbe, TargetDiagnostics
from sagekernel.targets.triton import build as build_mod
from sagekernel.targets.triton import diagnose as diagnose_mod
from sagekernel.targets.triton.contract import KERNEL_FILE, contract_text
from sagekernel.targets.triton.lint import lint_source
from sagekernel.tasks.reference import init_arguments
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent
#: This target's files in the staged runtime folder (device_host.stage_runtime adds the shared loop).
RUNTIME_FILES = (HERE / "runtime.py", HERE / "interpreter_model.py", HERE / "warm_kernel.py")
DEVICES = (
    DeviceInfo("interpreter", Evidence.EMULATED, timed=False),
    DeviceInfo("cuda", Evidence.HARDWARE, timed=True),
    DeviceInfo("npu", Evidence.HARDWARE, timed=True),
)


class TritonTarget:
    name = "triton"
    language = "python"

    def devices(self) -> list[DeviceInfo]:
        return list(DEVICES)

    def available(self, device: str) -> tuple[bool, str]:
        try:
            if device not in {d.name for d in DEVICES}:
                return False, f"unknown device {device!r} for triton (interpreter, cuda, npu)"
            if not find_module("triton"):
                return False, "triton is not installed (pip install '.[triton]')"
            if device == "interpreter":
                return True, "triton importable; runs under TRITON_INTERPRET=1 on CPU tensors (not timed)"
            if device == "cuda":
                return cuda_available()
            ok, reason = npu_available()
            if ok and not find_module("triton.backends.ascend"):
                return False, "torch_npu found but triton-ascend is not installed"
            return ok, reason
        except Exception as exc:
            return False, f"availability check failed: {type(exc).__name__}: {exc}"

    def files(self, task: Task) -> list[FileSpec]:
        del task
        return [
            FileSpec(
                KERNEL_FILE,
                "python",
                "kernel",
                "@triton.jit kernels and class ModelNew(nn.Module) whose forward launches them",
            )
        ]

    def contract(self, task: Task) -> str:
        return contract_text(task)

    def knowledge(self) -> Knowledge:
        return load_knowledge(HERE)

    def lint(self, candidate: Candidate, task: Task) -> list[LintFinding]:
        return lint_source(_source(candidate), task)

    def seed_memory_path(self) -> Path:
        return HERE / "seed_memory.jsonl"

    def build(
        self,
        candidate: Candidate,
        task: Task,
        workdir: Path,
        *,
        device: str,
        sandbox_kind: str = "auto",
        timeout_s: float = 120.0,
    ) -> BuildResult:
        return build_mod.build(
            _source(candidate), task, workdir, device=device, sandbox_kind=sandbox_kind, timeout_s=timeout_s
        )

    def diagnose(
        self,
        candidate: Candidate,
        task: Task,
        probe: DiagnosticProbe,
        workdir: Path,
        *,
        device: str = "interpreter",
        sandbox_kind: str = "auto",
        timeout_s: float = 120.0,
    ) -> TargetDiagnostics:
        """One interpreter call on the probe: traceback and device_print output (triton/diagnose.py).
        Runs on the interpreter whatever `device` is: its traceback names the candidate's line."""
        del device
        return diagnose_mod.diagnose(_source(candidate), task, probe, workdir, sandbox_kind=sandbox_kind,
                                     timeout_s=timeout_s)

    def runtime(self, built: BuildResult, task: Task, device: str) -> RuntimeSpec:
        """The runtime reads the module from the request blob (artifact key "module"); the harness
        puts `built.artifacts["module"]`'s bytes there (docs/target_seam.md, triton/runtime.py)."""
        argv = [*sandbox.python_argv(f"{RUNTIME_MOUNT}/runtime.py"), "--device", device]
        for site in sandbox.site_paths():
            argv += ["--site", site]
        # TF32 for float32 tl.dot is the GPU default; named so the interpreter's model (TF32 operand
        # rounding, triton/interpreter_model.py) and a GPU run agree whatever the host's env says.
        env = {
            "TRITON_CACHE_DIR": "/tmp/triton-cache",
            "TRITON_DEFAULT_FP_FUSION": "1",
            "TRITON_F32_DEFAULT": "tf32",
        }
        nodes: list[str] = []
        if device == "interpreter":
            env["TRITON_INTERPRET"] = "1"
        elif device == "cuda":
            nodes = gpu_device_nodes()
        elif device == "npu":
            nodes = npu_device_nodes()
        return RuntimeSpec(
            argv=argv,
            ro_binds=[(str(stage_runtime(RUNTIME_FILES)), RUNTIME_MOUNT)],
            env=env,
            python=True,
            device_nodes=nodes,
            address_space_bytes=None if device != "interpreter" else 16 << 30,
            reference_in_process=device != "interpreter",
            name=f"triton-{device}",
            artifact=built.artifacts.get("module"),
            # ModelNew gets the task's init arguments; Model and ModelNew are seeded alike (KernelBench)
            artifact_record={"file": KERNEL_FILE, "init": init_arguments(task, dict(task.sizes)), "seed": 0,
                             "bf16": "refuse"},
            artifact_for=lambda sizes: {"init": init_arguments(task, sizes)},
            reports=DEVICE_LOOP_EVIDENCE | {"host_guard"},
            launch_sync_ms=LAUNCH_SYNC_MS["npu" if device == "npu" else "cuda"],
        )


def _source(candidate: Candidate | str) -> str:
    if isinstance(candidate, str):
        return candidate
    return candidate.files.get(KERNEL_FILE, candidate.main)
