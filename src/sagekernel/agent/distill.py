"""Experience distillation (spec §5): new memory items from an episode's verified transitions.

A transition is verified when the harness saw it: in a corr episode, a revision that got past
the stage where the previous attempt failed (it removed the recorded compile/runtime/mismatch
error); in an opt episode, a correct kernel strictly faster than the best before it. Without a
transition nothing is distilled (no model call). The frozen model proposes at most `max_items`
lessons through `prompts/distill.j2`; the parser keeps those that are complete, deduplicates them
(exact title or fix code), drops any that mention an evaluation size of the task (spec §5:
no hard-coded shapes; the filter is memory/literals.py, shared with the store's writes) and any
whose fix calls a function the transitions' code never names (spec §5: grounded in a verified
transition; `ungrounded_calls`). The
store deduplicates against existing items (embedding similarity ≥ 0.9) when the policy learns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagekernel import defaults
from sagekernel.agent.grammar import lessons_grammar
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.state import OperatorOutcome
from sagekernel.errors import BudgetExhausted, SageError
from sagekernel.harness.verdict import Stage
from sagekernel.memory.literals import mentions_literal, size_literals
from sagekernel.models.base import Message, Reply
from sagekernel.protocols import Target
from sagekernel.records import EpisodeKind, EpisodeTrace, ItemDraft, RoundTrace
from sagekernel.tasks.task import Task

#: Item types (the seed memory's vocabulary); the first of each tuple is the fallback.
CORR_TYPES = ("correctness", "compile_error", "runtime_error", "numerical_stability", "memory_access", "lint")
OPT_TYPES = ("performance", "algorithmic_optimization", "memory_access")
#: How far a candidate got, per verdict stage (a later stage is progress). Total over `Stage` (a test
#: enumerates it): INTEGRITY ran to the end and was refused like a wrong result; BROKEN_TASK (a
#: null-kernel canary passed) says nothing about the candidate, so no transition starts or ends there.
STAGE_RANK: dict[Stage, int | None] = {
    Stage.PARSE: 0, Stage.LINT: 1, Stage.COMPILE: 2, Stage.LOAD: 3, Stage.RUNTIME: 4, Stage.CORRECTNESS: 5,
    Stage.INTEGRITY: 5, Stage.TIMING: 6, Stage.OK: 7, Stage.BROKEN_TASK: None,
}
_MAX_TRANSITIONS = 3
_FIELD = re.compile(r"^\s*[-*]?\s*\**(title|type|category|error[_ ]message|wrong[_ ]code|correct[_ ]code)"
                    r"\**\s*:\s*(.*)$", re.IGNORECASE)
_LESSON = re.compile(r"^\s*[#*>\s]*(?:lesson|item)\b\s*\d*\s*:?\s*\**\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Transition:
    kind_text: str
    problem: str
    outcome: str
    before: str
    after: str


def _stage(rt: RoundTrace) -> Stage:
    return Stage((rt.verdict or {}).get("stage", Stage.PARSE.value))


def _message(rt: RoundTrace, limit: int = 600) -> str:
    return str((rt.verdict or {}).get("message", "")).strip()[:limit]


def transitions(trace: EpisodeTrace, outcome: OperatorOutcome) -> list[Transition]:
    """The verified transitions of one episode, oldest first (at most the last three)."""
    found: list[Transition] = []
    src = outcome.sources
    if trace.episode is EpisodeKind.CORR:
        prev: RoundTrace | None = None
        for rt in trace.rounds:
            if rt.candidate_hash not in src or rt.suspect:  # a quarantined verdict verifies nothing
                continue
            now, before = STAGE_RANK[_stage(rt)], STAGE_RANK[_stage(prev)] if prev is not None else None
            if prev is not None and now is not None and before is not None and now > before:
                was = _stage(prev).value
                after = ("correct" if rt.counts_as_success
                         else f"got past '{was}', now fails at '{_stage(rt).value}'")
                found.append(Transition("an error removed by a revision",
                                        f"failed at '{was}': {_message(prev)}", after,
                                        src[prev.candidate_hash or ""], src[rt.candidate_hash or ""]))
            prev = rt
    else:
        first = next((r for r in outcome.rounds if r.round == outcome.first_correct_round), None)
        best_ms, best_src = outcome.t_first_ms, src.get(first.candidate_hash or "") if first else None
        for rt in trace.rounds:
            ms = rt.latency_ms
            if rt.counts_as_success and ms is not None and best_ms is not None and best_src and ms < best_ms:
                after = src[rt.candidate_hash or ""]
                faster = f"correct and faster: {ms:.4f} ms ({best_ms / ms:.2f}x)"
                found.append(Transition("a verified speed-up", f"correct but slow: {best_ms:.4f} ms", faster,
                                        best_src, after))
                best_ms, best_src = ms, after
    return found[-_MAX_TRANSITIONS:]


def parse_lessons(text: str) -> list[dict[str, str]]:
    """Lessons in the distill format; tolerant of markdown and of inline (unfenced) fields."""
    lessons: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    field_name: str | None = None
    code: list[str] | None = None
    for line in text.splitlines():
        if code is not None:  # inside a fence
            if re.match(r"^\s*(```|~~~)\s*$", line):
                if current is not None and field_name:
                    current[field_name] = "\n".join(code).strip("\n")
                code, field_name = None, None
            else:
                code.append(line)
            continue
        if _LESSON.match(line):
            current = {}
            lessons.append(current)
            field_name = None
            continue
        match = _FIELD.match(line)
        if match:
            if current is None:
                current = {}
                lessons.append(current)
            field_name = match.group(1).lower().replace(" ", "_")
            value = match.group(2).strip()
            if value.startswith("```"):
                code = []
            elif value:
                current[field_name] = value.strip("*` ")
                field_name = field_name if field_name.endswith("_code") else None
            continue
        if re.match(r"^\s*(```|~~~)", line) and field_name and field_name.endswith("_code"):
            code = []
    return [lesson for lesson in lessons if lesson]


#: Words that look like calls in a snippet but name no function.
_NOT_CALLS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "defined", "elif", "and", "or",
                        "not", "in", "assert", "lambda", "with"})
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\(")


def ungrounded_calls(code: str, verified_sources: list[str]) -> list[str]:
    """The functions `code` calls that no verified source calls or names (spec §5: each item is
    grounded in a verified transition). A 1.5B model distilled "use `__builtin_ia32_expf`" from
    an `abs` kernel that never called it; the next operator adopted it and failed to compile in
    every round (demo run)."""
    known = {word for src in verified_sources for word in re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", src)}
    calls = dict.fromkeys(m.group(1) for m in _CALL.finditer(code))
    return [c for c in calls if c not in _NOT_CALLS and c not in known]


def drafts_from(lessons: list[dict[str, str]], task: Task, episode: EpisodeKind,
                max_items: int, verified_sources: list[str] | None = None) -> list[ItemDraft]:
    """Complete, deduplicated lessons without the task's sizes; with `verified_sources` (the code
    of the transitions the lessons come from), also only those whose fix calls nothing that code
    does not have."""
    allowed = CORR_TYPES if episode is EpisodeKind.CORR else OPT_TYPES
    sizes = size_literals(task.all_shapes())
    out: list[ItemDraft] = []
    seen: set[str] = set()
    for lesson in lessons:
        title, fix = lesson.get("title", "").strip(), lesson.get("correct_code", "").strip()
        if not title or not fix:
            continue
        type_ = lesson.get("type", "").strip().lower().replace(" ", "_")
        draft = ItemDraft(title=title, type=type_ if type_ in allowed else allowed[0],
                          category=lesson.get("category", "").strip() or task.category,
                          error_message=lesson.get("error_message", "").strip(),
                          wrong_code=lesson.get("wrong_code", "").strip(), correct_code=fix,
                          source_operator=task.name)
        text = "\n".join((draft.title, draft.error_message, draft.wrong_code, draft.correct_code))
        keys = {re.sub(r"\W+", " ", title.lower()).strip(), re.sub(r"\s+", "", fix)}
        if mentions_literal(text, sizes) or keys & seen:
            continue
        if verified_sources is not None and ungrounded_calls(fix, verified_sources):
            continue
        seen |= keys
        out.append(draft)
        if len(out) >= max_items:
            break
    return out


def distill(ask: Callable[..., Reply], prompts: Prompts, task: Task, target: Target,
            trace: EpisodeTrace, outcome: OperatorOutcome, *,
            max_items: int = defaults.MAX_NEW_ITEMS) -> tuple[list[ItemDraft], Reply | None]:
    """Ask the model for at most `max_items` grounded lessons; (drafts, the reply or None if not asked).

    `ask(messages, grammar=...)`: one model call; the grammar (agent/grammar.py) holds a backend
    that constrains decoding to the lesson format and its length caps."""
    found = transitions(trace, outcome)
    if not found or max_items <= 0:
        return [], None
    types = CORR_TYPES if trace.episode is EpisodeKind.CORR else OPT_TYPES
    user = prompts.render("distill.j2", target_name=target.name, language=target.language, task=task,
                          transitions=found, max_items=max_items, episode=trace.episode.value, types=types)
    grammar = lessons_grammar(max_items=max_items, types=types, category=task.category,
                              language=target.language)
    # the rounds' system message: the call reuses their cached prefix and leaves it cached for the next
    reply = ask([Message("system", prompts.system(target, task)), Message("user", user)], grammar=grammar)
    sources = [code for t in found for code in (t.before, t.after)]
    return drafts_from(parse_lessons(reply.text), task, trace.episode, max_items, sources), reply


def make_rule_abstractor(ask: Callable[[list[Message]], Reply], prompts: Prompts,
                         target_name: str = "") -> Callable[[Any, list[str]], str]:
    """The UGC rule abstraction of spec §6.4 done by the frozen backbone (`prompts/abstract_rule.j2`).

    Returns "" when the model call fails, so the memory falls back to its own rule text; a spent
    budget is not a failure of the call and stops the run (BudgetExhausted propagates). The runner
    calls this before the update's transaction, so the call is logged like any other."""
    def abstract(item: Any, rationales: list[str]) -> str:
        user = prompts.render("abstract_rule.j2", target_name=target_name, item=item,
                              rationales=[r for r in rationales if r.strip()][:5])
        try:
            text = ask([Message("user", user)]).text.strip()
        except BudgetExhausted:
            raise
        except SageError:
            return ""
        return re.sub(r"^(?:rule\s*:\s*)", "", text, flags=re.IGNORECASE).strip()

    return abstract
