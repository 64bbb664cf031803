"""The reply protocol: what the model writes each round, and a parser for it.

The model is asked (prompts/round.j2) for a diagnosis, its adoption decisions and the kernel. The
decisions are records of one schema (agent/decisions.py); how they travel depends on the backend
(agent/gate.py): a structured block returned by the backend's own mechanism (JSON-schema output,
Anthropic tool use), or -- under the embedded model's grammar and in the prose fallback -- the one
canonical line form, read strictly:

    DIAGNOSIS: <one sentence>
    ADOPTION:
    - E12: ADOPTED - <why>
    - E7: NOT ADOPTED - <why>
    - R3: NOT ADOPTED - <why>
    ```c
    <the complete kernel source>
    ```

Retrieved experiences carry ids `E<n>`, resident rules `R<n>` (n is the memory item id). Only a
line exactly in the form `- <id>: ADOPTED|NOT ADOPTED - <rationale>` decides; markdown, tables,
lower case, "Adopted: No", booleans or other languages decide nothing: the item stays unresolved
(⊥, spec §2) and the trace-completeness gate re-asks it, quoting the line it could not read. The
kernel code stays in its fenced block in every channel (models write code worse inside JSON
strings, and code in a string costs escapes). A multi-file target (docs/target_seam.md) gets one
fenced block per file, each headed by its relative path; see agent/files.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sagekernel.agent.decisions import Decisions, read_lines
from sagekernel.agent.files import fenced_blocks, pick_files
from sagekernel.candidate import Candidate

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
    decided: Decisions = field(default_factory=Decisions)  # the adoption records read (agent/decisions.py)
    code: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # multi-file targets: path -> text
    unknown_files: list[str] = field(default_factory=list)  # headed paths the target does not have

    @property
    def decisions(self) -> dict[int, tuple[bool, str]]:
        """Item id -> (adopted, rationale) for every item with a valid record (conflicts included)."""
        return self.decided.items

    @property
    def conflicts(self) -> set[int]:
        """Item ids given both answers (they stay ⊥)."""
        return {int(c[1:]) for c in self.decided.conflicts if c.startswith("E")}

    @property
    def resident_used(self) -> list[int]:
        return self.decided.rules_used()

    @property
    def unknown_ids(self) -> list[str]:
        return self.decided.unknown

    @property
    def evidence(self) -> dict[str, str]:
        """Id ("E12", "R3") -> the raw text its record was read from."""
        return self.decided.evidence

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

    def unresolved(self, shown: Sequence[int]) -> list[int]:
        """Shown item ids without exactly one valid decision (⊥), in the order they were shown."""
        return self.decided.unresolved(shown)

    def with_decisions(self, decided: Decisions) -> ParsedReply:
        """This reply with records that came by another channel (a structured block) merged in."""
        return ParsedReply(self.diagnosis, self.decided.merge(decided), self.code, dict(self.files),
                           list(self.unknown_files))

    def merge(self, later: ParsedReply) -> ParsedReply:
        """Combine with the answer to a re-ask: later decisions and code fill in or replace."""
        return ParsedReply(
            diagnosis=self.diagnosis or later.diagnosis,
            decided=self.decided.merge(later.decided),
            code=later.code if later.code else self.code,
            files={**self.files, **later.files},
            unknown_files=[*self.unknown_files,
                           *(u for u in later.unknown_files if u not in self.unknown_files)],
        )


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


_DIAGNOSIS = re.compile(r"^DIAGNOSIS:\s*(?P<text>.*)$", re.IGNORECASE)


def parse_reply(text: str, *, shown_items: Sequence[int], shown_rules: Sequence[int], language: str,
                paths: Sequence[str] = (), read_decisions: bool = True) -> ParsedReply:
    """Parse one reply. `shown_items`/`shown_rules` are the ids the prompt listed; `paths` the
    files of a multi-file target (one block per path; with at most one path, the single block).
    `read_decisions=False`: the decisions come by a structured channel, so no prose line is read
    as one (the prose may still quote the lines; they decide nothing)."""
    fenced, prose = fenced_blocks(text)
    if len(paths) > 1:
        files, unknown = pick_files(fenced, paths)
        out = ParsedReply(files=files, unknown_files=unknown)
    else:
        out = ParsedReply(code=pick_code([(b.lang.rsplit(".", 1)[-1], b.body) for b in fenced], language))
    if read_decisions:
        out.decided = read_lines(prose, shown_items=shown_items, shown_rules=shown_rules)
    diagnosis = next((m.group("text").strip() for line in prose if (m := _DIAGNOSIS.match(line.strip()))), "")
    plain = (line.strip() for line in prose)
    first = next((line for line in plain if line and not line.startswith(("- ", "ADOPTION"))), "")
    out.diagnosis = diagnosis or first
    return out
