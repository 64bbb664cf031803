"""The device's peak bandwidth and compute for the roofline score (issue 31).

- **CPU**: measured once per machine by a probe compiled here with the CPU target's compiler and
  `-O3 -march=native` (probes/peak_probe.c): one thread's STREAM triad bandwidth at working sets of
  256 KiB, 4 MiB, 32 MiB and 512 MiB (`WORKING_SETS`: caches to DRAM), and its fused-multiply-add
  throughput on independent vector chains; the best of 7 repeats each, as STREAM reports, timed by
  the thread's CPU clock (a preempted repeat on a shared machine does not read low; the harness
  charges a CPU kernel its accounted run time too). A call moving B bytes is bounded by the
  bandwidth of the smallest probed working set that holds B (`bandwidth_for`): its inputs were just
  written by the parent, so they may sit in a cache, and a cache's bandwidth is the stricter bound.
  The figures are cached in the user's cache dir
  (`SAGE_CACHE_DIR` or platformdirs' `sagekernel`), keyed by the CPU's model name, core count and
  compiler; `sage peaks --reprobe` measures again. A kernel given T threads is bounded by T times
  one thread's peaks (an upper bound: bandwidth does not scale that well, so fractions err low).
- **GPUs, Ascend NPUs**: the datasheet table (datasheets.py), by the device's reported name.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError
from sagekernel.harness.datasheets import lookup

PROBE_SOURCE = Path(__file__).resolve().parent / "probes" / "peak_probe.c"
#: The triad's working sets (bytes; three arrays of doubles), and the FMA loop's iterations (about a
#: tenth of a second per repeat on a 3 GHz core).
WORKING_SETS = (256 << 10, 4 << 20, 32 << 20, 512 << 20)
FMA_ITERATIONS = 20_000_000
PROBE_TIMEOUT_S = 120.0
CACHE_VERSION = 2


class ProbeError(SageError):
    """The CPU peak probe could not be built or run (named; the roofline is then left out)."""


@dataclass(frozen=True)
class Peaks:
    """One device's peaks: bytes/s, and FLOP/s by element type (float32 only for a probed CPU)."""

    device: str
    bandwidth_bytes_per_s: float  # the largest working set's (DRAM / HBM)
    flops_per_s: dict[str, float] = field(default_factory=dict)
    source: str = ""  # "probe" (measured here) or the datasheet row's source
    threads: int = 1  # the figures are for this many threads (0: the whole device)
    detail: dict[str, Any] = field(default_factory=dict)
    #: (working-set bytes, bytes/s) from the smallest working set up (a probed CPU); empty: one figure
    bandwidth_by_working_set: tuple[tuple[int, float], ...] = ()

    def bandwidth_for(self, nbytes: int) -> float:
        """The bandwidth bounding a call that moves `nbytes`: the smallest probed working set that
        holds it, else the largest's (DRAM)."""
        for size, rate in self.bandwidth_by_working_set:
            if nbytes <= size:
                return rate
        return self.bandwidth_bytes_per_s

    def scaled(self, threads: int) -> Peaks:
        """The peaks of `threads` threads: one thread's times T for a probed CPU (an upper bound)."""
        if self.source != "probe" or threads == self.threads:
            return self
        k = threads / self.threads
        flops = {t: f * k for t, f in self.flops_per_s.items()}
        return Peaks(self.device, self.bandwidth_bytes_per_s * k, flops, self.source, threads, self.detail,
                     tuple((size, rate * k) for size, rate in self.bandwidth_by_working_set))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compiler_version(compiler: str = "gcc") -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unavailable"
    return (out.stdout.splitlines() or ["unknown"])[0].strip()


def cache_path() -> Path:
    from platformdirs import user_cache_dir

    return Path(os.environ.get("SAGE_CACHE_DIR") or user_cache_dir("sagekernel")) / "peaks" / "cpu.json"


def machine_key() -> dict[str, Any]:
    """What the cached figures are valid for: another CPU, core count or compiler probes again."""
    return {"version": CACHE_VERSION, "cpu": cpu_model(), "cores": os.cpu_count() or 1,
            "machine": platform.machine(), "compiler": compiler_version()}


def probe_cpu(compiler: str = "gcc", working_sets: tuple[int, ...] | None = None,
              iterations: int | None = None) -> Peaks:
    """Build and run the probe now (a few seconds): one thread's triad bandwidths and FMA rate
    (`WORKING_SETS` and `FMA_ITERATIONS` unless given)."""
    working_sets = WORKING_SETS if working_sets is None else working_sets
    iterations = FMA_ITERATIONS if iterations is None else iterations
    with tempfile.TemporaryDirectory(prefix="sage-peaks-") as tmp:
        exe = Path(tmp) / "peak_probe"
        built = subprocess.run([compiler, "-O3", "-march=native", "-fno-fast-math", "-o", str(exe),
                                str(PROBE_SOURCE)], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                               check=False)
        if built.returncode != 0:
            raise ProbeError(f"the peak probe did not build with {compiler}: {built.stderr.strip()[:500]}")
        t0 = time.perf_counter()
        argv = [str(exe), str(iterations), *map(str, working_sets)]
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        seconds = time.perf_counter() - t0
    if ran.returncode != 0:
        raise ProbeError(f"the peak probe failed (exit {ran.returncode}): {ran.stdout.strip()[:300]}")
    try:
        raw = json.loads(ran.stdout)
    except json.JSONDecodeError as exc:
        raise ProbeError(f"the peak probe printed no JSON: {ran.stdout[:300]!r}") from exc
    detail = {**raw, "seconds": round(seconds, 3), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                time.gmtime()),
              **machine_key()}
    levels = tuple(sorted((int(t["working_set_bytes"]), float(t["bytes_per_s"])) for t in raw["triad"]))
    if not levels:
        raise ProbeError("the peak probe measured no bandwidth")
    return Peaks(f"cpu: {cpu_model()}", levels[-1][1], {"float32": float(raw["fma_flops_per_s"])}, "probe", 1,
                 detail, levels)


def cpu_peaks(reprobe: bool = False) -> Peaks:
    """This machine's CPU peaks: the cached probe when it was made on this machine, else a new one."""
    path = cache_path()
    key = machine_key()
    if not reprobe:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("key") == key:
                p = data["peaks"]
                return Peaks(p["device"], float(p["bandwidth_bytes_per_s"]),
                             {k: float(v) for k, v in p["flops_per_s"].items()}, p["source"],
                             int(p["threads"]), dict(p.get("detail", {})),
                             tuple((int(a), float(b)) for a, b in p.get("bandwidth_by_working_set", [])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    peaks = probe_cpu()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "peaks": peaks.to_dict()}, indent=2), encoding="utf-8")
    tmp.replace(path)
    return peaks


def datasheet_peaks(device_name: str) -> Peaks | None:
    row = lookup(device_name)
    if row is None:
        return None
    return Peaks(row.name, row.bandwidth_bytes_per_s, dict(row.flops_per_s), row.source, 0,
                 {"reported_name": device_name})


def accelerator_name(target: str, device: str) -> str | None:
    """The accelerator's reported name, where this process can see it (None: unknown here)."""
    try:
        import torch

        if target in ("triton", "cuda") and torch.cuda.is_available():
            index = int(device.split(":", 1)[1]) if ":" in device else 0
            return str(torch.cuda.get_device_name(index))
        npu = getattr(torch, "npu", None)
        if target == "ascendc" and npu is not None and npu.is_available():
            return str(npu.get_device_name(0))
    except (ImportError, RuntimeError, ValueError, AssertionError):
        return None
    return None


def device_peaks(target: str, device: str, threads: int = 1) -> tuple[Peaks | None, str]:
    """(the peaks the roofline uses for this target's device, why there are none)."""
    if target == "cpu":
        try:
            return cpu_peaks().scaled(threads), ""
        except (ProbeError, OSError, subprocess.SubprocessError) as exc:
            return None, f"the CPU peak probe failed: {exc}"
    name = accelerator_name(target, device)
    if name is None:
        return None, f"the {target} device's name is not visible here: no datasheet peaks"
    peaks = datasheet_peaks(name)
    return (peaks, "") if peaks else (None, f"no datasheet row for {name!r} (harness/datasheets.py)")


__all__ = ["Peaks", "ProbeError", "cpu_peaks", "device_peaks", "probe_cpu"]
