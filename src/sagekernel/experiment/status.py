"""Every stream's progress, read from its workspace (read-only) and its worker's outcome file.

State of a stream:
    finished     its run finished (the workspace says so)
    running      a worker is on it now (its pid is alive on this host, or the outcome says so)
    waiting      its donor has not finished yet
    blocked      its donor failed, so it cannot start
    failed / interrupted   the last worker stopped it (message says why; rerun to continue)
    pending      not started
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.plan import StreamPlan
from sagekernel.metrics import compilation_rate, execution_rate
from sagekernel.runner.store import open_readonly


@dataclass
class StreamStatus:
    name: str
    state: str
    method: str
    model: str
    schedule: str
    donor: str | None
    done: int
    total: int | None  # planned operators (None before the run exists)
    cr: float | None
    er: float | None
    operator: str | None  # the operator in flight
    round: int | None
    episode: str | None
    device: str = ""
    pid: int = 0
    attempt: int = 0
    message: str = ""
    last_result: dict[str, Any] | None = None  # the newest finished operator (for log lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alive(pid: int, host: str) -> bool:
    if not pid or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stream_status(
    exp: ExperimentDir, stream: StreamPlan, states: dict[str, str] | None = None
) -> StreamStatus:
    ws = exp.workspace(stream.name)
    status: StreamStatus = StreamStatus(
        stream.name,
        "pending",
        stream.method,
        stream.model,
        stream.schedule,
        stream.donor,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
    )
    run_state = None
    store = open_readonly(ws)
    if store is not None:
        with store:
            info = store.run(stream.name)
            if info is not None:
                run_state = info.status
                results = store.results(stream.name)
                status.done, status.total = len(results), len(store.stream(stream.name))
                status.cr, status.er = compilation_rate(results), execution_rate(results)
                if results:
                    last = results[-1]
                    status.last_result = {
                        "position": last.position,
                        "operator": last.operator,
                        "correct": last.correct,
                        "compiled": last.compiled,
                        "rounds_used": last.rounds_used,
                        "speedup": last.speedup,
                    }
                done = {r.operator for r in results}
                last_round = store.last_round(stream.name)
                if last_round is not None and last_round[0] not in done:
                    status.operator, status.round, status.episode = last_round
    outcome = exp.outcome(stream.name)
    if outcome is not None:
        status.device, status.pid, status.attempt = outcome.device, outcome.pid, outcome.attempt
        status.message = outcome.message
    if run_state == "finished":
        status.state = "finished"
    elif outcome is not None and outcome.state == "running" and _alive(outcome.pid, outcome.host):
        status.state = "running"
    elif outcome is not None and outcome.state in ("failed", "interrupted"):
        status.state = outcome.state
    elif outcome is not None and outcome.state == "running" and outcome.host != socket.gethostname():
        status.state = "running"  # a worker on another machine (Ray): its liveness is Ray's to judge
    elif run_state is not None:
        status.state = "interrupted"  # its worker died (kill -9): a rerun resumes it
    if status.state == "pending" and stream.donor is not None and states is not None:
        donor = states.get(stream.donor)
        if donor in ("failed", "blocked"):
            status.state = "blocked"
        elif donor != "finished":
            status.state = "waiting"
    return status


def experiment_status(exp: ExperimentDir) -> list[StreamStatus]:
    """All streams, donors before recipients (so a recipient sees its donor's state)."""
    from sagekernel.experiment.plan import order

    streams = exp.streams()
    states: dict[str, str] = {}
    by_name: dict[str, StreamStatus] = {}
    for s in order(streams):
        st = stream_status(exp, s, states)
        states[s.name] = st.state
        by_name[s.name] = st
    return [by_name[s.name] for s in streams]
