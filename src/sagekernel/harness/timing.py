"""The timing stage: candidate vs PyTorch reference, interleaved in one sandboxed process.

Only correct candidates get here. The candidate's timed inputs are the default-shape correctness
trials (secret seeds, reference outputs already known to the parent), so every rechecked output
is compared against a reference the child never held. Statistics are computed here: medians of
per-call latency per side, the median of per-round ratios (the reported speedup), IQRs, and two
audit flags: `speedup_audit` above the configured ceiling, `below_bandwidth_floor` when the
candidate moves its bytes faster than one core can (0.5 TB/s per thread: above any L1 bandwidth).
"""

from __future__ import annotations

import secrets
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel.harness import protocol, sandbox, timing_server
from sagekernel.harness.compare import SENTINELS, compare, tensor_from_bytes
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.correctness import CHILDREN_DIR, Trial, scalar_args
from sagekernel.harness.verdict import Stage
from sagekernel.tasks.task import Task

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # .../sagekernel
BYTES_PER_SECOND_PER_THREAD_FLOOR = 0.5e12
RECHECK_PROBABILITY = 0.2


@dataclass
class TimingOutcome:
    stage: Stage  # OK, TIMING, RUNTIME or CORRECTNESS (a rechecked output was wrong)
    message: str
    candidate_ms: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    sandbox: dict[str, Any] = field(default_factory=dict)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def _task_record(task: Task) -> dict[str, Any]:
    return {
        "name": task.name,
        "level": task.level,
        "category": task.category,
        "inputs": [[s.name, list(s.dims), s.dtype] for s in task.inputs],
        "outputs": [[s.name, list(s.dims), s.dtype] for s in task.outputs],
        "attrs": task.attrs,
        "sizes": task.sizes,
        "dtype": task.dtype,
        "atol": task.atol,
        "rtol": task.rtol,
    }


def _raw(t: torch.Tensor) -> bytes:
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def run_timing(
    task: Task, pool: list[Trial], library: Path, config: HarnessConfig, kind: str, scratch: Path
) -> TimingOutcome:
    """Time `library` against the reference on the shape of `pool` (trials sharing one shape)."""
    nonce = protocol.new_nonce()
    blob = bytearray()
    contents = []
    for trial in pool:
        spans = []
        for t in trial.inputs:
            data = _raw(t)
            spans.append([len(blob), len(data)])
            blob.extend(data)
        contents.append(spans)
    lib_bytes = library.read_bytes()
    lib_span = [len(blob), len(lib_bytes)]
    blob.extend(lib_bytes)
    sizes = pool[0].sizes
    rounds = max(1, min(config.rounds, config.iters))
    pkg = "/box/pkg" if kind == "bwrap" else str(PACKAGE_DIR.parent)
    header = {
        "nonce": nonce,
        "lib_span": lib_span,
        "symbol": "sage_kernel",
        "pkg": pkg,
        "site": sandbox.site_paths(),
        "task": _task_record(task),
        "task_file_name": task.source_path.name,
        "task_source": task.source_path.read_text(encoding="utf-8"),
        "sizes": sizes,
        "pool": len(pool),
        "contents": contents,
        "out_sizes": [len(_raw(e)) for e in pool[0].expected],
        "fills": [SENTINELS[s.dtype].hex() for s in task.outputs],
        "scalars": scalar_args(task, sizes),
        "warmup": config.warmup,
        "iters": config.iters,
        "rounds": rounds,
        "threads": config.threads,
        "ref_seed": secrets.randbits(40),
        "recheck_probability": RECHECK_PROBABILITY,
        "wall_s": config.timing_timeout_s,
        "cpu_s": int(config.timing_timeout_s * max(1, config.threads)) + 5,
    }
    if config.warm_timing:
        parsed, exit_record, problem = timing_server.request(
            kind, config.threads, config.timing_memory_limit_bytes, header, blob, config.timing_timeout_s
        )
        if exit_record is None:
            return TimingOutcome(
                Stage.RUNTIME,
                problem or f"the timing run failed ({parsed.problem})",
                sandbox={"kind": kind, "server": "warm"},
            )
        timed_out = bool(exit_record.get("timed_out"))
        sig: int | None = exit_record.get("signal")
        status = exit_record.get("status")
        tail = ""
    else:
        cmd = sandbox.SandboxCommand(
            argv=sandbox.python_argv("/box/children/timing_runner.py"),
            ro_binds=[(str(CHILDREN_DIR), "/box/children"), (str(PACKAGE_DIR), "/box/pkg/sagekernel")],
            env=sandbox.thread_env(config.threads),
        )
        limits = sandbox.Limits(
            wall_s=config.timing_timeout_s,
            cpu_s=int(config.timing_timeout_s * max(1, config.threads)) + 5,
            address_space_bytes=config.timing_memory_limit_bytes,
        )
        result = sandbox.run(
            cmd,
            kind=kind,
            limits=limits,
            stdin_data=protocol.encode_request(header, blob),
            scratch_dir=scratch,
        )
        parsed = protocol.parse_frames(result.channel, nonce)
        timed_out, sig, status, tail = result.timed_out, result.signal, result.returncode, result.output_tail
    hello = parsed.first("hello")
    box: dict[str, Any] = {"kind": kind, "seccomp": hello.record.get("seccomp") if hello else "unknown"}
    box["server"] = "warm" if config.warm_timing else "cold"
    end = parsed.first("end")
    if end is None:
        if timed_out:
            msg = f"the timing run did not finish within {config.timing_timeout_s:g} s"
            return TimingOutcome(Stage.RUNTIME, msg, sandbox=box)
        load_error = parsed.first("load_error") or parsed.first("error")
        what = f"died from signal {sig}" if sig else f"exited with status {status}"
        detail = load_error.record.get("error", "") if load_error else tail.strip()[-600:]
        return TimingOutcome(
            Stage.RUNTIME,
            f"the timing process {what} before finishing" + (f": {detail}" if detail else ""),
            sandbox=box,
        )
    rounds_data = parsed.all("round")
    cand = [f.record["cand_ns"] / f.record["calls"] / 1e6 for f in rounds_data]
    ref = [f.record["ref_ns"] / f.record["calls"] / 1e6 for f in rounds_data]
    # Recheck the outputs the child returned against the parent's references.
    rechecked = []
    for frame in rounds_data:
        pairs = frame.record.get("recheck")
        if not pairs:
            continue
        pos = 0
        for buf, content in pairs:
            trial = pool[content]
            for spec, exp in zip(task.outputs, trial.expected, strict=False):
                n = len(_raw(exp))
                raw = frame.payload[pos : pos + n]
                pos += n
                dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
                mism = compare(
                    tensor_from_bytes(raw, dtype, tuple(exp.shape)),
                    exp,
                    trial.atol,
                    task.rtol,
                    spec.dtype,
                    raw,
                )
                if mism is not None:
                    return TimingOutcome(
                        Stage.CORRECTNESS,
                        "wrong result during timing (round "
                        f"{frame.record['round']}, buffer {buf}): {mism.describe(spec.name)}; "
                        "timed calls must compute the same result as checked calls",
                        sandbox=box,
                    )
        rechecked.append(frame.record["round"])
    if not cand or min(cand) <= 0:
        return TimingOutcome(Stage.TIMING, "the timing run returned no usable measurements", sandbox=box)
    ratios = [r / c for r, c in zip(ref, cand, strict=False)]
    cand_ms, ref_ms, speedup = statistics.median(cand), statistics.median(ref), statistics.median(ratios)
    flags = []
    if speedup > config.speedup_ceiling:
        flags.append("speedup_audit")
    moved = sum(len(_raw(t)) for t in pool[0].inputs) + sum(len(_raw(e)) for e in pool[0].expected)
    floor_ms = moved / (BYTES_PER_SECOND_PER_THREAD_FLOOR * max(1, config.threads)) * 1e3
    if cand_ms < floor_ms:
        flags.append("below_bandwidth_floor")
    timing = {
        "method": "interleaved_ab_wallclock",
        "clock": "perf_counter_ns (in the sandboxed child)",
        "warmup": config.warmup,
        "iters": len(rounds_data) * rounds_data[0].record["calls"],
        "rounds": len(rounds_data),
        "calls_per_round": rounds_data[0].record["calls"],
        "threads": config.threads,
        "torch_threads": hello.record.get("torch_threads") if hello else None,
        "sizes": pool[0].sizes,
        "input_pool": len(pool),
        "pool_contents_permuted_per_round": True,
        "reference": "PyTorch Model.forward (allocates its outputs), own inputs, fp32 as declared",
        "candidate_round_ms": [round(x, 6) for x in cand],
        "reference_round_ms": [round(x, 6) for x in ref],
        "candidate_iqr_ms": [round(x, 6) for x in _quartiles(cand)],
        "reference_iqr_ms": [round(x, 6) for x in _quartiles(ref)],
        "ratio_iqr": [round(x, 4) for x in _quartiles(ratios)],
        "rechecked_rounds": rechecked,
        "bytes_moved_per_call": moved,
        "bandwidth_floor_ms": floor_ms,
        "child_wall_s": end.record["wall_ns"] / 1e9,
        "child_cpu_s": end.record["cpu_ns"] / 1e9,
    }
    return TimingOutcome(
        Stage.OK,
        f"candidate {cand_ms:.4f} ms, reference {ref_ms:.4f} ms, speedup {speedup:.2f}x",
        cand_ms,
        ref_ms,
        speedup,
        timing,
        flags,
        box,
    )
