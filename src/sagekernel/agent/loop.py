"""One operator's trajectory: a correctness episode, then an optimisation episode (spec §1, §2).

Both episodes share T rounds. A round is: retrieve (query = operator spec + latest feedback) ->
prompt from templates -> reply -> trace-completeness gate (re-asks, no evaluation) -> evaluate
-> record. The corr episode ends at the first correct kernel; the opt episode starts from the best
correct kernel and uses the rounds left. The agent never writes memory: after each episode it
hands the trace to `hooks.on_episode`; the runner learns from an operator's episodes only once
the operator has finished and its result is recorded (no operator is helped by its own
experience). A candidate is a `Candidate` (files by path): one file for single-file targets, one
per `Target.files(task)` entry for multi-file ones (agent/files.py).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from sagekernel import defaults
from sagekernel.agent.files import file_paths, render_candidate, single_path
from sagekernel.agent.gate import IncompleteReply, complete_reply
from sagekernel.agent.prompt import Prompts, RoundContext
from sagekernel.agent.state import OperatorOutcome
from sagekernel.candidate import Candidate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.models.base import Message, Model, Reply
from sagekernel.models.exchange_log import exchange_context
from sagekernel.protocols import MemoryPolicy, Target
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, RoundTrace
from sagekernel.tasks.task import Task

#: Judges one candidate (the runner's wrapper around harness.evaluate).
Evaluate = Callable[[Task, Candidate], Verdict]


class AgentConfig(BaseModel):
    """Knobs of the agent loop (spec §14 where the spec has them)."""

    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(default=defaults.ROUNDS, ge=1)
    """T: refinement rounds per operator, shared by the corr and opt episodes (spec §1, SOURCED)."""
    k: int = Field(default=defaults.K, ge=0)
    """Experiences retrieved per round (spec §3, DERIVED)."""
    max_reasks: int = Field(default=defaults.MAX_REASKS, ge=0)
    """Trace-completeness re-asks per round before unresolved items stay ⊥ / the round fails PARSE."""
    history: int = Field(default=defaults.HISTORY, ge=0)
    """How many earlier attempts the prompt summarises."""
    max_tokens: int = Field(default=defaults.MAX_TOKENS, ge=64)
    """Completion-token cap per model call."""
    temperature: float = Field(default=defaults.TEMPERATURE, ge=0)
    """Sampling temperature of every agent call."""


class AgentHooks(Protocol):
    """What the runner does as the trajectory unfolds (persisting, learning, progress)."""

    def on_round(self, trace: RoundTrace, source: str | None) -> None: ...

    def on_episode(self, trace: EpisodeTrace, outcome: OperatorOutcome, last: bool) -> None: ...


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


class Agent:
    def __init__(self, model: Model, target: Target, memory: MemoryPolicy, evaluate: Evaluate,
                 config: AgentConfig | None = None, prompts: Prompts | None = None) -> None:
        self.model, self.target, self.memory, self.evaluate = model, target, memory, evaluate
        self.config = config or AgentConfig()
        self.prompts = prompts or Prompts()

    def run_operator(self, task: Task, hooks: AgentHooks) -> OperatorOutcome:
        out = OperatorOutcome(task=task, budget=self.config.rounds, started=time.monotonic())
        corr = self._episode(task, EpisodeKind.CORR, out, hooks)
        last = not out.correct or out.rounds_left == 0  # spec §7: no opt episode with zero rounds
        hooks.on_episode(corr, out, last)
        if not last:
            hooks.on_episode(self._episode(task, EpisodeKind.OPT, out, hooks), out, True)
        return out

    def _episode(self, task: Task, kind: EpisodeKind, out: OperatorOutcome,
                 hooks: AgentHooks) -> EpisodeTrace:
        episode = EpisodeTrace(operator=task.name, category=task.category, level=task.level, episode=kind)
        while out.rounds_left > 0 and not (kind is EpisodeKind.CORR and out.correct):
            trace, source = self._round(task, kind, out)
            episode.rounds.append(trace)
            hooks.on_round(trace, source)
        episode.t_first_ms, episode.t_best_ms = out.t_first_ms, out.t_best_ms
        # success as credit sees it: a quarantined verdict never counts (RoundTrace.counts_as_success)
        episode.success = (any(r.counts_as_success for r in episode.rounds) if kind is EpisodeKind.CORR
                           else out.improved)
        return episode

    def _round(self, task: Task, kind: EpisodeKind, out: OperatorOutcome) -> tuple[RoundTrace, str | None]:
        n = out.rounds_used + 1
        feedback = out.feedback()
        query = f"{task.name} ({task.category}): {task.description}\n{feedback or ''}".strip()
        items = self.memory.retrieve(query, operator=task.name, category=task.category, episode=kind,
                                     k=self.config.k)
        rules = self.memory.resident_rules()
        ctx = RoundContext(round=n, budget=out.budget, rounds_left=out.rounds_left - 1, episode=kind,
                           items=items, rules=rules, feedback=feedback,
                           history=out.history(self.config.history),
                           current_code=out.best_source if kind is EpisodeKind.OPT else out.last_source,
                           best_ms=out.t_best_ms, ref_ms=out.t_ref_ms)
        specs = list(getattr(self.target, "files", lambda _t: [])(task))
        paths = file_paths(self.target, task)
        messages = self.prompts.round_messages(task, self.target, ctx, files=specs)
        shown = [i.item_id for i in items]
        try:
            with exchange_context(operator=task.name, round=n, episode=kind.value):
                gate = complete_reply(self._ask, messages, prompts=self.prompts, shown_items=shown,
                                      shown_rules=[r.item_id for r in rules], language=self.target.language,
                                      max_reasks=self.config.max_reasks, paths=paths)
            candidate = gate.parsed.candidate(paths, single_path(self.target, task))
            assert candidate is not None  # the gate raises IncompleteReply otherwise
            source: str | None = render_candidate(candidate, {s.path: s.language for s in specs})
            verdict = self.evaluate(task, candidate)
        except IncompleteReply as exc:
            gate, source = exc.outcome, None
            verdict = Verdict(stage=Stage.PARSE, message=str(exc))
        decided = gate.parsed.decisions
        trace = RoundTrace(
            round=n, episode=kind, retrieved=list(items), resident_shown=[r.item_id for r in rules],
            resident_used=list(gate.parsed.resident_used), reasks=gate.reasks,
            decisions=[AdoptionDecision(i, *decided[i]) if i in decided and i not in gate.parsed.conflicts
                       else AdoptionDecision(i, None, "") for i in shown],
            candidate_hash=candidate_hash(source) if source else None, compiled=verdict.compiled,
            correct=verdict.correct, latency_ms=verdict.candidate_ms if verdict.correct else None,
            verdict=verdict.to_dict(), suspect=verdict.suspect)
        out.add(trace, source, verdict, gate.replies)
        return trace, source

    def _ask(self, messages: list[Message], reask: int = 0) -> Reply:
        with exchange_context(purpose=f"reask-{reask}" if reask else "round"):
            return self.model.complete(messages, max_tokens=self.config.max_tokens,
                                       temperature=self.config.temperature)
