"""The OpenAI-compatible backend, driven through its real HTTP client against a local server."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from openai_server import Failure, OpenAITestServer
from sagekernel import db
from sagekernel.errors import BudgetExhausted, ModelError, SageError
from sagekernel.models import Budget, ExchangeLog, Message, ModelConfig, make_model, probe
from sagekernel.models.openai_http import OpenAIModel
from sagekernel.models.retry import ContextLengthError

FAST = ModelConfig(retry_base_delay_s=0.001, retry_max_delay_s=0.01)
USER = [Message("system", "You write kernels."), Message("user", "Write a softmax kernel.")]


def _model(server: OpenAITestServer, config: ModelConfig = FAST) -> tuple[OpenAIModel, list[float]]:
    """The model, and the backoff delays it asked for (recorded instead of slept)."""
    sleeps: list[float] = []
    return OpenAIModel("test-model", server.base_url, config=config, sleep=sleeps.append), sleeps


def test_completion_sends_portable_fields_and_parses_the_reply() -> None:
    with OpenAITestServer(replies=[{"content": "done", "finish_reason": "length"}]) as server:
        config = ModelConfig(extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}})
        model = make_model(f"openai:test-model@{server.base_url}", config=config)
        reply = model.complete(USER, max_tokens=64, temperature=0.0, stop=["```\n"], seed=7)
    body = server.requests[0]
    messages = [{"role": "system", "content": "You write kernels."},
                {"role": "user", "content": "Write a softmax kernel."}]
    assert body == {"model": "test-model", "messages": messages,
                    "max_tokens": 64, "temperature": 0.0, "stop": ["```\n"], "seed": 7, "top_k": 20,
                    "chat_template_kwargs": {"enable_thinking": False}}
    assert server.hits == [("POST", "/v1/chat/completions")]
    assert reply.text == "done" and reply.finish_reason == "length" and reply.model == "test-model"
    assert (reply.prompt_tokens, reply.completion_tokens) == (7, 1)  # server counts words
    assert reply.cost_usd is None and reply.latency_s > 0
    assert "authorization" not in server.headers[0]  # no key configured for a local endpoint


def test_a_grammar_is_sent_only_in_the_configured_field() -> None:
    grammar = 'root ::= "DIAGNOSIS: " [^\\n]+'
    with OpenAITestServer(replies=[{"content": "a"}, {"content": "b"}]) as server:
        plain = make_model(f"openai:test-model@{server.base_url}")
        plain.complete(USER, grammar=grammar)
        llama_server = make_model(f"openai:test-model@{server.base_url}",
                                  config=ModelConfig(grammar_field="grammar"))
        llama_server.complete(USER, grammar=grammar)
    assert "grammar" not in server.requests[0]  # other servers reject or ignore unknown fields
    assert server.requests[1]["grammar"] == grammar


def test_missing_usage_is_estimated_and_flagged() -> None:
    with OpenAITestServer(replies=[{"content": "x" * 40, "usage": None}]) as server:
        reply = make_model(f"openai:test-model@{server.base_url}").complete(USER)
    assert reply.extra["usage_estimated"] is True
    assert reply.completion_tokens == 10 and reply.prompt_tokens > 0


def test_price_makes_cost_known() -> None:
    config = ModelConfig(price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    with OpenAITestServer(replies=["a b c"]) as server:
        reply = make_model(f"openai:test-model@{server.base_url}", config=config).complete(USER)
    assert reply.cost_usd == pytest.approx((7 * 2.0 + 3 * 10.0) / 1e6)


def test_api_key_from_the_named_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", "sekret")
    with OpenAITestServer(replies=["ok"]) as server:
        make_model(f"openai:test-model@{server.base_url}",
                   config=ModelConfig(api_key_env="MY_VLLM_KEY")).complete(USER)
    assert server.headers[0]["authorization"] == "Bearer sekret"
    with pytest.raises(ModelError, match="MISSING_KEY"):
        make_model("openai:m@http://127.0.0.1:9/v1", config=ModelConfig(api_key_env="MISSING_KEY"))


def test_default_url_needs_a_key_and_openai_base_url_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        make_model("openai:gpt-4o-mini")
    with OpenAITestServer(replies=["via env"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert make_model("openai:test-model").complete(USER).text == "via env"


def test_503_then_success_is_retried() -> None:
    with OpenAITestServer(replies=["recovered"], fail_first=[503, 502]) as server:
        model, sleeps = _model(server)
        reply = model.complete(USER)
    assert reply.text == "recovered" and reply.extra["attempts"] == 3
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and sleeps[1] >= sleeps[0] / 2


def test_429_retry_after_is_respected() -> None:
    with OpenAITestServer(replies=["ok"], fail_first=[Failure(429, "slow down", retry_after=3)]) as server:
        model, sleeps = _model(server, ModelConfig(retry_base_delay_s=0.001, retry_max_delay_s=10))
        assert model.complete(USER).text == "ok"
    assert len(server.requests) == 2
    assert 3.0 <= sleeps[0] <= 3.01


def test_retry_after_is_bounded() -> None:
    with OpenAITestServer(replies=["ok"], fail_first=[Failure(429, retry_after=3600)]) as server:
        model, sleeps = _model(server, ModelConfig(retry_base_delay_s=0.001, retry_max_delay_s=5))
        model.complete(USER)
    assert sleeps[0] <= 10.01


def test_retries_are_bounded_then_model_error() -> None:
    with OpenAITestServer(replies=["never"], fail_first=[500, 500, 500]) as server:
        model, _ = _model(server, FAST.model_copy(update={"max_retries": 2}))
        with pytest.raises(ModelError, match=r"gave up after 3 attempts.*HTTP 500"):
            model.complete(USER)
    assert len(server.requests) == 3


@pytest.mark.parametrize(("failure", "match"), [
    (Failure(401, "Invalid API key"), "refused the credentials"),
    (Failure(403, "forbidden"), "refused the credentials"),
    (Failure(404, "The model `nope` does not exist"), "has no model"),
    (Failure(400, "'temperature' must be a number"), "rejected the request"),
])
def test_permanent_errors_are_not_retried(failure: Failure, match: str) -> None:
    with OpenAITestServer(replies=["never"], fail_first=[failure]) as server:
        model, sleeps = _model(server)
        with pytest.raises(ModelError, match=match):
            model.complete(USER)
    assert len(server.requests) == 1 and sleeps == []


def test_context_length_error_is_not_retried() -> None:
    message = ("This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
               "(8000 in the messages, 1000 in the completion).")
    with OpenAITestServer(fail_first=[Failure(400, message)]) as server:
        model, _ = _model(server)
        with pytest.raises(ContextLengthError, match=r"does not fit the context window.*4096"):
            model.complete(USER)
    assert len(server.requests) == 1


def test_timeout_is_retried_then_reported() -> None:
    with OpenAITestServer(replies=[{"content": "late", "delay_s": 1.0}] * 2) as s:
        model, _ = _model(s, FAST.model_copy(update={"timeout_s": 0.2, "max_retries": 1}))
        with pytest.raises(ModelError, match="timed out"):
            model.complete(USER)
    assert len(s.requests) == 2


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_probe_reports_an_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    model = make_model(f"openai:qwen2.5-coder@{url}")
    with pytest.raises(ModelError, match="unreachable") as err:
        probe(model)
    assert url in str(err.value) and "qwen2.5-coder" in str(err.value)


def test_probe_reports_a_model_the_endpoint_does_not_serve() -> None:
    with OpenAITestServer(served_models=["qwen2.5-coder-7b", "llama3"]) as server:
        with pytest.raises(ModelError, match="does not serve model 'gpt-5'") as err:
            probe(make_model(f"openai:gpt-5@{server.base_url}"))
        probe(make_model(f"openai:llama3@{server.base_url}"))  # served: no error
    assert server.base_url in str(err.value) and "qwen2.5-coder-7b" in str(err.value)
    assert server.requests == []  # GET /models only, no completion spent


def test_probe_falls_back_to_a_one_token_completion_without_models_route() -> None:
    with OpenAITestServer(replies=["O"], served_models=None) as server:
        probe(make_model(f"openai:test-model@{server.base_url}"))
    assert server.hits[0] == ("GET", "/v1/models")
    assert server.requests[0]["max_tokens"] == 1


def test_token_budget_stops_before_the_next_request() -> None:
    with OpenAITestServer(replies=["a b c d e"] * 5) as server:
        budget = Budget(max_tokens=20)  # each call: 7 prompt + 5 completion words
        model = make_model(f"openai:test-model@{server.base_url}", budget=budget)
        model.complete(USER)
        reply = model.complete(USER)  # crosses the limit: returned, since it was paid for
        assert reply.extra["budget_exhausted"].startswith("token budget spent")
        with pytest.raises(BudgetExhausted, match="24 of 20 tokens"):
            model.complete(USER)
    assert len(server.requests) == 2 and budget.used_tokens == 24


def test_cost_budget(workspace: Path) -> None:
    config = ModelConfig(price_input_per_mtok=1e6, price_output_per_mtok=0.0)  # $1 per prompt token
    with pytest.raises(SageError, match="price is unknown"):
        make_model("openai:m@http://127.0.0.1:9/v1", budget=Budget(max_cost_usd=1.0))
    log = ExchangeLog(db.connect(workspace))
    with OpenAITestServer(replies=["ok"] * 3) as server:
        model = make_model(f"openai:test-model@{server.base_url}", config=config, log=log,
                           budget=Budget(max_cost_usd=10.0))
        model.complete(USER)
        model.complete(USER)
        with pytest.raises(BudgetExhausted, match=r"\$14.0000 of \$10.0000"):
            model.complete(USER)
    assert len(server.requests) == 2


class _ToLocal(httpx.BaseTransport):
    """Sends requests addressed to api.openai.com to the local test server instead (real HTTP)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return self.inner.handle_request(request)


def test_official_endpoint_gets_max_completion_tokens_and_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAITestServer(replies=["hi"]) as server:
        model = OpenAIModel("test-model", transport=_ToLocal(server.port))
        assert model.base_url == "https://api.openai.com/v1"
        model.complete(USER, max_tokens=50)
    assert server.requests[0]["max_completion_tokens"] == 50 and "max_tokens" not in server.requests[0]
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def _choice(message: object, **extra: object) -> dict[str, object]:
    return {"id": "x", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], **extra}


@pytest.mark.parametrize(("raw", "match"), [
    ({"choices": []}, "returned no choices"),
    ({"choices": {"0": "not a list"}}, "returned no choices"),
    (_choice("just a string"), "message is not an object"),
])
def test_malformed_responses_are_model_errors_and_logged(raw: object, match: str, workspace: Path) -> None:
    """A body the protocol does not allow stops with a ModelError (never an AttributeError/KeyError
    traceback), is not retried, and leaves an `error` row in the exchange log."""
    log = ExchangeLog(db.connect(workspace), run_id="r")
    with OpenAITestServer(replies=[{"raw": raw}]) as server:
        model = OpenAIModel("test-model", server.base_url, config=FAST, log=log, sleep=lambda s: None)
        with pytest.raises(ModelError, match=match):
            model.complete(USER)
    assert len(server.requests) == 1
    rows = log.conn.execute("SELECT status, error FROM exchanges").fetchall()
    assert [r[0] for r in rows] == ["error"] and match in rows[0][1]


def test_error_with_http_200_is_retried_unless_it_is_a_context_overflow() -> None:
    with OpenAITestServer(replies=[{"raw": {"error": {"message": "engine overloaded"}}}, "ok"]) as server:
        model, sleeps = _model(server)
        assert model.complete(USER).text == "ok"
    assert len(server.requests) == 2 and len(sleeps) == 1
    overflow = {"error": {"message": "This model's maximum context length is 4096 tokens."}}
    with OpenAITestServer(replies=[{"raw": overflow}, "never"]) as server:
        model, sleeps = _model(server)
        with pytest.raises(ContextLengthError, match="HTTP 200"):
            model.complete(USER)
    assert len(server.requests) == 1 and sleeps == []


def test_empty_content_and_odd_usage_give_an_empty_reply_with_estimated_usage() -> None:
    raw = _choice({"role": "assistant", "content": None},
                  usage={"prompt_tokens": "many", "completion_tokens": None})
    with OpenAITestServer(replies=[{"raw": raw}]) as server:
        model, _ = _model(server)
        reply = model.complete(USER)
    assert reply.text == "" and reply.extra["usage_estimated"] is True
    assert reply.prompt_tokens > 0 and reply.completion_tokens == 0
