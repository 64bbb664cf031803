"""The trace-completeness gate (agent/gate.py) and distillation (agent/distill.py), with the real
scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.agent.distill import drafts_from, parse_lessons, transitions
from sagekernel.agent.gate import IncompleteReply, complete_reply
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.state import OperatorOutcome
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.models.base import Message
from sagekernel.models.scripted import ScriptedModel
from sagekernel.records import EpisodeKind, EpisodeTrace, RoundTrace
from sagekernel.tasks.task import Task

CODE = (
    "```c\nvoid sage_kernel(const float* restrict x, float* restrict out, int64_t N) { out[0] = x[0]; }\n```"
)


def ask_with(model: ScriptedModel):
    return lambda messages, reask, grammar=None: model.complete(messages, grammar=grammar)


def test_reask_names_missing_ids_and_code_then_completes():
    model = ScriptedModel(["- E12: ADOPTED - fits\nno code yet", f"- E7: NOT ADOPTED - unrelated\n{CODE}"])
    out = complete_reply(
        ask_with(model),
        [Message("user", "round prompt")],
        prompts=Prompts(),
        shown_items=[12, 7],
        shown_rules=[],
        language="c",
        max_reasks=2,
    )
    assert out.reasks == 1 and out.missing == []
    assert out.parsed.decisions == {12: (True, "fits"), 7: (False, "unrelated")}
    assert out.parsed.code is not None and "sage_kernel" in out.parsed.code
    reask = model.prompts[1][-1].content
    assert "E7" in reask and "E12" not in reask and "no kernel source" in reask
    assert [m.role for m in model.prompts[1]] == ["user", "assistant", "user"]


def test_complete_reply_needs_no_reask():
    model = ScriptedModel([f"- E1: NOT ADOPTED - no\n{CODE}"])
    out = complete_reply(
        ask_with(model),
        [Message("user", "p")],
        prompts=Prompts(),
        shown_items=[1],
        shown_rules=[],
        language="c",
        max_reasks=2,
    )
    assert out.reasks == 0 and len(model.prompts) == 1


def test_bounded_reasks_leave_unresolved_and_fail_without_code():
    model = ScriptedModel(["nothing useful", "- E3: ADOPTED - fits", "and again", "never asked"])
    with pytest.raises(IncompleteReply) as info:
        complete_reply(
            ask_with(model),
            [Message("user", "p")],
            prompts=Prompts(),
            shown_items=[3, 4],
            shown_rules=[],
            language="c",
            max_reasks=2,
        )
    assert info.value.outcome.reasks == 2 and info.value.outcome.missing == [4]
    assert len(model.prompts) == 3  # the first ask and exactly two re-asks


def test_a_reask_that_brings_nothing_new_ends_the_reasks():
    """At a low temperature a repeated question gets the repeated answer: one such re-ask is enough."""
    same = "DIAGNOSIS: d\nADOPTION:\n- E3: ADOPTED or NOT ADOPTED - copied format\n<the kernel>"
    model = ScriptedModel([same, same, same])
    with pytest.raises(IncompleteReply) as info:
        complete_reply(ask_with(model), [Message("user", "p")], prompts=Prompts(), shown_items=[3],
                       shown_rules=[], language="c", max_reasks=5)
    assert info.value.outcome.reasks == 1 and info.value.outcome.missing == [3]
    assert len(model.prompts) == 2


def test_every_call_carries_the_grammar_of_what_it_asks_for():
    model = ScriptedModel(["- E12: ADOPTED - fits\nno code yet", f"- E7: NOT ADOPTED - unrelated\n{CODE}"])
    complete_reply(ask_with(model), [Message("user", "p")], prompts=Prompts(), shown_items=[12, 7],
                   shown_rules=[2], language="c", max_reasks=2)
    first, reask = model.grammars
    assert first is not None and '"- E12: "' in first and '"- E7: "' in first and '"- R2: "' in first
    assert reask is not None and '"- E7: "' in reask and '"- E12: "' not in reask and '"```c"' in reask


def test_unresolved_but_with_code_is_returned_after_the_reasks():
    model = ScriptedModel([CODE, CODE])
    out = complete_reply(
        ask_with(model),
        [Message("user", "p")],
        prompts=Prompts(),
        shown_items=[5],
        shown_rules=[],
        language="c",
        max_reasks=1,
    )
    assert out.missing == [5] and out.parsed.code is not None
    assert "do not repeat the kernel" in model.prompts[1][-1].content.lower()


def _task() -> Task:
    return Task(
        name="relu",
        level=1,
        category="activation",
        description="",
        source_path=Path("relu.py"),
        inputs=[],
        outputs=[],
        sizes={"N": 4096, "C": 3},
        variants=[{"N": 1531}],
    )


def _round(
    n: int, kind: EpisodeKind, stage: Stage, h: str, ms: float | None = None
) -> tuple[RoundTrace, Verdict]:
    ok = stage is Stage.OK
    v = Verdict(
        stage=stage,
        message=f"{stage.value} problem",
        compiled=stage in (Stage.CORRECTNESS, Stage.OK),
        correct=ok,
        candidate_ms=ms,
        reference_ms=1.0 if ok else None,
    )
    return RoundTrace(
        round=n,
        episode=kind,
        candidate_hash=h,
        compiled=v.compiled,
        correct=ok,
        latency_ms=ms if ok else None,
        verdict=v.to_dict(),
    ), v


def test_transitions_are_verified_fixes_and_speedups():
    out = OperatorOutcome(task=_task(), budget=6)
    corr = EpisodeTrace("relu", "activation", 1, EpisodeKind.CORR)
    opt = EpisodeTrace("relu", "activation", 1, EpisodeKind.OPT)
    plan = [
        (EpisodeKind.CORR, Stage.COMPILE, "a", None),
        (EpisodeKind.CORR, Stage.COMPILE, "b", None),
        (EpisodeKind.CORR, Stage.CORRECTNESS, "c", None),
        (EpisodeKind.CORR, Stage.OK, "d", 2.0),
        (EpisodeKind.OPT, Stage.OK, "e", 3.0),
        (EpisodeKind.OPT, Stage.OK, "f", 1.0),
    ]
    for n, (kind, stage, h, ms) in enumerate(plan, 1):
        trace, verdict = _round(n, kind, stage, h, ms)
        out.add(trace, f"src-{h}", verdict, [])
        (corr if kind is EpisodeKind.CORR else opt).rounds.append(trace)
    fixes = transitions(corr, out)
    assert [(t.before, t.after) for t in fixes] == [
        ("src-b", "src-c"),
        ("src-c", "src-d"),
    ]  # a->b is no progress
    speedups = transitions(opt, out)
    assert [(t.before, t.after) for t in speedups] == [("src-d", "src-f")]  # 3.0 ms is slower than T_first
    assert out.t_first_ms == 2.0 and out.t_best_ms == 1.0 and out.improved


def test_drafts_drop_size_literals_duplicates_and_incomplete():
    lessons = parse_lessons("""LESSON
title: Loop to N, never to 4096
type: correctness
correct_code: for (i = 0; i < N; ++i)
LESSON
title: Use fmaxf for ReLU
type: made_up_type
error_message: slow branch
correct_code: out[i] = fmaxf(x[i], 0.0f);
LESSON
title: use fmaxf for relu!
correct_code: out[i] = fmaxf(x[i], 0.0f);
LESSON
title: No fix given
LESSON
title: Unroll by 3
correct_code: for (i = 0; i + 3 <= N; i += 3)
""")
    drafts = drafts_from(lessons, _task(), EpisodeKind.OPT, max_items=3)
    assert [d.title for d in drafts] == ["Use fmaxf for ReLU", "Unroll by 3"]  # small literals are not shapes
    assert drafts[0].type == "performance" and drafts[0].category == "activation"
    assert drafts[0].source_operator == "relu"


def _round_prompt(tmp_path: Path, sizes: dict[str, int], with_item: bool) -> str:
    from sagekernel.agent.prompt import RoundContext
    from sagekernel.records import RetrievedItem
    from sagekernel.targets import get_target
    from sagekernel.tasks.task import TensorSpec

    (tmp_path / "swish.py").write_text("# the reference\n")
    dims = tuple(sizes)
    task = Task(name="swish", level=2, category="activation", description="Swish.",
                source_path=tmp_path / "swish.py", inputs=[TensorSpec("x", dims, "float32")],
                outputs=[TensorSpec("out", dims, "float32")], sizes=sizes)
    items = [RetrievedItem(7, "Use expf", "correctness", "activation", "", "", "expf(x)", 1.0, 0.0, 1.0)]
    ctx = RoundContext(round=1, budget=4, rounds_left=3, episode=EpisodeKind.CORR,
                       items=items if with_item else [], rules=[], current_code=None, feedback=None,
                       history=[])
    # the task and contract are in the (stable) system message, the round's part in the user message
    return "\n".join(m.content for m in Prompts().round_messages(task, get_target("cpu"), ctx))


def test_round_prompt_names_the_size_parameters_and_asks_for_helpers(tmp_path: Path):
    """A 1.5B model wrote `N` for sizes `B, D` and called an undeclared `sigmoid` (demo run): the
    prompt names the size parameters right under the contract and says helpers must be defined."""
    text = _round_prompt(tmp_path, {"B": 64, "D": 1000}, with_item=True)
    contract_end = text.index("```", text.index("## Kernel contract") + 40)
    sizes_line = text.index("The sizes are the parameters B, D: use exactly these names (there is no N).")
    assert contract_end < sizes_line < text.index("## Your goal")
    assert "Define every helper function you call" in text
    assert text.rstrip().endswith("keep only ONE of the two answers: ADOPTED or NOT ADOPTED.")
    plain = _round_prompt(tmp_path, {"N": 4096}, with_item=False)
    assert "The sizes are the parameters N: use exactly these names.\n" in plain
    assert "ADOPTION" not in plain  # no items, no adoption section or reminder


def test_a_lesson_whose_fix_calls_what_the_verified_code_never_names_is_dropped():
    """Spec §5: grounded in a verified transition. An invented intrinsic is not."""
    from sagekernel.agent.distill import ungrounded_calls

    before = "void sage_kernel(const float* x, float* y, int64_t N) { for (i = 0; i < N; ++i) y[i] = x[i]; }"
    after = "#include <math.h>\nvoid sage_kernel(const float* x, float* y, int64_t N) {\n" \
            "  for (int64_t i = 0; i < N; ++i) y[i] = fabsf(x[i]);\n}"
    lessons = parse_lessons("""LESSON
title: Use intrinsics with a scalar tail
type: performance
correct_code: float r = __builtin_ia32_expf(x);
LESSON
title: Use fabsf on float data
type: performance
correct_code: for (int64_t i = 0; i < N; ++i) y[i] = fabsf(x[i]);
""")
    drafts = drafts_from(lessons, _task(), EpisodeKind.OPT, max_items=3, verified_sources=[before, after])
    assert [d.title for d in drafts] == ["Use fabsf on float data"]
    calls = ungrounded_calls("r = __builtin_ia32_expf(x); if (n) y = fabsf(x);", [after])
    assert calls == ["__builtin_ia32_expf"]
    assert ungrounded_calls("out = tl.exp(x) * tl.load(p)", ["y = tl.load(p)"]) == ["tl.exp"]
