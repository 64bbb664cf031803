"""The CPU target: C/C++ kernels (OpenMP and SIMD intrinsics allowed) behind the contract ABI."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sagekernel.harness.verdict import LintFinding
from sagekernel.targets.base import BuildResult
from sagekernel.targets.cpu import build as build_mod
from sagekernel.targets.cpu.contract import contract_text
from sagekernel.targets.cpu.lint import lint_source
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CpuKnowledge:
    quick_reference: str
    debugging_guide: str
    example: str


@lru_cache(maxsize=1)
def _knowledge() -> CpuKnowledge:
    def read(name: str) -> str:
        return (HERE / name).read_text(encoding="utf-8")

    return CpuKnowledge(read("quick_reference.md"), read("debugging_guide.md"), read("example.md"))


class CpuTarget:
    """`Target` + `NativeTarget` for plain CPUs."""

    name = "cpu"
    language = "c"

    def contract(self, task: Task) -> str:
        return contract_text(task)

    def knowledge(self) -> CpuKnowledge:
        return _knowledge()

    def lint(self, source: str, task: Task) -> list[LintFinding]:
        return lint_source(source, task)

    def seed_memory_path(self) -> Path:
        return HERE / "seed_memory.jsonl"

    def build(
        self, source: str, task: Task, workdir: Path, *, sandbox_kind: str = "auto", timeout_s: float = 60.0
    ) -> BuildResult:
        del task  # the ABI is fixed by the contract; nothing task-specific is needed to build
        return build_mod.build(source, workdir, sandbox_kind=sandbox_kind, timeout_s=timeout_s)

    def available(self) -> tuple[bool, str]:
        missing = [tool for tool in ("gcc", "nm", "readelf") if shutil.which(tool) is None]
        if missing:
            return False, f"missing tools: {', '.join(missing)} (install build-essential and binutils)"
        return True, "gcc found"
