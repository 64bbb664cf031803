"""The synthetic `oracle` model (models/oracle.py, issue 28): its settings, its hidden world, and
that its replies go through the real prompt builder, reply parser and gate -- and a short real
stream (real harness, real memory) in which it plays its part."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sagekernel.agent.gate import complete_reply
from sagekernel.agent.prompt import Prompts, RoundContext, shown_order
from sagekernel.agent.protocol import parse_reply
from sagekernel.agent.state import beats
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.models.oracle import OracleModel, _builtin_tasks, _variant, make_oracle, read_repeats
from sagekernel.models.oracle_world import (
    OracleConfig,
    draw,
    home_category,
    read_round,
    seed_categories,
    useful,
)
from sagekernel.models.registry import ModelSpecError, make_model, parse_spec
from sagekernel.records import EpisodeKind, ResidentRule, RetrievedItem
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import run
from sagekernel.targets import get_target
from sagekernel.targets.cpu.canaries import canary_sources


@pytest.mark.parametrize("spec, words", [
    ("oracle:nope=1", "nope=1"), ("oracle:base=2", "base=2.0 is outside"), ("oracle:seed=x", "not a number"),
    ("oracle:seed", "not key=value"), ("oracle:seed=1,seed=2", "twice"), ("oracle:gain=nan", "finite"),
    ("oracle:seed=-1", ">= 0"), ("oracle:attention=0", "attention=0 must be >= 1"),
    ("oracle:slow=0", "slow=0 must be in [1, 64]"), ("oracle:speed_base=1.5", "speed_base=1.5 is outside"),
])
def test_bad_settings_are_one_line_errors_naming_the_part(spec: str, words: str) -> None:
    with pytest.raises(ModelSpecError) as err:
        parse_spec(spec)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_spec_builds_the_configured_world() -> None:
    model = make_model("oracle:seed=7,base=0.3,freeform=0")
    assert isinstance(model, OracleModel) and model.free
    assert model.world == OracleConfig(seed=7, base=0.3, freeform=0.0)
    assert make_model("oracle").world == OracleConfig()  # type: ignore[attr-defined]


def test_hidden_truth_is_a_seeded_pure_function_with_the_configured_rates() -> None:
    cfg = OracleConfig(seed=3)
    titles = [f"Check the boundary handling in reduction kernels (t{i})" for i in range(3000)]
    assert all(home_category(t) == "reduction" for t in titles[:5])
    home = sum(useful(cfg, t, "reduction") for t in titles) / len(titles)
    other = sum(useful(cfg, t, "activation") for t in titles) / len(titles)
    assert abs(home - cfg.useful_home) < 0.04 and abs(other - cfg.useful_other) < 0.03
    again = [useful(OracleConfig(seed=3), t, "reduction") for t in titles[:50]]
    assert [useful(cfg, t, "reduction") for t in titles[:50]] == again
    assert [useful(cfg, t, "reduction") for t in titles[:200]] != [
        useful(OracleConfig(seed=4), t, "reduction") for t in titles[:200]]
    assert seed_categories()  # the CPU seed memory's titles have home categories
    assert 0.0 <= draw(1, "x") < 1.0 and draw(1, "x") == draw(1, "x") != draw(2, "x")


def _round_messages(task_name: str, rnd: int = 1, episode: EpisodeKind = EpisodeKind.CORR):
    task = _builtin_tasks()[task_name]  # the suite as the oracle loaded it (one load per process)
    target = get_target("cpu")
    seed_file = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
    seeds = [json.loads(line) for line in seed_file.read_text().splitlines()]
    items = [RetrievedItem(100 + i, s["title"], s["type"], s["category"], s.get("error_message", ""),
                           s.get("wrong_code", ""), s.get("correct_code", ""), 0.5, 0.0, 0.5)
             for i, s in enumerate(seeds[:6])]
    rules = [ResidentRule(7, seeds[10]["title"] + ".", 12)]
    ctx = RoundContext(round=rnd, budget=3, rounds_left=3 - rnd, episode=episode, items=items, rules=rules,
                       current_code=None, feedback=None, history=[])
    return task, target, items, rules, Prompts().round_messages(task, target, ctx)


def test_a_round_reads_the_rendered_prompt_and_answers_in_the_real_protocol() -> None:
    task, _, items, _, messages = _round_messages("softmax")
    prompt = read_round(messages[0].content, messages[1].content)
    assert prompt is not None
    assert (prompt.operator, prompt.category, prompt.round) == ("softmax", task.category, 1)
    assert [s.ref for s in prompt.shown] == [f"E{i.item_id}" for i in shown_order(items)] + ["R7"]
    assert [s.title for s in prompt.shown][:len(items)] == [i.title for i in shown_order(items)]
    model = OracleModel(OracleConfig(seed=1, freeform=0.0))
    reply = model.complete(list(messages))
    parsed = parse_reply(reply.text, language="c", shown_items=[i.item_id for i in items],
                         shown_rules=[7])
    truth = reply.extra["truth"]
    assert reply.extra["synthetic"] == "oracle"
    assert {f"E{i}": a for i, (a, _) in parsed.decisions.items()} == {
        ref: t["adopted"] for ref, t in truth.items() if ref.startswith("E")}
    assert parsed.resident_used == ([7] if truth["R7"]["adopted"] else [])
    assert parsed.code is not None
    if reply.extra["kernel"].startswith("slow:"):  # a correct first kernel: the expert's work, repeated
        assert parsed.code.strip() == _variant(task, model.world.slow)[1].strip()
        assert read_repeats(parsed.code) == model.world.slow == int(reply.extra["kernel"].split(":")[1])
    else:
        assert parsed.code.strip() == canary_sources(task)[reply.extra["kernel"].split(":")[1]].strip()


def test_free_text_decisions_are_rejected_by_the_parser_and_restated_after_the_gates_reask() -> None:
    _, _, items, _, messages = _round_messages("softmax")
    model = OracleModel(OracleConfig(seed=1, freeform=1.0))  # every E line in a free-text form
    asked: list[str] = []

    def ask(msgs, purpose="round", grammar=None, output_schema=None):
        asked.append(purpose)
        return model.complete(list(msgs))

    outcome = complete_reply(ask, list(messages), prompts=Prompts(), shown_items=[i.item_id for i in items],
                             shown_rules=[7], language="c", max_reasks=2)
    first = outcome.replies[0]
    assert asked[:2] == ["round", "reask-1"] and len(first.extra["freeform"]) == len(items)
    assert outcome.missing == []
    assert {f"E{i}": a for i, (a, _) in outcome.parsed.decisions.items()} == {
        ref: t["adopted"] for ref, t in first.extra["truth"].items() if ref.startswith("E")}


def test_adoption_follows_the_truth_fallibly_and_useful_adoptions_raise_success() -> None:
    model = OracleModel(OracleConfig(seed=5))
    adopted = {True: [], False: []}
    for rnd in range(1, 4):
        for name in ("softmax", "abs", "rms_norm", "argmax", "relu", "layer_norm", "gelu"):
            if name not in _builtin_tasks():
                continue
            _, _, _, _, messages = _round_messages(name, rnd)
            prompt = read_round(messages[0].content, messages[1].content)
            assert prompt is not None
            for _, a, good in model.decisions(prompt):
                adopted[good].append(a)
    rate = {k: sum(v) / len(v) for k, v in adopted.items() if v}
    assert rate[True] > rate[False] > 0.0  # more likely for useful items, and sometimes fooled
    from sagekernel.models.oracle_world import success_probability

    cfg = model.world
    assert (success_probability(cfg, "x", 1, 2, 0) > success_probability(cfg, "x", 1, 0, 0)
            > success_probability(cfg, "x", 1, 0, 2))
    assert success_probability(cfg, "x", 3, 0, 0) < success_probability(cfg, "x", 1, 0, 0)


def test_at_most_attention_items_are_adopted_in_one_round() -> None:
    _, _, items, _, messages = _round_messages("softmax")
    prompt = read_round(messages[0].content, messages[1].content)
    assert prompt is not None and len(prompt.shown) == len(items) + 1
    for attention in (1, 2, 5):
        every = OracleConfig(seed=1, adopt_useful=1.0, adopt_useless=1.0, attention=attention)
        everything = OracleModel(every)
        assert sum(a for _, a, _ in everything.decisions(prompt)) == attention
    nothing = OracleModel(OracleConfig(seed=1, adopt_useful=0.0, adopt_useless=0.0))
    assert not any(a for _, a, _ in nothing.decisions(prompt))


def _opt_messages(task_name: str, rnd: int, current_code: str):
    task, target, items, rules, _ = _round_messages(task_name, rnd, EpisodeKind.OPT)
    ctx = RoundContext(round=rnd, budget=3, rounds_left=3 - rnd, episode=EpisodeKind.OPT, items=items,
                       rules=rules, current_code=current_code, feedback=None, history=[])
    return Prompts().round_messages(task, target, ctx)


def test_an_optimisation_round_adopts_by_the_speed_truth_and_writes_the_expert_or_a_slower_variant() -> None:
    task = _builtin_tasks()["softmax"]
    slow = _variant(task, 16)[1]
    seen = {"expert": 0, "slow:32": 0}
    for seed in range(12):
        model = OracleModel(OracleConfig(seed=seed, freeform=0.0))
        messages = _opt_messages("softmax", 2, slow)
        prompt = read_round(messages[0].content, messages[1].content)
        assert prompt is not None and prompt.optimising
        reply = model.complete(list(messages))
        seen[reply.extra["kernel"]] += 1
        # the truth it adopts by is the "faster" goal's, a separate draw from the "correct" one
        for shown, adopted, good in model.decisions(prompt):
            assert good == useful(model.world, shown.title, prompt.category, "faster")
            assert reply.extra["truth"][shown.ref] == {"adopted": adopted, "useful": good}
        assert 0.0 < reply.extra["p_faster"] < 1.0
        # from the expert kernel there is nothing faster to write: it is resubmitted
        again = model.complete(list(_opt_messages("softmax", 3, _variant(task, 1)[1])))
        assert again.extra["kernel"] == "expert"
    assert seen["expert"] > 0 and seen["slow:32"] > 0
    titles = [f"Check the boundary handling in reduction kernels (t{i})" for i in range(400)]
    cfg = OracleConfig(seed=3)
    assert ([useful(cfg, t, "reduction", "faster") for t in titles]
            != [useful(cfg, t, "reduction") for t in titles])
    # without a speed model (slow = 1) an optimisation round keeps the expert kernel and adopts nothing
    plain = make_oracle("oracle:seed=2,slow=1")
    reply = plain.complete(list(_opt_messages("softmax", 2, _variant(task, 1)[1])))
    assert reply.extra["kernel"] == "expert"
    assert not any(t["adopted"] for t in reply.extra["truth"].values())


@pytest.mark.oracle  # ~5 s quiet, ~30 s at load 10 (the timing server starts torch): the claims' step
def test_the_real_harness_times_the_slow_variant_and_finds_the_expert_faster() -> None:
    """The speed model's only lever is the source: the harness compiles, checks and times both."""
    task = _builtin_tasks()["softmax"]
    target = get_target("cpu")
    cfg = HarnessConfig(trials=1, variant_trials=1, held_out_shape=False, coverage_trials=False,
                        canaries=False, fresh_process_recheck=False, warmup=2, iters=20, rounds=5,
                        calibration_rounds=0, timed_held_out=False)
    slow = evaluate(task, _variant(task, 16)[1], target, cfg)
    fast = evaluate(task, _variant(task, 1)[1], target, cfg)
    assert slow.correct and fast.correct and slow.candidate_ms and fast.candidate_ms
    assert beats(fast, slow.timing, slow.candidate_ms) and not beats(slow, fast.timing, fast.candidate_ms)


def test_a_short_stream_runs_through_the_real_harness_and_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    cfg = RunConfig(workspace=ws, model="oracle:seed=1,base=0.3", suite="builtin", limit=2, budget=2,
                    method="sage", embedder="none", diagnostics=False, progress=False,
                    harness={"skip_timing": True, "trials": 1, "variant_trials": 1, "held_out_shape": False,
                             "coverage_trials": False, "canaries": False, "fresh_process_recheck": False})
    run(cfg)
    con = sqlite3.connect(ws / "sage.db")
    extras = [json.loads(e) for (e,) in con.execute("SELECT extra_json FROM exchanges")]
    assert extras and all(e.get("synthetic") == "oracle" for e in extras)
    kernels = {(e["operator"], e["round"]): e["kernel"] for e in extras if "kernel" in e}
    stages = {(op, rnd): json.loads(trace)["verdict"]["stage"]
              for op, rnd, trace in con.execute("SELECT operator, round, trace_json FROM round_traces")}
    assert set(stages) == set(kernels) and len(stages) >= 2
    # the real harness judged the generator's kernels: the expert's pass, the wrong ones fail a trial
    for key, kernel in kernels.items():
        judged = "correctness" if kernel.startswith("wrong:") else "ok"
        assert stages[key] == judged, (key, kernel, stages[key])
    distilled = [t for (t,) in con.execute("SELECT title FROM items WHERE source = 'distilled'")]
    lessons = {t for e in extras for t in e.get("lessons", [])}
    assert set(distilled) <= lessons
    assert all(home_category(t) is not None for t in distilled)


def test_memory_text_that_does_not_help_costs_the_round_its_measured_share() -> None:
    """The context cost: each shown item's length is read from the rendered prompt, and the text of
    the items that do not help the round's goal lowers P(correct) geometrically (`retained`)."""
    from sagekernel.models.backend import estimate_tokens
    from sagekernel.models.oracle_world import retained, shown_tokens, success_probability

    _, _, items, rules, messages = _round_messages("softmax")
    user = messages[1].content
    length = shown_tokens(user)
    assert set(length) == {f"E{i.item_id}" for i in items} | {"R7"}
    assert length["R7"] == estimate_tokens(f"[R7] {rules[0].rule_text}")
    assert all(n > estimate_tokens(i.title) for i in items for n in [length[f"E{i.item_id}"]])
    prompt = read_round(messages[0].content, user)
    assert prompt is not None and {s.ref: s.tokens for s in prompt.shown} == length
    cfg = OracleConfig(seed=1, freeform=0.0)
    assert retained(cfg, 0) == 1.0 and retained(OracleConfig(distraction=0.0), 5000) == 1.0
    assert retained(cfg, 1000) == pytest.approx(0.9) and retained(cfg, 3000) == pytest.approx(0.9 ** 3)
    assert (success_probability(cfg, "x", 1, 1, 0, 0) > success_probability(cfg, "x", 1, 1, 0, 2000)
            == pytest.approx(success_probability(cfg, "x", 1, 1, 0, 0) * 0.81))
    reply = OracleModel(cfg).complete(list(messages))
    padding = sum(length[ref] for ref, t in reply.extra["truth"].items() if not t["useful"])
    assert reply.extra["padding_tokens"] == padding > 0
    n_useful = sum(t["adopted"] and t["useful"] for t in reply.extra["truth"].values())
    n_useless = sum(t["adopted"] and not t["useful"] for t in reply.extra["truth"].values())
    assert reply.extra["p_correct"] == round(
        success_probability(cfg, "softmax", prompt.level, n_useful, n_useless, padding), 4)


def test_a_resident_rule_is_as_long_as_the_template_asks_and_names_its_item() -> None:
    from sagekernel.agent.prompt import Prompts as P
    from sagekernel.memory.embedding import count_tokens
    from sagekernel.models.base import Message
    from sagekernel.models.oracle_world import rule_title

    model = OracleModel(OracleConfig(seed=2))
    titles = [f"Check the boundary handling in reduction kernels (r{i})" for i in range(60)]
    texts = []
    for title in titles:
        item = RetrievedItem(1, title, "correctness", "reduction", "", "", "", 0.0, 0.0, 0.0)
        user = P().render("abstract_rule.j2", target_name="cpu", item=item, rationales=[])
        text = model.complete([Message("user", user)]).text
        assert rule_title(text.splitlines()[0]) == title  # the first line names the item
        assert text.count("\n```c\n") <= 1 and len(text.split("```c\n")[-1].splitlines()) <= 11
        texts.append(text)
    tokens = [count_tokens(t) for t in texts]
    assert max(tokens) <= 300 and min(tokens) < 40 < max(tokens)  # 1-3 sentences, 0-10 idiom lines
    assert len(set(texts)) == len(texts) and texts == [model._rule(t) for t in titles]  # a pure function
    short = OracleModel(OracleConfig(seed=2, rule_lines=0))
    assert all("```" not in short._rule(t) for t in titles)


def test_a_lesson_is_the_same_whatever_the_harness_measured() -> None:
    """One world's lessons, and so their hidden truth, do not change with the inputs and timings
    the distillation prompt quotes (the harness draws and measures them afresh in every run); a
    different change does change them."""
    from sagekernel.models.base import Message

    def distill(after: str, change: str = "a faster kernel") -> list[str]:
        user = ('Now, instead of writing a kernel, you are curating a memory of reusable lessons.\n'
                'While writing the kernel for the operator "softmax" (reduction), these verified changes '
                f'happened:\n## Change 1: {change}\nAfter: {after}\n'
                "Write at most 2 lessons that would help on OTHER operators.\n"
                "type: <one of: algorithmic_optimization, memory_access>\n")
        reply = OracleModel(OracleConfig(seed=4)).complete([Message("user", user)])
        return list(reply.extra["lessons"])

    first = distill("correct, 0.0123 ms (speedup 2.41x, interval 2.2-2.6); expected 0.51, got 0.49")
    again = distill("correct, 0.0456 ms (speedup 1.87x, interval 1.7-2.0); expected -3, got 2")
    assert first and first == again
    assert distill("correct", change="an error removed by a revision") != first
