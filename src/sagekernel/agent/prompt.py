"""Prompt assembly from the template files in `sagekernel/prompts/` (Jinja2, StrictUndefined).

The code here only gathers values; every word the model reads is in a template:
`system.j2` (role + the target's three cold-start references, spec §10, trimmed to the
operator's category by agent/knowledge.py) with `operator.j2` (task, reference, contract),
`round.j2` (resident rules with R ids, retrieved items with E ids, the round's goal, the current
kernel, feedback, history, the reply format for the backend's decision channel), `decide.j2` (the
json_schema channel's decisions call), `reask.j2` (trace-completeness gate) and `distill.j2`
(spec §5).

Layout, for prefix caches (llama.cpp's KV reuse in models/local.py, vLLM's and SGLang's prefix
caching behind an endpoint): the system message depends only on the target and the operator, so
it is byte-identical in every round, re-ask and distillation call of one operator, and the user
message starts with what changes least (resident rules, fixed while an operator runs; then the
retrieved items, by id: `shown_order`) and ends with what changes every round. A re-ask appends to the
round's conversation, so its whole prompt up to the new question is the previous prompt + reply.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from sagekernel.agent.decisions import SCHEMA_NAME
from sagekernel.agent.knowledge import knowledge_for
from sagekernel.models.base import Message
from sagekernel.protocols import Target
from sagekernel.records import EpisodeKind, ResidentRule, RetrievedItem
from sagekernel.tasks.task import Task


@dataclass(frozen=True)
class HistoryLine:
    """One earlier attempt, summarised for the prompt."""

    round: int
    episode: str
    summary: str


@dataclass(frozen=True)
class RoundContext:
    """Everything one round's prompt shows (besides the task and target, fixed per operator)."""

    round: int
    budget: int
    rounds_left: int  # after this round
    episode: EpisodeKind
    items: Sequence[RetrievedItem]
    rules: Sequence[ResidentRule]
    current_code: str | None
    feedback: str | None
    history: Sequence[HistoryLine]
    best_ms: float | None = None
    ref_ms: float | None = None


class Prompts:
    """Renders the shipped templates; one instance per target/task pair is cheap."""

    def __init__(self) -> None:
        self.env = Environment(loader=PackageLoader("sagekernel", "prompts"), undefined=StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                               autoescape=False)

    def render(self, name: str, **values: Any) -> str:
        return self.env.get_template(name).render(**values).strip() + "\n"

    def system(self, target: Target, task: Task) -> str:
        """The stable part: the same text for every call made for `task` (rounds, re-asks, distillation)."""
        return self.render("system.j2", target_name=target.name, language=target.language,
                           knowledge=knowledge_for(target.knowledge(), task.category), task=task,
                           reference=shown_reference(task.source), contract=target.contract(task))

    def round_messages(self, task: Task, target: Target, ctx: RoundContext,
                       files: Sequence[Any] = (), channel: str | None = None) -> list[Message]:
        """`files`: the FileSpecs of a multi-file target (empty: the single kernel block).
        `channel`: how decisions travel (agent/gate.py): "tool", "json_schema" or None (lines)."""
        user = self.render(
            "round.j2", task=task, language=target.language, round=ctx.round, budget=ctx.budget,
            rounds_left=ctx.rounds_left, episode=ctx.episode.value,
            items=[(item, shown_change(item.wrong_code, item.correct_code))
                   for item in shown_order(ctx.items)],
            rules=list(ctx.rules),
            current_code=ctx.current_code, feedback=shown_feedback(ctx.feedback), history=list(ctx.history),
            best_ms=ctx.best_ms or 0.0, ref_ms=ctx.ref_ms or 0.0, files=list(files) if len(files) > 1 else [],
            channel=channel or "lines", tool=SCHEMA_NAME)
        return [Message("system", self.system(target, task)), Message("user", user)]

    def decide(self, *, ids: Sequence[str]) -> str:
        """The json_schema channel's question after the kernel: the records of `ids`."""
        return self.render("decide.j2", ids=list(ids))

    def reask(self, *, missing: Sequence[int], conflicts: Sequence[int], unknown: Sequence[str],
              need_code: bool, language: str, missing_files: Sequence[str] = (),
              invalid: Sequence[str] = (), channel: str = "prose", ask_decisions: bool = True) -> str:
        return self.render("reask.j2", missing=list(missing) if ask_decisions else [],
                           conflicts=list(conflicts) if ask_decisions else [],
                           unknown=list(unknown), need_code=need_code, language=language,
                           missing_files=list(missing_files), invalid=list(invalid)[:8],
                           channel=channel, tool=SCHEMA_NAME)


def shown_order(items: Sequence[RetrievedItem]) -> list[RetrievedItem]:
    """The order a round lists its retrieved items in (and asks their decisions in): by item id,
    not by rank. Consecutive rounds of an operator often retrieve the same items in a different
    rank order; listed by id they are the same text, which a prefix cache serves instead of
    reading ~600 tokens again (~8 s on 2 cores). Which items are shown is retrieval's choice (spec
    §3); the order they are listed in is not part of the method (RECONSTRUCTED)."""
    return sorted(items, key=lambda item: item.item_id)


@dataclass(frozen=True)
class ShownChange:
    """An item's code pair as a round shows it: one-liners side by side, longer code as a diff."""

    wrong: str = ""  # one line each; empty when absent
    right: str = ""
    diff: str = ""  # a unified diff of wrong -> right without its headers, for multi-line code


#: Context lines around each change of an item's multi-line diff.
DIFF_CONTEXT = 1


def shown_change(wrong: str, right: str) -> ShownChange:
    """Most seed items pair two one-line snippets; a pair of whole kernels (a distilled item) would
    repeat every unchanged line twice, so it is shown as the lines that differ, with one line of
    context: about half the tokens, and the change is what the item teaches."""
    wrong, right = wrong.strip("\n"), right.strip("\n")
    if "\n" not in wrong.strip() and "\n" not in right.strip():
        return ShownChange(wrong=wrong.strip(), right=right.strip())
    if not wrong.strip() or not right.strip():  # only one side: show it whole
        return ShownChange(diff="\n".join(("+" if right.strip() else "-") + line
                                          for line in (right or wrong).splitlines()))
    lines = difflib.unified_diff(wrong.splitlines(), right.splitlines(), n=DIFF_CONTEXT, lineterm="")
    body = [line for line in lines if not line.startswith(("---", "+++", "@@"))]
    return ShownChange(diff="\n".join(body))


#: A verdict's feedback beyond this is cut: the first compiler errors and the first mismatch are
#: what the next attempt needs, and a page of cascading errors costs seconds of prompt reading.
FEEDBACK_CHARS = 2500


def shown_feedback(feedback: str | None, limit: int = FEEDBACK_CHARS) -> str | None:
    if feedback is None or len(feedback) <= limit:
        return feedback
    cut = feedback.rfind("\n", 0, limit)
    head = feedback[:cut if cut > limit // 2 else limit]
    return f"{head}\n[... {len(feedback) - len(head)} more characters of this feedback not shown]"


@lru_cache(maxsize=64)
def shown_reference(source: str) -> str:
    """The task file as the prompt shows it: without the `SAGE_TASK = {...}` metadata block.

    The block restates what the contract already says (names, shapes, sizes, attributes) and
    the tolerance (shown on its own line), and lists the test shapes, which invite
    special-casing. It stays when the code reads it (the model must see every name it uses) or
    when the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    blocks = [node for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
              and any(isinstance(t, ast.Name) and t.id == "SAGE_TASK"
                      for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    used = any(isinstance(n, ast.Name) and n.id == "SAGE_TASK" and isinstance(n.ctx, ast.Load)
               for n in ast.walk(tree))
    if len(blocks) != 1 or used or blocks[0].end_lineno is None:
        return source
    lines = source.splitlines(keepends=True)
    start, end = blocks[0].lineno - 1, blocks[0].end_lineno
    while end < len(lines) and not lines[end].strip() and start > 0 and not lines[start - 1].strip():
        end += 1  # one blank gap where the block stood, not two
    return "".join(lines[:start] + lines[end:])
