"""Local workers: up to N streams at once, each a child process pinned to its own device slot.

Processes, not threads: the harness runs subprocesses and a device runtime (CUDA, CANN) is per
process, so a child per stream is the robust unit; pinning is its environment and CPU affinity
set before anything initialises (worker.py). A donor runs before its recipients; a failed donor
blocks them, the other streams go on. Children get SIGTERM from the kernel when the experiment
process dies (PR_SET_PDEATHSIG, also on kill -9), so a killed experiment leaves no orphan holding
a workspace; rerunning it resumes every unfinished stream and skips the finished ones.

The embedded local model (`local`) is one process-wide llama.cpp instance: streams that use it are
run as threads of ONE worker process that shares the instance (its calls are serialised by the
instance's lock; evaluations of the streams overlap). Only one such process runs at a time, so
the weights are never loaded twice and two streams never run on the model at once; it takes
one worker and one device slot, and up to --workers of the ready local streams.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sagekernel.devices import DeviceError, DeviceSlot
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.plan import StreamPlan, order

POLL_S = 0.25


@dataclass
class _Job:
    names: list[str]
    slot: DeviceSlot | None
    proc: subprocess.Popen[bytes]
    local_model: bool


@dataclass
class ExperimentOutcome:
    finished: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # name -> why
    blocked: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.blocked


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: a killed experiment may leave its children running
        pass


def _env(slot: DeviceSlot | None) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the sagekernel package this process runs
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if slot is not None:
        env.update(slot.env())
    return env


def _start(exp: ExperimentDir, names: list[str], slot: DeviceSlot | None, local_model: bool) -> _Job:
    log = exp.log(names[0] if len(names) == 1 else f"local-model-{names[0]}")
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "sagekernel.experiment.worker", str(exp.root), *names]
    if slot is not None:
        cmd += ["--device", slot.label]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_env(slot),
            preexec_fn=_die_with_parent,
        )
    return _Job(names, slot, proc, local_model)


def donors_done_outside(exp: ExperimentDir, streams: list[StreamPlan], pending: list[StreamPlan]) -> set[str]:
    """Finished donors that this invocation does not run (--stream selected their recipients)."""
    names = {s.name for s in pending}
    return {s.donor for s in pending if s.donor and s.donor not in names and exp.finished(s.donor)}


def check_workers(workers: int, slots: list[DeviceSlot]) -> None:
    if workers < 1:
        raise DeviceError(f"--workers must be >= 1, got {workers}")
    if slots and workers > len(slots):
        raise DeviceError(
            f"--workers {workers} needs {workers} device slots so that no two streams share "
            f"one; --devices gives {len(slots)} ({', '.join(s.label for s in slots)})"
        )


def run_local(
    exp: ExperimentDir,
    streams: list[StreamPlan],
    *,
    workers: int = 1,
    slots: list[DeviceSlot] | None = None,
    tick: Callable[[], None] | None = None,
    only: set[str] | None = None,
) -> ExperimentOutcome:
    """Run every unfinished stream (or those in `only`) to its end; donors first."""
    slots = list(slots or [])
    check_workers(workers, slots)
    started = time.monotonic()
    result = ExperimentOutcome()
    pending = [s for s in order(streams) if only is None or s.name in only]
    for s in list(pending):
        if exp.finished(s.name):
            result.finished.append(s.name)
            pending.remove(s)
    outside = donors_done_outside(exp, streams, pending)
    running: list[_Job] = []
    free = list(slots)
    try:
        while pending or running:
            for job in list(running):
                code = job.proc.poll()
                if code is None:
                    continue
                running.remove(job)
                if job.slot is not None:
                    free.append(job.slot)
                for name in job.names:
                    if exp.finished(name):
                        result.finished.append(name)
                    else:
                        outcome = exp.outcome(name)
                        why = outcome.message if outcome and outcome.state != "running" else ""
                        result.failed[name] = (
                            why or f"its worker exited with status {code} (see {exp.log(name)})"
                        )
            failed_or_blocked = set(result.failed) | set(result.blocked)
            for s in list(pending):
                if s.donor in failed_or_blocked:
                    pending.remove(s)
                    result.blocked.append(s.name)
            ready = [
                s for s in pending if s.donor is None or s.donor in result.finished or s.donor in outside
            ]
            local_busy = any(j.local_model for j in running)
            while ready and len(running) < workers and (free or not slots):
                first = ready[0]
                if first.uses_local_model:
                    if local_busy:
                        ready = [s for s in ready if not s.uses_local_model]
                        continue
                    batch = [s for s in ready if s.uses_local_model][:workers]
                    local_busy = True
                else:
                    batch = [first]
                slot = free.pop(0) if slots else None
                running.append(_start(exp, [s.name for s in batch], slot, first.uses_local_model))
                for s in batch:
                    pending.remove(s)
                    ready.remove(s)
            if tick is not None:
                tick()
            if pending and not running and not ready:
                # nothing can start: only recipients of donors that are not done (cannot happen
                # after order(), kept as a guard against a stuck loop)
                for s in pending:
                    result.blocked.append(s.name)
                pending.clear()
            time.sleep(POLL_S)
    except BaseException:
        for job in running:  # Ctrl-C / an error here: stop the children, they record what finished
            if job.proc.poll() is None:
                job.proc.send_signal(signal.SIGTERM)
        for job in running:
            try:
                job.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                job.proc.kill()
        raise
    if tick is not None:
        tick()
    result.wall_s = time.monotonic() - started
    return result
