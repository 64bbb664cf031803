"""The records of the target seam (docs/target_seam.md): what a target declares and returns, and what
the harness reads from it.

This module imports nothing from sagekernel, so the harness and the targets both stand on it and
neither imports the other for a record. The `Target` protocol itself is in protocols.py. A target
owns what the model is told, its static rules, building, and a runtime that runs inside the
sandboxed child; the harness owns seeds, inputs, references, comparison, integrity checks, the
timing protocol and the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LintFinding:
    """One static-rule violation, with the rule's one-line reason."""

    rule: str
    reason: str
    line: int | None = None
    excerpt: str = ""


class Evidence(str, Enum):
    """How far a verdict's evidence reaches (targets.md §6)."""

    STATIC = "static"  # parsed, lowered or compiled; nothing ran
    EMULATED = "emulated"  # functional on an emulator or interpreter (never timed)
    HARDWARE = "hardware"  # ran on the device itself


@dataclass(frozen=True)
class FileSpec:
    """One file the model writes for this target and task."""

    path: str  # relative path, as the reply protocol names it
    language: str  # fenced-code language ("c", "python", "cpp", ...)
    role: str = "kernel"  # kernel | host | tiling | model | ...
    description: str = ""


@dataclass(frozen=True)
class DeviceInfo:
    """One device a target can run on."""

    name: str  # "cpu", "interpreter", "cuda", "npu", "cpu-twin", ...
    evidence: Evidence  # what a run there proves
    timed: bool  # whether the harness may time on it


@dataclass
class BuildResult:
    """The outcome of building one candidate."""

    ok: bool
    message: str  # for the model: trimmed compiler errors, or why the object was rejected
    artifacts: dict[str, Path] = field(default_factory=dict)  # "library" -> host path, ...
    info: dict[str, Any] = field(default_factory=dict)  # compiler, flags, language, seconds, sandbox
    findings: list[LintFinding] = field(default_factory=list)  # rejected symbols / sections
    stage: str = "compile"  # "compile", "load" (built but unusable) or "lint" when not ok

    @property
    def library(self) -> Path | None:
        return self.artifacts.get("library")


@dataclass(frozen=True)
class RuntimeSpec:
    """How the harness starts a target's runtime inside the sandbox (the wire: docs/target_seam.md)."""

    argv: list[str]  # paths as the sandbox sees them
    ro_binds: list[tuple[str, str]] = field(default_factory=list)  # (host path, sandbox path)
    env: dict[str, str] = field(default_factory=dict)
    python: bool = False  # a Python runtime: bind the interpreter prefix, venv and site dirs
    device_nodes: list[str] = field(default_factory=list)  # e.g. /dev/nvidia0; only for that device
    address_space_bytes: int | None = 4 << 30  # RLIMIT_AS; None for GPU drivers' huge reservations
    reference_in_process: bool = False  # device targets time the reference in the same process
    name: str = ""  # shown in verdicts ("cpu-native-driver", "triton-interpreter", ...)
    #: The built artifact the runtime loads. The harness ships its bytes inside the request
    #: (`Plan.artifact_blob`), so the runtime needs no mount of the build directory.
    artifact: Path | None = None
    artifact_record: dict[str, Any] = field(default_factory=dict)  # JSON side: e.g. {"symbol": ...}
    #: Optional: the artifact record for one shape (e.g. ModelNew's init arguments at those sizes).
    artifact_for: Callable[[dict[str, int]], dict[str, Any]] | None = None
    #: Evidence the runtime promises to report in its frames (e.g. "integrity", "threads",
    #: "out_meta", "host_guard"; targets/device_host.py): the harness requires each promised item
    #: and judges it (harness/runs.py). Empty for runtimes that report only the wire's basics.
    reports: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Knowledge:
    """What the model is told about a target (`TargetKnowledge`): three markdown files."""

    quick_reference: str
    debugging_guide: str
    example: str


@lru_cache(maxsize=8)
def load_knowledge(folder: Path) -> Knowledge:
    """quick_reference.md, debugging_guide.md and example.md from a target's knowledge folder."""

    def read(name: str) -> str:
        return (folder / name).read_text(encoding="utf-8")

    return Knowledge(read("quick_reference.md"), read("debugging_guide.md"), read("example.md"))


__all__ = [
    "BuildResult",
    "DeviceInfo",
    "Evidence",
    "FileSpec",
    "Knowledge",
    "LintFinding",
    "RuntimeSpec",
    "load_knowledge",
]
