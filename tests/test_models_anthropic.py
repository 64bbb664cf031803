"""The Anthropic backend through the official SDK, pointed at a local Messages-API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openai_server import Failure, JSONTestServer
from sagekernel import db
from sagekernel.errors import ModelError
from sagekernel.models import ExchangeLog, Message, ModelConfig, make_model, probe
from sagekernel.models.exchange_log import list_exchanges

FAST = ModelConfig(retry_base_delay_s=0.001, retry_max_delay_s=0.01)


class AnthropicTestServer(JSONTestServer):
    """Speaks `POST /v1/messages` and `GET /v1/models/{id}`; replies and failures from a script.
    A reply is a text, or a list of content blocks (`{"type": "text", ...}`, `{"type": "tool_use",
    "name": ..., "input": {...}}`): with a tool call the stop reason is "tool_use"."""

    def __init__(self, replies: list[Any] = (), *, fail_first: list[Failure] = (),  # type: ignore[assignment]
                 models: tuple[str, ...] = ("claude-test",)) -> None:
        super().__init__()
        self.replies = list(replies)
        self.fail_first = list(fail_first)
        self.models = models

    def __enter__(self) -> AnthropicTestServer:
        self.start()
        return self

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if method == "GET" and path.startswith("/v1/models/"):
            model = path.rsplit("/", 1)[1]
            if model not in self.models:
                return 404, {"type": "error", "error": {"type": "not_found_error",
                                                        "message": f"model: {model}"}}, {}
            return 200, {"type": "model", "id": model, "display_name": model,
                         "created_at": "2026-01-01T00:00:00Z"}, {}
        if method == "POST" and path == "/v1/messages":
            with self._lock:
                self.requests.append(body)
                n = len(self.requests)
                if n <= len(self.fail_first):
                    f = self.fail_first[n - 1]
                    kind = {401: "authentication_error", 529: "overloaded_error"}.get(f.status, "api_error")
                    headers = {"retry-after": str(f.retry_after)} if f.retry_after is not None else {}
                    return f.status, {"type": "error", "error": {"type": kind, "message": f.message}}, headers
                reply = self.replies.pop(0)
            blocks = [{"type": "text", "text": reply}] if isinstance(reply, str) else [
                {"id": f"toolu_{n}_{k}", **b} if b["type"] == "tool_use" else b for k, b in enumerate(reply)]
            words = sum(len(str(b.get("text", b.get("input", ""))).split()) for b in blocks)
            tool = any(b["type"] == "tool_use" for b in blocks)
            return 200, {
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"],
                "content": blocks, "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": words, "cache_read_input_tokens": 5},
            }, {}
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}, {}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def test_messages_are_mapped_and_the_reply_parsed(workspace: Path) -> None:
    log = ExchangeLog(db.connect(workspace))
    with AnthropicTestServer(["a kernel"]) as server:
        model = make_model(f"anthropic:claude-test@{server.url}", config=FAST, log=log)
        reply = model.complete([Message("system", "Be terse."), Message("user", "part one"),
                                Message("user", "part two")], max_tokens=100, stop=["</code>"])
    body = server.requests[0]
    assert body["system"] == "Be terse."
    assert body["messages"] == [{"role": "user", "content": "part one\n\npart two"}]
    assert (body["max_tokens"], body["stop_sequences"], body["model"]) == (100, ["</code>"], "claude-test")
    sent = server.headers[-1]  # this SDK version authenticates with a bearer token; older ones with x-api-key
    assert "test-key" in (sent.get("x-api-key", ""), sent.get("authorization", "").removeprefix("Bearer "))
    assert reply.text == "a kernel" and reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens) == (16, 2)  # input + cache reads
    [row] = list_exchanges(log.conn)
    assert row.status == "ok" and row.reply_text == "a kernel" and row.model_spec.startswith("anthropic:")


def test_overloaded_is_retried_and_auth_is_not() -> None:
    with AnthropicTestServer(["fine"], fail_first=[Failure(529, "Overloaded")]) as server:
        assert make_model(f"anthropic:claude-test@{server.url}", config=FAST).complete(
            [Message("user", "hi")]).text == "fine"
    assert len(server.requests) == 2
    with AnthropicTestServer(["never"], fail_first=[Failure(401, "invalid x-api-key")]) as server, \
            pytest.raises(ModelError, match=r"refused the credentials.*invalid x-api-key"):
        make_model(f"anthropic:claude-test@{server.url}", config=FAST).complete([Message("user", "hi")])
    assert len(server.requests) == 1


def test_context_length_is_not_retried() -> None:
    failure = Failure(400, "prompt is too long: 250000 tokens > 200000 maximum")
    with AnthropicTestServer([], fail_first=[failure]) as server, \
            pytest.raises(ModelError, match="context window"):
        make_model(f"anthropic:claude-test@{server.url}", config=FAST).complete([Message("user", "x")])
    assert len(server.requests) == 1


def test_probe_names_unknown_model_and_endpoint() -> None:
    with AnthropicTestServer() as server:
        probe(make_model(f"anthropic:claude-test@{server.url}"))
        with pytest.raises(ModelError, match="does not serve model 'claude-nope'") as err:
            probe(make_model(f"anthropic:claude-nope@{server.url}"))
    assert server.url in str(err.value)


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        make_model("anthropic:claude-test")
