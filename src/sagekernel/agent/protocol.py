"""The reply protocol: what the model writes each round, and a parser for it.

The model is asked (prompts/round.j2) for four parts:

    DIAGNOSIS: <one to three sentences>
    ADOPTION:
    - E12: ADOPTED - <why>
    - E7: NOT ADOPTED - <why>
    RULES USED: R3, R5        (or NONE)
    ```c
    <the complete kernel source>
    ```

Retrieved experiences carry ids `E<n>`, resident rules `R<n>` (n is the memory item id).

The parser is tolerant of formatting noise -- markdown emphasis, bullets or numbering, tables,
upper/lower case, extra prose, `Adopted: E1, E2` grouping, `[E12]`/`#12`/`item 12` id spellings,
an unterminated final code fence -- and strict about meaning: only the protocol's own words
ADOPTED / NOT ADOPTED decide, and only right after the id (or before a group of ids). A line
that says "not needed", "I use ...", "yes" or a check mark decides nothing: the item stays
unresolved (⊥, spec §2) and the trace-completeness gate re-asks it. Ids that were not shown are
ignored and reported; an id given both decisions is unresolved too (reported as a conflict).
`ParsedReply.evidence` keeps, per decided id, the reply line the decision was read from.

A multi-file target (docs/target_seam.md) gets one fenced block per file, each headed by its
relative path; see agent/files.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sagekernel.agent.files import fenced_blocks, pick_files
from sagekernel.candidate import Candidate

# --- ids -----------------------------------------------------------------------------------------
_ITEM_ID = (r"(?:\[\s*E?\s*-?\s*(?P<b>\d+)\s*\]|E\s*-?\s*#?\s*(?P<e>\d+)|#\s*(?P<h>\d+)"
            r"|(?:item|experience)\s*#?\s*(?P<i>\d+))")
_RULE_ID = r"(?:\[\s*R\s*-?\s*(?P<rb>\d+)\s*\]|R\s*-?\s*#?\s*(?P<r>\d+)|rule\s*#?\s*(?P<rr>\d+))"
_ITEM_RE = re.compile(rf"(?<![A-Za-z0-9]){_ITEM_ID}(?![A-Za-z0-9])", re.IGNORECASE)
_RULE_RE = re.compile(rf"(?<![A-Za-z0-9]){_RULE_ID}(?![A-Za-z0-9])", re.IGNORECASE)
_SEP = r"(?:\s*(?:,|/|&|;|\band\b|\s)\s*)"
_ITEM_ANY = re.sub(r"\?P<\w+>", "?:", _ITEM_ID)
_RULE_ANY = re.sub(r"\?P<\w+>", "?:", _RULE_ID)
_ITEM_GROUP = re.compile(rf"^{_ITEM_ANY}(?:{_SEP}+{_ITEM_ANY})*(?![A-Za-z0-9])", re.IGNORECASE)
_RULE_GROUP = re.compile(rf"^{_RULE_ANY}(?:{_SEP}+{_RULE_ANY})*(?![A-Za-z0-9])", re.IGNORECASE)
_BARE_GROUP = re.compile(rf"^\d+(?:{_SEP}+\d+)*(?=\s*[:)\]|.=-])")

# --- decisions: only the protocol's own words (ADOPTED / NOT ADOPTED) decide ---------------------
# Case, markdown emphasis (stripped by `_clean`), a "Decision:" label and NOT_ADOPTED/NOT-ADOPTED
# spellings are formatting; words like "use", "needed", "yes" or "skip" are not decisions: a line
# without the protocol's words stays unresolved and the gate re-asks it.
_NOT = r"not[\s_-]*adopted"
_CANONICAL = re.compile(rf"(?<![A-Za-z])(?:(?P<neg>{_NOT})|(?P<pos>adopted))(?![A-Za-z])", re.IGNORECASE)
_LABEL = re.compile(r"^(?:decision|adoption|status|answer)\s*[:=\-–—]\s*", re.IGNORECASE)
#: Resident rules answer in their own section's words ("RULES USED: R3"), or on a rule line.
_RULE_DECISION = re.compile(r"(?<![A-Za-z])(?:(?P<neg>not[\s_-]*(?:used|adopted|applied))"
                            r"|(?P<pos>used|adopted|applied))(?![A-Za-z])", re.IGNORECASE)
_HEADER = re.compile(r"^(?P<name>diagnosis|adoptions?|adoption decisions?|decisions?"
                     r"|(?:resident\s+)?rules?\s+used|used\s+rules?|code|kernel|kernel source|source)"
                     r"(?:\s*[:\-=]\s*|\s*$)(?P<rest>.*)$", re.IGNORECASE)
_LINE_NOISE = re.compile(r"^(?:\s|[-*+•>|]|#+(?=\s)|\d+[.)](?=\s))+")
_EMPHASIS = re.compile(r"[*_`]+")
_RATIONALE_TRIM = " \t-–—:;,.|=>)(]["

#: Fenced-code languages accepted as the kernel source for a target language ("" = unlabelled).
LANGUAGE_ALIASES: dict[str, frozenset[str]] = {
    "c": frozenset({"c", "h", "cpp", "c++", "cc", "cxx", "hpp"}),
    "cuda": frozenset({"cuda", "cu", "cuh", "c++", "cpp", "cc", "c"}),
    "python": frozenset({"python", "py", "python3", "triton"}),
    "ascendc": frozenset({"cpp", "c++", "cc", "c", "ascendc", "h", "hpp"}),
}


@dataclass
class ParsedReply:
    """What one reply (or one reply plus its re-ask answers, see `merge`) said."""

    diagnosis: str = ""
    decisions: dict[int, tuple[bool, str]] = field(default_factory=dict)  # item id -> (adopted, rationale)
    conflicts: set[int] = field(default_factory=set)  # ids given both decisions
    resident_used: list[int] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)  # "E99", "R4": not shown this round
    code: str | None = None
    evidence: dict[int, str] = field(default_factory=dict)  # item id -> the reply line that decided it
    files: dict[str, str] = field(default_factory=dict)  # multi-file targets: path -> text
    unknown_files: list[str] = field(default_factory=list)  # headed paths the target does not have

    def missing_files(self, paths: Sequence[str]) -> list[str]:
        """Paths a multi-file target asks for that the reply has no block for (single file: none)."""
        return [p for p in paths if p not in self.files] if len(paths) > 1 else []

    def has_source(self, paths: Sequence[str]) -> bool:
        return not self.missing_files(paths) if len(paths) > 1 else self.code is not None

    def candidate(self, paths: Sequence[str], single_path: str) -> Candidate | None:
        """The files of this reply by path, or None while anything is missing."""
        if len(paths) > 1:
            return None if self.missing_files(paths) else Candidate({p: self.files[p] for p in paths})
        return None if self.code is None else Candidate.single(single_path, self.code)

    def unresolved(self, shown: Iterable[int]) -> list[int]:
        """Shown item ids without exactly one decision (⊥), in the order they were shown."""
        return [i for i in shown if i not in self.decisions or i in self.conflicts]

    def merge(self, later: ParsedReply) -> ParsedReply:
        """Combine with the answer to a re-ask: later decisions and code fill in or replace."""
        decisions = {**self.decisions, **later.decisions}
        conflicts = (self.conflicts - set(later.decisions)) | later.conflicts
        return ParsedReply(
            diagnosis=self.diagnosis or later.diagnosis,
            decisions=decisions,
            conflicts=conflicts,
            resident_used=sorted(set(self.resident_used) | set(later.resident_used)),
            unknown_ids=self.unknown_ids + [u for u in later.unknown_ids if u not in self.unknown_ids],
            code=later.code if later.code else self.code,
            evidence={**self.evidence, **later.evidence},
            files={**self.files, **later.files},
            unknown_files=[*self.unknown_files,
                           *(u for u in later.unknown_files if u not in self.unknown_files)],
        )


def _ids(match: re.Match[str], *groups: str) -> int:
    for g in groups:
        if match.group(g) is not None:
            return int(match.group(g))
    raise ValueError(match.group(0))  # pragma: no cover - every alternative has a group


def split_fences(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(code blocks as (language, body), prose lines outside any fence). An unclosed final fence
    runs to the end of the text (a reply cut off by max_tokens)."""
    blocks, prose = fenced_blocks(text)
    return [(b.lang.rsplit(".", 1)[-1], b.body) for b in blocks], prose


def pick_code(blocks: list[tuple[str, str]], language: str) -> str | None:
    """The kernel source: the longest non-empty block in the target's language (or unlabelled)."""
    accepted = LANGUAGE_ALIASES.get(language, frozenset({language})) | {""}
    usable = [body for lang, body in blocks
              if lang in accepted and body.strip() and (language == "python" or "{" in body)]
    if not usable:
        return None
    return max(usable, key=len).strip("\n") + "\n"


def _clean(line: str) -> str:
    line = _EMPHASIS.sub("", line)
    return _LINE_NOISE.sub("", line).strip()


#: The format line echoed back ("ADOPTED or NOT ADOPTED - ..."): both answers, so no decision.
_TEMPLATE_ECHO = re.compile(r"(?<![A-Za-z])adopted\s*(?:\bor\b|/|\|)\s*not[\s_-]*adopted\b", re.IGNORECASE)
_ECHO = re.compile(r"^\s*[:\-–—=>|]*\s*(?:\([^)]*\)|\[[^\]]*\]|\"[^\"]*\"|“[^”]*”|'[^']*')")
_SEPARATORS = " \t:-–—=>|,"
_TITLED = re.compile(r"^\s*(?:[-–—]+|\|)\s")
_TITLE_ECHO = re.compile(r"^[^:|]{1,120}?(?::|\s[-–—]+\s|\|)\s*")


def _decision_in(text: str, words: re.Pattern[str] = _CANONICAL) -> tuple[bool, str] | None:
    """(adopted, rationale) for the decision that follows an id group, or None (unresolved).

    The decision must come first: right after the id and its separators, or after an echoed title
    ("E3 (Use restrict): NOT ADOPTED", "E3 - Use restrict: NOT ADOPTED") or a "Decision:" label.
    A protocol word later in the rationale never decides ("E5: Not needed; adopted elsewhere")."""
    text = _ECHO.sub("", text, count=1)
    stripped = _LABEL.sub("", text.lstrip(_SEPARATORS)).lstrip(_SEPARATORS)
    match = words.match(stripped)
    # An echoed title ("E3 - <title>: ADOPTED", "| E3 | <title> | ADOPTED |") follows a dash or a
    # pipe, never the colon that introduces a rationale ("E5: Not needed - adopted elsewhere").
    if match is None and _TITLED.match(text):
        title = _TITLE_ECHO.match(stripped)
        if title is not None and not words.search(stripped, 0, title.end()):
            rest = _LABEL.sub("", stripped[title.end():].lstrip(_SEPARATORS))
            match = words.match(rest)
            stripped = rest
    if match is None:
        return None
    rationale = stripped[match.end():].strip(_RATIONALE_TRIM)
    return match.group("neg") is None, rationale


def parse_reply(text: str, *, shown_items: Iterable[int], shown_rules: Iterable[int],
                language: str, paths: Sequence[str] = ()) -> ParsedReply:
    """Parse one reply. `shown_items`/`shown_rules` are the ids the prompt listed; `paths` the
    files of a multi-file target (one block per path; with at most one path, the single block)."""
    items, rules = set(shown_items), set(shown_rules)
    fenced, prose = fenced_blocks(text)
    if len(paths) > 1:
        files, unknown = pick_files(fenced, paths)
        out = ParsedReply(files=files, unknown_files=unknown)
    else:
        out = ParsedReply(code=pick_code([(b.lang.rsplit(".", 1)[-1], b.body) for b in fenced], language))
    votes: dict[int, list[tuple[bool, str, str]]] = {}
    section = ""
    diagnosis: list[str] = []
    for raw in prose:
        line = _clean(raw)
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            name = header.group("name").lower()
            section = "diagnosis" if name == "diagnosis" else "rules" if "rule" in name else \
                "code" if name in ("code", "kernel", "source") else "adoption"
            line = header.group("rest").strip()
            if not line:
                continue
        if _ITEM_GROUP.match(line):
            _parse_adoption_line(line, raw, items, votes, out, bare_ok=False)
        elif section == "rules" or _RULE_GROUP.match(line):
            _parse_rules(line, rules, out, in_section=section == "rules")
        elif section == "diagnosis":
            diagnosis.append(line)
        else:
            _parse_adoption_line(line, raw, items, votes, out, bare_ok=section == "adoption")
    for item_id, vs in votes.items():
        if len({adopted for adopted, _, _ in vs}) > 1:
            out.conflicts.add(item_id)
        adopted, rationale, raw_line = vs[-1]
        out.decisions[item_id] = (adopted, rationale)
        out.evidence[item_id] = raw_line
    out.diagnosis = " ".join(diagnosis).strip()
    if not out.diagnosis:  # no header: the first prose sentence(s) before any decision line
        first = next((_clean(p) for p in prose if _clean(p) and not _ITEM_RE.search(p)), "")
        out.diagnosis = first
    return out


def _parse_rules(line: str, rules: set[int], out: ParsedReply, *, in_section: bool) -> None:
    """`RULES USED: R3, R5` (in the section every listed id counts unless a line says otherwise),
    or anywhere a line `R3: USED - why`."""
    if re.match(r"^(none|nothing|no rules?|n/?a)\b", line, re.IGNORECASE):
        return
    group = _RULE_GROUP.match(line)
    if group:
        decision = _decision_in(line[group.end():], _RULE_DECISION)
        if (decision is None and not in_section) or (decision is not None and not decision[0]):
            return
        ids_text = group.group(0)
    elif in_section:
        ids_text = line
    else:
        return
    for match in _RULE_RE.finditer(ids_text):
        rule_id = _ids(match, "rb", "r", "rr")
        if rule_id in rules:
            if rule_id not in out.resident_used:
                out.resident_used.append(rule_id)
        elif f"R{rule_id}" not in out.unknown_ids:
            out.unknown_ids.append(f"R{rule_id}")


def _parse_adoption_line(line: str, raw: str, items: set[int], votes: dict[int, list[tuple[bool, str, str]]],
                         out: ParsedReply, *, bare_ok: bool) -> None:
    ids: list[int] = []
    decision: tuple[bool, str] | None = None
    group = _ITEM_GROUP.match(line)
    if group:
        ids = [_ids(m, "b", "e", "h", "i") for m in _ITEM_RE.finditer(group.group(0))]
        decision = _decision_in(line[group.end():])
    elif bare_ok and (bare := _BARE_GROUP.match(line)):
        ids = [int(n) for n in re.findall(r"\d+", bare.group(0))]
        decision = _decision_in(line[bare.end():])
    else:  # "Adopted: E1, E2 - why" / "NOT ADOPTED: E7"
        lead = _CANONICAL.match(_LABEL.sub("", line))
        if lead:
            line = _LABEL.sub("", line)
            rest = line[lead.end():].lstrip(" :-–—=")
            later = _ITEM_GROUP.match(rest)
            if later:
                ids = [_ids(m, "b", "e", "h", "i") for m in _ITEM_RE.finditer(later.group(0))]
                decision = (lead.group("neg") is None, rest[later.end():].strip(_RATIONALE_TRIM))
    if decision is None:
        return
    # A 1.5B model often copies the format line verbatim (seen in a demo run): that line says both
    # things, so it counts as a conflict and the gate re-asks for one answer.
    echoed = bool(ids) and _TEMPLATE_ECHO.search(line) is not None
    for item_id in ids:
        if item_id in items:
            votes.setdefault(item_id, []).append((*decision, raw))
            if echoed:
                votes[item_id].append((not decision[0], decision[1], raw))
        elif f"E{item_id}" not in out.unknown_ids:
            out.unknown_ids.append(f"E{item_id}")
