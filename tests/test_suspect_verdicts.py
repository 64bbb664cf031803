"""A verdict the harness marks suspect (quarantined) never counts as a success: not for ATU credit,
not for distillation, not for consolidation, and replay from the recorded traces agrees."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sagekernel import db
from sagekernel.agent.distill import transitions
from sagekernel.agent.loop import Agent, AgentConfig
from sagekernel.candidate import Candidate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.memory.atu import terminal_score
from sagekernel.memory.io import load_seed
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import MemoryConfig
from sagekernel.memory.store import Store
from sagekernel.models.base import Message, Reply
from sagekernel.records import EpisodeTrace, RoundTrace
from sagekernel.runner.bank_replay import load_episodes
from sagekernel.runner.store import RunInfo, RunStore
from sagekernel.targets import get_target
from sagekernel.tasks.suites import load_suite

TASKS = Path(__file__).parent / "e2e_tasks"
SEED = [{"title": f"Elementwise lesson {n}", "type": "correctness", "category": "elementwise",
         "error_message": "elements past the first row were never written", "wrong_code": "i < 64",
         "correct_code": "for (int64_t i = 0; i < N; ++i) out[i] = x[i];"} for n in range(3)]
KERNEL = "#include <stdint.h>\nvoid sage_kernel(const float* x, float* out, int64_t N) {\n}\n"


class _Adopter:
    """Adopts the first item shown, declines the rest, always returns the same kernel."""

    name = "adopter"

    def complete(self, messages: list[Message], **_: Any) -> Reply:
        ids = re.findall(r"^\[E(\d+)\]", messages[-1].content, re.M)
        lines = [f"- E{i}: {'ADOPTED' if n == 0 else 'NOT ADOPTED'} - reason" for n, i in enumerate(ids)]
        return Reply(text="DIAGNOSIS: d\nADOPTION:\n" + "\n".join(lines) + f"\n```c\n{KERNEL}```", model="a")


class _Hooks:
    def __init__(self) -> None:
        self.episodes: list[EpisodeTrace] = []
        self.rounds: list[RoundTrace] = []

    def on_round(self, trace: RoundTrace, source: str | None) -> None:
        self.rounds.append(trace)

    def on_episode(self, trace: EpisodeTrace, outcome: Any, last: bool) -> None:
        self.episodes.append(trace)


def _run(tmp_path: Path, verdicts: list[Verdict]) -> tuple[Any, _Hooks, Any, Any]:
    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(s) for s in SEED) + "\n")
    conn = db.connect(tmp_path / "ws")
    load_seed(conn, seed)
    policy = make_policy("sage", conn, run_id="r", embedder=None)
    given = iter(verdicts)

    def evaluate(task: Any, candidate: Candidate) -> Verdict:
        assert isinstance(candidate, Candidate) and "sage_kernel" in candidate.main
        return next(given)

    task = next(t for t in load_suite(TASKS) if t.name == "e2e_double")
    agent = Agent(_Adopter(), get_target("cpu"), policy, evaluate, AgentConfig(rounds=len(verdicts), k=3))
    hooks = _Hooks()
    outcome = agent.run_operator(task, hooks)
    return outcome, hooks, policy, conn


def _ok(suspect: bool) -> Verdict:
    return Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=0.01,
                   reference_ms=1.0, speedup=100.0, suspect=suspect,
                   quarantine=["implausible speedup, not cleared by re-measurement"] if suspect else [])


def test_a_suspect_verdict_earns_no_credit_and_distils_nothing(tmp_path: Path) -> None:
    failed = Verdict(stage=Stage.COMPILE, message="error: x", compiled=False)
    outcome, hooks, policy, conn = _run(tmp_path, [failed, _ok(suspect=True)])
    corr = hooks.episodes[0]
    assert [r.suspect for r in corr.rounds] == [False, True]
    assert corr.rounds[1].verdict is not None and corr.rounds[1].verdict["suspect"] is True
    # correct by the harness's checks (the operator is solved, the corr episode ends) ...
    assert outcome.correct and outcome.first_correct_round == 2
    # ... but no success for learning, and its quarantined timing is no T_first
    assert not corr.success and outcome.t_first_ms is None and outcome.t_ref_ms is None
    assert terminal_score(corr, MemoryConfig()) == -MemoryConfig().delta
    assert transitions(corr, outcome) == []  # a quarantined "fix" verifies nothing

    adopted = next(iter(corr.adopted_ids()))
    policy.learn(corr)
    assert Store(conn).get_many([adopted])[adopted].u < 0  # the adopted item shares −δ, not +1

    # replay from the recorded traces reads the same flag from the trace JSON
    stored = [RoundTrace.from_dict(json.loads(json.dumps(r.to_dict()))) for r in hooks.rounds]
    assert [r.suspect for r in stored] == [False, True]
    legacy = {k: v for k, v in hooks.rounds[1].to_dict().items() if k != "suspect"}
    assert RoundTrace.from_dict(legacy).suspect  # older traces: the flag from the verdict dict
    runs = RunStore(conn)
    runs.create_run(RunInfo("r", "finished", "sage", "m", "cpu", "s", "given", 2, False, {}, "t", None), [])
    for r in hooks.rounds:
        runs.save_round("r", "e2e_double", r, KERNEL)
    replayed = load_episodes(conn, "r")
    assert [terminal_score(e, MemoryConfig()) for e in replayed] == [-MemoryConfig().delta]


def test_a_suspect_faster_kernel_is_no_speed_up(tmp_path: Path) -> None:
    honest = Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=1.0,
                     reference_ms=1.0, speedup=1.0)
    outcome, hooks, _, _ = _run(tmp_path, [honest, _ok(suspect=True)])
    opt = hooks.episodes[1]
    assert outcome.t_first_ms == outcome.t_best_ms == 1.0 and not outcome.improved and not opt.success
    assert terminal_score(opt, MemoryConfig()) == MemoryConfig().no_gain
    assert transitions(opt, outcome) == []


def test_the_same_round_without_the_flag_is_a_success(tmp_path: Path) -> None:
    failed = Verdict(stage=Stage.COMPILE, message="error: x", compiled=False)
    outcome, hooks, policy, conn = _run(tmp_path, [failed, _ok(suspect=False)])
    corr = hooks.episodes[0]
    assert corr.success and outcome.correct and terminal_score(corr, MemoryConfig()) == 1.0
    assert len(transitions(corr, outcome)) == 1
    adopted = next(iter(corr.adopted_ids()))
    policy.learn(corr)
    assert Store(conn).get_many([adopted])[adopted].u > 0
