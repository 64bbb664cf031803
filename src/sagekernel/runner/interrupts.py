"""The runner's signals: SIGTERM as Ctrl-C, quiet cleanup after the first, and evaluation deadlines.

The signal handlers act only in the main thread (Python delivers signals there). The evaluation
deadline works in any thread: in the main thread by SIGALRM (which also interrupts a blocking
system call), elsewhere (`sage mcp`'s run thread) by a watchdog (sagekernel/watchdog.py), which
also stops the threads the evaluation handed task code to.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from sagekernel import watchdog
from sagekernel.errors import SageError


class EvaluationTimeout(SageError):
    """An evaluation outlived its deadline (runner/config.py EVALUATION_ALLOWANCE): the operator
    fails with this reason and the stream goes on."""


def _timeout_error(seconds: float, what: str) -> Callable[[], EvaluationTimeout]:
    message = (f"{what} took longer than {seconds:.0f} s and was stopped (the task's reference or "
               "inputs hang or are far too slow as the harness runs them)")
    return lambda: EvaluationTimeout(message)


@contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise EvaluationTimeout in this thread after `seconds`, and stop the threads it handed task
    code to (the harness's planner): by SIGALRM in the main thread (it also interrupts a blocking
    system call), by a watchdog elsewhere (sagekernel/watchdog.py). Python code is stopped at
    once; a single native call (one huge torch operation) when it returns."""
    error = _timeout_error(seconds, what)
    main = threading.current_thread() is threading.main_thread()
    try:
        with watchdog.watching(watchdog.Watchdog(seconds, cover_caller=not main)) as dog:
            if main:
                with _alarm(seconds, error):
                    yield
            else:
                yield
    except watchdog.Expired:
        raise error() from None
    if dog.fired:  # the time ran out as the block ended, or a thread it handed work to was stopped
        raise error()


@contextmanager
def _alarm(seconds: float, error: Callable[[], EvaluationTimeout]) -> Iterator[None]:
    def expired(signum: int, frame: FrameType | None) -> None:
        raise error()

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
