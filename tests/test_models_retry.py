"""The retry policy's arithmetic and the classification of HTTP failures."""

from __future__ import annotations

import random
import time
from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from sagekernel.errors import ModelError
from sagekernel.models.retry import (
    ContextLengthError,
    RetryPolicy,
    TransientError,
    parse_retry_after,
    status_error,
)


@given(retry=st.integers(1, 30), base=st.floats(0.01, 5), cap=st.floats(0.01, 60), seed=st.integers(0, 2**32))
def test_backoff_is_jittered_exponential_and_capped(retry: int, base: float, cap: float, seed: int) -> None:
    policy = RetryPolicy(base_delay_s=base, max_delay_s=cap)
    backoff = min(cap, base * 2 ** (retry - 1))
    delay = policy.delay(retry, None, random.Random(seed))
    assert backoff / 2 <= delay <= backoff


@given(hint=st.floats(0, 1e6), bound=st.floats(0.1, 600))
def test_retry_after_is_obeyed_up_to_its_bound(hint: float, bound: float) -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_retry_after_s=bound)
    delay = policy.delay(1, hint, random.Random(0))
    assert min(hint, bound) <= delay <= min(hint, bound) + 0.1


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = parse_retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert future is not None and 27 <= future <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


def test_classification() -> None:
    def classify(status: int, detail: str) -> Exception:
        return status_error(status, detail, endpoint="http://h/v1/chat/completions", model="m")

    for status in (408, 409, 425, 429, 500, 502, 503, 504, 529):
        assert isinstance(classify(status, "busy"), TransientError), status
    assert isinstance(classify(429, "too many tokens per minute"), TransientError)
    for status in (400, 401, 403, 404, 422):
        err = classify(status, "nope")
        assert isinstance(err, ModelError) and not isinstance(err, ContextLengthError), status
    assert isinstance(classify(400, "maximum context length is 8192 tokens"), ContextLengthError)
    assert isinstance(classify(500, "input exceeds the available context size"), ContextLengthError)
    assert isinstance(classify(413, "payload too large"), ContextLengthError)
