"""The experiment's paper-shaped tables, from every stream's recorded results.

The metrics are the report's (sagekernel/metrics.py, half-up rounding of report/tables.py), computed
over each stream's finished operators; a stream's role decides the table it lands in:

    Table 1   learning streams (no donor, not frozen): model x method, per-level ER, CR, ER, Fast, S_self
    Table 2   learning streams when they differ in schedule: the top level's ER and Fast only
    Figure 5  SAGE and its ablations among the learning streams
    Figure 4  frozen streams: Initial (no donor) / Native (own model's memory) / Transfer (another's)
    Table 7   fixed-bank replay streams: relevance-only / uniform credit / ATU
    Sec. 4.3  streams that continue learning from a donor's memory on a new library
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.plan import StreamPlan
from sagekernel.experiment.status import StreamStatus, experiment_status
from sagekernel.metrics import RunMetrics, execution_rate, fast_p, self_speedup_median, summarize
from sagekernel.records import OperatorResult
from sagekernel.report.build import method_label
from sagekernel.report.tables import fmt_rate, fmt_x

ABLATIONS = ("sage", "sage-uniform-credit", "sage-no-ugc", "sage-random-ugc")
REPLAY_LABELS = {"relevance": "Relevance-only", "uniform": "Uniform Credit", "atu": "ATU"}


@dataclass
class StreamData:
    plan: StreamPlan
    status: StreamStatus
    results: list[OperatorResult]
    metrics: RunMetrics | None  # None: no finished operator yet


@dataclass
class ExperimentTable:
    key: str
    title: str
    header: list[str]
    rows: list[list[str]]
    data: list[dict[str, Any]] = field(default_factory=list)  # the raw numbers, one per row
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_streams(exp: ExperimentDir, p: float = 1.0) -> list[StreamData]:
    """Every stream with its status and its finished operators (read-only)."""
    from sagekernel.runner.store import open_readonly

    out = []
    for plan, status in zip(exp.streams(), experiment_status(exp), strict=True):
        results: list[OperatorResult] = []
        store = open_readonly(exp.workspace(plan.name))
        if store is not None:
            with store:
                results = store.results(plan.name)
        out.append(StreamData(plan, status, results, summarize(results, p) if results else None))
    return out


def role(s: StreamPlan) -> str:
    if s.replay_variant is not None:
        return "replay"
    if s.memory == "continue":
        return "library"
    if s.frozen:
        return "transfer"
    return "learning"


def _solved(m: RunMetrics | None, planned: int | None) -> str:
    if m is None:
        return "–"
    text = f"{m.n_solved}/{m.n_operators}"
    return text + (f" (of {planned})" if planned and planned != m.n_operators else "")


def _top_level(streams: list[StreamData]) -> int | None:
    levels = {r.level for s in streams for r in s.results}
    return max(levels) if levels else None


def _level(results: list[OperatorResult], level: int | None) -> list[OperatorResult]:
    return [r for r in results if r.level == level]


def _varies(streams: list[StreamData], attr: str) -> bool:
    return len({getattr(s.plan, attr) for s in streams}) > 1


def _coords(streams: list[StreamData]) -> list[str]:
    return [a for a in ("schedule", "budget", "seed", "suite") if _varies(streams, a)]


def table1(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "learning"]
    if not rows_in:
        return None
    levels = sorted({r.level for s in rows_in for r in s.results})
    extra = _coords(rows_in)
    header = [
        "Model",
        "Method",
        *[c.capitalize() for c in extra],
        *[f"L{lv} ER" for lv in levels],
        "CR",
        "ER",
        f"Fast_{p:.1f}",
        "S_self",
        "Solved",
    ]
    order = {m: i for i, m in enumerate(("refinement", "static-rag", "value-memory", *ABLATIONS))}
    models = list(dict.fromkeys(s.plan.model for s in rows_in))
    rows_in.sort(
        key=lambda s: (
            models.index(s.plan.model),
            order.get(s.plan.method, 99),
            s.plan.schedule,
            s.plan.budget,
            s.plan.seed,
        )
    )
    rows, data, previous = [], [], None
    for s in rows_in:
        m = s.metrics
        per_level = [fmt_rate(m.er_by_level.get(lv)) if m else "–" for lv in levels]
        rows.append(
            [
                s.plan.model if s.plan.model != previous else "",
                method_label(s.plan.method),
                *[str(getattr(s.plan, c)) for c in extra],
                *per_level,
                fmt_rate(m.cr if m else None),
                fmt_rate(m.er if m else None),
                fmt_rate(m.fast_solved if m else None),
                fmt_x(m.s_self if m else None),
                _solved(m, s.status.total),
            ]
        )
        previous = s.plan.model
        data.append(
            {
                "stream": s.plan.name,
                "model": s.plan.model,
                "method": s.plan.method,
                **{c: getattr(s.plan, c) for c in extra},
                "er_by_level": {f"L{lv}": m.er_by_level.get(lv) if m else None for lv in levels},
                "cr": m.cr if m else None,
                "er": m.er if m else None,
                "fast": m.fast_solved if m else None,
                "s_self": m.s_self if m else None,
                "solved": m.n_solved if m else 0,
                "operators": m.n_operators if m else 0,
            }
        )
    return ExperimentTable("table1", "Table 1 — main comparison (learning streams)", header, rows, data)


def table2(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "learning"]
    if len({s.plan.schedule for s in rows_in}) < 2:
        return None
    lv = _top_level(rows_in)
    header = ["Model", "Method", "Schedule", f"L{lv} ER", f"Fast_{p:.1f}", f"L{lv} solved"]
    rows, data = [], []
    for s in rows_in:
        top = _level(s.results, lv)
        er, fast = execution_rate(top), fast_p(top, p)
        n_ok = sum(r.correct for r in top)
        rows.append(
            [
                s.plan.model,
                method_label(s.plan.method),
                s.plan.schedule,
                fmt_rate(er),
                fmt_rate(fast),
                f"{n_ok}/{len(top)}" if top else "–",
            ]
        )
        data.append(
            {
                "stream": s.plan.name,
                "schedule": s.plan.schedule,
                "level": lv,
                "er": er,
                "fast": fast,
                "solved": n_ok,
                "operators": len(top),
            }
        )
    return ExperimentTable(
        "table2",
        f"Table 2 — task order (L{lv} operators only)",
        header,
        rows,
        data,
        note=f"L{lv} results, each recorded before its own experience was learned",
    )


def figure5(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "learning" and s.plan.method in ABLATIONS]
    if not any(s.plan.method != "sage" for s in rows_in):
        return None
    lv = _top_level(rows_in)
    rows_in.sort(key=lambda s: (s.plan.model, ABLATIONS.index(s.plan.method)))
    header = ["Model", "Variant", "ER", f"L{lv} ER", f"Fast_{p:.1f}", "S_self"]
    rows, data = [], []
    for s in rows_in:
        m = s.metrics
        top_er = execution_rate(_level(s.results, lv))
        rows.append(
            [
                s.plan.model,
                method_label(s.plan.method),
                fmt_rate(m.er if m else None),
                fmt_rate(top_er),
                fmt_rate(m.fast_solved if m else None),
                fmt_x(m.s_self if m else None),
            ]
        )
        data.append(
            {
                "stream": s.plan.name,
                "model": s.plan.model,
                "method": s.plan.method,
                "er": m.er if m else None,
                "top_level_er": top_er,
                "fast": m.fast_solved if m else None,
                "s_self": m.s_self if m else None,
            }
        )
    return ExperimentTable("figure5", "Figure 5 — ablations", header, rows, data)


def figure4(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "transfer"]
    if not rows_in:
        return None
    by_name = {s.plan.name: s for s in streams}
    header = ["Model", "Method", "Condition", "ER", f"Fast_{p:.1f}", "S_self", "Solved"]
    rows, data = [], []
    for s in rows_in:
        donor = by_name.get(s.plan.donor or "")
        if donor is None:
            condition = "Initial"
        elif donor.plan.model == s.plan.model:
            condition = "Native"
        else:
            condition = f"{donor.plan.model} Transfer"
        m = s.metrics
        rows.append(
            [
                s.plan.model,
                method_label(s.plan.method),
                condition,
                fmt_rate(m.er if m else None),
                fmt_rate(m.fast_solved if m else None),
                fmt_x(m.s_self if m else None),
                _solved(m, s.status.total),
            ]
        )
        data.append(
            {
                "stream": s.plan.name,
                "model": s.plan.model,
                "condition": condition,
                "donor": s.plan.donor,
                "er": m.er if m else None,
                "fast": m.fast_solved if m else None,
                "s_self": m.s_self if m else None,
            }
        )
    return ExperimentTable("figure4", "Figure 4 — transfer (frozen memory, no updates)", header, rows, data)


def table7(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "replay"]
    if not rows_in:
        return None
    lv = _top_level(rows_in)
    rank = list(REPLAY_LABELS)
    rows_in.sort(key=lambda s: (s.plan.donor or "", rank.index(s.plan.replay_variant or "atu")))
    header = ["Bank of", "Cold utilities", "ER", f"L{lv} ER", f"Fast_{p:.1f}", "Solved"]
    rows, data = [], []
    for s in rows_in:
        m = s.metrics
        top_er = execution_rate(_level(s.results, lv))
        variant = s.plan.replay_variant or ""
        rows.append(
            [
                s.plan.donor or "",
                REPLAY_LABELS.get(variant, variant),
                fmt_rate(m.er if m else None),
                fmt_rate(top_er),
                fmt_rate(m.fast_solved if m else None),
                _solved(m, s.status.total),
            ]
        )
        data.append(
            {
                "stream": s.plan.name,
                "donor": s.plan.donor,
                "variant": variant,
                "er": m.er if m else None,
                "top_level_er": top_er,
                "fast": m.fast_solved if m else None,
            }
        )
    return ExperimentTable(
        "table7",
        "Table 7 — fixed-bank replay",
        header,
        rows,
        data,
        note="one frozen bank; only the cold utilities (and so the reranking) differ",
    )


def library(streams: list[StreamData], p: float = 1.0) -> ExperimentTable | None:
    rows_in = [s for s in streams if role(s.plan) == "library"]
    if not rows_in:
        return None
    header = ["Model", "Method", "Library", "From", "ER", f"Fast_{p:.1f}", "S_self", "Solved"]
    rows, data = [], []
    for s in rows_in:
        m = s.metrics
        rows.append(
            [
                s.plan.model,
                method_label(s.plan.method),
                s.plan.suite,
                s.plan.donor or "",
                fmt_rate(m.er if m else None),
                fmt_rate(m.fast_solved if m else None),
                fmt_x(self_speedup_median(s.results)),
                _solved(m, s.status.total),
            ]
        )
        data.append(
            {
                "stream": s.plan.name,
                "model": s.plan.model,
                "method": s.plan.method,
                "suite": s.plan.suite,
                "donor": s.plan.donor,
                "er": m.er if m else None,
                "fast": m.fast_solved if m else None,
                "s_self": m.s_self if m else None,
            }
        )
    return ExperimentTable("library", "Section 4.3 — continued learning on a new library", header, rows, data)


def stream_table(streams: list[StreamData]) -> ExperimentTable:
    header = ["Stream", "State", "Method", "Model", "Schedule", "From", "Done", "CR", "ER"]
    rows, data = [], []
    for s in streams:
        st = s.status
        rows.append(
            [
                s.plan.name,
                st.state,
                s.plan.method,
                s.plan.model,
                s.plan.schedule,
                (s.plan.donor and f"{s.plan.donor} ({s.plan.memory})") or "",
                f"{st.done}/{st.total}" if st.total is not None else "–",
                fmt_rate(st.cr),
                fmt_rate(st.er),
            ]
        )
        data.append({"stream": s.plan.name, "state": st.state, "done": st.done, "total": st.total})
    return ExperimentTable("streams", "Streams", header, rows, data)


def paper_tables(streams: list[StreamData], p: float = 1.0) -> list[ExperimentTable]:
    """The tables this experiment's streams fill, in the paper's order."""
    found = [t(streams, p) for t in (table1, table2, figure5, figure4, table7, library)]
    return [t for t in found if t is not None]


def notes(streams: list[StreamData]) -> list[str]:
    out = []
    for s in streams:
        if s.status.state != "finished":
            out.append(
                f"{s.plan.name} is {s.status.state}: {s.status.done} of {s.status.total or '?'} "
                "operators finished, and its rates are over those"
            )
    return out
