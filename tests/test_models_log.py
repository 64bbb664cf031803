"""The exchange log (migration 0002, tags, retries, FTS) and the `sage log` commands."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.cli import log as log_cli
from sagekernel.errors import ModelError
from sagekernel.models import ExchangeLog, Message, ModelConfig, exchange_context, make_model
from sagekernel.models.exchange_log import get_exchange, list_exchanges, search_exchanges
from sagekernel.models.scripted import ScriptedModel

FAST = ModelConfig(retry_base_delay_s=0.001, retry_max_delay_s=0.01)
MESSAGES = [Message("system", "rules"), Message("user", "write softmax")]
WIDE = {"COLUMNS": "200"}


def _cli() -> typer.Typer:
    app = typer.Typer()
    log_cli.register(app)

    @app.command("noop", hidden=True)
    def _noop() -> None:  # a second command keeps `log` a sub-command rather than the root
        pass

    return app


def test_migration_creates_the_table_and_fts(workspace: Path) -> None:
    conn = db.connect(workspace)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"exchanges", "exchanges_fts"} <= names
    applied = {r[1] for r in conn.execute("SELECT number, name FROM schema_migrations")}
    assert "0002_exchanges.sql" in applied


def test_every_attempt_is_logged_with_tags(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="run-1", tags={"worker": 0})
    with OpenAITestServer(replies=["__global__ kernel text"], fail_first=[503]) as server:
        model = make_model(f"openai:test-model@{server.base_url}", config=FAST, log=log)
        with log.context(operator="softmax", round=2), exchange_context(episode="opt"):
            model.complete(MESSAGES, max_tokens=99, seed=1)
    conn = sqlite3.connect(db.db_path(workspace))  # what another process would see right away
    assert conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 2
    retry, ok = sorted(list_exchanges(log.conn), key=lambda e: e.id)
    assert (retry.status, retry.attempt, ok.status, ok.attempt) == ("retry", 1, "ok", 2)
    assert retry.call_id == ok.call_id and "HTTP 503" in (retry.error or "")
    assert retry.reply_text is None and ok.reply_text == "__global__ kernel text"
    for row in (retry, ok):
        assert (row.run_id, row.operator, row.round) == ("run-1", "softmax", 2)
        assert row.tags == {"worker": 0, "episode": "opt"}
        assert row.messages == [{"role": m.role, "content": m.content} for m in MESSAGES]
        assert row.params["max_tokens"] == 99 and row.params["seed"] == 1
    assert ok.prompt_tokens == 3 and ok.completion_tokens == 3 and ok.latency_s is not None


def test_final_errors_are_logged(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace))
    model = ScriptedModel([{"error": "boom"}], log=log)
    with pytest.raises(ModelError):
        model.complete([Message("user", "x")], tags={"operator": "gelu", "round": 1})
    [row] = list_exchanges(log.conn)
    assert row.status == "error" and "boom" in (row.error or "") and row.operator == "gelu"


def test_logging_from_worker_threads(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="r")
    model = ScriptedModel({"fallback": "ok"}, log=log)

    def work(i: int) -> None:
        with log.context(operator=f"op{i}", round=i):
            model.complete([Message("user", f"task {i}")])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = list_exchanges(log.conn, run_id="r")
    assert sorted((r.operator, r.round) for r in rows) == [(f"op{i}", i) for i in range(4)]


def test_full_text_search(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace))
    model = ScriptedModel([{"match": "softmax", "text": "use a warp shuffle reduction"},
                           {"match": "gemm", "text": "tile into shared memory"}], log=log)
    model.complete([Message("user", "softmax over rows")])
    model.complete([Message("user", "gemm 1024")])
    conn = log.conn
    assert [e.reply_text for e in search_exchanges(conn, "shuffle")] == ["use a warp shuffle reduction"]
    assert [e.reply_text for e in search_exchanges(conn, "gemm")] == ["tile into shared memory"]  # prompt
    assert [e.reply_text for e in search_exchanges(conn, '"shared memory"')] == ["tile into shared memory"]
    assert search_exchanges(conn, "warp-shuffle")  # not valid FTS5: searched as plain words
    assert "«shuffle»" in (search_exchanges(conn, "shuffle")[0].snippet or "")


def test_cli_list_show_search(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="run-A")
    model = ScriptedModel({"fallback": "vectorise the [inner] loop"}, log=log)
    with log.context(operator="relu", round=1):
        model.complete([Message("user", "relu kernel please")])
    ExchangeLog(log.conn, run_id="run-B").record(
        call_id="c", attempt=1, status="error", model_spec="openai:x@http://h/v1",
        messages=[Message("user", "other run")], params={}, error="HTTP 401")
    runner = CliRunner()
    app = _cli()

    res = runner.invoke(app, ["log", "list", "--workspace", str(workspace), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["run_id"] for r in rows] == ["run-B", "run-A"]  # newest first
    res = runner.invoke(app, ["log", "list", "-w", str(workspace), "--run", "run-A", "--json"])
    [row] = json.loads(res.output)
    assert row["operator"] == "relu" and row["reply_text"] == "vectorise the [inner] loop"

    res = runner.invoke(app, ["log", "list", "-w", str(workspace)], env=WIDE)
    assert res.exit_code == 0 and "relu" in res.output and "HTTP 401" in res.output

    res = runner.invoke(app, ["log", "show", str(row["id"]), "-w", str(workspace)], env=WIDE)
    assert res.exit_code == 0 and "relu kernel please" in res.output
    assert "vectorise the [inner] loop" in res.output
    res = runner.invoke(app, ["log", "show", str(row["id"]), "-w", str(workspace), "--json"])
    assert json.loads(res.output)["messages"] == [{"role": "user", "content": "relu kernel please"}]

    res = runner.invoke(app, ["log", "search", "vectorise", "-w", str(workspace), "--json"])
    assert [r["id"] for r in json.loads(res.output)] == [row["id"]]
    res = runner.invoke(app, ["log", "search", "vectorise", "-w", str(workspace)], env=WIDE)
    assert res.exit_code == 0 and "1 match" in res.output


def test_cli_errors_are_sage_errors(tmp_path: Path, workspace: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(_cli(), ["log", "list", "-w", str(tmp_path / "nowhere")])
    assert res.exit_code != 0 and "no SAGE workspace database" in str(res.exception)
    ExchangeLog(db.connect(workspace))
    res = runner.invoke(_cli(), ["log", "show", "42", "-w", str(workspace)])
    assert "no exchange 42" in str(res.exception)


def test_reading_needs_no_write_access(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace))
    ScriptedModel(["x"], log=log).complete([Message("user", "y")])
    ro = db.connect(workspace, readonly=True)
    assert get_exchange(ro, 1) is not None
    with pytest.raises(sqlite3.OperationalError):
        ro.execute("DELETE FROM exchanges")


def test_sage_log_is_wired_into_the_root_command(workspace: Path) -> None:
    from sagekernel.cli import app

    ScriptedModel(["hello"], log=ExchangeLog(db.connect(workspace))).complete([Message("user", "hi")])
    res = CliRunner().invoke(app, ["log", "list", "--workspace", str(workspace), "--json"])
    assert res.exit_code == 0, res.output
    assert [r["reply_text"] for r in json.loads(res.output)] == ["hello"]
