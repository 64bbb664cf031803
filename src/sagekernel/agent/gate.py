"""The trace-completeness gate (spec §2 step 3, §15 "Hook").

No evaluation runs while a retrieved item's adoption is unresolved (⊥) or the reply has no
usable kernel source (for a multi-file target: a block for every file it names). Instead the
model is re-asked with a precise message naming exactly what
is missing -- at most `max_reasks` times; the re-asks cost model calls but never an evaluation.
A re-ask whose answer brings nothing new (no new decision, no resolved conflict, no missing code)
ends the re-asks: at a low temperature the next answer to the same question repeats it (seen in
demo runs, reask-2 identical to reask-1). After the last re-ask, unresolved items stay ⊥ (they
get no update, spec §2) and a reply with no code raises `ReplyIncomplete`, which the loop records
as a PARSE-stage failure that spends the round.

Every call carries the grammar of what it asks for (agent/grammar.py): a backend that constrains
decoding (the embedded model) then answers completely the first time and the gate never re-asks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sagekernel.agent.exceptions import ReplyIncomplete
from sagekernel.agent.grammar import reask_grammar, reply_grammar
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.protocol import ParsedReply, parse_reply
from sagekernel.models.base import Message, Reply


@dataclass
class GateOutcome:
    parsed: ParsedReply
    replies: list[Reply] = field(default_factory=list)  # the first reply and one per re-ask
    reasks: int = 0
    missing: list[int] = field(default_factory=list)  # still ⊥ after the last re-ask


def complete_reply(ask: Callable[[list[Message], int, str], Reply], messages: list[Message], *,
                   prompts: Prompts, shown_items: Sequence[int], shown_rules: Sequence[int], language: str,
                   max_reasks: int, files: Sequence[tuple[str, str]] = ()) -> GateOutcome:
    """Ask, parse, and re-ask until the reply is complete or the re-asks are spent.

    `ask(messages, reask, grammar)` makes one model call (`reask` = 0 for the round's first call,
    then 1, 2, ..; `grammar`: GBNF of the answer asked for). `files`: (path, language) of each
    file of a multi-file target (empty or one: the single kernel block).
    Raises ReplyIncomplete (carrying the outcome in `.outcome`) when no usable code came back."""
    paths = [path for path, _ in files]
    convo = list(messages)
    reply = ask(convo, 0, reply_grammar(items=shown_items, rules=shown_rules, language=language, files=files))
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
        asked = set(out.missing)
        grammar = reask_grammar(items=[i for i in shown_items if i in asked], language=language,
                                need_code=need_code and not missing_files,
                                files=[f for f in files if f[0] in missing_files])
        reply = ask(convo, out.reasks, grammar)
        out.replies.append(reply)
        before = out.parsed
        out.parsed = out.parsed.merge(parse_reply(reply.text, shown_items=shown_items,
                                                  shown_rules=shown_rules, language=language, paths=paths))
        if not _progressed(before, out.parsed, shown_items, paths):
            out.missing = out.parsed.unresolved(shown_items)
            break
    if not out.parsed.has_source(paths):
        raise IncompleteReply(out, out.parsed.missing_files(paths))
    return out


def _progressed(before: ParsedReply, after: ParsedReply, shown_items: Sequence[int],
                paths: Sequence[str]) -> bool:
    """The re-ask's answer resolved an item or brought missing code or files."""
    return (len(after.unresolved(shown_items)) < len(before.unresolved(shown_items))
            or len(after.missing_files(paths)) < len(before.missing_files(paths))
            or (after.has_source(paths) and not before.has_source(paths)))


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
