"""Merge by replay (issue 30): joining two memories recomputes each item's utility and counters from
the union of their utility changes, instead of letting one side's numbers overwrite the other's.

An `Event` is one provenance row of kind credited or counted (memory/records.py HistoryRow), named
by the item's content hash (ids differ between memories) and by the episode that caused it. An
episode changes an item at most once, so (item, run, operator, episode, kind) identifies an event
in every memory that holds it. `union` deduplicates on that identity; `fold` replays the events of
each item in one canonical order — the episode's stamp (taken under the writer lock, strictly
increasing within one memory, so a memory's own order), then run, operator, episode — through the
same ATU update the live memory applies (atu.update_utility). Hence, as the hypothesis properties in
tests/test_memory_merge.py check:
  fold(union(a, b)) == fold(union(b, a))       merge order does not matter,
  fold(union(a, a)) == fold(a)                 merging a memory with itself changes nothing,
  fold(events of one memory) == its live state (u, n_upd, n_ret, n_ado, operators).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sagekernel.memory.atu import update_utility


@dataclass(frozen=True)
class Event:
    """One utility change of one item, portable between memories."""

    item: str  # the item's content hash
    run_id: str
    operator: str
    episode: str
    kind: str  # credited | counted
    at: str  # the episode's stamp (ISO-8601, microseconds)
    xi: float | None  # the credit (credited events)
    retrieved: bool
    adopted: bool

    @property
    def identity(self) -> tuple[str, str, str, str, str]:
        return (self.item, self.run_id, self.operator, self.episode, self.kind)

    @property
    def order(self) -> tuple[str, str, str, str]:
        return (self.at, self.run_id, self.operator, self.episode)


@dataclass
class Replayed:
    """An item's statistics recomputed from its events."""

    u: float = 0.0
    n_upd: int = 0
    n_ret: int = 0
    n_ado: int = 0
    adopting_ops: set[str] = field(default_factory=set)
    retrieving_ops: set[str] = field(default_factory=set)


def union(*memories: Iterable[Event]) -> frozenset[Event]:
    """Every event of the given memories once. Two events with one identity but different values
    (which one memory cannot hold) resolve to the least by value, so the choice is order-free."""
    chosen: dict[tuple[str, ...], Event] = {}
    for events in memories:
        for e in events:
            old = chosen.get(e.identity)
            if old is None or _rank(e) < _rank(old):
                chosen[e.identity] = e
    return frozenset(chosen.values())


def _rank(e: Event) -> tuple[object, ...]:
    return (e.at, e.xi is None, e.xi or 0.0, e.retrieved, e.adopted)


def fold(events: Iterable[Event], eta_min: float) -> dict[str, Replayed]:
    """Each item's statistics after its events, applied in canonical order from u = 0."""
    out: dict[str, Replayed] = {}
    for e in sorted(events, key=lambda e: (e.order, e.kind)):
        r = out.setdefault(e.item, Replayed())
        if e.kind == "credited" and e.xi is not None:
            r.u, r.n_upd = update_utility(r.u, r.n_upd, e.xi, eta_min)
        if e.retrieved:
            r.n_ret += 1
            r.retrieving_ops.add(e.operator)
        if e.adopted:
            r.n_ado += 1
            r.adopting_ops.add(e.operator)
    return out
