"""ATU (spec §4): Properties 1 and 2, the η schedule, z, and the GatherV3 worked example."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.memory.atu import (
    CreditRule,
    apply_credit,
    atu_credit,
    episode_sets,
    learning_rate,
    terminal_score,
    uniform_credit,
    update_utility,
)
from sagekernel.memory.records import Item, MemoryConfig
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, RetrievedItem, RoundTrace

CFG = MemoryConfig()
EPS = 1e-12


def retrieved(i: int) -> RetrievedItem:
    return RetrievedItem(i, f"t{i}", "fix", "c", "e", "w", "c", 0.5, 0.0, 0.5)


def item(i: int, u: float = 0.0, n_upd: int = 0) -> Item:
    return Item(id=i, title=f"t{i}", type="fix", category="c", error_message="", wrong_code="",
                correct_code="", u=u, n_upd=n_upd)


def corr_trace(ids: list[int], adopted: set[int], correct: bool) -> EpisodeTrace:
    rt = RoundTrace(round=1, episode=EpisodeKind.CORR, retrieved=[retrieved(i) for i in ids],
                    decisions=[AdoptionDecision(i, i in adopted, "why") for i in ids], correct=correct)
    return EpisodeTrace("GatherV3", "Index", 2, EpisodeKind.CORR, [rt], success=correct)


# ---- Property 1 (spec §15.1) ------------------------------------------------------------------
@given(st.sets(st.integers(0, 50), min_size=1, max_size=20).flatmap(
    lambda r: st.tuples(st.just(r), st.sets(st.sampled_from(sorted(r))))),
    st.floats(-CFG.delta, 1.0))
def test_p1_credit_of_adopted_sums_to_z_and_stays_in_range(ra: tuple[set[int], set[int]], z: float) -> None:
    r, a = ra
    xi = atu_credit(r, a, z, CFG.beta)
    assert set(xi) == r
    if a:
        assert math.isclose(sum(xi[m] for m in a), z, abs_tol=1e-9)
    assert all(-CFG.q - EPS <= v <= 1 + EPS for v in xi.values())
    assert all(xi[m] == -CFG.beta for m in r - a)


# ---- Property 2 (spec §15.2) ------------------------------------------------------------------
@given(st.lists(st.floats(-CFG.q, 1.0), min_size=1, max_size=80), st.floats(0.001, 0.5))
def test_p2_utility_stays_in_range_and_eta_in_unit_interval(xis: list[float], eta_min: float) -> None:
    u, n = 0.0, 0
    for xi in xis:
        assert 0 < learning_rate(n + 1, eta_min) <= 1
        u, n = update_utility(u, n, xi, eta_min)
        assert -CFG.q - EPS <= u <= 1 + EPS
    assert n == len(xis)


@given(st.lists(st.floats(-CFG.q, 1.0), min_size=1, max_size=19))
def test_running_average_with_one_pseudo_observation(xis: list[float]) -> None:
    """η = 1/(1+n) with n counted first: after n ≤ 19 updates u is Σξ/(n+1) (u_0 = 0 counts once)."""
    u, n = 0.0, 0
    for xi in xis:
        u, n = update_utility(u, n, xi, CFG.eta_min)
    assert math.isclose(u, sum(xis) / (len(xis) + 1), abs_tol=1e-9)


def test_eta_floors_at_eta_min() -> None:
    assert learning_rate(1, 0.05) == 0.5
    assert learning_rate(19, 0.05) == pytest.approx(0.05)
    assert learning_rate(500, 0.05) == 0.05


# ---- Worked example (spec §4, GatherV3, S1 Table 8) ---------------------------------------------
def test_gatherv3_worked_example_atu_and_uniform() -> None:
    ids = [181, 193, 61, 139, 159]
    trace = corr_trace(ids, {181, 193}, correct=True)
    z = terminal_score(trace, CFG)
    assert z == 1.0
    sets = episode_sets(trace)
    assert atu_credit(sets.retrieved, sets.adopted, z, CFG.beta) == {
        181: 0.5, 193: 0.5, 61: -0.2, 139: -0.2, 159: -0.2}
    items = {i: item(i) for i in ids}
    out = apply_credit(items, sets, z, "GatherV3", CFG, CreditRule.ATU)
    assert out[181].u == pytest.approx(0.25) and out[193].u == pytest.approx(0.25)
    assert [out[i].u for i in (61, 139, 159)] == pytest.approx([-0.10] * 3)
    assert out[181].n_ado == 1 and out[61].n_ado == 0 and all(out[i].n_ret == 1 for i in ids)
    assert out[181].adopting_ops == {"GatherV3"} and out[61].adopting_ops == set()
    assert items[181].u == 0.0  # pure: inputs untouched
    uni = apply_credit(items, sets, z, "GatherV3", CFG, CreditRule.UNIFORM)
    assert uniform_credit(sets.retrieved, (), 1.0) == dict.fromkeys(ids, 1.0)
    assert [uni[i].u for i in ids] == pytest.approx([0.5] * 5)


# ---- z (spec §4.1) -------------------------------------------------------------------------------
def test_terminal_scores() -> None:
    assert terminal_score(corr_trace([1], set(), correct=False), CFG) == -0.2
    opt = EpisodeTrace("op", "c", 1, EpisodeKind.OPT, [
        RoundTrace(round=5, episode=EpisodeKind.OPT, correct=True, latency_ms=2.0),
        RoundTrace(round=6, episode=EpisodeKind.OPT, correct=True, latency_ms=3.0)], t_first_ms=4.0)
    assert terminal_score(opt, CFG) == pytest.approx(0.5)  # 1 - T_best/T_first
    opt.rounds = [RoundTrace(round=5, episode=EpisodeKind.OPT, correct=True, latency_ms=4.0)]
    assert terminal_score(opt, CFG) == -0.2  # no strict gain -> −δ
    assert terminal_score(opt, MemoryConfig(opt_no_gain_score=0.0)) == 0.0
    opt.rounds = []
    assert terminal_score(opt, CFG) is None  # zero rounds: skip the update


def test_unresolved_items_get_no_update_and_hot_used_join_a() -> None:
    rt = RoundTrace(round=1, episode=EpisodeKind.CORR, retrieved=[retrieved(1), retrieved(2)],
                    resident_shown=[9, 10], resident_used=[9],
                    decisions=[AdoptionDecision(1, True, "x"), AdoptionDecision(2, None, "")], correct=True)
    sets = episode_sets(EpisodeTrace("op", "c", 1, EpisodeKind.CORR, [rt], success=True))
    assert sets.retrieved == {1} and sets.adopted == {1, 9}
    out = apply_credit({i: item(i) for i in (1, 2, 9, 10)}, sets, 1.0, "op", CFG)
    assert set(out) == {1, 9}  # ⊥ item 2 and unused hot rule 10 untouched
    assert out[1].u == pytest.approx(0.25) and out[9].u == pytest.approx(0.25)
    assert out[9].n_ret == 0 and out[9].n_ado == 1
