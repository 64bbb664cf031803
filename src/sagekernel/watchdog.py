"""Stopping Python code at a deadline in any thread, and in the threads it hands work to.

A signal (SIGALRM) reaches only the main thread, and only the thread that runs the task's code can
be stopped by raising in it: `sage mcp` evaluates on a worker thread, and the harness computes the
task's reference on a planner thread of its own (harness/evaluate.py `_Planner`). A `Watchdog`
raises `Expired` in every thread it covers once its time is up (`PyThreadState_SetAsyncExc`), then
again every `REPEAT_S` while they run on. `Expired` is a BaseException, so the task's code and the
harness's `except Exception` handlers (which turn a reference's error into a fallback or a verdict)
let it through; whoever set the deadline turns it into its own error. A thread that works for a
covered one joins its watchdog with `covering(inherited())`.

Python code is stopped at its next bytecode; a single native call (one huge torch operation, a
blocking lock) is stopped when it returns. Raising and disarming hold one lock, so nothing is
raised in a thread after the watchdog was disarmed or the thread left it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds between repeated raises: long enough for the harness's own cleanup (killing its
#: sandboxes) to finish between two.
REPEAT_S = 10.0

_local = threading.local()


class Expired(BaseException):
    """Raised in a covered thread when its watchdog's time is up (not an Exception: see above)."""


class Watchdog:
    """Raises `Expired` in the covered threads `seconds` after `start`, until `disarm`."""

    error = Expired

    def __init__(self, seconds: float, *, cover_caller: bool) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.threads: set[int] = {threading.get_ident()} if cover_caller else set()
        self.armed = True
        self.fired = False
        self.stopped = threading.Event()
        self._timer = threading.Thread(target=self._watch, name="sage-deadline", daemon=True)

    def start(self) -> None:
        self._timer.start()

    def _watch(self) -> None:
        wait = self.seconds
        while not self.stopped.wait(wait):
            self.fire()
            wait = REPEAT_S

    def fire(self, *, others_only: bool = False) -> None:
        """Raise the error in every covered thread now (`others_only`: but the caller; nothing
        once disarmed)."""
        with self.lock:
            if not self.armed:
                return
            for thread in self.threads:
                if not (others_only and thread == threading.get_ident()):
                    _raise_in(thread, self.error)
            self.fired = True

    def disarm(self) -> None:
        """No more raises; one scheduled in the calling thread but not yet delivered is cancelled."""
        with self.lock:
            self.armed = False
            if self.fired and threading.get_ident() in self.threads:
                _raise_in(threading.get_ident(), None)
        self.stopped.set()

    def join(self) -> None:
        with self.lock:
            if self.armed:
                self.threads.add(threading.get_ident())
            if self.fired and self.armed:  # it is already over: this work stops at once
                _raise_in(threading.get_ident(), self.error)

    def leave(self) -> None:
        with self.lock:
            self.threads.discard(threading.get_ident())
            if self.fired:
                _raise_in(threading.get_ident(), None)


def _raise_in(thread_id: int, error: type[BaseException] | None) -> None:
    """Schedule `error` in thread `thread_id` (None: cancel one scheduled)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(error) if error is not None else None)


def inherited() -> Watchdog | None:
    """The watchdog covering the calling thread (hand it to a thread that works for this one)."""
    return getattr(_local, "watchdog", None)


@contextmanager
def watching(watchdog: Watchdog) -> Iterator[Watchdog]:
    """Run the block under `watchdog` (started here, disarmed on exit); threads started inside it
    find it through `inherited()`."""
    previous = inherited()
    _local.watchdog = watchdog
    watchdog.start()
    try:
        yield watchdog
    except BaseException:  # the block stops (its deadline, Ctrl-C): what it handed out stops too
        watchdog.fire(others_only=True)
        raise
    finally:
        _local.watchdog = previous
        while True:  # a raise that lands inside the disarming itself: disarm again
            try:
                watchdog.disarm()
                break
            except watchdog.error:
                continue


@contextmanager
def covering(watchdog: Watchdog | None) -> Iterator[None]:
    """This thread works for one `watchdog` covers: it is stopped with it (None: nothing)."""
    if watchdog is None:
        yield
        return
    _local.watchdog = watchdog
    try:
        watchdog.join()
        yield
    finally:
        _local.watchdog = None
        while True:
            try:
                watchdog.leave()
                break
            except watchdog.error:
                continue
