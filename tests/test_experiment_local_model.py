"""The embedded model is one process-wide instance: two LocalModels of one process (two streams
run as threads of one experiment worker) share one loaded llama.cpp model and one lock, and can
call it from two threads at once. Needs '.[local]' (marker `local`)."""

from __future__ import annotations

import threading

import pytest

from sagekernel.models import local
from sagekernel.models.base import Message
from sagekernel.models.config import ModelConfig

pytestmark = pytest.mark.local


def test_two_local_models_in_one_process_share_one_instance_and_take_turns() -> None:
    pytest.importorskip("llama_cpp", reason="the embedded model needs '.[local]'")
    config = ModelConfig(n_ctx=1024)
    a, b = local.LocalModel(config=config), local.LocalModel(config=config)
    try:
        a.probe()
    except Exception as exc:  # weights not installed
        pytest.skip(f"the embedded model is not available: {exc}")
    replies: dict[str, str] = {}

    def ask(name: str, model: local.LocalModel) -> None:
        reply = model.complete([Message("user", "Say OK.")], max_tokens=4, temperature=0.0)
        replies[name] = reply.text

    threads = [threading.Thread(target=ask, args=(n, m)) for n, m in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(replies) == {"a", "b"}
    assert a._llm is b._llm is not None  # one loaded model
    assert a._lock is b._lock  # one lock: calls on it are serialised
    assert len(local._SHARED) == 1 and next(iter(local._SHARED.values()))[1] == 2
    a.close()
    assert b._llm is not None and next(iter(local._SHARED.values()))[1] == 1
    b.complete([Message("user", "Say OK.")], max_tokens=2, temperature=0.0)  # still usable
    b.close()
    assert local._SHARED == {}
