"""Prompt assembly from the template files in `sagekernel/prompts/` (Jinja2, StrictUndefined).

The code here only gathers values; every word the model reads is in a template:
`system.j2` (role + the target's three cold-start references, spec §10), `round.j2` (task,
contract, resident rules with R ids, retrieved items with E ids, the current kernel, feedback,
history, the reply format), `reask.j2` (trace-completeness gate) and `distill.j2` (spec §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

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

    def system(self, target: Target) -> str:
        return self.render("system.j2", target_name=target.name, language=target.language,
                           knowledge=target.knowledge())

    def round_messages(self, task: Task, target: Target, ctx: RoundContext,
                       files: Sequence[Any] = ()) -> list[Message]:
        """`files`: the FileSpecs of a multi-file target (empty: the single kernel block)."""
        user = self.render(
            "round.j2", task=task, reference=task.source, contract=target.contract(task),
            language=target.language, round=ctx.round, budget=ctx.budget, rounds_left=ctx.rounds_left,
            episode=ctx.episode.value, items=list(ctx.items), rules=list(ctx.rules),
            current_code=ctx.current_code, feedback=ctx.feedback, history=list(ctx.history),
            best_ms=ctx.best_ms or 0.0, ref_ms=ctx.ref_ms or 0.0, files=list(files) if len(files) > 1 else [])
        return [Message("system", self.system(target)), Message("user", user)]

    def reask(self, *, missing: Sequence[int], conflicts: Sequence[int], unknown: Sequence[str],
              need_code: bool, language: str, missing_files: Sequence[str] = ()) -> str:
        return self.render("reask.j2", missing=list(missing), conflicts=list(conflicts),
                           unknown=list(unknown), need_code=need_code, language=language,
                           missing_files=list(missing_files))
