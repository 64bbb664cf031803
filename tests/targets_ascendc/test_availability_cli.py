"""Availability probes (never raise, name the missing piece), the plan printer and the CLI hook."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sagekernel.targets.ascendc import availability
from sagekernel.targets.ascendc.plan import main as plan_main
from sagekernel.targets.ascendc.plan import plan_report
from sagekernel.targets.ascendc.target import AscendCTarget

from .conftest import REFERENCE

HAS_CANN = availability.probe_cann().ok


@pytest.mark.skipif(HAS_CANN, reason="CANN is installed here")
def test_missing_pieces_are_named(monkeypatch):
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    ok, why = AscendCTarget().available("npu")
    assert not ok and "CANN toolkit not found" in why and "set_env.sh" in why
    ok, why = AscendCTarget().available("cpu-twin")
    assert not ok and "CPU twin-debug library ships with it" in why


def test_unknown_device_and_broken_home_never_raise(monkeypatch, tmp_path):
    assert AscendCTarget().available("gpu") == (
        False,
        "unknown device 'gpu': the ascendc target has npu and cpu-twin",
    )
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))  # a directory that is not a toolkit
    ok, why = availability.available("npu")
    assert not ok and "lacks bisheng, msopgen" in why


def test_torch_npu_probe_runs_in_a_subprocess():
    probe = availability.probe_torch_npu()
    if not probe.ok:
        assert "torch_npu" in probe.detail
    import sys

    assert "torch_npu" not in sys.modules  # this process never imports it


def test_plan_report_shapes(tasks, monkeypatch):
    monkeypatch.setenv("SAGE_ASCENDC_TEMPLATE", "kernel-only")
    paths = sorted((REFERENCE / "abs").rglob("*.cpp"))
    report = plan_report(tasks["abs"], paths, device="cpu-twin")
    assert report["files"] == {
        "op_host/abs_custom_tiling_func.cpp": "given",
        "op_kernel/abs_custom.cpp": "given",
    }
    assert report["lint"] == [] and report["build"]["path"] == "twin"
    assert "-DRUN_MODE=cpu" in report["build_script"] and report["run"]["timed"] is False


def test_module_entry_prints_plan(capsys, monkeypatch):
    monkeypatch.setenv("SAGE_ASCENDC_TEMPLATE", "full")
    code = plan_main(["softmax", str(REFERENCE / "softmax"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["lint"] == [] and data["config"]["template"] == "full"
    steps = [s["name"] for s in data["build"]["steps"]]
    assert "msopgen" in steps and "install" in steps and data["run"]["reference_in_process"]


def test_sage_eval_plan_hook(monkeypatch):
    from sagekernel.cli import app

    monkeypatch.setenv("SAGE_ASCENDC_TEMPLATE", "kernel-only")
    files = [str(p) for p in sorted((REFERENCE / "abs").rglob("*.cpp"))]
    result = CliRunner().invoke(app, ["eval", "--target", "ascendc", "--plan", "abs", *files])
    assert result.exit_code == 0, result.output
    assert "msopgen gen -i" in result.output and "static findings: 0" in result.output
    assert "torch.npu.Event" in result.output and "batched (paper C.4)" in result.output
    broken = CliRunner().invoke(app, ["eval", "--target", "ascendc", "--plan", "abs", files[0]])
    assert broken.exit_code == 1 and "MISSING" in broken.output
