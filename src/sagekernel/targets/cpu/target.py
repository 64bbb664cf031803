"""The CPU target: C/C++ kernels (OpenMP and SIMD intrinsics allowed) behind the contract ABI."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sagekernel.candidate import Candidate
from sagekernel.seam import LintFinding
from sagekernel.targets.base import (
    BuildResult,
    DeviceInfo,
    Evidence,
    FileSpec,
    Knowledge,
    RuntimeSpec,
    load_knowledge,
)
from sagekernel.targets.cpu import build as build_mod
from sagekernel.targets.cpu import diagnose as diagnose_mod
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL, abi_kinds, contract_text
from sagekernel.targets.cpu.lint import lint_source
from sagekernel.targets.cpu.runtime import runtime_spec
from sagekernel.targets.diagnostics import DiagnosticProbe, TargetDiagnostics
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent


class CpuTarget:
    """The Target for plain CPUs: one C or C++ file, built with gcc/g++, run by the native driver."""

    name = "cpu"
    language = "c"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("cpu", Evidence.HARDWARE, timed=True)]

    def available(self, device: str = "cpu") -> tuple[bool, str]:
        if device != "cpu":
            return False, f"the cpu target runs on device 'cpu' only, not {device!r}"
        missing = [tool for tool in ("gcc", "g++") if shutil.which(tool) is None]
        if missing:
            return False, f"missing tools: {', '.join(missing)} (install build-essential)"
        return True, "gcc and g++ found"

    def files(self, task: Task) -> list[FileSpec]:
        del task
        return [
            FileSpec(
                "kernel.c",
                "c",
                "kernel",
                f'the kernel: defines `{KERNEL_SYMBOL}` (C, or C++ with extern "C")',
            )
        ]

    def contract(self, task: Task) -> str:
        return contract_text(task)

    def knowledge(self) -> Knowledge:
        return load_knowledge(HERE)

    def lint(self, candidate: Candidate, task: Task) -> list[LintFinding]:
        if not re.search(rf"\b{KERNEL_SYMBOL}\s*\(", candidate.main):
            return [
                LintFinding(
                    "contract",
                    f"no function named `{KERNEL_SYMBOL}` in the submitted source; "
                    "implement exactly the contract's signature",
                )
            ]
        return lint_source(candidate.main, task)

    def seed_memory_path(self) -> Path:
        return HERE / "seed_memory.jsonl"

    def build(
        self,
        candidate: Candidate,
        task: Task,
        workdir: Path,
        *,
        device: str = "cpu",
        sandbox_kind: str = "auto",
        timeout_s: float = 60.0,
    ) -> BuildResult:
        del task, device  # the ABI is fixed by the contract; nothing task-specific is needed to build
        return build_mod.build(candidate.main, workdir, sandbox_kind=sandbox_kind, timeout_s=timeout_s)

    def diagnose(
        self,
        candidate: Candidate,
        task: Task,
        probe: DiagnosticProbe,
        workdir: Path,
        *,
        device: str = "cpu",
        sandbox_kind: str = "auto",
        timeout_s: float = 60.0,
    ) -> TargetDiagnostics:
        """A warnings + AddressSanitizer/UBSan debug build run once on the probe (cpu/diagnose.py)."""
        del task, device
        return diagnose_mod.diagnose(candidate.main, probe, workdir, sandbox_kind=sandbox_kind,
                                     timeout_s=timeout_s)

    def runtime(self, built: BuildResult, task: Task, device: str = "cpu") -> RuntimeSpec:
        del device
        spec = runtime_spec(abi_kinds(task))
        return RuntimeSpec(
            **{**spec.__dict__, "artifact": built.library, "artifact_record": {"symbol": KERNEL_SYMBOL}}
        )
