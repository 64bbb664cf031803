"""`RunConfig`: every knob of a run, declared once; stored with the run so `--resume` rebuilds it.

Each field is one knob: its type, default, range and help (the field's docstring) are declared
here and nowhere else. `sage run` and `sage mcp` build their options from these fields
(cli/run_options.py), an experiment's keys are checked against them (experiment/spec.py), and
the agent, memory and harness configs are built from them (`agent_config`, `memory_config`,
`harness_config`). A field's `json_schema_extra` says where it can be given (`SURFACES`), the
option spelling where it differs from `--field-name`, and whether its default depends on the
model (`defaults.for_model`, resolved here so every entry point gets the same value).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sagekernel import defaults
from sagekernel.errors import SageError
from sagekernel.memory.methods import METHODS
from sagekernel.runner.environment import environment_change, read_environment
from sagekernel.runner.schedule import SCHEDULES

#: Where a knob can be given: `sage run`, `sage mcp`, an experiment's [run] table, an
#: experiment's [[streams]] blocks (as a matrix coordinate or a block setting), the options of
#: `sage experiment run` (for every stream the spec lets take it).
RUN, MCP, TABLE, BLOCK, EXPERIMENT = "run", "mcp", "experiment-run", "experiment-block", "experiment-cli"
SURFACES = (RUN, MCP, TABLE, BLOCK, EXPERIMENT)


def _on(*surfaces: str, flag: str | None = None, model_dependent: bool = False) -> dict[str, Any]:
    """A field's json_schema_extra: where it is given, its option spelling, a model-dependent default."""
    extra: dict[str, Any] = {"surfaces": list(surfaces)}
    if flag is not None:
        extra["flag"] = flag
    if model_dependent:
        extra["model_dependent"] = True
    return extra


#: The default of a field that `RunConfig._resolve` always fills in (from the model, the environment).
_RESOLVED: Any = None

# Fields that do not change what a run computes; they are not part of its identity. The spend caps
# only say where the run stops: the same command with a raised cap continues the stopped run.
_NOT_IDENTITY = {"workspace", "run_id", "resume", "new", "progress", "model_options", "max_total_tokens",
                 "max_cost_usd", "memory"}


#: A run id names files next to the database (memory-from-<id>.db) and appears in reports: letters,
#: digits, '.', '_' and '-', not starting with '.' or '-', at most 200 characters (an experiment's
#: stream names, experiment/plan.py, are made of the same characters).
RUN_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"


class RunConfigError(SageError):
    """Inconsistent `sage run` options."""


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    workspace: Path = Field(default=Path("sage-workspace"), json_schema_extra=_on(RUN, MCP))
    """Workspace directory (memory, runs, exchange log)."""
    suite: str = Field(default="demo", json_schema_extra=_on(RUN, MCP, BLOCK))
    """Suite: builtin, demo, level1, level2, level3, or a directory of task files. The demo suite is
    3 small Level-1/2 operators."""
    target: str = Field(default="cpu", json_schema_extra=_on(RUN, MCP, BLOCK))
    """Backend the kernels are written for: cpu, triton, cuda, ascendc."""
    device: str | None = Field(default=None, json_schema_extra=_on(RUN, MCP, BLOCK))
    """The target's device (triton: interpreter, cuda, npu); default: its first. `sage doctor` lists
    them. On `sage run` and `sage mcp`, cuda:N or npu:N also pins the process to card N."""
    model: str = Field(default="local", json_schema_extra=_on(RUN, MCP, BLOCK))
    """Model spec: local (embedded Qwen2.5-Coder-1.5B), openai:<model>@<url>, anthropic:<model>,
    scripted:<file>, oracle[:key=value,...] (synthetic, docs/oracle.md). Under `sage mcp` it only
    distils experiences and abstracts resident rules (the coding agent writes the kernels)."""
    driver: str = Field(default="builtin", pattern="^(builtin|mcp)$", json_schema_extra=_on())
    """Who writes the candidates: the built-in loop with `model`, or a coding agent through
    `sage mcp` (then `model` only distils and abstracts rules). Part of the run's identity."""
    method: str = Field(default="sage", description=f"Memory method: {', '.join(METHODS)}.",
                        json_schema_extra=_on(RUN, MCP, BLOCK))
    schedule: str = Field(default="given", description=f"Stream order: {' | '.join(SCHEDULES)}.",
                          json_schema_extra=_on(RUN, MCP, BLOCK))
    limit: int | None = Field(default=None, ge=1, json_schema_extra=_on(RUN, MCP, BLOCK))
    """Process only the first N operators of the planned stream."""
    budget: int = Field(default=_RESOLVED, ge=1, json_schema_extra=_on(RUN, MCP, BLOCK, model_dependent=True))
    """T, rounds per operator shared by the correctness and optimisation episodes. Default: the
    paper's T for API models (and under `sage mcp`); fewer for the embedded `local` model writing the
    kernels, because a 1.5B model at ~5 tokens/s needs ~1.5-2 minutes per round."""
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN, json_schema_extra=_on(RUN, MCP))
    """Run id (default: a new timestamped id, or the unfinished run with the same configuration)."""
    resume: bool = Field(default=False, json_schema_extra=_on(RUN))
    """Resume the latest unfinished run of the workspace (with its stored settings)."""
    new: bool = Field(default=False, json_schema_extra=_on(RUN, MCP))
    """Start a new run even if an unfinished run with this configuration exists."""
    memory_from: Path | None = Field(default=None, json_schema_extra=_on(RUN, MCP))
    """Evaluate with a snapshot of another workspace's memory (needs --frozen)."""
    memory: str | None = Field(default=None, json_schema_extra=_on(RUN, MCP, TABLE, EXPERIMENT))
    """A shared PostgreSQL memory, postgresql://user@host:port/db (docs/shared_memory.md), instead of
    the workspace's own; default: $SAGE_MEMORY_URL, else the workspace's SQLite memory. Stored
    without its password, so a resume names it again. `sage experiment run --memory` gives it to
    every stream without a donor (`from`), as `memory` in the file's [run] would (not read from
    $SAGE_MEMORY_URL there); a stream whose spec names another memory is refused."""
    frozen: bool = Field(default=False, json_schema_extra=_on(RUN, MCP, BLOCK))
    """Memory is read-only: no distillation, no learning (transfer / fixed-bank runs)."""
    seed: int = Field(default=0, ge=0, json_schema_extra=_on(RUN, MCP, BLOCK))
    """Seed of randomised memory methods (value memory ε-greedy, random UGC)."""
    embedder: str = Field(default="auto", pattern="^(auto|none)$", json_schema_extra=_on(RUN, MCP, TABLE))
    """Dense retrieval: auto (all-MiniLM-L6-v2 when installed) or none (BM25 only)."""
    gamma: float = Field(default=defaults.GAMMA, ge=0, allow_inf_nan=False,
                         json_schema_extra=_on(RUN, MCP, TABLE))
    """γ, the utility reranking strength (spec §3)."""
    hot_budget: int = Field(default=defaults.HOT_BUDGET, ge=0, json_schema_extra=_on(RUN, MCP, TABLE))
    """B, the resident-rule token budget (spec §1)."""
    k: int = Field(default=defaults.K, ge=0, json_schema_extra=_on(RUN, MCP, TABLE, flag="-k"))
    """Experiences retrieved per round, from a pool of the 3k most relevant (spec §3)."""
    max_reasks: int = Field(default=defaults.MAX_REASKS, ge=0, json_schema_extra=_on(RUN, TABLE))
    """Trace-completeness re-asks per round."""
    history: int = Field(default=defaults.HISTORY, ge=0, json_schema_extra=_on(RUN, TABLE))
    """Earlier attempts summarised in each prompt."""
    max_tokens_per_call: int = Field(default=_RESOLVED, ge=64, json_schema_extra=_on(
        RUN, MCP, TABLE, flag="--max-tokens", model_dependent=True))
    """Completion-token cap of one model call. Default: lower for the embedded `local` model, which
    needs a few hundred tokens per kernel and would otherwise spend minutes filling a larger cap
    when it loses the format."""
    temperature: float = Field(default=defaults.TEMPERATURE, ge=0, allow_inf_nan=False,
                               json_schema_extra=_on(RUN, MCP, TABLE))
    """Sampling temperature."""
    diagnostics: bool = Field(default=True, json_schema_extra=_on(RUN, MCP, TABLE))
    """After a crash or a wrong result, add the target's diagnostics (sanitizer, debug printf, first
    mismatch) to the next round's feedback."""
    distill: bool = Field(default=True, json_schema_extra=_on(RUN, MCP, TABLE))
    """Distil new memory items after each episode (methods that write memory only)."""
    max_new_items: int = Field(default=defaults.MAX_NEW_ITEMS, ge=0, json_schema_extra=_on(RUN, MCP, TABLE))
    """At most this many new memory items per episode: asked of distillation and kept by the
    memory's writer (spec §5)."""
    max_total_tokens: int | None = Field(default=None, ge=1, json_schema_extra=_on(RUN, MCP, TABLE))
    """Stop the run cleanly once this many tokens were used (prompt + completion)."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                       json_schema_extra=_on(RUN, MCP, TABLE, flag="--max-cost"))
    """Stop the run cleanly once this many USD were spent (priced backends)."""
    model_options: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_on(RUN, MCP, TABLE))
    """ModelConfig settings (endpoint key variable, timeouts, prices, extra_body, local n_ctx ...).
    Not part of the run's identity: changing a timeout or key must not stop a resume."""
    harness: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_on(RUN, MCP, TABLE))
    """Overrides of HarnessConfig fields (e.g. {"iters": 20}); part of the run's identity."""
    retrieve_only: dict[str, str] = Field(default_factory=dict, json_schema_extra=_on(RUN, MCP, TABLE))
    """Retrieve only items created or credited with this provenance KEY=VALUE (repeatable; keys:
    run_id, model, target, device, operator, episode, protocol, team), e.g. --retrieve-only target=cpu."""
    exclude_runs: list[str] = Field(default_factory=list,
                                    json_schema_extra=_on(RUN, MCP, TABLE, flag="--exclude-run"))
    """Never retrieve items this run created (repeatable)."""
    progress: bool = Field(default=True, json_schema_extra=_on(RUN))
    """Show the live progress display (on stderr)."""
    environment: dict[str, str] = Field(default=_RESOLVED, json_schema_extra=_on())
    """The result-changing environment variables the run started with (runner/environment.py),
    read from the process when not given; part of the run's identity."""

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        """Model-dependent defaults (`defaults.for_model`) and the environment, when not given."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        model = data.get("model") if isinstance(data.get("model"), str) else "local"
        driver = data.get("driver") if isinstance(data.get("driver"), str) else "builtin"
        for name, value in defaults.for_model(model, driver).items():
            if data.get(name) is None:
                data[name] = value
        if data.get("environment") is None:
            target = data.get("target") if isinstance(data.get("target"), str) else "cpu"
            data["environment"] = read_environment(target)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.method not in METHODS:
            raise RunConfigError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.memory_from is not None and not self.frozen:
            raise RunConfigError(
                "--memory-from evaluates with a snapshot of another workspace's memory and needs "
                "--frozen; to keep learning from it, `sage memory export` it and `sage memory import` "
                "it into this workspace")
        if self.memory is not None:
            from sagekernel.memory.backend import memory_url

            memory_url(self.memory)  # not a PostgreSQL URL: refused before anything runs
            if self.memory_from is not None:
                raise RunConfigError("--memory and --memory-from name two memories; pass one")
        from sagekernel.memory.records import Provenance

        unknown = sorted(set(self.retrieve_only) - set(Provenance.__dataclass_fields__))
        if unknown:
            raise RunConfigError(f"--retrieve-only: unknown provenance field(s) {unknown}; known: "
                                 f"{', '.join(Provenance.__dataclass_fields__)}")
        bad_runs = [r for r in self.exclude_runs if not re.fullmatch(RUN_ID_PATTERN, r)]
        if bad_runs:
            raise RunConfigError(f"--exclude-run: {ascii(bad_runs[0])[:80]} is not a run id "
                                 f"(letters, digits, '.', '_', '-')")
        if self.resume and self.new:
            raise RunConfigError("--resume and --new contradict each other")
        baseline = self.harness_config().baseline  # unknown or ill-typed overrides fail before the run starts
        from sagekernel.harness.baseline import baseline_problem

        problem = baseline_problem(baseline, self.target)  # before the first model call (issue 31)
        if problem:
            raise RunConfigError(f"--baseline: {problem}")
        return self

    def harness_config(self) -> Any:
        """The HarnessConfig with this run's overrides applied."""
        from dataclasses import fields

        from sagekernel.harness.config import HarnessConfig, HarnessConfigError

        known = {f.name: f for f in fields(HarnessConfig)}
        unknown = sorted(set(self.harness) - set(known))
        if unknown:
            raise RunConfigError(f"--harness: unknown setting(s) {unknown}; known: {', '.join(known)}")
        try:
            return HarnessConfig(**self.harness)
        except HarnessConfigError as exc:
            raise RunConfigError(f"--harness: {exc}") from None

    def agent_config(self) -> Any:
        """The AgentConfig of the built-in loop."""
        from sagekernel.agent.loop import AgentConfig

        return AgentConfig(rounds=self.budget, k=self.k, max_reasks=self.max_reasks, history=self.history,
                           max_tokens=self.max_tokens_per_call, temperature=self.temperature)

    def memory_config(self) -> Any:
        """The MemoryConfig of the run's memory policy (the spec's constants stay its defaults)."""
        from sagekernel.memory.records import MemoryConfig

        return MemoryConfig(gamma=self.gamma, k=self.k, budget_tokens=self.hot_budget,
                            max_new_items=self.max_new_items)

    def environment_change(self) -> list[str]:
        """How this process's result-changing environment differs from the run's (empty: not)."""
        return environment_change(self.environment, self.target)

    def key(self) -> dict[str, Any]:
        """The run's identity: the same command resumes a run with an equal key. An empty
        environment is left out, so the keys of runs recorded before it was part of them still match."""
        key = {k: v for k, v in self.stored().items() if k not in _NOT_IDENTITY}
        if not key.get("environment"):
            key.pop("environment", None)
        return key

    def stored(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.memory_from is not None:
            data["memory_from"] = str(Path(self.memory_from).resolve())
        if self.memory is not None:
            from sagekernel.memory.backend import redact

            data["memory"] = redact(self.memory)
        return data


def knob_surfaces(name: str) -> tuple[str, ...]:
    """Where the RunConfig field `name` can be given (SURFACES)."""
    extra = RunConfig.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return tuple(extra.get("surfaces", ()))  # type: ignore[arg-type]


def knobs(surface: str) -> list[str]:
    """The RunConfig fields that can be given on `surface`, in declaration order."""
    return [name for name in RunConfig.model_fields if surface in knob_surfaces(name)]


def model_dependent(name: str) -> bool:
    """Whether the default of the RunConfig field `name` depends on the model (defaults.for_model)."""
    extra = RunConfig.model_fields[name].json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("model_dependent"))


#: An evaluation (or diagnosis) of one candidate is given this many times the sum of the harness's
#: own limits (build, runtime start, timing run, ten kernel calls) before the runner gives up on it.
#: The harness limits every process it starts; this bounds what runs in the runner's own process:
#: the task's reference and inputs (a reference that hangs only in float64, as the harness runs
#: it, once blocked `sage run` forever while `sage tasks check` said ok).
EVALUATION_ALLOWANCE = 3.0


def evaluation_deadline_s(harness: Any) -> float:
    """Seconds one evaluation may take in all (see EVALUATION_ALLOWANCE)."""
    return EVALUATION_ALLOWANCE * (harness.build_timeout_s + harness.start_timeout_s
                                   + harness.timing_timeout_s + 10 * harness.call_timeout_s)


def check_device(target: Any, device: str | None) -> str:
    """The device a run of `target` uses (`device`, or the target's first), refused before the
    first model call when the target has no such device or cannot run on it here: the harness
    would fail every round the same way, after the model was paid for each (an unknown --device
    once ran a whole stream: 90 calls, 385k tokens, every verdict "no device")."""
    names = [d.name for d in target.devices()]
    chosen = device if device is not None else (names[0] if names else None)
    if chosen is None or chosen not in names:
        raise RunConfigError(f"--device: target {target.name!r} has no device {device!r}; its devices: "
                             f"{', '.join(names) or 'none'} (`sage doctor` lists what runs here)")
    ok, why = target.available(chosen)
    if not ok:
        raise RunConfigError(f"--device: target {target.name!r} cannot run on {chosen!r} here: {why}")
    return chosen
