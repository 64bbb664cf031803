"""The runner's signals: SIGTERM as Ctrl-C, quiet cleanup after the first, and evaluation deadlines.

All of them act only in the main thread (Python delivers signals there); elsewhere (the MCP
server's run thread) they do nothing, and only the harness's own process limits apply.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from sagekernel.errors import SageError


class EvaluationTimeout(SageError):
    """An evaluation outlived its deadline (runner/config.py EVALUATION_ALLOWANCE): the operator
    fails with this reason and the stream goes on."""


@contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise EvaluationTimeout in this (main) thread after `seconds`. Elsewhere (the MCP server's
    run thread) signals cannot reach the thread, and only the harness's own limits apply."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: FrameType | None) -> None:
        raise EvaluationTimeout(f"{what} took longer than {seconds:.0f} s and was stopped (the task's "
                                "reference or inputs hang or are far too slow as the harness runs them)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run like Ctrl-C (recording what finished), when we are the main thread."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def shield_cleanup() -> Callable[[], None]:
    """Ignore further Ctrl-C/SIGTERM while a stopping run records what finished (a signal inside
    that cleanup would leave it marked running and print a traceback); returns the undo."""
    try:
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: signals are not delivered here
        return lambda: None

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
