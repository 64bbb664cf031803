"""The trace-completeness gate (spec §2 step 3, §15 "Hook").

No evaluation runs while a retrieved item's adoption is unresolved (⊥) or the reply has no
usable kernel source (for a multi-file target: a block for every file it names). Instead the
model is re-asked with a precise message naming exactly what is missing or did not validate --
at most `max_reasks` times; the re-asks cost model calls but never an evaluation. A re-ask whose
answer brings nothing new (no new decision, no resolved conflict, no missing code) ends the
re-asks: at a low temperature the next answer to the same question repeats it (seen in demo runs,
reask-2 identical to reask-1). After the last re-ask, unresolved items stay ⊥ (they get no
update, spec §2) and a reply with no code raises `ReplyIncomplete`, which the loop records as a
PARSE-stage failure that spends the round.

Decisions are records of one schema (agent/decisions.py) and travel by the backend's channel
(`Model.structured_output`):

- "tool" (Anthropic): the round's call offers the `record_adoptions` tool; the model writes its
  diagnosis and fenced kernel as text and calls the tool in the same reply. A re-ask for
  decisions only forces the tool.
- "json_schema" (OpenAI-compatible endpoints that take `response_format`): the whole reply of
  such a call is JSON, and kernels written inside JSON strings come out worse, so the round's
  call asks for the diagnosis and the fenced kernel, and one more call in the same conversation
  (a prefix cache serves all of it but the question) asks for the decisions under the schema:
  the model records what the code it just wrote applies.
- None (no mechanism): the canonical line form, read strictly; the embedded model writes it
  under its grammar (agent/grammar.py), so it answers completely the first time.

A block that does not validate leaves its ids unresolved, and the re-ask says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sagekernel.agent.decisions import SCHEMA_DESCRIPTION, SCHEMA_NAME, read_block, request_schema, shown_ids
from sagekernel.agent.exceptions import ReplyIncomplete
from sagekernel.agent.grammar import reask_grammar, reply_grammar
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.protocol import ParsedReply, parse_reply
from sagekernel.models.base import Message, OutputSchema, Reply, StructuredOutput

#: One model call: (messages, purpose, grammar[, output schema]) -> Reply. `purpose` is "round",
#: "decide" (the json_schema channel's decisions call) or "reask-<n>"; the schema is passed only
#: when the call asks for a structured answer.
Ask = Callable[..., Reply]


@dataclass
class GateOutcome:
    parsed: ParsedReply
    replies: list[Reply] = field(default_factory=list)  # every call of the round, in order
    reasks: int = 0
    missing: list[int] = field(default_factory=list)  # still ⊥ after the last re-ask
    channel: str = "prose"  # how the decisions came: "json_schema", "tool", "grammar" or "prose"


def decision_schema(ids: Sequence[str], *, force: bool) -> OutputSchema:
    """The `OutputSchema` asking for the records of `ids`."""
    return OutputSchema(SCHEMA_NAME, SCHEMA_DESCRIPTION, request_schema(ids), force=force)


def channel_name(structured: StructuredOutput | None, grammar_decoding: bool) -> str:
    """What the trace records as the decisions' channel."""
    return structured or ("grammar" if grammar_decoding else "prose")


def complete_reply(ask: Ask, messages: list[Message], *, prompts: Prompts, shown_items: Sequence[int],
                   shown_rules: Sequence[int], language: str, max_reasks: int,
                   files: Sequence[tuple[str, str]] = (), structured: StructuredOutput | None = None,
                   channel: str | None = None) -> GateOutcome:
    """Ask, parse, and re-ask until the reply is complete or the re-asks are spent.

    `structured`: the backend's structured-output mechanism (None: the canonical line form).
    `files`: (path, language) of each file of a multi-file target (empty or one: the single kernel
    block). Raises IncompleteReply (carrying the outcome in `.outcome`) when no usable code came."""
    paths = [path for path, _ in files]
    ids = shown_ids(shown_items, shown_rules)
    lines = structured is None  # decisions are read from the prose lines

    def parse(reply: Reply, schema: OutputSchema | None) -> ParsedReply:
        parsed = parse_reply(reply.text if structured != "json_schema" or schema is None else "",
                             shown_items=shown_items, shown_rules=shown_rules, language=language,
                             paths=paths, read_decisions=lines)
        if schema is not None:
            parsed = parsed.with_decisions(read_block(reply.structured, shown_items=shown_items,
                                                      shown_rules=shown_rules))
        return parsed

    def call(purpose: str, grammar: str | None, schema: OutputSchema | None) -> Reply:
        reply = ask(convo, purpose, grammar) if schema is None else ask(convo, purpose, grammar, schema)
        out.replies.append(reply)
        return reply

    convo = list(messages)
    out = GateOutcome(ParsedReply(), channel=channel or structured or "prose")
    first_schema = decision_schema(ids, force=False) if structured == "tool" and ids else None
    grammar: str | None = reply_grammar(items=shown_items if lines else [],
                                        rules=shown_rules if lines else [], language=language, files=files)
    reply = call("round", grammar, first_schema)
    out.parsed = parse(reply, first_schema)
    decide_pending = structured == "json_schema" and bool(ids)
    while True:
        missing = [i for i in shown_items if i not in out.parsed.decisions]
        conflicts = sorted(out.parsed.conflicts)
        missing_files = out.parsed.missing_files(paths)
        need_code = not out.parsed.has_source(paths)
        out.missing = missing + conflicts
        if decide_pending and not need_code:  # the json_schema channel's decisions call (not a re-ask)
            convo += [Message("assistant", _shown(reply, structured)),
                      Message("user", prompts.decide(ids=ids))]
            decide = decision_schema(ids, force=True)
            reply = call("decide", None, decide)
            out.parsed = out.parsed.merge(parse(reply, decide))
            decide_pending = False
            continue
        if (not out.missing and not need_code) or out.reasks >= max_reasks:
            break
        asked = set(out.missing)
        asked_ids = [f"E{i}" for i in shown_items if i in asked]
        code_only = need_code and structured == "json_schema"  # the code first, in prose
        convo += [Message("assistant", _shown(reply, structured)),
                  Message("user", prompts.reask(
                      missing=missing, conflicts=conflicts,
                      unknown=out.parsed.unknown_ids + out.parsed.unknown_files,
                      need_code=need_code and not missing_files, missing_files=missing_files,
                      language=language, invalid=out.parsed.decided.invalid,
                      channel="prose" if lines else structured or "prose",
                      ask_decisions=bool(asked_ids) and not code_only))]
        out.reasks += 1
        schema: OutputSchema | None = None
        if not lines and asked_ids and not code_only:
            schema = decision_schema(asked_ids, force=structured == "json_schema" or not need_code)
        grammar = None
        if schema is None or not schema.force:
            grammar = reask_grammar(items=[i for i in shown_items if i in asked] if lines else [],
                                    language=language, need_code=need_code and not missing_files,
                                    files=[f for f in files if f[0] in missing_files]) \
                if (lines and asked) or need_code else None
        reply = call(f"reask-{out.reasks}", grammar, schema)
        before = out.parsed
        out.parsed = out.parsed.merge(parse(reply, schema))
        if code_only and out.parsed.has_source(paths) and ids:
            decide_pending = True
        if not _progressed(before, out.parsed, shown_items, paths):
            out.missing = out.parsed.unresolved(shown_items)
            break
    if not out.parsed.has_source(paths):
        raise IncompleteReply(out, out.parsed.missing_files(paths))
    return out


def _shown(reply: Reply, structured: StructuredOutput | None) -> str:
    """A reply as the conversation shows it to the model on the next call (text-only messages):
    a tool call is written after the text, so the model sees what it recorded."""
    if structured == "tool" and reply.structured is not None:
        return f"{reply.text}\n\n[{SCHEMA_NAME} called with {reply.structured}]".strip()
    return reply.text


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
