"""The warm correctness zygote: one sandboxed process forks a fresh child per candidate. Nothing a
candidate leaves behind (files, a hung or killed child, signals) may reach the next candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness import sandbox, zygote
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
SIG = "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D)"
RELU = "for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0 ? x[i] : 0;"
HEAD = "#include <stdint.h>\n#include <fcntl.h>\n#include <unistd.h>\n#include <signal.h>\n"


def _run(source: str, **overrides: object) -> Verdict:
    cfg = HarnessConfig(
        **{"skip_timing": True, "held_out_shape": False, "static_checks": False, **overrides}  # type: ignore[arg-type]
    )
    return evaluate(load_task(TASKS / "relu_rows.py"), source, get_target("cpu"), cfg)


def _zygote_pids() -> set[int]:
    return {z.proc.pid for pool in zygote._IDLE.values() for z in pool}


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap unavailable (no private /tmp)")
def test_files_left_by_one_candidate_are_gone_for_the_next() -> None:
    plant = (
        HEAD + "__attribute__((constructor)) static void plant(void) {\n"
        '  close(open("/tmp/sage-leak", O_CREAT | O_WRONLY, 0600));\n'
        '  close(open("/dev/shm/sage-leak", O_CREAT | O_WRONLY, 0600));\n'
        "}\n" + SIG + " { " + RELU + " }\n"
    )
    # writes the right answer only if it can see a planted file
    probe = (
        HEAD + "static int seen;\n"
        "__attribute__((constructor)) static void look(void) {\n"
        '  seen = access("/tmp/sage-leak", F_OK) == 0 || access("/dev/shm/sage-leak", F_OK) == 0;\n'
        "}\n" + SIG + " { if (seen) { " + RELU + " } else { for (int64_t i = 0; i < B * D; ++i) "
        "out[i] = 0; } }\n"
    )
    both = (
        HEAD + "static int seen;\n"
        "__attribute__((constructor)) static void plant_and_look(void) {\n"
        '  close(open("/tmp/sage-leak", O_CREAT | O_WRONLY, 0600));\n'
        '  seen = access("/tmp/sage-leak", F_OK) == 0;\n'
        "}\n" + SIG + " { if (seen) { " + RELU + " } }\n"
    )
    # control: within one candidate the planted file is visible, so the probe's failure below
    # is the wipe between candidates, not a probe that cannot work
    assert _run(both).stage is Stage.OK
    assert _run(plant).stage is Stage.OK
    before = _zygote_pids()
    v = _run(probe)
    assert v.stage is Stage.CORRECTNESS, v.message
    assert _zygote_pids() == before  # the same warm zygote served both


def test_a_hung_child_is_killed_and_the_zygote_serves_the_next_candidate() -> None:
    hang = "#include <stdint.h>\n" + SIG + " { volatile int s = 1; while (s) {} }\n"
    v = _run(hang, run_timeout_s=2.0)
    assert v.stage is Stage.RUNTIME and "timed out" in v.message, v.message
    good = "#include <stdint.h>\n" + SIG + " { " + RELU + " }\n"
    v = _run(good)
    assert v.stage is Stage.OK and v.sandbox["seccomp"] == "deny-list", v.message


def test_a_candidate_cannot_signal_the_zygote() -> None:
    kills = "kill(getppid(), SIGKILL); kill(0, SIGKILL); kill(1, SIGKILL);"
    kill_parent = HEAD + SIG + " { " + kills + " " + RELU + " }\n"
    _run("#include <stdint.h>\n" + SIG + " { " + RELU + " }\n")  # make sure one zygote is idle
    before = _zygote_pids()
    v = _run(kill_parent)
    assert v.stage in (Stage.OK, Stage.RUNTIME), v.message
    assert before
    alive = [z for pool in zygote._IDLE.values() for z in pool if z.proc.pid in before]
    assert alive and all(z.alive() for z in alive)


def test_warm_and_cold_paths_reach_the_same_verdicts() -> None:
    good = "#include <stdint.h>\n" + SIG + " { " + RELU + " }\n"
    bad = "#include <stdint.h>\n" + SIG + " { for (int64_t i = 0; i < B * D; ++i) out[i] = x[i]; }\n"
    crash = "#include <stdint.h>\n" + SIG + " { *(volatile int*)0 = 1; }\n"
    for source, stage in ((good, Stage.OK), (bad, Stage.CORRECTNESS), (crash, Stage.RUNTIME)):
        warm = _run(source)
        cold = _run(source, warm_correctness=False)
        assert warm.stage is cold.stage is stage, (warm.message, cold.message)
        if stage is Stage.RUNTIME:
            assert "SIGSEGV" in warm.message and "SIGSEGV" in cold.message
