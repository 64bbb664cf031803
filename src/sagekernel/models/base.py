"""The model interface: one call, `complete(messages, ...) -> Reply`.

Only models/ imports an LLM SDK or runtime. Backends are chosen by a spec string
(`openai:<model>@<base_url>`, `anthropic:<model>`, `local`, `scripted:<file>`), see registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class OutputSchema:
    """A structured answer a caller asks for, carried by the backend's own mechanism: OpenAI-style
    `response_format: json_schema` (the whole reply is the JSON), Anthropic tool use (a tool call
    next to the text; `force` makes the call the whole reply). A backend without a mechanism
    (`structured_output` None) never receives one."""

    name: str
    description: str
    schema: dict[str, Any]  # a JSON schema of an object
    force: bool = True  # False: the model may write text and call the tool in one reply (tool use)


#: How a backend returns an `OutputSchema` answer: "json_schema" (the reply's content is the JSON),
#: "tool" (a tool call beside the text) or None (no mechanism: prose, or the embedded grammar).
StructuredOutput = Literal["json_schema", "tool"]


@dataclass
class Reply:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    cost_usd: float | None = None  # None when the backend cannot price it
    #: Of prompt_tokens, how many came from a prefix cache (None: the backend does not say).
    cached_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # raw provider details
    #: The JSON text the backend's structured-output mechanism returned for an `OutputSchema`
    #: (the tool call's input; the content under json_schema). None: no structured answer.
    structured: str | None = None


@runtime_checkable
class Model(Protocol):
    """A frozen LLM. Implementations retry transient failures themselves and log every exchange."""

    name: str

    def complete(self, messages: list[Message], *, max_tokens: int = 2048, temperature: float = 0.2,
                 stop: list[str] | None = None, seed: int | None = None,
                 grammar: str | None = None, output_schema: OutputSchema | None = None) -> Reply:
        """`grammar`: a GBNF grammar (llama.cpp's format) the reply must follow. A backend that can
        constrain decoding to it does (the embedded model, a llama.cpp server with
        `ModelConfig.grammar_field`); the others ignore it, so callers still check the reply.
        `output_schema`: a structured answer, for backends whose `structured_output` is set."""
        ...
