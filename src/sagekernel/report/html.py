"""The HTML report: one self-contained file (plotly.js inlined once, no network needed).

Contents: the runs, the Table 1 comparison, speedups and spend, memory, and four figures —
cumulative ER along the stream (learning curve), per-operator speedup on a log2 axis, the
resident-set evolution, and the utility histogram — then the most adopted items per run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import jinja2
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from sagekernel import __version__
from sagekernel.report.build import RunReport
from sagekernel.report.tables import (
    comparison_rows,
    detail_rows,
    interval_rows,
    memory_rows,
    scores_rows,
    top_items_rows,
)

FIGURE_IDS = ("fig-learning-curve", "fig-speedup", "fig-resident", "fig-utility")
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def _layout(fig: go.Figure, title: str, height: int = 360) -> go.Figure:
    fig.update_layout(title={"text": title, "x": 0.01, "y": 0.97, "yanchor": "top"}, template="plotly_white",
                      height=height, margin={"l": 60, "r": 20, "t": 90, "b": 60},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0})
    return fig


def learning_curve_figure(reports: Sequence[RunReport]) -> go.Figure:
    fig = go.Figure()
    for i, r in enumerate(reports):
        curve = r.metrics.learning_curve
        ops = [o.operator for o in sorted(r.results, key=lambda o: o.position)]
        fig.add_trace(go.Scatter(
            x=list(range(1, len(curve) + 1)), y=curve, mode="lines", name=r.label, text=ops,
            line={"color": _color(i), "width": 2},
            hovertemplate="%{text}<br>after %{x} operators: ER %{y:.1f}%<extra></extra>"))
    n = max((len(r.results) for r in reports), default=0)
    fig.update_xaxes(title_text="operators processed (stream order)", dtick=1 if n <= 12 else None)
    fig.update_yaxes(title_text="cumulative ER (%)", range=[0, 102])
    return _layout(fig, "Cumulative ER along the stream (learning curve)")


def _x_label(x: float) -> str:
    return f"{x:g}×" if x >= 1 else f"1/{1 / x:g}×"


def speedup_figure(reports: Sequence[RunReport]) -> go.Figure:
    """Bars of log2(T_ref/T_best) per operator: above 0 beats the reference, below is slower."""
    fig = go.Figure()
    order: dict[str, int] = {}
    for r in reports:
        for o in sorted(r.results, key=lambda o: o.position):
            order.setdefault(o.operator, len(order))
    lows, highs = [0.0], [0.0]
    for i, r in enumerate(reports):
        points = [(o.operator, s) for o in r.results if (s := o.speedup) is not None]
        points.sort(key=lambda p: order[p[0]])
        logs = [math.log2(s) for _, s in points]
        lows.append(min(logs, default=0.0))
        highs.append(max(logs, default=0.0))
        fig.add_trace(go.Bar(x=[op for op, _ in points], y=logs, name=r.label, marker_color=_color(i),
                             customdata=[s for _, s in points],
                             hovertemplate="%{x}: %{customdata:.2f}×<extra>" + r.label + "</extra>"))
    lo, hi = math.floor(min(lows)), math.ceil(max(highs))
    if hi - lo < 2:
        lo, hi = lo - 1, hi + 1
    step = max(1, math.ceil((hi - lo) / 10))
    ticks = list(range(lo, hi + 1, step))
    fig.update_yaxes(title_text="speedup (log2 axis)", range=[lo - 0.3, hi + 0.3], tickvals=ticks,
                     ticktext=[_x_label(2.0 ** t) for t in ticks], zeroline=True, zerolinewidth=2,
                     zerolinecolor="#444")
    fig.update_xaxes(title_text="operator (stream order)", categoryorder="array",
                     categoryarray=sorted(order, key=order.__getitem__), tickangle=-45)
    fig.update_layout(barmode="group")
    return _layout(fig, "Per-operator speedup over the reference, T_ref/T_best (log2 axis; 1× = parity; "
                        "no bar: not solved)", 420)


def resident_figure(reports: Sequence[RunReport]) -> go.Figure:
    budgets = {s.budget for r in reports if r.memory is not None for s in r.memory.resident}
    budget = f"budget B = {budgets.pop():,}" if len(budgets) == 1 else "budgets B differ"
    fig = make_subplots(rows=1, cols=2, subplot_titles=("resident rules", f"resident tokens ({budget})"))
    for i, r in enumerate(reports):
        if r.memory is None or not r.memory.resident:
            continue
        snaps = r.memory.resident
        x = [s.n_ops for s in snaps]
        color = _color(i)
        fig.add_trace(go.Scatter(x=x, y=[s.n_entries for s in snaps], mode="lines+markers", name=r.label,
                                 line={"color": color, "shape": "hv"}, legendgroup=r.label), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=[s.total_tokens for s in snaps], mode="lines+markers", name=r.label,
                                 line={"color": color, "shape": "hv"}, legendgroup=r.label, showlegend=False),
                      row=1, col=2)
    fig.update_xaxes(title_text="completed operators")
    fig.update_yaxes(rangemode="tozero")
    _layout(fig, "Resident-set (hot memory) evolution along the stream", 380)
    fig.update_layout(legend={"y": 1.12}, margin={"t": 110})  # above the subplot titles
    return fig


def utility_figure(reports: Sequence[RunReport]) -> go.Figure:
    """Histogram of item utilities u, one per memory read (a workspace's, or one that several runs
    share: shown once)."""
    fig = go.Figure()
    seen: set[str] = set()
    for i, r in enumerate(reports):
        where = (r.memory.where if r.memory is not None else "") or str(r.workspace)
        if r.memory is None or not r.memory.utilities or where in seen:
            continue
        seen.add(where)
        name = r.workspace.name if where == str(r.workspace) else where
        fig.add_trace(go.Histogram(x=r.memory.utilities, name=f"{r.label} — {name}",
                                   marker_color=_color(i), opacity=0.65, xbins={"size": 0.05}))
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text="utility u (ATU)")
    fig.update_yaxes(title_text="items")
    return _layout(fig, "Utility distribution of memory items")


def _figure_html(fig: go.Figure, div_id: str) -> str:
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def render_html(reports: Sequence[RunReport], notes: Sequence[str] = ()) -> str:
    """The whole report as one HTML document."""
    has_memory = any(r.memory is not None for r in reports)
    has_resident = any(r.memory is not None and r.memory.resident for r in reports)
    has_utility = any(r.memory is not None and r.memory.utilities for r in reports)
    # (name, plot html or "" when there is nothing to plot, why not, full width?)
    figures = [
        ("Learning curve", _figure_html(learning_curve_figure(reports), FIGURE_IDS[0]), "", False),
        ("Utility", _figure_html(utility_figure(reports), FIGURE_IDS[3]) if has_utility else "",
         "These workspaces hold no memory items.", False),
        ("Speedups", _figure_html(speedup_figure(reports), FIGURE_IDS[1]), "", True),
        ("Resident set", _figure_html(resident_figure(reports), FIGURE_IDS[2]) if has_resident else "",
         "No hot-memory snapshots were recorded for these runs.", True),
    ]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    template = env.from_string(resources.files("sagekernel.report").joinpath("report.html")
                               .read_text(encoding="utf-8"))
    return template.render(
        reports=reports, notes=list(notes), plotlyjs=get_plotlyjs(), figures=figures,
        comparison=comparison_rows(reports), details=detail_rows(reports), scores=scores_rows(reports),
        intervals=[(r.label, rows) for r in reports if (rows := interval_rows(r))[1]],
        memory=memory_rows(reports) if has_memory else None,
        top_items=[(r.label, top_items_rows(r)) for r in reports if r.memory is not None],
        p=reports[0].metrics.p if reports else 1.0, version=__version__,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))


def write_html(path: Path, reports: Sequence[RunReport], notes: Sequence[str] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(reports, notes), encoding="utf-8")
    return path
