"""UGC — Utility-Gated Consolidation (spec §6): gates, resident priority, Algorithm 1.

Pure functions over records. The rule abstraction of §6.4 needs the LLM, which memory/ never
calls: the runner passes `abstract_rule(item, rationales) -> str`; without one,
`fallback_rule` builds a deterministic rule from the title and the correct-code idiom.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from sagekernel.memory.records import Item, ItemState, MemoryConfig

AbstractRule = Callable[[Item, list[str]], str]
TokenCounter = Callable[[str], int]


def gates_pass(item: Item, cfg: MemoryConfig, *, proxy: bool = False) -> bool:
    """Admission gates of spec §6.3: u > 0, n_ado ≥ K_ado, |O| ≥ K_op.

    `proxy=True` is the Uniform Credit ablation (spec §9, RECONSTRUCTED gate proxy): with no
    adoption records, n_ret ≥ K_ado and distinct *retrieving* operators ≥ K_op.
    """
    if item.u <= 0:
        return False
    if proxy:
        return item.n_ret >= cfg.k_ado and len(item.retrieving_ops) >= cfg.k_op
    return item.n_ado >= cfg.k_ado and len(item.adopting_ops) >= cfg.k_op


def priority(item: Item) -> float:
    """U(m) = u·p̂ / L (spec §6.2). An item without a rule (L = 0) has priority 0."""
    if item.rule_tokens <= 0:
        return 0.0
    return item.u * item.p_hat / item.rule_tokens


def regate(item: Item, cfg: MemoryConfig, *, proxy: bool = False) -> Item:
    """Re-check the gates of a retrievable item after an ATU update (RECONSTRUCTED, §6.3):
    cold → validated when they pass, validated → cold when they fail. Residents are untouched."""
    if item.state is ItemState.CONSOLIDATED:
        return item
    state = ItemState.VALIDATED if gates_pass(item, cfg, proxy=proxy) else ItemState.COLD
    return item if state is item.state else replace(item, state=state)


@dataclass(frozen=True)
class Rebuild:
    """The outcome of one Algorithm 1 run."""

    hot: list[Item]  # H' in admission order, states already set to consolidated
    promoted: list[Item]  # H' \ H
    demoted: list[Item]  # H \ H', states reset to validated or cold
    used_tokens: int


def greedy_fill(pool: Sequence[Item], budget: int) -> tuple[list[Item], int]:
    """The greedy scan of Algorithm 1: admit in order while the budget allows; an item that does
    not fit is skipped and the scan goes on, so shorter lower-ranked items may still enter."""
    chosen: list[Item] = []
    used = 0
    for m in pool:
        if m.rule_tokens <= 0:
            continue
        if used + m.rule_tokens <= budget:
            chosen.append(m)
            used += m.rule_tokens
    return chosen, used


def rebuild(hot: Iterable[Item], candidates: Iterable[Item], cfg: MemoryConfig, *, clock: int,
            proxy: bool = False, rng: random.Random | None = None) -> Rebuild:
    """UGC_REBUILD (spec §6.5, Algorithm 1).

    `hot` is H (state consolidated); `candidates` are validated items (gates re-checked here).
    Pool P = {m ∈ H ∪ V : U(m) > 0}, sorted by U desc, ties by higher u then smaller id.
    `rng` given: the Random UGC ablation, which shuffles P instead (spec §9, RECONSTRUCTED).
    """
    hot_list = list(hot)
    hot_ids = {m.id for m in hot_list}
    valid = [m for m in candidates
             if m.id not in hot_ids and m.state is ItemState.VALIDATED and gates_pass(m, cfg, proxy=proxy)]
    pool = [m for m in (*hot_list, *valid) if priority(m) > 0]
    pool.sort(key=lambda m: (-priority(m), -m.u, m.id))
    if rng is not None:
        rng.shuffle(pool)
    chosen, used = greedy_fill(pool, cfg.budget_tokens)
    chosen_ids = {m.id for m in chosen}
    new_hot: list[Item] = []
    promoted: list[Item] = []
    for m in chosen:
        if m.id in hot_ids:
            new_hot.append(m)
        else:
            p = replace(m, state=ItemState.CONSOLIDATED, promoted_at_episode=clock)
            new_hot.append(p)
            promoted.append(p)
    demoted = []
    for m in hot_list:
        if m.id not in chosen_ids:
            state = ItemState.VALIDATED if gates_pass(m, cfg, proxy=proxy) else ItemState.COLD
            demoted.append(replace(m, state=state))
    return Rebuild(new_hot, promoted, demoted, used)


def fallback_rule(item: Item, count_tokens: TokenCounter, max_tokens: int = 300) -> str:
    """Deterministic rule text when no LLM abstraction is supplied (RECONSTRUCTED, §6.4):
    the title as the rule, then the correct-code idiom (at most 10 lines), cut to max_tokens."""
    idiom = "\n".join(item.correct_code.strip().splitlines()[:10])
    text = item.title.strip().rstrip(".") + "."
    if idiom:
        text += "\nIdiom:\n" + idiom
    return truncate_tokens(text, count_tokens, max_tokens)


def truncate_tokens(text: str, count_tokens: TokenCounter, max_tokens: int) -> str:
    """The longest prefix (cut at a line, then at a word, then at a character) within max_tokens."""
    if count_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on the character prefix length
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at > len(cut) // 2:
            return cut[:at].rstrip()
    return cut


def make_rule(item: Item, rationales: list[str], count_tokens: TokenCounter, cfg: MemoryConfig,
              abstract_rule: AbstractRule | None) -> Item:
    """Give a newly validated item its resident rule and L (spec §6.4); cached once made."""
    if item.rule_text:
        return item
    if abstract_rule is not None:
        text = truncate_tokens(abstract_rule(item, rationales).strip(), count_tokens, cfg.max_rule_tokens)
    else:
        text = ""
    if not text:
        text = fallback_rule(item, count_tokens, cfg.max_rule_tokens)
    return replace(item, rule_text=text, rule_tokens=max(1, count_tokens(text)))
