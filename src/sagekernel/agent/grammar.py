"""GBNF grammars of the reply protocol (agent/protocol.py), for backends that constrain decoding.

prompts/round.j2 asks for a DIAGNOSIS line, the adoption block -- one `- E<id>: ADOPTED|NOT ADOPTED -
<reason>` line per retrieved item, then one `- R<id>: ...` line per resident rule: the canonical
line form of agent/decisions.py's records -- and the kernel in one fenced block (or one `FILE:
<path>` block per file of a multi-file target). This grammar is how the embedded model carries the
structured block: it can write nothing but valid records, one per shown id, so the strict reader
always validates them. It keeps the line form rather than JSON because every token the grammar
forces is still decoded one at a time (~10 tokens/s on 2 cores): a JSON record costs about twice
the structure tokens of a line (docs/embedded_model.md). A 1.5B model often answers
with the format line copied verbatim ("ADOPTED or NOT ADOPTED"), with a placeholder instead of
code, or with a decision for one item of five: each costs a re-ask of 10-30 s on 2 cores, and a
re-ask at low temperature often repeats the same reply. Under `reply_grammar` the embedded model
(models/local.py) can only write a complete reply: every shown id once, in the order shown, with
exactly one of the two answers, then the code; after the last block it must stop.

The grammar fixes the form, never the content: which answer, the reason, the diagnosis and the
code are the model's. It also caps the diagnosis and each reason (`DIAGNOSIS_CHARS`,
`REASON_CHARS`): at ~11 tokens/s every sentence of prose is seconds of a round. What the grammar
admits is what the protocol parser reads (tests/test_agent_grammar.py). Backends without
constrained decoding ignore the grammar; the gate still checks every reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from sagekernel.agent.decisions import ADOPTED, NOT_ADOPTED, shown_ids

#: Longest diagnosis the grammar admits (one sentence; the model runs on past 200 if let).
DIAGNOSIS_CHARS = 160
#: Longest adoption reason the grammar admits (a short clause).
REASON_CHARS = 60

_COMMON = f"""
diagnosis ::= "DIAGNOSIS: " prose-first [^\\n]{{0,{DIAGNOSIS_CHARS - 1}}} "\\n"
reason ::= prose-first [^\\n]{{0,{REASON_CHARS - 1}}}
prose-first ::= [^<\\n ]
decision ::= "{ADOPTED}" | "{NOT_ADOPTED}"
code-body ::= [^<`\\n] code-rest "\\n"
code-rest ::= ([^`] | "`" [^`] | "``" [^`])*
"""
# `prose-first` and the body's first character exclude "<": a placeholder copied from the format
# ("<the COMPLETE kernel source ...>") cannot start the diagnosis, a reason or the code. The body
# ends with a newline, so the closing fence stands on its own line, as agent/files.py reads it.


def literal(text: str) -> str:
    """A GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _decision_lines(items: Sequence[int], rules: Sequence[int] = ()) -> list[str]:
    """One record line per id (items, then rules), in the order shown."""
    return [f'{literal(f"- {i}: ")} decision " - " reason "\\n"' for i in shown_ids(items, rules)]


def _single_block(language: str) -> str:
    return f'{literal("```" + language)} "\\n" code-body "```"'


def _file_blocks(files: Sequence[tuple[str, str]]) -> list[str]:
    """One `FILE: <path>` block per (path, language) of a multi-file target."""
    return [f'{literal(f"FILE: {path}")} "\\n" {literal("```" + lang)} "\\n" code-body "```\\n"'
            for path, lang in files]


def _grammar(parts: Sequence[str], extra_rules: Sequence[str] = ()) -> str:
    return "\n".join([f"root ::= {' '.join(parts)}", *extra_rules]) + _COMMON


def reply_grammar(*, items: Sequence[int], rules: Sequence[int], language: str,
                  files: Sequence[tuple[str, str]] = ()) -> str:
    """A round's whole reply: diagnosis, the adoption block -- a record line for each of `items`
    then of `rules`, in this order -- then the code (`files`: (path, language) of a multi-file
    target). With no ids (or when the decisions travel by a structured channel, the caller passes
    none) there is no adoption block."""
    parts = ["diagnosis"]
    extra: list[str] = []
    lines = _decision_lines(items, rules)
    if lines:
        parts.append('"ADOPTION:\\n"')
        parts.extend(f"adopt-{n}" for n in range(len(lines)))
        extra.extend(f"adopt-{n} ::= {line}" for n, line in enumerate(lines))
    parts.extend(_file_blocks(files) if len(files) > 1 else [_single_block(language)])
    return _grammar(parts, extra)


def reask_grammar(*, items: Sequence[int], language: str, need_code: bool,
                  files: Sequence[tuple[str, str]] = (), rules: Sequence[int] = ()) -> str:
    """The answer to a re-ask (prompts/reask.j2): the record lines still missing, then the code
    if it was missing (`files`: only the missing files of a multi-file target)."""
    parts = _decision_lines(items, rules)
    if files:
        parts.extend(_file_blocks(files))
    elif need_code:
        parts.append(_single_block(language))
    if not parts:
        raise ValueError("a re-ask asks for something: missing items, code or files")
    return _grammar(parts)


#: Longest one-line field of a distilled lesson (title, error_message).
LESSON_FIELD_CHARS = 160
#: Most lines of a lesson's code snippet (prompts/distill.j2 asks for at most 12).
SNIPPET_LINES = 12


def lessons_grammar(*, max_items: int, types: Sequence[str], category: str, language: str) -> str:
    """A distillation reply (prompts/distill.j2, read by agent/distill.py:parse_lessons): one to
    `max_items` LESSON blocks, each field on its line, the type one of `types`, the category the
    operator's, each snippet at most `SNIPPET_LINES` lines. Unconstrained, the 1.5B model wrote
    1,283 tokens for one distillation (2.7 minutes on 2 cores)."""
    if max_items < 1 or not types:
        raise ValueError("a distillation asks for at least one lesson of a known type")
    fence = literal("```" + language)
    return "\n".join([
        f"root ::= lesson{{1,{max_items}}}",
        'lesson ::= "LESSON\\n" "title: " field "\\n" "type: " lesson-type "\\n" '
        f'"category: " {literal(category)} "\\n" "error_message: " field "\\n" '
        '"wrong_code:\\n" snippet "correct_code:\\n" snippet',
        f"lesson-type ::= {' | '.join(literal(t) for t in types)}",
        f"field ::= prose-first [^\\n]{{0,{LESSON_FIELD_CHARS - 1}}}",
        'prose-first ::= [^<\\n ]',
        f'snippet ::= {fence} "\\n" snippet-line{{1,{SNIPPET_LINES}}} "```\\n"',
        'snippet-line ::= [^`\\n] [^`\\n]* "\\n" | "\\n"',
    ]) + "\n"
