"""The experiment report as one self-contained HTML file (plotly.js inlined, opens offline)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import jinja2
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from sagekernel import __version__
from sagekernel.experiment.tables import ExperimentTable, StreamData

LEFT = {"streams": 6, "table1": 2, "table2": 3, "figure5": 2, "figure4": 3, "table7": 2, "library": 4}


def _curve(streams: Sequence[StreamData]) -> go.Figure:
    fig = go.Figure()
    for s in streams:
        if s.metrics is not None:
            curve = s.metrics.learning_curve
            fig.add_trace(
                go.Scatter(x=list(range(1, len(curve) + 1)), y=curve, mode="lines", name=s.plan.name)
            )
    fig.update_xaxes(title_text="operators processed (stream order)")
    fig.update_yaxes(title_text="cumulative ER (%)", range=[0, 102])
    fig.update_layout(template="plotly_white", height=380, title="Cumulative ER along each stream")
    return fig


def _bars(table: ExperimentTable, label_key: str, metrics: Sequence[tuple[str, str]]) -> go.Figure:
    fig = go.Figure()
    labels = [f"{d.get('model', '')} {d.get(label_key, '')}".strip() for d in table.data]
    for key, name in metrics:
        fig.add_trace(go.Bar(x=labels, y=[d.get(key) for d in table.data], name=name))
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        height=380,
        title=table.title,
        yaxis={"title": "%", "range": [0, 102]},
    )
    return fig


def render(
    name: str,
    description: str,
    directory: Path,
    streams: Sequence[StreamData],
    tables: Sequence[ExperimentTable],
    notes: Sequence[str],
) -> str:
    figures = [("Learning curves", _curve(streams))]
    for t in tables:
        if t.key == "figure5":
            figures.append(
                (
                    t.title,
                    _bars(t, "method", [("er", "ER"), ("top_level_er", "top-level ER"), ("fast", "Fast")]),
                )
            )
        if t.key == "figure4":
            figures.append((t.title, _bars(t, "condition", [("er", "ER"), ("fast", "Fast")])))
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = env.from_string(
        resources.files("sagekernel.experiment").joinpath("report.html").read_text(encoding="utf-8")
    )
    return template.render(
        name=name,
        description=description,
        directory=str(directory),
        streams=streams,
        tables=tables,
        notes=list(notes),
        left=LEFT,
        plotlyjs=get_plotlyjs(),
        version=__version__,
        figures=[
            (title, pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False}))
            for title, fig in figures
        ],
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def write(
    path: Path,
    name: str,
    description: str,
    directory: Path,
    streams: Sequence[StreamData],
    tables: Sequence[ExperimentTable],
    notes: Sequence[str],
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(name, description, directory, streams, tables, notes), encoding="utf-8")
    return path
