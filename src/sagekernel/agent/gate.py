"""The trace-completeness gate (spec §2 step 3, §15 "Hook").

No evaluation runs while a retrieved item's adoption is unresolved (⊥) or the reply has no
usable kernel source (for a multi-file target: a block for every file it names). Instead the
model is re-asked with a precise message naming exactly what
is missing -- at most `max_reasks` times; the re-asks cost model calls but never an evaluation.
After the last re-ask, unresolved items stay ⊥ (they get no update, spec §2) and a reply with no
code raises `ReplyIncomplete`, which the loop records as a PARSE-stage failure that spends the round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sagekernel.agent.exceptions import ReplyIncomplete
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.protocol import ParsedReply, parse_reply
from sagekernel.models.base import Message, Reply


@dataclass
class GateOutcome:
    parsed: ParsedReply
    replies: list[Reply] = field(default_factory=list)  # the first reply and one per re-ask
    reasks: int = 0
    missing: list[int] = field(default_factory=list)  # still ⊥ after the last re-ask


def complete_reply(ask: Callable[[list[Message], int], Reply], messages: list[Message], *, prompts: Prompts,
                   shown_items: Sequence[int], shown_rules: Sequence[int], language: str,
                   max_reasks: int, paths: Sequence[str] = ()) -> GateOutcome:
    """Ask, parse, and re-ask until the reply is complete or the re-asks are spent.

    `ask(messages, reask)` makes one model call (`reask` = 0 for the round's first call, then 1, 2, ..).
    Raises ReplyIncomplete (carrying the outcome in `.outcome`) when no usable code came back."""
    convo = list(messages)
    reply = ask(convo, 0)
    out = GateOutcome(parse_reply(reply.text, shown_items=shown_items, shown_rules=shown_rules,
                                  language=language, paths=paths), [reply])
    while True:
        missing = [i for i in shown_items if i not in out.parsed.decisions]
        conflicts = sorted(out.parsed.conflicts)
        missing_files = out.parsed.missing_files(paths)
        need_code = not out.parsed.has_source(paths)
        out.missing = missing + conflicts
        if (not out.missing and not need_code) or out.reasks >= max_reasks:
            break
        convo += [Message("assistant", reply.text),
                  Message("user", prompts.reask(missing=missing, conflicts=conflicts,
                                                unknown=out.parsed.unknown_ids + out.parsed.unknown_files,
                                                need_code=need_code and not missing_files,
                                                missing_files=missing_files, language=language))]
        out.reasks += 1
        reply = ask(convo, out.reasks)
        out.replies.append(reply)
        out.parsed = out.parsed.merge(parse_reply(reply.text, shown_items=shown_items,
                                                  shown_rules=shown_rules, language=language, paths=paths))
    if not out.parsed.has_source(paths):
        raise IncompleteReply(out, out.parsed.missing_files(paths))
    return out


class IncompleteReply(ReplyIncomplete):
    """ReplyIncomplete with the gate's outcome attached (the trace still records the decisions)."""

    def __init__(self, outcome: GateOutcome, missing_files: Sequence[str] = ()) -> None:
        if missing_files:
            what = (f"no block for {', '.join(missing_files)} in the reply after {outcome.reasks} re-ask(s): "
                    "expected one fenced block per file, each headed by its path (FILE: <path>)")
        else:
            what = (f"no usable kernel source in the reply after {outcome.reasks} re-ask(s): "
                    "expected one fenced code block with the complete kernel")
        super().__init__(what)
        self.outcome = outcome
