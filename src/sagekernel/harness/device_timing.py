"""Device timing: candidate and reference timed by the device runtime itself, in one process.

Device targets (Triton, CUDA, Ascend C) time both sides with device events after a device-wide
synchronise (the paper's C.4, KernelBench), interleaved per round in random order; the runtime
also reports the host wall clock around launch plus synchronise, and a large gap is
`event_wall_mismatch` (work the events did not see: a side stream, deferred work). Inputs, rechecks
and statistics follow the CPU protocol (timing.py). Unrun on this project's machines: no GPU or NPU.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.runs import Failure, RuntimeRun
from sagekernel.harness.timed_recheck import recheck
from sagekernel.harness.timing import (
    EVENT_WALL_RATIO,
    TimingOutcome,
    per_call_ms,
    plan_record,
    quartiles,
)
from sagekernel.harness.verdict import Stage
from sagekernel.seam import LAUNCH_SYNC_MS
from sagekernel.tasks.task import Task


def event_wall_mismatch(event_ms: float, wall_ms: float, launch_sync_ms: float) -> bool:
    """Whether a call's host wall time (launch + device-wide synchronise) is implausible for its
    event time: EVENT_WALL_RATIO times the events AND more than the device's own launch and
    synchronise cost above them (a side stream, deferred work). The second test keeps small honest
    kernels, whose wall time is mostly that cost, from being flagged."""
    return wall_ms > EVENT_WALL_RATIO * event_ms and wall_ms - event_ms > launch_sync_ms


def device_protocol(
    task: Task,
    run: RuntimeRun,
    blobs: list[tuple[bytes, list[list[tuple[int, int]]]]],
    warm_sets: list[tuple[int, list[torch.Tensor]]],
    round_sets: list[list[tuple[int, list[torch.Tensor]]]],
    config: HarnessConfig,
    box: dict[str, Any],
    round_limit: float,
    check_every_call: bool,
    launch_sync_ms: float = LAUNCH_SYNC_MS["cuda"],
) -> TimingOutcome:
    """Candidate and reference timed by the device runtime itself, interleaved per round in random
    order, with device events after a device-wide synchronise (the paper's C.4, KernelBench).
    `launch_sync_ms`: the device's launch + synchronise cost (RuntimeSpec.launch_sync_ms)."""
    started = run.started()
    if started is not None:
        return TimingOutcome(started.stage, started.message, flags=started.flags, sandbox=box)
    names = [f"timed call {i}" for i in range(max(len(warm_sets), len(round_sets[0])))]
    warm = run.run_round(blobs[0][0], names, round_limit)
    if isinstance(warm, Failure):
        return TimingOutcome(warm.stage, warm.message, flags=warm.flags, sandbox=box)
    cand_ms: list[float] = []
    ref_ms: list[float] = []
    walls: list[float] = []
    flags: list[str] = []
    for r, sets in enumerate(round_sets):
        got = run.run_round(blobs[r + 1][0], names, round_limit)
        if isinstance(got, Failure):
            return TimingOutcome(got.stage, got.message, flags=got.flags, sandbox=box)
        problem = recheck(task, got, sets, f"round {r}")
        if problem:
            return TimingOutcome(Stage.CORRECTNESS, problem, sandbox=box)
        if len(got.ref_ns) != len(got.calls):
            return TimingOutcome(Stage.TIMING, "the device runtime did not time the reference", sandbox=box)
        cand_ms.append(per_call_ms(got))
        ref_ms.append(sum(got.ref_ns) / max(1, len(got.ref_ns)) / 1e6)
        walls += [c.wall_ns / 1e6 for c in got.calls if c.wall_ns]
    if not cand_ms or min(cand_ms) <= 0:
        return TimingOutcome(Stage.TIMING, "the timing run returned no usable measurements", sandbox=box)
    ratios = [rr / cc for rr, cc in zip(ref_ms, cand_ms, strict=True)]
    c_med, r_med, speedup = statistics.median(cand_ms), statistics.median(ref_ms), statistics.median(ratios)
    if speedup > config.speedup_ceiling:
        flags.append("speedup_audit")
    if walls and event_wall_mismatch(c_med, statistics.median(walls), launch_sync_ms):
        flags.append("event_wall_mismatch")
    timing = {
        "method": "device_events_interleaved_in_process",
        "clock": "device events after a device-wide synchronise; host wall clock cross-check",
        **plan_record(warm_sets, round_sets, config, check_every_call),
        "sizes": dict(task.sizes),
        "candidate_round_ms": [round(x, 6) for x in cand_ms],
        "reference_round_ms": [round(x, 6) for x in ref_ms],
        "candidate_wall_median_ms": round(statistics.median(walls), 6) if walls else None,
        "launch_sync_allowance_ms": launch_sync_ms,
        "ratio_iqr": quartiles(ratios),
    }
    return TimingOutcome(
        Stage.OK,
        f"candidate {c_med:.4f} ms, reference {r_med:.4f} ms, speedup {speedup:.2f}x",
        c_med,
        r_med,
        speedup,
        timing,
        sorted(set(flags)),
        box,
    )
