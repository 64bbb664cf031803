"""Every hand-written Triton kernel of the built-in suite, run through the Triton runtime on the
interpreter (TRITON_INTERPRET=1, CPU tensors) and compared with the task's torch reference at the
task's tolerance: at the first (odd-sized) variant in the default run, at the default sizes under
`-m slow` (both: `python -m sagekernel.targets.devloop.selfcheck --target triton --device interpreter`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.compare import compare
from sagekernel.targets.devloop.direct import build_request, outputs_of, run_runtime
from sagekernel.tasks.inputs import reference_outputs
from sagekernel.tasks.loader import load_dir
from sagekernel.tasks.task import Task

pytest.importorskip("triton")

SUITE = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "tasks" / "suite"
RUNTIME = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "targets" / "triton" / "runtime.py"
TASKS = [t for t in load_dir(SUITE).tasks if "triton" in t.reference_kernels]


def test_at_least_fifteen_triton_kernels() -> None:
    assert len(TASKS) >= 15, [t.name for t in TASKS]


def _check(task: Task, sizes: dict[str, int]) -> None:
    source = task.reference_kernels["triton"].read_bytes()
    req = build_request(task, source, {"file": "kernel.py"}, sizes=sizes, seeds=(3, 4))
    frames, rc, err = run_runtime(RUNTIME, "interpreter", req)
    kinds = [f["kind"] for f, _ in frames]
    assert rc == 0 and kinds[-1] == "end", (kinds, err, frames)
    assert "load_error" not in kinds and "call_error" not in kinds, frames
    done = [f for f, _ in frames if f["kind"] == "done"]
    assert all(d["ns"] is None for d in done)  # the interpreter is never timed
    assert all(all(d["guards"]) and all(c == -1 for c in d["inputs_changed"]) for d in done)
    outs = outputs_of(frames, task, sizes)
    assert sorted(outs) == [0, 1]
    for call, tensors in outs.items():
        expected = reference_outputs(task, req.inputs[call], sizes)
        for spec, got, ref in zip(task.outputs, tensors, expected, strict=True):
            bad = compare(got, ref, task.atol, task.rtol, spec.dtype)
            assert bad is None, f"{task.name} {sizes} call {call} {spec.name}: {bad}"


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_kernel_matches_reference_at_an_odd_shape(task: Task) -> None:
    """The first variant: sizes that are not multiples of any block, where tail bugs show."""
    shapes = task.all_shapes()
    _check(task, shapes[1] if len(shapes) > 1 else shapes[0])


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_kernel_matches_reference_at_the_default_shape(task: Task) -> None:
    _check(task, task.all_shapes()[0])
