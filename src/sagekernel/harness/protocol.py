"""The protocol record of a timed verdict, and whether two records may be compared (issue 31).

Every timed verdict states how its numbers were made, so that a number can be reproduced and two
runs compared only when they were measured the same way: the timer, warm-up, rounds, calls per
round, cache policy ("flush") and input policy, the shapes timed and element types, the baseline,
the thread budget, the device and the software versions, and the harness's commit.

Which fields must agree for two runs to be compared is the report's rule (report/scores.py,
`COMPARED`).
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Every timed call reads an input set it has never seen, written just before its round; nothing
#: is flushed explicitly (the inputs are cold by construction: the budget keeps their total large).
FLUSH = "none: every timed call reads inputs no call has read before (cold by construction)"
INPUT_POLICY = ("a fresh secret-seeded input set per call, warm-up included; outputs refilled with a "
                "sentinel before every round; never reused")


@lru_cache(maxsize=1)
def harness_commit() -> str:
    """The git commit of the sagekernel source that judged ("+dirty" with local changes), else the
    package version ("release X": an installed copy has no repository)."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
        if head.returncode == 0 and head.stdout.strip():
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                    "--", "src"], capture_output=True, text=True, timeout=10, check=False)
            return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from sagekernel import __version__

    return f"release {__version__}"


@lru_cache(maxsize=1)
def software_versions() -> dict[str, str]:
    import torch

    from sagekernel.harness.peaks import compiler_version

    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "cuda": str(torch.version.cuda or "none"), "compiler": compiler_version(),
            "kernel": platform.release()}


def device_record(target: str, device: str) -> dict[str, Any]:
    """The device as this machine names it: the CPU's model and cores, an accelerator's name."""
    from sagekernel.harness.peaks import accelerator_name, cpu_model

    record: dict[str, Any] = {"target": target, "device": device, "cpu": cpu_model(),
                              "cores": os.cpu_count() or 1}
    if target != "cpu":
        record["accelerator"] = accelerator_name(target, device) or "not visible to the harness process"
    return record


def protocol_record(timing: Mapping[str, Any], *, target: str, device: str, baseline: str,
                    dtypes: Mapping[str, str], threads: int) -> dict[str, Any]:
    """The protocol of one timing record (timing.py / device_timing.py) on this machine."""
    shapes = [dict(timing.get("sizes", {}))]
    held = timing.get("held_out")
    if isinstance(held, dict) and held.get("sizes"):
        shapes.append(dict(held["sizes"]))
    dev = device_record(target, device)
    versions = software_versions()
    return {
        "method": timing.get("method"),
        "timer": timing.get("clock"),
        "warmup": timing.get("warmup"),
        "rounds": timing.get("rounds"),
        "calls_per_round": timing.get("calls_per_round"),
        "held_out_rounds": held.get("rounds") if isinstance(held, dict) else None,
        "flush": FLUSH,
        "input_policy": INPUT_POLICY,
        "shapes_timed": shapes,
        "dtypes": dict(dtypes),
        "threads": threads,
        "baseline": baseline,
        "device": dev.get("accelerator") or dev["cpu"],
        "device_detail": dev,
        "torch": versions["torch"],
        "versions": versions,
        "harness_commit": harness_commit(),
    }


__all__ = ["harness_commit", "protocol_record"]
