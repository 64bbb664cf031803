"""The size policy: running published benchmark shapes on a CPU machine.

KernelBench's default shapes are chosen for a datacenter GPU (``19_ReLU`` is 4096 x 393216 floats,
6 GiB); on a CPU they do not fit, and even when they fit, a reference call and the timing loop
take minutes. The policy measures a task on PyTorch's ``meta`` device, else with fake tensors (shapes and
FLOPs, no memory) at the sizes the file sets, and when the task is over budget scales its size symbols down:

- budget: the bytes of the inputs, outputs and model parameters at most `max_bytes()`
  (32 MiB; env ``SAGE_TASK_MAX_BYTES``), and the reference's FLOPs (matmul/convolution, as counted
  by ``torch.utils.flop_counter``) at most `max_flops()` (5e8; env ``SAGE_TASK_MAX_FLOPS``);
- move: halve the largest module-level int (or element of a module-level tuple of ints, such as
  KernelBench's ``input_shape = (32768,)``) of at least 16 whose halving shrinks the footprint and
  still runs, alone or together with every size of the same value (so ``kernel_size = 3`` or
  ``dim = 1`` are never touched); repeat until within budget;
- the record: `Task.sizes` are the sizes used, `Task.size_tuples` the scaled tuples (rebound with
  the sizes in every call), `Task.published_sizes` the file's, `Task.size_note`
  says what happened; `sage tasks show` prints it and a verdict's sizes are the ones used.

A file that stays over budget at the smallest sizes the moves reach is rejected with the footprint
and what to change. A file the meta device cannot run (data-dependent shapes) is run at its
published sizes; the loader's child process limits (tasks/isolate.py) bound what that costs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.budget import budget_text, max_bytes, max_flops
from sagekernel.tasks.modules import bound_sizes

#: Ints below this are structural (kernel sizes, dims, strides), never scaled.
MIN_SCALABLE = 16
_MAX_MOVES = 400


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


@contextmanager
def shapes_only(kind: str) -> Iterator[None]:
    """Tensors without storage: "meta" (the meta device), "fake" (FakeTensorMode, which also runs
    what the meta device refuses, e.g. torch.distributions' argument checks), or "cpu" (real)."""
    if kind == "meta":
        with torch.device("meta"):
            yield
    elif kind == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True):
            yield
    else:
        yield


#: The storage-free modes, in the order they are tried.
SHAPE_MODES = ("meta", "fake")


def meta_footprint(path: Path, module: ModuleType, sizes: Mapping[str, int | tuple[int, ...]],
                   groups: bool = False) -> Footprint | None:
    """Bytes and FLOPs of one reference call at `sizes`, measured without storage (the meta device,
    else fake tensors; None: the file runs in neither)."""
    for kind in SHAPE_MODES:
        fp = _footprint(path, module, sizes, groups, kind)
        if fp is not None:
            return fp
    return None


def _footprint(path: Path, module: ModuleType, sizes: Mapping[str, int | tuple[int, ...]], groups: bool,
               kind: str) -> Footprint | None:
    from torch.utils.flop_counter import FlopCounterMode

    from sagekernel.tasks.inputs import call_forward, call_get_args, call_input_groups, instantiate
    from sagekernel.tasks.params import model_tensors

    try:
        with bound_sizes(module, sizes), torch.random.fork_rng(devices=[]), shapes_only(kind):
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
    except TaskError as exc:
        if "ran out of memory" in str(exc):
            raise  # a real allocation, even without storage: another mode would only repeat it
        return None
    except MemoryError as exc:
        raise TaskError(f"{path}: ran out of memory while measuring the reference (MemoryError); "
                        "lower the sizes in the file") from exc
    except Exception:  # the meta device (or fake tensors) cannot run this file
        return None
    return Footprint(total_bytes, total_flops)


Binding = dict[str, "int | tuple[int, ...]"]


def module_size_tuples(module: ModuleType) -> dict[str, tuple[int, ...]]:
    """Public module-level tuples of positive ints (``input_shape = (32768,)``): sizes too."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and type(v) is tuple and v
            and all(type(x) is int and x > 0 for x in v)}


def _keys(ints: dict[str, int], tuples: dict[str, tuple[int, ...]]) -> list[tuple[str, int, int]]:
    """(name, index or -1 for an int, value) of every scalable size."""
    keys = [(k, -1, v) for k, v in ints.items() if v >= MIN_SCALABLE]
    keys += [(k, i, x) for k, t in tuples.items() for i, x in enumerate(t) if x >= MIN_SCALABLE]
    return keys


def _halved(ints: dict[str, int], tuples: dict[str, tuple[int, ...]],
            move: tuple[tuple[str, int], ...]) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    new_ints = dict(ints)
    lists = {k: list(v) for k, v in tuples.items()}
    for name, index in move:
        if index < 0:
            new_ints[name] //= 2
        else:
            lists[name][index] //= 2
    return new_ints, {k: tuple(v) for k, v in lists.items()}


def choose_sizes(path: Path, module: ModuleType, ints: dict[str, int]) -> tuple[
        dict[str, int], dict[str, tuple[int, ...]], str]:
    """The sizes to run `module` at: (ints, changed size tuples, a note saying why).

    Moves, tried for the largest scalable value first: halve one int (or one tuple element) with
    that value; then all ints and tuple elements with that value together (a file whose shapes only
    agree when ``batch_size == input_shape[0]`` needs both to move at once)."""
    tuples0 = module_size_tuples(module)
    base = meta_footprint(path, module, {**tuples0, **ints})
    if base is None:
        return dict(ints), {}, ("neither the meta device nor fake tensors can run this reference, so its "
                                "footprint is unknown; running at the published sizes")
    if base.fits():
        return dict(ints), {}, f"published sizes ({base.text()}) fit the CPU budget ({budget_text()})"
    sizes, tuples, current = dict(ints), dict(tuples0), base
    stuck: set[tuple[tuple[str, int], ...]] = set()
    for _ in range(_MAX_MOVES):
        if current.fits():
            break
        keys = _keys(sizes, tuples)
        moves: list[tuple[tuple[str, int], ...]] = []
        for value in sorted({v for _, _, v in keys}, reverse=True):
            same = [(k, i) for k, i, v in keys if v == value]
            moves += [(key,) for key in same]
            if len(same) > 1:
                moves.append(tuple(same))
        moved = False
        for move in moves:
            if move in stuck:
                continue
            trial_ints, trial_tuples = _halved(sizes, tuples, move)
            fp = meta_footprint(path, module, {**trial_tuples, **trial_ints})
            if fp is None or not fp.smaller_than(current):
                stuck.add(move)
                continue
            sizes, tuples, current, moved = trial_ints, trial_tuples, fp, True
            stuck.clear()
            break
        if not moved:
            break
    changed = {k: v for k, v in sizes.items() if v != ints[k]}
    changed_tuples = {k: v for k, v in tuples.items() if v != tuples0[k]}
    shown_from = [f"{k}={ints[k]}" for k in changed] + [f"{k}={tuples0[k]}" for k in changed_tuples]
    shown_to = [f"{k}={v}" for k, v in changed.items()] + [f"{k}={v}" for k, v in changed_tuples.items()]
    if not current.fits():
        raise TaskError(
            f"{path}: at its published sizes the reference needs {base.text()}, over this machine's "
            f"budget ({budget_text()}); the size policy reached {current.text()} at "
            f"{', '.join(shown_to) or 'the published sizes'} and cannot shrink it further (only "
            "module-level ints and int tuples >= 16 are scaled). Lower the sizes in the file, or "
            "raise SAGE_TASK_MAX_BYTES / SAGE_TASK_MAX_FLOPS")
    return sizes, changed_tuples, (
        f"scaled down to fit the CPU budget ({budget_text()}): published {', '.join(shown_from)} "
        f"({base.text()}) -> {', '.join(shown_to)} ({current.text()})")
