"""Adoption decisions as data: one schema, two serialisations, nothing guessed.

Spec §2 step 3: for every retrieved item the agent records adopted / not adopted / unresolved (⊥)
and a rationale; the RECONSTRUCTED extension does the same for each resident rule. ATU credits
only what is recorded ADOPTED, so a refusal read as an adoption gives an unused item the episode's
credit. Recovering decisions from free text by patterns cannot converge (a model can always find a
new way to write "no"), so a decision is a record validated against `Decision`:

    {"id": "E12", "decision": "ADOPTED", "rationale": "the tail loop after unrolling"}
    {"id": "R3",  "decision": "NOT ADOPTED", "rationale": "no reduction in this operator"}

It travels by each backend's own mechanism (agent/gate.py): JSON-schema structured output
(`request_schema`), Anthropic tool use, the MCP tool's arguments -- all validated by
`read_block` -- or, where there is none, the one canonical line form (`LINE`), which the embedded
model writes under its grammar (agent/grammar.py) and the prose fallback reads with
`read_lines`. The line form is a serialisation of the same record, read by one regular expression
and then validated by the same model; any other wording ("Adopted: No", "| E5 | Adopted | No |",
"adopted = false", "Übernommen: nein") matches nothing and stays ⊥, and the gate re-asks.

Anything that does not validate is unresolved, never guessed. One more check guards the single
place a refusal could still hide in a valid record: a rationale that opens with a yes/no answer
contradicting its decision ("ADOPTED - no", "ADOPTED - false, unused", "NOT ADOPTED - yes") is
an answer, not a reason, so the record is rejected (`contradicting_answer`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ADOPTED = "ADOPTED"
NOT_ADOPTED = "NOT ADOPTED"
#: The two answers, exactly as written (case included): the schema's enum and the line form's words.
ANSWERS = (ADOPTED, NOT_ADOPTED)
#: An id as the prompt shows it: E<n> for a retrieved experience, R<n> for a resident rule.
ID_PATTERN = r"^[ER][0-9]+$"
#: Longest rationale a record may carry (a sentence; the grammar caps the embedded model's at 60).
RATIONALE_CHARS = 600
#: The tool / schema name a backend sees.
SCHEMA_NAME = "record_adoptions"
SCHEMA_DESCRIPTION = ("Record, for every retrieved experience (E ids) and every resident rule (R ids) "
                      "shown this round, whether the kernel you wrote applies it: decision ADOPTED "
                      "or NOT ADOPTED, with a one-sentence rationale.")

# Answer words that open a rationale which contradicts its decision. ASCII words are matched as
# the rationale's first word (case-folded); scripts written without spaces by prefix.
_NEGATIVE_WORDS = frozenset([
    'no', 'not', 'nope', 'nah', 'never', 'none', 'nothing', 'false', 'n', '0', 'n/a', 'na', 'nil',
    'null', 'unused', 'rejected', 'declined', 'nein', 'nicht', 'non', 'nee', 'nej', 'nei', 'nie',
    'ne', 'ani', 'não', 'nao', 'nem', 'hayır', 'hayir', 'tidak', 'bukan', 'khong', 'không', 'ei',
    'нет', 'не', 'ні', 'όχι'
])
_AFFIRMATIVE_WORDS = frozenset([
    'yes', 'yeah', 'yep', 'yup', 'y', 'true', '1', 'ok', 'okay', 'sure', 'ja', 'jawohl', 'oui',
    'si', 'sí', 'sim', 'tak', 'ano', 'da', 'jo', 'joo', 'evet', 'ya', 'iya', 'vâng', 'có', 'kyllä',
    'да', 'так', 'ναι'
])
_NEGATIVE_PREFIXES = (
    '否', '不', '没', '沒', '无', '無', '未', 'いいえ', 'いや', '아니', '안 ', 'لا', 'نه', 'नहीं', 'ไม่', '✗',
    '✘', '❌', '❎', '👎', '×'
)
_AFFIRMATIVE_PREFIXES = (
    '是', '对', '對', 'はい', 'ええ', '네', '예', 'نعم', 'हाँ', 'ใช่', '✓', '✔', '✅', '☑', '👍'
)
_FIRST_WORD = re.compile(r"[\w/'’.-]+", re.UNICODE)


def contradicting_answer(decision: str, rationale: str) -> str | None:
    """The yes/no answer a rationale opens with, when it contradicts the decision (else None)."""
    text = rationale.strip().lstrip("*_`\"'“”‘’([{<>:;,.!?=-–— \t")
    negative = decision == ADOPTED
    prefixes = _NEGATIVE_PREFIXES if negative else _AFFIRMATIVE_PREFIXES
    for prefix in prefixes:
        if text.startswith(prefix):
            return prefix
    word = _FIRST_WORD.match(text)
    if word is None:
        return None
    first = word.group(0).casefold().rstrip(".'’-")
    words = _NEGATIVE_WORDS if negative else _AFFIRMATIVE_WORDS
    return first if first in words else None


class Decision(BaseModel):
    """One adoption record: the schema every channel validates against (strict: no coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=ID_PATTERN, description="the id as shown: E<n> (experience) or R<n> (rule)")
    decision: Literal["ADOPTED", "NOT ADOPTED"] = Field(
        description="ADOPTED: the kernel you wrote applies it; NOT ADOPTED: it does not")
    rationale: str = Field(min_length=1, max_length=RATIONALE_CHARS,
                           description="one sentence: why it was (not) adopted")

    @field_validator("rationale")
    @classmethod
    def _a_reason(cls, value: str) -> str:
        value = value.strip()
        if not value or not any(ch.isalnum() for ch in value):
            raise ValueError("the rationale must say why, in words")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Decision:
        answer = contradicting_answer(self.decision, self.rationale)
        if answer is not None:
            raise ValueError(f"the rationale opens with {answer!r}, which contradicts {self.decision}: "
                             "write the decision you mean and a reason")
        return self

    @property
    def adopted(self) -> bool:
        return self.decision == ADOPTED

    @property
    def number(self) -> int:
        return int(self.id[1:])

    @property
    def is_rule(self) -> bool:
        return self.id[0] == "R"

    def line(self) -> str:
        """The canonical line form of this record."""
        return f"- {self.id}: {self.decision} - {self.rationale}"


class DecisionBlock(BaseModel):
    """The structured block a reply carries: the records of one round (items and rules)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    decisions: list[Decision]


#: The canonical line form, the only prose the fallback reads: `- E12: ADOPTED - <rationale>`.
LINE = re.compile(r"^- (?P<id>[ER][0-9]+): (?P<decision>ADOPTED|NOT ADOPTED) - (?P<rationale>.+)$")
_ID_MENTION = re.compile(r"(?<![A-Za-z0-9])([ER])\s*-?\s*#?\s*([0-9]+)(?![0-9])", re.IGNORECASE)


@dataclass
class Decisions:
    """What one reply (or one reply plus its re-ask answers, see `merge`) recorded."""

    items: dict[int, tuple[bool, str]] = field(default_factory=dict)  # item id -> (adopted, rationale)
    rules: dict[int, tuple[bool, str]] = field(default_factory=dict)  # rule id -> (adopted, rationale)
    conflicts: set[str] = field(default_factory=set)  # ids given both answers ("E12", "R3")
    unknown: list[str] = field(default_factory=list)  # ids that were not shown this round
    invalid: list[str] = field(default_factory=list)  # why a record or block did not validate
    evidence: dict[str, str] = field(default_factory=dict)  # id -> the raw text it was read from

    def merge(self, later: Decisions) -> Decisions:
        """Combine with the answer to a re-ask: later records fill in or replace; a later valid
        record resolves an earlier conflict; the invalid notes are the later answer's."""
        later_ids = {f"E{i}" for i in later.items} | {f"R{r}" for r in later.rules}
        return Decisions(items={**self.items, **later.items}, rules={**self.rules, **later.rules},
                         conflicts=(self.conflicts - later_ids) | later.conflicts,
                         unknown=[*self.unknown, *(u for u in later.unknown if u not in self.unknown)],
                         invalid=list(later.invalid), evidence={**self.evidence, **later.evidence})

    def adopted_items(self) -> dict[int, tuple[bool, str]]:
        """The items' records without the conflicting ones (those stay ⊥)."""
        return {i: d for i, d in self.items.items() if f"E{i}" not in self.conflicts}

    def rules_used(self) -> list[int]:
        """Resident rules recorded ADOPTED (without conflicts), in id order."""
        return sorted(r for r, (adopted, _) in self.rules.items()
                      if adopted and f"R{r}" not in self.conflicts)

    def unresolved(self, shown: Iterable[int]) -> list[int]:
        """Shown item ids without exactly one valid record (⊥), in the order shown."""
        return [i for i in shown if i not in self.items or f"E{i}" in self.conflicts]


def fold(records: Iterable[tuple[Decision, str]], *, shown_items: Iterable[int], shown_rules: Iterable[int],
         invalid: Sequence[str] = ()) -> Decisions:
    """Valid records (with the raw text each came from) -> the round's decisions. Ids not shown are
    reported and ignored; an id given both answers is a conflict (⊥)."""
    items, rules = set(shown_items), set(shown_rules)
    out = Decisions(invalid=list(invalid))
    for record, raw in records:
        shown = rules if record.is_rule else items
        target = out.rules if record.is_rule else out.items
        if record.number not in shown:
            if record.id not in out.unknown:
                out.unknown.append(record.id)
            continue
        before = target.get(record.number)
        if before is not None and before[0] != record.adopted:
            out.conflicts.add(record.id)
        target[record.number] = (record.adopted, record.rationale)
        out.evidence[record.id] = raw
    return out


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'block'}: {e['msg']}" for e in exc.errors())


def read_block(payload: str | Mapping[str, Any] | None, *, shown_items: Iterable[int],
               shown_rules: Iterable[int]) -> Decisions:
    """A structured block (JSON text or an already decoded object) -> decisions.

    The block must be `{"decisions": [...]}`; each record is validated on its own, so one bad
    record leaves only its own id unresolved and is named in `invalid` for the re-ask."""
    items, rules = list(shown_items), list(shown_rules)
    if payload is None:
        return Decisions(invalid=["no structured block was returned"])
    if isinstance(payload, str):
        try:
            data: Any = json.loads(payload)
        except json.JSONDecodeError as exc:
            return Decisions(invalid=[f"the block is not JSON ({exc.msg} at character {exc.pos})"])
    else:
        data = payload
    try:
        block = DecisionBlock.model_validate(data)
        return fold(((d, json.dumps(d.model_dump(), ensure_ascii=False)) for d in block.decisions),
                    shown_items=items, shown_rules=rules)
    except ValidationError as exc:
        whole = _errors(exc)
    entries = data.get("decisions") if isinstance(data, dict) else None
    if not isinstance(entries, list) or (isinstance(data, dict) and set(data) != {"decisions"}):
        return Decisions(invalid=[f"the block does not match the schema: {whole}"])
    good: list[tuple[Decision, str]] = []
    invalid: list[str] = []
    for n, entry in enumerate(entries):
        raw = json.dumps(entry, ensure_ascii=False, default=str)
        try:
            good.append((Decision.model_validate(entry), raw))
        except ValidationError as exc:
            invalid.append(f"record {n + 1} {raw[:120]}: {_errors(exc)}")
    return fold(good, shown_items=items, shown_rules=rules, invalid=invalid)


def read_lines(lines: Iterable[str], *, shown_items: Iterable[int], shown_rules: Iterable[int]) -> Decisions:
    """The prose fallback: only lines in the canonical form `LINE` are read, each then validated by
    `Decision`. A line that names a shown id in any other form is reported in `invalid` (the re-ask
    quotes it) and decides nothing."""
    items, rules = set(shown_items), set(shown_rules)
    good: list[tuple[Decision, str]] = []
    invalid: list[str] = []
    for raw in lines:
        line = raw.strip()
        match = LINE.match(line)
        if match is None:
            if _names_shown_id(line, items, rules) and _looks_like_a_decision(line):
                invalid.append(f"not in the form `- <id>: ADOPTED - <why>` or `- <id>: NOT ADOPTED - <why>`: "
                               f"{line[:120]}")
            continue
        try:
            good.append((Decision.model_validate(match.groupdict()), raw))
        except ValidationError as exc:
            invalid.append(f"{line[:120]}: {_errors(exc)}")
    return fold(good, shown_items=items, shown_rules=rules, invalid=invalid)


def _names_shown_id(line: str, items: set[int], rules: set[int]) -> bool:
    for kind, number in _ID_MENTION.findall(line):
        if int(number) in (rules if kind.upper() == "R" else items):
            return True
    return False


def _looks_like_a_decision(line: str) -> bool:
    """A line about an id that says something about adoption (worth quoting in a re-ask); prose
    that merely mentions an id is not."""
    return bool(re.search(r"adopt|decision|used|\|", line, re.IGNORECASE)) or line.startswith(("-", "*", "|"))


def render_lines(records: Iterable[Decision]) -> str:
    """Records in the canonical line form (what the grammar makes the embedded model write)."""
    return "\n".join(d.line() for d in records)


def request_schema(ids: Sequence[str]) -> dict[str, Any]:
    """The JSON schema sent to a backend for one call: the `DecisionBlock` shape with the id
    restricted to the ids asked for. Kept to the subset every structured-output implementation
    takes (OpenAI strict mode, vLLM/SGLang/llama.cpp grammars, Anthropic tool input): type,
    properties, required, additionalProperties, enum, items -- no length or count constraints, so
    "one record per id" is checked here (the gate re-asks what is missing), not by the server."""
    record = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(ids), "description": "the id as shown (E<n> or R<n>)"},
            "decision": {"type": "string", "enum": list(ANSWERS),
                         "description": "ADOPTED: the kernel you wrote applies it; NOT ADOPTED: it does not"},
            "rationale": {"type": "string", "description": "one sentence: why it was (not) adopted"},
        },
        "required": ["id", "decision", "rationale"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"decisions": {"type": "array", "items": record}},
        "required": ["decisions"],
        "additionalProperties": False,
    }


def shown_ids(items: Sequence[int], rules: Sequence[int]) -> list[str]:
    """The ids a round asks decisions for, as shown: items first, then rules."""
    return [f"E{i}" for i in items] + [f"R{r}" for r in rules]
