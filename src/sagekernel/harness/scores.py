"""The figures a timed verdict carries beside its speedup (issue 31), added once the timing is done:

- `timing["speedup_interval"]`: the speedup's bootstrap interval (speedup_interval.py);
- `timing["roofline"]`: the fraction of the device's roofline the kernel reaches (roofline.py), or
  why there is none;
- `timing["protocol"]`: how the numbers were made (protocol.py);
- `timing["baseline"]`: what the speedup is over (baseline.py).

The verdict's speedup, latencies and stage are never changed here: the paper's figures stay as
defined, the new ones sit beside them.
"""

from __future__ import annotations

import math
from typing import Any

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.peaks import device_peaks
from sagekernel.harness.protocol import protocol_record
from sagekernel.harness.roofline import roofline, task_work
from sagekernel.harness.speedup_interval import verdict_interval
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.tasks.task import Task


def annotate(verdict: Verdict, task: Task, target: str, device: str, config: HarnessConfig) -> Verdict:
    """Add the interval, roofline, protocol and baseline to a timed, passing verdict (in place)."""
    if verdict.stage is not Stage.OK or verdict.speedup is None or not verdict.timing:
        return verdict
    timing = verdict.timing
    timing["baseline"] = config.baseline
    interval = verdict_interval(timing)
    timing["speedup_interval"] = interval.to_dict() if interval else None
    timing["roofline"] = roofline_record(verdict, task, target, device, config)
    dtypes = {s.name: s.dtype for s in (*task.inputs, *task.params, *task.outputs)}
    timing["protocol"] = protocol_record(timing, target=target, device=device, baseline=config.baseline,
                                         dtypes=dtypes, threads=config.threads)
    return verdict


def roofline_record(verdict: Verdict, task: Task, target: str, device: str,
                    config: HarnessConfig) -> dict[str, Any]:
    """The roofline of the shape the reported speedup came from (the held-out shape when worse)."""
    held = verdict.timing.get("held_out")
    from_held = verdict.timing.get("speedup_from") == "held-out large shape" and isinstance(held, dict)
    sizes = dict(held["sizes"]) if from_held and isinstance(held, dict) else dict(task.sizes)
    peaks, why = device_peaks(target, device, config.threads)
    if peaks is None:
        return {"unavailable": why}
    if not verdict.candidate_ms or verdict.candidate_ms <= 0:
        return {"unavailable": "no candidate latency"}
    try:
        work = task_work(task, sizes)
    except Exception as exc:  # a figure beside the verdict: its failure never fails the verdict
        why = f"{type(exc).__name__}: {exc}"
        return {"unavailable": f"the task's bytes and FLOPs could not be measured: {why}"}
    record = roofline(work, verdict.candidate_ms, peaks).to_dict()
    record["sizes"] = sizes
    record["flops_method"] = work.flops_method
    return record


def combine_groups(combined: Verdict, groups: list[Verdict]) -> Verdict:
    """A grouped task's figures: the interval over every group's rounds (timing["groups"]), the
    geometric mean of the groups' roofline fractions, the first group's protocol."""
    timing = combined.timing
    interval = verdict_interval(timing)
    timing["speedup_interval"] = interval.to_dict() if interval else None
    found = [v.timing.get("roofline", {}).get("fraction") for v in groups]
    fractions = [f for f in found if isinstance(f, float) and f > 0]
    timing["roofline"] = (
        {"fraction": math.exp(sum(math.log(f) for f in fractions) / len(fractions)),
         "method": "geometric mean of the input groups' fractions", "groups": len(fractions)}
        if fractions and len(fractions) == len(groups)
        else {"unavailable": "not every input group has a roofline"}
    )
    first = groups[0].timing if groups else {}
    if "protocol" in first:
        timing["protocol"] = first["protocol"]
        timing["baseline"] = first.get("baseline")
    return combined


__all__ = ["annotate", "combine_groups", "roofline_record"]
