"""The non-happy paths of the agent loop, as typed exceptions that carry their own message.

Everything that ends a round or an operator early is one of these. `ReplyIncomplete` never leaves
a round: the loop (agent/loop.py) catches it (as the gate's `IncompleteReply`, which carries the
gate's outcome) and turns it into a PARSE-stage verdict that spends the round (spec §2,
trace-completeness gate).
"""

from __future__ import annotations

from sagekernel.errors import SageError


class AgentStop(SageError):
    """Base: the agent stopped doing what it was doing, for the reason in the message."""


class ReplyIncomplete(AgentStop):
    """After the bounded re-asks the reply still has no usable kernel source."""


class RunInterrupted(AgentStop):
    """The user pressed Ctrl-C (or the process got SIGTERM); what finished is recorded."""

    def __init__(self, message: str = "interrupted by the user; rerun the same command to resume") -> None:
        super().__init__(message)
        self.summary: object = None  # the runner attaches the RunSummary of what finished
