"""The reply protocol parser (agent/protocol.py): tolerant of formatting, strict about ids."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.agent.protocol import parse_reply, pick_code, split_fences

KERNEL = (
    "#include <stdint.h>\nvoid sage_kernel(const float* restrict x, float* restrict y, int64_t N) {\n"
    "  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n}\n"
)


def parse(text: str, items=(12, 7, 3), rules=(2,)):
    return parse_reply(text, shown_items=items, shown_rules=rules, language="c")


def test_canonical_reply():
    r = parse(
        f"DIAGNOSIS: copy kernel.\nADOPTION:\n- E12: ADOPTED - matches the error\n"
        f"- E7: NOT ADOPTED - about GEMM\n- E3: NOT ADOPTED - irrelevant\nRULES USED: R2\n```c\n{KERNEL}```\n"
    )
    assert r.diagnosis == "copy kernel."
    assert r.decisions == {
        12: (True, "matches the error"),
        7: (False, "about GEMM"),
        3: (False, "irrelevant"),
    }
    assert r.resident_used == [2]
    assert r.code == KERNEL
    assert r.unresolved([12, 7, 3]) == []


@pytest.mark.parametrize(
    "line, adopted",
    [
        ("**E12** (Bounds checks): ADOPTED - the error matches", True),
        ("1. e12: not adopted — irrelevant", False),
        ("- [E12] -> *Adopted*, I used the tail loop", True),
        ("| E12 | adopted | reason |", True),
        ("| E12 | Bounds checks | NOT ADOPTED | reason |", False),
        ("Adopted: E12 - fixes it", True),
        ("NOT ADOPTED: E12", False),
        ("E12 (Use restrict pointers): NOT ADOPTED - no", False),
        ("E12 - Use restrict pointers: NOT ADOPTED", False),
        ("E12 — Decision: adopted — it helps", True),
        ("* **E12**: __NOT_ADOPTED__ - not needed", False),
        ("E12 = Not-Adopted", False),
        ("#12: ADOPTED", True),
        ("item 12: not adopted because slower", False),
        ("E12: ADOPTED - I do not use the other approach, no", True),
        ("E12: NOT ADOPTED - I use a different approach, adopted elsewhere", False),
    ],
)
def test_formatting_noise(line: str, adopted: bool):
    r = parse(line + "\n```c\n" + KERNEL + "```")
    assert r.decisions[12][0] is adopted
    assert r.evidence[12] == line


@pytest.mark.parametrize(
    "line",
    [
        "- E12: Not needed; I use a different approach",
        "- E12: I did not need it, but E12's idea of using restrict is good",
        "- [E12] -> Yes, I used the tail loop",
        "E12 — Adoption: yes — it helps",
        "E12: I did not adopt it",
        "E12 ✅ good",
        "E12 - skipped, unrelated",
        "#12: used",
        "item 12: rejected because slower",
        "E12: Not needed - adopted a different idea",
        "E12: applied",
        "E12: no",
    ],
)
def test_lines_without_the_protocol_words_stay_unresolved(line: str):
    r = parse(line + "\n```c\n" + KERNEL + "```")
    assert 12 not in r.decisions
    assert r.unresolved([12, 7, 3]) == [12, 7, 3]


def test_the_reviewed_lines_are_reasked():
    """The two lines the review found recorded as ADOPTED go back through the gate instead."""
    from sagekernel.agent.gate import complete_reply
    from sagekernel.agent.prompt import Prompts
    from sagekernel.models.base import Message, Reply

    first = ("DIAGNOSIS: d\nADOPTION:\n- E5: Not needed; I use a different approach\n"
             "- E6: I did not need it, but E6's idea of using restrict is good\n```c\n" + KERNEL + "```")
    answers = iter([first, "- E5: NOT ADOPTED - different approach\n- E6: NOT ADOPTED - not needed"])
    asked: list[str] = []

    def ask(messages, reask=0, grammar=None):
        asked.append(messages[-1].content)
        return Reply(text=next(answers), model="scripted")

    out = complete_reply(ask, [Message("user", "round")], prompts=Prompts(), shown_items=[5, 6],
                         shown_rules=[], language="c", max_reasks=2)
    assert out.reasks == 1
    assert "E5" in asked[1] and "E6" in asked[1]
    assert out.parsed.decisions == {5: (False, "different approach"), 6: (False, "not needed")}


_NOISE_WORDS = ["use", "using", "used", "adopt", "adopting", "adoption", "not", "no", "needed", "yes",
                "skip", "I", "the", "idea", "good", "don't", "E12's", "restrict", "approach", "✅", "-",
                ";", ","]
_rationale = st.lists(st.sampled_from(_NOISE_WORDS), min_size=0, max_size=12).map(" ".join)
_DECISION_TEXT = {True: ["ADOPTED", "adopted", "Adopted", "**ADOPTED**", "_adopted_"],
                  False: ["NOT ADOPTED", "not adopted", "Not Adopted", "**NOT ADOPTED**", "NOT_ADOPTED",
                          "not-adopted"]}
_LINE_FORMS = ["- E12: {d} - {r}", "1. E12: {d}: {r}", "* **E12** — {d} — {r}", "| E12 | {d} | {r} |",
               "E12 (title): {d}, {r}", "[E12] -> {d}. {r}"]


@given(st.booleans(), st.sampled_from(_LINE_FORMS), st.data(), _rationale, _rationale)
def test_rationales_never_flip_a_decision(adopted: bool, form: str, data, rationale: str, other: str):
    decision = data.draw(st.sampled_from(_DECISION_TEXT[adopted]))
    line = form.format(d=decision, r=rationale)
    r = parse(f"DIAGNOSIS: {other}\nADOPTION:\n{line}\n- E7: {other}\n```c\n{KERNEL}```")
    assert r.decisions[12][0] is adopted
    assert 7 not in r.decisions  # a rationale alone never decides


@given(st.sampled_from(["- E12: {r}", "E12 {r}", "| E12 | {r} |", "E12: {r} - {r}"]), _rationale)
def test_rationale_words_alone_decide_nothing(form: str, rationale: str):
    r = parse(form.format(r=rationale) + "\n```c\n" + KERNEL + "```")
    assert 12 not in r.decisions


_line = st.one_of(
    st.builds(lambda i, d, rr: f"- E{i}: {d} - {rr}", st.sampled_from([12, 7, 3, 99]),
              st.sampled_from([*_DECISION_TEXT[True], *_DECISION_TEXT[False], "", "yes", "used"]),
              _rationale),
    st.builds(lambda d, i: f"{d}: E{i}", st.sampled_from(["ADOPTED", "NOT ADOPTED", "Use"]),
              st.sampled_from([12, 7, 3])),
    _rationale,
)


@given(st.lists(_line, max_size=8))
def test_every_recorded_decision_appears_verbatim(lines: list[str]):
    text = "\n".join(lines)
    r = parse(text)
    for item_id, (adopted, _) in r.decisions.items():
        line = r.evidence[item_id]
        assert line in text.splitlines()
        words = re.sub(r"[*_`]+", " ", line).lower()
        negative = re.search(r"not[\s_-]*adopted", words) is not None
        if adopted:
            assert re.search(r"(?<![a-z])adopted(?![a-z])", words.replace("not adopted", "")) or not negative
        else:
            assert negative


def test_unknown_ids_are_reported_and_ignored_missing_stay_unresolved():
    r = parse(f"E12: ADOPTED - yes\nE99: ADOPTED - invented\nRULES USED: R2, R9\n```c\n{KERNEL}```")
    assert 99 not in r.decisions
    assert r.unknown_ids == ["E99", "R9"]
    assert r.unresolved([12, 7, 3]) == [7, 3]
    assert r.resident_used == [2]


def test_mentions_in_prose_are_not_decisions():
    r = parse(f"DIAGNOSIS: following E12 I used the tiled loop; E7 looked useful.\n```c\n{KERNEL}```")
    assert r.decisions == {}


def test_conflicting_decisions_are_unresolved():
    r = parse(f"E12: ADOPTED - a\nE12: NOT ADOPTED - b\n```c\n{KERNEL}```", items=(12,))
    assert r.conflicts == {12}
    assert r.unresolved([12]) == [12]


@pytest.mark.parametrize("line", [
    "- E12: ADOPTED or NOT ADOPTED - Include <math.h>",
    "E12: adopted / not adopted - unsure",
    "* E12: ADOPTED | NOT ADOPTED",
])
def test_an_echoed_format_line_is_a_conflict_not_an_adoption(line: str):
    """Seen with the 1.5B model: it copies the format line; that says both, so it is re-asked."""
    r = parse(f"ADOPTION:\n{line}\n```c\n{KERNEL}```", items=(12,))
    assert r.conflicts == {12}
    assert r.unresolved([12]) == [12]


def test_rules_none_and_rule_decision_lines():
    assert parse("RULES USED: NONE").resident_used == []
    assert parse("R2: USED - helps").resident_used == [2]
    assert parse("R2: NOT USED").resident_used == []


def test_code_selection():
    text = (
        "Wrong snippet:\n```c\ny[i] = x[i+1];\n```\nFull kernel:\n```C\n" + KERNEL + "```\n"
        '```json\n{"a": 1}\n```'
    )
    assert parse(text).code == KERNEL
    assert parse("no code here").code is None
    assert parse("```python\nprint(1)\n```").code is None  # wrong language for the C target
    # an unterminated final fence (reply cut by max_tokens) still yields its code
    assert parse("```c\n" + KERNEL).code == KERNEL


def test_merge_fills_missing_and_keeps_code():
    first = parse(f"E12: ADOPTED - a\n```c\n{KERNEL}```")
    second = parse("E7: NOT ADOPTED - b\nE3: ADOPTED - c")
    merged = first.merge(second)
    assert merged.unresolved([12, 7, 3]) == []
    assert merged.code == KERNEL


@given(st.text(max_size=400))
def test_never_crashes_and_never_invents_ids(text: str):
    r = parse(text)
    assert set(r.decisions) <= {12, 7, 3}
    assert set(r.resident_used) <= {2}


def test_split_fences_keeps_prose():
    blocks, prose = split_fences("a\n~~~cpp\nint x;\n~~~\nb")
    assert blocks == [("cpp", "int x;")]
    assert prose == ["a", "b"]
    assert pick_code(blocks, "c") == "int x;\n" or pick_code(blocks, "c") is None
