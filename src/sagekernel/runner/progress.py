"""Progress of a run: a Rich live display (operator, episode, round, last verdict, running CR/ER),
or nothing (`QuietProgress`, for tests and `--no-progress`)."""

from __future__ import annotations

from typing import Protocol

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from sagekernel.metrics import rate
from sagekernel.records import OperatorResult, RoundTrace
from sagekernel.runner.store import PlannedOperator, RunInfo
from sagekernel.tasks.task import Task
from sagekernel.terminal import Console


class Progress(Protocol):
    def start(self, info: RunInfo, total: int, finished: list[OperatorResult]) -> None: ...

    def operator_started(self, planned: PlannedOperator, task: Task) -> None: ...

    def round_done(self, trace: RoundTrace) -> None: ...

    def operator_done(self, result: OperatorResult) -> None: ...

    def close(self) -> None: ...


class QuietProgress:
    def start(self, info: RunInfo, total: int, finished: list[OperatorResult]) -> None:
        return None

    def operator_started(self, planned: PlannedOperator, task: Task) -> None:
        return None

    def round_done(self, trace: RoundTrace) -> None:
        return None

    def operator_done(self, result: OperatorResult) -> None:
        return None

    def close(self) -> None:
        return None


class RichProgress:
    """One live table on stderr, redrawn after every round; finished operators scroll above it."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live: Live | None = None
        self.info: RunInfo | None = None
        self.total = 0
        self.done = 0
        self.compiled = 0
        self.correct = 0
        self.position = 0
        self.operator = "-"
        self.episode = "-"
        self.round = 0
        self.verdict = "-"

    def start(self, info: RunInfo, total: int, finished: list[OperatorResult]) -> None:
        self.info, self.total = info, total
        for r in finished:
            self._count(r)
        if finished:
            self.console.print(f"resuming run [bold]{escape(info.run_id)}[/]: "
                               f"{len(finished)}/{total} operators done")
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def operator_started(self, planned: PlannedOperator, task: Task) -> None:
        self.position, self.operator, self.episode, self.round, self.verdict = \
            planned.position + 1, task.name, "corr", 0, "-"
        self._refresh()

    def round_done(self, trace: RoundTrace) -> None:
        stage = (trace.verdict or {}).get("stage", "?")
        self.episode, self.round = trace.episode.value, trace.round
        self.verdict = f"ok {trace.latency_ms:.4f} ms" if trace.correct and trace.latency_ms else str(stage)
        if trace.reasks:
            self.verdict += f" ({trace.reasks} re-ask{'s' if trace.reasks > 1 else ''})"
        self._refresh()

    def operator_done(self, result: OperatorResult) -> None:
        self._count(result)
        mark = ("[green]solved[/]" if result.correct else
                "[yellow]compiled[/]" if result.compiled else "[red]failed[/]")
        speed = f", {result.speedup:.2f}x vs reference" if result.speedup else ""
        self.console.print(f"\\[{result.position + 1}/{self.total}] {escape(result.operator)}: {mark} in "
                           f"{result.rounds_used} rounds{speed}")
        self._refresh()

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _count(self, r: OperatorResult) -> None:
        self.done += 1
        self.compiled += int(r.compiled or r.correct)  # as sagekernel/metrics.compilation_rate counts
        self.correct += int(r.correct)

    def _render(self) -> Table:
        budget = self.info.budget if self.info else 0
        method = self.info.method if self.info else ""
        cr, er = rate(self.compiled, self.done), rate(self.correct, self.done)
        table = Table(show_header=True, header_style="bold", box=None)
        for col in ("method", "operator", "episode", "round", "last verdict", "CR", "ER"):
            table.add_column(col)
        table.add_row(escape(method), escape(f"{self.position}/{self.total} {self.operator}"), self.episode,
                      f"{self.round}/{budget}", escape(self.verdict), _pct(cr), _pct(er))
        return table

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._render())


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"
