"""Cheating kernels, second generation (issue 9's audit classes), each written fresh.

kernels_v2/c<class>_<name>.c: each file's header names the hack and the defence expected to
stop it. Every row goes through `evaluate` with the static checks ON (a kernel that needs the
static checks off to reach its attack would prove nothing about the harness as shipped). Rows
marked as holes are cheats the harness accepts today: they are `xfail(strict=True)` with the
reason (HOLES), so they document the hole and turn red the day it is fixed (then drop the mark).

Classes: 1 timing reuses state, 2 sharing a process with the timer / libc, 3 state hidden where
the rules do not look, 4 load-time and hidden code, 5 rules spelled around, 6 tolerance and
coverage, 7 implausible speedups.
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
KERNELS = HERE / "kernels_v2"
TASKS = HERE.parent / "fixtures" / "tasks"
FAST = {"skip_timing": True, "held_out_shape": False, "call_timeout_s": 4.0}
#: Small timing runs: 2 warm-up calls, 4 rounds of 10 calls (each round rechecks 2, drawn after it).
TIMED = {"skip_timing": False, "iters": 40, "rounds": 4, "warmup": 2}
SUSPECT = "suspect"  # stage ok, but quarantined: never a success
DURING_TIMING = "wrong result during timing"


#: Cheats the harness accepts today (or rejects for the wrong reason), by kernel; none at present.
#: Fixed on this branch (their marks dropped): the writable driver GOT (c1_choose_checked_calls,
#: c2_clock_got_hook), mprotect/mmap-at-an-address re-opening it (c2_got_hook_after_mprotect), a
#: death by SIGSYS read as a crash (c2_blocked_sigsys_open, c2_libc_walk_thread), fast-math /
#: line-marker spellings (c5_*); issue 20: the rewritten timestamp (c2_stack_timestamp_rewrite),
#: which no longer gains anything since the parent's accounting is the clock.
PROBABILISTIC_HOLES: set[str] = set()
HOLES: dict[str, str] = {}
#: The cheat may be accepted, but only at the time its process was accounted: no round is charged
#: less than the kernel-accounted run time of its calls (harness/charging.py), so a forged or
#: steered clock gains nothing.
NO_GAIN = "no_gain"


@dataclass(frozen=True)
class Case:
    kernel: str
    task: str
    expect: Stage | str  # a Stage, or SUSPECT, or "not_success" (any verdict that earns no credit)
    words: str  # must appear in the message or a lint reason
    rule: str | None = None  # lint rule that must be among the findings
    timed: bool = False
    threads: int = 1  # the thread budget (the driver's seccomp filter differs above 1)

    @property
    def id(self) -> str:
        return self.kernel if self.threads == 1 else f"{self.kernel}-threads{self.threads}"


CASES = [
    # 1 -- timing reuses state
    Case("c1_position_cache_in_driver", "relu_rows", Stage.CORRECTNESS, DURING_TIMING, timed=True),
    # the driver no longer draws (nor imports getrandom): the hook finds no slot, the kernel never
    # learns a draw and computes every call
    Case("c1_choose_checked_calls", "matmul_small", NO_GAIN, "", timed=True),
    # 2 -- sharing a process with the timer and libc
    Case("c2_clock_got_hook", "matmul_small", Stage.RUNTIME, "SIGSEGV", timed=True),
    # the claim of 60% is never the charge: the kernel-accounted run time between the parent's
    # stops is (the 1% claim of c7 is also flagged timer_mismatch)
    Case("c2_stack_timestamp_rewrite", "matmul_small", NO_GAIN, "", timed=True),
    Case("c2_got_hook_after_mprotect", "matmul_small", Stage.INTEGRITY, "system call the sandbox forbids",
         timed=True),
    Case("c2_got_hook_munmap_refill", "matmul_small", Stage.INTEGRITY, "system call the sandbox forbids",
         timed=True),
    Case("c2_got_hook_munmap_refill", "matmul_small", Stage.INTEGRITY, "system call the sandbox forbids",
         timed=True, threads=2),
    Case("c2_libc_walk_open_file", "relu_rows", Stage.INTEGRITY, "system call the sandbox forbids"),
    Case("c2_got_hook_after_mprotect", "matmul_small", Stage.INTEGRITY, "system call the sandbox forbids",
         threads=2),
    Case("c2_blocked_sigsys_open", "relu_rows", Stage.INTEGRITY, "system call the sandbox forbids"),
    Case("c2_libc_walk_thread", "relu_rows", Stage.INTEGRITY, "system call the sandbox forbids"),
    # 3 -- state hidden where the rules do not look
    Case("c3_stdout_file_counter", "relu_rows", Stage.CORRECTNESS, DURING_TIMING, timed=True),
    Case("c3_leaked_heap_chain", "relu_rows", Stage.CORRECTNESS, "not deterministic"),
    Case("c3_errno_call_counter", "relu_rows", Stage.CORRECTNESS, "never written"),
    Case("c3_deep_stack_counter", "relu_rows", Stage.CORRECTNESS, DURING_TIMING, timed=True),
    # the source parse stops the `section` attribute first; the object check is tested in v1
    Case("c3_const_array_in_data_section", "relu_rows", Stage.LINT, "section", rule="constructor"),
    # 4 -- load-time and hidden code
    Case("c4_cxx11_constructor_attribute", "relu_rows", Stage.LINT, "loaded", rule="constructor"),
    Case("c4_named_init_function", "relu_rows", Stage.LINT, "DT_INIT", rule="constructor"),
    Case("c4_target_clones", "relu_rows", Stage.LINT, "ifunc resolver", rule="target_attribute"),
    Case("c4_init_array_cxx11_section", "relu_rows", Stage.LINT, "init_array", rule="constructor"),
    Case("c4_ifunc_cxx11_resolver", "relu_rows", Stage.LINT, "ifunc", rule="constructor"),
    # 5 -- rules spelled around
    Case("c5_fast_math_second_attribute", "relu_rows", Stage.LINT, "fast-math", rule="fast_math"),
    Case("c5_fast_math_cxx11_attribute", "relu_rows", Stage.LINT, "fast-math", rule="fast_math"),
    Case("c5_line_marker_pragma", "relu_rows", Stage.LINT, "line marker", rule="line_marker"),
    Case("c5_pragma_operator_fast_math", "relu_rows", Stage.LINT, "after macro expansion", rule="fast_math"),
    Case("c5_parenthesised_setcsr", "relu_rows", Stage.LINT, "floating-point environment",
         rule="fp_environment"),
    # 6 -- tolerance and coverage (tasks with the tolerance they state)
    Case("c6_layer_norm_bf16", "layer_norm_rows", Stage.CORRECTNESS, "wrong result"),
    Case("c6_layer_norm_wrong_eps", "layer_norm_rows", Stage.CORRECTNESS, "wrong result"),
    Case("c6_layer_norm_single_pass", "layer_norm_rows", Stage.CORRECTNESS, "wrong result"),
    Case("c6_softmax_no_max", "softmax_rows", Stage.CORRECTNESS, "wrong result"),
    Case("c6_softmax_float_sum_fast_exp", "softmax_rows", Stage.CORRECTNESS, "wrong result"),
    # 7 -- implausible speedups
    Case("c7_forged_done_frame", "relu_rows", Stage.INTEGRITY, "broke the protocol"),
    Case("c7_guess_unchecked_skip", "relu_rows", Stage.CORRECTNESS, DURING_TIMING, timed=True),
    Case("c7_stack_timestamp_implausible", "matmul_small", SUSPECT, "timer_mismatch", timed=True),
]


def run(case: Case) -> Verdict:
    cfg = HarnessConfig(**{**FAST, **(TIMED if case.timed else {}), "threads": case.threads})
    source = (KERNELS / f"{case.kernel}.c").read_text()
    return evaluate(load_task(TASKS / f"{case.task}.py"), source, get_target("cpu"), cfg)


def _param(case: Case) -> object:
    hole = HOLES.get(case.id, "")
    # A hole the harness catches only sometimes (timing noise) cannot be a strict xfail.
    strict = case.id not in PROBABILISTIC_HOLES
    marks = [pytest.mark.xfail(strict=strict, reason=hole)] if hole else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_v2_cheat_is_rejected_for_its_reason(case: Case) -> None:
    verdict = run(case)
    text = verdict.message + " " + " ".join(f.reason for f in verdict.lint)
    if case.expect == NO_GAIN:
        assert_no_gain(verdict, case.threads)
        return
    assert not verdict.counts_as_success, f"accepted: {verdict.message} (speedup {verdict.speedup})"
    if case.expect == SUSPECT:
        assert verdict.stage is Stage.OK and verdict.suspect, verdict.message
        assert verdict.quarantine, verdict.quarantine
    elif isinstance(case.expect, Stage):
        assert verdict.stage is case.expect, verdict.message
        assert not verdict.correct or case.expect is Stage.LINT
    if case.rule is not None:
        assert case.rule in {f.rule for f in verdict.lint}, (verdict.lint, verdict.message)
    assert case.words in text, text


def assert_no_gain(verdict: Verdict, threads: int) -> None:
    """Rejected, or charged in every round at least what its process was accounted."""
    if not verdict.counts_as_success:
        return
    rounds = verdict.timing.get("accounting") or []
    assert rounds, verdict.timing
    for r in rounds:
        assert r["charged_ns"] >= r["kernel_ns"] / max(1, threads), r


def test_every_v2_kernel_is_in_the_table_and_every_class_has_two() -> None:
    assert {c.kernel for c in CASES} == {p.stem for p in KERNELS.glob("*.c")}
    for cls in range(1, 8):
        assert sum(c.kernel.startswith(f"c{cls}_") for c in CASES) >= 2, cls


@pytest.mark.parametrize("task", ["layer_norm_rows", "softmax_rows"])
def test_honest_kernels_of_the_new_tasks_pass(task: str) -> None:
    """The class-6 rejections mean something only if an honest kernel passes the same task."""
    source = (TASKS / f"{task}.cpu.c").read_text()
    verdict = evaluate(load_task(TASKS / f"{task}.py"), source, get_target("cpu"), HarnessConfig(**FAST))
    assert verdict.ok and verdict.correct, verdict.message


def test_naive_softmax_fails_every_time() -> None:
    """Coverage does not depend on luck: every evaluation has the distributions that break it."""
    for _ in range(3):
        verdict = run(Case("c6_softmax_no_max", "softmax_rows", Stage.CORRECTNESS, ""))
        assert verdict.stage is Stage.CORRECTNESS, verdict.message
