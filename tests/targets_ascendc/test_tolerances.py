"""Per-task NPU tolerances (audit T4): declared in the task file's SAGE_ASCENDC block, read by
AscendCTarget.tolerances, and used by the harness's own comparator for every ascendc verdict
(harness/tolerances.py); no second comparison rule exists (NPUKernelBench's is tasks/npukb_rule.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sagekernel.harness.compare import compare
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.tolerances import judged_task
from sagekernel.harness.trials import plan_trials
from sagekernel.targets.ascendc import calibrate
from sagekernel.targets.ascendc.settings import task_settings
from sagekernel.targets.ascendc.target import AscendCTarget
from sagekernel.tasks.task import Task

#: One trial on the default shape: what the comparator sees is the point, not the coverage.
FEW = HarnessConfig(trials=1, variant_trials=0, held_out_shape=False, coverage_trials=False)


def with_block(task: Task, tmp_path: Path, block: str) -> Task:
    path = tmp_path / f"{task.name}.py"
    path.write_text(task.source_path.read_text() + f"\nSAGE_ASCENDC = {block}\n")
    return replace(task, source_path=path)


def test_declared_tolerances_are_read_and_bad_ones_reported(tasks, tmp_path):
    s = task_settings(with_block(tasks["softmax"], tmp_path, '{"atol": 1e-2, "rtol": 0.02}'))
    assert (s.atol, s.rtol, s.problems) == (1e-2, 0.02, ())
    for bad in ('{"atol": -1}', '{"atol": float("nan")}', '{"rtol": True}', '{"atol": "1e-3"}'):
        s = task_settings(with_block(tasks["softmax"], tmp_path, bad))
        assert s.atol is None and s.rtol is None, bad
    s = task_settings(with_block(tasks["softmax"], tmp_path, '{"compare": "elementwise_both"}'))
    assert s.problems and "npukb_rule" in s.problems[0]


def test_the_target_declares_only_what_the_task_file_says(tasks, tmp_path):
    softmax = tasks["softmax"]
    assert AscendCTarget().tolerances(softmax) is None
    assert judged_task(AscendCTarget(), softmax) is softmax
    only_atol = with_block(softmax, tmp_path, '{"atol": 1e-3}')
    assert AscendCTarget().tolerances(only_atol) == (1e-3, softmax.rtol)


def test_the_harness_comparator_judges_by_the_npu_tolerances(tasks, tmp_path):
    """Comparator level: an output 0.5% off (as an NPU's exp might be) fails softmax under its CPU
    tolerances (1e-6 / 1e-4) and passes under the declared NPU ones (1e-2 / 1e-2), through the
    harness's own trials (their element-wise slack derives from the judged atol) and compare()."""
    softmax = tasks["softmax"]
    declared = with_block(softmax, tmp_path, '{"atol": 1e-2, "rtol": 1e-2}')
    for task, should_pass in ((judged_task(AscendCTarget(), declared), True), (softmax, False)):
        trial = plan_trials(task, FEW).trials[0]
        expected = trial.expected[0]
        npu_like = (expected.double() * 1.005).to(expected.dtype)
        mism = compare(npu_like, expected, trial.tolerance(0), task.rtol, "float32")
        assert (mism is None) is should_pass, (task.atol, task.rtol, mism)
    assert judged_task(AscendCTarget(), declared).atol == 1e-2


def test_calibration_judges_the_reference_by_the_same_tolerances(tasks, tmp_path, monkeypatch):
    real = calibrate.device_reference

    def drifting(task, trial, device):
        return [o * 1.005 for o in real(task, trial, device)]

    monkeypatch.setattr(calibrate, "device_reference", drifting)
    assert not calibrate.calibrate_task(tasks["softmax"], "cpu", FEW).ok
    declared = with_block(tasks["softmax"], tmp_path, '{"atol": 1e-2, "rtol": 1e-2}')
    got = calibrate.calibrate_task(declared, "cpu", FEW)
    assert got.ok and got.trials >= 1, got
