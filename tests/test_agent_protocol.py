"""The reply protocol parser (agent/protocol.py): tolerant of formatting, strict about ids."""

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
        ("- [E12] -> Yes, I used the tail loop", True),
        ("| E12 | adopted | reason |", True),
        ("Adopted: E12 - fixes it", True),
        ("NOT ADOPTED: E12", False),
        ("E12 (Use restrict pointers): NOT ADOPTED - no", False),
        ("E12 - Use restrict pointers: NOT ADOPTED", False),
        ("E12 — Adoption: yes — it helps", True),
        ("E12: I did not adopt it", False),
        ("E12 ✅ good", True),
        ("E12 - skipped, unrelated", False),
        ("#12: used", True),
        ("item 12: rejected because slower", False),
    ],
)
def test_formatting_noise(line: str, adopted: bool):
    r = parse(line + "\n```c\n" + KERNEL + "```")
    assert r.decisions[12][0] is adopted


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
