"""The embedded local model, really loaded (`-m local`; needs `pip install -e '.[local]'`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.models import ExchangeLog, Message, ModelConfig, make_model, probe
from sagekernel.models.exchange_log import list_exchanges
from sagekernel.models.local import LocalModel
from sagekernel.models.weights import ensure_weights

pytestmark = pytest.mark.local


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The real weights, assembled from the installed parts and verified once for this module."""
    path = ensure_weights(cache_dir=tmp_path_factory.mktemp("weights"))
    yield path
    path.unlink()  # 1.1 GB: do not leave it in pytest's kept temp dirs


SYSTEM = ("You are an expert C programmer. Answer with code only, in one ```c block, no explanation. "
          "Rules: use restrict pointers; no dynamic allocation; loops over int64_t indices. ") * 4


def test_local_model_answers_a_one_shot_prompt_and_reuses_the_prefix(workspace: Path, gguf: Path) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="local-test")
    model = make_model("local", config=ModelConfig(n_ctx=2048, model_path=gguf), log=log)
    probe(model)  # runtime importable, weights present
    question = "Write a C function `void add(const float* a, const float* b, float* out, int64_t n)`."
    reply = model.complete([Message("system", SYSTEM), Message("user", question)],
                           max_tokens=96, temperature=0.0, seed=1)
    assert "add" in reply.text and "for" in reply.text
    assert reply.prompt_tokens > 50 and 0 < reply.completion_tokens <= 96
    assert reply.extra["tokens_per_s"] > 0 and reply.extra["load_s"] > 0 and reply.cost_usd == 0.0
    assert reply.model == gguf.name

    again = model.complete([Message("system", SYSTEM), Message("user", question + " Use a while loop.")],
                           max_tokens=8, temperature=0.0, seed=1)
    # the system prompt and the start of the question come from the KV cache, not recomputed
    assert again.extra["prompt_reused_tokens"] > reply.prompt_tokens // 2
    assert again.extra["prompt_eval_tokens"] < again.prompt_tokens // 2
    assert [e.status for e in list_exchanges(log.conn, run_id="local-test")] == ["ok", "ok"]

    assert isinstance(model, LocalModel)
    model.clear_cache()  # what prefix_cache=False does before every call
    cold = model.complete([Message("system", SYSTEM), Message("user", question)], max_tokens=1,
                          temperature=0.0)
    assert cold.extra["prompt_eval_tokens"] >= cold.prompt_tokens - 1


def test_ram_prompt_cache_restores_alternating_prompts(gguf: Path) -> None:
    model = make_model("local", config=ModelConfig(n_ctx=1024, prompt_cache_mb=256, model_path=gguf))
    a = [Message("system", SYSTEM), Message("user", "Operator A: relu.")]
    b = [Message("system", "Unrelated short system prompt."), Message("user", "Operator B: gelu.")]
    model.complete(a, max_tokens=1, temperature=0.0)
    model.complete(b, max_tokens=1, temperature=0.0)  # evicts A's prefix from the live KV cache
    again = model.complete(a, max_tokens=1, temperature=0.0)
    assert again.extra["prompt_reused_tokens"] > again.prompt_tokens // 2  # restored from the RAM cache


def test_cached_tokens_are_the_reused_prefix_and_are_logged(workspace: Path, gguf: Path) -> None:
    log = ExchangeLog(db.connect(workspace), run_id="local-cache")
    model = make_model("local", config=ModelConfig(n_ctx=2048, model_path=gguf), log=log)
    first = model.complete([Message("system", SYSTEM), Message("user", "Operator A: relu.")], max_tokens=4,
                           temperature=0.0, seed=1)
    again = model.complete([Message("system", SYSTEM), Message("user", "Operator B: gelu.")], max_tokens=4,
                           temperature=0.0, seed=1)
    assert first.cached_tokens == 0  # a fresh context holds nothing
    assert again.cached_tokens is not None and again.cached_tokens > again.prompt_tokens // 2
    # what was not reused was computed (llama.cpp's own counter; a 1-token tail counts as generation)
    assert abs(again.prompt_tokens - again.cached_tokens - again.extra["prompt_eval_tokens"]) <= 1
    logged = [e.cached_tokens for e in reversed(list_exchanges(log.conn, run_id="local-cache"))]
    assert logged == [first.cached_tokens, again.cached_tokens]
