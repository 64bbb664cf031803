"""Prefix-cache hits per call: what a backend reports becomes `Reply.cached_tokens` and a column of
the exchange log (migration 0006)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.models import ExchangeLog, Message, ModelConfig, make_model
from sagekernel.models.exchange_log import list_exchanges
from sagekernel.models.local import reused_prefix

USER = [Message("system", "You write kernels."), Message("user", "Write a softmax kernel.")]


def _body(usage: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "x", "object": "chat.completion", "model": "test-model",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                         "finish_reason": "stop"}], **more}
    if usage is not None:
        body["usage"] = usage
    return body


@pytest.mark.parametrize(("reply", "cached"), [
    # OpenAI, vLLM (--enable-prompt-tokens-details), SGLang
    (_body({"prompt_tokens": 900, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 768}}), 768),
    # llama.cpp's server
    (_body({"prompt_tokens": 900, "completion_tokens": 5}, timings={"cache_n": 850, "prompt_n": 50}), 850),
    # a server that does not say
    (_body({"prompt_tokens": 900, "completion_tokens": 5}), None),
    (_body({"prompt_tokens": 900, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": "?"}}), None),
])
def test_an_endpoints_cache_report_is_logged_per_call(workspace: Path, reply: dict[str, Any],
                                                      cached: int | None) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="cache")
    with OpenAITestServer(replies=[{"raw": reply}]) as server:
        model = make_model(f"openai:test-model@{server.base_url}", config=ModelConfig(), log=log)
        got = model.complete(USER, max_tokens=8)
    assert got.cached_tokens == cached and got.prompt_tokens == 900
    (row,) = list_exchanges(log.conn, run_id="cache")
    assert row.cached_tokens == cached and row.prompt_tokens == 900
    stored = log.conn.execute("SELECT cached_tokens FROM exchanges WHERE id = ?", (row.id,)).fetchone()[0]
    assert stored == cached


def test_the_migration_adds_the_column(workspace: Path) -> None:
    conn = db.connect(workspace)
    assert "cached_tokens" in {r[1] for r in conn.execute("PRAGMA table_info(exchanges)")}
    applied = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert "0006_exchange_cached_tokens.sql" in applied


def test_the_reused_prefix_follows_llama_cpp_pythons_rule() -> None:
    assert reused_prefix([], [1, 2, 3]) == 0  # empty context: nothing reused
    assert reused_prefix([1, 2, 3, 9, 9], [1, 2, 3, 4]) == 3  # the common prefix
    assert reused_prefix([1, 2, 3, 4, 5, 6], [1, 2, 3, 4]) == 3  # all held: the last token is replayed
    assert reused_prefix([7, 2, 3], [1, 2, 3]) == 0  # a difference at the start invalidates everything after
