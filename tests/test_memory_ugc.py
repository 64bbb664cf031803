"""UGC (spec §6): gates, Property 4, Algorithm 1 invariants, rule abstraction."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.memory.atu import update_access
from sagekernel.memory.embedding import chars_tokens
from sagekernel.memory.records import Item, ItemState, MemoryConfig
from sagekernel.memory.ugc import fallback_rule, gates_pass, make_rule, priority, rebuild, regate

CFG = MemoryConfig()


def item(i: int, *, u: float = 0.5, p_hat: float = 0.5, L: int = 100, state: ItemState = ItemState.VALIDATED,
         ops: int = 3, n_ado: int = 3) -> Item:
    return Item(id=i, title=f"rule {i}", type="fix", category="c", error_message="", wrong_code="",
                correct_code="x = 1;", u=u, p_hat=p_hat, rule_text="r" * L, rule_tokens=L, state=state,
                n_ado=n_ado, n_ret=n_ado, adopting_ops={f"op{k}" for k in range(ops)},
                retrieving_ops={f"op{k}" for k in range(ops)})


def test_gates() -> None:
    assert gates_pass(item(1), CFG)
    assert not gates_pass(item(1, u=0.0), CFG)
    assert not gates_pass(item(1, n_ado=2), CFG)
    assert not gates_pass(item(1, ops=2), CFG)
    proxy = item(1, n_ado=0, ops=0)
    proxy.n_ret, proxy.retrieving_ops = 3, {"a", "b", "c"}
    assert gates_pass(proxy, CFG, proxy=True) and not gates_pass(proxy, CFG)
    assert regate(item(1, n_ado=2), CFG).state is ItemState.COLD
    assert regate(item(1, state=ItemState.COLD), CFG).state is ItemState.VALIDATED
    assert regate(item(1, u=-0.1, state=ItemState.CONSOLIDATED), CFG).state is ItemState.CONSOLIDATED


# ---- Property 4 (spec §15.4) -------------------------------------------------------------------
@given(st.integers(1, 60), st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_p4_unused_resident_decays_geometrically(k: int, u: float, p0: float) -> None:
    m = item(1, u=u, p_hat=p0, state=ItemState.CONSOLIDATED)
    u0 = priority(m)
    for step in range(k):
        m = update_access(m, clock=step + 1, used=False, cfg=CFG)
    assert m.u == u
    assert priority(m) == pytest.approx(u0 * (1 - CFG.mu) ** k, rel=1e-9)
    assert m.resident_episodes == k


def test_resident_used_moves_p_hat_up_and_cold_p_hat_is_frequency() -> None:
    m = update_access(item(1, p_hat=0.5, state=ItemState.CONSOLIDATED), clock=1, used=True, cfg=CFG)
    assert m.p_hat == pytest.approx(0.55)
    cold = item(2, state=ItemState.COLD, n_ado=2)
    cold.born_episode = 4
    assert update_access(cold, clock=8, used=False, cfg=CFG).p_hat == pytest.approx(2 / 4)
    assert update_access(cold, clock=8, used=False, cfg=CFG).eligible_episodes == 4


# ---- Algorithm 1 (spec §15.5) ------------------------------------------------------------------
pools = st.lists(st.tuples(st.floats(-0.2, 1.0), st.floats(0.0, 1.0), st.integers(1, 400), st.booleans()),
                 min_size=0, max_size=40)


@given(pools, st.integers(0, 2000), st.booleans())
def test_algorithm1_invariants(spec: list[tuple[float, float, int, bool]], budget: int,
                               shuffle: bool) -> None:
    cfg = MemoryConfig(budget_tokens=budget)
    hot = [item(i, u=u, p_hat=p, L=L, state=ItemState.CONSOLIDATED)
           for i, (u, p, L, h) in enumerate(spec) if h]
    val = [item(i, u=u, p_hat=p, L=L) for i, (u, p, L, h) in enumerate(spec) if not h]
    out = rebuild(hot, val, cfg, clock=7, rng=random.Random(1) if shuffle else None)
    assert out.used_tokens == sum(m.rule_tokens for m in out.hot) <= budget
    assert all(priority(m) > 0 and m.state is ItemState.CONSOLIDATED for m in out.hot)
    new_ids = {m.id for m in out.hot}
    for m in out.demoted:  # displaced residents are retrievable again
        assert m.id not in new_ids and m.state in (ItemState.VALIDATED, ItemState.COLD)
    assert {m.id for m in out.demoted} == {m.id for m in hot} - new_ids
    assert all(m.promoted_at_episode == 7 for m in out.promoted)
    if not shuffle:  # every skipped positive item did not fit at its turn in the U order
        pool = sorted([m for m in hot + val if priority(m) > 0], key=lambda m: (-priority(m), -m.u, m.id))
        used = 0
        for m in pool:
            if m.id in new_ids:
                used += m.rule_tokens
            else:
                assert used + m.rule_tokens > budget


def test_skip_and_keep_scanning_admits_shorter_lower_ranked_item() -> None:
    big = item(1, u=0.9, p_hat=1.0, L=150)  # U = 0.006, does not fit after `top`
    top = item(2, u=0.9, p_hat=1.0, L=100)  # U = 0.009
    small = item(3, u=0.1, p_hat=1.0, L=40)  # U = 0.0025, lower ranked but fits
    out = rebuild([], [big, top, small], MemoryConfig(budget_tokens=200), clock=1)
    assert [m.id for m in out.hot] == [2, 3]
    assert out.used_tokens == 140


def test_resident_with_nonpositive_utility_is_dropped_and_demoted() -> None:
    bad = item(5, u=-0.05, state=ItemState.CONSOLIDATED)
    out = rebuild([bad], [], CFG, clock=3)
    assert out.hot == [] and out.demoted[0].state is ItemState.COLD


def test_random_ugc_is_seeded() -> None:
    pool = [item(i, u=0.1 + i / 100, L=60) for i in range(30)]
    a = rebuild([], pool, MemoryConfig(budget_tokens=300), clock=1, rng=random.Random(3))
    b = rebuild([], pool, MemoryConfig(budget_tokens=300), clock=1, rng=random.Random(3))
    c = rebuild([], pool, MemoryConfig(budget_tokens=300), clock=1)
    assert [m.id for m in a.hot] == [m.id for m in b.hot]
    assert [m.id for m in a.hot] != [m.id for m in c.hot]
    assert [m.id for m in c.hot] == [29, 28, 27, 26, 25]


def test_rule_abstraction_callable_and_fallback() -> None:
    m = item(1, L=0)
    m.rule_text, m.rule_tokens, m.correct_code = "", 0, "\n".join(f"line {i};" for i in range(30))
    seen: list[list[str]] = []

    def abstract(it: Item, why: list[str]) -> str:
        seen.append(why)
        return "Keep the loop branch-free."

    got = make_rule(m, ["it fixed the race"], chars_tokens, CFG, abstract)
    assert got.rule_text == "Keep the loop branch-free." and got.rule_tokens == chars_tokens(got.rule_text)
    assert seen == [["it fixed the race"]]
    fb = make_rule(m, [], chars_tokens, CFG, None)
    assert fb.rule_text.startswith("rule 1.\nIdiom:\nline 0;") and "line 9;" in fb.rule_text
    assert "line 10;" not in fb.rule_text  # idiom capped at 10 lines
    long = fallback_rule(Item(id=2, title="word " * 1000, type="t", category="", error_message="",
                              wrong_code="", correct_code=""), chars_tokens, 300)
    assert chars_tokens(long) <= 300 and long.startswith("word word")
