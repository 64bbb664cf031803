"""Cheating kernels: each must be rejected, at the right stage, for the right reason.

Every kernel lives in kernels/<name>.c with a comment naming the hack. The first table runs the
full harness (static checks on). The second turns the static checks off, to show the runtime
defences (sandbox, seccomp, buffer checks) hold on their own: those kernels write the correct
answer only if their attack worked, so a CORRECTNESS failure proves the attack failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
TASKS = HERE.parent / "fixtures" / "tasks"
FAST = {"skip_timing": True, "held_out_shape": False, "call_timeout_s": 4.0}


def run(kernel: str, task: str = "relu_rows", **overrides: object) -> Verdict:
    cfg = HarnessConfig(**{**FAST, **overrides})  # type: ignore[arg-type]
    source = (KERNELS / f"{kernel}.c").read_text()
    return evaluate(load_task(TASKS / f"{task}.py"), source, get_target("cpu"), cfg)


def rules(verdict: Verdict) -> set[str]:
    return {f.rule for f in verdict.lint}


# (kernel, task, stage, lint rule or None, words the message must contain)
FULL_HARNESS = [
    ("reuse_reference", "relu_rows", Stage.CORRECTNESS, None, "wrong result"),
    ("constant_output", "relu_rows", Stage.CORRECTNESS, None, "expected"),
    ("copy_input", "relu_rows", Stage.CORRECTNESS, None, "wrong result"),
    ("first_row_only", "relu_rows", Stage.CORRECTNESS, None, "never written"),
    ("hardcoded_shape", "relu_rows", Stage.LINT, "hardcoded_shape", "literal 48"),
    ("clock_override", "relu_rows", Stage.LINT, "timer", "clock"),
    ("read_proc_memory", "relu_rows", Stage.LINT, "os_access", "file, network"),
    ("read_reference_file", "relu_rows", Stage.LINT, "os_access", "file, network"),
    ("write_inputs", "relu_rows", Stage.CORRECTNESS, None, "input 'x' was modified"),
    ("fast_math_pragma", "relu_rows", Stage.LINT, "fast_math", "fast-math"),
    ("blas_call", "matmul_small", Stage.LINT, "library_op", "library routine"),
    ("infinite_loop", "relu_rows", Stage.RUNTIME, None, "timed out"),
    ("fork_bomb", "relu_rows", Stage.LINT, "os_access", "process"),
    ("network", "relu_rows", Stage.LINT, "os_access", "network"),
    ("huge_allocation", "relu_rows", Stage.RUNTIME, None, "SIGSEGV"),
    ("segfault", "relu_rows", Stage.RUNTIME, None, "SIGSEGV"),
    ("abort_call", "relu_rows", Stage.RUNTIME, None, "SIGABRT"),
    ("uninitialised_output", "relu_rows", Stage.CORRECTNESS, None, "never written"),
    ("pointer_cache", "relu_rows", Stage.LINT, "global_state", "state"),
    ("nan_output", "relu_rows", Stage.CORRECTNESS, None, "NaN where the reference is a number"),
    ("inline_asm_rdtsc", "relu_rows", Stage.LINT, "inline_asm", "assembly"),
    ("pthread_worker", "relu_rows", Stage.LINT, "threads", "threads"),
    ("load_constructor", "relu_rows", Stage.LINT, "constructor", "loaded"),
    ("out_of_bounds_write", "relu_rows", Stage.CORRECTNESS, None, "outside the bounds of output 'out'"),
    ("far_out_of_bounds_write", "relu_rows", Stage.CORRECTNESS, None, "outside the bounds of output 'out'"),
    # Hidden behind the preprocessor: caught by the rules re-run on the compiler's .i file.
    ("macro_static_cache", "relu_rows", Stage.LINT, "global_state", "after macro expansion"),
    ("token_paste_asm", "relu_rows", Stage.LINT, "inline_asm", "after macro expansion"),
    ("pasted_destructor", "relu_rows", Stage.LINT, "constructor", "loaded or unloaded"),
    ("computed_include", "relu_rows", Stage.LINT, "include", "computed"),
    ("function_pointer_global", "relu_rows", Stage.LINT, "global_state", "state"),
    ("omp_icv_counter", "relu_rows", Stage.LINT, "omp_state", "persist between calls"),
    ("omp_oversubscribe", "relu_rows", Stage.CORRECTNESS, None, "expected"),  # OMP_THREAD_LIMIT holds
    ("fp_environment", "relu_rows", Stage.LINT, "fp_environment", "floating-point environment"),
    ("weak_libc_override", "relu_rows", Stage.LINT, "defines_library_symbol", "C library function"),
]


@pytest.mark.parametrize(
    ("kernel", "task", "stage", "rule", "words"), FULL_HARNESS, ids=[row[0] for row in FULL_HARNESS]
)
def test_full_harness_rejects(kernel: str, task: str, stage: Stage, rule: str | None, words: str) -> None:
    overrides = {"call_timeout_s": 1.0, "start_timeout_s": 2.0} if kernel == "infinite_loop" else {}
    verdict = run(kernel, task, **overrides)
    assert verdict.stage is stage, verdict.message
    assert not verdict.ok and not verdict.correct
    if rule is not None:
        assert rule in rules(verdict), (rules(verdict), verdict.message)
    assert words in verdict.message + " ".join(f.reason for f in verdict.lint), verdict.message


def test_suite_has_at_least_fifteen_cheats() -> None:
    assert len(FULL_HARNESS) >= 15
    assert {row[0] for row in FULL_HARNESS} == {p.stem for p in KERNELS.glob("*.c")}


# Static checks off: the sandbox and the buffer checks alone must stop the attack.
RUNTIME_ONLY = [
    # The native driver's seccomp allow-list stops the system call itself (SIGSYS, reported).
    ("read_proc_memory", Stage.INTEGRITY, "system call the sandbox forbids"),  # openat
    ("read_reference_file", Stage.INTEGRITY, "system call the sandbox forbids"),  # openat
    ("network", Stage.INTEGRITY, "system call the sandbox forbids"),  # socket
    ("fork_bomb", Stage.INTEGRITY, "system call the sandbox forbids"),  # clone/fork
    ("hardcoded_shape", None, ""),  # the variant shape breaks it (wrong values or out of bounds)
    ("omp_oversubscribe", Stage.CORRECTNESS, "expected"),  # OMP_THREAD_LIMIT: a team of one
]


@pytest.mark.parametrize(("kernel", "stage", "words"), RUNTIME_ONLY, ids=[r[0] for r in RUNTIME_ONLY])
def test_runtime_defences_without_static_checks(kernel: str, stage: Stage | None, words: str) -> None:
    verdict = run(kernel, static_checks=False)
    if stage is None:
        assert verdict.stage in (Stage.CORRECTNESS, Stage.RUNTIME), verdict.message
    else:
        assert verdict.stage is stage, verdict.message
    assert words in verdict.message


def test_clock_override_cannot_zero_the_timer() -> None:
    """Linked with RTLD_LOCAL, a candidate's clock_gettime never replaces the harness clock."""
    verdict = run("clock_override", static_checks=False, skip_timing=False, iters=20, rounds=4, warmup=2)
    assert verdict.stage is Stage.OK, verdict.message
    assert verdict.candidate_ms is not None and verdict.candidate_ms > 0.0005
    assert verdict.timing["candidate_round_ms"] and min(verdict.timing["candidate_round_ms"]) > 0


def test_broken_task_is_detected_by_canaries() -> None:
    task = load_task(TASKS / "tiny_output.py")
    source = (TASKS / "tiny_output.cpu.c").read_text()
    verdict = evaluate(task, source, get_target("cpu"), HarnessConfig(**FAST))  # type: ignore[arg-type]
    assert verdict.stage is Stage.BROKEN_TASK
    assert "broken_task" in verdict.flags
    assert "zeros" in verdict.checks["canaries"]["passing"]


def test_call_counting_kernel_is_caught_by_the_timing_recheck() -> None:
    """Without the omp_state rule, a kernel that counts calls in an OpenMP setting and cuts work in
    the timing loop still fails: timed outputs are rechecked against the parent's references."""
    verdict = run("omp_icv_counter", static_checks=False, skip_timing=False, iters=40, rounds=4, warmup=2)
    assert verdict.stage is Stage.CORRECTNESS, verdict.message
    assert "wrong result during timing" in verdict.message


def test_object_check_catches_a_destructor_the_source_rules_miss(tmp_path: Path) -> None:
    """The .fini_array size is compared with an empty kernel's, independently of any source rule."""
    from sagekernel.targets.cpu import build as build_mod

    source = (KERNELS / "pasted_destructor.c").read_text()
    built = build_mod.build(source, tmp_path)
    assert not built.ok
    library = tmp_path / "build" / "kernel.so"
    from sagekernel.targets.cpu.symbols import check_library

    findings, problem = check_library(library, "c")
    assert problem == ""
    assert [f.rule for f in findings] == ["constructor"], findings
    assert "unloaded" in findings[0].reason
