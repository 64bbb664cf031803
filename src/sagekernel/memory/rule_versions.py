"""Versions of one resident rule when merged memories disagree (issue 30, merge by replay).

Two memories that share an item (the same content hash) may each have abstracted their own
resident rule for it (spec §6.4). Merging them keeps every distinct text as a `RuleVersion`,
each with its evidence: the memory that held it (its `memory_id`, or the export file's name for
an export that predates it) and that memory's utility changes of the item (run, operator,
episode, team, credit ξ, u after) when it was merged. The item's `rule_text` is the current
version, chosen by `current`.

Which version is current (RECONSTRUCTED from spec §6.2): the resident priority is U = u·p̂/L, and
every version of one item shares its merged u and p̂, so the version with the highest priority is
the one with the fewest tokens L; equal L: the smaller text (code point order). L is counted
again by this memory's tokenizer (ugc.py's `count_tokens`), so two memories that counted with
different tokenizers cannot disagree on it.

`merge_versions` is a set union keyed by (text, memory), the evidence of one key being the union
of its changes keyed by (run, operator, episode, kind); so merging is order-free and idempotent,
and the current version (an argmin over the union) is too (tests/test_memory_rule_versions.py).
Versions are stored (`rule_versions`, migration 0009) only for items whose merged texts differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Evidence:
    """One utility change of the item in the memory that held a version."""

    run_id: str
    operator: str
    episode: str
    kind: str  # credited | counted
    at: str = ""
    team: str = ""
    xi: float | None = None
    u_after: float | None = None

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.run_id, self.operator, self.episode, self.kind)

    def to_dict(self) -> dict[str, object]:
        return {"run_id": self.run_id, "operator": self.operator, "episode": self.episode, "kind": self.kind,
                "at": self.at, "team": self.team, "xi": self.xi, "u_after": self.u_after}


@dataclass(frozen=True)
class RuleVersion:
    """One text of an item's resident rule, as one memory held it."""

    text: str
    tokens: int
    memory: str  # the memory that held it (memory_id, or "file:NAME")
    evidence: tuple[Evidence, ...] = ()

    @property
    def text_hash(self) -> str:
        return text_hash(self.text)

    @property
    def key(self) -> tuple[str, str]:
        return (self.text_hash, self.memory)

    def to_dict(self) -> dict[str, object]:
        return {"rule_text": self.text, "rule_tokens": self.tokens, "memory": self.memory,
                "evidence": [e.to_dict() for e in self.evidence]}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _evidence_union(*parts: Iterable[Evidence]) -> tuple[Evidence, ...]:
    """Every change once; one identity with different values (which one memory cannot hold)
    resolves to the least, so the choice is order-free."""
    chosen: dict[tuple[str, str, str, str], Evidence] = {}
    for part in parts:
        for e in part:
            old = chosen.get(e.identity)
            if old is None or _rank(e) < _rank(old):
                chosen[e.identity] = e
    return tuple(sorted(chosen.values(), key=_rank))


def _rank(e: Evidence) -> tuple[object, ...]:
    return (e.at, e.run_id, e.operator, e.episode, e.kind, e.team, e.xi is None, e.xi or 0.0,
            e.u_after is None, e.u_after or 0.0)


def merge_versions(*sides: Iterable[RuleVersion]) -> tuple[RuleVersion, ...]:
    """The union of the sides' versions by (text, memory), evidence united, in key order. A
    version's L is the least any side counted (sides count it with the same tokenizer here)."""
    by_key: dict[tuple[str, str], RuleVersion] = {}
    for side in sides:
        for v in side:
            old = by_key.get(v.key)
            tokens = v.tokens if old is None else min(v.tokens, old.tokens)
            by_key[v.key] = RuleVersion(v.text, tokens, v.memory,
                                        _evidence_union(v.evidence, () if old is None else old.evidence))
    return tuple(by_key[k] for k in sorted(by_key))


def current(versions: Iterable[RuleVersion]) -> RuleVersion | None:
    """The version the item's rule_text holds: fewest tokens (highest U = u·p̂/L), then the
    smaller text."""
    return min(versions, key=lambda v: (v.tokens, v.text), default=None)


def side(stored: tuple[RuleVersion, ...], rule_text: str, tokens: int, memory: str,
         evidence: Iterable[Evidence]) -> tuple[RuleVersion, ...]:
    """One memory's versions of an item: those it stores (it merged a conflict before), else its
    own rule text, if it has one, as a version held by itself."""
    if stored:
        return stored
    return (RuleVersion(rule_text, tokens, memory, _evidence_union(evidence)),) if rule_text else ()


def distinct_texts(versions: Iterable[RuleVersion]) -> int:
    return len({v.text for v in versions})
