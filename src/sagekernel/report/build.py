"""Assemble loaded runs into reports: metrics, labels, Table 1 ordering, JSON/CSV rows.

Every export (terminal, HTML, CSV, JSON) is built from the same `RunReport`s, so they show the
same numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagekernel.metrics import RunMetrics, summarize
from sagekernel.models.exchange_log import Spend
from sagekernel.records import OperatorResult
from sagekernel.report.load import Loaded
from sagekernel.report.memory_metrics import MemoryMetrics, summarize_memory
from sagekernel.report.npukb_score import BenchmarkScore
from sagekernel.report.npukb_score import score as benchmark_score
from sagekernel.report.scores import RunScores, protocol_notes, summarize_scores
from sagekernel.runner.store import RunInfo

# Table 1 order of methods (sage_spec.md §9), then the ablations; unknown methods go last.
METHOD_LABELS = {
    "refinement": "Refinement",
    "static-rag": "Static RAG",
    "value-memory": "Value Memory",
    "sage": "SAGE",
    "sage-uniform-credit": "Uniform Credit",
    "sage-no-ugc": "w/o UGC",
    "sage-random-ugc": "Random UGC",
}


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def p_label(p: float) -> str:
    """p as the paper writes it: "1.0", "2.0"; finer values keep their digits ("1.25")."""
    return f"{p:.1f}" if p == round(p, 1) else f"{p:g}"


@dataclass
class RunReport:
    info: RunInfo
    workspace: Path
    model: str  # who wrote the kernels (RunData.model)
    planned: int  # operators in the planned stream (0 if unknown)
    spend: Spend
    results: list[OperatorResult]
    metrics: RunMetrics
    memory: MemoryMetrics | None
    label: str = ""  # "Method (model)", made unique across the reported runs
    suffix: str = ""  # " [run_id]" when another reported run has the same method and model
    #: NPUKernelBench's own score over the run's benchmark operators (None: none of them).
    benchmark: BenchmarkScore | None = None
    #: The figures beside the paper's (report/scores.py): noise-aware Fast_p, intervals, roofline.
    scores: RunScores | None = None

    @property
    def method(self) -> str:
        return method_label(self.info.method)

    @property
    def key(self) -> str:
        return f"{self.workspace.name}:{self.info.run_id}"


def build(loaded: Loaded, p: float = 1.0) -> list[RunReport]:
    """One report per run, in Table 1 order: models by first appearance, then method order."""
    reports = []
    for run in loaded.runs:
        memory = None
        if run.memory is not None:
            memory = summarize_memory(run.memory.items, run.memory.adoptions, run.memory.snapshots,
                                      where=run.memory.where, provenance=run.memory.provenance)
        reports.append(RunReport(run.info, run.workspace, run.model, run.planned, run.spend, run.results,
                                 summarize(run.results, p), memory, benchmark=benchmark_score(run.benchmark),
                                 scores=summarize_scores(run.results, run.best_verdicts, p)))
    model_order: dict[str, int] = {}
    for rep in reports:
        model_order.setdefault(rep.model, len(model_order))
    order = list(METHOD_LABELS)
    reports.sort(key=lambda r: (model_order[r.model],
                                order.index(r.info.method) if r.info.method in order else len(order),
                                r.info.created_at, r.info.run_id))
    _label(reports)
    return reports


def _label(reports: Sequence[RunReport]) -> None:
    """"Method (model)"; runs that would share a label get their run id appended."""
    base = {id(r): f"{r.method} ({r.model})" for r in reports}
    counts: dict[str, int] = {}
    for label in base.values():
        counts[label] = counts.get(label, 0) + 1
    for r in reports:
        label = base[id(r)]
        r.suffix = "" if counts[label] == 1 else f" [{r.info.run_id}]"
        r.label = label + r.suffix


# style.md rule 8: a speedup above this is flagged for audit rather than celebrated.
AUDIT_SPEEDUP = 10.0


def notes_for(reports: Sequence[RunReport], audit_above: float = AUDIT_SPEEDUP) -> list[str]:
    """What a reader must know before trusting the numbers: partial runs, suspicious speedups."""
    notes = []
    for r in reports:
        if r.info.status != "finished":
            planned = f" of {r.planned} planned" if r.planned else ""
            notes.append(f"{r.label}: run is {r.info.status}; {r.metrics.n_operators}{planned} operators "
                         "finished, and every rate is over those")
        unfinished = r.spend.tokens - r.metrics.tokens_total
        if unfinished > 0:
            notes.append(f"{r.label}: {unfinished:,} of the run's {r.spend.tokens:,} tokens "
                         f"({r.spend.calls} model calls) went to attempts that did not finish "
                         "(killed or interrupted); per-solved figures count finished operators only")
        high = [f"{o.operator} ({s:.1f}×)" for o in r.results
                if (s := o.speedup) is not None and s > audit_above]
        if high:
            notes.append(f"{r.label}: speedup above {audit_above:g}× on {', '.join(high)}; "
                         "audit these kernels before trusting them")
    notes += protocol_notes([(r.label, r.scores) for r in reports if r.scores is not None])
    return notes


def report_levels(reports: Sequence[RunReport]) -> list[int]:
    """Levels present in any run (the per-level ER columns)."""
    return sorted({lv for r in reports for lv in r.metrics.er_by_level})


def to_json(reports: Sequence[RunReport], notes: Sequence[str] = ()) -> dict[str, Any]:
    runs = []
    for r in reports:
        runs.append({
            "label": r.label,
            "workspace": str(r.workspace),
            "run_id": r.info.run_id,
            "method": r.info.method,
            "model": r.model,
            "status": r.info.status,
            "planned": r.planned,
            "spend": {**r.spend.to_dict(),
                      "unfinished_attempt_tokens": max(0, r.spend.tokens - r.metrics.tokens_total)},
            "metrics": r.metrics.to_dict(),
            "memory": r.memory.to_dict() if r.memory is not None else None,
            "npukernelbench": r.benchmark.to_dict() if r.benchmark is not None else None,
            "scores": r.scores.to_dict() if r.scores is not None else None,
            "operators": [
                {"position": o.position, "operator": o.operator, "level": o.level, "category": o.category,
                 "compiled": o.compiled, "correct": o.correct, "rounds_used": o.rounds_used,
                 "first_correct_round": o.first_correct_round, "t_first_ms": o.t_first_ms,
                 "t_best_ms": o.t_best_ms, "t_ref_ms": o.t_ref_ms, "speedup": o.speedup,
                 "self_speedup": o.self_speedup}
                for o in r.results],
        })
    return {"fast_p": reports[0].metrics.p if reports else 1.0, "runs": runs, "notes": list(notes)}


def csv_columns(reports: Sequence[RunReport]) -> list[str]:
    p = reports[0].metrics.p if reports else 1.0
    cols = ["label", "workspace", "run_id", "method", "model", "status", "operators", "planned", "solved"]
    cols += [f"L{lv}_ER" for lv in report_levels(reports)]
    cols += ["CR", "ER", f"Fast_{p_label(p)}", f"Fast_{p_label(p)}_all", "S_self", "speedup_median",
             "speedup_geomean", "speedup_min", "speedup_max", "rounds_to_first_correct_median",
             "tokens_per_solved", "cost_per_solved_usd", "items", "items_cold", "items_validated",
             "items_consolidated", "resident_entries", "resident_tokens", "adoption_rate", "utility_mean"]
    cols += ["NPUKB_score", "NPUKB_rule_only_score"]
    cols += [f"Fast_{p_label(p)}_noise_aware", f"Fast_{p_label(p)}_noise_aware_all",
             "roofline_fraction_median", "roofline_fraction_q1", "roofline_fraction_q3", "baseline"]
    return cols


def csv_row(r: RunReport, levels: Sequence[int]) -> list[object]:
    m, mem = r.metrics, r.memory
    now = mem.resident_now if mem is not None else None
    row: list[object] = [r.label, str(r.workspace), r.info.run_id, r.info.method, r.model,
                         r.info.status, m.n_operators, r.planned, m.n_solved]
    row += [m.er_by_level.get(lv) for lv in levels]
    row += [m.cr, m.er, m.fast_solved, m.fast_all, m.s_self, m.speedup.median, m.speedup.geomean,
            m.speedup.minimum, m.speedup.maximum, m.rounds_first_median, m.tokens_per_solved,
            m.cost_per_solved]
    row += ([mem.n_items, mem.by_state.get("cold", 0), mem.by_state.get("validated", 0),
             mem.by_state.get("consolidated", 0), now.n_entries if now else 0, now.total_tokens if now else 0,
             mem.adoption_rate, mem.utility.mean] if mem is not None else [None] * 8)
    bench = r.benchmark
    row += [bench.final, bench.rule_final] if bench is not None else [None, None]
    s = r.scores
    row += ([s.fast_aware_solved, s.fast_aware_all, s.roofline["median"], s.roofline["q1"], s.roofline["q3"],
             "/".join(s.baselines) or None] if s is not None else [None] * 6)
    return row


def to_csv(reports: Sequence[RunReport]) -> str:
    """One row per run; empty cells for undefined values. Full precision (no rounding)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(csv_columns(reports))
    levels = report_levels(reports)
    for r in reports:
        writer.writerow(["" if v is None else v for v in csv_row(r, levels)])
    return buf.getvalue()
