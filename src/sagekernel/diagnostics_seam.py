"""The diagnostics seam: what a target returns when asked to localise a failure (docs/mcp.md).

A target that can diagnose implements

    diagnose(candidate, task, probe, workdir, *, device, sandbox_kind, timeout_s) -> TargetDiagnostics

(found with `getattr`, like `files`). The harness (harness/diagnose.py) builds the probe -- the
inputs of one small shape and output buffers prefilled with the harness's sentinels -- because it
owns inputs and references; the target builds and runs the candidate its own way (a sanitizer
build, an interpreter run) inside the sandbox, and hands back the sections of its report and the
raw output bytes, which the harness compares with the reference (the first mismatch locator).
Nothing the candidate prints decides anything: diagnostics inform the model, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: What a diagnostic run's log contributes at most (head and tail): the candidate may print without end.
MAX_LOG_BYTES = 256 << 10


def read_log(path: Path) -> str:
    """A child's log, its first and last MAX_LOG_BYTES / 2 when longer."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_LOG_BYTES + 1)
        if len(data) > MAX_LOG_BYTES:
            fh.seek(-(MAX_LOG_BYTES // 2), 2)
            data = data[: MAX_LOG_BYTES // 2] + b"\n... (output cut) ...\n" + fh.read()
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class ProbeTensor:
    """One buffer of the probe call, in ABI order (inputs, parameters, outputs)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes  # raw little-endian elements (outputs: the sentinel fill)
    role: str  # "input" | "param" | "output"


@dataclass(frozen=True)
class DiagnosticProbe:
    """One small call of the kernel: its buffers and its scalars (sizes, then attributes)."""

    shape_label: str
    sizes: dict[str, int]
    tensors: list[ProbeTensor]
    scalars: list[tuple[str, str, int | float]]  # (name, "i64" | "f32", value) in ABI order
    param_seed: int = 0  # the seed the reference Model's parameters were drawn with (ModelNew alike)

    @property
    def outputs(self) -> list[ProbeTensor]:
        return [t for t in self.tensors if t.role == "output"]


@dataclass
class DiagnosticSection:
    title: str  # e.g. "compiler warnings (-Wall -Wextra)"
    text: str


@dataclass
class SourceLocation:
    path: str
    line: int
    function: str = ""


@dataclass
class TargetDiagnostics:
    """What the target's tools said about one candidate on the probe."""

    tools: list[str] = field(default_factory=list)  # what ran, e.g. ["gcc -Wall -Wextra", "asan+ubsan"]
    sections: list[DiagnosticSection] = field(default_factory=list)
    fault: SourceLocation | None = None  # where the sanitizer / traceback points in the candidate
    fault_kind: str = ""  # e.g. "heap-buffer-overflow", "IndexError"
    fault_buffer: str = ""  # the probe buffer the fault touched, when the tool names it
    outputs: list[bytes] | None = None  # raw output bytes when the debug run finished
    ran: bool = False  # the debug run completed without a fault
