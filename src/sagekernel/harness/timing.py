"""The timing stage: candidate and reference in two sandboxed processes, rounds interleaved.

Only correct candidates get here. The protocol (eval_integrity.md §3b-c):
- every timed call (warm-up included) sees inputs it has never seen: each call gets its own
  secret-seeded input set, streamed to the runtime only when its round starts, and outputs freshly
  filled with the sentinel; fewer calls are timed when the inputs are large (the budget), never
  fewer distinct inputs;
- after every round the runtime returns the outputs of `recheck_per_round` calls it draws after
  the round ran; each is compared with a float64-derived reference computed here;
- a round's time is the sum of its calls' times (so work shifted from one call to another is
  still counted); the speedup is the median of per-round ratios;
- the reference runs in its own process (children/reference_runner.py): `calibration_rounds` of
  it are timed before the candidate is loaded, and the rest interleaved in random order;
- the native driver is supervised (supervised.py): the parent writes its inputs, stops it around
  the round's calls and reads the outputs it draws after the round; the candidate's time is the
  kernel-accounted run time of its process between those stops, less the driver's own no-op round,
  plus whatever it ran outside them beyond the no-op round's share (`charged_round_ns`): every
  moment of the process is charged, so work in a handler, between rounds or after a window shows.
  The driver's own per-call clock counts only where it is larger. The quarantine measures
  differently: a stop after every call, so the accounting is per call and every output is read at
  its call's return, and the buffers at another address. A claim far below the accounted time is
  `timer_mismatch`, work outside the windows beyond noise `work_outside_timed_window`;
- the candidate's process must be idle while the reference runs (`candidate_active_during_reference`),
  and the reference must not slow down once the candidate is loaded (`reference_disturbed`).
Flags in QUARANTINE_FLAGS make the verdict suspect until a fresh re-measurement clears them
(evaluate.py).
"""

from __future__ import annotations

import secrets
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel import sandbox
from sagekernel.harness.baseline import reference_file_size
from sagekernel.harness.charging import baseline, charge
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.runs import Failure, RoundResult, RuntimeRun
from sagekernel.harness.supervised import SupervisedRound
from sagekernel.harness.timed_recheck import param_seed, recheck
from sagekernel.harness.trials import Trial, kernel_args, pack_sets
from sagekernel.harness.verdict import Stage
from sagekernel.harness.warm import WarmSession
from sagekernel.harness.wire import Plan, Round
from sagekernel.seam import RuntimeSpec
from sagekernel.tasks.frames import nbytes
from sagekernel.tasks.loader import build_inputs, reference_outputs
from sagekernel.tasks.record import task_to_json
from sagekernel.tasks.reference import init_arguments, input_sets, param_tensors
from sagekernel.tasks.task import Task

CHILDREN_DIR = Path(__file__).resolve().parent / "children"
BYTES_PER_SECOND_PER_THREAD_FLOOR = 0.5e12
#: Evidence that the measurement itself was tampered with or is physically impossible.
INTEGRITY_FLAGS = frozenset(
    {
        "below_bandwidth_floor",
        "timer_mismatch",
        "candidate_active_during_reference",
        "reference_disturbed",
        "event_wall_mismatch",
        "work_outside_timed_window",
    }
)
#: The integrity flags only a candidate causes (a claim under its accounted time, work while the
#: reference runs or outside the windows, a speed no memory system reaches): raised by ANY
#: measurement they stand, so a quarantine layout that cannot resolve them (a few-microsecond
#: kernel under the stops' jitter) never clears them. The others can be the machine's noise.
TAMPER_FLAGS = frozenset(
    {
        "below_bandwidth_floor",
        "timer_mismatch",
        "candidate_active_during_reference",
        "work_outside_timed_window",
    }
)
#: Device runtimes: host wall clock (launch + device-wide synchronise) this many times the event
#: time, and more than the device's launch + synchronise cost above it (seam.LAUNCH_SYNC_MS), means
#: work the events did not see (a side stream, deferred work): device_timing.event_wall_mismatch.
EVENT_WALL_RATIO = 3.0
#: Any of these sends the timing to quarantine: a re-measurement in fresh processes, fresh inputs,
#: every timed call checked.
QUARANTINE_FLAGS = INTEGRITY_FLAGS | {"speedup_audit"}
#: Kernel-accounted CPU time of an idle runtime during a reference round stays under this.
IDLE_NS = 3_000_000
REFERENCE_DISTURBED_RATIO = 1.5
#: The timer cross-check: per round, the driver's claimed time / the kernel-accounted time of the
#: calls (less the no-op round's); the median over rounds whose accounted kernel time exceeds
#: TIMER_MIN_KERNEL_NS per call must reach TIMER_FACTOR. Evidence only: the charged time is never
#: below the accounted one.
TIMER_FACTOR = 0.5
TIMER_MIN_KERNEL_NS = 3_000
TIMER_MIN_ROUNDS = 3
#: ... and the accounted time must exceed the claim by this much per round (median): below it, the
#: two are within the noise of the stops (honest kernels of a few microseconds measured 0.25-0.5)
TIMER_MIN_GAP_NS = 100_000
#: Run time outside the call windows (since the previous round's last stop) that is not charged:
#: the no-op round's own share times (1 + OUTSIDE_NOISE_FACTOR) plus OUTSIDE_NOISE_NS. The rest is
#: added to the round's time; a median excess above OUTSIDE_FLAG_NS is `work_outside_timed_window`.
OUTSIDE_NOISE_FACTOR = 0.5
OUTSIDE_NOISE_NS = 100_000
OUTSIDE_FLAG_NS = 1_000_000
#: The quarantine's other address layout: this many pages at most before the driver's buffers.
LAYOUT_PAD_PAGES_MAX = 256
MIN_ROUNDS = 3


@dataclass
class TimingOutcome:
    stage: Stage
    message: str
    candidate_ms: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    sandbox: dict[str, Any] = field(default_factory=dict)


def call_budget(config: HarnessConfig, set_bytes: int) -> tuple[int, int, int]:
    """(warm-up calls, rounds, calls per round) such that every call has its own input set and the
    whole run makes at most `timing_input_budget_bytes` of inputs: large inputs get fewer timed calls
    (at least MIN_ROUNDS rounds of one), never fewer distinct inputs."""
    sets = max(1, config.timing_input_budget_bytes // max(1, set_bytes))
    rounds = max(1, min(config.rounds, config.iters))
    per_round = max(1, config.iters // rounds)
    warmup = max(1, config.warmup)
    while warmup + rounds * per_round > sets and per_round > 1:
        per_round -= 1
    while warmup + rounds * per_round > sets and rounds > MIN_ROUNDS:
        rounds -= 1
    warmup = max(1, min(warmup, sets - rounds * per_round))
    return warmup, rounds, per_round


def _reference_spec() -> RuntimeSpec:
    return RuntimeSpec(
        argv=sandbox.python_argv("/box/children/reference_runner.py"),
        ro_binds=[(str(CHILDREN_DIR), "/box/children")],
        python=True,
        address_space_bytes=None,
        name="torch-reference",
    )


def run_timing(
    task: Task,
    spec: RuntimeSpec,
    config: HarnessConfig,
    kind: str,
    scratch: Path,
    check_every_call: bool = False,
) -> TimingOutcome:
    sizes = dict(task.sizes)
    probe = build_inputs(task, sizes, secrets.randbits(62), "default")
    probe_params = param_tensors(task, sizes, 0) if task.params else []
    set_bytes = sum(nbytes(t) for t in [*probe, *probe_params])
    warmup, rounds, per_round = call_budget(config, set_bytes)

    def fresh_sets(n: int) -> list[tuple[int, list[torch.Tensor]]]:
        """(seed, inputs + parameters) per call; the parameters are drawn under the seed's low 31 bits."""
        seeds = [secrets.randbits(62) for _ in range(n)]
        # in the task sandbox while the harness judges: one request for all of them
        sets = input_sets(task, sizes, seeds, [param_seed(s) for s in seeds])
        return list(zip(seeds, sets, strict=True))

    warm_sets = fresh_sets(warmup)
    round_sets = [fresh_sets(per_round) for _ in range(rounds)]
    expected0 = reference_outputs(task, probe, sizes)
    template = Trial(0, "default", sizes, "default", 0, probe, expected0, params=probe_params)
    args = kernel_args(task, template)
    k = per_round if check_every_call else min(config.recheck_per_round, per_round)

    cand_plan = Plan(secrets.token_hex(16), args, [], threads=config.threads)
    if check_every_call:  # the quarantine: another layout, another clock, every output at return
        cand_plan.stop_every_call = True
        cand_plan.layout_pad_pages = 1 + secrets.randbelow(LAYOUT_PAD_PAGES_MAX)
    cand_plan.artifact_blob = spec.artifact.read_bytes() if spec.artifact else b""
    cand_plan.artifact = {**spec.artifact_record, "blob": [0, len(cand_plan.artifact_blob)]}
    if spec.artifact_for is not None:
        cand_plan.artifact.update(spec.artifact_for(dict(sizes)))
    blobs: list[tuple[bytes, list[list[tuple[int, int]]]]] = []
    blobs.append(pack_sets([s for _, s in warm_sets]))
    # The overhead calibration (the driver's own no-op kernel), as many calls as a timed round: the
    # warm-up's inputs, which the candidate sees anyway, cycled.
    noop_calls = [blobs[0][1][i % len(blobs[0][1])] for i in range(per_round)]
    cand_plan.rounds.append(Round(noop_calls, k, noop=True))
    cand_plan.rounds.append(Round(blobs[0][1], k))  # warm-up (loads the candidate)
    for sets in round_sets:
        blobs.append(pack_sets([s for _, s in sets]))
        cand_plan.rounds.append(Round(blobs[-1][1], k))
    ref_plan = Plan(secrets.token_hex(16), args, [], threads=config.threads)
    ref_plan.extra = {
        "reference": {
            "record": task_to_json(task),
            "task_file": task.source_path.name,
            "task_source": task.source_path.read_text(encoding="utf-8"),
            "sizes": sizes,
            "site": sandbox.site_paths(),
            "companions": _companions(task),
            # device runtimes build the reference themselves: seeded like ModelNew (KernelBench)
            "init": _json_or_empty(init_arguments(task, sizes)),
            "seed": 0,
            "baseline": config.baseline,
        }
    }
    ref_plan.rounds = [Round(blobs[0][1], 0)] * (1 + config.calibration_rounds)
    ref_plan.rounds += [Round(b[1], 0) for b in blobs[1:]]

    limits = sandbox.Limits(
        wall_s=config.timing_timeout_s,
        cpu_s=int(config.timing_timeout_s) + 5,
        address_space_bytes=spec.address_space_bytes,
    )
    ref_limits = sandbox.Limits(wall_s=config.timing_timeout_s, cpu_s=int(config.timing_timeout_s) + 5,
                                address_space_bytes=None,
                                file_size_bytes=reference_file_size(config.baseline))
    box: dict[str, Any] = {"kind": kind, "runtime": spec.name, "reference_runtime": "torch-reference"}
    round_limit = config.call_timeout_s * max(per_round, warmup) + config.start_timeout_s
    if spec.reference_in_process:  # device targets: the runtime times both sides (docs/target_seam.md)
        cand_plan.rounds = cand_plan.rounds[1:]  # no native no-op calibration on a device
        cand_plan.extra = ref_plan.extra
        run = RuntimeRun(
            spec,
            cand_plan,
            kind=kind,
            limits=limits,
            scratch=scratch / "candidate",
            reference_in_process=True,
        )
        try:
            from sagekernel.harness.device_timing import device_protocol

            return device_protocol(
                task, run, blobs, warm_sets, round_sets, config, box, round_limit, check_every_call,
                spec.launch_sync_ms,
            )
        finally:
            run.finish()
    cand = RuntimeRun(spec, cand_plan, kind=kind, limits=limits, scratch=scratch / "candidate")
    ref = RuntimeRun(
        _reference_spec(),
        ref_plan,
        kind=kind,
        limits=ref_limits,
        scratch=scratch / "reference",
        what="the reference",
        session_factory=WarmSession if config.warm_reference and config.baseline == "eager" else None,
    )
    try:
        return _protocol(
            task,
            cand,
            ref,
            blobs,
            warm_sets,
            round_sets,
            config,
            box,
            round_limit,
            set_bytes,
            expected0,
            check_every_call,
        )
    finally:
        cand.finish()
        ref.finish()


def _json_or_empty(values: list[Any]) -> list[Any]:
    """Init arguments as JSON (device runtimes build `Model(*init)` themselves); [] if they are not."""
    import json

    try:
        json.dumps(values)
    except (TypeError, ValueError):
        return []
    return values


def _companions(task: Task) -> dict[str, str]:
    """Files the task reads next to itself, by their path relative to the task's folder."""
    out = {}
    root = Path(task.source_path).parent
    for path in task.companion_files:
        try:
            name = str(Path(path).resolve().relative_to(root.resolve()))
            out[name] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            continue
    return out


def _protocol(
    task: Task,
    cand: RuntimeRun,
    ref: RuntimeRun,
    blobs: list[tuple[bytes, list[list[tuple[int, int]]]]],
    warm_sets: list[tuple[int, list[torch.Tensor]]],
    round_sets: list[list[tuple[int, list[torch.Tensor]]]],
    config: HarnessConfig,
    box: dict[str, Any],
    round_limit: float,
    set_bytes: int,
    expected0: list[torch.Tensor],
    check_every_call: bool,
) -> TimingOutcome:
    rng = secrets.SystemRandom()

    def fail(f: Failure) -> TimingOutcome:
        return TimingOutcome(f.stage, f.message, flags=f.flags, sandbox=box)

    for run in (ref, cand):
        started = run.started()
        if started is not None:
            return fail(started)
    box["seccomp"] = cand.hello.get("seccomp")
    names = [f"timed call {i}" for i in range(max(len(warm_sets), len(round_sets[0])))]
    noop = cand.run_round(blobs[0][0], names, round_limit)  # before the candidate is mapped
    if isinstance(noop, Failure):
        return fail(noop)
    calibration: list[float] = []
    for _ in range(1 + config.calibration_rounds):  # the reference alone: warm-up, then calibration
        got = ref.run_round(blobs[0][0], names, round_limit)
        if isinstance(got, Failure):
            return fail(got)
        calibration.append(per_call_ms(got))
    calibration = calibration[1:]
    warm = cand.run_round(blobs[0][0], names, round_limit)
    if isinstance(warm, Failure):
        return fail(warm)
    problem = recheck(task, warm, warm_sets, "warm-up")
    if problem:
        return TimingOutcome(Stage.CORRECTNESS, problem, sandbox=box)
    cand_ms: list[float] = []
    ref_ms: list[float] = []
    cpu_notes: list[dict[str, Any]] = []
    flags: list[str] = []
    supervised = isinstance(noop, SupervisedRound)
    base = None
    if isinstance(noop, SupervisedRound):
        windows = [c.cpu_ns for c in noop.calls]
        base = baseline(noop.cpu_ns, windows, noop.outside_cpu_ns, noop.after_cpu_ns, len(noop.calls))
    ratios_claimed: list[float] = []  # per round: claimed time / accounted kernel time
    excesses: list[int] = []
    gaps: list[int] = []  # per round: accounted kernel time - claimed time
    for r, sets in enumerate(round_sets):
        blob = blobs[r + 1][0]
        order = rng.choice(("AB", "BA"))
        got_c: RoundResult | Failure | None = None
        got_r: RoundResult | Failure | None = None
        for side in order:
            if side == "A":
                got_c = cand.run_round(blob, names, round_limit)
                if isinstance(got_c, Failure):
                    return fail(got_c)
            else:
                idle0 = cand.session.cpu_ns()
                got_r = ref.run_round(blob, names, round_limit)
                if isinstance(got_r, Failure):
                    return fail(got_r)
                idle1 = cand.session.cpu_ns()
                if idle0 is not None and idle1 is not None and idle1 - idle0 > IDLE_NS:
                    flags.append("candidate_active_during_reference")
        assert isinstance(got_c, RoundResult) and isinstance(got_r, RoundResult)
        problem = recheck(task, got_c, sets, f"round {r}")
        if problem:
            return TimingOutcome(Stage.CORRECTNESS, problem, sandbox=box)
        if isinstance(got_c, SupervisedRound) and base is not None and got_c.cpu_ns is not None:
            # Everything the process ran since the last round's stop is charged (charging.py).
            ch = charge(
                [c.ns for c in got_c.calls],
                got_c.cpu_ns,
                [c.cpu_ns for c in got_c.calls],
                got_c.outside_cpu_ns,
                base,
                threads=config.threads,
                per_call_clock=check_every_call,
                noise_factor=OUTSIDE_NOISE_FACTOR,
                noise_ns=OUTSIDE_NOISE_NS,
            )
            cpu_notes.append(ch.record(r))
            excesses.append(ch.outside_excess_ns)
            if ch.kernel_ns > TIMER_MIN_KERNEL_NS * len(got_c.calls):
                ratios_claimed.append(ch.claimed_ns / ch.kernel_ns)
            gaps.append(ch.kernel_ns - ch.claimed_ns)
            cand_ms.append(ch.charged_ns / max(1, len(got_c.calls)) / 1e6)
        else:
            cand_ms.append(per_call_ms(got_c))
        ref_ms.append(per_call_ms(got_r))
    if not cand_ms or min(cand_ms) <= 0:
        return TimingOutcome(Stage.TIMING, "the timing run returned no usable measurements", sandbox=box)
    # The median over rounds of claimed / accounted: robust to the interrupts a shared machine
    # accounts to whichever process happens to run. With a thread budget of T, T busy threads
    # accrue T times the wall clock: an honest parallel kernel claims 1/T of what it is accounted.
    timer_floor = TIMER_FACTOR / max(1, config.threads)
    if (
        len(ratios_claimed) >= TIMER_MIN_ROUNDS
        and statistics.median(ratios_claimed) < timer_floor
        and statistics.median(gaps) > TIMER_MIN_GAP_NS
    ):
        flags.append("timer_mismatch")
    if excesses and statistics.median(excesses) > OUTSIDE_FLAG_NS:
        flags.append("work_outside_timed_window")
    ratios = [rr / cc for rr, cc in zip(ref_ms, cand_ms, strict=True)]
    c_med, r_med, speedup = statistics.median(cand_ms), statistics.median(ref_ms), statistics.median(ratios)
    if speedup > config.speedup_ceiling:
        flags.append("speedup_audit")
    moved = set_bytes + sum(nbytes(e) for e in expected0)
    floor_ms = moved / (BYTES_PER_SECOND_PER_THREAD_FLOOR * max(1, config.threads)) * 1e3
    if c_med < floor_ms:
        flags.append("below_bandwidth_floor")
    # Disturbed only if every interleaved round is slower than every round timed before the
    # candidate was loaded: robust to the noise spikes of a shared machine.
    if calibration and min(ref_ms) > REFERENCE_DISTURBED_RATIO * max(calibration):
        flags.append("reference_disturbed")
    timing = {
        "method": "interleaved_ab_two_processes",
        "clock": (
            "kernel-accounted run time per call between the parent's stops, or the driver's "
            "CLOCK_MONOTONIC where larger"
            if check_every_call
            else "kernel-accounted run time between the parent's stops, or the driver's CLOCK_MONOTONIC "
            "where larger"
        )
        if supervised
        else "the runtime's clock, per call",
        "layout": "a stop after every call, buffers moved" if check_every_call else "a stop after each round",
        **plan_record(warm_sets, round_sets, config, check_every_call),
        "threads": config.threads,
        "sizes": dict(task.sizes),
        "reference": "PyTorch Model.forward in its own sandboxed process, fp32 as declared",
        "baseline": config.baseline,
        "candidate_round_ms": [round(x, 6) for x in cand_ms],
        "reference_round_ms": [round(x, 6) for x in ref_ms],
        "reference_calibration_ms": [round(x, 6) for x in calibration],
        "candidate_iqr_ms": quartiles(cand_ms),
        "reference_iqr_ms": quartiles(ref_ms),
        "ratio_iqr": quartiles(ratios),
        "bytes_moved_per_call": moved,
        "bandwidth_floor_ms": floor_ms,
        "accounting": cpu_notes,
        "claimed_over_accounted_median": round(statistics.median(ratios_claimed), 4)
        if ratios_claimed
        else None,
        "noop": {"calls_ns": base.calls_ns, "window_ns": round(base.window_ns), "outside_ns": base.outside_ns}
        if base
        else None,
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


def plan_record(
    warm_sets: list[Any], round_sets: list[list[Any]], config: HarnessConfig, check_every_call: bool
) -> dict[str, Any]:
    """What every timing record states about its calls: counts, distinct inputs, rechecks."""
    per_round = len(round_sets[0])
    return {
        "warmup": len(warm_sets),
        "rounds": len(round_sets),
        "calls_per_round": per_round,
        "iters": len(round_sets) * per_round,
        "distinct_input_sets": len(warm_sets) + sum(map(len, round_sets)),
        "rechecked_per_round": per_round if check_every_call else min(config.recheck_per_round, per_round),
        "rechecked_rounds": list(range(len(round_sets))),
    }


def per_call_ms(result: RoundResult) -> float:
    return sum(c.ns for c in result.calls) / max(1, len(result.calls)) / 1e6


def quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [round(values[0], 6)] * 2 if values else []
    q = statistics.quantiles(values, n=4)
    return [round(q[0], 6), round(q[2], 6)]


__all__ = ["INTEGRITY_FLAGS", "QUARANTINE_FLAGS", "TimingOutcome", "call_budget", "run_timing"]
