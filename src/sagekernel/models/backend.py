"""What every backend shares: budget check, retry loop, cost, and logging of each attempt.

A backend subclasses `BackendModel` and implements `_complete_once(request) -> Reply`, raising
`TransientError` for what a retry may fix and `ModelError` for what it cannot (see retry.py), plus
`probe()`. `complete()` here is the `Model.complete` of the shared interface.
"""

from __future__ import annotations

import dataclasses
import random
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sagekernel.errors import ModelError, SageError
from sagekernel.models.base import Message, OutputSchema, Reply, StructuredOutput
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.models.retry import TransientError

_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Request:
    """One completion request, as a backend receives it."""

    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float
    stop: tuple[str, ...]
    seed: int | None
    grammar: str | None = None  # GBNF the reply must follow (see base.Model.complete)
    output_schema: OutputSchema | None = None  # a structured answer (see base.OutputSchema)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": self.temperature,
                                  "stop": list(self.stop), "seed": self.seed}
        if self.grammar is not None:
            params["grammar"] = self.grammar
        if self.output_schema is not None:
            params["output_schema"] = {"name": self.output_schema.name, "force": self.output_schema.force,
                                       "schema": self.output_schema.schema}
        return params


class BackendModel(ABC):
    """Base of the real `Model` implementations (openai, anthropic, local, scripted)."""

    name: str
    free: bool = False  # True: every call costs $0 (local and scripted models)
    #: The structured-output mechanisms this backend has (ModelConfig.structured_output values).
    structured_mechanisms: tuple[StructuredOutput, ...] = ()

    def __init__(self, name: str, *, config: ModelConfig | None = None, log: ExchangeLog | None = None,
                 budget: Budget | None = None, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        self.name = name
        self.config = config or ModelConfig()
        self.log = log
        self.budget = budget
        self._sleep = sleep
        self._rng = rng or random.Random()
        chosen = self.config.structured_output
        if chosen not in (None, "none") and chosen not in self.structured_mechanisms:
            raise SageError(f"{name}: structured_output={chosen!r} is not a mechanism of this backend "
                            f"(it has: {', '.join(self.structured_mechanisms) or 'none'}); use 'none' "
                            "for the canonical line form")
        if (budget is not None and budget.max_cost_usd is not None and not self.free
                and not self.config.priced):
            raise SageError(
                f"a cost budget (${budget.max_cost_usd}) is set for {name!r} but its price is unknown; "
                "set ModelConfig.price_input_per_mtok and price_output_per_mtok, or use a token budget")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def structured_output(self) -> StructuredOutput | None:
        """How this backend returns an `OutputSchema` answer (base.StructuredOutput); None: it has
        no mechanism, and callers ask in prose (or under a grammar). Backends override."""
        return None

    @property
    def decodes_under_grammar(self) -> bool:
        """True when a `grammar` passed to `complete` constrains the reply (the embedded model, a
        llama.cpp server with `grammar_field`); the trace then records the channel as "grammar"."""
        return False

    # -- the Model interface -----------------------------------------------------------------
    def complete(self, messages: list[Message], *, max_tokens: int = 2048, temperature: float = 0.2,
                 stop: list[str] | None = None, seed: int | None = None, grammar: str | None = None,
                 output_schema: OutputSchema | None = None, tags: Mapping[str, Any] | None = None) -> Reply:
        """One completion, retried on transient failures; every attempt is logged.

        Raises `BudgetExhausted` before sending anything once the budget is spent, `ModelError`
        on a failure retries cannot fix or once retries are used up.
        """
        request = _request(messages, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed,
                           grammar=grammar)
        if output_schema is not None:
            if self.structured_output is None:
                raise ModelError(f"{self.name} has no structured-output mechanism; ask in prose instead")
            request = dataclasses.replace(request, output_schema=output_schema)
        if self.budget is not None:
            self.budget.check()
        params = {**request.params(), **self._logged_params()}
        call_id = uuid.uuid4().hex
        policy = self.config.retry_policy()
        attempts = policy.max_retries + 1
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            try:
                reply = self._complete_once(request)
            except TransientError as exc:
                elapsed = time.perf_counter() - started
                if attempt == attempts:
                    message = f"{self.name}: gave up after {attempt} attempts: {exc}"
                    self._log(call_id, attempt, "error", request, params, error=message, latency_s=elapsed,
                              tags=tags)
                    raise ModelError(message) from exc
                delay = policy.delay(attempt, exc.retry_after_s, self._rng)
                self._log(call_id, attempt, "retry", request, params, latency_s=elapsed, tags=tags,
                          error=f"{exc} (retry {attempt}/{policy.max_retries} in {delay:.2f}s)")
                self._sleep(delay)
                continue
            except ModelError as exc:
                self._log(call_id, attempt, "error", request, params, error=str(exc),
                          latency_s=time.perf_counter() - started, tags=tags)
                raise
            except Exception as exc:  # a bug in a client library or backend: logged, then re-raised
                self._log(call_id, attempt, "error", request, params, latency_s=time.perf_counter() - started,
                          error=f"{type(exc).__name__}: {exc}", tags=tags)
                raise
            if not reply.latency_s:
                reply.latency_s = time.perf_counter() - started
            if reply.cost_usd is None:
                reply.cost_usd = 0.0 if self.free else self.config.cost(reply.prompt_tokens,
                                                                         reply.completion_tokens)
            reply.extra.setdefault("attempts", attempt)
            self._log(call_id, attempt, "ok", request, params, reply=reply, tags=tags)
            if self.budget is not None:
                self.budget.charge(reply)
                if self.budget.exhausted:
                    reply.extra["budget_exhausted"] = self.budget.exhausted
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    @abstractmethod
    def _complete_once(self, request: Request) -> Reply:
        """Send one request; raise TransientError (retry) or ModelError (stop)."""

    @abstractmethod
    def probe(self) -> None:
        """A cheap check that the endpoint is reachable and serves this model; ModelError if not."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release clients / model memory (idempotent)."""

    def __enter__(self) -> BackendModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------------------------
    def _logged_params(self) -> dict[str, Any]:
        return {"extra_body": self.config.extra_body} if self.config.extra_body else {}

    def _log(self, call_id: str, attempt: int, status: str, request: Request, params: dict[str, Any], *,
             reply: Reply | None = None, error: str | None = None, latency_s: float | None = None,
             tags: Mapping[str, Any] | None = None) -> None:
        if self.log is None:
            return
        self.log.record(call_id=call_id, attempt=attempt, status=status, model_spec=self.name,
                        messages=request.messages, params=params, reply=reply, error=error,
                        latency_s=latency_s, tags=tags)


def _request(messages: Sequence[Message], *, max_tokens: int, temperature: float,
             stop: Sequence[str] | None, seed: int | None, grammar: str | None = None) -> Request:
    if not messages:
        raise ModelError("complete() needs at least one message")
    for m in messages:
        if not isinstance(m, Message) or m.role not in _ROLES:
            raise ModelError(f"not a chat message: {m!r} (use sagekernel.models.base.Message with role "
                             "system | user | assistant)")
    if max_tokens < 1:
        raise ModelError(f"max_tokens must be at least 1, got {max_tokens}")
    if temperature < 0:
        raise ModelError(f"temperature must be >= 0, got {temperature}")
    if grammar is not None and not grammar.strip():
        raise ModelError("grammar must be a non-empty GBNF text or None")
    return Request(tuple(messages), max_tokens, float(temperature), tuple(stop or ()), seed, grammar)


def estimate_tokens(text: str) -> int:
    """A rough token count (≈4 characters per token) for servers that report no usage."""
    return (len(text) + 3) // 4
