"""Memory records: the experience item (spec §1.1), the hot snapshot (§1.2), adoption records.

Plain dataclasses persisted as rows of `0001_memory.sql` (never pickled). The algorithms in
atu.py / ugc.py / value_memory.py are pure functions over these records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from sagekernel import defaults


class ItemState(str, Enum):
    """Lifecycle of spec §6.5: cold -> validated -> consolidated (-> validated | cold)."""

    COLD = "cold"
    VALIDATED = "validated"
    CONSOLIDATED = "consolidated"


@dataclass(frozen=True)
class MemoryConfig:
    """Every knob of spec §14 that memory/ uses (defaults are the spec's)."""

    delta: float = 0.2  # unsuccessful-episode penalty δ (SOURCED)
    beta: float = 0.2  # unadopted-retrieval penalty β (SOURCED)
    eta_min: float = 0.05  # η_min (SOURCED)
    # RECONSTRUCTED (spec §4.1): z of an opt episode with no gain; −δ by default, 0 allowed.
    opt_no_gain_score: float | None = None  # None means −δ
    gamma: float = defaults.GAMMA  # utility reranking strength γ (SOURCED)
    k: int = defaults.K  # items per round (DERIVED)
    pool: int | None = None  # K′, the candidates reranked; None: 3k of each retrieval (RECONSTRUCTED)
    k_ado: int = 3  # K_ado (SOURCED)
    k_op: int = 3  # K_op (SECONDARY)
    budget_tokens: int = defaults.HOT_BUDGET  # B (SOURCED)
    mu: float = 0.1  # resident p̂ EMA rate (SECONDARY)
    max_new_items: int = defaults.MAX_NEW_ITEMS  # per episode (RECONSTRUCTED)
    dedup_sim: float = 0.9  # embedding-similarity dedup threshold (RECONSTRUCTED)
    max_rule_tokens: int = 300  # resident rule max length (RECONSTRUCTED)
    # Value memory (spec §12.6, RECONSTRUCTED, borrowed from S5/S6)
    alpha: float = 0.1
    epsilon: float = 0.1

    def pool_size(self, k: int) -> int:
        """K′ for a retrieval of k items: `pool` when set, else 3k (spec §3), never below k."""
        return max(k, self.pool if self.pool is not None else 3 * k)

    @property
    def q(self) -> float:
        """q = max(δ, β): the lower bound of credit and utility (Properties 1 and 2)."""
        return max(self.delta, self.beta)

    @property
    def no_gain(self) -> float:
        return -self.delta if self.opt_no_gain_score is None else self.opt_no_gain_score


@dataclass
class Item:
    """One experience item of the cold store with its evidence (spec §1.1)."""

    id: int
    title: str
    type: str
    category: str
    error_message: str
    wrong_code: str
    correct_code: str
    u: float = 0.0
    n_ret: int = 0
    n_ado: int = 0
    n_upd: int = 0
    adopting_ops: set[str] = field(default_factory=set)
    retrieving_ops: set[str] = field(default_factory=set)  # proxy for the uniform-credit gate (§9)
    p_hat: float = 0.0
    eligible_episodes: int = 0
    state: ItemState = ItemState.COLD
    rule_text: str = ""
    rule_tokens: int = 0  # L_m
    q1: float = 0.0  # value memory, Drafting stage (§12.6)
    q2: float = 0.0  # value memory, Refining stage
    born_episode: int = 0  # episode clock at creation (for eligible_episodes)
    resident_episodes: int = 0  # episodes spent consolidated
    promoted_at_episode: int | None = None
    source: str = "distilled"  # seed | distilled | import
    created_at: str = ""
    content_hash: str = ""

    def __post_init__(self) -> None:
        if not self.content_hash:
            self.content_hash = content_hash(self.title, self.type, self.category, self.error_message,
                                             self.wrong_code, self.correct_code)

    @property
    def retrievable(self) -> bool:
        """Spec §3: cold and validated items can be retrieved, consolidated ones cannot."""
        return self.state is not ItemState.CONSOLIDATED

    def text(self) -> str:
        """The retrieval-facing text (what is embedded)."""
        return f"{self.title}. {self.error_message} ({self.category}; {self.type})"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["adopting_ops"] = sorted(self.adopting_ops)
        data["retrieving_ops"] = sorted(self.retrieving_ops)
        return data


def content_hash(title: str, type_: str, category: str, error_message: str, wrong_code: str,
                 correct_code: str) -> str:
    """sha256 over the item's content fields (not its statistics); import dedups on it."""
    payload = json.dumps([title.strip(), type_.strip(), category.strip(), error_message.strip(),
                          wrong_code.strip(), correct_code.strip()], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AdoptionRecord:
    """One a_{m,t} with its rationale (spec §2 step 3), as stored in `adoptions`."""

    run_id: str
    operator: str
    episode: str
    round: int
    item_id: int
    adopted: bool | None
    rationale: str


@dataclass(frozen=True)
class HotEntry:
    """A resident rule inside a HotSnapshot (nested fields RECONSTRUCTED, spec §1.2)."""

    id: int
    rule_text: str
    L: int
    u: float
    p_hat: float
    U: float
    adopting_ops: list[str]
    promoted_at_episode: int | None


@dataclass(frozen=True)
class HotSnapshot:
    """The hot region after one UGC rebuild (spec §1.2)."""

    run_id: str
    created_at: str  # e.g. 20260811_111049
    budget: int
    n_ops: int
    hot_entries: list[HotEntry]

    @property
    def total_tokens(self) -> int:
        return sum(e.L for e in self.hot_entries)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "created_at": self.created_at, "budget": self.budget,
                "n_ops": self.n_ops, "total_tokens": self.total_tokens,
                "hot_entries": [dict(e.__dict__, adopting_ops=list(e.adopting_ops))
                                for e in self.hot_entries]}


@dataclass(frozen=True)
class Provenance:
    """Who and what caused a change to the memory (issue 30): stamped on every item's creation
    and every utility change, immutable once written (`item_history`)."""

    run_id: str = ""
    model: str = ""
    target: str = ""
    device: str = ""
    operator: str = ""
    episode: str = ""  # corr | opt | ''
    protocol: str = ""  # the harness protocol: a hash of the harness settings
    team: str = ""

    def values(self) -> tuple[str, ...]:
        return (self.run_id, self.model, self.target, self.device, self.operator, self.episode,
                self.protocol, self.team)


#: The kinds of provenance row: how an item came (seeded, distilled, imported) or changed.
HISTORY_KINDS = ("seeded", "distilled", "imported", "credited", "counted")


@dataclass(frozen=True)
class HistoryRow:
    """One immutable row of an item's history: its creation, or one utility change."""

    item_id: int
    kind: str  # one of HISTORY_KINDS
    clock: int  # the memory's episode clock after the episode (0: not an episode)
    origin: Provenance
    xi: float | None = None  # the credit ξ of a credited change
    u_before: float | None = None
    u_after: float | None = None
    retrieved: bool = False  # this change counted a retrieval (n_ret += 1)
    adopted: bool = False  # this change counted an adoption (n_ado += 1)
    created_at: str = ""


@dataclass(frozen=True)
class RetrievalScope:
    """Which items a learner may retrieve, by provenance (issue 30): only items with a history row
    (creation or utility change) matching every `only` field (e.g. target=cpu: credited or made on
    this target; team=blue), and never items created by one of `exclude_runs`."""

    only: tuple[tuple[str, str], ...] = ()
    exclude_runs: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.only or self.exclude_runs)
