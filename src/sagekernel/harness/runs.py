"""Drive one runtime process through its plan, round by round, and authenticate every frame.

`RuntimeRun` starts the sandboxed runtime a target describes (`RuntimeSpec`), waits for it to
load the artifact, then runs rounds: send the round's inputs, read exactly the frames the
protocol allows (one `done` per call in order, `outputs` for distinct calls, `round_end`), and
read the process's kernel-accounted CPU time around the round. The evidence a runtime reports
beside its results (replaced functions, threads, output storage and type, refused host ops) is
judged as the frames arrive (runtime_evidence.py). Anything else -- a frame out of
order, a duplicate, a forbidden system call, a changed floating-point environment -- ends the run
with a `Failure` naming what happened and which limit, if any, stopped it. The native CPU
driver's rounds are supervised by the parent instead (harness/supervised.py).
"""

from __future__ import annotations

import signal as signal_mod
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel import sandbox
from sagekernel.harness import runtime_evidence as evidence
from sagekernel.harness import runtime_memory
from sagekernel.harness.session import Exit, Session
from sagekernel.harness.verdict import Stage
from sagekernel.harness.wire import ALL, Plan, encode_binary, encode_json
from sagekernel.seam import RuntimeSpec

SIGNAL_HINTS = {
    "SIGSEGV": "segmentation fault: an out-of-bounds or NULL pointer access (allocations beyond the "
    "memory limit return NULL)",
    "SIGBUS": "bus error: misaligned or invalid memory access",
    "SIGFPE": "arithmetic exception, e.g. integer division by zero",
    "SIGABRT": "abort() or a failed assert",
    "SIGILL": "illegal instruction",
    "SIGXCPU": "the CPU-time limit (RLIMIT_CPU) was reached",
    "SIGXFSZ": "the file-size limit (RLIMIT_FSIZE) was reached",
    "SIGKILL": "killed by the harness or the kernel's out-of-memory handling",
    "SIGSYS": "a system call the sandbox forbids",
}


def signal_text(sig: int) -> str:
    names = {s.value: s.name for s in signal_mod.Signals}
    name = names.get(sig, f"signal {sig}")
    return f"{name} ({SIGNAL_HINTS[name]})" if name in SIGNAL_HINTS else name


@dataclass
class Failure:
    stage: Stage
    message: str
    flags: list[str] = field(default_factory=list)


@dataclass
class CallResult:
    call: int
    ns: int
    inputs_changed: list[int]
    guards: list[bool]
    fpenv: str
    outputs: list[bytes] | None = None  # present for the calls the round returned
    wall_ns: int | None = None  # device runtimes: host wall clock around launch + synchronise
    cpu_ns: int | None = None  # native driver, quarantine layout: accounted run time since the last stop
    in_spans: list[list[int]] = field(default_factory=list)  # host-memory inputs (runtime_memory.py)


@dataclass
class RoundResult:
    calls: list[CallResult]
    cpu_ns: int | None  # kernel-accounted run time of the runtime during the round
    wall_ns: int
    ref_ns: list[int] = field(default_factory=list)  # in-process reference times (device runtimes)


class RuntimeRun:
    """One runtime process and its plan."""

    def __init__(
        self,
        spec: RuntimeSpec,
        plan: Plan,
        *,
        kind: str,
        limits: sandbox.Limits,
        scratch: Path,
        what: str = "the kernel",
        session_factory: Any = None,
        reference_in_process: bool = False,
    ) -> None:
        self.reference_in_process = reference_in_process
        self.reports = spec.reports
        self.baseline = evidence.Baseline()
        self.expected_outputs = [(a.dtype, tuple(a.shape)) for a in plan.outputs]
        self.plan = plan
        self.what = what
        self.out_sizes = [a.nbytes for a in plan.outputs]
        # A native runtime resolves the kernel by the symbol its target names (the CPU contract's).
        request = (encode_json(plan) if spec.python
                   else encode_binary(plan, str(spec.artifact_record["symbol"])))
        cmd = sandbox.SandboxCommand(
            argv=list(spec.argv),
            ro_binds=list(spec.ro_binds),
            env={**sandbox.thread_env(plan.threads), **spec.env},
            python=spec.python,
            device_nodes=list(spec.device_nodes),
        )
        if kind != "bwrap":
            cmd.argv = [sandbox.translate(kind, a, cmd) if a.startswith("/box") else a for a in cmd.argv]
        factory = session_factory or Session
        self.session = factory(
            cmd, kind=kind, limits=limits, scratch=scratch, request=request, nonce=plan.nonce
        )
        self.hello: dict[str, object] = {}
        self.round_index = 0
        self.loaded = False
        self.loaded_record: dict[str, object] = {}
        self.input_memory = "not reported"  # whether the harness checked inputs in the runtime's memory
        self.current: str = ""  # what the runtime was doing, for messages
        self.supervisor: Any = None  # the native driver's parent-side state (harness/supervised.py)

    # ---- start ----------------------------------------------------------------------------------

    def started(self) -> Failure | None:
        frame = self.session.next_frame()
        if frame is None or frame.kind != "hello":
            return self.ended("while starting", frame.record.get("error") if frame else None)
        self.hello = dict(frame.record)
        return None

    # ---- rounds ---------------------------------------------------------------------------------

    def run_round(self, blob: bytes, describe_call: list[str], timeout_s: float) -> RoundResult | Failure:
        """Run the next round of the plan; `describe_call[i]` names call i for messages."""
        if self.hello.get("supervised"):  # the native CPU driver: the parent fills, stops and reads it
            from sagekernel.harness.supervised import supervised_round

            return supervised_round(self, blob, describe_call, timeout_s)
        r = self.round_index
        rnd = self.plan.rounds[r]
        self.round_index += 1
        cpu0 = self.session.cpu_ns()
        t0 = time.perf_counter_ns()
        if not self.session.send_round(blob):
            return self.ended("while receiving its inputs")
        deadline = time.monotonic() + timeout_s
        self._deadline = deadline
        if not rnd.noop and not self.loaded:
            frame = self.session.next_frame(max(0.0, deadline - time.monotonic()))
            if frame is None or frame.kind != "loaded":
                if frame is not None and frame.kind == "load_error":
                    return Failure(
                        Stage.LOAD, f"the built object could not be loaded: {frame.record.get('error')}"
                    )
                return self._protocol_or_end(frame, "while loading", timeout_s)
            self.loaded = True
            self.loaded_record = dict(frame.record)
            if "seccomp" in frame.record:  # the state the candidate's calls run under
                self.hello["seccomp"] = frame.record["seccomp"]
            found = evidence.judge_loaded(frame.record, self.reports, self.what, self.baseline)
            if found:
                return self._finding(found)
        calls: list[CallResult] = []
        ref_ns: list[int] = []
        want_ref = len(rnd.calls) if self.reference_in_process and not rnd.noop else 0
        while len(calls) < len(rnd.calls) or len(ref_ns) < want_ref:
            i = len(calls)
            self.current = describe_call[i] if i < len(describe_call) else f"call {i}"
            frame = self.session.next_frame(max(0.0, deadline - time.monotonic()))
            if frame is not None and frame.kind == "ref_done" and len(ref_ns) < want_ref:
                if frame.record.get("call") != len(ref_ns):
                    return self._forged(
                        f"a reference time for call {frame.record.get('call')} arrived out of order"
                    )
                ref_ns.append(int(frame.record.get("ns", 0)))
                continue
            if frame is None or frame.kind != "done" or i >= len(rnd.calls):
                return self._protocol_or_end(frame, f"during the call on the {self.current}", timeout_s)
            rec = frame.record
            if rec.get("call") != i:
                return self._forged(f"a result for call {rec.get('call')} arrived where call {i} was due")
            fpenv = str(rec.get("fpenv", "ok"))
            if fpenv != "ok":
                return Failure(
                    Stage.INTEGRITY,
                    f"{self.what} changed the floating-point environment on the "
                    f"{self.current} ({fpenv}): rounding modes, flush-to-zero and exception masks "
                    "belong to the harness",
                    ["fp_environment"],
                )
            found = evidence.judge_done(rec, self.reports, self.what, self.current, self.baseline)
            if found:
                return self._finding(found)
            calls.append(
                CallResult(
                    i,
                    int(rec.get("ns") or 0),
                    list(rec.get("inputs_changed", [])),
                    [bool(g) for g in rec.get("guards", [])],
                    fpenv,
                    wall_ns=int(rec.get("wall_ns", 0)) or None,
                    in_spans=list(rec.get("in_spans") or []),
                )
            )
        expected_returned = len(rnd.calls) if rnd.returned == ALL else min(int(rnd.returned), len(rnd.calls))
        returned: set[int] = set()
        while True:
            frame = self.session.next_frame(max(0.0, deadline - time.monotonic()))
            if frame is None:
                return self.ended("while returning its outputs", None, timeout_s)
            if frame.kind == "round_end":
                break
            if frame.kind != "outputs":
                return self._protocol_or_end(frame, "after its calls", timeout_s)
            c = frame.record.get("call")
            if not isinstance(c, int) or c in returned or not 0 <= c < len(calls):
                return self._forged(f"outputs for call {c} arrived twice or out of range")
            returned.add(c)
            where = describe_call[c] if c < len(describe_call) else f"call {c}"
            found = evidence.judge_outputs(
                frame.record, self.reports, self.expected_outputs, self.what, where, self.baseline
            )
            if found:
                return self._finding(found)
            calls[c].outputs = self._split(frame.payload)
            if calls[c].outputs is None:
                return self._forged(f"outputs for call {c} had the wrong size")
        if frame.record.get("round") != r or len(returned) != expected_returned:
            return self._forged(
                f"round {r} ended with {len(returned)} outputs where {expected_returned} were due"
            )
        found = evidence.judge_round_end(frame.record, self.reports, self.what, self.baseline)
        if found:
            return self._finding(found)
        changed = self._inputs_in_memory(rnd, blob, calls, describe_call)
        if changed is not None:
            return changed
        cpu1 = self.session.cpu_ns()
        cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
        return RoundResult(calls, cpu, time.perf_counter_ns() - t0, ref_ns)

    def _inputs_in_memory(
        self, rnd: Any, blob: bytes, calls: list[CallResult], describe_call: list[str]
    ) -> Failure | None:
        """Each call's inputs, read by the harness from the runtime's memory and compared with the
        bytes it sent (runtime_memory.py); the runtime waits for its next control byte meanwhile."""
        pid = self.session.host_pid()
        for call in calls:
            if not call.in_spans:
                continue
            if pid is None:
                self.input_memory = "not checked: the runtime's pid is unknown"
                return None
            expected = [bytes(blob[off : off + n]) for off, n in rnd.calls[call.call]]
            found = runtime_memory.check_inputs(pid, call.in_spans, expected)
            if isinstance(found, str):
                self.input_memory = f"not checked: {found}"
                return None
            if found is not None:
                where = describe_call[call.call] if call.call < len(describe_call) else f"call {call.call}"
                self.session.kill()
                what = (
                    f"modified its input {found.input_index} (first changed byte {found.offset})"
                    if found.what == "input"
                    else f"wrote outside input {found.input_index} (guard byte {found.offset} changed)"
                )
                return Failure(
                    Stage.CORRECTNESS,
                    f"{self.what} {what} on the {where}, as the harness read it from the runtime's "
                    "memory after the round; inputs are read-only",
                    ["inputs_changed"],
                )
        self.input_memory = "checked"
        return None

    @property
    def _round_expired(self) -> bool:
        return time.monotonic() >= getattr(self, "_deadline", float("inf"))

    def _split(self, payload: bytes) -> list[bytes] | None:
        if len(payload) != sum(self.out_sizes):
            return None
        pieces, pos = [], 0
        for n in self.out_sizes:
            pieces.append(payload[pos : pos + n])
            pos += n
        return pieces

    def _finding(self, found: evidence.Finding) -> Failure:
        self.session.kill()
        return Failure(found.stage, found.message, [found.flag])

    def _forged(self, what: str) -> Failure:
        self.session.kill()
        return Failure(
            Stage.INTEGRITY,
            f"the result channel broke the protocol: {what}. Only the runtime "
            f"writes there; {self.what} must not write to file descriptors",
            ["channel_tampering"],
        )

    def _protocol_or_end(self, frame: object, where: str, timeout_s: float) -> Failure:
        from sagekernel.harness.wire import Frame

        if isinstance(frame, Frame):
            if frame.kind == "forbidden_syscall":
                self.session.kill()
                return Failure(
                    Stage.INTEGRITY,
                    f"{self.what} made a system call the sandbox forbids "
                    f"(number {frame.record.get('nr')}) {where}: kernels may not open files, start "
                    "processes or threads, map executable memory or touch signals",
                    ["forbidden_syscall"],
                )
            if frame.kind == "error":
                self.session.kill()
                return Failure(Stage.RUNTIME, f"the runtime failed {where}: {frame.record.get('error')}")
            if frame.kind == "call_error":
                self.session.kill()
                if frame.record.get("refused"):  # the host guard refused an op, and the call died of it
                    found = evidence.judge_done(
                        frame.record, frozenset(), self.what, self.current, self.baseline
                    )
                    if found:
                        return Failure(found.stage, found.message, [found.flag])
                side = frame.record.get("side", "candidate")
                who = self.what if side == "candidate" else "the reference"
                return Failure(Stage.RUNTIME, f"{who} raised {where}: {frame.record.get('error')}")
            return self._forged(f"a '{frame.kind}' frame arrived {where}")
        return self.ended(where, None, timeout_s)

    # ---- end ------------------------------------------------------------------------------------

    def ended(self, where: str, error: object = None, timeout_s: float | None = None) -> Failure:
        """Why the runtime stopped answering, naming the limit when a limit stopped it."""
        if not self.session.out_of_time and not self.session.stream.problem:
            self.session.wait_exit(2.0)  # it closed its channel: let it finish dying
        alive = self.session.alive() and (
            self.session.out_of_time or (timeout_s is not None and self._round_expired)
        )
        if self.session.alive():
            self.session.kill()
        exit_: Exit = self.session.close()
        if self.session.stream.problem:
            return self._forged_text(self.session.stream.problem, where)
        if alive and timeout_s is not None and not self.session.stream.problem:
            total = self.session.limits.wall_s
            return Failure(
                Stage.RUNTIME,
                f"timed out: {self.what} did not finish {where} within the harness's limit of "
                f"{timeout_s:.3g} s for this round (wall-clock; the whole run may take {total:.3g} s). "
                "An infinite loop, or a kernel far slower than the reference at these sizes",
                ["timeout"],
            )
        sig = exit_.signal
        if sig == signal_mod.SIGSYS:
            # The seccomp trap killed it outright: the candidate had blocked SIGSYS (glibc does around
            # clone3), so the driver's handler could not report the call. Still a forbidden call.
            return Failure(
                Stage.INTEGRITY,
                f"{self.what} made a system call the sandbox forbids {where} "
                "(killed by SIGSYS with the signal blocked): kernels may not open files, start "
                "processes or threads, map executable memory or touch signals",
                ["forbidden_syscall"],
            )
        if sig is not None:
            extra = " (the process's address-space limit is "
            extra += (
                f"{self.session.limits.address_space_bytes / 2**30:.3g} GiB)"
                if (self.session.limits.address_space_bytes and sig == signal_mod.SIGSEGV)
                else ""
            )
            return Failure(
                Stage.RUNTIME,
                f"the process died from {signal_text(sig)} {where}" + (extra if extra.endswith(")") else ""),
            )
        detail = f": {error}" if error else (f": {exit_.tail.strip()[-400:]}" if exit_.tail.strip() else "")
        return Failure(Stage.RUNTIME, f"the runtime exited (status {exit_.returncode}) {where}{detail}")

    def _forged_text(self, problem: str, where: str) -> Failure:
        return Failure(
            Stage.INTEGRITY,
            f"the result channel carried {problem} {where}; only the runtime writes there",
            ["channel_tampering"],
        )

    def finish(self) -> Exit:
        if self.supervisor is not None:
            self.supervisor.close()
        return self.session.close()


__all__ = ["CallResult", "Failure", "RoundResult", "RuntimeRun", "signal_text"]
