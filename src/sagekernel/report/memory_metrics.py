"""Memory figures for the report: items by lifecycle state, the resident (hot) set over the
stream, the utility distribution, how often retrieved items are adopted, the most adopted items.

Pure functions over small view records that `load.py` fills from the memory tables
(migrations/0001_memory.sql). Items are the memory the run learned into as it is now (its
workspace's, or a shared one: then every team's items); adoptions, hot snapshots and the
provenance counts are filtered to the run being reported.

Choices:
- Adoption rate = adopted decisions / retrieval events (one `adoptions` row per retrieved item
  per round). Unresolved (⊥) decisions stay in the denominator, because a retrieved item the
  agent never resolved was not adopted; their count is reported next to the rate.
- "Most adopted" ranks by n_ado (deduplicated adoptions), then by the number of distinct
  adopting operators, then by utility, then by id.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sagekernel.metrics import rate

STATES = ("cold", "validated", "consolidated")


@dataclass(frozen=True)
class ItemView:
    """One memory item as the report needs it (spec §1.1)."""

    id: int
    title: str
    type: str
    category: str
    state: str
    u: float
    n_ret: int
    n_ado: int
    n_operators: int = 0  # |O_m|, distinct adopting operators
    rule_tokens: int | None = None


@dataclass(frozen=True)
class AdoptionView:
    """One adoption decision a_{m,t} (spec §2 step 3): True, False or None (unresolved)."""

    operator: str
    episode: str
    round: int
    item_id: int
    adopted: bool | None


@dataclass(frozen=True)
class SnapshotView:
    """One hot-memory snapshot (spec §1.2), written after a UGC rebuild."""

    created_at: str
    n_ops: int
    budget: int
    n_entries: int
    total_tokens: int


@dataclass(frozen=True)
class RunProvenance:
    """What one run did to the memory, from its provenance rows: items it distilled, items it
    credited (or counted), those of them another run distilled, and how many other runs left rows
    (a shared memory: the runs it learned beside)."""

    created: int
    credited: int
    credited_of_other_runs: int
    other_runs: int

    @property
    def touched(self) -> bool:
        return bool(self.created or self.credited)


@dataclass(frozen=True)
class UtilitySummary:
    count: int
    mean: float | None
    median: float | None
    minimum: float | None
    maximum: float | None
    positive: int  # items with u > 0 (the first UGC gate)


@dataclass
class MemoryMetrics:
    n_items: int
    by_state: dict[str, int]
    utility: UtilitySummary
    utilities: list[float]
    n_retrievals: int
    n_adopted: int
    n_unresolved: int
    adoption_rate: float | None
    resident: list[SnapshotView] = field(default_factory=list)
    top_adopted: list[ItemView] = field(default_factory=list)
    where: str = ""  # the memory read: a workspace or snapshot path, or a shared memory's URL
    provenance: RunProvenance | None = None

    @property
    def resident_now(self) -> SnapshotView | None:
        return self.resident[-1] if self.resident else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def items_by_state(items: Sequence[ItemView]) -> dict[str, int]:
    """Count per lifecycle state; the three spec states are always present (maybe 0)."""
    counts = dict.fromkeys(STATES, 0)
    for item in items:
        counts[item.state] = counts.get(item.state, 0) + 1
    return counts


def utility_summary(items: Sequence[ItemView]) -> UtilitySummary:
    values = [i.u for i in items]
    if not values:
        return UtilitySummary(0, None, None, None, None, 0)
    return UtilitySummary(len(values), statistics.fmean(values), statistics.median(values),
                          min(values), max(values), sum(1 for v in values if v > 0))


def adoption_rate(adoptions: Sequence[AdoptionView]) -> float | None:
    """Share of retrieval events whose item the agent adopted (percentage)."""
    return rate(sum(1 for a in adoptions if a.adopted is True), len(adoptions))


def resident_series(snapshots: Sequence[SnapshotView]) -> list[SnapshotView]:
    """The resident set over the stream: snapshots ordered by completed operators, then time."""
    return sorted(snapshots, key=lambda s: (s.n_ops, s.created_at))


def most_adopted(items: Sequence[ItemView], k: int = 10) -> list[ItemView]:
    """The k most adopted items (ignoring never-adopted ones)."""
    ranked = sorted((i for i in items if i.n_ado > 0),
                    key=lambda i: (-i.n_ado, -i.n_operators, -i.u, i.id))
    return ranked[:k]


def summarize_memory(items: Sequence[ItemView], adoptions: Sequence[AdoptionView],
                     snapshots: Sequence[SnapshotView], top_k: int = 10, *, where: str = "",
                     provenance: RunProvenance | None = None) -> MemoryMetrics:
    return MemoryMetrics(
        n_items=len(items),
        by_state=items_by_state(items),
        utility=utility_summary(items),
        utilities=[i.u for i in items],
        n_retrievals=len(adoptions),
        n_adopted=sum(1 for a in adoptions if a.adopted is True),
        n_unresolved=sum(1 for a in adoptions if a.adopted is None),
        adoption_rate=adoption_rate(adoptions),
        resident=resident_series(snapshots),
        top_adopted=most_adopted(items, top_k),
        where=where,
        provenance=provenance,
    )
