"""The prompt layout keeps a prefix cache warm: what a call shares with the call before is reused.

A scripted agent runs the demo stream (abs, swish, rms_norm; 4 rounds each: a compile error, a
mismatch, a correct kernel, an optimisation round; the first reply of each operator leaves one
adoption undecided, so the gate re-asks; each episode is distilled, as the runner does) through
the real Agent, templates, memory and seed items; only the model and the harness are scripted.

The cost proxy is what llama.cpp recomputes: a call's prompt characters beyond the longest common
prefix with what the context held after the previous call (that call's prompt and its reply).
BASELINE holds the same figures measured on the layout before this one (commit 8858ec3, main's
layout when the issue was filed) with `python tests/test_prompt_layout.py` from that tree.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from sagekernel import db
from sagekernel.agent.distill import distill
from sagekernel.agent.loop import Agent, AgentConfig
from sagekernel.agent.prompt import Prompts
from sagekernel.candidate import Candidate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.memory.io import load_seed
from sagekernel.memory.policies import make_policy
from sagekernel.models.base import Message, Reply
from sagekernel.records import EpisodeTrace, RoundTrace
from sagekernel.targets import get_target
from sagekernel.tasks.suites import load_suite

#: Measured on commit 8858ec3 (the layout before this one) with `python tests/test_prompt_layout.py`.
BASELINE = {"calls": 20, "round_prompt_chars": 186950, "computed_chars": 107881, "first_prompt_chars": 12878}

KERNEL = ("#include <stdint.h>\n#include <math.h>\n\n"
          "void sage_kernel(const float* restrict x, float* restrict out, int64_t N) {\n"
          "  for (int64_t i = 0; i < N; ++i) out[i] = fabsf(x[i]);\n}\n")
VERDICTS = [
    Verdict(stage=Stage.COMPILE, message="kernel.c:5:44: error: 'M' undeclared (first use in this function)\n"
            "    5 |   for (int64_t i = 0; i < M; ++i) out[i] = fabsf(x[i]);\n      |                      ^",
            compiled=False),
    Verdict(stage=Stage.CORRECTNESS, compiled=True,
            message="shape 7 x 1531 (trial large_magnitude): first wrong index 10716: expected 812.5, "
                    "got nan; never written (atol 1e-05, rtol 1e-05)"),
    Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=0.052, reference_ms=0.041,
            speedup=0.79),
    Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=0.050, reference_ms=0.041,
            speedup=0.82),
]


class _Recorder:
    """Answers like a model that follows the format, and records every request with its reply."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Message], str]] = []  # (operator, messages, reply)
        self.operator = ""

    def complete(self, messages: list[Message], **_: Any) -> Reply:
        last = messages[-1].content
        if "curating a memory" in last:
            text = ("LESSON\ntitle: Loop over every element\ntype: correctness\ncategory: math\n"
                    "error_message: never written\nwrong_code:\n```c\ni < M\n```\n"
                    "correct_code:\n```c\ni < N\n```\n")
        elif last.startswith("Your reply is incomplete"):
            missing = re.findall(r"^- E(\d+):", last, re.M)
            text = "\n".join(f"- E{i}: NOT ADOPTED - not needed" for i in missing)
        else:
            ids = re.findall(r"^\[E(\d+)\]", last, re.M)
            first = not any(op == self.operator for op, _, _ in self.calls)
            decided = ids[:-1] if first and ids else ids  # the first reply forgets one decision
            lines = [f"- E{i}: {'ADOPTED - it applies' if n == 0 else 'NOT ADOPTED - not needed'}"
                     for n, i in enumerate(decided)]
            text = ("DIAGNOSIS: read N from its parameter.\nADOPTION:\n" + "\n".join(lines)
                    + f"\n```c\n{KERNEL}```")
        self.calls.append((self.operator, list(messages), text))
        return Reply(text=text, model="scripted")


class _Hooks:
    def __init__(self, model: _Recorder, prompts: Prompts, target: Any, task: Any) -> None:
        self.model, self.prompts, self.target, self.task = model, prompts, target, task

    def on_round(self, trace: RoundTrace, source: str | None) -> None:
        pass

    def on_episode(self, trace: EpisodeTrace, outcome: Any, last: bool) -> None:
        distill(lambda m, grammar=None: self.model.complete(m, grammar=grammar), self.prompts, self.task,
                self.target, trace, outcome)


def scripted_stream(workspace: Path) -> _Recorder:
    target = get_target("cpu")
    conn = db.connect(workspace)
    load_seed(conn, target.seed_memory_path())
    policy = make_policy("sage", conn, run_id="layout", embedder=None)
    model, prompts = _Recorder(), Prompts()
    for task in load_suite("demo"):
        verdicts = iter(VERDICTS)

        def evaluate(_task: Any, _candidate: Candidate, verdicts: Any = verdicts) -> Verdict:
            return next(verdicts)

        model.operator = task.name
        agent = Agent(model, target, policy, evaluate, AgentConfig(rounds=4, k=5), prompts=prompts)
        agent.run_operator(task, _Hooks(model, prompts, target, task))
    return model


def purpose(messages: list[Message]) -> str:
    last = messages[-1].content
    return ("distill" if "curating a memory" in last
            else "reask" if last.startswith("Your reply is incomplete") else "round")


def flat(messages: list[Message]) -> str:
    """The prompt as a chat template lays it out: role headers and contents, in order."""
    return "".join(f"<|{m.role}|>\n{m.content}\n" for m in messages) + "<|assistant|>\n"


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def cost(model: _Recorder) -> dict[str, int]:
    """Prompt characters of the rounds' calls (rounds and re-asks), and of every call (distillation
    too) the characters a prefix cache holding the previous call could not serve."""
    held, computed, total = "", 0, 0
    for _, messages, reply in model.calls:
        prompt = flat(messages)
        if purpose(messages) != "distill":
            total += len(prompt)
        computed += len(prompt) - common_prefix(held, prompt)
        held = prompt + reply
    return {"calls": len(model.calls), "round_prompt_chars": total, "computed_chars": computed,
            "first_prompt_chars": len(flat(model.calls[0][1]))}


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> _Recorder:
    return scripted_stream(tmp_path_factory.mktemp("layout") / "ws")


def test_every_call_of_an_operator_starts_with_the_same_system_message(stream: _Recorder) -> None:
    model = stream
    for op in ("abs", "swish", "rms_norm"):
        calls = [messages for name, messages, _ in model.calls if name == op]
        purposes = [purpose(m) for m in calls]
        assert {"round", "distill"} <= set(purposes), purposes  # re-asks: only where items were shown
        systems = {m[0].content for m in calls}
        assert [m[0].role for m in calls] == ["system"] * len(calls)
        assert len(systems) == 1, f"{op}: {len(systems)} different system messages"
        system = systems.pop()
        assert f"# Operator: {op} " in system and "## Kernel contract" in system  # the task: stable
        assert "## Your goal" not in system and not re.search(r"^\[E\d+\]", system, re.M)  # nothing per-round


def test_a_reask_extends_the_prompt_it_answers(stream: _Recorder) -> None:
    model = stream
    reasks = [i for i, (_, m, _) in enumerate(model.calls) if purpose(m) == "reask"]
    assert len(reasks) == 2  # abs and rms_norm (swish's first round retrieves nothing to decide)
    for i in reasks:
        before, reply = model.calls[i - 1][1], model.calls[i - 1][2]
        now = model.calls[i][1]
        assert now[:len(before)] == before and now[len(before)] == Message("assistant", reply)


def test_rules_and_the_stable_part_lead_every_round() -> None:
    """Two rounds of one operator with different items, feedback and round numbers share everything up
    to the end of the resident rules; the retrieved items follow, then the round's goal."""
    from sagekernel.agent.prompt import RoundContext
    from sagekernel.records import EpisodeKind, ResidentRule, RetrievedItem

    task = next(t for t in load_suite("demo") if t.name == "swish")
    target = get_target("cpu")
    rules = [ResidentRule(item_id=3, rule_text="Read every size from its parameter.", tokens=8),
             ResidentRule(item_id=9, rule_text="Subtract the max before expf.", tokens=8)]

    def item(i: int) -> RetrievedItem:
        return RetrievedItem(i, f"Lesson {i}", "correctness", "activation", "", "", "expf(x)", 1.0, 0.0, 1.0)

    one = RoundContext(round=1, budget=4, rounds_left=3, episode=EpisodeKind.CORR, rules=rules,
                       items=[item(8), item(2)], current_code=None, feedback=None, history=[])
    two = RoundContext(round=3, budget=4, rounds_left=1, episode=EpisodeKind.OPT, rules=rules,
                       items=[item(5)], current_code=KERNEL, feedback="PASSED: correct.", history=[],
                       best_ms=0.05, ref_ms=0.04)
    a, b = (flat(Prompts().round_messages(task, target, ctx)) for ctx in (one, two))
    rules_end = a.index("[R9] Subtract the max before expf.") + len("[R9] Subtract the max before expf.")
    assert common_prefix(a, b) >= rules_end
    assert rules_end < a.index("[E2]") < a.index("[E8]") < a.index("## Your goal")  # by id, then goal
    # the same items retrieved in another rank order: the same text up to the round's goal
    again = RoundContext(round=2, budget=4, rounds_left=2, episode=EpisodeKind.CORR, rules=rules,
                         items=[item(2), item(8)], current_code=None, feedback="other", history=[])
    c = flat(Prompts().round_messages(task, target, again))
    assert common_prefix(a, c) > a.index("## Your goal")


def test_the_layout_reads_fewer_characters_than_before(stream: _Recorder) -> None:
    now = cost(stream)
    assert now["calls"] == BASELINE["calls"]  # the same conversation, laid out differently
    assert now["computed_chars"] <= 0.6 * BASELINE["computed_chars"], now
    assert now["round_prompt_chars"] < BASELINE["round_prompt_chars"], now
    assert now["first_prompt_chars"] < BASELINE["first_prompt_chars"], now


if __name__ == "__main__":
    # Prints this tree's figures (how BASELINE was measured on the old layout); with a path, also
    # writes the conversation there (benchmarks/bench_replay.py replays it through the real model).
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        recorded = scripted_stream(Path(tmp) / "ws")
    json.dump(cost(recorded), sys.stdout)
    print()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps([
            {"operator": op, "purpose": purpose(messages), "reply": reply,
             "messages": [{"role": m.role, "content": m.content} for m in messages]}
            for op, messages, reply in recorded.calls]))


def test_an_items_code_pair_is_shown_as_one_liners_or_as_a_diff() -> None:
    from sagekernel.agent.prompt import shown_change

    one = shown_change("y[c * R + r] = x[c * R + r];", "y[r * C + c] = x[r * C + c];")
    assert (one.wrong, one.right) == ("y[c * R + r] = x[c * R + r];", "y[r * C + c] = x[r * C + c];")
    assert one.diff == ""
    wrong = "void k(float* y, int64_t N) {\n  for (i = 0; i < N; ++i) y[i] = expf(x[i]);\n}"
    right = "#include <math.h>\n#include <stdint.h>\n\n" + wrong
    diff = shown_change(wrong, right).diff.splitlines()
    assert diff == ["+#include <math.h>", "+#include <stdint.h>", "+", " void k(float* y, int64_t N) {"]
    assert shown_change("", "a;\nb;").diff == "+a;\n+b;"  # one side only: shown whole
