"""The server's own model (distillation, rule abstraction), which must never stop the agent.

`sage run` refuses to start while its model cannot answer: the model writes every candidate.
Under `sage mcp` the coding agent writes them; the server's model is only needed when an operator
finishes. So its probe is a report (status shows it), not a gate, and a call made while the
endpoint is down waits for it -- probing every `POLL_S` for up to `WAIT_S` -- instead of failing
the finish. Errors a retry cannot fix (a bad key, a bad request) surface at once: they are
recognised by the endpoint answering its probe while the call fails.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sagekernel.errors import SageError
from sagekernel.models.registry import probe

#: How long a model call waits for an unreachable endpoint before failing (seconds).
WAIT_S = 900.0
#: How often it probes the endpoint meanwhile.
POLL_S = 10.0


class PatientModel:
    """A Model whose probe reports and whose calls wait out an unreachable endpoint."""

    def __init__(self, inner: Any, *, wait_s: float = WAIT_S, poll_s: float = POLL_S) -> None:
        self.inner, self.name = inner, inner.name
        self.wait_s, self.poll_s = wait_s, poll_s
        self.state, self.problem = "not probed", ""
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # the rest of the model's surface (config, log, ...)
        return getattr(self.inner, name)

    def report(self) -> dict[str, Any]:
        """For `status`: the model, whether it answered, and why not."""
        with self._lock:
            return {"name": self.name, "state": self.state, "problem": self.problem,
                    "used_for": "distillation and rule abstraction when an operator finishes"}

    def _set(self, state: str, problem: str = "") -> None:
        with self._lock:
            self.state, self.problem = state, problem

    def probe(self) -> None:
        try:
            probe(self.inner)
        except SageError as exc:
            self._set("unreachable", str(exc))
            return
        self._set("ready")

    def complete(self, messages: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                reply = self.inner.complete(messages, **kwargs)
            except SageError as exc:
                self.probe()
                if self.state == "ready" or time.monotonic() >= deadline:
                    raise  # the endpoint answers: the failure is the call's own; or waited enough
                self._set("unreachable", f"{exc} (waiting for it: distillation is pending)")
                time.sleep(self.poll_s)
                continue
            self._set("ready")
            return reply
