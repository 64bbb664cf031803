"""The verdict: what the harness concluded about one candidate (architecture.md `Verdict`).

The stage names say exactly where a candidate stopped. `message` is written for the model:
the compiler's first errors, the first mismatching index with expected/actual values, the
timeout. The parent process builds every verdict; nothing the candidate prints decides it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from sagekernel.seam import LintFinding as LintFinding


class Stage(str, Enum):
    """The stage a candidate failed at, or OK if it passed everything that was run."""

    PARSE = "parse"  # the reply had no usable kernel source
    LINT = "lint"  # a static rule rejected the source
    COMPILE = "compile"
    LOAD = "load"  # the built object could not be loaded / symbol missing
    RUNTIME = "runtime"  # crash, signal, resource limit, timeout while running
    CORRECTNESS = "correctness"  # ran but produced wrong outputs (or touched inputs)
    INTEGRITY = "integrity"  # the candidate tampered with its runtime (syscalls, FP environment, channel)
    TIMING = "timing"  # correct, but the timing run failed or was inconsistent
    BROKEN_TASK = "broken_task"  # a null-kernel canary passed: the task cannot tell right from wrong
    OK = "ok"


@dataclass
class Verdict:
    stage: Stage
    message: str
    compiled: bool = False
    correct: bool = False
    candidate_ms: float | None = None  # median latency of the candidate
    reference_ms: float | None = None  # median latency of the PyTorch reference, same run
    speedup: float | None = None  # reference_ms / candidate_ms (median of per-round ratios)
    timing: dict[str, Any] = field(default_factory=dict)  # method and its parameters
    build: dict[str, Any] = field(default_factory=dict)  # compiler, flags, seconds
    lint: list[LintFinding] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # e.g. "speedup_audit"
    durations_s: dict[str, float] = field(default_factory=dict)  # build / correctness / timing
    sandbox: dict[str, Any] = field(default_factory=dict)  # layer used (bwrap/unshare/process), seccomp
    checks: dict[str, Any] = field(default_factory=dict)  # trials run (shape, distribution, seed), canaries
    #: Level of evidence reached: "static" (built/lowered only), "emulated" (functional on an
    #: emulator or interpreter) or "hardware" (ran on the device). seam.Evidence.
    evidence: str = "static"
    #: Quarantined: an implausible or integrity-flagged timing that a fresh re-measurement did not
    #: clear. A suspect verdict never counts as a success (credit, distillation, consolidation).
    suspect: bool = False
    quarantine: list[str] = field(default_factory=list)  # why it is (or was) quarantined

    @property
    def ok(self) -> bool:
        return self.stage is Stage.OK

    @property
    def counts_as_success(self) -> bool:
        """Correct and not quarantined: the only verdicts that may earn credit or be distilled."""
        return self.ok and self.correct and not self.suspect

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stage"] = self.stage.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        fields = dict(data)
        fields["stage"] = Stage(fields["stage"])
        fields["lint"] = [LintFinding(**f) for f in fields.get("lint", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in fields.items() if k in known})

    def feedback(self) -> str:
        """The verdict as one block of text for the model's next prompt."""
        if self.ok:
            parts = [
                f"PASSED: correct on every test shape. Candidate {self.candidate_ms:.4f} ms vs "
                f"reference {self.reference_ms:.4f} ms (speedup {self.speedup:.2f}x)."
                if self.candidate_ms and self.reference_ms and self.speedup
                else "PASSED: correct."
            ]
        else:
            parts = [f"FAILED at stage '{self.stage.value}': {self.message}"]
        for finding in self.lint:
            where = f" (line {finding.line})" if finding.line else ""
            parts.append(f"- lint {finding.rule}{where}: {finding.reason}")
        return "\n".join(parts)
