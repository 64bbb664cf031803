"""The runner's start and restart: a run that never started is not left `running`; the same command
after a finished run says so and learns nothing again; `--new` starts another run."""

from __future__ import annotations

from pathlib import Path

import pytest

from openai_server import OpenAITestServer
from sagekernel.errors import SageError
from sagekernel.runner.run import run
from test_e2e_run import Script, config, prepare, query


def test_a_run_whose_model_never_answers_is_not_left_running(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        cfg = config(ws, srv, method="refinement")
    dead = cfg.model_copy(update={"model": f"openai:test-model@{srv.base_url}",
                                  "model_options": {"max_retries": 0, "timeout_s": 2}})
    with pytest.raises(SageError):
        run(dead)  # the server is gone: the probe fails
    statuses = query(ws, "SELECT status FROM runs")
    assert statuses and all(s != "running" for (s,) in statuses), statuses
    assert statuses == [("not_started",)]


def test_the_same_command_after_a_finished_run_says_so(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as srv:
        cfg = config(ws, srv, method="refinement")
        first = run(cfg)
        assert first.status == "finished"
        calls = query(ws, "SELECT count(*) FROM exchanges")
        logged = query(ws, "SELECT sum(prompt_tokens) + sum(completion_tokens) FROM exchanges "
                           "WHERE status = 'ok'")[0][0]
        assert first.spend.tokens == logged and first.spend.calls > 0
        again = run(cfg)
        assert again.run_id == first.run_id and "already finished" in again.message
        assert "--new" in again.message
        assert query(ws, "SELECT count(*) FROM exchanges") == calls, "no model call, nothing relearned"
        assert query(ws, "SELECT count(*) FROM runs") == [(1,)]
        other = run(cfg.model_copy(update={"new": True}))
        assert other.run_id != first.run_id and other.status == "finished"
