"""`run_experiment`: the one entry point the CLI, the benchmark and tests call.

Resolves what to run (a TOML file, a preset name, or an experiment directory to continue),
writes or checks the experiment directory, then runs every unfinished stream with local workers
or on Ray, with the live view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sagekernel.devices import parse_devices
from sagekernel.experiment import presets
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.live import LiveView
from sagekernel.experiment.plan import StreamPlan
from sagekernel.experiment.scheduler import ExperimentOutcome, check_workers, run_local
from sagekernel.experiment.spec import ExperimentSpec, ExperimentSpecError, Overrides, load


def resolve(
    what: str | Path, overrides: Overrides | None = None, directory: Path | None = None
) -> tuple[ExperimentDir, list[StreamPlan]]:
    """(the experiment directory, its streams) for a file, a preset or an existing directory."""
    overrides = overrides or Overrides()
    path = Path(what)
    if path.is_dir():
        if overrides.given:
            raise ExperimentSpecError(
                f"{path} is an experiment directory: it runs with the settings it was "
                "created with (overrides apply only when it is created)"
            )
        exp = ExperimentDir(path)
        return exp, exp.create(exp.spec(), Overrides.from_dict(exp.plan_data().get("overrides", {})))
    spec: ExperimentSpec
    if path.suffix == ".toml" or path.exists():
        spec = load(path, overrides)
    else:
        spec = presets.load(str(what), overrides)
    exp = ExperimentDir(directory or Path("experiments") / spec.name)
    return exp, exp.create(spec, overrides)


def run_experiment(
    what: str | Path,
    *,
    directory: Path | None = None,
    overrides: Overrides | None = None,
    workers: int = 1,
    devices: list[str] | None = None,
    ray: str | None = None,
    ray_init: dict[str, Any] | None = None,
    ray_ship: bool = False,
    live: LiveView | bool | None = True,
    only: set[str] | None = None,
) -> tuple[ExperimentDir, ExperimentOutcome]:
    """Run (or continue) an experiment; returns its directory and what became of its streams."""
    exp, streams = resolve(what, overrides, directory)
    if only is not None:
        unknown = sorted(only - {s.name for s in streams})
        if unknown:
            raise ExperimentSpecError(f"--stream names no stream of {exp.root}: {unknown}")
    stored = exp.spec().devices
    slots = parse_devices(list(devices) if devices else list(stored))
    view = live if isinstance(live, LiveView) else LiveView(exp) if live else None
    if view is not None:
        view.start()
    try:
        if ray is not None:
            from sagekernel.experiment.ray_backend import run_ray

            selected = [s for s in streams if only is None or s.name in only]
            tick = view.tick if view else None
            outcome = run_ray(exp, selected, address=ray, tick=tick, init=ray_init, ship=ray_ship)
        else:
            check_workers(workers, slots)
            outcome = run_local(
                exp, streams, workers=workers, slots=slots, tick=view.tick if view else None, only=only
            )
    finally:
        if view is not None:
            view.close()
    return exp, outcome


def build_report(
    directory: Path | str, p: float = 1.0
) -> tuple[ExperimentDir, list[Any], list[Any], list[str]]:
    """(the experiment, its StreamData, its tables -- the paper's, then the stream list --, notes)."""
    from sagekernel.experiment.tables import load_streams, notes, paper_tables, stream_table

    exp = ExperimentDir(directory)
    exp.plan_data()  # a clear error for a directory that is no experiment
    streams = load_streams(exp, p)
    return exp, streams, [*paper_tables(streams, p), stream_table(streams)], notes(streams)


def experiment_report(directory: Path | str, p: float = 1.0) -> dict[str, Any]:
    """Everything `sage experiment report` shows, as plain data (the JSON form)."""
    exp, streams, tables, notes = build_report(directory, p)
    data = exp.plan_data()
    return {
        "experiment": data["name"],
        "description": data.get("description", ""),
        "directory": str(exp.root),
        "fast_p": p,
        "notes": notes,
        "tables": [t.to_dict() for t in tables],
        "streams": [
            {
                **s.status.to_dict(),
                "plan": s.plan.to_dict(),
                "metrics": s.metrics.to_dict() if s.metrics else None,
            }
            for s in streams
        ],
    }
