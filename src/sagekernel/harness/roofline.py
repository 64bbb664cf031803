"""The roofline (speed-of-light) score of a timed verdict (issue 31).

A kernel cannot finish faster than its compulsory memory traffic at the device's peak bandwidth,
nor than its arithmetic at the device's peak compute. Its bound is the larger of the two times;
its score is the fraction of that bound it reaches:

    memory_ms  = bytes_moved / peak_bandwidth          (every input, parameter and output once)
    compute_ms = flops / peak_flops[dtype]             (None without a compute peak for the dtype)
    bound_ms   = max(memory_ms, compute_ms)
    fraction   = bound_ms / measured_ms                (1.0 = at the roofline)

- **bytes moved**: the sizes and element types of the task's inputs, parameters and outputs at the
  timed shape, each read or written once (the minimum: a kernel that re-reads moves more).
- **FLOPs**: as PyTorch's `FlopCounterMode` counts the reference's forward at that shape (matrix
  products, convolutions, attention: 2 per multiply-add); elementwise arithmetic is not counted, so
  an elementwise task is bounded by its bytes alone (its arithmetic is far below any machine's
  balance point anyway).
- **peaks**: peaks.py (a probed CPU, datasheet accelerators). On a CPU the bandwidth is that of
  the smallest probed working set holding the call's bytes (a cache's, for a small task).

`roofline` is the pure arithmetic; `task_work` measures bytes and FLOPs of a task at given sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sagekernel.harness.peaks import Peaks
from sagekernel.tasks.task import Task

FLOPS_METHOD = "torch.utils.flop_counter.FlopCounterMode over the reference forward (matmul/conv/attention)"


@dataclass(frozen=True)
class Work:
    """What one call of a task must do at one shape."""

    bytes_moved: int
    flops: int
    dtype: str  # the element type the compute peak is looked up by
    sizes: dict[str, int]
    flops_method: str = FLOPS_METHOD


@dataclass(frozen=True)
class Roofline:
    bytes_moved: int
    flops: int
    dtype: str
    bandwidth_bytes_per_s: float
    flops_per_s: float | None
    memory_ms: float
    compute_ms: float | None
    bound_ms: float
    bound: str  # "memory" or "compute": which side sets the bound
    measured_ms: float
    fraction: float  # bound_ms / measured_ms
    peaks: str  # the device, and where its peaks come from

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def roofline(work: Work, measured_ms: float, peaks: Peaks) -> Roofline:
    """The bound and the fraction of it a kernel of `measured_ms` per call reaches."""
    bandwidth = peaks.bandwidth_for(work.bytes_moved)
    if measured_ms <= 0 or bandwidth <= 0:
        raise ValueError("a roofline needs a positive time and a positive peak bandwidth")
    memory_ms = work.bytes_moved / bandwidth * 1e3
    rate = peaks.flops_per_s.get(work.dtype)
    compute_ms = work.flops / rate * 1e3 if rate and work.flops else (0.0 if rate else None)
    compute = compute_ms or 0.0
    bound_ms = max(memory_ms, compute)
    return Roofline(work.bytes_moved, work.flops, work.dtype, bandwidth, rate, memory_ms,
                    compute_ms, bound_ms, "compute" if compute > memory_ms else "memory", measured_ms,
                    bound_ms / measured_ms, f"{peaks.device} ({peaks.source}, {peaks.threads or 'device'} "
                    f"thread{'s' if peaks.threads != 1 else ''})")


def task_work(task: Task, sizes: Mapping[str, int] | None = None) -> Work:
    """Bytes and FLOPs of one call of `task` at `sizes` (its default sizes when None): the real
    inputs and parameters are built (seed 0) and the reference runs once under FlopCounterMode."""
    from sagekernel.tasks.reference import reference_work

    at = dict(task.sizes if sizes is None else sizes)
    moved, flops = reference_work(task, at)  # counted where the task's code runs (its sandbox)
    return Work(moved, flops, task.dtype, at)


__all__ = ["Roofline", "Work", "roofline", "task_work"]
