"""OpenAI-compatible chat completions over plain HTTP (httpx).

Works unchanged against OpenAI, vLLM, SGLang, Ollama (`/v1`) and llama.cpp's server: it sends only
the portable fields (`model`, `messages`, `max_tokens`, `temperature`, `stop`, `seed`) plus
`ModelConfig.extra_body` verbatim, and reads only `choices[0].message.content`, `finish_reason`
and `usage` — a missing `usage` (some servers omit it) is estimated and flagged
`extra["usage_estimated"]`; the prefix-cache hits a server reports become `Reply.cached_tokens`.
Structured answers (`OutputSchema`) go as `response_format: {"type": "json_schema", ...}` when
`ModelConfig.structured_output` is "json_schema" (the default only for api.openai.com: other
servers differ in what they take); the reply's content is then the JSON (`Reply.structured`).
No SDK: the protocol is small, and owning the client keeps retry, Retry-After and error
classification in one place (retry.py).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import httpx

from sagekernel.errors import ModelError
from sagekernel.models.backend import BackendModel, Request, estimate_tokens
from sagekernel.models.base import Message, Reply, StructuredOutput
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.models.retry import TransientError, is_context_error, parse_retry_after, status_error

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
PROBE_TIMEOUT_S = 10.0
_PROBE_REQUEST = Request((Message("user", "Say OK."),), 1, 0.0, (), None)


class OpenAIModel(BackendModel):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, model: str, base_url: str | None = None, *, name: str | None = None,
                 config: ModelConfig | None = None, log: ExchangeLog | None = None,
                 budget: Budget | None = None, transport: httpx.BaseTransport | None = None,
                 **kwargs: Any) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL).rstrip("/")
        super().__init__(name or f"openai:{model}@{self.base_url}", config=config, log=log, budget=budget,
                         **kwargs)
        key_env = self.config.api_key_env or "OPENAI_API_KEY"
        api_key = os.environ.get(key_env)
        if not api_key and (self.config.api_key_env or self.base_url == DEFAULT_OPENAI_URL):
            raise ModelError(f"no API key for {self.base_url}: set the environment variable {key_env} "
                             "(or point the spec at another endpoint: openai:<model>@<base_url>)")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url + "/", headers=headers, transport=transport,
                                    timeout=httpx.Timeout(self.config.timeout_s))

    def close(self) -> None:
        self._client.close()

    structured_mechanisms = ("json_schema",)

    @property
    def structured_output(self) -> StructuredOutput | None:
        chosen = self.config.structured_output
        if chosen is None:
            return "json_schema" if urlparse(self.base_url).hostname == "api.openai.com" else None
        return "json_schema" if chosen == "json_schema" else None

    @property
    def decodes_under_grammar(self) -> bool:
        return bool(self.config.grammar_field)

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            self._max_tokens_field: request.max_tokens,
            "temperature": request.temperature,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        schema = request.output_schema
        if schema is not None:  # the whole reply is the JSON; a GBNF grammar would contradict it
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema.name, "description": schema.description, "schema": schema.schema,
                "strict": True}}
        elif request.grammar is not None and self.config.grammar_field:
            body[self.config.grammar_field] = request.grammar
        body.update(self.config.extra_body)
        if "max_completion_tokens" in self.config.extra_body:
            body.pop("max_tokens", None)  # newer OpenAI models reject both together
        return body

    @property
    def _max_tokens_field(self) -> str:
        # api.openai.com deprecated `max_tokens` (its reasoning models reject it); every compatible
        # server (vLLM, SGLang, Ollama, llama.cpp) accepts `max_tokens`, and some only that.
        official = urlparse(self.base_url).hostname == "api.openai.com"
        return "max_completion_tokens" if official else "max_tokens"

    def _post(self, path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        url = f"{self.base_url}/{path}"
        try:
            response = self._client.post(path, json=body,
                                         timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
        except httpx.TimeoutException as exc:
            raise TransientError(f"timed out after {self.config.timeout_s:g}s waiting for {url} "
                                 f"({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"cannot reach {url}: {exc or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise status_error(response.status_code, _error_detail(response), endpoint=url, model=self.model,
                               retry_after_s=parse_retry_after(response.headers))
        try:
            data = response.json()
        except ValueError as exc:
            raise TransientError(f"{url} answered HTTP {response.status_code} with a body that is not JSON: "
                                 f"{response.text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise ModelError(f"{url} answered with JSON that is not an object: {str(data)[:200]}")
        return data

    def _complete_once(self, request: Request) -> Reply:
        data = self._post("chat/completions", self._body(request))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            if "error" in data:  # some servers report errors with HTTP 200
                # a context overflow cannot be fixed by retrying; anything else is treated as a 5xx
                detail = _error_text(data["error"])
                if is_context_error(detail):
                    raise status_error(200, detail, endpoint=self.base_url, model=self.model)
                raise TransientError(f"{self.base_url} answered HTTP 200 with an error for {self.model!r}: "
                                     f"{detail[:300]}")
            raise ModelError(f"{self.base_url} returned no choices for {self.model!r}: {str(data)[:300]}")
        choice = choices[0]
        message = choice.get("message")
        if message is not None and not isinstance(message, dict):
            raise ModelError(f"{self.base_url} returned a choice whose message is not an object for "
                             f"{self.model!r}: {str(choice)[:300]}")
        message = message or {}
        text = _content_text(message.get("content"))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        extra: dict[str, Any] = {"response_id": data.get("id")}
        prompt_tokens = _count(usage.get("prompt_tokens")) if usage else None
        completion_tokens = _count(usage.get("completion_tokens")) if usage else None
        if prompt_tokens is None or completion_tokens is None:
            extra["usage_estimated"] = True
            prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in request.messages)
            completion_tokens = estimate_tokens(text)
        if usage:
            extra["usage"] = usage
        if message.get("reasoning_content"):
            extra["reasoning_content"] = message["reasoning_content"]
        finish = choice.get("finish_reason")
        if message.get("refusal"):  # OpenAI's structured outputs: the model declined to answer
            extra["refusal"] = str(message["refusal"])
        return Reply(text=text, model=str(data.get("model") or self.model), prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens, extra=extra, cached_tokens=_cached_tokens(data),
                     finish_reason=None if finish is None else str(finish),
                     structured=text if request.output_schema is not None else None)

    def served_models(self) -> list[str]:
        """Model ids from `GET /models`; ModelError if the endpoint cannot be reached or refuses."""
        url = f"{self.base_url}/models"
        try:
            response = self._client.get("models", timeout=min(self.config.timeout_s, PROBE_TIMEOUT_S))
        except httpx.TransportError as exc:
            raise ModelError(f"the model endpoint {self.base_url} is unreachable (needed for model "
                             f"{self.model!r}): {exc or type(exc).__name__}. Is the server running?") from exc
        if response.status_code >= 400:
            raise status_error(response.status_code, _error_detail(response), endpoint=url, model=self.model)
        try:
            listed = response.json().get("data", [])
            return [str(m["id"]) for m in listed if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError) as exc:
            raise ModelError(f"{url} did not answer with a model list: {response.text[:200]!r}") from exc

    def probe(self) -> None:
        """GET /models and check the model is listed; servers without /models get a 1-token completion."""
        try:
            served = self.served_models()
        except ModelError as exc:
            if "HTTP 404" not in str(exc) and "HTTP 405" not in str(exc):
                raise
            served = None
        if served is not None:
            if self.model in served or f"{self.model}:latest" in served:
                return
            raise ModelError(f"the endpoint {self.base_url} does not serve model {self.model!r}; it serves: "
                             f"{', '.join(served) or '(none)'}. Use openai:<one of these>@{self.base_url}")
        try:
            self._post("chat/completions", {**self._body(_PROBE_REQUEST), self._max_tokens_field: 1},
                       timeout=min(self.config.timeout_s, PROBE_TIMEOUT_S))
        except TransientError as exc:
            raise ModelError(f"probe of model {self.model!r} at {self.base_url} failed: {exc}") from exc


def _cached_tokens(data: dict[str, Any]) -> int | None:
    """Prompt tokens the server's prefix cache served, when it says: `usage.prompt_tokens_details.
    cached_tokens` (OpenAI; vLLM with --enable-prompt-tokens-details; SGLang), else llama.cpp's
    server `timings.cache_n`. None when the server reports neither."""
    usage = data.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if isinstance(details, dict) and (n := _count(details.get("cached_tokens"))) is not None:
        return n
    timings = data.get("timings")
    return _count(timings.get("cache_n")) if isinstance(timings, dict) else None


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _count(value: Any) -> int | None:
    """A usage count as an int, or None when the server sent something else (then it is estimated)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def _error_detail(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(data, dict):
        return _error_text(data.get("error", data))
    return str(data)[:500]
