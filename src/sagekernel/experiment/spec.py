"""The experiment file: TOML parsed into typed records, with errors that name the bad key.

    name = "main-comparison"
    description = "Table 1: four methods x three backbones"

    [models]                 # label -> model spec (sage run --model)
    qwen = "openai:Qwen3-Coder-Next@http://localhost:8000/v1"

    [defaults]               # every block's settings unless the block sets its own; unset,
    suite = "builtin"        # they are `sage run`'s (RunConfig's) defaults, and budget is the
    target = "cpu"           # model's default T (defaults.for_model), as for `sage run --model`
    budget = 30
    seeds = [0]

    [run]                    # further `RunConfig` settings for every stream (k, embedder, harness ...)
    embedder = "none"

    [[streams]]              # one matrix block: its lists expand as a cross product
    methods = ["refinement", "static-rag", "value-memory", "sage"]
    models = ["qwen"]
    schedules = ["given"]

    [[streams]]              # a stream that starts from another stream's memory
    name = "{method}-{model}-from-glm"
    methods = ["sage"]
    models = ["qwen"]
    from = "sage-glm-given-s{seed}"
    memory = "frozen"        # frozen | continue | replay:relevance | replay:uniform | replay:atu

`name` and `from` are templates over {method} {model} {schedule} {seed} {budget} {suite} {target}.
Every list key also takes a scalar under its singular name (method = "sage" for methods = ["sage"]).
Parsing checks the shape only; plan.py expands the blocks and checks the streams against each other.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError

MEMORY_MODES = ("frozen", "continue", "replay:relevance", "replay:uniform", "replay:atu")
DEFAULT_NAME = "{method}-{model}-{schedule}-s{seed}"
#: Block keys that expand (plural) and their scalar spelling (singular).
LIST_KEYS = {
    "methods": "method",
    "models": "model",
    "schedules": "schedule",
    "seeds": "seed",
    "budgets": "budget",
}
SCALAR_KEYS = ("suite", "target", "device", "limit", "frozen", "name", "from", "memory")
TOP_KEYS = ("name", "description", "models", "defaults", "run", "streams", "devices")


class ExperimentSpecError(SageError):
    """An experiment file (or preset) that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Block:
    """One [[streams]] table: the cross product of its lists is a set of streams."""

    index: int
    methods: tuple[str, ...]
    models: tuple[str, ...]
    schedules: tuple[str, ...]
    seeds: tuple[int, ...]
    budgets: tuple[int | None, ...]  # (None,): the model's default T (defaults.for_model)
    suite: str
    target: str
    device: str | None
    limit: int | None
    frozen: bool
    name: str
    donor: str | None  # the `from` template
    memory: str | None
    run: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    description: str
    models: dict[str, str]
    run: dict[str, Any]
    blocks: tuple[Block, ...]
    devices: tuple[str, ...] = ()
    source: str = ""  # the TOML text, stored with the experiment
    #: `sage experiment run --memory`: the shared memory of every stream without a donor (plan.py).
    memory: str | None = None


def _default(name: str) -> Any:
    """The RunConfig default of a block setting (one default for `sage run` and experiments)."""
    from sagekernel.runner.config import RunConfig

    return RunConfig.model_fields[name].get_default(call_default_factory=True)


def _where(index: int | None) -> str:
    return "the file" if index is None else f"[[streams]] #{index + 1}"


def _list(value: Any, key: str, kind: type, where: str) -> tuple[Any, ...]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ExperimentSpecError(f"{where}: {key} is an empty list")
    for item in items:
        if kind is int and (isinstance(item, bool) or not isinstance(item, int)):
            raise ExperimentSpecError(f"{where}: {key} must be integers, got {item!r}")
        if kind is str and not (isinstance(item, str) and item.strip()):
            raise ExperimentSpecError(f"{where}: {key} must be non-empty strings, got {item!r}")
    if len(set(items)) != len(items):
        raise ExperimentSpecError(f"{where}: {key} lists a value twice: {items}")
    return tuple(items)


def check_run_table(run: dict[str, Any], where: str) -> None:
    """A [run] table sets only the RunConfig knobs an experiment takes there (runner/config.py
    SURFACES); the matrix coordinates and block settings belong in [[streams]]."""
    from sagekernel.runner.config import BLOCK, TABLE, RunConfig, knob_surfaces, knobs

    allowed = knobs(TABLE)
    for key in sorted(run):
        if key in allowed:
            continue
        if key in RunConfig.model_fields and BLOCK in knob_surfaces(key):
            raise ExperimentSpecError(f"{where} may not set {key!r}: it is a [[streams]] setting (set it in "
                                      "the block or in [defaults])")
        if key in RunConfig.model_fields:
            raise ExperimentSpecError(f"{where} may not set {key!r}: the experiment sets it for each stream")
        raise ExperimentSpecError(f"{where}: unknown setting {key!r}; known: {', '.join(allowed)}")


def _block(index: int, raw: Any, defaults: dict[str, Any], models: dict[str, str]) -> Block:
    where = _where(index)
    if not isinstance(raw, dict):
        raise ExperimentSpecError(f"{where} must be a table")
    known = set(LIST_KEYS) | set(LIST_KEYS.values()) | set(SCALAR_KEYS) | {"run"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ExperimentSpecError(f"{where}: unknown key(s) {unknown}; known: {', '.join(sorted(known))}")
    merged = {**defaults, **raw}
    values: dict[str, tuple[Any, ...]] = {}
    for plural, singular in LIST_KEYS.items():
        if plural in raw and singular in raw:
            raise ExperimentSpecError(f"{where}: give {plural} or {singular}, not both")
        present = [k for k in (plural, singular) if k in merged]
        if not present:
            if plural in ("methods", "models"):
                raise ExperimentSpecError(
                    f"{where}: no {plural} (set {plural} = [...] in the block or in [defaults])"
                )
            # RunConfig's own defaults; budget None: the model's (defaults.for_model, resolved per stream)
            values[plural] = {"schedules": (_default("schedule"),), "seeds": (_default("seed"),),
                              "budgets": (None,)}[plural]
            continue
        key = plural if plural in raw else singular if singular in raw else present[0]
        values[plural] = _list(merged[key], key, int if plural in ("seeds", "budgets") else str, where)
    for budget in values["budgets"]:
        if budget is not None and budget < 1:
            raise ExperimentSpecError(f"{where}: budget must be >= 1, got {budget}")
    for label in values["models"]:
        if label not in models:
            raise ExperimentSpecError(
                f"{where}: model {label!r} is not defined in [models] (defined: "
                f"{', '.join(models) or 'none'})"
            )
    strings = {}
    for key in ("suite", "target", "device", "name", "from", "memory"):
        value = merged.get(key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise ExperimentSpecError(f"{where}: {key} must be a non-empty string, got {value!r}")
        strings[key] = value
    limit = merged.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ExperimentSpecError(f"{where}: limit must be an integer >= 1, got {limit!r}")
    frozen = merged.get("frozen", False)
    if not isinstance(frozen, bool):
        raise ExperimentSpecError(f"{where}: frozen must be true or false, got {frozen!r}")
    memory = strings["memory"]
    if memory is not None and memory not in MEMORY_MODES:
        raise ExperimentSpecError(f"{where}: memory {memory!r} is not one of {', '.join(MEMORY_MODES)}")
    if memory is not None and strings["from"] is None:
        raise ExperimentSpecError(f'{where}: memory = {memory!r} needs from = "<donor stream>"')
    if strings["from"] is not None and memory is None:
        memory = "frozen"
    if memory == "continue" and frozen:
        raise ExperimentSpecError(f'{where}: memory = "continue" keeps learning; it cannot be frozen')
    run = raw.get("run", {})
    if not isinstance(run, dict):
        raise ExperimentSpecError(f"{where}: run must be a table of RunConfig settings")
    check_run_table(run, f"{where}: run")
    return Block(
        index=index,
        methods=values["methods"],
        models=values["models"],
        schedules=values["schedules"],
        seeds=values["seeds"],
        budgets=values["budgets"],
        suite=strings["suite"] or _default("suite"),
        target=strings["target"] or _default("target"),
        device=strings["device"],
        limit=limit,
        frozen=frozen or memory not in (None, "continue"),
        name=strings["name"] or DEFAULT_NAME,
        donor=strings["from"],
        memory=memory,
        run=dict(run),
    )


@dataclass(frozen=True)
class Overrides:
    """Command-line changes to a file or preset: model specs by label (--model LABEL=SPEC),
    settings forced on every block (--suite, --target, --device, --budget, --limit) and the shared
    memory of the streams without a donor (--memory). Stored with the experiment so that a resume
    rebuilds the same streams."""

    models: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, Any] = field(default_factory=dict)
    memory: str | None = None

    @property
    def given(self) -> bool:
        return bool(self.models or any(v is not None for v in self.blocks.values()) or self.memory)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"models": dict(self.models), "blocks": dict(self.blocks)}
        if self.memory is not None:
            out["memory"] = self.memory
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Overrides:
        return cls(models=dict(data.get("models", {})), blocks=dict(data.get("blocks", {})),
                   memory=data.get("memory"))


OVERRIDABLE = ("suite", "target", "device", "budget", "limit")


def parse(text: str, *, origin: str = "<experiment>", overrides: Overrides | None = None) -> ExperimentSpec:
    """An ExperimentSpec from TOML text; ExperimentSpecError says what and where."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentSpecError(f"{origin} is not valid TOML: {exc}") from None
    overrides = overrides or Overrides()
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ExperimentSpecError(
            f"{origin}: unknown top-level key(s) {unknown}; known: {', '.join(TOP_KEYS)}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ExperimentSpecError(f'{origin}: name = "..." is required (it names the experiment)')
    models = data.get("models", {})
    if not isinstance(models, dict) or not models:
        raise ExperimentSpecError(
            f'{origin}: [models] must map at least one label to a model spec, e.g. local = "local"'
        )
    for label in overrides.models:
        if label not in models:
            raise ExperimentSpecError(
                f"--model {label}=...: {origin} has no model labelled {label!r} (labels: {', '.join(models)})"
            )
    models = {**models, **overrides.models}
    for label, spec in models.items():
        if not isinstance(spec, str) or not spec.strip():
            raise ExperimentSpecError(f"{origin}: [models] {label} must be a model spec string")
    for table in ("defaults", "run"):
        if not isinstance(data.get(table, {}), dict):
            raise ExperimentSpecError(f"{origin}: [{table}] must be a table")
    check_run_table(data.get("run", {}), f"{origin}: [run]")
    defaults = data.get("defaults", {})
    bad = sorted(set(defaults) - (set(LIST_KEYS) | set(LIST_KEYS.values()) | set(SCALAR_KEYS)))
    if bad:
        raise ExperimentSpecError(f"{origin}: [defaults] has unknown key(s) {bad}")
    streams = data.get("streams")
    if not isinstance(streams, list) or not streams:
        raise ExperimentSpecError(f"{origin}: no [[streams]] blocks; an experiment needs at least one")
    forced = {k: v for k, v in overrides.blocks.items() if v is not None}
    bad = sorted(set(forced) - set(OVERRIDABLE))
    if bad:
        raise ExperimentSpecError(f"cannot override {bad}; overridable: {', '.join(OVERRIDABLE)}")
    if isinstance(streams, list):
        streams = [_force(raw, forced) if isinstance(raw, dict) else raw for raw in streams]
    devices = data.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise ExperimentSpecError(f'{origin}: devices must be a list of strings, e.g. ["cuda:0,1"]')
    blocks = tuple(_block(i, raw, defaults, models) for i, raw in enumerate(streams))
    return ExperimentSpec(
        name=name.strip(),
        description=str(data.get("description", "")),
        models={k: v.strip() for k, v in models.items()},
        run=dict(data.get("run", {})),
        blocks=blocks,
        devices=tuple(devices),
        source=text,
        memory=overrides.memory,
    )


def _force(raw: dict[str, Any], forced: dict[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    for key, value in forced.items():
        if key == "budget":
            out.pop("budgets", None)
        out[key] = value
    return out


def load(path: Path | str, overrides: Overrides | None = None) -> ExperimentSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExperimentSpecError(f"cannot read the experiment file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ExperimentSpecError(f"the experiment file {path} is not UTF-8 text (byte {exc.start})") \
            from None
    return parse(text, origin=str(path), overrides=overrides)
