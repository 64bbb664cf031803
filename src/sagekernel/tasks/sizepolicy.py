"""The size policy: running published benchmark shapes on a CPU machine.

KernelBench's default shapes are chosen for a datacenter GPU (``19_ReLU`` is 4096 x 393216 floats,
6 GiB); on a CPU they do not fit, and even when they fit, a reference call and the timing loop
take minutes. The policy measures a task on PyTorch's ``meta`` device (shapes and FLOPs, no
memory) at the sizes the file sets, and when the task is over budget scales its size symbols down:

- budget: the bytes of the inputs, outputs and model parameters at most `max_bytes()`
  (32 MiB; env ``SAGE_TASK_MAX_BYTES``), and the reference's FLOPs (matmul/convolution, as counted
  by ``torch.utils.flop_counter``) at most `max_flops()` (5e8; env ``SAGE_TASK_MAX_FLOPS``);
- move: halve the largest module-level int of at least 16 whose halving shrinks the footprint and
  still runs (so ``kernel_size = 3`` or ``dim = 1`` are never touched); repeat until within budget;
- the record: `Task.sizes` are the sizes used, `Task.published_sizes` the file's, `Task.size_note`
  says what happened; `sage tasks show` prints it and a verdict's sizes are the ones used.

A file that stays over budget at the smallest sizes the moves reach is rejected with the footprint
and what to change. A file the meta device cannot run (data-dependent shapes) is run at its
published sizes; the loader's child process limits (tasks/isolate.py) bound what that costs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.modules import bound_sizes

DEFAULT_MAX_BYTES = 32 * 2**20
DEFAULT_MAX_FLOPS = 5e8
#: Ints below this are structural (kernel sizes, dims, strides), never scaled.
MIN_SCALABLE = 16
_MAX_MOVES = 400


def max_bytes() -> int:
    return int(float(os.environ.get("SAGE_TASK_MAX_BYTES", DEFAULT_MAX_BYTES)))


def max_flops() -> float:
    return float(os.environ.get("SAGE_TASK_MAX_FLOPS", DEFAULT_MAX_FLOPS))


@dataclass(frozen=True)
class Footprint:
    bytes: int
    flops: int

    def fits(self) -> bool:
        return self.bytes <= max_bytes() and self.flops <= max_flops()

    def smaller_than(self, other: Footprint) -> bool:
        return (self.bytes, self.flops) < (other.bytes, other.flops) and (
            self.bytes <= other.bytes and self.flops <= other.flops)

    def text(self) -> str:
        return f"{self.bytes / 2**20:.1f} MiB, {self.flops / 1e6:.0f} MFLOP"


def budget_text() -> str:
    return f"{max_bytes() / 2**20:.0f} MiB, {max_flops() / 1e6:.0f} MFLOP"


def meta_footprint(path: Path, module: ModuleType, sizes: dict[str, int],
                   groups: bool = False) -> Footprint | None:
    """Bytes and FLOPs of one reference call at `sizes`, measured on the meta device (None: the
    file cannot run there)."""
    from torch.utils.flop_counter import FlopCounterMode

    from sagekernel.tasks.inputs import call_forward, call_get_args, call_input_groups, instantiate
    from sagekernel.tasks.params import model_tensors

    try:
        with bound_sizes(module, sizes), torch.random.fork_rng(devices=[]), torch.device("meta"):
            torch.manual_seed(0)
            sets = ([a for _, a in call_input_groups(module, path)] if groups
                    else [call_get_args(module, path)])
            model = instantiate(module, path)
            total_bytes, total_flops = 0, 0
            for args in sets:
                with FlopCounterMode(display=False) as counter:
                    outs = call_forward(model, args, path)
                tensors = [a for a in args if isinstance(a, torch.Tensor)] + outs
                total_bytes = max(total_bytes, sum(t.numel() * t.element_size() for t in tensors))
                total_flops = max(total_flops, int(counter.get_total_flops()))
            total_bytes += sum(t.numel() * t.element_size() for _, t in model_tensors(model))
    except Exception:  # TaskError included: the meta device cannot run this file
        return None
    return Footprint(total_bytes, total_flops)


def choose_sizes(path: Path, module: ModuleType, ints: dict[str, int]) -> tuple[dict[str, int], str]:
    """The sizes to run `module` at (a copy of `ints`, possibly scaled down) and a note saying why."""
    base = meta_footprint(path, module, ints)
    if base is None:
        return dict(ints), ("the meta device cannot run this reference, so its footprint is unknown; "
                            "running at the published sizes")
    if base.fits():
        return dict(ints), f"published sizes ({base.text()}) fit the CPU budget ({budget_text()})"
    sizes = dict(ints)
    current = base
    stuck: set[str] = set()
    for _ in range(_MAX_MOVES):
        if current.fits():
            break
        moved = False
        for sym in sorted((s for s in sizes if sizes[s] >= MIN_SCALABLE and s not in stuck),
                          key=lambda s: -sizes[s]):
            trial = {**sizes, sym: sizes[sym] // 2}
            fp = meta_footprint(path, module, trial)
            if fp is None or not fp.smaller_than(current):
                stuck.add(sym)
                continue
            sizes, current, moved = trial, fp, True
            break
        if not moved:
            break
    changed = {k: v for k, v in sizes.items() if v != ints[k]}
    if not current.fits():
        shown = ", ".join(f"{k}={v}" for k, v in changed.items()) or "the published sizes"
        raise TaskError(
            f"{path}: at its published sizes the reference needs {base.text()}, over this machine's "
            f"budget ({budget_text()}); the size policy reached {current.text()} at {shown} and "
            "cannot shrink it further (only module-level ints >= 16 are scaled). Lower the sizes "
            "in the file, or raise SAGE_TASK_MAX_BYTES / SAGE_TASK_MAX_FLOPS")
    published = ", ".join(f"{k}={ints[k]}" for k in changed)
    used = ", ".join(f"{k}={v}" for k, v in changed.items())
    return sizes, (f"scaled down to fit the CPU budget ({budget_text()}): published {published} "
                   f"({base.text()}) -> {used} ({current.text()})")
