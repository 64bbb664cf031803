"""Device operations for the runtimes: where tensors live, how a call is timed, the L2 flush, and
the integrity snapshot (functions and flags a candidate must not replace or change).

Imports torch only. Every function the loop relies on is captured when a device is made, before
the candidate is loaded, so a candidate that replaces `torch.cuda.synchronize` or
`Event.elapsed_time` changes nothing the runtime calls (and the snapshot reports it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

#: Bytes written between timed calls when the L2 size is unknown (KernelBench writes 256 MiB).
DEFAULT_FLUSH_BYTES = 256 << 20


def device_view() -> dict[str, str]:
    """The device-selection variables this runtime was started with, for the verdict (which card a
    pinned worker's runtime ran on). Matched by pattern, not by the parent's list of names
    (devices.py): this file runs in the sandbox, apart from sagekernel."""
    return {k: v for k, v in os.environ.items() if k.endswith("_VISIBLE_DEVICES") or k == "CUDA_DEVICE_ORDER"}


class DeviceOps:
    """The interpreter: CPU tensors, no clock (an emulator's time says nothing about a device)."""

    name = "interpreter"
    timed = False

    def __init__(self) -> None:
        self.torch_device = torch.device("cpu")
        self.notes: list[str] = []
        self.last_stream_ns: int | None = None

    def synchronize(self) -> None:
        return None

    def flush(self) -> None:
        return None

    def time_call(self, fn: Callable[[], Any]) -> tuple[Any, int | None, int | None]:
        """(result, device ns, host wall ns); both None where the device is not timed."""
        return fn(), None, None


class _EventTimedOps(DeviceOps):
    """A device with events and a device-wide synchronise (CUDA, Ascend NPU through torch_npu)."""

    timed = True

    def __init__(self, module: Any, device: torch.device) -> None:
        super().__init__()
        self.torch_device = device
        self._sync: Callable[[], None] = module.synchronize
        self._event: Callable[..., Any] = module.Event
        self._perf_ns = time.perf_counter_ns
        self._flush_buf = torch.empty(self.flush_bytes() // 8, dtype=torch.int64, device=device)

    def flush_bytes(self) -> int:
        return DEFAULT_FLUSH_BYTES

    def synchronize(self) -> None:
        self._sync()

    def flush(self) -> None:
        self._flush_buf.zero_()

    def time_call(self, fn: Callable[[], Any]) -> tuple[Any, int | None, int | None]:
        # Synchronise the whole device before the end event is recorded: work a candidate puts on
        # another stream lands inside the window (eval_integrity.md §3a). The window then also holds
        # one host synchronise (a few microseconds, the same for both sides); `last_stream_ns` is the
        # KernelBench-style time (end event on the current stream right after the call) for the
        # harness to use when the two agree. The wall clock around launch + synchronise is reported
        # beside them so a large gap can be flagged.
        self._sync()
        start, on_stream, end = (self._event(enable_timing=True) for _ in range(3))
        t0 = self._perf_ns()
        start.record()
        result = fn()
        on_stream.record()
        self._sync()
        end.record()
        end.synchronize()
        wall = self._perf_ns() - t0
        self.last_stream_ns = int(start.elapsed_time(on_stream) * 1e6)
        return result, int(start.elapsed_time(end) * 1e6), wall


class CudaOps(_EventTimedOps):
    name = "cuda"

    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False: no NVIDIA GPU or driver here")
        torch.cuda.init()
        super().__init__(torch.cuda, torch.device("cuda", 0))
        props = torch.cuda.get_device_properties(0)
        self.notes.append(f"gpu: {props.name}, L2 {getattr(props, 'L2_cache_size', 0) >> 20} MiB")

    def flush_bytes(self) -> int:
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
        return max(DEFAULT_FLUSH_BYTES, 2 * l2)


class NpuOps(_EventTimedOps):
    name = "npu"

    def __init__(self) -> None:
        import torch_npu  # noqa: F401  (registers torch.npu)

        npu = torch.npu  # type: ignore[attr-defined]
        if not npu.is_available():
            raise RuntimeError("torch.npu.is_available() is False: no Ascend NPU or driver here")
        super().__init__(npu, torch.device("npu", 0))


def make_device(name: str) -> DeviceOps:
    if name == "interpreter":
        return DeviceOps()
    if name == "cuda":
        return CudaOps()
    if name == "npu":
        return NpuOps()
    raise ValueError(f"unknown device {name!r} (interpreter, cuda, npu)")


# ---- integrity snapshot --------------------------------------------------------------------------


#: Readers the runtime adds for its own evidence code (loop.py: `watch`), checked like torch's.
_EXTRA_WATCHED: dict[str, Callable[[], Any]] = {}


def watch(name: str, read: Callable[[], Any]) -> None:
    """Also report a change of `read()` (the runtime's own functions: a candidate that replaced
    the code computing the evidence would otherwise forge it)."""
    _EXTRA_WATCHED[name] = read


def _watched() -> dict[str, Callable[[], Any]]:
    """Name -> reader of something a candidate must leave alone (identity of functions, flags)."""
    watched: dict[str, Callable[[], Any]] = {
        "torch.Tensor.copy_": lambda: torch.Tensor.copy_,
        "torch.Tensor.to": lambda: torch.Tensor.to,
        "torch.Tensor.contiguous": lambda: torch.Tensor.contiguous,
        "torch.Tensor.__eq__": lambda: torch.Tensor.__eq__,
        "torch.allclose": lambda: torch.allclose,
        "torch.manual_seed": lambda: torch.manual_seed,
        "time.perf_counter_ns": lambda: time.perf_counter_ns,
        "time.perf_counter": lambda: time.perf_counter,
        "torch.get_default_dtype": lambda: torch.get_default_dtype(),
        "torch.get_float32_matmul_precision": lambda: torch.get_float32_matmul_precision(),
        "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
        "torch.are_deterministic_algorithms_enabled": lambda: torch.are_deterministic_algorithms_enabled(),
        "torch.get_num_threads": lambda: torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        watched.update(
            {
                "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
                "torch.cuda.Event": lambda: torch.cuda.Event,
                "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
                "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
                "torch.cuda.current_stream": lambda: torch.cuda.current_stream,
            }
        )
    watched.update(_EXTRA_WATCHED)
    return watched


def snapshot() -> dict[str, tuple[str, Any]]:
    """Name -> ("function", id) or ("flag", value)."""
    out: dict[str, tuple[str, Any]] = {}
    for name, read in _watched().items():
        try:
            value = read()
        except Exception as exc:  # a flag that cannot be read is itself worth reporting
            out[name] = ("flag", f"unreadable: {type(exc).__name__}")
            continue
        out[name] = ("flag", value) if isinstance(value, (bool, int, float, str)) else ("function", id(value))
    return out


def changed(before: dict[str, tuple[str, Any]], after: dict[str, tuple[str, Any]]) -> list[str]:
    """What differs between two snapshots, as lines for the harness."""
    lines = []
    for name, (kind, value) in before.items():
        now = after.get(name)
        if now is None or now[1] != value:
            lines.append(
                f"{name} replaced"
                if kind == "function"
                else f"{name} changed: {value!r} -> {now[1] if now else None!r}"
            )
    return lines


# Opened at import, before the runtime stops opening files (guard.lock_files): the thread count
# and the seccomp state are read through these descriptors afterwards.
def _open(path: str, flags: int) -> int:
    try:
        return os.open(path, flags)
    except OSError:
        return -1


_TASK_DIR = _open("/proc/self/task", os.O_RDONLY | os.O_DIRECTORY)
_STATUS = _open("/proc/self/status", os.O_RDONLY)


def thread_count() -> int:
    """OS threads of this process (/proc/self/task), falling back to Python's count."""
    if _TASK_DIR >= 0:
        try:
            return len(os.listdir(_TASK_DIR))
        except OSError:
            pass
    return threading.active_count()


def seccomp_state() -> str:
    """ "filter", "strict" or "off", from /proc/self/status."""
    if _STATUS >= 0:
        try:
            text = os.pread(_STATUS, 1 << 16, 0).decode("ascii", "replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            if line.startswith("Seccomp:"):
                return {"0": "off", "1": "strict", "2": "filter"}.get(line.split()[1], "unknown")
    return "unknown"
