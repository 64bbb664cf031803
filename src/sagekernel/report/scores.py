"""The figures beside the paper's metrics (issue 31), from each operator's best verdict: the noise-
aware Fast_p, the speedups' intervals, the roofline fractions, the baseline, and the protocol.

The paper's CR, ER, Fast_p and S_self (metrics.py) are unchanged; these sit beside them:

- **noise-aware Fast_p**: a solved operator counts as faster than p only when the lower bound of
  its best kernel's speedup interval is above p (`records.SpeedupInterval.faster_than`, the
  interval computed by harness/speedup_interval.py). Its denominators are
  the strict Fast_p's; an operator whose verdict carries no interval (an older record) never
  counts, and `n_without_interval` says how many there were;
- **roofline fraction**: of the best kernel (harness/roofline.py), summarised as median and
  quartiles over the operators that have one;
- **baseline** and **protocol**: the values each run's verdicts record; `protocol_notes` warns when
  runs reported together were measured differently (`COMPARED`).

Pure functions over the verdict records `report/load.py` reads; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sagekernel.metrics import rate, solved
from sagekernel.records import OperatorResult, SpeedupInterval

#: The protocol fields (harness/protocol.py) two runs must share for their speedups to be compared.
#: Shapes and element types are per operator and not compared here.
COMPARED = ("method", "timer", "warmup", "rounds", "calls_per_round", "flush", "input_policy", "threads",
            "baseline", "device", "torch", "harness_commit")


@dataclass(frozen=True)
class OperatorScore:
    """One operator's best kernel, beyond its speedup."""

    operator: str
    interval: SpeedupInterval | None
    roofline_fraction: float | None
    bound: str | None  # "memory" / "compute"
    baseline: str | None


@dataclass
class RunScores:
    p: float
    fast_aware_solved: float | None
    fast_aware_all: float | None
    n_fast_aware: int
    n_without_interval: int  # solved operators whose best verdict has no interval
    roofline: dict[str, float | int | None]
    baselines: list[str]
    protocol: dict[str, list[Any]]
    operators: list[OperatorScore] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["operators"] = [
            {"operator": o.operator, "interval": o.interval.to_dict() if o.interval else None,
             "roofline_fraction": o.roofline_fraction, "bound": o.bound, "baseline": o.baseline}
            for o in self.operators]
        return data


def operator_score(operator: str, verdict: Mapping[str, Any] | None) -> OperatorScore:
    timing = (verdict or {}).get("timing") or {}
    roof = timing.get("roofline") if isinstance(timing.get("roofline"), dict) else {}
    fraction = roof.get("fraction") if isinstance(roof, dict) else None
    ok = isinstance(fraction, (int, float)) and fraction > 0
    return OperatorScore(operator, SpeedupInterval.from_dict(timing.get("speedup_interval")),
                         float(fraction) if ok and fraction is not None else None,
                         roof.get("bound") if isinstance(roof, dict) else None,
                         timing.get("baseline") if isinstance(timing.get("baseline"), str) else None)


def summarize_scores(results: Sequence[OperatorResult], best: Mapping[str, Mapping[str, Any]],
                     p: float = 1.0) -> RunScores:
    """The run's new figures from its operators' best verdicts (`best`: operator -> verdict dict)."""
    ok = solved(results)
    scores = {r.operator: operator_score(r.operator, best.get(r.operator)) for r in ok}
    n_fast = sum(1 for s in scores.values() if s.interval is not None and s.interval.faster_than(p))
    fractions = [s.roofline_fraction for s in scores.values() if s.roofline_fraction is not None]
    protocols = [v.get("timing", {}).get("protocol") for v in best.values()]
    return RunScores(
        p=p,
        fast_aware_solved=rate(n_fast, len(ok)),
        fast_aware_all=rate(n_fast, len(results)),
        n_fast_aware=n_fast,
        n_without_interval=sum(1 for s in scores.values() if s.interval is None),
        roofline=fraction_summary(fractions),
        baselines=sorted({s.baseline for s in scores.values() if s.baseline}),
        protocol=run_protocol(p for p in protocols if isinstance(p, dict)),
        operators=list(scores.values()),
    )


def fraction_summary(fractions: list[float]) -> dict[str, float | int | None]:
    """Count, median and quartiles of roofline fractions (the report's distribution)."""
    if not fractions:
        return {"count": 0, "median": None, "q1": None, "q3": None, "min": None, "max": None}
    values = sorted(fractions)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"count": len(values), "median": statistics.median(values), "q1": q[0], "q3": q[2],
            "min": values[0], "max": values[-1]}


def run_protocol(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The values each compared field takes across one run's protocol records."""
    seen: dict[str, list[Any]] = {k: [] for k in COMPARED}
    for rec in records:
        for k in COMPARED:
            v = rec.get(k)
            if v is not None and v not in seen[k]:
                seen[k].append(v)
    return seen


def differences(a: Mapping[str, list[Any]], b: Mapping[str, list[Any]]) -> list[str]:
    """The compared fields on which two runs' protocols disagree (a field either run lacks is skipped:
    an older record without it cannot be checked, and the report says so separately)."""
    return [k for k in COMPARED if a.get(k) and b.get(k) and sorted(map(str, a[k])) != sorted(map(str, b[k]))]


def protocol_notes(labelled: Sequence[tuple[str, RunScores]]) -> list[str]:
    """Warnings for runs reported together whose protocols differ, or that are not comparable at all:
    a run whose own verdicts disagree, runs against different baselines, older runs without one."""
    notes = []
    for label, s in labelled:
        mixed = [k for k in COMPARED if len(s.protocol.get(k, [])) > 1]
        if mixed:
            notes.append(f"{label}: its own verdicts were measured under different protocols "
                         f"({', '.join(mixed)} differ)")
    if len(labelled) < 2:
        return notes
    first_label, first = labelled[0]
    for label, s in labelled[1:]:
        if not s.protocol.get("harness_commit") or not first.protocol.get("harness_commit"):
            missing = label if not s.protocol.get("harness_commit") else first_label
            notes.append(f"{missing}: no protocol record (an older run): its speedups cannot be checked "
                         f"as comparable with the others'")
            continue
        diff = differences(first.protocol, s.protocol)
        if diff:
            detail = "; ".join(f"{k}: {_show(first.protocol[k])} vs {_show(s.protocol[k])}" for k in diff)
            notes.append(f"PROTOCOLS DIFFER — {first_label} vs {label}: {detail}. Their speedups were not "
                         "measured the same way; compare them with care")
    return notes


def _show(values: list[Any]) -> str:
    text = ", ".join(str(v) for v in values)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["COMPARED", "OperatorScore", "RunScores", "differences", "fraction_summary", "operator_score",
           "protocol_notes", "run_protocol", "summarize_scores"]
