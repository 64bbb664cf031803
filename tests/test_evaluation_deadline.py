"""The runner bounds what runs in its own process: an evaluation that outlives its deadline (a task
reference that hangs only in float64, as the harness runs it, while `sage tasks check` says ok)
fails its operator with the reason, and the stream goes on instead of blocking forever."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from openai_server import OpenAITestServer
from sagekernel import watchdog
from sagekernel.harness.config import HarnessConfig
from sagekernel.runner.config import evaluation_deadline_s
from sagekernel.runner.interrupts import EvaluationTimeout, deadline
from sagekernel.runner.run import run
from test_e2e_run import FAST, TASKS, Script, config, prepare


def test_a_deadline_stops_a_python_loop_and_leaves_no_timer() -> None:
    started = time.monotonic()
    with pytest.raises(EvaluationTimeout, match="took longer than"), deadline(0.3, "spinning"):
        while True:
            pass
    assert time.monotonic() - started < 5
    with deadline(5, "quick"):
        pass
    time.sleep(0.1)  # no alarm left armed to fire later


def test_the_deadline_is_above_every_harness_limit() -> None:
    h = HarnessConfig()
    assert evaluation_deadline_s(h) > h.build_timeout_s + h.start_timeout_s + h.timing_timeout_s


HANGS_IN_FLOAT64 = (
    (TASKS / "e2e_double.py")
    .read_text()
    .replace(
        "        return x * 2.0",
        "        while x.dtype == torch.float64:\n            pass\n        return x * 2.0",
    )
)


@pytest.mark.slow
def test_a_reference_that_hangs_only_in_the_harness_fails_its_operator(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "e2e_double.py").write_text(HANGS_IN_FLOAT64)
    shutil.copy(TASKS / "e2e_negate.py", suite / "e2e_negate.py")
    ws = tmp_path / "ws"
    prepare(ws)
    harness = {
        **FAST,
        "build_timeout_s": 5.0,
        "start_timeout_s": 2.0,
        "timing_timeout_s": 2.0,
        "call_timeout_s": 0.5,
    }
    with OpenAITestServer(fallback=Script()) as srv:
        cfg = config(ws, srv, harness=harness).model_copy(update={"suite": str(suite)})
        summary = run(cfg)
    errors = {r["operator"]: r["error"] for r in summary.results}
    assert summary.status == "finished" and summary.done == 2
    assert "took longer than" in (errors["e2e_double"] or "") and errors["e2e_negate"] is None


def _in_a_thread(body: Callable[[], None]) -> BaseException | None:
    caught: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # the test inspects what reached the thread
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    return caught[0] if caught else None


def test_off_the_main_thread_a_watchdog_keeps_the_deadline() -> None:
    """`sage mcp` evaluates on its run thread, where SIGALRM cannot reach."""
    def spin() -> None:
        with deadline(0.3, "spinning"):
            while True:
                pass

    started = time.monotonic()
    stopped = _in_a_thread(spin)
    assert isinstance(stopped, EvaluationTimeout) and "spinning took longer than" in str(stopped)
    assert time.monotonic() - started < 5

    def quick_then_on() -> None:
        with deadline(0.3, "quick"):
            pass
        time.sleep(0.6)  # past the deadline: nothing may be raised here any more

    assert _in_a_thread(quick_then_on) is None
    time.sleep(0.1)
    assert not [t for t in threading.enumerate() if t.name == "sage-deadline"]


def _hands_off_a_swallowing_loop(stopped: list[BaseException], helpers: list[threading.Thread]) -> None:
    """Inside a deadline, hand task code to another thread (as the harness's planner gets the
    reference) that swallows every Exception (as the float64 reference's fallback does)."""
    dog = watchdog.inherited()

    def helper() -> None:
        try:
            with watchdog.covering(dog):
                while True:
                    try:
                        while True:
                            pass
                    except Exception:  # the reference's fallback swallows errors
                        pass
        except BaseException as exc:
            stopped.append(exc)

    # is_alive() cannot tell: a join() that a signal interrupted marks the thread stopped (CPython's
    # bpo-45274 handling), although it runs on; the helper's own record says that it ended
    thread = threading.Thread(target=helper, daemon=True)
    helpers.append(thread)
    thread.start()
    thread.join()


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_the_deadline_stops_the_thread_it_handed_task_code_to(where: str) -> None:
    stopped: list[BaseException] = []
    helpers: list[threading.Thread] = []

    def body() -> None:
        with deadline(0.3, "handing off"):
            _hands_off_a_swallowing_loop(stopped, helpers)

    started = time.monotonic()
    if where == "main thread":
        with pytest.raises(EvaluationTimeout, match="handing off took longer than"):
            body()
    else:
        assert isinstance(_in_a_thread(body), EvaluationTimeout)
    while not stopped and time.monotonic() - started < 10:
        time.sleep(0.05)
    assert stopped and isinstance(stopped[0], watchdog.Expired)
    assert time.monotonic() - started < 10
