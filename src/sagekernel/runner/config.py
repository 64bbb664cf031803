"""`RunConfig`: every knob of a `sage run`, stored with the run so `--resume` can rebuild it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sagekernel import defaults
from sagekernel.errors import SageError
from sagekernel.memory.policies import METHODS

# The defaults live in sagekernel/defaults.py (one definition each); these names stay for callers.
LOCAL_DEFAULT_BUDGET = defaults.LOCAL_ROUNDS
LOCAL_DEFAULT_MAX_TOKENS = defaults.LOCAL_MAX_TOKENS
PAPER_BUDGET = defaults.ROUNDS


# Fields that do not change what a run computes; they are not part of its identity. The spend caps
# only say where the run stops: the same command with a raised cap continues the stopped run.
_NOT_IDENTITY = {"workspace", "run_id", "resume", "new", "progress", "model_options", "max_total_tokens",
                 "max_cost_usd"}


#: A run id names files next to the database (memory-from-<id>.db) and appears in reports: letters,
#: digits, '.', '_' and '-', not starting with '.' or '-', at most 200 characters (an experiment's
#: stream names, experiment/plan.py, are made of the same characters).
RUN_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"


class RunConfigError(SageError):
    """Inconsistent `sage run` options."""


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: Path = Path("sage-workspace")
    """Directory of the workspace database (memory, runs, exchange log)."""
    suite: str = "demo"
    """Built-in suite name (builtin, demo, level1, level2, level3) or a directory of task files."""
    target: str = "cpu"
    """Backend the kernels are written for."""
    device: str | None = None
    """The target's device (interpreter, cuda, npu, ...); None: the target's first."""
    model: str = "local"
    """Model spec (local, openai:<model>@<url>, anthropic:<model>, scripted:<file>)."""
    driver: str = Field(default="builtin", pattern="^(builtin|mcp)$")
    """Who writes the candidates: the built-in loop with `model`, or a coding agent through
    `sage mcp` (then `model` only distils and abstracts rules). Part of the run's identity."""
    method: str = "sage"
    """Memory method (spec §9)."""
    schedule: str = "given"
    """Stream order: given | by-level | level:N | interleave:L2,L3."""
    limit: int | None = Field(default=None, ge=1)
    """Process only the first N operators of the planned stream."""
    budget: int = Field(default=PAPER_BUDGET, ge=1)
    """T: rounds per operator shared by the corr and opt episodes."""
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN)
    """Explicit run id (default: a new timestamped id, or the unfinished run with this config)."""
    resume: bool = False
    """Resume the latest unfinished run of the workspace (its stored configuration is used)."""
    new: bool = False
    """Start a new run even if an unfinished run with the same configuration exists."""
    memory_from: Path | None = None
    """Evaluate with another workspace's memory (a snapshot copy; requires frozen)."""
    frozen: bool = False
    """Memory is read-only: no distillation, no learning (transfer / fixed-bank runs)."""
    seed: int = Field(default=0, ge=0)
    """Seed of randomised memory methods (value memory ε-greedy, random UGC)."""
    embedder: str = Field(default="auto", pattern="^(auto|none)$")
    """Dense retrieval: "auto" uses all-MiniLM-L6-v2 when installed; "none" is BM25 only."""
    gamma: float = Field(default=defaults.GAMMA, ge=0, allow_inf_nan=False)
    """γ, the utility reranking strength (spec §3)."""
    hot_budget: int = Field(default=defaults.HOT_BUDGET, ge=0)
    """B, the resident-rule token budget (spec §1)."""
    k: int = Field(default=defaults.K, ge=0)
    """Experiences retrieved per round."""
    max_reasks: int = Field(default=defaults.MAX_REASKS, ge=0)
    """Trace-completeness re-asks per round."""
    history: int = Field(default=defaults.HISTORY, ge=0)
    """Earlier attempts summarised in each prompt."""
    max_tokens_per_call: int = Field(default=defaults.MAX_TOKENS, ge=64)
    """Completion-token cap of one model call."""
    temperature: float = Field(default=defaults.TEMPERATURE, ge=0, allow_inf_nan=False)
    """Sampling temperature."""
    diagnostics: bool = True
    """After a crash or a wrong result, run the target's diagnostics (sanitizer, debug printf,
    first mismatch) and add their report to the next round's feedback."""
    distill: bool = True
    """Distil new memory items after each episode (methods that write memory only)."""
    max_new_items: int = Field(default=defaults.MAX_NEW_ITEMS, ge=0)
    """At most this many distilled items per episode (spec §5)."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """Stop the run cleanly once this many tokens were used (prompt + completion)."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop the run cleanly once this much was spent (priced backends)."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """ModelConfig settings (endpoint key variable, timeouts, prices, extra_body, local n_ctx ...).
    Not part of the run's identity: changing a timeout or key must not stop a resume."""
    harness: dict[str, Any] = Field(default_factory=dict)
    """Overrides of HarnessConfig fields (e.g. {"iters": 20}); part of the run's identity."""
    progress: bool = True
    """Show the live progress display."""

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.method not in METHODS:
            raise RunConfigError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.memory_from is not None and not self.frozen:
            raise RunConfigError(
                "--memory-from evaluates with a snapshot of another workspace's memory and needs "
                "--frozen; to keep learning from it, `sage memory export` it and `sage memory import` "
                "it into this workspace")
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

    def key(self) -> dict[str, Any]:
        """The run's identity: the same command resumes a run with an equal key."""
        return {k: v for k, v in self.stored().items() if k not in _NOT_IDENTITY}

    def stored(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.memory_from is not None:
            data["memory_from"] = str(Path(self.memory_from).resolve())
        return data


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
