"""The Triton adversarial suite (adversarial/*.py), judged by the production path: `harness.evaluate`
on the interpreter, in the sandbox, never a side path.

Each file names its hack and what rejects it after `EXPECT:`: `lint r1, r2` -- the static rules
report (at least) those, and `evaluate` stops there; `runtime x` -- with the static checks off, the
run-time defences alone reject it, and `x` is the verdict's flag (output_cache, tensor_subclass,
output_alias, runtime_integrity, background_threads, host_compute, ...) or its stage
(correctness, runtime). The harness judges what the runtime reports (harness/runtime_evidence.py)
and reads the inputs back from the runtime's memory itself (harness/runtime_memory.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.targets import get_target
from sagekernel.targets.triton.lint import lint_source
from sagekernel.tasks.loader import load_task

pytest.importorskip("triton")

HERE = Path(__file__).resolve().parent
SOFTMAX = HERE.parents[1] / "src" / "sagekernel" / "tasks" / "suite" / "level2" / "softmax.py"
KERNELS = sorted((HERE / "adversarial").glob("*.py"))
#: One runtime process per evaluation: enough to show each defence, small enough for 2 cores.
FAST = {
    "skip_timing": True,
    "held_out_shape": False,
    "canaries": False,
    "fresh_process_recheck": False,
    "trials": 2,
    "variant_trials": 0,
    "call_timeout_s": 30.0,
}


def expectations(path: Path) -> tuple[set[str], set[str]]:
    text = path.read_text()
    m = re.search(r"EXPECT: (.*?)\"\"\"", text, re.S)
    assert m, f"{path.name} names no EXPECT"
    lint, runtime = set(), set()
    for part in m.group(1).split(";"):
        kind, _, rest = part.strip().partition(" ")
        names = {r.strip() for r in rest.split(",") if r.strip()}
        (lint if kind == "lint" else runtime).update(names)
    return lint, runtime


def judged(path: Path, **overrides: object) -> Verdict:
    cfg = HarnessConfig(**{**FAST, **overrides})  # type: ignore[arg-type]
    return evaluate(load_task(SOFTMAX), path.read_text(), get_target("triton"), cfg, device="interpreter")


def test_suite_size() -> None:
    assert len(KERNELS) >= 25
    assert all("HACK:" in k.read_text() for k in KERNELS)


@pytest.mark.parametrize("path", KERNELS, ids=[k.stem for k in KERNELS])
def test_lint_rejects_for_the_stated_reason(path: Path) -> None:
    lint, runtime = expectations(path)
    found = {f.rule for f in lint_source(path.read_text())}
    if lint:
        assert lint <= found, f"{path.name}: expected {lint}, lint found {found}"
    else:
        assert runtime, f"{path.name}: neither lint nor runtime expectation"


LINT_CASES = [k for k in KERNELS if expectations(k)[0]]


@pytest.mark.parametrize("path", LINT_CASES, ids=[k.stem for k in LINT_CASES])
def test_evaluate_stops_at_the_lint(path: Path) -> None:
    verdict = judged(path)
    assert verdict.stage is Stage.LINT and not verdict.counts_as_success, verdict.message
    assert expectations(path)[0] <= {f.rule for f in verdict.lint}


RUNTIME_CASES = [k for k in KERNELS if expectations(k)[1]]
#: The default run judges one kernel of each main class end to end; `-m slow` judges them all.
QUICK = {"laundered_tensor_name", "caches_outputs", "self_restoring_forgery"}


def _runtime_case(path: Path) -> None:
    _, wanted = expectations(path)
    verdict = judged(path, static_checks=False)
    assert not verdict.counts_as_success, f"{path.name}: accepted ({verdict.message})"
    got = {verdict.stage.value, *verdict.flags}
    assert wanted & got, (
        f"{path.name}: expected {wanted}, got {verdict.stage.value} {verdict.flags}: {verdict.message}"
    )


@pytest.mark.parametrize("path", [k for k in RUNTIME_CASES if k.stem in QUICK], ids=lambda k: k.stem)
def test_runtime_defence_rejects_without_the_lint(path: Path) -> None:
    _runtime_case(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", [k for k in RUNTIME_CASES if k.stem not in QUICK], ids=lambda k: k.stem)
def test_runtime_defence_rejects_without_the_lint_all(path: Path) -> None:
    _runtime_case(path)
