"""The embedded local model: llama.cpp (llama-cpp-python) in process, no server.

Weights: the verified GGUF from weights.py (or `ModelConfig.model_path`). The chat template is the
one stored in the GGUF (`create_chat_completion` with no chat_format). Threads: all usable cores
unless `ModelConfig.n_threads`. Context: `ModelConfig.n_ctx` (8192 by default: SAGE prompts are a
~1.5k-token stable prefix plus memory items, feedback and the reply).

Prefix reuse: llama-cpp-python keeps the KV cache of the previous call and, on the next call,
re-evaluates only the tokens after the longest common prefix — the agent's prompts share a long
stable start (instructions, target reference, resident rules, task), so each round computes only
the changing tail. `prefix_cache=False` resets the context before every call (the baseline of
benchmarks/bench_prefix_cache.py). `prompt_cache_mb > 0` adds llama_cpp's `LlamaRAMCache`, which
also restores saved states when prompts alternate between operators.

One instance per process: every LocalModel of a process with the same weights and settings shares
one loaded llama.cpp model and one lock (`_SHARED`), so several streams run as threads of one
process (sage experiment) load the weights once and take turns on the model -- a llama.cpp
context is not thread-safe. Their prompts alternate, so the prefix cache serves less of each.

Constrained decoding: a caller's `grammar` (GBNF, the agent's reply format from agent/grammar.py)
goes to llama.cpp's grammar engine, so every sampled token follows the format
(`ModelConfig.constrained_decoding`, on by default). It is checked on the likeliest tokens first
(models/local_grammar.py): llama-cpp-python's own grammar stage tests the whole vocabulary for
every token, 26 ms a token here.

`Reply.cached_tokens` (logged per call in the exchange log) is the number of prompt tokens served
from the cache: the common token prefix of this prompt and the tokens the context held before the
call (llama-cpp-python's own reuse rule: a fully cached prompt still replays its last token), or,
with the RAM cache on, what llama.cpp's counters show was not computed when that is more.
`Reply.extra` reports `tokens_per_s` (generation), `prompt_tokens_per_s`, `prompt_eval_tokens`
(tokens actually computed, from llama.cpp's performance counters) and `prompt_reused_tokens`
(= cached_tokens).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from sagekernel.errors import ModelError
from sagekernel.models.backend import BackendModel, Request
from sagekernel.models.base import Reply
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.models.local_grammar import ShortlistGrammar, sampler_chain
from sagekernel.models.retry import ContextLengthError
from sagekernel.models.weights import (
    DEFAULT_WEIGHTS,
    INSTALL_HINT,
    LocalModelUnavailable,
    WeightsSpec,
    ensure_weights,
)


def import_llama_cpp() -> ModuleType:
    try:
        import llama_cpp
    except ImportError as exc:
        raise LocalModelUnavailable(
            f"the embedded local model needs llama-cpp-python, which is not installed ({exc}); install it "
            f"with {INSTALL_HINT} (it builds llama.cpp from source: about 15 minutes on 2 cores)") from exc
    return llama_cpp


#: The process-wide llama.cpp instances: (path, n_ctx, n_threads, prompt_cache_mb) -> [llm, users].
_SHARED: dict[tuple[str, int, int, int, bool], list[Any]] = {}
#: One lock for every LocalModel of the process: calls on the one instance are serialised.
_PROCESS_LOCK = threading.Lock()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalModel(BackendModel):
    """Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) via llama.cpp, loaded on first use."""

    free = True

    def __init__(self, *, name: str = "local", config: ModelConfig | None = None,
                 log: ExchangeLog | None = None, budget: Budget | None = None,
                 weights: WeightsSpec = DEFAULT_WEIGHTS, **kwargs: Any) -> None:
        super().__init__(name, config=config, log=log, budget=budget, **kwargs)
        self.weights = weights
        self.n_threads = self.config.n_threads or usable_cores()
        self.load_s: float | None = None
        self.model_path: Path | None = None
        self.weight_repack: bool | None = None  # as loaded (ModelConfig.weight_repack, resolved)
        self._llm: Any = None
        self._key: tuple[str, int, int, int, bool] | None = None
        self._lock = _PROCESS_LOCK

    @property
    def decodes_under_grammar(self) -> bool:
        return self.config.constrained_decoding

    def probe(self) -> None:
        """The runtime imports and the weights are present and verified (assembling them if needed)."""
        import_llama_cpp()
        if self.config.model_path is not None:
            if not Path(self.config.model_path).is_file():
                raise ModelError(f"ModelConfig.model_path {self.config.model_path} does not exist")
            return
        ensure_weights(self.weights)

    def load(self) -> None:
        """Load the model now (otherwise the first `complete()` does); sets `load_s`."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._llm is not None:
            return
        llama_cpp = import_llama_cpp()
        started = time.perf_counter()
        path = Path(self.config.model_path) if self.config.model_path else ensure_weights(self.weights)
        repack = (self.config.weight_repack if self.config.weight_repack is not None
                  else not (cpu_has_amx() and build_has_amx(llama_cpp)))
        key = (str(path.resolve()), self.config.n_ctx, self.n_threads, self.config.prompt_cache_mb, repack)
        if key in _SHARED:  # another LocalModel of this process loaded it: share it
            _SHARED[key][1] += 1
            self._llm, self._key, self.model_path, self.weight_repack = _SHARED[key][0], key, path, repack
            self.load_s = 0.0
            return
        try:
            with _model_params(llama_cpp, use_extra_bufts=repack):
                llm = llama_cpp.Llama(model_path=str(path), n_ctx=self.config.n_ctx, n_threads=self.n_threads,
                                      n_threads_batch=self.n_threads, n_gpu_layers=0, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from exc
        if self.config.prompt_cache_mb:
            llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=self.config.prompt_cache_mb << 20))
        self._llm, self._key, self.model_path, self.weight_repack = llm, key, path, repack
        _SHARED[key] = [llm, 1]
        self.load_s = time.perf_counter() - started

    def clear_cache(self) -> None:
        """Forget the cached prompt state, so the next call computes its whole prompt."""
        with self._lock:
            if self._llm is not None:
                self._llm.reset()
                if self._llm.cache is not None:
                    self._llm.set_cache(type(self._llm.cache)(capacity_bytes=self._llm.cache.capacity_bytes))

    def close(self) -> None:
        """Let go of the shared instance; the last LocalModel using it frees it."""
        with self._lock:
            if self._llm is not None:
                shared = _SHARED.get(self._key) if self._key else None
                if shared is not None and shared[0] is self._llm:
                    shared[1] -= 1
                    if shared[1] <= 0:
                        del _SHARED[self._key]  # type: ignore[arg-type]
                        self._llm.close()
                else:
                    self._llm.close()
                self._llm, self._key = None, None

    def _complete_once(self, request: Request) -> Reply:
        with self._lock:
            first_call = self._llm is None
            self._load_locked()
            llm = self._llm
            if not self.config.prefix_cache:
                llm.reset()
            held = _held_tokens(llm)
            before = _perf(llm)
            started = time.perf_counter()
            try:
                grammar = request.grammar if self.config.constrained_decoding else None
                with _constrained(llm, grammar) as shortlist:
                    out = llm.create_chat_completion(
                        messages=[{"role": m.role, "content": m.content} for m in request.messages],
                        max_tokens=request.max_tokens, temperature=request.temperature,
                        repeat_penalty=self.config.repeat_penalty,
                        stop=list(request.stop) or None, seed=request.seed)
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise ContextLengthError(
                        f"the prompt does not fit the local model's context window (n_ctx="
                        f"{self.config.n_ctx}): {exc}. Shorten the prompt or raise ModelConfig.n_ctx."
                    ) from exc
                raise ModelError(f"the local model rejected the request: {exc}") from exc
            wall = time.perf_counter() - started
            after = _perf(llm)
            usage = out.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            prompt_ids = _held_tokens(llm)[:prompt_tokens]  # the context now holds prompt + reply
        choice = out["choices"][0]
        completion_tokens = int(usage.get("completion_tokens", 0))
        cached = reused_prefix(held, prompt_ids)
        extra: dict[str, Any] = {"n_threads": self.n_threads, "n_ctx": self.config.n_ctx,
                                 "prefix_cache": self.config.prefix_cache,
                                 "constrained": shortlist is not None}
        if shortlist is not None:
            extra["grammar_full_checks"] = shortlist.full_checks
        if first_call:
            extra.update(load_s=round(self.load_s or 0.0, 3), weight_repack=self.weight_repack)
        if before is not None and after is not None:
            p_eval = after["n_p_eval"] - before["n_p_eval"]
            t_p = (after["t_p_eval_ms"] - before["t_p_eval_ms"]) / 1000
            n_eval = after["n_eval"] - before["n_eval"]
            t_eval = (after["t_eval_ms"] - before["t_eval_ms"]) / 1000
            if self.config.prompt_cache_mb and p_eval < prompt_tokens:  # a saved state may have been restored
                cached = max(cached, prompt_tokens - max(int(p_eval), 1))
            extra.update(prompt_eval_tokens=p_eval, prompt_reused_tokens=cached,
                         prompt_eval_s=round(t_p, 4), generation_s=round(t_eval, 4),
                         prompt_tokens_per_s=round(p_eval / t_p, 1) if t_p > 0 else None,
                         tokens_per_s=round(n_eval / t_eval, 1) if t_eval > 0 else None)
        else:
            extra["tokens_per_s"] = round(completion_tokens / wall, 1) if wall > 0 else None
        return Reply(text=choice["message"].get("content") or "", model=self._model_id(),
                     prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, latency_s=wall,
                     finish_reason=choice.get("finish_reason"), cached_tokens=cached, extra=extra)

    def _model_id(self) -> str:
        return self.weights.filename if self.config.model_path is None else Path(self.config.model_path).name


def check_grammar(llm: Any, text: str) -> None:
    """ModelError unless llama.cpp parses `text` as a GBNF grammar over this model's vocabulary
    (llama-cpp-python does not check: a grammar it cannot parse would reach the sampler chain
    as a null sampler)."""
    _grammar_stage(llm, text).close()


def _grammar_stage(llm: Any, text: str) -> ShortlistGrammar:
    try:
        return ShortlistGrammar(import_llama_cpp(), llm._model.vocab, text)
    except ValueError as exc:
        raise ModelError("llama.cpp cannot parse the reply grammar (its log above says why):\n"
                         f"{text[:800]}") from exc


@contextmanager
def _constrained(llm: Any, grammar: str | None) -> Iterator[ShortlistGrammar | None]:
    """While a call runs, llama-cpp-python builds its sampler chain with the grammar as a
    shortlist-first stage (models/local_grammar.py) instead of its own full-vocabulary one."""
    if grammar is None:
        yield None
        return
    llama_cpp = import_llama_cpp()
    stage = _grammar_stage(llm, grammar)

    def init_sampler(**kw: Any) -> Any:  # the keywords of Llama._init_sampler
        return sampler_chain(llama_cpp, llm, stage, temperature=kw.get("temp", 0.8), seed=llm._seed,
                             repeat_penalty=kw.get("repeat_penalty", 1.0), top_k=kw.get("top_k", 40),
                             top_p=kw.get("top_p", 0.95), min_p=kw.get("min_p", 0.05),
                             typical_p=kw.get("typical_p", 1.0))

    llm._init_sampler = init_sampler  # an instance attribute: shadows the method for this call
    try:
        yield stage
    finally:
        del llm._init_sampler
        llm._sampler = None  # the chain goes (without freeing the stage, which it does not own)
        stage.close()


def cpu_has_amx() -> bool:
    """The CPU advertises AMX tiles (Linux /proc/cpuinfo; False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            return any(line.startswith("flags") and " amx_tile" in line for line in info)
    except OSError:
        return False


def build_has_amx(llama_cpp: ModuleType) -> bool:
    """This llama.cpp build has AMX kernels (its system info lists AMX_INT8 = 1)."""
    try:
        info = llama_cpp.llama_print_system_info()
    except Exception:
        return False
    return "AMX_INT8 = 1" in (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info))


@contextmanager
def _model_params(llama_cpp: ModuleType, **fields: Any) -> Iterator[None]:
    """Model parameters `Llama()` has no argument for, set on the defaults it starts from."""
    low = llama_cpp.llama_cpp
    default = low.llama_model_default_params

    def patched() -> Any:
        params = default()
        for name, value in fields.items():
            if hasattr(params, name):
                setattr(params, name, value)
        return params

    low.llama_model_default_params = patched
    try:
        yield
    finally:
        low.llama_model_default_params = default


def reused_prefix(held: list[int], prompt: list[int]) -> int:
    """Prompt tokens llama-cpp-python takes from the KV cache that holds `held`: their common prefix,
    less one when it is the whole prompt (the last prompt token is replayed to get fresh logits)."""
    n = 0
    for a, b in zip(held, prompt, strict=False):
        if a != b:
            break
        n += 1
    return n - 1 if prompt and n == len(prompt) else n


def _held_tokens(llm: Any) -> list[int]:
    """The token ids the context's KV cache holds now."""
    try:
        return [int(t) for t in llm.input_ids[: llm.n_tokens]]
    except (AttributeError, TypeError):
        return []


def _perf(llm: Any) -> dict[str, float] | None:
    """llama.cpp's cumulative performance counters for this context (None if unavailable)."""
    try:
        import llama_cpp

        data = llama_cpp.llama_perf_context(llm._ctx.ctx)
    except Exception:
        return None
    return {"n_p_eval": data.n_p_eval, "t_p_eval_ms": data.t_p_eval_ms,
            "n_eval": data.n_eval, "t_eval_ms": data.t_eval_ms}
