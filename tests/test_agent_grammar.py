"""The reply grammars (agent/grammar.py): what they admit is what the protocol parser reads.

The default run has no GGUF, so llama.cpp's grammar engine is not here; `sentence` below writes
replies along the grammar's own rules (each rule's literal text, free text where the rule allows
it), and the parser must read every decision, rule and block from them. The `local` test at the
end checks every grammar with llama.cpp's parser and decodes one real reply under it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagekernel.agent.decisions import ADOPTED, NOT_ADOPTED, Decision
from sagekernel.agent.distill import parse_lessons
from sagekernel.agent.grammar import (
    DIAGNOSIS_CHARS,
    REASON_CHARS,
    SNIPPET_LINES,
    lessons_grammar,
    literal,
    reask_grammar,
    reply_grammar,
)
from sagekernel.agent.protocol import parse_reply

KERNEL = "#include <stdint.h>\nvoid sage_kernel(const float* restrict x, float* restrict y, int64_t N) {\n" \
         "  for (int64_t i = 0; i < N; ++i) y[i] = x[i] < 0 ? -x[i] : x[i];\n}\n"
FILES = [("op_kernel/add_custom.cpp", "cpp"), ("op_host/add_custom_tiling.h", "cpp")]


def rules_of(grammar: str) -> dict[str, str]:
    return dict(re.findall(r"^([a-z0-9-]+) ::= (.*)$", grammar, re.M))


def test_a_reply_grammar_names_every_shown_id_once_in_order() -> None:
    g = reply_grammar(items=[15, 3, 27], rules=[4], language="c")
    rules = rules_of(g)
    assert rules["root"].split()[:2] == ["diagnosis", '"ADOPTION:\\n"']
    assert [rules[f"adopt-{n}"].split()[0] for n in range(3)] == ['"-', '"-', '"-']
    assert [re.search(r'"- E(\d+): "', rules[f"adopt-{n}"]).group(1) for n in range(3)] == ["15", "3", "27"]
    assert rules["decision"] == '"ADOPTED" | "NOT ADOPTED"'
    assert rules["adopt-3"] == '"- R4: " decision " - " reason "\\n"'  # rules after items, same record
    assert rules["root"].endswith('"```c" "\\n" code-body "```"')
    assert f"{{0,{DIAGNOSIS_CHARS - 1}}}" in rules["diagnosis"]
    assert f"{{0,{REASON_CHARS - 1}}}" in rules["reason"]


def test_without_items_or_rules_there_is_no_adoption_or_rules_section() -> None:
    rules = rules_of(reply_grammar(items=[], rules=[], language="python"))
    assert rules["root"] == 'diagnosis "```python" "\\n" code-body "```"'
    assert not any(name.startswith("adopt-") for name in rules)


def test_a_multi_file_grammar_heads_every_block_with_its_path() -> None:
    root = rules_of(reply_grammar(items=[4], rules=[], language="ascendc", files=FILES))["root"]
    assert root.index('"FILE: op_kernel/add_custom.cpp"') < root.index('"FILE: op_host/add_custom_tiling.h"')
    assert root.count("code-body") == 2


def test_a_reask_grammar_asks_only_for_what_is_missing() -> None:
    root = rules_of(reask_grammar(items=[7], language="c", need_code=False))["root"]
    assert root == '"- E7: " decision " - " reason "\\n"'
    root = rules_of(reask_grammar(items=[], language="ascendc", need_code=True, files=FILES[1:]))["root"]
    assert root.startswith('"FILE: op_host/add_custom_tiling.h"')
    with pytest.raises(ValueError):
        reask_grammar(items=[], language="c", need_code=False)


def test_literals_escape_quotes_and_backslashes() -> None:
    assert literal('a "b" \\ c\n') == '"a \\"b\\" \\\\ c\\n"'


_prose = st.text(st.characters(blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
                               blacklist_categories=("Cs",)), min_size=0, max_size=60)
_first = st.characters(blacklist_characters="<\n \r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\t",
                       blacklist_categories=("Cs", "Zs", "Cc"))


def sentence(first: str, rest: str) -> str:
    """Free text as the grammar admits it: a first character that is not "<", a space or a newline."""
    return (first + rest).rstrip()


def _valid(decision: str, rationale: str) -> bool:
    try:
        Decision(id="E1", decision=decision, rationale=rationale)  # type: ignore[arg-type]
    except ValidationError:
        return False
    return True


_record = st.tuples(st.integers(1, 999), st.booleans(), _first, _prose)


@given(st.lists(_record, min_size=0, max_size=6, unique_by=lambda t: t[0]),
       st.lists(_record, max_size=3, unique_by=lambda t: t[0]), _first, _prose)
def test_every_reply_the_grammar_admits_parses_to_its_decisions(items, rules, d_first, d_rest) -> None:
    """The reply written along reply_grammar's rules; the parser reads exactly its records -- all
    of them, except a reason the schema rejects (no word in it, or a yes/no that contradicts the
    decision): that record stays unresolved and the gate re-asks it."""
    text = f"DIAGNOSIS: {sentence(d_first, d_rest)}\n"
    if items or rules:
        text += "ADOPTION:\n"
    for kind, records in (("E", items), ("R", rules)):
        for n, adopted, first, rest in records:
            text += f"- {kind}{n}: {'ADOPTED' if adopted else 'NOT ADOPTED'} - {sentence(first, rest)}\n"
    text += f"```c\n{KERNEL}```"
    parsed = parse_reply(text, shown_items=[i for i, *_ in items], shown_rules=[r for r, *_ in rules],
                         language="c")
    expected = {i: a for i, a, f, r in items if _valid(ADOPTED if a else NOT_ADOPTED, sentence(f, r))}
    assert {i: a for i, (a, _) in parsed.decisions.items()} == expected
    assert parsed.conflicts == set()
    used = [r for r, a, f, rest in rules if a and _valid(ADOPTED, sentence(f, rest))]
    assert sorted(parsed.resident_used) == sorted(used)
    assert parsed.code == KERNEL


def test_a_multi_file_reply_the_grammar_admits_parses_every_file() -> None:
    text = "DIAGNOSIS: tiling fixed.\nADOPTION:\n- E4: ADOPTED - the tiling struct\n" + "".join(
        f"FILE: {path}\n```{lang}\n// {path}\nint x{n} = {n};\n```\n" for n, (path, lang) in enumerate(FILES))
    parsed = parse_reply(text, shown_items=[4], shown_rules=[], language="ascendc",
                         paths=[p for p, _ in FILES])
    assert parsed.decisions == {4: (True, "the tiling struct")}
    assert set(parsed.files) == {p for p, _ in FILES}


def test_the_lessons_grammar_admits_what_parse_lessons_reads() -> None:
    g = lessons_grammar(max_items=2, types=["correctness", "lint"], category="math", language="c")
    rules = rules_of(g)
    assert rules["root"] == "lesson{1,2}" and rules["lesson-type"] == '"correctness" | "lint"'
    assert '"category: " "math"' in rules["lesson"]
    assert f"snippet-line{{1,{SNIPPET_LINES}}}" in rules["snippet"]
    lesson = ("LESSON\ntitle: Read the size from N\ntype: correctness\ncategory: math\n"
              "error_message: mismatch after the first rows\n"
              "wrong_code:\n```c\nfor (i = 0; i < 64; ++i)\n```\n"
              "correct_code:\n```c\nfor (i = 0; i < N; ++i)\n\n  y[i] = x[i];\n```\n")
    lessons = parse_lessons(lesson + lesson.replace("Read the size from N", "Loop to N"))
    assert [entry["title"] for entry in lessons] == ["Read the size from N", "Loop to N"]
    assert lessons[0]["correct_code"] == "for (i = 0; i < N; ++i)\n\n  y[i] = x[i];"
    assert lessons[0]["wrong_code"] == "for (i = 0; i < 64; ++i)" and lessons[0]["type"] == "correctness"


@pytest.mark.local
def test_llama_cpp_parses_every_grammar_and_decodes_a_complete_reply() -> None:
    """With the embedded model: every grammar shape compiles in llama.cpp, and a real round prompt
    decoded under its grammar gives a reply the parser reads completely."""
    from sagekernel.models import Message, ModelConfig
    from sagekernel.models.local import LocalModel, check_grammar

    model = LocalModel(config=ModelConfig(n_ctx=4096))
    model.load()
    try:
        for g in (reply_grammar(items=[15, 3], rules=[4, 9], language="c"),
                  reply_grammar(items=[], rules=[], language="python"),
                  reply_grammar(items=[4], rules=[], language="ascendc", files=FILES),
                  reask_grammar(items=[3], language="c", need_code=True),
                  reask_grammar(items=[], language="ascendc", need_code=True, files=FILES[1:]),
                  lessons_grammar(max_items=3, types=["correctness"], category="math", language="c")):
            check_grammar(model._llm, g)
        prompt = ("Write a C function `void sage_kernel(const float* x, float* y, int64_t N)` that sets "
                  "y[i] = |x[i]|. Experiences: [E3] Include <stdint.h> for int64_t. [E8] Use double "
                  "accumulators in reductions.\nReply with DIAGNOSIS, ADOPTION (E3, E8), then the code.")
        reply = model.complete([Message("user", prompt)], max_tokens=400, temperature=0.0,
                               grammar=reply_grammar(items=[3, 8], rules=[], language="c"))
        parsed = parse_reply(reply.text, shown_items=[3, 8], shown_rules=[], language="c")
        assert parsed.unresolved([3, 8]) == [] and parsed.code is not None, reply.text
        assert reply.extra["constrained"] is True
        # At temperature 0 the shortlist-first stage gives llama-cpp-python's full-grammar reply.
        # (The first call after a different one may differ in the last bits of its logits: the
        # replayed token is decoded alone, so both are compared after one warm-up call each.)
        import llama_cpp

        grammar = reply_grammar(items=[3, 8], rules=[], language="c")
        chat = [{"role": "user", "content": prompt}]

        def full() -> str:
            out = model._llm.create_chat_completion(messages=chat, max_tokens=200, temperature=0.0,
                                                    repeat_penalty=model.config.repeat_penalty,
                                                    grammar=llama_cpp.LlamaGrammar.from_string(grammar))
            return str(out["choices"][0]["message"]["content"])

        full()
        reference = full()
        shortlisted = model.complete([Message("user", prompt)], max_tokens=200, temperature=0.0,
                                     grammar=grammar)
        assert shortlisted.text == reference
    finally:
        model.close()
