"""Memory figures of the report: states, resident set, utility, adoption rate, most adopted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.report.memory_metrics import (
    AdoptionView,
    ItemView,
    SnapshotView,
    adoption_rate,
    items_by_state,
    most_adopted,
    resident_series,
    summarize_memory,
    utility_summary,
)


def item(i: int, state: str = "cold", u: float = 0.0, n_ado: int = 0, n_ops: int = 0) -> ItemView:
    return ItemView(id=i, title=f"t{i}", type="x", category="c", state=state, u=u, n_ret=n_ado + 1,
                    n_ado=n_ado, n_operators=n_ops)


def adoption(item_id: int, adopted: bool | None) -> AdoptionView:
    return AdoptionView(operator="op", episode="corr", round=1, item_id=item_id, adopted=adopted)


def test_items_by_state_always_lists_the_three_states() -> None:
    assert items_by_state([]) == {"cold": 0, "validated": 0, "consolidated": 0}
    items = [item(1, "cold"), item(2, "validated"), item(3, "cold"), item(4, "consolidated")]
    assert items_by_state(items) == {"cold": 2, "validated": 1, "consolidated": 1}


def test_adoption_rate_keeps_unresolved_in_the_denominator() -> None:
    rows = [adoption(1, True), adoption(2, False), adoption(3, None), adoption(1, True), adoption(4, False)]
    assert adoption_rate(rows) == pytest.approx(40.0)
    assert adoption_rate([]) is None
    m = summarize_memory([], rows, [])
    assert (m.n_retrievals, m.n_adopted, m.n_unresolved) == (5, 2, 1)


def test_most_adopted_ranks_by_adoptions_then_operators_then_utility() -> None:
    items = [item(1, n_ado=3, n_ops=2, u=0.1), item(2, n_ado=5, n_ops=1), item(3, n_ado=3, n_ops=3),
             item(4, n_ado=3, n_ops=2, u=0.4), item(5, n_ado=0, u=0.9), item(6, n_ado=3, n_ops=2, u=0.1)]
    assert [i.id for i in most_adopted(items, k=10)] == [2, 3, 4, 1, 6]
    assert [i.id for i in most_adopted(items, k=2)] == [2, 3]


def test_utility_summary_by_hand() -> None:
    s = utility_summary([item(1, u=-0.2), item(2, u=0.1), item(3, u=0.5), item(4, u=0.0)])
    assert (s.count, s.positive) == (4, 2)
    assert s.mean == pytest.approx(0.1) and s.median == pytest.approx(0.05)
    assert (s.minimum, s.maximum) == (-0.2, 0.5)
    assert utility_summary([]).mean is None


def test_resident_series_orders_by_completed_operators() -> None:
    snaps = [SnapshotView("t3", 6, 10000, 3, 300), SnapshotView("t1", 2, 10000, 1, 100),
             SnapshotView("t2", 2, 10000, 2, 180)]
    series = resident_series(snaps)
    assert [(s.n_ops, s.n_entries) for s in series] == [(2, 1), (2, 2), (6, 3)]
    assert summarize_memory([], [], snaps).resident_now == SnapshotView("t3", 6, 10000, 3, 300)
    assert summarize_memory([], [], []).resident_now is None


@given(st.lists(st.one_of(st.none(), st.booleans()), max_size=60))
def test_adoption_rate_is_a_percentage(decisions: list[bool | None]) -> None:
    value = adoption_rate([adoption(i, d) for i, d in enumerate(decisions)])
    if not decisions:
        assert value is None
    else:
        assert value is not None and 0.0 <= value <= 100.0
        assert value == pytest.approx(100 * decisions.count(True) / len(decisions))
