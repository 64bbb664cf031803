"""Records that flow between modules (architecture.md, "Records").

Plain dataclasses, persisted as rows or JSON, never pickled. Module-specific records live with
their module: `Task` in tasks/, `Verdict` in harness/, `Item`/`HotSnapshot` in memory/,
`Reply` in models/. The ones here are shared by agent/, memory/, runner/ and report/.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class EpisodeKind(str, Enum):
    """g in spec §1: the correctness episode, then the optimisation episode."""

    CORR = "corr"
    OPT = "opt"


@dataclass(frozen=True)
class RetrievedItem:
    """One experience shown to the model in a round, with the scores that ranked it."""

    item_id: int
    title: str
    type: str
    category: str
    error_message: str
    wrong_code: str
    correct_code: str
    relevance: float  # in [0, 1]
    utility: float  # u_m (or Q for value memory) at retrieval time
    score: float  # the ranking score actually used


@dataclass(frozen=True)
class ResidentRule:
    """A consolidated rule kept in every prompt (the hot region H)."""

    item_id: int
    rule_text: str
    tokens: int


@dataclass(frozen=True)
class AdoptionDecision:
    """a_{m,t} in spec §2 step 3: adopted (True), not adopted (False) or unresolved (None = ⊥).
    A validated record of agent/decisions.py's schema; `channel` says how it came ("json_schema",
    "tool", "grammar", "prose", "mcp") and `evidence` is the raw text it was read from."""

    item_id: int
    adopted: bool | None
    rationale: str
    channel: str = ""
    evidence: str = ""


@dataclass
class RoundTrace:
    """What happened in one refinement round (architecture.md `RoundTrace`)."""

    round: int  # 1-based, counted over the whole operator (corr + opt share the budget T)
    episode: EpisodeKind
    retrieved: list[RetrievedItem] = field(default_factory=list)
    resident_shown: list[int] = field(default_factory=list)
    resident_used: list[int] = field(default_factory=list)
    decisions: list[AdoptionDecision] = field(default_factory=list)
    rule_decisions: list[AdoptionDecision] = field(default_factory=list)  # per shown rule (used = adopted)
    candidate_hash: str | None = None
    compiled: bool = False
    correct: bool = False
    latency_ms: float | None = None  # candidate latency when correct
    verdict: dict[str, Any] | None = None  # Verdict.to_dict()
    reasks: int = 0  # trace-completeness re-asks spent in this round
    suspect: bool = False  # the harness quarantined this verdict (Verdict.suspect)

    @property
    def counts_as_success(self) -> bool:
        """`Verdict.counts_as_success` of this round: passed every stage, correct, not quarantined.
        The one test of success for credit, distillation and consolidation (and their replay)."""
        stage = (self.verdict or {}).get("stage", "ok")
        return self.correct and not self.suspect and stage == "ok"

    def adopted_ids(self) -> set[int]:
        return {d.item_id for d in self.decisions if d.adopted is True}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["episode"] = self.episode.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundTrace:
        return cls(
            round=data["round"],
            episode=EpisodeKind(data["episode"]),
            retrieved=[RetrievedItem(**r) for r in data.get("retrieved", [])],
            resident_shown=list(data.get("resident_shown", [])),
            resident_used=list(data.get("resident_used", [])),
            decisions=[AdoptionDecision(**d) for d in data.get("decisions", [])],
            rule_decisions=[AdoptionDecision(**d) for d in data.get("rule_decisions", [])],
            candidate_hash=data.get("candidate_hash"),
            compiled=data.get("compiled", False),
            correct=data.get("correct", False),
            latency_ms=data.get("latency_ms"),
            verdict=data.get("verdict"),
            reasks=data.get("reasks", 0),
            suspect=bool(data.get("suspect", (data.get("verdict") or {}).get("suspect", False))),
        )


@dataclass
class EpisodeTrace:
    """One episode of one operator: what the memory policy learns from."""

    operator: str
    category: str
    level: int
    episode: EpisodeKind
    rounds: list[RoundTrace] = field(default_factory=list)
    success: bool = False  # corr: a correct kernel was found; opt: T_best < T_first
    t_first_ms: float | None = None
    t_best_ms: float | None = None

    def retrieved_ids(self) -> set[int]:
        """R = ∪_t R_t (spec §2)."""
        return {r.item_id for rt in self.rounds for r in rt.retrieved}

    def adopted_ids(self) -> set[int]:
        """A = items adopted in at least one round, plus resident rules marked used (spec §2, §4.3)."""
        adopted: set[int] = set()
        for rt in self.rounds:
            adopted |= rt.adopted_ids()
            adopted |= set(rt.resident_used)
        return adopted

    def unresolved_ids(self) -> set[int]:
        """Retrieved items whose adoption stayed ⊥ in every round that showed them."""
        resolved = {d.item_id for rt in self.rounds for d in rt.decisions if d.adopted is not None}
        return self.retrieved_ids() - resolved


@dataclass(frozen=True)
class ItemDraft:
    """A new experience proposed by distillation (spec §5), before the store gives it an id."""

    title: str
    type: str
    category: str
    error_message: str
    wrong_code: str
    correct_code: str
    source_operator: str


@dataclass
class OperatorResult:
    """Everything the metrics need about one operator (architecture.md `OperatorResult`)."""

    run_id: str
    position: int  # index in the stream
    operator: str
    level: int
    category: str
    compiled: bool
    correct: bool
    rounds_used: int
    first_correct_round: int | None
    t_first_ms: float | None
    t_best_ms: float | None
    t_ref_ms: float | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    wall_s: float = 0.0
    error: str | None = None  # why processing the operator failed (recorded, the stream went on)

    @property
    def speedup(self) -> float | None:
        """T_ref / T_best for a solved operator."""
        if not self.correct or not self.t_best_ms or not self.t_ref_ms:
            return None
        return self.t_ref_ms / self.t_best_ms

    @property
    def self_speedup(self) -> float | None:
        """T_first / T_best (S_self is the median of this over solved operators)."""
        if not self.correct or not self.t_best_ms or not self.t_first_ms:
            return None
        return self.t_first_ms / self.t_best_ms


@dataclass(frozen=True)
class SpeedupInterval:
    """A speedup's bootstrap interval (harness/speedup_interval.py computes it; the agent and the
    report read it): `low` <= `point` <= `high`, `point` being the plain statistic."""

    point: float
    low: float
    high: float
    confidence: float
    resamples: int
    rounds: int  # per-round ratios used (all groups together)
    seed: int
    method: str = ""

    def faster_than(self, p: float) -> bool:
        """Noise-aware Fast_p: faster than p only when the lower bound is above p."""
        return self.low > p

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> SpeedupInterval | None:
        """The interval of a stored record; None when there is none or it is malformed."""
        import math

        if not isinstance(data, dict):
            return None
        try:
            low, high, point = float(data["low"]), float(data["high"]), float(data["point"])
            rest = (float(data.get("confidence", 0.95)), int(data.get("resamples", 0)),
                    int(data.get("rounds", 0)), int(data.get("seed", 0)), str(data.get("method", "")))
        except (KeyError, TypeError, ValueError):
            return None
        if not all(math.isfinite(v) and v > 0 for v in (low, high, point)):
            return None
        return cls(point, low, high, *rest)
