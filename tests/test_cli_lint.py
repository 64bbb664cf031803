"""`sage lint`: a target's static checks alone, from the command line, for any target."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sagekernel.cli import app

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "src/sagekernel/targets/ascendc/reference/softmax"


def run(*args: str):
    return CliRunner().invoke(app, ["lint", *args])


def test_clean_ascendc_candidate_from_a_folder():
    result = run("softmax", str(SOFTMAX), "--target", "ascendc", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] and report["findings"] == [] and set(report["files"].values()) == {"given"}


def test_hostile_ascendc_candidate_is_reported(tmp_path):
    for rel in (
        "op_host/softmax_custom_tiling.h",
        "op_host/softmax_custom.cpp",
        "op_kernel/softmax_custom.cpp",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        text = (SOFTMAX / rel).read_text()
        if rel.startswith("op_kernel"):
            text = text.replace(
                "Exp(y, y, n);", "auto f = &AscendC::SoftMax<float>;\n        Exp(y, y, n);", 1
            )
        (tmp_path / rel).write_text(text)
    files = [str(p) for p in sorted(tmp_path.rglob("*.*"))]
    result = run("softmax", *files, "--target", "ascendc", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert [f["rule"] for f in report["findings"]] == ["forbidden_api"]
    assert report["findings"][0]["line"] is not None


def test_any_target_and_a_file_outside_the_contract(tmp_path):
    kernel = ROOT / "src/sagekernel/tasks/suite/level1/abs.cpu.c"
    result = run("abs", str(kernel), "--target", "cpu")
    assert result.exit_code == 0, result.output
    extra = tmp_path / "notes.cpp"
    extra.write_text("int x;\n")
    result = run(
        "softmax", str(SOFTMAX / "op_kernel/softmax_custom.cpp"), str(extra), "--target", "ascendc", "--json"
    )
    report = json.loads(result.output)
    assert result.exit_code == 1 and report["files"]["notes.cpp"] == "not in the contract"
    assert report["files"]["op_host/softmax_custom.cpp"] == "missing"
    assert {f["rule"] for f in report["findings"]} == {"file_set"}
