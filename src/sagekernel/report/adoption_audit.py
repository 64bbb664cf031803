"""The adoption audit (S1 App. D.1): do the adoptions a run recorded match what the agent did?

From a recorded run's round traces it takes every ADOPTED decision, samples some, and puts side by
side the item as the model saw it, the structured decision as recorded (id, ADOPTED, the rationale,
the channel it came by: json_schema / tool / grammar / prose / mcp), the raw reply it was read from
(the round's model replies from the exchange log, or the MCP `evaluate` call's arguments), and the
diff of the code revision that followed: that round's candidate against the operator's previous
candidate (the whole file for the first one). A refusal recorded as an adoption would show here as a
raw reply that says "no" beside a decision that says ADOPTED. A person rates the correspondence
(full / partial / unrelated; runner/ratings.py stores it). The automatic check is a lower bound on
correspondence that needs no person: the revision's added lines contain the item's idiom (a line of
its correct code) or one of its distinctive identifiers (in its correct code, not in its wrong code,
not a C keyword). A record it misses may still be a real adoption (an idea can be adopted in other
words), so its share is reported as "at least"; it is computed, never stored.

Read-only (report/ must not mutate a store).
"""

from __future__ import annotations

import difflib
import json
import random
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from sagekernel.models.exchange_log import evaluated_arguments, round_answers
from sagekernel.runner.store import RunStore

#: Words that say nothing about which item was followed.
_COMMON_WORDS = """
auto break case char const continue default do double else enum extern float for goto if inline int
long register return short signed sizeof static struct switch typedef union unsigned void volatile
while include define ifdef ifndef endif pragma omp stdint h math x y i j k n out in def self import
torch tensor float32 int32 int64 true false null none
"""
_COMMON = frozenset(_COMMON_WORDS.split())  # "restrict" is kept: it is an idiom items teach
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class AdoptedRecord:
    """One ADOPTED decision of a recorded run, with the code revision that followed it."""

    run_id: str
    operator: str
    round: int
    episode: str
    item_id: int
    title: str
    wrong_code: str
    correct_code: str
    rationale: str
    revision: str | None  # this round's candidate source (None: the round had no code)
    previous: str | None  # the operator's previous candidate source (None: the first one)
    channel: str = ""  # how the decision came (AdoptionDecision.channel; "" in traces before it)
    evidence: str = ""  # the raw text the record was read from (a line, a JSON record)
    raw_reply: str | None = None  # the round's replies as the model wrote them (None: not logged)

    @property
    def decision(self) -> dict[str, str]:
        """The structured record, as validated (agent/decisions.py)."""
        return {"id": f"E{self.item_id}", "decision": "ADOPTED", "rationale": self.rationale,
                "channel": self.channel or "unknown"}

    @property
    def record_id(self) -> str:
        """What `--rate` names: OPERATOR/ROUND/E<item>."""
        return f"{self.operator}/{self.round}/E{self.item_id}"

    def diff(self, context: int = 2) -> list[str]:
        """The unified diff previous -> revision (no header lines)."""
        before = (self.previous or "").splitlines()
        after = (self.revision or "").splitlines()
        lines = difflib.unified_diff(before, after, "previous", "revision", n=context, lineterm="")
        return [line for line in lines if not line.startswith(("---", "+++"))]

    def added_lines(self) -> list[str]:
        return [line[1:] for line in self.diff(0) if line.startswith("+")]


@dataclass(frozen=True)
class AutoCheck:
    matched: bool
    idiom: bool  # a line of the item's correct code appears in the added lines
    identifiers: list[str] = field(default_factory=list)  # distinctive identifiers found there


def distinctive_identifiers(correct_code: str, wrong_code: str) -> set[str]:
    """Identifiers the item's fix introduces (falls back to all of its non-common identifiers)."""
    fix = {t for t in _IDENT.findall(correct_code) if t.lower() not in _COMMON and len(t) > 1}
    new = fix - set(_IDENT.findall(wrong_code))
    return new or fix


def _norm(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def auto_check(record: AdoptedRecord) -> AutoCheck:
    """The automatic lower-bound check of one record (see the module docstring)."""
    added = record.added_lines()
    if not added:
        return AutoCheck(False, False)
    text = "\n".join(_norm(line) for line in added)
    idiom = any(len(n) >= 8 and n in text for n in map(_norm, record.correct_code.splitlines()))
    present = set(_IDENT.findall(text))
    found = sorted(distinctive_identifiers(record.correct_code, record.wrong_code) & present)
    return AutoCheck(idiom or bool(found), idiom, found)


def round_replies(conn: sqlite3.Connection, run_id: str, operator: str, round_: int,
                  channel: str = "") -> str | None:
    """The raw reply behind a round's decisions: its model calls (the round's call, the decisions
    call of the json_schema channel, the re-asks; each structured answer after its text), or for
    the MCP tools the arguments of the `evaluate` call that was evaluated. The last attempt of the
    round counts (an operator restarted on resume asked again). None when nothing was logged."""
    if channel == "mcp":
        args = evaluated_arguments(conn, run_id, operator, round_)
        if args is None:
            return None
        return json.dumps({k: args.get(k) for k in ("adoptions", "diagnosis")}, indent=1, ensure_ascii=False)
    calls = [(tags.get("purpose", ""), text, structured)
             for tags, text, structured in round_answers(conn, run_id, operator, round_)]
    starts = [n for n, (purpose, _, _) in enumerate(calls) if purpose == "round"]
    if not starts:
        return None
    parts = []
    for purpose, text, structured in calls[starts[-1]:]:
        if purpose != "round" and purpose != "decide" and not purpose.startswith("reask-"):
            continue
        parts.append(f"[{purpose}]\n{text.strip()}")
        if structured is not None:
            parts.append(f"[{purpose}: structured answer]\n{structured}")
    return "\n\n".join(parts)


def adopted_records(conn: sqlite3.Connection, run_id: str) -> list[AdoptedRecord]:
    """Every ADOPTED decision of the run, in stream order (operator, round, item)."""
    store = RunStore(conn)
    by_operator = store.traces_by_operator(run_id)
    out: list[AdoptedRecord] = []
    for operator, rounds in by_operator.items():
        previous: str | None = None
        for rt in sorted(rounds, key=lambda r: r.round):
            revision = store.candidate(rt.candidate_hash) if rt.candidate_hash else None
            shown = {r.item_id: r for r in rt.retrieved}
            raw: str | None = None
            for d in rt.decisions:
                item = shown.get(d.item_id)
                if d.adopted is not True or item is None:
                    continue
                raw = raw if raw is not None else round_replies(conn, run_id, operator, rt.round, d.channel)
                out.append(AdoptedRecord(run_id, operator, rt.round, rt.episode.value, d.item_id, item.title,
                                         item.wrong_code, item.correct_code, d.rationale, revision, previous,
                                         d.channel, d.evidence, raw))
            if revision is not None:
                previous = revision
    return out


def sample(records: list[AdoptedRecord], n: int, seed: int = 0) -> list[AdoptedRecord]:
    """A reproducible sample of at most n records, kept in stream order."""
    if n >= len(records):
        return list(records)
    picked = set(random.Random(seed).sample(range(len(records)), n))
    return [r for i, r in enumerate(records) if i in picked]


def audit_rows(records: list[AdoptedRecord], ratings: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        check = auto_check(r)
        rows.append({"id": r.record_id, "operator": r.operator, "round": r.round, "episode": r.episode,
                     "item_id": r.item_id, "title": r.title, "rationale": r.rationale,
                     "decision": r.decision, "evidence": r.evidence, "raw_reply": r.raw_reply,
                     "correct_code": r.correct_code, "diff": r.diff(), "auto": asdict(check),
                     "rating": ratings.get(r.record_id)})
    return rows


def summarize(rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """Shares over the sample: the automatic lower bound, and the person's ratings so far."""
    n = len(rows)
    matched = sum(1 for r in rows if r["auto"]["matched"])
    rated = [r["rating"] for r in rows if r["rating"]]
    counts = {k: rated.count(k) for k in ("full", "partial", "unrelated")}
    return {"adopted_records": total, "sampled": n, "auto_matched": matched,
            "auto_share": matched / n if n else None, "rated": len(rated), "ratings": counts,
            "full_or_partial_share": (counts["full"] + counts["partial"]) / len(rated) if rated else None}
