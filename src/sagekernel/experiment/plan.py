"""The matrix expansion: an ExperimentSpec becomes named streams, each one `sage run`.

Every stream's `RunConfig` is built (and so validated) here, before anything runs: a bad method,
an unknown RunConfig setting or a model spec that does not parse fails the whole experiment at
once, naming the stream. Donors (`from`) must name another stream of the experiment, with no
cycle; `order()` lists streams so that every donor comes before its recipients.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sagekernel import defaults
from sagekernel.errors import SageError
from sagekernel.experiment.spec import Block, ExperimentSpec, ExperimentSpecError, check_run_table

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")
@dataclass(frozen=True)
class StreamPlan:
    """One stream of an experiment: its matrix coordinates and every `sage run` setting."""

    name: str
    block: int
    method: str
    model: str  # the label in [models]
    model_spec: str
    schedule: str
    seed: int
    budget: int
    suite: str
    target: str
    device: str | None
    limit: int | None
    frozen: bool
    donor: str | None = None  # the stream whose memory this one starts from
    memory: str | None = None  # frozen | continue | replay:<variant>
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_local_model(self) -> bool:
        return self.model_spec.strip().partition(":")[0] == "local"

    @property
    def replay_variant(self) -> str | None:
        return self.memory.partition(":")[2] if self.memory and self.memory.startswith("replay:") else None

    def config(self, workspace: Path, memory_from: Path | None = None) -> Any:
        """The stream's RunConfig for its workspace (the run id is the stream's name)."""
        from sagekernel.runner.config import RunConfig

        extra = dict(self.run)
        if self.replay_variant == "relevance":
            extra["gamma"] = 0.0  # relevance-only: u plays no part in the ranking (spec §9)
        return RunConfig(
            workspace=workspace,
            run_id=self.name,
            suite=self.suite,
            target=self.target,
            device=self.device,
            model=self.model_spec,
            method=self.method,
            schedule=self.schedule,
            limit=self.limit,
            budget=self.budget,
            seed=self.seed,
            frozen=self.frozen,
            memory_from=memory_from,
            progress=False,
            **extra,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamPlan:
        return cls(**data)


def merge_settings(base: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """[run] then the block's run table; table values (harness, model_options) merge by key."""
    out = dict(base)
    for key, value in block.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _shared_memory(run: dict[str, Any], option: str | None, has_donor: bool, where: str) -> dict[str, Any]:
    """The stream's run settings with `sage experiment run --memory` applied: every stream without a
    donor learns into it, as with `memory` in the file's [run]; a stream with a donor keeps the
    memory its mode gives it. A spec that names another shared memory for the stream is refused
    (URLs are compared without their passwords; the option's URL, which may carry one, is kept)."""
    if option is None or has_donor:
        return run
    from sagekernel.memory.backend import redact, same_memory

    named = run.get("memory")
    if named is not None and not same_memory(str(named), option):
        raise ExperimentSpecError(f"--memory {redact(option)} disagrees with {where}, whose spec names the "
                                  f"shared memory {redact(str(named))}; pass the same memory, or remove "
                                  "`memory` from the file")
    return {**run, "memory": option}


def _token(value: str) -> str:
    """A placeholder value made safe for a directory name (interleave:L2,L3 -> interleave-L2-L3)."""
    value = Path(value).name if "/" in value else value
    return re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-") or "x"


def _fill(template: str, coords: dict[str, Any], where: str, key: str) -> str:
    try:
        return template.format(**{k: _token(str(v)) for k, v in coords.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise ExperimentSpecError(
            f"{where}: {key} template {template!r} is not valid: {exc!r}; use {{{'}, {'.join(coords)}}}"
        ) from None


def _expand_block(spec: ExperimentSpec, block: Block) -> list[StreamPlan]:
    where = f"[[streams]] #{block.index + 1}"
    out = []
    for model in block.models:
        for method in block.methods:
            for schedule in block.schedules:
                for given_budget in block.budgets:
                    # unset: the model's default T, as `sage run --model` resolves it (RunConfig)
                    budget = given_budget or defaults.for_model(spec.models[model])["budget"]
                    for seed in block.seeds:
                        coords = {
                            "method": method,
                            "model": model,
                            "schedule": schedule,
                            "seed": seed,
                            "budget": budget,
                            "suite": block.suite,
                            "target": block.target,
                        }
                        name = _fill(block.name, coords, where, "name")
                        if not _SAFE_NAME.match(name):
                            raise ExperimentSpecError(
                                f"{where}: stream name {name!r} must be letters, digits, "
                                "'.', '_' or '-' (at most 120)"
                            )
                        donor = _fill(block.donor, coords, where, "from") if block.donor else None
                        out.append(
                            StreamPlan(
                                name=name,
                                block=block.index,
                                method=method,
                                model=model,
                                model_spec=spec.models[model],
                                schedule=schedule,
                                seed=seed,
                                budget=budget,
                                suite=block.suite,
                                target=block.target,
                                device=block.device,
                                limit=block.limit,
                                frozen=block.frozen,
                                donor=donor,
                                memory=block.memory,
                                run=_shared_memory(merge_settings(spec.run, block.run), spec.memory,
                                                   block.donor is not None, f"{where}: stream {name!r}"),
                            )
                        )
    return out


def expand(spec: ExperimentSpec) -> list[StreamPlan]:
    """All streams of the experiment, in file order, validated; ExperimentSpecError otherwise."""
    from sagekernel.models.registry import parse_spec

    streams = [s for block in spec.blocks for s in _expand_block(spec, block)]
    seen: dict[str, StreamPlan] = {}
    for s in streams:
        if s.name in seen:
            raise ExperimentSpecError(
                f"two streams are named {s.name!r} ([[streams]] #{seen[s.name].block + 1} and "
                f"#{s.block + 1}); give the block a name template that tells them apart, e.g. "
                'name = "{method}-{model}-transfer"'
            )
        seen[s.name] = s
    for s in streams:
        where = f"stream {s.name!r}"
        check_run_table(s.run, f"{where}: [run]")
        if s.donor is not None:
            if s.donor not in seen:
                raise ExperimentSpecError(
                    f"{where}: from = {s.donor!r} names no stream of this experiment "
                    f"(streams: {', '.join(seen)})"
                )
            if s.donor == s.name:
                raise ExperimentSpecError(f"{where} cannot start from its own memory")
            if s.run.get("memory"):  # its memory comes from the donor (worker.prepare_memory)
                raise ExperimentSpecError(
                    f"{where} starts from {s.donor!r}'s memory (memory = {s.memory!r}); it cannot also "
                    "learn into a shared memory: name the shared memory in the blocks without `from`")
            donor_memory = seen[s.donor].run.get("memory")
            if donor_memory:  # the recipient would start from the donor's (empty) workspace memory
                from sagekernel.memory.backend import redact

                raise ExperimentSpecError(
                    f"{where} starts from {s.donor!r}'s workspace memory, but {s.donor!r} learns into the "
                    f"shared memory {redact(str(donor_memory))} (named in the file or by --memory): a donor "
                    "keeps its own memory; put it in a block without a shared memory")
        try:
            parse_spec(s.model_spec)
            s.config(Path("."), memory_from=Path("donor") if s.frozen and s.donor else None)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors()
            )
            raise ExperimentSpecError(f"{where}: {problems}") from None
        except SageError as exc:
            raise ExperimentSpecError(f"{where}: {exc}") from None
    order(streams)  # raises on a cycle
    return streams


def order(streams: list[StreamPlan]) -> list[StreamPlan]:
    """Streams with every donor before its recipients (stable otherwise)."""
    by_name = {s.name: s for s in streams}
    placed: list[StreamPlan] = []
    state: dict[str, str] = {}

    def visit(s: StreamPlan, path: list[str]) -> None:
        if state.get(s.name) == "done":
            return
        if state.get(s.name) == "visiting":
            raise ExperimentSpecError(
                f"streams start from each other's memory in a cycle: {' -> '.join([*path, s.name])}"
            )
        state[s.name] = "visiting"
        if s.donor is not None and s.donor in by_name:
            visit(by_name[s.donor], [*path, s.name])
        state[s.name] = "done"
        placed.append(s)

    for s in streams:
        visit(s, [])
    return placed


def recipients(streams: list[StreamPlan], name: str) -> list[StreamPlan]:
    """Every stream that starts, directly or not, from `name`'s memory."""
    out, frontier = [], {name}
    while frontier:
        nxt = {s.name for s in streams if s.donor in frontier}
        out += [s for s in streams if s.name in nxt]
        frontier = nxt
    return out
