"""The paper-shaped tables from recorded results (pure: no streams run). Each stream's role
picks its table; the figures are the report's metrics over its finished operators."""

from __future__ import annotations

from sagekernel.experiment.plan import StreamPlan
from sagekernel.experiment.status import StreamStatus
from sagekernel.experiment.tables import StreamData, paper_tables
from sagekernel.metrics import summarize
from sagekernel.records import OperatorResult


def result(run: str, pos: int, level: int, correct: bool, speedup: float | None = None) -> OperatorResult:
    ref = 1.0
    best = ref / speedup if speedup else None
    return OperatorResult(
        run_id=run,
        position=pos,
        operator=f"op{pos}",
        level=level,
        category="c",
        compiled=True,
        correct=correct,
        rounds_used=3,
        first_correct_round=1 if correct else None,
        t_first_ms=best * 2 if best else None,
        t_best_ms=best,
        t_ref_ms=ref,
    )


def stream(
    name: str,
    method: str = "sage",
    model: str = "glm",
    schedule: str = "given",
    results: list[OperatorResult] | None = None,
    **plan: object,
) -> StreamData:
    p = StreamPlan(
        name=name,
        block=0,
        method=method,
        model=model,
        model_spec="scripted:x",
        schedule=schedule,
        seed=0,
        budget=30,
        suite="builtin",
        target="cpu",
        device=None,
        limit=None,
        frozen=bool(plan.pop("frozen", False)),
        **plan,
    )  # type: ignore[arg-type]
    rs = results or []
    st = StreamStatus(
        name, "finished", method, model, schedule, p.donor, len(rs), len(rs), None, None, None, None, None
    )
    return StreamData(p, st, rs, summarize(rs) if rs else None)


def tables(streams: list[StreamData]) -> dict[str, dict[str, object]]:
    return {t.key: t.to_dict() for t in paper_tables(streams)}


def test_schedules_give_table_2_over_the_top_level_only() -> None:
    l3_only = stream(
        "l3", schedule="level:3", results=[result("l3", 0, 3, True, 2.0), result("l3", 1, 3, False)]
    )
    mixed = stream(
        "mix",
        schedule="interleave:L2,L3",
        results=[result("mix", 0, 2, False), result("mix", 1, 3, True, 0.5), result("mix", 2, 3, True, 3.0)],
    )
    t = tables([l3_only, mixed])
    assert list(t) == ["table1", "table2"]
    t2 = t["table2"]
    assert t2["header"] == ["Model", "Method", "Schedule", "L3 ER", "Fast_1.0", "L3 solved"]
    assert t2["rows"] == [
        ["glm", "SAGE", "level:3", "50.0", "100.0", "1/2"],
        ["glm", "SAGE", "interleave:L2,L3", "100.0", "50.0", "2/2"],
    ]  # the L2 miss is not counted


def test_ablations_give_figure_5_in_the_papers_order() -> None:
    rs = [result("x", 0, 1, True, 2.0), result("x", 1, 3, False)]
    streams = [stream(m, method=m, results=rs) for m in ("sage-random-ugc", "sage", "sage-no-ugc")]
    f5 = tables(streams)["figure5"]
    assert [r[1] for r in f5["rows"]] == ["SAGE", "w/o UGC", "Random UGC"]  # type: ignore[index]
    assert f5["rows"][0][2:] == ["50.0", "0.0", "100.0", "2.00×"]  # type: ignore[index]


def test_frozen_streams_are_initial_native_or_transfer_by_their_donor() -> None:
    rs = [result("x", 0, 1, True, 2.0)]
    native_learn = stream("sage-qwen", model="qwen", results=rs)
    donor = stream("sage-glm", results=rs)
    initial = stream("sage-qwen-initial", model="qwen", frozen=True, results=rs)
    native = stream(
        "sage-qwen-native", model="qwen", frozen=True, donor="sage-qwen", memory="frozen", results=rs
    )
    transfer = stream(
        "sage-qwen-from-glm",
        model="qwen",
        frozen=True,
        donor="sage-glm",
        memory="frozen",
        results=[result("x", 0, 1, True, 2.0), result("x", 1, 1, False)],
    )
    t = tables([native_learn, donor, initial, native, transfer])
    f4 = t["figure4"]
    assert [r[2] for r in f4["rows"]] == ["Initial", "Native", "glm Transfer"]  # type: ignore[index]
    assert f4["rows"][2][3] == "50.0"  # type: ignore[index]
    assert [r[1] for r in t["table1"]["rows"]] == ["SAGE", "SAGE"]  # type: ignore[index]


def test_replay_streams_give_table_7_relevance_uniform_atu() -> None:
    rs = [result("x", 0, 3, True, 2.0)]
    streams = [stream("sage-glm", results=rs)] + [
        stream(f"replay-{v}", frozen=True, donor="sage-glm", memory=f"replay:{v}", results=rs)
        for v in ("atu", "relevance", "uniform")
    ]
    t7 = tables(streams)["table7"]
    assert [r[1] for r in t7["rows"]] == ["Relevance-only", "Uniform Credit", "ATU"]  # type: ignore[index]
    assert t7["header"] == ["Bank of", "Cold utilities", "ER", "L3 ER", "Fast_1.0", "Solved"]


def test_a_stream_without_finished_operators_shows_dashes_not_zeros() -> None:
    t1 = tables([stream("empty"), stream("one", method="refinement", results=[result("x", 0, 1, False)])])[
        "table1"
    ]
    assert t1["rows"][0][1] == "Refinement" and t1["rows"][0][-4] == "0.0" and t1["rows"][0][-3] == "–"  # type: ignore[index]
    assert t1["rows"][1][1] == "SAGE" and set(t1["rows"][1][2:]) == {"–"}  # type: ignore[index]
