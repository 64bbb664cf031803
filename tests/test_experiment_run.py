"""`sage experiment run/status/report` over real streams: the scripted model, the real harness
compiling and judging C kernels, the real runner and memory. One experiment of five streams is
run once (module fixture, two pinned workers) and inspected by the tests below."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from experiment_support import write_spec
from sagekernel import db
from sagekernel.cli import app
from sagekernel.experiment.api import experiment_report, run_experiment
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.live import LiveView

BLOCKS = """
[[streams]]
name = "{method}-{model}"
methods = ["refinement", "sage"]
models = ["scripted"]

[[streams]]
name = "sage-frozen"
methods = ["sage"]
models = ["scripted"]
from = "sage-scripted"
memory = "frozen"

[[streams]]
name = "replay-atu"
methods = ["sage"]
models = ["scripted"]
from = "sage-scripted"
memory = "replay:atu"
limit = 1

[[streams]]
name = "sage-library"
methods = ["sage"]
models = ["scripted"]
from = "sage-scripted"
memory = "continue"
limit = 2
"""


def query(ws: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = db.connect(ws, create=False, readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> ExperimentDir:
    root = tmp_path_factory.mktemp("exp")
    spec = write_spec(root / "exp.toml", BLOCKS)
    log = (root / "live.log").open("w")
    exp = ExperimentDir(root / "run")
    view = LiveView(exp, tty=False, stream=log)
    exp, outcome = run_experiment(spec, directory=root / "run", workers=2, devices=["cpu:0,1"], live=view)
    log.close()
    assert outcome.ok, outcome
    return exp


def test_every_stream_finishes_in_its_own_workspace_with_its_name_as_run_id(finished: ExperimentDir) -> None:
    names = [s.name for s in finished.streams()]
    assert names == ["refinement-scripted", "sage-scripted", "sage-frozen", "replay-atu", "sage-library"]
    for name in names:
        ws = finished.workspace(name)
        assert query(ws, "SELECT run_id, status FROM runs") == [(name, "finished")]
    planned = {n: query(finished.workspace(n), "SELECT count(*) FROM operator_results")[0][0] for n in names}
    assert planned == {
        "refinement-scripted": 3,
        "sage-scripted": 3,
        "sage-frozen": 3,
        "replay-atu": 1,
        "sage-library": 2,
    }


def test_recipients_start_only_after_their_donor_finished(finished: ExperimentDir) -> None:
    donor_end = query(finished.workspace("sage-scripted"), "SELECT finished_at FROM runs")[0][0]
    for name in ("sage-frozen", "replay-atu", "sage-library"):
        created = query(finished.workspace(name), "SELECT created_at FROM runs")[0][0]
        assert created > donor_end, name


def test_the_memory_modes_start_each_recipient_from_the_donors_memory(finished: ExperimentDir) -> None:
    donor = finished.workspace("sage-scripted")
    donor_titles = {t for (t,) in query(donor, "SELECT title FROM items")}
    assert donor_titles  # the target's seed memory, which the donor learned on (one update per episode)
    assert query(donor, "SELECT count(*) FROM memory_episodes")[0][0] == 6
    # frozen: a snapshot of the donor's memory, never written
    frozen = finished.workspace("sage-frozen")
    snapshot = frozen / "memory-from-sage-frozen.db"
    assert {t for (t,) in query(snapshot, "SELECT title FROM items")} == donor_titles
    assert query(snapshot, "SELECT count(*) FROM memory_episodes") == query(
        donor, "SELECT count(*) FROM memory_episodes"
    )
    # replay: a bank with the donor's items and utilities recomputed by ATU
    bank = finished.bank("replay-atu")
    assert {t for (t,) in query(bank, "SELECT title FROM items")} == donor_titles
    # continue: the donor's bank imported, then learned from further (more episodes than imported)
    library = finished.workspace("sage-library")
    assert donor_titles <= {t for (t,) in query(library, "SELECT title FROM items")}
    assert query(library, "SELECT count(*) FROM memory_episodes WHERE run_id = 'sage-library'")[0][0] >= 2


def test_two_workers_ran_at_once_each_pinned_to_its_own_core(finished: ExperimentDir) -> None:
    first = [finished.outcome(n) for n in ("refinement-scripted", "sage-scripted")]
    assert all(o is not None for o in first)
    a, b = first[0], first[1]
    assert a is not None and b is not None
    assert {a.device, b.device} == {"cpu:0", "cpu:1"}
    for o in (a, b):
        assert o.affinity == [int(o.device.split(":")[1])]  # what the worker process itself could use
    assert a.started_at < b.ended_at and b.started_at < a.ended_at  # they overlapped


def test_the_non_tty_live_view_logs_one_line_per_finished_operator(finished: ExperimentDir) -> None:
    lines = (finished.root.parent / "live.log").read_text().splitlines()
    for name, n in (("refinement-scripted", 3), ("sage-frozen", 3), ("sage-library", 2)):
        done = [line for line in lines if line.startswith(f"[{name}] ") and " solved in " in line]
        assert len(done) == n, (name, lines)
    assert any(line == "[sage-scripted] finished" for line in lines)


def test_rerunning_a_finished_experiment_runs_nothing_again(finished: ExperimentDir) -> None:
    before = {
        s.name: query(finished.workspace(s.name), "SELECT position, recorded_at FROM operator_results")
        for s in finished.streams()
    }
    calls = {
        s.name: query(finished.workspace(s.name), "SELECT count(*) FROM exchanges")
        for s in finished.streams()
    }
    _, outcome = run_experiment(finished.root, live=False)
    assert outcome.ok and sorted(outcome.finished) == sorted(before)
    for s in finished.streams():
        assert (
            query(finished.workspace(s.name), "SELECT position, recorded_at FROM operator_results")
            == before[s.name]
        )
        assert query(finished.workspace(s.name), "SELECT count(*) FROM exchanges") == calls[s.name]


def test_status_shows_every_stream(finished: ExperimentDir) -> None:
    result = CliRunner().invoke(app, ["experiment", "status", str(finished.root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {r["name"]: r for r in data["streams"]}
    assert data["experiment"] == "test-exp"
    assert {r["state"] for r in rows.values()} == {"finished"}
    assert (rows["sage-library"]["done"], rows["sage-library"]["total"], rows["sage-library"]["er"]) == (
        2,
        2,
        100.0,
    )
    assert rows["sage-frozen"]["donor"] == "sage-scripted"
    text = CliRunner().invoke(app, ["experiment", "status", str(finished.root)]).output
    assert "replay-atu" in text and "finished" in text


def test_report_gives_the_paper_shaped_tables_in_json_terminal_and_html(
    finished: ExperimentDir, tmp_path: Path
) -> None:
    data = experiment_report(finished.root)
    tables = {t["key"]: t for t in data["tables"]}
    assert list(tables) == ["table1", "figure4", "table7", "library", "streams"]
    t1 = tables["table1"]
    assert t1["header"][:2] == ["Model", "Method"] and "ER" in t1["header"]
    assert [r[1] for r in t1["rows"]] == ["Refinement", "SAGE"]
    assert [d["solved"] for d in t1["data"]] == [3, 3] and t1["data"][0]["er"] == 100.0
    assert tables["figure4"]["data"][0]["condition"] == "Native"
    assert tables["table7"]["rows"][0][:2] == ["sage-scripted", "ATU"]
    assert tables["library"]["data"][0]["donor"] == "sage-scripted"
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["experiment", "report", str(finished.root), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "Table 1" in result.output and "Table 7" in result.output and "Figure 4" in result.output
    html = out.read_text()
    assert 'id="table1"' in html and 'id="table7"' in html and "Plotly" in html and "<script src=" not in html
    as_json = CliRunner().invoke(app, ["experiment", "report", str(finished.root), "--json"])
    assert json.loads(as_json.stdout)["experiment"] == "test-exp"


def test_another_experiment_in_the_same_directory_is_refused(finished: ExperimentDir, tmp_path: Path) -> None:
    other = write_spec(tmp_path / "other.toml", BLOCKS.replace('"refinement", ', ""))
    from sagekernel.experiment.spec import ExperimentSpecError

    with pytest.raises(ExperimentSpecError, match="holds another experiment"):
        run_experiment(other, directory=finished.root, live=False)


def test_a_failed_donor_blocks_its_recipients_and_the_others_go_on(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "exp.toml",
        """
[[streams]]
name = "bad"
methods = ["sage"]
models = ["scripted"]
suite = "no-such-suite"
[[streams]]
name = "after-bad"
methods = ["sage"]
models = ["scripted"]
from = "bad"
[[streams]]
name = "good"
methods = ["refinement"]
models = ["scripted"]
limit = 1
""",
    )
    exp, outcome = run_experiment(spec, directory=tmp_path / "run", workers=2, live=False)
    assert outcome.finished == ["good"] and outcome.blocked == ["after-bad"]
    assert "no-such-suite" in outcome.failed["bad"]
    result = CliRunner().invoke(app, ["experiment", "status", str(exp.root), "--json"])
    states = {r["name"]: r["state"] for r in json.loads(result.output)["streams"]}
    assert states == {"bad": "failed", "after-bad": "blocked", "good": "finished"}


def test_streams_on_the_embedded_model_share_one_worker_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler's choice, observed at its process boundary: both `local` streams go to ONE
    worker process (threads sharing the one llama.cpp instance); the scripted one gets its own."""
    from sagekernel.experiment import scheduler

    spec = write_spec(
        tmp_path / "exp.toml",
        """
[[streams]]
name = "{method}-{model}"
methods = ["refinement", "sage"]
models = ["local"]
[[streams]]
name = "{method}-{model}"
methods = ["refinement"]
models = ["scripted"]
""",
    )
    spec.write_text(spec.read_text().replace("[models]\n", '[models]\nlocal = "local"\n'))
    started: list[list[str]] = []

    class Done:
        def poll(self) -> int:
            return 0

    def fake_start(exp: ExperimentDir, names: list[str], slot: object, local_model: bool) -> object:
        started.append(list(names))
        return scheduler._Job(names, None, Done(), local_model)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler, "_start", fake_start)
    run_experiment(spec, directory=tmp_path / "run", workers=3, live=False)
    assert sorted(started) == [["refinement-local", "sage-local"], ["refinement-scripted"]]


def test_outcome_file_is_json_not_pickle(finished: ExperimentDir) -> None:
    raw = (finished.workspace("sage-scripted") / "stream.json").read_text()
    assert json.loads(raw)["state"] == "finished"
    with pytest.raises(sqlite3.Error):
        sqlite3.connect(
            f"file:{finished.workspace('sage-scripted') / 'stream.json'}?mode=ro", uri=True
        ).execute("SELECT 1 FROM sqlite_master").fetchall()


def test_the_terminal_live_view_draws_one_line_per_stream(finished: ExperimentDir) -> None:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    view = LiveView(finished, console=console)
    view.start()
    view.close()
    out = console.file.getvalue()  # type: ignore[attr-defined]
    for s in finished.streams():
        line = next(line for line in out.splitlines() if s.name in line)
        assert "finished" in line and "100%" in line


def test_stream_selection_runs_a_recipient_whose_donor_finished_earlier(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "exp.toml",
        """
[[streams]]
name = "donor"
methods = ["sage"]
models = ["scripted"]
limit = 1
[[streams]]
name = "recipient"
methods = ["sage"]
models = ["scripted"]
from = "donor"
limit = 1
""",
    )
    exp, first = run_experiment(spec, directory=tmp_path / "run", live=False, only={"donor"})
    assert first.finished == ["donor"] and exp.run_status("recipient") is None
    _, second = run_experiment(exp.root, live=False, only={"recipient"})
    assert second.ok and second.finished == ["recipient"]
    assert exp.finished("recipient")


def test_a_result_written_between_the_status_poll_and_the_log_read_is_logged_once(
    finished: ExperimentDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream keeps writing while the view polls: the status says 2 done, the store already
    holds 3 when the view reads it. The third line is logged then, and not again on the next poll."""
    import io
    from dataclasses import replace

    from sagekernel.experiment import live, status
    from sagekernel.records import OperatorResult
    from sagekernel.runner import store

    def result(i: int) -> OperatorResult:
        return OperatorResult("s", i, f"op{i}", 1, "c", True, True, 2, 1, 1.0, 1.0, 1.0)

    row = status.StreamStatus(
        "s", "running", "sage", "scripted", "", None, 0, 3, None, None, None, None, None
    )
    polled = [replace(row, done=0), replace(row, done=2), replace(row, done=3), replace(row, done=3)]
    three = [result(0), result(1), result(2)]
    stored = [[], three, three, three]
    step = {"i": 0}
    monkeypatch.setattr(live, "experiment_status", lambda exp: [polled[step["i"]]])
    monkeypatch.setattr(store, "open_readonly", lambda ws: store.RunStore(sqlite3.connect(":memory:")))
    monkeypatch.setattr(store.RunStore, "results", lambda self, run_id: stored[step["i"]])
    out = io.StringIO()
    view = LiveView(finished, tty=False, stream=out)
    view.start()
    for i in range(1, 4):
        step["i"] = i
        view.tick(force=True)
    logged = [line for line in out.getvalue().splitlines() if " solved in " in line]
    assert [line.split(":")[0] for line in logged] == ["[s] 1/3 op0", "[s] 2/3 op1", "[s] 3/3 op2"]
