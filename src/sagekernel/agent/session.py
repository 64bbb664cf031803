"""One operator's trajectory as a sequence of steps, driven by whoever writes the candidates.

The built-in loop (agent/loop.py) drives it with the embedded or API model; the MCP server
(mcp_server/) drives it with a coding agent's tool calls. Both go through the same steps, so a
trace is the same whoever produced it:

    open_round()  retrieve for the current state (query = operator spec + latest feedback),
                  the resident rules and the round's prompt context; idempotent while open
    unresolved()  the trace-completeness check: retrieved ids without exactly one decision
    submit()      evaluate the candidate (the round is spent), attach a diagnostic after a crash
                  or a wrong result, record the trace, and move the episodes on: the corr episode
                  ends at the first correct kernel, the opt episode starts from it and uses the
                  rounds left (spec §1, §2, §7)
    finish()      end the operator early (its current episode is the last one)

The session never writes memory: each finished episode goes to `hooks.on_episode`, and the
runner learns from an operator's episodes once its result is recorded.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sagekernel.agent.files import render_candidate
from sagekernel.agent.prompt import RoundContext
from sagekernel.agent.state import OperatorOutcome
from sagekernel.candidate import Candidate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.models.base import Reply
from sagekernel.protocols import MemoryPolicy, Target
from sagekernel.records import (
    AdoptionDecision,
    EpisodeKind,
    EpisodeTrace,
    ResidentRule,
    RetrievedItem,
    RoundTrace,
)
from sagekernel.tasks.task import Task

#: Judges one candidate (the runner's wrapper around harness.evaluate).
Evaluate = Callable[[Task, Candidate], Verdict]
#: A diagnostic report for a candidate that crashed or computed wrong values (None: nothing to add).
Diagnose = Callable[[Task, Candidate], "str | None"]
#: Verdict stages after which the built-in diagnostics run (a crash or a wrong result).
DIAGNOSED_STAGES = frozenset({Stage.RUNTIME, Stage.CORRECTNESS})


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


class SessionHooks(Protocol):
    """What the runner does as the trajectory unfolds (persisting, learning, progress)."""

    def on_round(self, trace: RoundTrace, source: str | None) -> None: ...

    def on_episode(self, trace: EpisodeTrace, outcome: OperatorOutcome, last: bool) -> None: ...


@dataclass
class OpenRound:
    """A round that has retrieved but not yet been evaluated."""

    number: int
    episode: EpisodeKind
    items: list[RetrievedItem]
    rules: list[ResidentRule]
    context: RoundContext

    @property
    def shown(self) -> list[int]:
        return [i.item_id for i in self.items]


@dataclass
class Submission:
    """One candidate and what was decided about the round's experiences."""

    candidate: Candidate | None  # None: no usable source (the round fails at PARSE)
    decisions: dict[int, tuple[bool, str]] = field(default_factory=dict)  # item id -> (adopted, why)
    conflicts: set[int] = field(default_factory=set)  # ids given both decisions (stay ⊥)
    resident_used: Sequence[int] = ()
    reasks: int = 0
    replies: Sequence[Reply] = ()  # the model calls behind it (token accounting)
    parse_error: str = ""  # why there is no candidate
    languages: dict[str, str] = field(default_factory=dict)  # path -> fenced language (rendering)
    rule_decisions: dict[int, tuple[bool, str]] = field(default_factory=dict)  # rule id -> (used, why)
    channel: str = ""  # how the decisions came (agent/gate.py; "mcp" for the MCP tools)
    evidence: dict[str, str] = field(default_factory=dict)  # "E12"/"R3" -> the raw text read


class OperatorSession:
    def __init__(self, task: Task, target: Target, memory: MemoryPolicy, evaluate: Evaluate,
                 hooks: SessionHooks, *, rounds: int, k: int, history: int,
                 diagnose: Diagnose | None = None) -> None:
        self.task, self.target, self.memory, self.evaluate, self.hooks = task, target, memory, evaluate, hooks
        self.k, self.history_lines, self.diagnose = k, history, diagnose
        self.out = OperatorOutcome(task=task, budget=rounds, started=time.monotonic())
        self.episode = self._new_episode(EpisodeKind.CORR)
        self.current: OpenRound | None = None
        self.finished = False

    def _new_episode(self, kind: EpisodeKind) -> EpisodeTrace:
        return EpisodeTrace(operator=self.task.name, category=self.task.category, level=self.task.level,
                            episode=kind)

    @property
    def kind(self) -> EpisodeKind:
        return self.episode.episode

    def query(self) -> str:
        feedback = self.out.feedback()
        return f"{self.task.name} ({self.task.category}): {self.task.description}\n{feedback or ''}".strip()

    def open_round(self) -> OpenRound:
        """The round in progress, retrieving for it on first call (no round is spent)."""
        if self.finished:
            raise RuntimeError(f"operator {self.task.name} has finished")
        if self.current is not None:
            return self.current
        out, kind = self.out, self.kind
        items = self.memory.retrieve(self.query(), operator=self.task.name, category=self.task.category,
                                     episode=kind, k=self.k)
        rules = self.memory.resident_rules()
        n = out.rounds_used + 1
        ctx = RoundContext(round=n, budget=out.budget, rounds_left=out.rounds_left - 1, episode=kind,
                           items=items, rules=rules, feedback=out.feedback(),
                           history=out.history(self.history_lines),
                           current_code=out.best_source if kind is EpisodeKind.OPT else out.last_source,
                           best_ms=out.t_best_ms, ref_ms=out.t_ref_ms)
        self.current = OpenRound(n, kind, list(items), list(rules), ctx)
        return self.current

    def add_items(self, items: Sequence[RetrievedItem]) -> list[RetrievedItem]:
        """Extra retrievals of the open round (an agent's own query): they join the round's
        retrieved set, so they too need a decision before the round is evaluated."""
        rnd = self.open_round()
        have = set(rnd.shown)
        new = [i for i in items if i.item_id not in have]
        rnd.items.extend(new)
        return new

    def unresolved(self, decisions: dict[int, tuple[bool, str]],
                   conflicts: Collection[int] = ()) -> list[int]:
        """Retrieved ids of the open round without exactly one decision, in retrieval order."""
        return [i for i in self.open_round().shown if i not in decisions or i in conflicts]

    def submit(self, sub: Submission) -> tuple[RoundTrace, Verdict]:
        """Evaluate and record one round (it is spent, whatever the verdict)."""
        rnd = self.open_round()
        source: str | None = None
        if sub.candidate is None:
            verdict = Verdict(stage=Stage.PARSE, message=sub.parse_error or "no usable kernel source")
        else:
            source = render_candidate(sub.candidate, sub.languages)
            verdict = self.evaluate(self.task, sub.candidate)
            if self.diagnose is not None and verdict.stage in DIAGNOSED_STAGES:
                report = self.diagnose(self.task, sub.candidate)
                if report:
                    verdict.checks["diagnostic"] = report
        shown_rules = [r.item_id for r in rnd.rules]

        def record(kind: str, i: int, decided: dict[int, tuple[bool, str]]) -> AdoptionDecision:
            if i not in decided or (kind == "E" and i in sub.conflicts):
                return AdoptionDecision(i, None, "", sub.channel, sub.evidence.get(f"{kind}{i}", ""))
            return AdoptionDecision(i, *decided[i], sub.channel, sub.evidence.get(f"{kind}{i}", ""))

        trace = RoundTrace(
            round=rnd.number, episode=rnd.episode, retrieved=list(rnd.items), resident_shown=shown_rules,
            resident_used=[r for r in sub.resident_used if r in shown_rules], reasks=sub.reasks,
            decisions=[record("E", i, sub.decisions) for i in rnd.shown],
            rule_decisions=[record("R", r, sub.rule_decisions) for r in shown_rules
                            if r in sub.rule_decisions],
            candidate_hash=candidate_hash(source) if source else None, compiled=verdict.compiled,
            correct=verdict.correct, latency_ms=verdict.candidate_ms if verdict.correct else None,
            verdict=verdict.to_dict(), suspect=verdict.suspect)
        self.out.add(trace, source, verdict, list(sub.replies))
        self.current = None
        self.episode.rounds.append(trace)
        self.hooks.on_round(trace, source)
        self._advance()
        return trace, verdict

    def _advance(self) -> None:
        out = self.out
        if self.kind is EpisodeKind.CORR and out.correct:
            last = out.rounds_left == 0  # spec §7: no opt episode with zero rounds
            self._close(last)
            if not last:
                self.episode = self._new_episode(EpisodeKind.OPT)
        elif out.rounds_left == 0:
            self._close(True)

    def finish(self) -> None:
        """End the operator now: the current episode is its last (the budget may be left)."""
        if not self.finished:
            self.current = None
            self._close(True)

    def _close(self, last: bool) -> None:
        episode, out = self.episode, self.out
        episode.t_first_ms, episode.t_best_ms = out.t_first_ms, out.t_best_ms
        # success as credit sees it: a quarantined verdict never counts (RoundTrace.counts_as_success)
        corr = episode.episode is EpisodeKind.CORR
        episode.success = any(r.counts_as_success for r in episode.rounds) if corr else out.improved
        self.finished = last
        self.hooks.on_episode(episode, out, last)
