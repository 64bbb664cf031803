"""NPUKernelBench's own score (docs/BENCHMARK_EVALUATION.md of the benchmark), beside CR/ER.

- Per task: Score_task = passed cases / cases x 100.
- Per level: Score_L = the mean of that level's task scores.
- Final: Score_final = 0.2 Score_L1 + 0.3 Score_L2 + 0.5 Score_L3 (the benchmark's weights,
  run_multi_test.py), summed over the levels the run has; a level the run lacks adds nothing, as in
  the benchmark's own sum, and `levels` says which were present.

A case counts as passed only when the kernel passes both the benchmark's rule on that case
(tasks/npukb_rule.py) and the harness's own check of that input group (hidden inputs, value
distributions, shapes): `final`. `rule_final` is the same score counting the benchmark's rule
alone, so a kernel that satisfies the benchmark but not the harness is visible, never credited.

Per operator the run's best kernel counts (the round with the most passed cases); the case records
come from the verdicts in the round traces (``checks["benchmark"]``, harness/evaluate.py).
Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: The benchmark's level weights (run_multi_test.py: {1: 0.2, 2: 0.3, 3: 0.5}).
LEVEL_WEIGHTS = {1: 0.2, 2: 0.3, 3: 0.5}


@dataclass(frozen=True)
class OperatorCases:
    """One operator's best result under the benchmark's scoring."""

    operator: str
    level: int
    cases: int
    passed: int  # the benchmark's rule and the harness's check
    rule_passed: int  # the benchmark's rule alone

    @property
    def score(self) -> float:
        return 100.0 * self.passed / self.cases if self.cases else 0.0

    @property
    def rule_score(self) -> float:
        return 100.0 * self.rule_passed / self.cases if self.cases else 0.0


@dataclass
class BenchmarkScore:
    operators: list[OperatorCases] = field(default_factory=list)
    by_level: dict[int, float] = field(default_factory=dict)
    rule_by_level: dict[int, float] = field(default_factory=dict)
    final: float = 0.0
    rule_final: float = 0.0
    levels: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["operators"] = [{**asdict(o), "score": o.score, "rule_score": o.rule_score}
                             for o in self.operators]
        return data


def best_cases(operator: str, level: int, records: Iterable[Mapping[str, Any]]) -> OperatorCases | None:
    """The best of an operator's per-round ``checks["benchmark"]`` records (most passed, then most
    passing the rule); None when no round has one (not a benchmark task)."""
    best: OperatorCases | None = None
    for rec in records:
        if not isinstance(rec, Mapping) or "cases" not in rec:
            continue
        cand = OperatorCases(operator, level, int(rec["cases"]), int(rec.get("passed", 0)),
                             int(rec.get("rule_passed", 0)))
        if best is None or (cand.passed, cand.rule_passed) > (best.passed, best.rule_passed):
            best = cand
    return best


def _weighted(by_level: Mapping[int, float]) -> float:
    return sum(LEVEL_WEIGHTS.get(lv, 0.0) * score for lv, score in by_level.items())


def score(operators: Sequence[OperatorCases]) -> BenchmarkScore | None:
    """The benchmark's level means and weighted final score; None without benchmark operators."""
    if not operators:
        return None
    levels = sorted({o.level for o in operators})
    count = {lv: sum(1 for o in operators if o.level == lv) for lv in levels}
    by_level = {lv: sum(o.score for o in operators if o.level == lv) / count[lv] for lv in levels}
    rule = {lv: sum(o.rule_score for o in operators if o.level == lv) / count[lv] for lv in levels}
    return BenchmarkScore(list(operators), by_level, rule, _weighted(by_level), _weighted(rule), levels)


def verdict_record(verdict: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``checks["benchmark"]`` of a stored verdict (Verdict.to_dict()), if any."""
    checks = (verdict or {}).get("checks")
    record = checks.get("benchmark") if isinstance(checks, Mapping) else None
    return record if isinstance(record, Mapping) and "cases" in record else None
