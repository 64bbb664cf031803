"""One stream, run in this process: prepare its memory from its donor, then `runner.run`.

    python -m sagekernel.experiment.worker DIR NAME [NAME ...] [--device SLOT]

Several names run as threads of this one process: the local scheduler does that for streams on
the embedded model, so they share its one process-wide llama.cpp instance (models/local.py)
instead of loading the weights once per stream. Each stream is still its own `sage run` (its
workspace, lock, exchange log, resume).

The stream's run id is its name, so running it again resumes it (the runner skips finished
operators) and a finished stream is never rerun. Exit status: 0 every stream finished, 130
interrupted, 3 a stream failed.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from sagekernel.devices import pin_current_process, selection_env, slot_from_label
from sagekernel.errors import RunLocked, SageError
from sagekernel.experiment.layout import ExperimentDir, StreamOutcome, now_iso
from sagekernel.experiment.plan import StreamPlan

#: How long a worker waits for a workspace lock still held by a dying earlier worker (a killed
#: experiment's child gets SIGTERM from the kernel and records what finished before it exits).
LOCK_WAIT_S = 60.0


class DonorNotFinished(SageError):
    """A recipient stream was started before its donor finished."""


def _affinity() -> list[int] | None:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def prepare_memory(exp: ExperimentDir, stream: StreamPlan) -> Path | None:
    """Set up the stream's starting memory from its donor; returns RunConfig.memory_from."""
    if stream.donor is None:
        return None
    if not exp.finished(stream.donor):
        raise DonorNotFinished(
            f"stream {stream.name!r} starts from {stream.donor!r}, which has not "
            "finished; the scheduler runs donors first"
        )
    donor_ws = exp.workspace(stream.donor)
    if stream.memory == "frozen":
        return donor_ws  # the runner snapshots it once (a resumed run sees the same memory)
    variant = stream.replay_variant
    if variant is not None:
        bank = exp.bank(stream.name)
        if not bank.is_dir():
            from sagekernel.runner.bank_replay import replay_workspace

            tmp = bank.with_name(f".bank-{os.getpid()}")
            replay_workspace(donor_ws, stream.donor, write_to=tmp, variant=variant)
            os.replace(tmp, bank)  # a crash mid-write leaves no half bank under the real name
        return bank
    if stream.memory == "continue":
        _import_memory(donor_ws, exp.workspace(stream.name))
        return None
    raise SageError(f"stream {stream.name!r}: unknown memory mode {stream.memory!r}")  # pragma: no cover


def _import_memory(donor_ws: Path, workspace: Path) -> None:
    """Continued learning: the donor's whole bank (states, statistics, adoption history) imported
    once into the recipient's empty workspace, in one transaction (`sage memory export/import`)."""
    from sagekernel import db
    from sagekernel.memory.io import export_jsonl, import_jsonl
    from sagekernel.memory.store import Store

    conn = db.connect(workspace)
    try:
        if Store(conn).count():
            return  # imported by an earlier attempt (the import is all or nothing)
        src = db.connect(donor_ws, create=False, readonly=True)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                dump = Path(tmp) / "bank.jsonl"
                export_jsonl(src, dump)
                import_jsonl(conn, dump, mode="refuse")
        finally:
            src.close()
    finally:
        conn.close()


def run_stream(exp: ExperimentDir, stream: StreamPlan, *, device: str = "") -> StreamOutcome:
    """Run (or resume) one stream to its end here; the outcome is also written to stream.json."""
    from sagekernel.agent.exceptions import RunInterrupted
    from sagekernel.runner.run import run

    previous = exp.outcome(stream.name)
    attempt = 1 if previous is None else previous.attempt + (previous.state != "finished")
    outcome = StreamOutcome(
        state="running",
        pid=os.getpid(),
        host=socket.gethostname(),
        attempt=attempt,
        started_at=now_iso(),
        device=device,
        affinity=_affinity(),
        visible=selection_env(),  # what this process and its children see
    )
    if exp.finished(stream.name):
        outcome.state, outcome.message, outcome.ended_at = "finished", "already finished", now_iso()
        return outcome
    exp.write_outcome(stream.name, outcome)
    deadline = time.monotonic() + LOCK_WAIT_S
    try:
        memory_from = prepare_memory(exp, stream)
        cfg = stream.config(exp.workspace(stream.name), memory_from=memory_from)
        while True:
            try:
                summary = run(cfg)
                break
            except RunLocked:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        outcome.state = summary.status
        outcome.message = summary.message
    except RunInterrupted as exc:
        outcome.state, outcome.message = "interrupted", str(exc)
    except KeyboardInterrupt:
        outcome.state, outcome.message = "interrupted", "interrupted"
    except SageError as exc:
        outcome.state, outcome.message = "failed", str(exc)
    except Exception as exc:  # a bug: record it so status shows it, and keep the traceback in the log
        outcome.state, outcome.message = "failed", f"{type(exc).__name__}: {exc}"
        import traceback

        traceback.print_exc()
    outcome.ended_at = now_iso()
    exp.write_outcome(stream.name, outcome)
    return outcome


def run_streams(exp: ExperimentDir, names: list[str], *, device: str = "") -> list[StreamOutcome]:
    """Several streams as threads of this process (one shared embedded model); in order if one."""
    by_name = {s.name: s for s in exp.streams()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SageError(f"{exp.root} has no stream(s) {unknown}")
    if len(names) == 1:
        return [run_stream(exp, by_name[names[0]], device=device)]
    outcomes: dict[str, StreamOutcome] = {}

    def one(name: str) -> None:
        outcomes[name] = run_stream(exp, by_name[name], device=device)

    threads = [threading.Thread(target=one, args=(n,), name=f"stream-{n}") for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [outcomes[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagekernel.experiment.worker")
    parser.add_argument("dir")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--device", default="")
    args = parser.parse_args(argv)
    pin_current_process(slot_from_label(args.device))  # before torch or a device runtime starts
    try:
        outcomes = run_streams(ExperimentDir(args.dir), args.names, device=args.device)
    except SageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    for o in outcomes:
        if o.state != "finished":
            print(f"{o.state}: {o.message}", file=sys.stderr)
    if any(o.state == "interrupted" for o in outcomes):
        return 130
    return 0 if all(o.state == "finished" for o in outcomes) else 3


if __name__ == "__main__":
    sys.exit(main())
