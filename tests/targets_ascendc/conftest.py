"""Shared helpers for the Ascend C target's tests (no CANN needed unless marked `npu`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.tasks.suites import find_task
from sagekernel.tasks.task import Task

REFERENCE = Path(__file__).parents[2] / "src/sagekernel/targets/ascendc/reference"
TEMPLATES = {"abs": "kernel-only", "mul_sigmoid": "kernel-only", "softmax": "full"}


def reference_candidate(name: str) -> Candidate:
    root = REFERENCE / name
    return Candidate(
        {
            p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*"))
            if p.suffix in (".cpp", ".h")
        }
    )


def config_for(name: str, **kw: str) -> AscendConfig:
    return AscendConfig(template=TEMPLATES.get(name, "full"), **kw)


@pytest.fixture(scope="session")
def tasks() -> dict[str, Task]:
    return {n: find_task(n) for n in ("abs", "mul_sigmoid", "softmax", "swish", "rms_norm", "arange", "lerp")}


def edit(candidate: Candidate, path: str, old: str, new: str) -> Candidate:
    text = candidate.files[path]
    assert old in text, f"{old!r} not in {path}"
    return Candidate({**candidate.files, path: text.replace(old, new, 1)})
