"""The live view of a running experiment, polled from the streams' workspaces.

On a terminal: one line per stream (state, operator in flight, round, done/total, running CR/ER),
redrawn in place. Elsewhere (a log file, CI): one log line per finished operator, and one when a
stream changes state. The scheduler calls `tick()` between its polls.
"""

from __future__ import annotations

import time
from typing import TextIO

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.status import StreamStatus, experiment_status
from sagekernel.metrics import compilation_rate, execution_rate
from sagekernel.terminal import Console

MIN_INTERVAL_S = 0.5


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def status_table(rows: list[StreamStatus], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold", box=None)
    for col in ("stream", "state", "operator", "round", "done", "CR", "ER", "device"):
        table.add_column(col, justify="right" if col in ("round", "done", "CR", "ER") else "left")
    for r in rows:
        rnd = f"{r.episode} {r.round}" if r.round is not None and r.state == "running" else "-"
        done = f"{r.done}/{r.total}" if r.total is not None else "-"
        op = r.operator if r.operator and r.state == "running" else "-"
        table.add_row(
            escape(r.name), r.state, escape(op), rnd, done, pct(r.cr), pct(r.er), escape(r.device or "-")
        )
    return table


class LiveView:
    def __init__(
        self,
        exp: ExperimentDir,
        *,
        console: Console | None = None,
        tty: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.exp = exp
        self.console = console or Console(stderr=True)
        self.tty = self.console.is_terminal if tty is None else tty
        self.out = stream
        self.live: Live | None = None
        self.seen_done: dict[str, int] = {}
        self.seen_state: dict[str, str] = {}
        self.last = 0.0

    def start(self) -> None:
        rows = experiment_status(self.exp)
        for r in rows:
            self.seen_done[r.name], self.seen_state[r.name] = r.done, r.state
        if self.tty:
            self.live = Live(status_table(rows), console=self.console, refresh_per_second=4, transient=False)
            self.live.start()
        else:
            done = sum(r.state == "finished" for r in rows)
            self._log(f"experiment {self.exp.name}: {len(rows)} streams, {done} already finished")

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < MIN_INTERVAL_S:
            return
        self.last = now
        rows = experiment_status(self.exp)
        if self.live is not None:
            self.live.update(status_table(rows))
            return
        for r in rows:
            seen = self.seen_done.get(r.name, 0)
            if r.done > seen:
                seen = self._log_results(r, seen)
            if r.state != self.seen_state.get(r.name) and r.state != "pending":
                extra = f": {r.message}" if r.message and r.state in ("failed", "interrupted") else ""
                self._log(f"[{r.name}] {r.state}{extra}")
            self.seen_done[r.name], self.seen_state[r.name] = seen, r.state

    def _log_results(self, r: StreamStatus, seen: int) -> int:
        """One line per operator finished since the last poll, with the CR/ER after it; returns how
        many results have now been logged. The stream keeps writing between the status poll and this
        read, so that count, not the polled `r.done`, is what the next poll starts from."""
        from sagekernel.runner.store import open_readonly

        store = open_readonly(self.exp.workspace(r.name))
        if store is None:
            return seen
        with store:
            results = store.results(r.name)
        for i in range(seen, len(results)):
            res = results[i]
            upto = results[: i + 1]
            mark = "solved" if res.correct else "compiled" if res.compiled else "failed"
            self._log(
                f"[{r.name}] {i + 1}/{r.total} {res.operator}: {mark} in {res.rounds_used} rounds; "
                f"CR {pct(compilation_rate(upto))} ER {pct(execution_rate(upto))}"
            )
        return max(seen, len(results))

    def close(self) -> None:
        self.tick(force=True)
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _log(self, line: str) -> None:
        if self.out is not None:
            print(line, file=self.out, flush=True)
        else:
            self.console.print(escape(line), soft_wrap=True, highlight=False)
