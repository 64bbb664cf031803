"""The parent's side of a round of the native CPU driver: the candidate's process holds nothing
the verdict trusts (docs/harness.md, "what the candidate can still reach").

The driver (targets/cpu/driver/sage_driver.c) stops itself with SIGSTOP where the protocol says,
after a frame naming the place. The parent never believes the frame: it waits until every thread
of the process is stopped (/proc/PID/task/*/stat), and only then

- at "ready": writes every call's inputs, output sentinels and guard bytes into the driver's
  buffers itself (/proc/PID/mem), and reads the process's kernel-accounted run time;
- at "called" (after the round's last call, or after every call in the quarantine's layout):
  reads the run time again, draws which calls it checks with its own randomness, and reads those
  calls' buffers (outputs, inputs, guards) while the process cannot run.

So: the randomness, the clock (kernel accounting between two stops, and everything since the
previous stop, so work at any other moment shows), the outputs (captured while stopped, the draw
made after the capture) and the input/guard checks are all the parent's. What the driver reports
(its own per-call clock, the floating-point environment) can only make a candidate look slower or
fail. Frames carry no payload; any payload, frame out of order or duplicate is tampering.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sagekernel.harness.runs import CallResult, Failure, RoundResult
from sagekernel.harness.verdict import Stage
from sagekernel.harness.wire import ALL, Arg, Frame

if TYPE_CHECKING:
    from sagekernel.harness.runs import RuntimeRun

#: The driver's buffer geometry (sage_driver.c: GUARD, TAIL_GUARD, GUARD_BYTE, buffer_size).
GUARD = 4096
TAIL_GUARD = 4096
GUARD_BYTE = 0xA5
PAGE = 4096
#: Polling for a stop the frame announced: the first checks are immediate, then back off to this.
STOP_POLL_MAX_S = 0.001


def buffer_size(nbytes: int) -> int:
    return (GUARD + max(1, nbytes) + TAIL_GUARD + PAGE - 1) // PAGE * PAGE


@dataclass(frozen=True)
class Spot:
    """One buffer in the driver: its mapping [base, base + size), data at base + GUARD."""

    base: int
    size: int
    nbytes: int

    @property
    def data(self) -> int:
        return self.base + GUARD


def layout(region: int, pad_pages: int, args: list[Arg], calls: int) -> list[list[Spot]]:
    """Per call position, the pointer arguments' buffers in ABI order (the driver's layout)."""
    at = region + pad_pages * PAGE
    out: list[list[Spot]] = []
    for _ in range(calls):
        row = []
        for a in args:
            if a.kind in ("in", "out"):
                row.append(Spot(at, buffer_size(a.nbytes), a.nbytes))
                at += buffer_size(a.nbytes)
        out.append(row)
    return out


def thread_states(pid: int) -> list[str] | None:
    """The scheduler state letter of every thread of `pid`, or None when the process is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    states = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # a thread that just exited
        states.append(chr(stat[stat.rindex(b")") + 2]))
    return states or None


def wait_stopped(pid: int, deadline: float) -> bool:
    """True once every thread of `pid` is stopped (group stop); False if it died or time ran out."""
    pause = 0.0
    while True:
        states = thread_states(pid)
        if states is None or any(s in "ZX" for s in states):
            return False
        if all(s in "Tt" for s in states):
            return True
        if time.monotonic() >= deadline:
            return False
        if pause:
            time.sleep(pause)
        pause = min(STOP_POLL_MAX_S, pause * 2 or 0.00002)


def first_difference(a: bytes, b: bytes) -> int:
    """The first index where a and b differ, -1 if equal (bisection over slices: C-speed compares)."""
    if a == b:
        return -1
    lo, hi = 0, min(len(a), len(b))
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if a[lo:mid] != b[lo:mid]:
            hi = mid
        else:
            lo = mid
    return next((i for i in range(lo, hi) if a[i] != b[i]), hi)


@dataclass
class SupervisedRound(RoundResult):
    """A round measured by the parent: `cpu_ns` is the kernel-accounted run time between the stop
    before the first call and the stop after the last; `outside_cpu_ns` everything the process ran
    since the previous round's last stop up to this round's first; `after_cpu_ns` what it ran from
    the last stop to its `round_end` frame."""

    outside_cpu_ns: int = 0
    after_cpu_ns: int = 0
    parent_wall_ns: int = 0  # the parent's clock from the resume to the confirmed stop(s)
    checked: list[int] = field(default_factory=list)  # the calls the parent drew and read


class Supervisor:
    """What the parent keeps about one driver process: its pid, its memory, its buffers."""

    def __init__(self, run: RuntimeRun) -> None:
        pid = run.session.host_pid()
        if pid is None:
            raise OSError("the driver's host pid is unknown")
        self.pid = pid
        self.mem = os.open(f"/proc/{pid}/mem", os.O_RDWR)
        plan = run.plan
        calls = max(len(r.calls) for r in plan.rounds) if plan.rounds else 1
        self.spots = layout(int(str(run.hello["region"])), plan.layout_pad_pages, plan.args, calls)
        self.pointer_args = [a for a in plan.args if a.kind in ("in", "out")]
        self.n_in = len(plan.inputs)
        self.output_images = [self._output_image(a) for a in plan.outputs]
        self.last_stop_cpu: int | None = None

    @staticmethod
    def _output_image(a: Arg) -> bytes:
        fill = a.fill or b"\0"
        data = (fill * (a.nbytes // len(fill) + 1))[: a.nbytes]
        size = buffer_size(a.nbytes)
        return bytes([GUARD_BYTE]) * GUARD + data + bytes([GUARD_BYTE]) * (size - GUARD - a.nbytes)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.mem)

    def fill(self, blob: bytes, calls: list[list[tuple[int, int]]]) -> None:
        """Every call's buffers: inputs from the round's blob, sentinel outputs, intact guards."""
        view = memoryview(blob)
        for c, spans in enumerate(calls):
            row = self.spots[c]
            for j, (off, n) in enumerate(spans):
                spot = row[j]
                head = bytes([GUARD_BYTE]) * GUARD
                tail = bytes([GUARD_BYTE]) * (spot.size - GUARD - spot.nbytes)
                os.pwrite(self.mem, head, spot.base)
                os.pwrite(self.mem, view[off : off + min(n, spot.nbytes)], spot.data)
                os.pwrite(self.mem, tail, spot.data + spot.nbytes)
            for k, image in enumerate(self.output_images):
                os.pwrite(self.mem, image, row[self.n_in + k].base)

    def read_call(self, blob: bytes, spans: list[tuple[int, int]], call: CallResult) -> None:
        """Outputs, changed inputs and guards of one call, read from the stopped process."""
        row = self.spots[call.call]
        outputs: list[bytes] = []
        changed: list[int] = []
        guards: list[bool] = []
        for j, spot in enumerate(row):
            raw = os.pread(self.mem, spot.size, spot.base)
            if len(raw) != spot.size:
                raise OSError("short read of a buffer")
            data = raw[GUARD : GUARD + spot.nbytes]
            guards.append(
                raw[:GUARD].count(GUARD_BYTE) == GUARD
                and raw[GUARD + spot.nbytes :].count(GUARD_BYTE) == spot.size - GUARD - spot.nbytes
            )
            if j < self.n_in:
                off, n = spans[j]
                changed.append(first_difference(data, blob[off : off + n]))
            else:
                outputs.append(data)
        call.outputs, call.inputs_changed, call.guards = outputs, changed, guards


def _wait_stop(run: RuntimeRun, sup: Supervisor, kind: str, where: str, deadline: float) -> Frame | Failure:
    frame = run.session.next_frame(max(0.0, deadline - time.monotonic()))
    if frame is None or frame.kind != kind:
        return run._protocol_or_end(frame, where, deadline - time.monotonic())
    if frame.payload:
        return run._forged(f"a '{kind}' frame carried a payload")
    if not wait_stopped(sup.pid, deadline):
        return run.ended(where, None, 0.0)
    return frame


def _resume(sup: Supervisor) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(sup.pid, signal.SIGCONT)


def supervised_round(
    run: RuntimeRun, blob: bytes, describe_call: list[str], timeout_s: float
) -> SupervisedRound | Failure:
    """One round of the supervised driver (the protocol in this module's docstring)."""
    r = run.round_index
    rnd = run.plan.rounds[r]
    run.round_index += 1
    n = len(rnd.calls)
    t_start = time.perf_counter_ns()
    deadline = time.monotonic() + timeout_s
    run._deadline = deadline
    sup: Supervisor | None = getattr(run, "supervisor", None)
    if sup is None:
        try:
            sup = Supervisor(run)  # before the first round: only the driver's own code has run
        except (OSError, ValueError, KeyError) as exc:
            return Failure(Stage.RUNTIME, f"the harness could not supervise the driver: {exc}")
        run.supervisor = sup
    start_cpu = run.session.cpu_ns()
    previous = sup.last_stop_cpu if sup.last_stop_cpu is not None else start_cpu
    if not run.session.send_control(b"G" + secrets.token_bytes(8)):
        return run.ended("while receiving its round")
    if not rnd.noop and not run.loaded:
        frame = run.session.next_frame(max(0.0, deadline - time.monotonic()))
        if frame is None or frame.kind != "loaded":
            if frame is not None and frame.kind == "load_error":
                error = frame.record.get("error")
                return Failure(Stage.LOAD, f"the built object could not be loaded: {error}")
            return run._protocol_or_end(frame, "while loading", timeout_s)
        run.loaded = True
    run.current = "the round's first call"
    got = _wait_stop(run, sup, "ready", "before its calls", deadline)
    if isinstance(got, Failure):
        return got
    try:
        sup.fill(blob, rnd.calls)
    except OSError as exc:
        return run.ended(f"while the harness wrote its inputs ({exc})")
    cpu_a = run.session.cpu_ns()
    wall_a = time.perf_counter_ns()
    _resume(sup)
    calls = [CallResult(i, 0, [], [], "ok") for i in range(n)]
    stops = range(n) if run.plan.stop_every_call else [n - 1][:n]  # a round of no calls never stops
    windows: list[int | None] = []
    last_cpu, cpu_b = cpu_a, cpu_a
    parent_wall = 0
    checked: list[int] = []
    for c in stops:
        run.current = describe_call[c] if c < len(describe_call) else f"call {c}"
        got = _wait_stop(run, sup, "called", f"during the call on the {run.current}", deadline)
        if isinstance(got, Failure):
            return got
        if got.record.get("call") != c:
            return run._forged(f"a stop after call {got.record.get('call')} where call {c} was due")
        parent_wall += time.perf_counter_ns() - wall_a
        cpu_b = run.session.cpu_ns()
        if cpu_b is not None and last_cpu is not None:
            windows.append(cpu_b - last_cpu)
        last_cpu = cpu_b
        # Drawn now: after the outputs it picks from are final (the process cannot run).
        if run.plan.stop_every_call:
            chosen = [c]
        elif rnd.returned == ALL:
            chosen = list(range(n))
        else:
            chosen = sorted(secrets.SystemRandom().sample(range(n), min(int(rnd.returned), n)))
        try:
            for i in chosen:
                sup.read_call(blob, rnd.calls[i], calls[i])
        except OSError as exc:
            run.session.kill()  # it is stopped: nothing else would end it
            return Failure(
                Stage.INTEGRITY,
                f"the harness could not read {run.what}'s buffers after the {run.current} ({exc}): "
                "a kernel must leave its argument buffers mapped and readable",
                ["buffers_unreadable"],
            )
        checked += chosen
        wall_a = time.perf_counter_ns()
        _resume(sup)
    sup.last_stop_cpu = cpu_b
    for i in range(n):
        run.current = describe_call[i] if i < len(describe_call) else f"call {i}"
        frame = run.session.next_frame(max(0.0, deadline - time.monotonic()))
        if frame is None or frame.kind != "done":
            return run._protocol_or_end(frame, f"after the call on the {run.current}", timeout_s)
        if frame.payload or frame.record.get("call") != i:
            return run._forged(f"a result for call {frame.record.get('call')} arrived where call {i} was due")
        fpenv = str(frame.record.get("fpenv", "ok"))
        if fpenv != "ok":
            return Failure(
                Stage.INTEGRITY,
                f"{run.what} changed the floating-point environment on the {run.current} ({fpenv}): "
                "rounding modes, flush-to-zero and exception masks belong to the harness",
                ["fp_environment"],
            )
        calls[i].ns = int(frame.record.get("ns") or 0)
        calls[i].fpenv = fpenv
        if run.plan.stop_every_call and i < len(windows):
            calls[i].cpu_ns = windows[i]
    frame = run.session.next_frame(max(0.0, deadline - time.monotonic()))
    if frame is None or frame.kind != "round_end":
        return run._protocol_or_end(frame, "after its calls", timeout_s)
    if frame.payload or frame.record.get("round") != r:
        return run._forged(f"round {frame.record.get('round')} ended where round {r} was due")
    end_cpu = run.session.cpu_ns()
    known = None not in (cpu_a, cpu_b, previous)
    return SupervisedRound(
        calls,
        (cpu_b - cpu_a) if known and cpu_b is not None and cpu_a is not None else None,
        time.perf_counter_ns() - t_start,
        outside_cpu_ns=(cpu_a - previous) if known and cpu_a is not None and previous is not None else 0,
        after_cpu_ns=(end_cpu - cpu_b) if end_cpu is not None and cpu_b is not None else 0,
        parent_wall_ns=parent_wall,
        checked=checked,
    )


__all__ = [
    "Spot",
    "SupervisedRound",
    "Supervisor",
    "buffer_size",
    "layout",
    "supervised_round",
    "wait_stopped",
]
