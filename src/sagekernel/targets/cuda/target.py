"""The CUDA target: CUDA C++ compiled by nvcc into a library with an extern "C" launcher, run and
timed on an NVIDIA GPU only (the build and its symbol checks run wherever nvcc is installed)."""

from __future__ import annotations

from pathlib import Path

from sagekernel import sandbox
from sagekernel.candidate import Candidate
from sagekernel.devices import gpu_device_nodes
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
from sagekernel.targets.cuda import build as build_mod
from sagekernel.targets.cuda.contract import KERNEL_FILE, contract_text
from sagekernel.targets.cuda.lint import lint_source
from sagekernel.targets.device_host import (
    DEVICE_LOOP_EVIDENCE,
    RUNTIME_MOUNT,
    cuda_available,
    stage_runtime,
)
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent


class CudaTarget:
    name = "cuda"
    language = "cuda"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("cuda", Evidence.HARDWARE, timed=True)]

    def available(self, device: str) -> tuple[bool, str]:
        try:
            if device != "cuda":
                return False, f"the cuda target runs on the cuda device only, not {device!r}"
            if build_mod.nvcc_path() is None:
                return False, "nvcc is not installed (CUDA toolkit)"
            return cuda_available()
        except Exception as exc:
            return False, f"availability check failed: {type(exc).__name__}: {exc}"

    def files(self, task: Task) -> list[FileSpec]:
        del task
        return [
            FileSpec(KERNEL_FILE, "cuda", "kernel", 'CUDA kernels and the extern "C" sage_launch launcher')
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
        device: str = "cuda",
        sandbox_kind: str = "auto",
        timeout_s: float = 120.0,
    ) -> BuildResult:
        del task, device  # the ABI is fixed by the contract; one architecture (sm_90)
        return build_mod.build(_source(candidate), workdir, sandbox_kind=sandbox_kind, timeout_s=timeout_s)

    def runtime(self, built: BuildResult, task: Task, device: str) -> RuntimeSpec:
        """The harness puts `built.artifacts["library"]`'s bytes in the blob (artifact key "lib")."""
        del task
        argv = [*sandbox.python_argv(f"{RUNTIME_MOUNT}/runtime.py"), "--device", device]
        for site in sandbox.site_paths():
            argv += ["--site", site]
        return RuntimeSpec(
            argv=argv,
            ro_binds=[(str(stage_runtime((HERE / "runtime.py",))), RUNTIME_MOUNT)],
            env={},
            python=True,
            device_nodes=gpu_device_nodes(),
            address_space_bytes=None,
            reference_in_process=True,
            name="cuda-native",
            artifact=built.library,
            artifact_record={"symbol": "sage_launch"},
            reports=DEVICE_LOOP_EVIDENCE,
            launch_sync_ms=LAUNCH_SYNC_MS["cuda"],
        )


def _source(candidate: Candidate | str) -> str:
    if isinstance(candidate, str):
        return candidate
    return candidate.files.get(KERNEL_FILE, candidate.main)
