"""The targets' selfcheck driver (devloop/selfcheck.py) on the interpreter, and its refusals."""

from __future__ import annotations

import json

import pytest

from sagekernel.targets.devloop import selfcheck

pytest.importorskip("triton")


def test_selfcheck_one_kernel_on_the_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    assert selfcheck.main(["--target", "triton", "--device", "interpreter", "--only", "abs", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["rows"]
    assert (row["lint"], row["build"], row["correct"]) == ("ok", "ok", "ok")
    assert row["candidate_ms"] is None and row["note"] == "not timed (emulated)"
    assert row["shapes"] == ["B=64,D=1000", "B=7,D=1531"]


def test_selfcheck_reports_a_wrong_kernel(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (task,) = selfcheck.tasks_for("triton", ["abs"])
    wrong = tmp_path / "abs.triton.py"
    wrong.write_text(task.reference_kernels["triton"].read_text().replace("tl.abs(x)", "x"))
    task.reference_kernels["triton"] = wrong
    row = selfcheck.check_task("triton", "interpreter", task)
    assert not row.ok and row.correct.startswith("out at")


def test_selfcheck_refuses_an_unavailable_device(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert selfcheck.main(["--target", "cuda", "--device", "cuda"]) == 2
    assert "not available here" in capsys.readouterr().err
