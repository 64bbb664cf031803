"""Tables of a report: cell text shared by the terminal and HTML, and the Rich rendering.

`comparison_rows` is the paper's Table 1 shape (sage_spec.md §11): one row per method (+ model),
per-level ER, then CR, ER, Fast_p, S_self. `detail_rows` and `memory_rows` carry the rest of §8
and the memory figures. Each returns (header, rows) of plain strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sagekernel.report.build import RunReport, p_label, report_levels

DASH = "–"


def half_up(value: float, digits: int) -> str:
    """Round half up, as the paper does (5/16 = 31.25 -> "31.3"; Python's format gives "31.2")."""
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def fmt_rate(value: float | None) -> str:
    return DASH if value is None else half_up(value, 1)


def fmt_x(value: float | None) -> str:
    return DASH if value is None else f"{half_up(value, 2)}×"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return DASH
    return f"{value:,.0f}" if digits == 0 else f"{value:,.{digits}f}"


def fmt_usd(value: float | None) -> str:
    return DASH if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


Rows = tuple[list[str], list[list[str]]]


def comparison_rows(reports: Sequence[RunReport]) -> Rows:
    """Table 1: Model | Method | L1 ER ... | CR | ER | Fast_p | S_self | Solved."""
    levels = report_levels(reports)
    p = reports[0].metrics.p if reports else 1.0
    bench = any(r.benchmark is not None for r in reports)
    header = ["Model", "Method", *[f"L{lv} ER" for lv in levels], "CR", "ER",
              *(["NPUKB score"] if bench else []), f"Fast_{p_label(p)}", "S_self", "Solved"]
    rows = []
    previous_model = None
    for r in reports:
        m = r.metrics
        model = r.model if r.model != previous_model else ""
        previous_model = r.model
        solved = f"{m.n_solved}/{m.n_operators}"
        if r.planned and r.planned != m.n_operators:
            solved += f" (of {r.planned} planned)"
        score = [fmt_rate(r.benchmark.final if r.benchmark else None)] if bench else []
        rows.append([model, r.method + r.suffix, *[fmt_rate(m.er_by_level.get(lv)) for lv in levels],
                     fmt_rate(m.cr), fmt_rate(m.er), *score, fmt_rate(m.fast_solved), fmt_x(m.s_self),
                     solved])
    return header, rows


def benchmark_rows(reports: Sequence[RunReport]) -> Rows:
    """NPUKernelBench's own score (report/npukb_score.py): level means, the weighted final score,
    and the same counting the benchmark's rule alone (never credited without the harness)."""
    levels = sorted({lv for r in reports if r.benchmark for lv in r.benchmark.levels})
    header = ["Run", "Operators", *[f"L{lv} score" for lv in levels], "Final (0.2/0.3/0.5)",
              "Rule-only final", "Cases passed"]
    rows = []
    for r in reports:
        b = r.benchmark
        if b is None:
            continue
        cases = f"{sum(o.passed for o in b.operators)}/{sum(o.cases for o in b.operators)}"
        rows.append([r.label, str(len(b.operators)), *[fmt_rate(b.by_level.get(lv)) for lv in levels],
                     fmt_rate(b.final), fmt_rate(b.rule_final), cases])
    return header, rows


def detail_rows(reports: Sequence[RunReport]) -> Rows:
    """Per run: Fast_p both ways, speedup distribution, rounds, tokens and cost per solved."""
    p = reports[0].metrics.p if reports else 1.0
    header = ["Run", f"Fast_{p_label(p)} (solved)", f"Fast_{p_label(p)} (all)", "Speedup median", "Geomean",
              "Range", "Rounds to 1st correct", "Tokens / solved", "Cost / solved"]
    rows = []
    for r in reports:
        m = r.metrics
        sp = m.speedup
        span = DASH if sp.minimum is None else f"{fmt_x(sp.minimum)}–{fmt_x(sp.maximum)}"
        rounds = DASH if m.rounds_first_median is None else (
            f"{m.rounds_first_median:g} (mean {m.rounds_first_mean:.1f})")
        rows.append([r.label, f"{fmt_rate(m.fast_solved)} ({m.n_fast}/{m.n_solved})",
                     f"{fmt_rate(m.fast_all)} ({m.n_fast}/{m.n_operators})", fmt_x(sp.median),
                     fmt_x(sp.geomean), span, rounds, fmt_num(m.tokens_per_solved, 0),
                     fmt_usd(m.cost_per_solved)])
    return header, rows


def fmt_fraction(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def scores_rows(reports: Sequence[RunReport]) -> Rows:
    """Beside the paper's figures (report/scores.py): strict and noise-aware Fast_p, S_self, the
    roofline fractions' distribution, the baseline and the protocol each run was measured under."""
    p = reports[0].metrics.p if reports else 1.0
    header = ["Run", f"Fast_{p_label(p)} strict", f"Fast_{p_label(p)} noise-aware", "S_self",
              "Roofline fraction median [q1–q3] (n)", "Baseline", "Protocol"]
    rows = []
    for r in reports:
        m, s = r.metrics, r.scores
        if s is None:
            continue
        aware = f"{fmt_rate(s.fast_aware_solved)} ({s.n_fast_aware}/{m.n_solved})"
        if s.n_without_interval:
            aware += f", {s.n_without_interval} without interval"
        rows.append([r.label, f"{fmt_rate(m.fast_solved)} ({m.n_fast}/{m.n_solved})", aware, fmt_x(m.s_self),
                     _distribution(s.roofline), "/".join(s.baselines) or DASH, _protocol(s.protocol)])
    return header, rows


def _f(value: object) -> str:
    return fmt_fraction(float(value) if isinstance(value, (int, float)) else None)


def _distribution(roof: dict[str, float | int | None]) -> str:
    if not roof["count"]:
        return DASH
    return f"{_f(roof['median'])} [{_f(roof['q1'])}–{_f(roof['q3'])}] ({roof['count']})"


def _protocol(proto: dict[str, list[object]]) -> str:
    """Rounds × calls, device, harness commit (each run's values; several are joined by '/')."""
    if not proto.get("harness_commit"):
        return DASH

    def join(key: str, width: int = 40) -> str:
        return "/".join(str(v)[:width] for v in proto.get(key, []))

    return (f"{join('rounds')} rounds × {join('calls_per_round')} calls, {join('device')}, "
            f"{join('harness_commit', 10)}")


def interval_rows(report: RunReport) -> Rows:
    """Per solved operator: the best kernel's speedup, its interval, the noise-aware verdict on p,
    and its roofline fraction."""
    p = report.metrics.p
    header = ["Operator", "Speedup", "95% interval", f"> {p_label(p)} noise-aware", "Roofline fraction",
              "Bound"]
    by_op = {s.operator: s for s in report.scores.operators} if report.scores else {}
    rows = []
    for o in report.results:
        s = by_op.get(o.operator)
        if s is None:
            continue
        iv = s.interval
        span = DASH if iv is None else f"{fmt_x(iv.low)}–{fmt_x(iv.high)}"
        fast = DASH if iv is None else ("yes" if iv.low > p else "no")
        rows.append([o.operator, fmt_x(o.speedup), span, fast, fmt_fraction(s.roofline_fraction),
                     s.bound or DASH])
    return header, rows


def memory_rows(reports: Sequence[RunReport]) -> Rows:
    """Per run with memory tables: items by state, resident set now, adoption rate, utility, what the
    run distilled and credited (of those, other runs' items), and the memory read."""
    header = ["Run", "Items", "Cold", "Validated", "Consolidated", "Resident (rules / tokens)",
              "Adoption rate", "Utility mean [min, max]", "Run distilled / credited (others')", "Memory"]
    rows = []
    for r in reports:
        mem = r.memory
        if mem is None:
            rows.append([r.label, *([DASH] * (len(header) - 1))])
            continue
        now = mem.resident_now
        resident = DASH if now is None else f"{now.n_entries} / {now.total_tokens:,} of {now.budget:,}"
        adoption = DASH if mem.adoption_rate is None else (
            f"{mem.adoption_rate:.1f} ({mem.n_adopted}/{mem.n_retrievals})")
        u = mem.utility
        util = DASH if u.mean is None else f"{u.mean:+.3f} [{u.minimum:+.3f}, {u.maximum:+.3f}]"
        prov = mem.provenance
        changed = DASH if prov is None else (
            f"{prov.created} / {prov.credited} ({prov.credited_of_other_runs})")
        rows.append([r.label, str(mem.n_items), str(mem.by_state.get("cold", 0)),
                     str(mem.by_state.get("validated", 0)), str(mem.by_state.get("consolidated", 0)),
                     resident, adoption, util, changed, mem.where or DASH])
    return header, rows


def top_items_rows(report: RunReport) -> Rows:
    header = ["Id", "Title", "Category", "State", "Adopted", "Operators", "Retrieved", "u"]
    rows = []
    if report.memory is not None:
        for i in report.memory.top_adopted:
            rows.append([str(i.id), i.title, i.category, i.state, str(i.n_ado), str(i.n_operators),
                         str(i.n_ret), f"{i.u:+.3f}"])
    return header, rows


def _rich(title: str, rows: Rows, *, left: int = 1) -> Table:
    header, body = rows
    table = Table(title=title, title_justify="left", header_style="bold")
    # cells are plain text: "[q1–q3]" or a label's " [run_id]" is not Rich markup
    for i, name in enumerate(header):
        table.add_column(escape(name), justify="left" if i < left else "right", overflow="fold")
    for row in body:
        table.add_row(*(escape(cell) for cell in row))
    return table


def render_terminal(console: Console, reports: Sequence[RunReport], notes: Sequence[str] = ()) -> None:
    """Print the report: Table 1 comparison, per-run details, memory, most adopted items."""
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    title = "Comparison (Table 1 shape)" if len(reports) > 1 else f"Run {reports[0].key}"
    console.print(_rich(title, comparison_rows(reports), left=2))
    console.print(_rich("Speedups and spend", detail_rows(reports)))
    if any(r.scores is not None for r in reports):
        console.print(_rich("Noise-aware speedups and roofline (beside the paper's figures)",
                            scores_rows(reports)))
        for r in reports:
            header, body = interval_rows(r)
            if body:
                console.print(_rich(f"Best kernels: speedup intervals and roofline — {escape(r.label)}",
                                    (header, body)))
    if any(r.benchmark is not None for r in reports):
        console.print(_rich("NPUKernelBench score (per task: passed cases / cases)", benchmark_rows(reports)))
    if any(r.memory is not None for r in reports):
        console.print(_rich("Memory", memory_rows(reports)))
        for r in reports:
            header, body = top_items_rows(r)
            if body:
                console.print(_rich(f"Most adopted items — {r.label}", (header, body), left=4))
    console.print("[dim]Rates are % of finished operators; Fast over solved is the paper's Fast_p, "
                  "over all is KernelBench's. S_self = median T_first/T_best. Noise-aware Fast_p counts an "
                  "operator only when the lower bound of its speedup's 95% bootstrap interval is above p; "
                  "roofline fraction = the device's bound (bytes/peak bandwidth, FLOPs/peak compute) / the "
                  "kernel's time.[/]")
