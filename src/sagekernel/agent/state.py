"""The state of one operator's trajectory, and the result it becomes (records.OperatorResult)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sagekernel.agent.prompt import HistoryLine
from sagekernel.harness.speedup_interval import better_than, round_ratios
from sagekernel.harness.verdict import Verdict
from sagekernel.models.base import Reply
from sagekernel.records import OperatorResult, RoundTrace
from sagekernel.tasks.task import Task

_SUMMARY_CHARS = 160

#: RECONSTRUCTED (docs/spec_choices.md): a correct kernel replaces the best one only when it is
#: faster beyond the noise: the lower bound of the bootstrap interval of its speedup over the best's
#: (both from their interleaved rounds, harness/speedup_interval.py) is above 1, the same test as
#: the noise-aware Fast_p. Where either verdict has no rounds (an older record), it must be at least
#: MIN_GAIN faster: medians on a shared machine wobble by a few percent, and without a margin a
#: resubmitted identical kernel "improves" by noise and earns a positive optimisation score.
MIN_GAIN = 0.05


def beats(new: Verdict, best_timing: dict[str, object] | None, best_ms: float | None) -> bool:
    """Whether `new` (correct, timed) is better than the best kernel so far (its timing and latency)."""
    if best_ms is None or new.candidate_ms is None:
        return best_ms is None and new.candidate_ms is not None
    ours = round_ratios(new.timing)
    theirs = round_ratios(best_timing) if best_timing else None
    if ours and theirs:
        return better_than(ours, theirs)
    return new.candidate_ms <= best_ms * (1 - MIN_GAIN)


@dataclass
class OperatorOutcome:
    """Everything the loop tracks across both episodes of one operator."""

    task: Task
    budget: int  # T
    started: float = field(default_factory=time.monotonic)
    rounds: list[RoundTrace] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # candidate hash -> source
    verdicts: list[Verdict] = field(default_factory=list)
    compiled: bool = False
    first_correct_round: int | None = None
    t_first_ms: float | None = None
    t_best_ms: float | None = None
    t_ref_ms: float | None = None  # reference latency measured in the run that gave t_best
    best_source: str | None = None
    best_timing: dict[str, object] | None = None  # the best kernel's timing record (its rounds)
    last_source: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    reasks: int = 0
    wall_s: float = 0.0
    _correct_hashes: set[str] = field(default_factory=set)  # a re-measured kernel is never "faster"

    @property
    def rounds_used(self) -> int:
        return len(self.rounds)

    @property
    def rounds_left(self) -> int:
        return self.budget - self.rounds_used

    @property
    def correct(self) -> bool:
        return self.first_correct_round is not None

    @property
    def improved(self) -> bool:
        """The opt episode found a correct kernel strictly faster than the first one (spec §4.1)."""
        return (self.t_first_ms is not None and self.t_best_ms is not None
                and self.t_best_ms < self.t_first_ms)

    def add(self, trace: RoundTrace, source: str | None, verdict: Verdict, replies: list[Reply]) -> None:
        self.rounds.append(trace)
        self.verdicts.append(verdict)
        self.reasks += trace.reasks
        if source is not None and trace.candidate_hash:
            self.sources[trace.candidate_hash] = source
            self.last_source = source
        self.compiled |= verdict.compiled
        if verdict.correct:
            seen = trace.candidate_hash in self._correct_hashes
            if trace.candidate_hash:
                self._correct_hashes.add(trace.candidate_hash)
            # A quarantined (suspect) verdict passed the correctness checks, so the operator is
            # solved and the corr episode ends; but its timing is no timing: it never sets or
            # improves T_first / T_best (and it earns no credit: RoundTrace.counts_as_success).
            ms = None if verdict.suspect else verdict.candidate_ms
            if self.first_correct_round is None:
                self.first_correct_round = trace.round
                self.t_first_ms, self.t_best_ms = ms, ms
                self.best_source = source
                self.t_ref_ms = None if verdict.suspect else verdict.reference_ms
                self.best_timing = None if verdict.suspect else verdict.timing
            elif ms is not None and not seen and beats(verdict, self.best_timing, self.t_best_ms):
                self.t_best_ms, self.best_source, self.t_ref_ms = ms, source, verdict.reference_ms
                self.best_timing = verdict.timing
        for reply in replies:
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens
            if reply.cost_usd is not None:
                self.cost_usd = (self.cost_usd or 0.0) + reply.cost_usd
        self.wall_s = time.monotonic() - self.started

    def feedback(self) -> str | None:
        """The latest verdict as text for the next prompt and retrieval query, with the diagnostic
        the session attached after a crash or a wrong result (agent/session.py)."""
        if not self.verdicts:
            return None
        latest = self.verdicts[-1]
        diagnostic = latest.checks.get("diagnostic")
        return latest.feedback() + (f"\n{diagnostic}" if diagnostic else "")

    def history(self, n: int) -> list[HistoryLine]:
        """The n attempts before the latest one (the latest is shown in full as feedback)."""
        lines: list[HistoryLine] = []
        for trace, verdict in list(zip(self.rounds, self.verdicts, strict=True))[-n - 1:-1] if n else []:
            if verdict.correct:
                what = f"correct, {verdict.candidate_ms:.4f} ms" if verdict.candidate_ms else "correct"
            else:
                first = (verdict.message.strip().splitlines() or [""])[0]
                what = f"failed at {verdict.stage.value}: {first[:_SUMMARY_CHARS]}"
            lines.append(HistoryLine(trace.round, trace.episode.value, what))
        return lines

    def result(self, run_id: str, position: int) -> OperatorResult:
        return OperatorResult(
            run_id=run_id, position=position, operator=self.task.name, level=self.task.level,
            category=self.task.category, compiled=self.compiled, correct=self.correct,
            rounds_used=self.rounds_used, first_correct_round=self.first_correct_round,
            t_first_ms=self.t_first_ms, t_best_ms=self.t_best_ms, t_ref_ms=self.t_ref_ms,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            cost_usd=self.cost_usd, wall_s=self.wall_s)
