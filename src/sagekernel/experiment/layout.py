"""The experiment directory: the spec, the expanded plan, one workspace per stream.

    DIR/experiment.toml          the experiment file as given (or the preset's text)
    DIR/experiment.json          name, overrides and the expanded streams (StreamPlan records)
    DIR/streams/NAME/            the stream's `sage run` workspace (run id = NAME)
    DIR/streams/NAME/stream.json the worker's last outcome (StreamOutcome)
    DIR/streams/NAME/bank/       fixed-bank replay: the donor's bank with replayed utilities
    DIR/logs/NAME.log            the worker's output

Whether a stream is finished is read from its workspace (its run's status), never from a file
of the scheduler's: the runner's store is the one record of what was done.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagekernel.experiment.plan import StreamPlan, expand
from sagekernel.experiment.spec import ExperimentSpec, ExperimentSpecError, Overrides, parse

SPEC_FILE = "experiment.toml"
PLAN_FILE = "experiment.json"


@dataclass
class StreamOutcome:
    """What a worker last reported for a stream (its figures are in the workspace)."""

    state: str  # running | finished | interrupted | failed
    message: str = ""
    pid: int = 0
    host: str = ""
    attempt: int = 1
    started_at: str = ""
    ended_at: str = ""
    device: str = ""  # the device slot it was pinned to ("" when none)
    affinity: list[int] | None = None  # the CPU cores the worker could use, as it saw them
    visible: dict[str, str] | None = None  # CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES as it saw them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class ExperimentDir:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # ---- files ------------------------------------------------------------------------------------
    def workspace(self, name: str) -> Path:
        return self.root / "streams" / name

    def bank(self, name: str) -> Path:
        return self.workspace(name) / "bank"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    @property
    def exists(self) -> bool:
        return (self.root / PLAN_FILE).is_file()

    def create(self, spec: ExperimentSpec, overrides: Overrides) -> list[StreamPlan]:
        """Write the spec and its plan; an existing directory must hold the same experiment."""
        streams = expand(spec)
        plan: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "overrides": overrides.to_dict(),
            "streams": [s.to_dict() for s in streams],
        }
        if self.exists:
            stored = self.plan_data()
            if stored["streams"] != plan["streams"]:
                changed = sorted(
                    {s["name"] for s in stored["streams"]} ^ {s["name"] for s in plan["streams"]}
                )
                raise ExperimentSpecError(
                    f"{self.root} holds another experiment ({stored['name']!r}"
                    f"{'; streams differ: ' + ', '.join(changed) if changed else '; settings differ'}); "
                    f"continue it with `sage experiment run {self.root}` or choose another --dir"
                )
            return streams
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "streams").mkdir(exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        (self.root / SPEC_FILE).write_text(spec.source, encoding="utf-8")
        _write_json(self.root / PLAN_FILE, {**plan, "created_at": now_iso()})
        return streams

    def plan_data(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.root / PLAN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ExperimentSpecError(
                f"{self.root} is not an experiment directory (no readable {PLAN_FILE}: {exc})"
            ) from None
        return data

    def spec(self) -> ExperimentSpec:
        """The stored experiment, rebuilt with its stored overrides."""
        data = self.plan_data()
        text = (self.root / SPEC_FILE).read_text(encoding="utf-8")
        return parse(
            text, origin=str(self.root / SPEC_FILE), overrides=Overrides.from_dict(data.get("overrides", {}))
        )

    def streams(self) -> list[StreamPlan]:
        return [StreamPlan.from_dict(s) for s in self.plan_data()["streams"]]

    @property
    def name(self) -> str:
        return str(self.plan_data()["name"])

    # ---- per-stream state -------------------------------------------------------------------------
    def outcome(self, name: str) -> StreamOutcome | None:
        try:
            data = json.loads((self.workspace(name) / "stream.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return StreamOutcome(**data)

    def write_outcome(self, name: str, outcome: StreamOutcome) -> None:
        self.workspace(name).mkdir(parents=True, exist_ok=True)
        _write_json(self.workspace(name) / "stream.json", outcome.to_dict())

    def run_status(self, name: str) -> str | None:
        """The stream's run status from its workspace: None before its run exists."""
        from sagekernel.runner.store import open_readonly

        store = open_readonly(self.workspace(name))
        if store is None:
            return None
        with store:
            info = store.run(name)
        return None if info is None else info.status

    def finished(self, name: str) -> bool:
        return self.run_status(name) == "finished"
