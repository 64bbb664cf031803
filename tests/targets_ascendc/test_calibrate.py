"""Calibration (audit T5): the task's own reference on the device, through the harness's comparator."""

from __future__ import annotations

from sagekernel.harness.config import HarnessConfig
from sagekernel.targets.ascendc import calibrate

FEW = HarnessConfig(trials=1)


def test_reference_in_declared_precision_passes_on_the_cpu(tasks):
    for name in ("abs", "softmax"):
        got = calibrate.calibrate_task(tasks[name], "cpu", FEW)
        assert got.ok and got.trials >= 1, got


def test_a_device_whose_reference_drifts_is_named(tasks, monkeypatch):
    """A device that computes the reference 1% off (as an NPU transcendental might) is reported
    with the trial and the comparator's reason, before any candidate is blamed."""
    real = calibrate.device_reference

    def drifting(task, trial, device):
        return [o * 1.01 + 0.01 for o in real(task, trial, device)]

    monkeypatch.setattr(calibrate, "device_reference", drifting)
    got = calibrate.calibrate_task(tasks["softmax"], "cpu", FEW)
    assert not got.ok and got.failures and "output" in got.failures[0]


def test_a_reference_that_cannot_run_is_an_error(tasks, monkeypatch):
    def broken(task, trial, device):
        raise RuntimeError("EZ9999: op not supported on this SoC")

    monkeypatch.setattr(calibrate, "device_reference", broken)
    got = calibrate.calibrate_task(tasks["abs"], "cpu", FEW)
    assert not got.ok and "EZ9999" in got.error
