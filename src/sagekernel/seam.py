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


#: Host wall time one timed call may take beyond its device events before the gap counts as work
#: the events did not see (`event_wall_mismatch`, harness/device_timing.py): a launch plus a
#: device-wide synchronise, per device family. Targets put their device's figure on RuntimeSpec.
#: - cuda 0.05 ms: a CUDA launch costs a few microseconds and cudaDeviceSynchronize's round trip
#:   some 10-20 (the figure the check was written with, about twice that sum).
#: - npu 0.2 ms: a torch_npu call goes through the task queue and aclnn's two-phase API; on a 910B2
#:   (CANN 8.5) the smallest calls of a custom kernel take 0.021 ms and torch_npu's einsum 0.079-0.081
#:   ms whatever the size (public figures: gitcode.com/zhuzemao/ops-transformer_8242,
#:   experimental/mhc/mhc_post/docs/performance.md), and MindStudio's "Host Bound" guide describes
#:   host dispatch outlasting the device work. 0.08 ms of dispatch plus the synchronise and the two
#:   queued event records, with the same margin as CUDA's. Not measured by this project: no NPU;
#:   scripts/npu_check.sh reports the measured gap on a board so the figure can be replaced.
LAUNCH_SYNC_MS: dict[str, float] = {"cuda": 0.05, "npu": 0.2}


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
    #: Device runtimes: the host cost of one launch plus a device-wide synchronise on this device
    #: (LAUNCH_SYNC_MS), which the event/wall plausibility check allows.
    launch_sync_ms: float = LAUNCH_SYNC_MS["cuda"]


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
