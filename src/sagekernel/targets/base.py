"""What the harness needs from a target beyond the `Target` protocol: building a candidate.

`Target` (protocols.py) covers what the model sees and the static lint. A target whose candidates
are native code also implements `NativeTarget.build`, which compiles in the sandbox and checks
the built object; the harness then loads and judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sagekernel.harness.verdict import LintFinding
from sagekernel.protocols import Target
from sagekernel.tasks.task import Task


@dataclass
class BuildResult:
    """The outcome of building one candidate."""

    ok: bool
    library: Path | None  # the built shared object (host path) when ok
    message: str  # for the model: trimmed compiler errors, or why the object was rejected
    info: dict[str, Any] = field(default_factory=dict)  # compiler, flags, language, seconds, sandbox
    findings: list[LintFinding] = field(default_factory=list)  # rejected symbols / sections
    stage: str = "compile"  # "compile" or "load" (object built but unusable) when not ok


@runtime_checkable
class NativeTarget(Target, Protocol):
    def build(
        self, source: str, task: Task, workdir: Path, *, sandbox_kind: str = "auto", timeout_s: float = 60.0
    ) -> BuildResult: ...
