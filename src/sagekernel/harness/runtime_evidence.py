"""Judging the evidence a runtime reports beside its results (docs/target_seam.md, "Frames beyond").

The device loop (targets/devloop/loop.py) reports what it saw around each call: functions and
flags replaced since before the candidate was loaded (`integrity`), the process's OS threads
(`threads`), each returned tensor's type, storage and aliasing (`out_meta`), the torch ops its
host guard refused (`refused`), a launcher's status. The runtime judges none of it; these pure
functions do, for harness/runs.py, which turns a finding into a `Failure`.

A runtime declares what it reports (`RuntimeSpec.reports`); a promised item that is missing is
itself a finding, so a candidate cannot escape a check by making the report disappear.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sagekernel.harness.verdict import Stage


@dataclass(frozen=True)
class Finding:
    stage: Stage
    message: str
    flag: str


@dataclass
class Baseline:
    """What the `loaded` frame established, for judging later frames."""

    threads: int | None = None
    storages: dict[int, int] = field(default_factory=dict)  # output storage -> call that returned it


def _integrity(lines: Any, what: str, when: str) -> Finding | None:
    if not lines:
        return None
    shown = "; ".join(str(x) for x in list(lines)[:4])
    return Finding(
        Stage.INTEGRITY,
        f"{what} changed the runtime {when}: {shown}. Torch functions, timers and precision flags "
        "belong to the harness",
        "runtime_integrity",
    )


def _missing(record: dict[str, Any], keys: tuple[str, ...], frame: str) -> Finding | None:
    absent = [k for k in keys if k not in record]
    if not absent:
        return None
    return Finding(
        Stage.INTEGRITY,
        f"the runtime's '{frame}' frame lacks the evidence it promises ({', '.join(absent)}); only a "
        "tampered runtime drops it",
        "evidence_missing",
    )


def judge_loaded(
    record: dict[str, Any], reports: frozenset[str], what: str, base: Baseline
) -> Finding | None:
    wanted = tuple(k for k in ("integrity", "threads", "host_guard") if k in reports)
    problem = _missing(record, wanted, "loaded")
    if problem:
        return problem
    if "host_guard" in reports and record.get("host_guard") is not True:
        return Finding(
            Stage.INTEGRITY,
            "the runtime's host guard was not active around the candidate",
            "evidence_missing",
        )
    if "threads" in reports:
        base.threads = int(record["threads"])
    return _integrity(record.get("integrity"), what, "while it was loaded")


def judge_done(
    record: dict[str, Any], reports: frozenset[str], what: str, where: str, base: Baseline
) -> Finding | None:
    problem = _missing(record, ("threads",) if "threads" in reports else (), "done")
    if problem:
        return problem
    refused = record.get("refused")
    if refused:
        ops = ", ".join(str(x) for x in list(refused)[:4])
        return Finding(
            Stage.INTEGRITY,
            f"{what}'s host code ran torch operations outside its kernels on the {where} ({ops}); "
            "ModelNew.forward may only allocate, take views and launch @triton.jit kernels -- the "
            "operator must be computed by the kernels, however the call is spelled",
            "host_compute",
        )
    status = record.get("status")
    if status not in (None, 0):
        return Finding(
            Stage.RUNTIME,
            f"the launcher returned CUDA error {status} on the {where} (a cudaError_t: a launch "
            "failure, an invalid configuration or an earlier asynchronous error)",
            "launch_error",
        )
    threads = record.get("threads")
    if base.threads is not None and threads is not None and int(threads) > base.threads:
        return Finding(
            Stage.INTEGRITY,
            f"{what} left {int(threads) - base.threads} more thread(s) running after the {where} "
            f"returned ({threads} against {base.threads} after loading): work finished outside the "
            "call escapes the timer and the output check",
            "background_threads",
        )
    return None


def judge_outputs(
    record: dict[str, Any],
    reports: frozenset[str],
    expected: list[tuple[str, tuple[int, ...]]],
    what: str,
    where: str,
    base: Baseline,
) -> Finding | None:
    """`expected`: (dtype, shape) of each output, in order."""
    if "out_meta" not in reports:
        return None
    metas = record.get("out_meta")
    if not isinstance(metas, list) or len(metas) != len(expected):
        return Finding(
            Stage.CORRECTNESS,
            f"{what} returned {len(metas) if isinstance(metas, list) else 'no'} output(s) on the {where} "
            f"where {len(expected)} tensor(s) are due",
            "output_count",
        )
    call = int(record.get("call", -1))
    for k, (meta, (dtype, shape)) in enumerate(zip(metas, expected, strict=True)):
        if not isinstance(meta, dict) or "plain" not in meta:
            kind = meta.get("type") if isinstance(meta, dict) else meta
            message = f"output {k} on the {where} is not a tensor ({kind})"
            return Finding(Stage.CORRECTNESS, message, "output_type")
        if meta.get("plain") is not True:
            return Finding(
                Stage.INTEGRITY,
                f"output {k} on the {where} is a tensor subclass, not a plain torch.Tensor: a subclass "
                "can defer its work until it is read, outside the timer",
                "tensor_subclass",
            )
        if int(meta.get("alias", -1)) >= 0:
            return Finding(
                Stage.INTEGRITY,
                f"output {k} on the {where} shares storage with input {meta['alias']}: an output must "
                "be a tensor of its own, not a view of an input",
                "output_alias",
            )
        got_shape = tuple(int(x) for x in meta.get("shape", ()))
        if got_shape != tuple(shape) or meta.get("dtype") not in (dtype, None):
            return Finding(
                Stage.CORRECTNESS,
                f"output {k} on the {where} is {meta.get('dtype')}{list(got_shape)} where "
                f"{dtype}{list(shape)} is due",
                "output_layout",
            )
        ptr = int(meta.get("storage", 0) or 0)
        if ptr:
            earlier = base.storages.get(ptr)
            if earlier is not None and earlier != call:
                return Finding(
                    Stage.INTEGRITY,
                    f"output {k} on the {where} is the same storage another call of this round "
                    "returned (outputs stay alive to the round's end, so this is a buffer kept across "
                    "calls: a cache)",
                    "output_cache",
                )
            base.storages[ptr] = call
    return None


def judge_round_end(
    record: dict[str, Any], reports: frozenset[str], what: str, base: Baseline
) -> Finding | None:
    wanted = tuple(k for k in ("integrity", "threads") if k in reports)
    problem = _missing(record, wanted, "round_end")
    if problem:
        return problem
    base.storages.clear()
    found = _integrity(record.get("integrity"), what, "during the round")
    if found:
        return found
    threads = record.get("threads")
    if base.threads is not None and threads is not None and int(threads) > base.threads:
        return Finding(
            Stage.INTEGRITY,
            f"{what} left {int(threads) - base.threads} more thread(s) running at the end of the round",
            "background_threads",
        )
    return None


__all__ = ["Baseline", "Finding", "judge_done", "judge_loaded", "judge_outputs", "judge_round_end"]
