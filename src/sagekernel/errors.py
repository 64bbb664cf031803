"""Typed errors whose message is meant for the user.

The CLI catches `SageError` and prints its message (no traceback). Anything else is a bug.
"""

from __future__ import annotations


class SageError(Exception):
    """Base class: an error with a message a user can act on."""


class WorkspaceError(SageError):
    """The workspace database is missing, locked, corrupted or from a newer schema."""


class TaskError(SageError):
    """A task file or task metadata is invalid."""


class ModelError(SageError):
    """The model endpoint failed in a way retries cannot fix (auth, bad request, context length)."""


class BudgetExhausted(SageError):
    """The run's token or cost budget is spent; the run stops cleanly."""


class RunLocked(SageError):
    """Another run is writing this workspace."""
