"""Device slots: what one worker is pinned to, so two streams never share a card.

`--devices` takes one or more groups, each a kind and a comma-separated list:

    cuda:0,1        two slots, GPU 0 and GPU 1 as nvidia-smi numbers them (CUDA_VISIBLE_DEVICES with
                    CUDA_DEVICE_ORDER=PCI_BUS_ID; HIP_VISIBLE_DEVICES too)
    npu:0,1,2,3     four slots, Ascend NPUs (ASCEND_RT_VISIBLE_DEVICES)
    cpu:0-1,2-3     two slots of two cores each (os.sched_setaffinity; OMP/MKL threads = cores)
    cpu:0+2,1+3     cores need not be contiguous ('+' joins them)

Inside the pinned worker the card is device 0 of its target (the visibility variable renumbers).
The same variables reach every child the worker starts: ordinary children inherit them, and the
sandbox, which rebuilds a child's environment from scratch, forwards them (`selection_env`,
sandbox.command_line). `sage run --device cuda:N` / `npu:N` pins its own process the same way
(`split_device`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sagekernel.errors import SageError

KINDS = ("cuda", "npu", "cpu")
_VISIBLE = {"cuda": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"), "npu": ("ASCEND_RT_VISIBLE_DEVICES",)}
#: Set with a slot's visibility variable: CUDA numbers devices fastest-first unless told otherwise,
#: so without it `cuda:1` could name another card than nvidia-smi's GPU 1 on a mixed box.
_ORDER = {"cuda": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "npu": {}}
#: Every variable that selects which devices a process sees: what a child must be given as its
#: parent has it (ASCEND_VISIBLE_DEVICES is the Ascend container runtime's, forwarded if present).
SELECTION_VARS = (
    *(v for kind in ("cuda", "npu") for v in _VISIBLE[kind]),
    "CUDA_DEVICE_ORDER",
    "ASCEND_VISIBLE_DEVICES",
)
_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class DeviceError(SageError):
    """A --devices value that cannot be parsed, or too few slots for --workers."""


@dataclass(frozen=True)
class DeviceSlot:
    kind: str
    ids: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{self.kind}:{'+'.join(map(str, self.ids))}"

    def env(self) -> dict[str, str]:
        """Environment variables that pin a child process to this slot."""
        if self.kind == "cpu":
            return {var: str(len(self.ids)) for var in _THREADS}
        return {**{var: ",".join(map(str, self.ids)) for var in _VISIBLE[self.kind]}, **_ORDER[self.kind]}

    def cores(self) -> set[int] | None:
        return set(self.ids) if self.kind == "cpu" else None


def _cores(text: str, group: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split("+"):
        m = re.fullmatch(r"\s*(\d+)(?:\s*-\s*(\d+))?\s*", part)
        if not m:
            raise DeviceError(f"bad core set {text!r} in --devices {group!r}; write e.g. cpu:0-1,2-3")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise DeviceError(f"bad core range {part!r} in --devices {group!r}")
        out += range(lo, hi + 1)
    return tuple(sorted(set(out)))


def parse_devices(groups: list[str] | tuple[str, ...]) -> list[DeviceSlot]:
    slots: list[DeviceSlot] = []
    for group in groups:
        kind, sep, rest = group.strip().partition(":")
        kind = {"gpu": "cuda"}.get(kind.lower(), kind.lower())
        if not sep or kind not in KINDS or not rest.strip():
            raise DeviceError(f"--devices {group!r}: write cuda:0,1 or npu:0,1 or cpu:0-1,2-3")
        for item in rest.split(","):
            if kind == "cpu":
                slots.append(DeviceSlot("cpu", _cores(item, group)))
            elif re.fullmatch(r"\s*\d+\s*", item):
                slots.append(DeviceSlot(kind, (int(item),)))
            else:
                raise DeviceError(f"--devices {group!r}: {item!r} is not a device number")
    seen: dict[tuple[str, int], str] = {}
    for slot in slots:
        for i in slot.ids:
            key = ("cpu" if slot.kind == "cpu" else slot.kind, i)
            if key in seen:
                raise DeviceError(
                    f"--devices gives {slot.kind} {i} to two slots ({seen[key]} and "
                    f"{slot.label}); two streams must never share a device"
                )
            seen[key] = slot.label
    if any(s.kind == "cpu" for s in slots) and hasattr(os, "sched_getaffinity"):
        usable = os.sched_getaffinity(0)
        missing = sorted({i for s in slots if s.kind == "cpu" for i in s.ids} - usable)
        if missing:
            raise DeviceError(
                f"--devices names CPU core(s) {missing} this process cannot use (usable: {sorted(usable)})"
            )
    return slots


def pin_current_process(slot: DeviceSlot | None) -> None:
    """Pin this process (before any runtime initialises): environment and CPU affinity."""
    if slot is None:
        return
    os.environ.update(slot.env())
    cores = slot.cores()
    if cores is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)


def selection_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The device-selection variables set in `environ` (this process's by default): what every
    child of a pinned process must see, whoever builds its environment."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in SELECTION_VARS if k in env}


def split_device(device: str | None) -> tuple[str | None, DeviceSlot | None]:
    """`cuda:1` -> ("cuda", the slot for GPU 1); `npu:2` -> ("npu", NPU 2); `cuda` -> ("cuda", None).
    The name before the colon is the target's device; the number pins the process to one card."""
    if device is None or ":" not in device:
        return device, None
    name, _, index = device.partition(":")
    kind = {"gpu": "cuda"}.get(name.lower(), name.lower())
    if kind not in _VISIBLE:
        raise DeviceError(f"--device {device!r}: only cuda:N and npu:N pin a card ({name!r} has no cards)")
    if not re.fullmatch(r"\d+", index.strip()):
        raise DeviceError(f"--device {device!r}: {index!r} is not a device number")
    return kind, DeviceSlot(kind, (int(index),))


def slot_from_label(label: str | None) -> DeviceSlot | None:
    if not label:
        return None
    kind, _, ids = label.partition(":")
    return DeviceSlot(kind, tuple(int(i) for i in ids.split("+")))


#: The device nodes of this host's cards, which a sandbox binds for a device run.
def gpu_device_nodes() -> list[str]:
    """/dev/nvidia* nodes to bind for a CUDA run (only then)."""
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) + (
        [str(dev / "nvidia-caps")] if (dev / "nvidia-caps").exists() else []
    )


def npu_device_nodes() -> list[str]:
    """/dev/davinci* and the Ascend driver's nodes to bind for an NPU run (only then)."""
    dev = Path("/dev")
    names = ("davinci*", "davinci_manager", "devmm_svm", "hisi_hdc")
    return sorted({str(p) for pattern in names for p in dev.glob(pattern)})
