"""Every method and ablation resumes to exactly the state of an uninterrupted run.

Every random draw of a run must be persisted state or derived from it: value memory's ε-greedy
generator used to start from the seed in each process, so a resumed run drew differently from an
uninterrupted one (even after a graceful SIGTERM). The e2e tests below stop a run inside its
second operator (in-process in the default run; a real SIGKILL of `sage run` with -m slow) and
compare the resumed workspace with an uninterrupted run of the same method.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.memory.io import load_seed
from sagekernel.memory.policies import METHODS, make_policy
from sagekernel.memory.records import MemoryConfig
from sagekernel.records import EpisodeKind
from sagekernel.runner.run import run
from test_e2e_run import FAST, Script, SimulatedCrash, config, final_state, prepare, query


def _method_config(ws: Path, server: OpenAITestServer, method: str) -> Any:
    # k=1 from a pool of 3: which item value memory's ε-greedy draw picks shows in the traces
    return config(ws, server, method=method).model_copy(update={"k": 1, "limit": 2})


#: The methods that draw at random run in the default run; the others (deterministic by
#: construction) with -m slow, to keep the default run short.
_RANDOMISED = ("value-memory", "sage-random-ugc")
EVERY_METHOD = [m if m in _RANDOMISED else pytest.param(m, marks=pytest.mark.slow) for m in METHODS]


@pytest.mark.parametrize("method", EVERY_METHOD)
def test_a_run_stopped_inside_an_operator_resumes_to_the_uninterrupted_state(tmp_path: Path,
                                                                             method: str) -> None:
    with OpenAITestServer(fallback=Script()) as server:
        ref = tmp_path / "uninterrupted"
        prepare(ref)
        assert run(_method_config(ref, server, method)).status == "finished"

        ws = tmp_path / "resumed"
        prepare(ws)

        def die(trace: Any, last: bool) -> None:
            if trace.operator == "e2e_negate" and not last:
                raise SimulatedCrash("the process dies between the episodes of operator 2")

        with pytest.raises(SimulatedCrash):
            run(_method_config(ws, server, method), after_episode=die)
        summary = run(_method_config(ws, server, method))  # a new policy object: as a new process
        assert summary.resumed and summary.status == "finished" and summary.done == 2
    assert final_state(ws) == final_state(ref)


def test_value_memory_draws_depend_on_persisted_state_only(tmp_path: Path) -> None:
    """With ε = 1 every pick is random: a fresh policy (a resumed process) draws for an operator
    exactly what the policy that had already served other operators drew."""
    conn = db.connect(tmp_path / "ws")
    seed = tmp_path / "seed.jsonl"
    items = [{"title": f"Elementwise lesson {i}", "type": "correctness", "category": "elementwise",
              "error_message": f"error {i}", "wrong_code": f"x{i}", "correct_code": f"y{i}"}
              for i in range(12)]
    seed.write_text("\n".join(json.dumps(item) for item in items) + "\n")
    load_seed(conn, seed)
    cfg = MemoryConfig(epsilon=1.0)

    def picks(policy: Any, operator: str) -> list[list[int]]:
        return [[r.item_id for r in policy.retrieve("elementwise loop", operator=operator,
                                                      category="elementwise", episode=EpisodeKind.CORR, k=4)]
                for _ in range(3)]

    long_lived = make_policy("value-memory", conn, run_id="r", seed=7, embedder=None, config=cfg)
    picks(long_lived, "first_operator")
    served = picks(long_lived, "second_operator")
    fresh = make_policy("value-memory", conn, run_id="r", seed=7, embedder=None, config=cfg)
    assert picks(fresh, "second_operator") == served
    other_seed = make_policy("value-memory", conn, run_id="r", seed=8, embedder=None, config=cfg)
    assert picks(other_seed, "second_operator") != served  # the draws are random, not fixed


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_sigkill_inside_an_operator_resumes_to_the_uninterrupted_state(tmp_path: Path, method: str) -> None:
    with OpenAITestServer(fallback=Script(delay_opt="e2e_negate")) as server:
        ref = tmp_path / "uninterrupted"
        prepare(ref)
        run(_method_config(ref, server, method))
        ws = tmp_path / "killed"
        prepare(ws)
        cfg = _method_config(ws, server, method)
        args = ["run", "--workspace", str(ws), "--suite", cfg.suite, "--model", cfg.model, "--method", method,
                "--schedule", "by-level", "--budget", "3", "-k", "1", "--limit", "2", "--embedder", "none",
                "--no-progress", "--json"]
        for key, value in FAST.items():
            args += ["--harness", f"{key}={json.dumps(value)}"]
        proc = subprocess.Popen([sys.executable, "-c", "from sagekernel.cli import main; main()", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sql = "SELECT count(*) FROM round_traces WHERE operator = 'e2e_negate' AND episode = 'corr'"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (ws / "sage.db").exists() and query(ws, sql)[0][0] >= 1:
                break
            time.sleep(0.02)
        time.sleep(0.5)  # inside operator 2's first (slow) optimisation call
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert query(ws, "SELECT count(*) FROM operator_results") == [(1,)]
        assert run(cfg).done == 2
    assert final_state(ws) == final_state(ref)
