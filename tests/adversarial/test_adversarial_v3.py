"""Cheating kernels, third generation (issue 20: the candidate's process holds nothing trusted).

kernels_v3/v3_<name>.c: one new kernel per class the red team used against the CPU driver: code
outside the call (a SIGSEGV handler doing the work later), forging the clock (an unreadable vDSO),
a writable result channel (a forged stop frame closing the window early), steering the recheck
draw through errno, and work outside the timed window (a thread that keeps running). Each header
names the hack and the defence expected. Every row goes through `evaluate`, static checks on,
the path production uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels_v3"
TASKS = HERE.parent / "fixtures" / "tasks"
FAST = {"skip_timing": True, "held_out_shape": False, "call_timeout_s": 4.0}
TIMED = {"skip_timing": False, "iters": 40, "rounds": 4, "warmup": 2}
#: Accepted at most at the time its process ran: every round charged at least the kernel-accounted
#: time of its calls plus what it ran outside them (harness/charging.py), and no speedup left.
NO_GAIN = "no_gain"
FORBIDDEN = "system call the sandbox forbids"


@dataclass(frozen=True)
class Case:
    kernel: str
    expect: Stage | str
    words: str
    timed: bool = False
    threads: int = 1

    @property
    def id(self) -> str:
        return self.kernel if self.threads == 1 else f"{self.kernel}-threads{self.threads}"


CASES = [
    Case("v3_sigsegv_deferred_work", Stage.INTEGRITY, FORBIDDEN),
    Case("v3_sigsegv_deferred_work", Stage.INTEGRITY, FORBIDDEN, threads=2),
    Case("v3_unreadable_vdso_clock", Stage.INTEGRITY, FORBIDDEN),
    Case("v3_unreadable_vdso_clock", Stage.INTEGRITY, FORBIDDEN, threads=2),
    Case("v3_forged_stop_frame", Stage.INTEGRITY, "broke the protocol"),
    Case("v3_errno_steered_skip", Stage.CORRECTNESS, "wrong result during timing", timed=True),
    Case("v3_background_thread_work", NO_GAIN, "", timed=True, threads=2),
]


def run(case: Case) -> Verdict:
    cfg = HarnessConfig(**{**FAST, **(TIMED if case.timed else {}), "threads": case.threads})
    source = (KERNELS / f"{case.kernel}.c").read_text()
    return evaluate(load_task(TASKS / "relu_rows.py"), source, get_target("cpu"), cfg)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_v3_cheat_is_rejected_for_its_reason(case: Case) -> None:
    verdict = run(case)
    assert verdict.stage is not Stage.LINT, verdict.lint  # the attack reaches the runtime defences
    if case.expect == NO_GAIN:
        if verdict.counts_as_success:
            rounds = verdict.timing.get("accounting") or []
            assert rounds, verdict.timing
            for r in rounds:
                assert r["charged_ns"] >= (r["kernel_ns"] + r["outside_excess_ns"]) / case.threads, r
            assert verdict.speedup is not None and verdict.speedup < 1.0, verdict.message
        else:
            assert verdict.suspect or verdict.stage in (Stage.CORRECTNESS, Stage.INTEGRITY), verdict.message
        return
    assert not verdict.counts_as_success, f"accepted: {verdict.message} (speedup {verdict.speedup})"
    assert verdict.stage is case.expect, verdict.message
    assert case.words in verdict.message, verdict.message


def test_every_v3_kernel_is_in_the_table() -> None:
    assert {c.kernel for c in CASES} == {p.stem for p in KERNELS.glob("*.c")}
