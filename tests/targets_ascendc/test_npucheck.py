"""scripts/npu_check.sh's Python side, and the script's behaviour where CANN is absent."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sagekernel.agent.protocol import parse_reply
from sagekernel.targets.ascendc import npucheck
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import files_for

from .conftest import reference_candidate

ROOT = Path(__file__).resolve().parents[2]


def test_scripted_reply_carries_the_reference_operator(tasks):
    """The scripted model's reply parses, by the reply protocol, into exactly the contract's files."""
    text = npucheck.scripted_reply("abs")["fallback"]
    paths = [f.path for f in files_for(tasks["abs"], AscendConfig(template="kernel-only"))]
    parsed = parse_reply(str(text), shown_items=[], shown_rules=[], language="cpp", paths=paths)
    assert parsed.files == reference_candidate("abs").files


def test_report_collects_each_step(tmp_path):
    (tmp_path / "1-doctor.log").write_text("ok  CANN toolkit: /usr/local/Ascend\nnoise\n")
    (tmp_path / "1-doctor.rc").write_text("0\n")
    (tmp_path / "3-npu-tests.log").write_text("collected 5\n4 passed, 1 failed in 300s\n")
    (tmp_path / "3-npu-tests.rc").write_text("1\n")
    text = npucheck.report(tmp_path)
    assert "== 1-doctor: exit 0" in text and "== 3-npu-tests: exit 1" in text
    assert "4 passed, 1 failed" in text and "noise" not in text


def test_report_gives_the_measured_launch_gap_of_each_eval(tmp_path):
    """The NPU launch allowance is a figure from public numbers: the report carries the board's own
    measurement (wall - events per call) from each `sage eval --json` log, to replace it."""
    import json

    verdict = {"stage": "ok", "flags": [], "timing": {"candidate_round_ms": [0.012, 0.010, 0.011],
                                                       "candidate_wall_median_ms": 0.131,
                                                       "launch_sync_allowance_ms": 0.2}}
    (tmp_path / "4-eval-cold-l2.log").write_text("building...\n" + json.dumps(verdict, indent=1))
    (tmp_path / "4-eval-cold-l2.rc").write_text("0\n")
    text = npucheck.report(tmp_path)
    assert "launch+sync gap: wall 0.1310 ms - events 0.0110 ms = 0.1200 ms per call" in text
    assert "allowance 0.2 ms; event_wall_mismatch not raised" in text
    assert npucheck.launch_gap("no verdict here") == [] and npucheck.launch_gap('{"stage": "compile"}') == []


def test_script_says_plainly_when_nothing_can_be_checked(tmp_path):
    if npucheck.doctor_table()[0].startswith("ok  CANN toolkit"):
        return  # a machine with CANN runs the real check instead
    run = subprocess.run(
        ["bash", str(ROOT / "scripts/npu_check.sh")],
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path), "PYTHON": "python3",
             "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 2 and "nothing was checked" in run.stderr
