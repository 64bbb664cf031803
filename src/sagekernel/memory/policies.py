"""The memory methods as `MemoryPolicy` implementations over one store (spec §9).

refinement: no memory. static-rag: relevance-only retrieval, no writes. value-memory: EvoKernel Q
values (spec §12.6). sage: ATU + utility reranking + UGC, and its ablations sage-uniform-credit,
sage-no-ugc, sage-random-ugc.

Single writer: only the runner calls `learn`, once per episode, after the operator's result was
recorded. `learn` is one transaction — credit → adoption records → new items → UGC → snapshot —
so a crash leaves the store as it was. If the caller already holds a transaction (to mark
`episode_updates` in the same unit), `learn` joins it instead of opening one.

No model call ever runs inside that transaction: the rule abstraction (spec §6.4) of items an
update would validate is found first by a dry run of the update (`rule_requests`, rolled back),
asked outside any transaction, and handed to `learn` as `rules` (item id -> text). A caller that
holds the transaction must pass `rules` (the runner does); `learn` called on its own does the
dry run and the calls itself, before it opens its transaction.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sagekernel import db, defaults
from sagekernel.errors import SageError
from sagekernel.memory.atu import (
    CreditRule,
    EpisodeSets,
    apply_credit,
    atu_credit,
    count_only,
    episode_sets,
    terminal_score,
    uniform_credit,
    update_access,
)
from sagekernel.memory.embedding import Embedder, count_tokens, default_embedder
from sagekernel.memory.methods import METHODS, VARIANTS
from sagekernel.memory.records import (
    AdoptionRecord,
    HistoryRow,
    HotEntry,
    HotSnapshot,
    Item,
    ItemState,
    MemoryConfig,
    Provenance,
    RetrievalScope,
)
from sagekernel.memory.retrieval import Candidate, RetrievalIndex, query_terms, rerank
from sagekernel.memory.store import Store, draft_to_item, now_stamp
from sagekernel.memory.ugc import AbstractRule, make_rule, priority, rebuild, regate
from sagekernel.memory.value_memory import PopArt, epsilon_greedy, q_update, round_rewards
from sagekernel.protocols import MemoryPolicy
from sagekernel.records import EpisodeKind, EpisodeTrace, ItemDraft, ResidentRule, RetrievedItem

_AUTO = "auto"


class UnknownMethod(SageError):
    pass


@dataclass(frozen=True)
class RuleRequest:
    """An item an update would validate, and the adoption rationales its rule is abstracted from."""

    item: Item
    rationales: tuple[str, ...]


#: An episode to learn and the items distilled from it.
Episode = tuple[EpisodeTrace, Sequence[ItemDraft]]


class _DryRun(Exception):
    """Rolls back the dry run of `rule_requests`."""


class NoMemory:
    """Refinement: no retrieval, no resident rules, nothing learned."""

    name = "refinement"

    def retrieve(self, query: str, *, operator: str, category: str, episode: EpisodeKind,
                 k: int = defaults.K) -> list[RetrievedItem]:
        return []

    def resident_rules(self) -> list[ResidentRule]:
        return []

    def learn(self, trace: EpisodeTrace, new_items: Sequence[ItemDraft] = (), *,
              rules: Mapping[int, str] | None = None) -> None:
        return None

    def rule_requests(self, episodes: Sequence[Episode]) -> list[RuleRequest]:
        return []

    def abstract_rules(self, requests: Sequence[RuleRequest]) -> dict[int, str]:
        return {}


class StorePolicy:
    """static-rag, value-memory and the SAGE variants over the SQLite store."""

    def __init__(self, method: str, conn: sqlite3.Connection, *, run_id: str, frozen: bool = False,
                 seed: int = 0, config: MemoryConfig | None = None,
                 abstract_rule: AbstractRule | None = None, embedder: Embedder | None = None,
                 provenance: Provenance | None = None, scope: RetrievalScope | None = None) -> None:
        self.name = method
        self.scope = scope if scope is not None and scope.active else None
        #: Stamped on every change this policy makes (operator and episode filled per episode).
        self.provenance = replace(provenance or Provenance(), run_id=run_id)
        self.variant = VARIANTS[method]
        self.store = Store(conn)
        self.run_id = run_id
        self.frozen = frozen
        self.seed = seed
        self.cfg = config or MemoryConfig()
        self.abstract_rule = abstract_rule
        #: Retrievals so far per (memory clock, operator, episode) in this process: with the seed and
        #: the persisted clock, it names each ε-greedy draw (see `_draws`).
        self._retrievals: dict[tuple[int, str, str], int] = {}
        self.embedder = embedder
        self._backfill_embeddings()
        #: The newest provenance row the index reflects; before a retrieval from a shared store the
        #: index is patched with what other learners changed since (`_sync`).
        self._index_mark = self.store.history_mark()
        self.index = RetrievalIndex(self.store, embedder)

    # ---- reading --------------------------------------------------------------------------------
    def retrieve(self, query: str, *, operator: str, category: str, episode: EpisodeKind,
                 k: int = defaults.K) -> list[RetrievedItem]:
        self._sync()
        text = f"{category} {query}"  # RECONSTRUCTED query composition: category words help BM25
        draws = self._draws(operator, episode) if self.variant.credit == "value" else None
        return self.retrieve_with(text, self.index.embed_query(text), episode=episode, k=k, draws=draws)

    def _sync(self) -> None:
        """Patch the index with what other learners wrote to the shared store since it was last
        synchronised: their new items become retrievable, utilities they credited and the items
        they consolidated or demoted are brought up to date (the rows after the index's mark, and
        every non-cold item; memory/store.py `changed_since`). The result equals a fresh load."""
        if not self.store.shared:
            return
        mark = self.store.history_mark()
        if mark == self._index_mark:
            return
        # ... and the items the index holds as resident (one demoted straight to cold has no row)
        ids = self.store.changed_since(self._index_mark) | set(self.index.resident_ids())
        self._index_mark = mark
        if len(ids) > max(1000, len(self.index) // 5):
            self.index.reload()  # a large catch-up: one bulk load is cheaper
            return
        items = self.store.get_many(ids)
        known = set(self.index.ids.tolist())
        self.index.update(m for i, m in items.items() if i in known)
        for i in sorted(set(items) - known):
            vec = self.store.embedding_of(i, self.embedder.name) if self.embedder is not None else None
            self.index.add(items[i], vec)

    def _draws(self, operator: str, episode: EpisodeKind) -> random.Random:
        """The random draws of one value-memory retrieval, derived from persisted state only: the
        seed, the memory's episode clock (it does not move while an operator runs, as learning waits
        for its end) and the retrieval's place in its operator's episode (an interrupted operator
        restarts from scratch, so a resumed run repeats the uninterrupted run's draws exactly; one
        generator per process restarted its sequence at every resume)."""
        key = (self.store.clock(), operator, episode.value)
        n = self._retrievals.get(key, 0)
        self._retrievals[key] = n + 1
        return random.Random(f"value-memory:{self.seed}:{key[0]}:{operator}:{episode.value}:{n}")

    def retrieve_with(self, text: str, qvec: np.ndarray | None, *, episode: EpisodeKind,
                      k: int = defaults.K, draws: random.Random | None = None) -> list[RetrievedItem]:
        """Scoring only (the query embedding is computed by the caller). `draws`: value memory's
        ε-greedy random source (default: one derived from the seed alone)."""
        only = None if self.scope is None else np.fromiter(sorted(self.store.ids_in_scope(self.scope)),
                                                           dtype=np.int64)
        if self.variant.credit == "value":
            stage = "q1" if episode is EpisodeKind.CORR else "q2"
            pool = self.index.pool(text, qvec, size=self.cfg.pool_size(k), utility=stage, only_ids=only)
            draws = draws or random.Random(f"value-memory:{self.seed}")
            picked = epsilon_greedy(pool, k, self.cfg.epsilon, draws)
            ranked = [(c, c.utility) for c in picked]
        else:
            gamma = self.cfg.gamma if self.variant.rerank else 0.0
            pool = self.index.pool(text, qvec, size=self.cfg.pool_size(k),
                                   utility="u" if self.variant.rerank else "none", only_ids=only)
            ranked = [(r.candidate, r.score) for r in rerank(pool, gamma, k)]
        return self._materialise(ranked)

    def _materialise(self, ranked: list[tuple[Candidate, float]]) -> list[RetrievedItem]:
        items = self.store.get_many(c.item_id for c, _ in ranked)
        # an item another learner consolidated meanwhile is resident now, never also retrieved
        return [RetrievedItem(item_id=c.item_id, title=m.title, type=m.type, category=m.category,
                              error_message=m.error_message, wrong_code=m.wrong_code,
                              correct_code=m.correct_code, relevance=c.relevance, utility=c.utility,
                              score=score)
                for c, score in ranked if (m := items.get(c.item_id)) is not None and m.retrievable]

    def resident_rules(self) -> list[ResidentRule]:
        if self.variant.ugc == "none":
            return []
        self._sync()
        hot = sorted(self.store.in_state(ItemState.CONSOLIDATED), key=lambda m: (-priority(m), -m.u, m.id))
        return [ResidentRule(m.id, m.rule_text, m.rule_tokens) for m in hot]

    # ---- learning -------------------------------------------------------------------------------
    def _learns(self, trace: EpisodeTrace) -> bool:
        return not (self.frozen or self.variant.credit == "none" or not trace.rounds)

    def learn(self, trace: EpisodeTrace, new_items: Sequence[ItemDraft] = (), *,
              rules: Mapping[int, str] | None = None) -> None:
        """One episode's update (spec §7): credit, adoption records, new items, UGC, snapshot.

        `rules`: the abstracted rule text of items this update validates (from `rule_requests`);
        an item without one gets the deterministic fallback rule. Without `rules`, and outside a
        caller's transaction, the abstraction calls are made here, before the transaction."""
        if not self._learns(trace):
            return
        if rules is None:
            if self.store.conn.in_transaction \
                    and self.abstract_rule is not None and self.variant.ugc != "none":
                raise RuntimeError("learn inside a caller's transaction needs `rules` (see rule_requests): "
                                   "no model call may run while the write lock is held")
            rules = self.abstract_rules(self.rule_requests([(trace, new_items)]))
        known = dict(rules)
        with db.transaction(self.store.conn):
            changed, added = self._learn(trace, new_items, lambda item, _why: known.get(item.id, ""))
        if self.store.shared:  # other learners' changes may precede ours: catch up with all of them
            self._sync()
            return
        self.index.update(changed.values())
        for item, vec in added:
            self.index.add(item, vec)

    def rule_requests(self, episodes: Sequence[Episode]) -> list[RuleRequest]:
        """The items that learning `episodes` in this order would validate and give a resident
        rule, found by a dry run of the updates that is rolled back (no model call inside)."""
        if self.variant.ugc == "none" or self.abstract_rule is None:
            return []
        episodes = [(t, d) for t, d in episodes if self._learns(t)]
        if not episodes:
            return []
        if self.store.conn.in_transaction:
            raise RuntimeError("rule_requests must run before the update's transaction")
        found: list[RuleRequest] = []

        def collect(item: Item, why: list[str]) -> str:
            found.append(RuleRequest(item, tuple(why)))
            return ""

        try:
            with db.transaction(self.store.conn):
                for trace, drafts in episodes:
                    self._learn(trace, drafts, collect)
                raise _DryRun
        except _DryRun:
            pass
        return found

    def abstract_rules(self, requests: Sequence[RuleRequest]) -> dict[int, str]:
        """Ask the abstraction model for each request (outside any transaction)."""
        if self.abstract_rule is None:
            return {}
        return {r.item.id: self.abstract_rule(r.item, list(r.rationales)) for r in requests}

    def _learn(self, trace: EpisodeTrace, drafts: Sequence[ItemDraft],
               rule_text: AbstractRule) -> tuple[dict[int, Item], list[tuple[Item, np.ndarray | None]]]:
        store, cfg, v = self.store, self.cfg, self.variant
        store.lock_writer()  # concurrent learners of a shared store: one update at a time, in commit order
        if store.shared and store.episode_learned(self.run_id, trace.operator, trace.episode.value):
            # learned before a crash cut the learner's own workspace commit: never twice (backend.py)
            return {}, []
        z = terminal_score(trace, cfg)
        clock = store.record_episode(self.run_id, trace.operator, trace.episode.value, z)
        stamp = store.last_stamp
        origin = replace(self.provenance, operator=trace.operator, episode=trace.episode.value)
        store.add_adoptions(
            AdoptionRecord(self.run_id, trace.operator, trace.episode.value, rt.round, d.item_id, d.adopted,
                           d.rationale) for rt in trace.rounds for d in rt.decisions)
        sets = episode_sets(trace)
        # touched: R ∪ A, every resident (p̂ EMA) and every validated item (p̂ and UGC candidates)
        items = store.get_many(sets.retrieved | sets.adopted)
        items.update((m.id, m) for m in store.in_state(ItemState.CONSOLIDATED))
        if v.ugc != "none":
            items.update((m.id, m) for m in store.in_state(ItemState.VALIDATED))
        # 1. credit (ATU, uniform, or the value-memory Q update)
        if v.credit == "value":
            changed = count_only(items, sets, trace.operator)
            self._value_update(trace, items, changed)
        elif z is not None:
            rule = CreditRule.ATU if v.credit == "atu" else CreditRule.UNIFORM
            changed = apply_credit(items, sets, z, trace.operator, cfg, rule)
        else:
            changed = {}
        store.add_history(_credit_history(items, changed, sets, z, v.credit, cfg, clock, origin, stamp))
        # 2. access frequency p̂ (spec §6.1) for the touched items and every resident
        for m_id, old in items.items():
            changed[m_id] = update_access(changed.get(m_id, old), clock, m_id in sets.resident_used, cfg)
        # 3. gates (spec §6.3): cold <-> validated; a newly validated item gets its resident rule
        if v.ugc != "none" or v.credit in ("atu", "uniform"):
            proxy = v.credit == "uniform"
            for m_id, m in list(changed.items()):
                new = regate(m, cfg, proxy=proxy)
                if new.state is ItemState.VALIDATED and v.ugc != "none" and not new.rule_text:
                    why = store.adoption_rationales(m_id)
                    new = make_rule(new, why, count_tokens, cfg, rule_text)
                changed[m_id] = new
        store.save(changed.values())
        store.refresh_retrieved(clock, skip=changed)
        # 4. new experiences, written after the credit so they never score their own episode (§5)
        added = self._write_new(drafts, clock)
        store.add_history(HistoryRow(m.id, "distilled", clock, origin, created_at=stamp) for m, _ in added)
        # 5. UGC rebuild (Algorithm 1) and its snapshot
        if v.ugc != "none":
            rng = random.Random(f"{self.seed}:{clock}") if v.ugc == "random" else None
            hot = [m for m in changed.values() if m.state is ItemState.CONSOLIDATED]
            valid = [m for m in changed.values() if m.state is ItemState.VALIDATED]
            result = rebuild(sorted(hot, key=lambda m: m.id), sorted(valid, key=lambda m: m.id), cfg,
                             clock=clock, proxy=v.credit == "uniform", rng=rng)
            store.save([*result.promoted, *result.demoted])
            changed.update({m.id: m for m in (*result.promoted, *result.demoted)})
            store.write_snapshot(HotSnapshot(
                run_id=self.run_id, created_at=now_stamp(), budget=cfg.budget_tokens,
                n_ops=store.n_ops(self.run_id),
                hot_entries=[HotEntry(m.id, m.rule_text, m.rule_tokens, m.u, m.p_hat, priority(m),
                                      sorted(m.adopting_ops), m.promoted_at_episode) for m in result.hot]))
        return changed, added

    def _value_update(self, trace: EpisodeTrace, items: dict[int, Item], changed: dict[int, Item]) -> None:
        popart = PopArt.loads(self.store.meta("value_memory.popart"))
        for ids, r in round_rewards(trace, popart):
            for m_id in dict.fromkeys(ids):
                m = changed.get(m_id) or items.get(m_id)
                if m is None:
                    continue
                if trace.episode is EpisodeKind.CORR:
                    changed[m_id] = replace(m, q1=q_update(m.q1, r, self.cfg.alpha))
                else:
                    changed[m_id] = replace(m, q2=q_update(m.q2, r, self.cfg.alpha))
        self.store.set_meta("value_memory.popart", popart.dumps())

    def _write_new(self, drafts: Sequence[ItemDraft], clock: int) -> list[tuple[Item, np.ndarray | None]]:
        added: list[tuple[Item, np.ndarray | None]] = []
        accepted_vecs: list[np.ndarray] = []
        accepted_terms: list[set[str]] = []
        for draft in drafts:
            if len(added) >= self.cfg.max_new_items:
                break
            item = draft_to_item(draft, source="distilled", born_episode=clock)
            if not item.title:
                continue
            if self.store.find_by_hash(item.content_hash) is not None:
                continue
            terms = set(query_terms(f"{item.title} {item.error_message}"))
            if (any(jaccard(terms, t) >= self.cfg.dedup_sim for t in accepted_terms)
                    or self._lexical_dup(terms)):
                continue
            vec = self.embedder.encode_one(item.text()) if self.embedder else None
            if vec is not None and (self.index.any_similar(vec, self.cfg.dedup_sim)
                                    or any(float(vec @ a) >= self.cfg.dedup_sim for a in accepted_vecs)):
                continue
            item.id = self.store.insert_item(item)
            if vec is not None and self.embedder is not None:
                self.store.set_embedding(item.id, self.embedder.name, vec)
                accepted_vecs.append(vec)
            accepted_terms.append(terms)
            added.append((item, vec))
        return added

    def _lexical_dup(self, terms: set[str]) -> bool:
        """Near-duplicate: token Jaccard ≥ dedup_sim with one of the top BM25 matches."""
        hits = self.index.lexical(" ".join(sorted(terms)), limit=5)
        for m in self.store.get_many(hits).values():
            if jaccard(terms, set(query_terms(f"{m.title} {m.error_message}"))) >= self.cfg.dedup_sim:
                return True
        return False

    def _backfill_embeddings(self) -> None:
        if self.embedder is None:
            return
        missing = self.store.missing_embeddings(self.embedder.name)
        if not missing or self.frozen:
            return  # a frozen bank is never written; RetrievalIndex scores missing rows lexically
        vecs = self.embedder.encode([m.text() for m in missing])
        with db.transaction(self.store.conn):
            for m, vec in zip(missing, vecs, strict=True):
                self.store.set_embedding(m.id, self.embedder.name, vec)


def _credit_history(items: Mapping[int, Item], changed: Mapping[int, Item], sets: EpisodeSets,
                    z: float | None, credit: str, cfg: MemoryConfig, clock: int,
                    origin: Provenance, stamp: str) -> list[HistoryRow]:
    """One provenance row per item whose utility or counters this episode changed."""
    if credit == "atu" and z is not None:
        xi: dict[int, float] = atu_credit(sets.retrieved, sets.adopted, z, cfg.beta)
    elif credit == "uniform" and z is not None:
        xi = uniform_credit(sets.retrieved, sets.resident_used, z)
    else:
        xi = {}
    return [HistoryRow(m_id, "credited" if m_id in xi else "counted", clock, origin, xi.get(m_id),
                       items[m_id].u, new.u, m_id in sets.retrieved, m_id in sets.adopted, stamp)
            for m_id, new in sorted(changed.items()) if m_id in items]


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def make_policy(method: str, conn: sqlite3.Connection, *, run_id: str, frozen: bool = False, seed: int = 0,
                abstract_rule: Callable[[Item, list[str]], str] | None = None,
                embedder: Embedder | str | None = _AUTO, config: MemoryConfig | None = None,
                provenance: Provenance | None = None, scope: RetrievalScope | None = None) -> MemoryPolicy:
    """The memory policy for `method` (one of METHODS) over the workspace connection `conn`.

    `embedder="auto"` loads all-MiniLM-L6-v2 when installed (lexical-only otherwise, with a
    warning); pass None to force lexical-only. `frozen=True` makes `learn` a no-op (transfer and
    fixed-bank runs). `config` carries the run's knobs (`RunConfig.memory_config`: γ, k, B, the
    writer's cap) and the spec's constants.
    """
    if method not in METHODS:
        raise UnknownMethod(f"unknown memory method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "refinement":
        return NoMemory()
    cfg = config or MemoryConfig()
    emb = default_embedder() if embedder == _AUTO else embedder
    assert not isinstance(emb, str)
    return StorePolicy(method, conn, run_id=run_id, frozen=frozen, seed=seed, config=cfg,
                       abstract_rule=abstract_rule, embedder=emb, provenance=provenance, scope=scope)
