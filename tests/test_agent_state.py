"""The operator state: which correct kernel counts as the best (T_best), spec §2 step 5."""

from __future__ import annotations

from pathlib import Path

from sagekernel.agent.state import MIN_GAIN, OperatorOutcome
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.records import EpisodeKind, RoundTrace
from sagekernel.tasks.task import Task, TensorSpec


def _task() -> Task:
    spec = TensorSpec("x", ("N",), "float32")
    return Task(name="t", level=1, category="math", description="", source_path=Path("t.py"),
                inputs=[spec], outputs=[TensorSpec("out", ("N",), "float32")], sizes={"N": 8})


def _correct(outcome: OperatorOutcome, rnd: int, ms: float, source: str) -> None:
    trace = RoundTrace(round=rnd, episode=EpisodeKind.OPT if rnd > 1 else EpisodeKind.CORR,
                       candidate_hash=str(hash(source)), compiled=True, correct=True, latency_ms=ms)
    verdict = Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=ms,
                      reference_ms=1.0, speedup=1.0 / ms)
    outcome.add(trace, source, verdict, [])


def test_first_correct_sets_first_and_best() -> None:
    outcome = OperatorOutcome(task=_task(), budget=5)
    _correct(outcome, 1, 2.0, "a")
    assert (outcome.t_first_ms, outcome.t_best_ms, outcome.first_correct_round) == (2.0, 2.0, 1)
    assert not outcome.improved


def test_a_remeasured_identical_kernel_never_counts_as_faster() -> None:
    outcome = OperatorOutcome(task=_task(), budget=5)
    _correct(outcome, 1, 2.0, "a")
    _correct(outcome, 2, 1.0, "a")  # same source, lucky timing
    assert outcome.t_best_ms == 2.0 and not outcome.improved


def test_gains_below_the_noise_margin_are_ignored_and_real_gains_kept() -> None:
    outcome = OperatorOutcome(task=_task(), budget=5)
    _correct(outcome, 1, 2.0, "a")
    _correct(outcome, 2, 2.0 * (1 - MIN_GAIN / 2), "b")
    assert outcome.t_best_ms == 2.0
    _correct(outcome, 3, 1.5, "c")
    assert outcome.t_best_ms == 1.5 and outcome.best_source == "c" and outcome.improved
