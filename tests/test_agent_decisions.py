"""Adoption records (agent/decisions.py): no refusal, in any wording or channel, becomes ADOPTED.

Hypothesis writes refusals the way models write them -- negations, booleans, tables, markdown,
labels, other languages' "no", a canonical-looking line whose rationale says no -- inside whole
replies with other lines around them, and in JSON blocks. None may be recorded as adopted; the
canonical forms must still be read exactly (the reader is not merely rejecting everything).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sagekernel.agent.decisions import (
    ADOPTED,
    NOT_ADOPTED,
    Decision,
    DecisionBlock,
    contradicting_answer,
    read_block,
    read_lines,
    render_lines,
    request_schema,
)
from sagekernel.agent.protocol import parse_reply

KERNEL = "#include <stdint.h>\nvoid sage_kernel(const float* x, float* y, int64_t N) { y[0] = x[0]; }\n"
ID = 5

# --- how a model writes "item 5" -----------------------------------------------------------------
_ids = st.sampled_from(["E5", "e5", "**E5**", "[E5]", "`E5`", "E-5", "E 5", "#5", "item 5", "Experience 5",
                        "E5 (Bounds checks)", "E5 - Bounds checks", "__E5__", "E05"])
# --- how a model writes "no" ---------------------------------------------------------------------
_no = st.sampled_from(["No", "no", "NO", "No.", "false", "False", "FALSE", "0", "✗", "❌", "✘", "×", "N", "n",
                       "nope", "not really", "never", "none", "N/A", "nein", "Nein", "non", "Non", "nee",
                       "nej",
                       "nie", "não", "нет", "Нет", "не", "否", "不", "没有", "いいえ", "아니요", "لا", "नहीं",
                       "hayır", "tidak", "không", "όχι", "ei"])
_adopted_word = st.sampled_from(["Adopted", "adopted", "ADOPTED", "**Adopted**", "*ADOPTED*", "Adoption",
                                 "Decision", "Used", "Applied", "Adoptado", "Adopté", "Übernommen", "采用",
                                 "採用", "Принят", "Adottato", "Adopt"])
_sep = st.sampled_from([": ", " = ", " - ", " — ", " -> ", " => ", "? ", " | ", ":", "=", " ", " is ", ": **",
                        "：", " : "])
_bullet = st.sampled_from(["- ", "* ", "1. ", "", "> ", "+ ", "• ", "  - ", "### "])


@st.composite
def refusals(draw: st.DrawFn) -> str:
    """One line that declines item 5."""
    id_ = draw(_ids)
    no = draw(_no)
    word = draw(_adopted_word)
    form = draw(st.integers(0, 13))
    why = draw(st.sampled_from(["", " - not needed", " (no reduction here)", ", unrelated",
                                " because slower"]))
    bullet = draw(_bullet)
    if form == 0:  # "- E5: Adopted: No"
        return f"{bullet}{id_}: {word}{draw(_sep)}{no}{why}"
    if form == 1:  # a table row
        return f"| {id_} | {word} | {no} |" + draw(st.sampled_from(["", " not needed |", " |"]))
    if form == 2:  # the table with a title column
        return f"| {id_} | Bounds checks | {no} | unrelated |"
    if form == 3:  # "NOT ADOPTED" in any spelling
        neg = draw(st.sampled_from(["NOT ADOPTED", "not adopted", "Not Adopted", "NOT_ADOPTED", "not-adopted",
                                    "**NOT** ADOPTED", "~~ADOPTED~~", "NOT  ADOPTED", "Not adopted",
                                    "ADOPTED: NO", "ADOPTED? no", "UN-ADOPTED", "NON ADOPTED",
                                    "ADOPTED (not)"]))
        return f"{bullet}{id_}: {neg}{why}"
    if form == 4:  # the canonical shape whose rationale answers no
        return f"- E5: ADOPTED - {no}{why}"
    if form == 5:  # canonical shape, decision last
        return f"- E5: {no} - ADOPTED was considered{why}"
    if form == 6:  # a boolean field
        value = draw(st.sampled_from(["false", "False", "0", "no", "null"]))
        return f"{bullet}{id_}{draw(_sep)}adopted={value}"
    if form == 7:  # JSON-ish inline
        value = draw(st.sampled_from(["false", "0", "null", '"no"']))
        return f'{bullet}{{"id": "E5", "adopted": {value}}}'
    if form == 8:  # a check box left empty / crossed
        return f"{bullet}[{draw(st.sampled_from([' ', 'x', 'X', '-']))}] {id_} {word.lower()}{why}"
    if form == 9:  # prose
        return draw(st.sampled_from([f"I did not adopt {id_}.", f"{id_} was not adopted{why}",
                                     f"I considered {id_} but did not use it.",
                                     f"ADOPTED: none. NOT ADOPTED: {id_}.",
                                     f"{id_} is not ADOPTED", f"Adopted items: none ({id_} rejected)"]))
    if form == 10:  # the grouped form "NOT ADOPTED: E5"
        label = draw(st.sampled_from(["NOT ADOPTED", "Not adopted", "Rejected", "ADOPTED: no"]))
        return f"{bullet}{label}: {id_}"
    if form == 11:  # emphasis around a canonical-looking line
        return f"**- E5: ADOPTED - {no}**"
    if form == 12:  # a canonical line for another id, then the refusal in prose
        return f"- E7: ADOPTED - fits\n{id_}: {no}"
    return f"- E5:ADOPTED - {no}"  # a missing space: not the form


_noise = st.sampled_from(["DIAGNOSIS: the tail loop reads past N.", "ADOPTION:", "", "Here is my reply.",
                          "- E7: NOT ADOPTED - about GEMM", "| id | adopted |", "|---|---|", "RULES USED: R2",
                          "The kernel below fixes it.", "E5 looked relevant at first."])


@given(st.lists(refusals(), min_size=1, max_size=3), st.lists(_noise, max_size=4), st.randoms())
def test_no_refusal_in_prose_is_ever_recorded_as_adopted(lines: list[str], noise: list[str], rnd) -> None:
    body = lines + noise
    rnd.shuffle(body)
    text = "\n".join(body) + f"\n```c\n{KERNEL}```"
    parsed = parse_reply(text, shown_items=[5, 7], shown_rules=[2], language="c")
    assert parsed.decisions.get(ID, (False, ""))[0] is False, text
    assert 2 not in parsed.resident_used


_json_refusal = st.sampled_from([
    {"id": "E5", "decision": "No", "rationale": "unrelated"},
    {"id": "E5", "decision": "adopted", "rationale": "no"},
    {"id": "E5", "decision": "ADOPTED", "rationale": "No, unrelated"},
    {"id": "E5", "decision": "ADOPTED", "rationale": "false"},
    {"id": "E5", "decision": "ADOPTED", "rationale": "nein"},
    {"id": "E5", "decision": "ADOPTED: no", "rationale": "unrelated"},
    {"id": "E5", "decision": False, "rationale": "unrelated"},
    {"id": "E5", "decision": 0, "rationale": "unrelated"},
    {"id": "E5", "adopted": False, "rationale": "unrelated"},
    {"id": "E5", "adopted": "no", "decision": "ADOPTED", "rationale": "unrelated"},
    {"id": "E5", "decision": "ADOPTED", "rationale": ""},
    {"id": "E5", "decision": "ADOPTED"},
    {"id": 5, "decision": "ADOPTED", "rationale": "fits"},
    {"id": "E5", "decision": "NOT ADOPTED", "rationale": "unrelated"},
    {"id": "E5", "decision": "ADOPTED ", "rationale": "fits"},
    {"id": "E5", "decision": ["ADOPTED"], "rationale": "fits"},
])


@given(st.lists(_json_refusal, min_size=1, max_size=3),
       st.sampled_from(["list", "object", "bare", "text", "extra"]))
def test_no_refusal_in_a_json_block_is_ever_recorded_as_adopted(records, shape) -> None:
    block: object = {"decisions": records}
    if shape == "bare":
        block = records
    elif shape == "extra":
        block = {"decisions": records, "adopted": ["E5"]}
    payload = json.dumps(block) if shape != "object" else block
    if shape == "text":
        payload = "Here are my decisions: " + json.dumps(block)
    got = read_block(payload, shown_items=[5], shown_rules=[])  # type: ignore[arg-type]
    assert got.items.get(ID, (False, ""))[0] is False
    if ID not in got.items or f"E{ID}" in got.conflicts:
        assert got.invalid or got.unresolved([5]) == [5]


_words = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=10)
_reason = st.lists(_words, min_size=1, max_size=6).map(" ".join).filter(  # reasons, not yes/no answers
    lambda r: contradicting_answer(ADOPTED, r) is None and contradicting_answer(NOT_ADOPTED, r) is None)
_record = st.builds(lambda kind, n, d, r: Decision(id=f"{kind}{n}", decision=d, rationale=r),
                    st.sampled_from("ER"), st.integers(1, 400), st.sampled_from([ADOPTED, NOT_ADOPTED]),
                    _reason)


@given(st.lists(_record, max_size=8, unique_by=lambda d: d.id))
def test_both_serialisations_of_a_block_read_back_to_it(records: list[Decision]) -> None:
    """The line form and the JSON form are two spellings of one record: each reads back exactly."""
    items = [d.number for d in records if not d.is_rule]
    rules = [d.number for d in records if d.is_rule]
    expected_items = {d.number: (d.adopted, d.rationale) for d in records if not d.is_rule}
    expected_used = sorted(d.number for d in records if d.is_rule and d.adopted)
    for got in (read_lines(render_lines(records).splitlines(), shown_items=items, shown_rules=rules),
                read_block(DecisionBlock(decisions=records).model_dump_json(), shown_items=items,
                           shown_rules=rules)):
        assert got.items == expected_items and got.rules_used() == expected_used
        assert got.invalid == [] and got.conflicts == set() and got.unresolved(items) == []


def test_the_request_schema_describes_the_validated_record() -> None:
    """The schema sent to a backend and the pydantic model agree: same fields, same answers,
    every field required, nothing else allowed."""
    schema = request_schema(["E5", "R2"])
    record = schema["properties"]["decisions"]["items"]
    model = Decision.model_json_schema()
    assert set(record["properties"]) == set(model["properties"]) == set(record["required"])
    assert record["properties"]["decision"]["enum"] == list(model["properties"]["decision"]["enum"])
    assert record["additionalProperties"] is False and schema["additionalProperties"] is False
    assert record["properties"]["id"]["enum"] == ["E5", "R2"]
    # the strictest common subset: no count or length keywords anywhere
    keywords = set(json.dumps(schema).split('"'))
    assert not {"minItems", "maxItems", "minLength", "maxLength", "pattern"} & keywords


def test_a_bad_record_leaves_only_its_own_id_unresolved_and_says_why() -> None:
    got = read_block({"decisions": [{"id": "E5", "decision": "ADOPTED", "rationale": "the tail loop"},
                                    {"id": "E7", "decision": "yes", "rationale": "fits"}]},
                     shown_items=[5, 7], shown_rules=[])
    assert got.items == {5: (True, "the tail loop")}
    assert got.unresolved([5, 7]) == [7]
    assert len(got.invalid) == 1 and "E7" in got.invalid[0] and "decision" in got.invalid[0]
    not_json = read_block("not json", shown_items=[5], shown_rules=[])
    assert not_json.invalid[0].startswith("the block is not JSON")
    assert read_block(None, shown_items=[5], shown_rules=[]).unresolved([5]) == [5]
