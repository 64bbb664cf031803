"""The reply protocol parser (agent/protocol.py): only the canonical record line decides."""

from __future__ import annotations

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
        f"- E7: NOT ADOPTED - about GEMM\n- E3: NOT ADOPTED - irrelevant\n- R2: ADOPTED - the loop bound\n"
        f"```c\n{KERNEL}```\n"
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
    assert r.evidence["E12"] == "- E12: ADOPTED - matches the error"


@pytest.mark.parametrize(
    "line",
    [
        # formatting that the tolerant parser used to read: now only the canonical form decides
        "**E12** (Bounds checks): ADOPTED - the error matches",
        "1. e12: not adopted — irrelevant",
        "- [E12] -> *Adopted*, I used the tail loop",
        "| E12 | adopted | reason |",
        "Adopted: E12 - fixes it",
        "E12: ADOPTED - no prefix dash",
        "- E12: adopted - lower case",
        "- E12: ADOPTED: colon instead of dash",
        "- E12 : ADOPTED - space before the colon",
        "* E12: ADOPTED - star bullet",
        "- E12: ADOPTED or NOT ADOPTED - copied format line",
        # the refusals issue 25 found recorded as ADOPTED
        "- E12: Adopted: No",
        "| E12 | Adopted | No |",
        "- E12: Adopted = false",
        # a valid shape whose rationale answers the opposite way
        "- E12: ADOPTED - No",
        "- E12: ADOPTED - no, it does not apply",
        "- E12: ADOPTED - false",
        "- E12: ADOPTED - Not needed here",
        "- E12: ADOPTED - nein",
        "- E12: ADOPTED - 否",
        "- E12: ADOPTED - ❌ unused",
        "- E12: NOT ADOPTED - yes, applied",
        "- E12: ADOPTED - ...",
        "- E12: ADOPTED - ",
    ],
)
def test_only_the_canonical_form_decides(line: str):
    r = parse(line + "\n```c\n" + KERNEL + "```")
    assert 12 not in r.decisions
    assert r.unresolved([12, 7, 3]) == [12, 7, 3]
    if "12" in line and ("adopt" in line.lower() or "|" in line):
        assert r.decided.invalid, line  # the re-ask quotes what it could not read


def test_the_reviewed_lines_are_reasked():
    """Lines that are not in the canonical form go back through the gate instead."""
    from sagekernel.agent.gate import complete_reply
    from sagekernel.agent.prompt import Prompts
    from sagekernel.models.base import Message, Reply

    first = ("DIAGNOSIS: d\nADOPTION:\n- E5: Adopted: No\n"
             "| E6 | Adopted | No |\n```c\n" + KERNEL + "```")
    answers = iter([first, "- E5: NOT ADOPTED - different approach\n- E6: NOT ADOPTED - not needed"])
    asked: list[str] = []

    def ask(messages, reask=0, grammar=None):
        asked.append(messages[-1].content)
        return Reply(text=next(answers), model="scripted")

    out = complete_reply(ask, [Message("user", "round")], prompts=Prompts(), shown_items=[5, 6],
                         shown_rules=[], language="c", max_reasks=2)
    assert out.reasks == 1
    assert "E5" in asked[1] and "E6" in asked[1] and "- E5: Adopted: No" in asked[1]
    assert out.parsed.decisions == {5: (False, "different approach"), 6: (False, "not needed")}


_rationale = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=60)


@given(st.booleans(), _rationale, _rationale)
def test_a_canonical_line_is_read_exactly_or_not_at_all(adopted: bool, rationale: str, other: str):
    """Whatever the rationale says, a canonical line decides its own answer, or nothing."""
    decision = "ADOPTED" if adopted else "NOT ADOPTED"
    r = parse(f"DIAGNOSIS: {other}\nADOPTION:\n- E12: {decision} - {rationale}\n- E7: {other}\n"
              f"```c\n{KERNEL}```")
    assert 7 not in r.decisions or other.startswith(("ADOPTED - ", "NOT ADOPTED - "))
    if 12 in r.decisions:
        assert r.decisions[12] == (adopted, rationale.strip())


def test_conflicting_decisions_are_unresolved():
    r = parse(f"- E12: ADOPTED - a\n- E12: NOT ADOPTED - b\n```c\n{KERNEL}```", items=(12,))
    assert r.conflicts == {12}
    assert r.unresolved([12]) == [12]


def test_unknown_ids_are_reported_and_ignored_missing_stay_unresolved():
    r = parse(f"- E12: ADOPTED - yes it fits\n- E99: ADOPTED - invented\n- R9: ADOPTED - invented\n"
              f"- R2: ADOPTED - bound\n```c\n{KERNEL}```")
    assert 99 not in r.decisions
    assert r.unknown_ids == ["E99", "R9"]
    assert r.unresolved([12, 7, 3]) == [7, 3]
    assert r.resident_used == [2]


def test_mentions_in_prose_are_not_decisions():
    r = parse(f"DIAGNOSIS: following E12 I used the tiled loop; E7 looked useful.\n```c\n{KERNEL}```")
    assert r.decisions == {}


def test_rule_records_and_rules_without_one_are_unused():
    assert parse("- R2: ADOPTED - the bound").resident_used == [2]
    assert parse("- R2: NOT ADOPTED - no reduction").resident_used == []
    assert parse("RULES USED: R2").resident_used == []  # the old line is not the record form


def test_lines_inside_code_blocks_decide_nothing():
    r = parse(f"```c\n// - E12: ADOPTED - in a comment\n{KERNEL}```")
    assert r.decisions == {}


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
    first = parse(f"- E12: ADOPTED - a\n```c\n{KERNEL}```")
    second = parse("- E7: NOT ADOPTED - b\n- E3: ADOPTED - c")
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
