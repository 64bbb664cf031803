"""Which model failures are retried, and how long to wait between attempts.

The rule (style.md lesson 4): transient failures — timeouts, connection errors, HTTP 408/409/425/429
and 5xx — are retried with exponential backoff and full jitter, honouring `Retry-After` (bounded);
failures a retry cannot fix — auth (401/403), bad request (400/422), not found (404) and context
length — are never retried and surface as `ModelError` with a message that says what to do.

Backends translate their client's exceptions into `TransientError` or `ModelError`; the retry loop
in `backend.py` is the only place that sleeps.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from dataclasses import dataclass

from sagekernel.errors import ModelError

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_CONTEXT_PATTERNS = re.compile(
    r"context[ _-]?length|context window|maximum context|context size|too many tokens|"
    r"prompt is too long|input is too long|exceeds the available context|reduce the length",
    re.IGNORECASE,
)


class TransientError(Exception):
    """A failure worth retrying. `retry_after_s` is the server's hint, if it gave one."""

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class ContextLengthError(ModelError):
    """The prompt does not fit the model's context window (never retried)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    """Retries after the first attempt (0: a single attempt)."""
    base_delay_s: float = 1.0
    """Delay before the first retry; doubles each retry."""
    max_delay_s: float = 30.0
    """Upper bound of the exponential backoff."""
    max_retry_after_s: float = 60.0
    """Upper bound on a server's Retry-After hint (a larger hint is capped, not obeyed)."""

    def delay(self, retry_number: int, retry_after_s: float | None = None,
              rng: random.Random | None = None) -> float:
        """Seconds to wait before retry `retry_number` (1-based).

        With a Retry-After hint: the hint (capped), plus a little jitter so that many workers do not
        return in lockstep. Without: full jitter over [backoff/2, backoff], backoff = base·2^(n-1).
        """
        rng = rng or random.Random()
        if retry_after_s is not None and retry_after_s >= 0:
            hint = min(retry_after_s, self.max_retry_after_s)
            return hint + rng.uniform(0, min(1.0, self.base_delay_s) * 0.1)
        backoff = min(self.max_delay_s, self.base_delay_s * (2 ** (retry_number - 1)))
        return rng.uniform(backoff / 2, backoff)


def parse_retry_after(headers: object) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (delta-seconds or HTTP date); None if absent/bad."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def is_context_error(detail: str) -> bool:
    """Whether an error text says the prompt does not fit the context window."""
    return _CONTEXT_PATTERNS.search(detail) is not None


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def status_error(status: int, detail: str, *, endpoint: str, model: str,
                 retry_after_s: float | None = None) -> Exception:
    """The exception for an HTTP error status: `TransientError` to retry, `ModelError` to stop."""
    detail = detail.strip()[:500] or "(no detail)"
    if status == 429 or (is_retryable_status(status) and not _CONTEXT_PATTERNS.search(detail)):
        return TransientError(f"HTTP {status} from {endpoint}: {detail}", status=status,
                              retry_after_s=retry_after_s)
    if _CONTEXT_PATTERNS.search(detail) or status == 413:
        return ContextLengthError(
            f"the prompt does not fit the context window of {model!r} at {endpoint} (HTTP {status}): "
            f"{detail}. "
            "Shorten the prompt (fewer retrieved items / rules) or use a model with a larger context.")
    if status in (401, 403):
        return ModelError(
            f"{endpoint} refused the credentials for {model!r} (HTTP {status}): {detail}. "
            "Check the API key (ModelConfig.api_key_env names the variable that holds it).")
    if status == 404:
        return ModelError(f"{endpoint} has no model {model!r} or no such route (HTTP 404): {detail}. "
                          "Check the model name and that the base URL ends in /v1 where the server needs it.")
    return ModelError(f"{endpoint} rejected the request for {model!r} (HTTP {status}): {detail}")
