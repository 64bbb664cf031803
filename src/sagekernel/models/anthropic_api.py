"""Anthropic Messages API through the official SDK, behind the same `complete()` interface.

System messages become `system=`; consecutive messages of one role are merged (the API wants
user/assistant alternation). The SDK's own retries are off (`max_retries=0`): retry.py decides.
`seed` has no Anthropic equivalent and is ignored; `temperature` is sent only when the installed
SDK still accepts it (newer ones dropped it), otherwise recorded as `extra["temperature_ignored"]`.

Structured answers (`OutputSchema`) use tool use: the schema is a tool's `input_schema`; with
`force=False` the model may write its text (the kernel in its fenced block) and call the tool in
one reply (`tool_choice: auto`), with `force=True` the call is the reply (`tool_choice: tool`).
The input of the one call to that tool is `Reply.structured` (JSON text); none, or more than one
call, gives None (the caller treats the answer as missing).
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import anthropic

from sagekernel.errors import ModelError
from sagekernel.models.backend import BackendModel, Request
from sagekernel.models.base import Reply, StructuredOutput
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.models.retry import TransientError, parse_retry_after, status_error

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_SDK_TAKES_TEMPERATURE = "temperature" in inspect.signature(anthropic.resources.Messages.create).parameters


class AnthropicModel(BackendModel):
    """A Claude model via `anthropic.Anthropic().messages.create`."""

    def __init__(self, model: str, base_url: str | None = None, *, name: str | None = None,
                 config: ModelConfig | None = None, log: ExchangeLog | None = None,
                 budget: Budget | None = None, **kwargs: Any) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/")
        super().__init__(name or (f"anthropic:{model}" + (f"@{base_url}" if base_url else "")),
                         config=config, log=log, budget=budget, **kwargs)
        key_env = self.config.api_key_env or "ANTHROPIC_API_KEY"
        api_key = os.environ.get(key_env)
        if not api_key:
            raise ModelError(f"no Anthropic API key: set the environment variable {key_env}")
        self._client = anthropic.Anthropic(api_key=api_key, base_url=self.base_url, max_retries=0,
                                           timeout=self.config.timeout_s)

    def close(self) -> None:
        self._client.close()

    structured_mechanisms = ("tool",)

    @property
    def structured_output(self) -> StructuredOutput | None:
        return None if self.config.structured_output == "none" else "tool"

    def _arguments(self, request: Request) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns: list[dict[str, str]] = []
        for m in request.messages:
            if m.role == "system":
                continue
            if turns and turns[-1]["role"] == m.role:
                turns[-1]["content"] += "\n\n" + m.content
            else:
                turns.append({"role": m.role, "content": m.content})
        if not turns or turns[0]["role"] != "user":
            raise ModelError("the Anthropic API needs the first non-system message to be a user message")
        args: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": turns}
        if system:
            args["system"] = system
        if request.stop:
            args["stop_sequences"] = list(request.stop)
        if _SDK_TAKES_TEMPERATURE:
            args["temperature"] = request.temperature
        schema = request.output_schema
        if schema is not None:
            args["tools"] = [{"name": schema.name, "description": schema.description,
                              "input_schema": schema.schema}]
            args["tool_choice"] = {"type": "tool", "name": schema.name} if schema.force else {"type": "auto"}
        if self.config.extra_body:
            args["extra_body"] = dict(self.config.extra_body)
        return args

    def _complete_once(self, request: Request) -> Reply:
        endpoint = f"{self.base_url}/v1/messages"
        try:
            message = self._client.messages.create(**self._arguments(request))
        except anthropic.APITimeoutError as exc:
            raise TransientError(f"timed out after {self.config.timeout_s:g}s waiting for {endpoint}"
                                 ) from exc
        except anthropic.APIConnectionError as exc:
            raise TransientError(f"cannot reach {endpoint}: {exc}") from exc
        except anthropic.APIStatusError as exc:
            raise status_error(exc.status_code, _detail(exc), endpoint=endpoint, model=self.model,
                               retry_after_s=parse_retry_after(exc.response.headers)) from exc
        except anthropic.APIError as exc:
            raise ModelError(f"{endpoint} returned an unusable response for {self.model!r}: {exc}") from exc
        text = "".join(getattr(block, "text", "") for block in message.content
                       if getattr(block, "type", None) == "text")
        usage = message.usage
        prompt_tokens = (usage.input_tokens + (usage.cache_read_input_tokens or 0)
                         + (usage.cache_creation_input_tokens or 0))
        extra: dict[str, Any] = {"response_id": message.id, "stop_reason": message.stop_reason,
                                 "usage": usage.model_dump(exclude_none=True)}
        if not _SDK_TAKES_TEMPERATURE:
            extra["temperature_ignored"] = True
        structured = None
        if request.output_schema is not None:
            calls = [block for block in message.content if getattr(block, "type", None) == "tool_use"
                     and getattr(block, "name", None) == request.output_schema.name]
            extra["tool_calls"] = len(calls)
            if len(calls) == 1:
                structured = json.dumps(calls[0].input, ensure_ascii=False)
        return Reply(text=text, model=message.model or self.model, prompt_tokens=prompt_tokens,
                     completion_tokens=usage.output_tokens, structured=structured,
                     finish_reason=_FINISH.get(str(message.stop_reason), message.stop_reason), extra=extra)

    def probe(self) -> None:
        """Retrieve the model's metadata: unreachable endpoint or unknown model → ModelError."""
        try:
            self._client.models.retrieve(self.model, timeout=min(self.config.timeout_s, 10.0))
        except anthropic.APIConnectionError as exc:
            raise ModelError(f"the model endpoint {self.base_url} is unreachable (needed for model "
                             f"{self.model!r}): {exc}") from exc
        except anthropic.NotFoundError as exc:
            raise ModelError(f"the endpoint {self.base_url} does not serve model {self.model!r}: "
                             f"{_detail(exc)}") from exc
        except anthropic.APIStatusError as exc:
            raise status_error(exc.status_code, _detail(exc), endpoint=f"{self.base_url}/v1/models",
                               model=self.model) from exc


def _detail(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc.message)
