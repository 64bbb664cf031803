"""The Triton adversarial suite (adversarial/*.py): each file names its hack and what rejects it.

`EXPECT: lint r1, r2` -- the AST lint reports (at least) those rules. `runtime <check>` -- the
hack is invisible to a static rule (or also checked at run time): the file is run through the
Triton runtime on the interpreter with the lint skipped, and the runtime's report carries the
evidence the harness must reject it on (docs/target_seam.md; the harness judges, the runtime
reports): the checks are `sagekernel.targets.devloop.evidence.CHECKS`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sagekernel.targets.devloop import evidence
from sagekernel.targets.devloop.direct import build_request, run_runtime
from sagekernel.targets.triton.lint import lint_source
from sagekernel.tasks.loader import load_task

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src" / "sagekernel"
RUNTIME = SRC / "targets" / "triton" / "runtime.py"
SOFTMAX = SRC / "tasks" / "suite" / "level2" / "softmax.py"
KERNELS = sorted((HERE / "adversarial").glob("*.py"))


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


def test_suite_size() -> None:
    assert len(KERNELS) >= 12
    assert all("HACK:" in k.read_text() for k in KERNELS)


@pytest.mark.parametrize("path", KERNELS, ids=[k.stem for k in KERNELS])
def test_lint_rejects_for_the_stated_reason(path: Path) -> None:
    lint, runtime = expectations(path)
    found = {f.rule for f in lint_source(path.read_text())}
    if lint:
        assert lint <= found, f"{path.name}: expected {lint}, lint found {found}"
    else:
        assert runtime, f"{path.name}: neither lint nor runtime expectation"


RUNTIME_CASES = [k for k in KERNELS if expectations(k)[1]]


@pytest.mark.parametrize("path", RUNTIME_CASES, ids=[k.stem for k in RUNTIME_CASES])
def test_runtime_reports_the_evidence(path: Path) -> None:
    pytest.importorskip("triton")
    _, checks = expectations(path)
    task = load_task(SOFTMAX)
    sizes = {"B": 8, "D": 64}
    req = build_request(task, path.read_bytes(), {"file": "kernel.py"}, sizes=sizes, seeds=(5, 6))
    frames, rc, err = run_runtime(RUNTIME, "interpreter", req)
    kinds = [f["kind"] for f, _ in frames]
    assert "end" in kinds, (kinds, rc, err)
    for check in checks:
        assert evidence.present(check, frames, task, req, sizes), f"{path.name}: no {check} evidence"
