"""Edge cases found in review: bad latencies, import/export files, eligible episodes, replay."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.errors import SageError
from sagekernel.memory.atu import terminal_score
from sagekernel.memory.io import export_jsonl, import_jsonl, load_seed
from sagekernel.memory.records import MemoryConfig
from sagekernel.memory.store import Store
from sagekernel.memory.value_memory import PopArt, round_rewards
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, RetrievedItem, RoundTrace
from sagekernel.runner.bank_replay import load_episodes, replay_workspace

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
CFG = MemoryConfig()


def opt_round(n: int, latency: float | None, correct: bool = True) -> RoundTrace:
    got = [RetrievedItem(1, "t", "fix", "c", "e", "w", "c", 0.5, 0.0, 0.5)]
    return RoundTrace(round=n, episode=EpisodeKind.OPT, retrieved=got,
                      decisions=[AdoptionDecision(1, True, "why")], correct=correct, latency_ms=latency)


def opt_trace(t_first: float | None, t_best: float | None, *latencies: float | None) -> EpisodeTrace:
    return EpisodeTrace("op", "c", 1, EpisodeKind.OPT, [opt_round(i + 1, x) for i, x in enumerate(latencies)],
                        t_first_ms=t_first, t_best_ms=t_best)


@pytest.mark.parametrize("t_first, t_best, rounds", [
    (10.0, -5.0, (-5.0,)),  # negative T_best would give z = 1.5 > 1 (breaks Property 2)
    (10.0, None, (-5.0,)),
    (10.0, math.nan, (math.nan,)),
    (math.inf, 5.0, (5.0,)),  # z = 1 − 5/inf = 1: a failed first measurement is no speed-up
    (10.0, 0.0, (0.0,)),
])
def test_opt_score_ignores_invalid_latencies(t_first: float, t_best: float | None,
                                             rounds: tuple[float, ...]) -> None:
    assert terminal_score(opt_trace(t_first, t_best, *rounds), CFG) == -CFG.delta


def test_opt_score_falls_back_to_valid_round_latencies() -> None:
    assert terminal_score(opt_trace(10.0, math.nan, math.nan, 5.0), CFG) == pytest.approx(0.5)


def test_value_memory_nan_latency_is_infeasible_and_never_poisons_popart() -> None:
    popart = PopArt()
    rewards = round_rewards(opt_trace(10.0, None, math.nan, math.inf, 5.0, 4.0), popart)
    assert all(math.isfinite(r) for _, r in rewards)
    assert math.isfinite(popart.mean) and math.isfinite(popart.m2) and popart.count == 4
    raw = [r for _, r in round_rewards(opt_trace(10.0, None, math.nan, math.inf, 5.0), PopArt(count=0))]
    assert raw[0] == -1.0  # r̂ = r for the first sample: infeasible


def test_import_errors_name_the_file_problem(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "ws")
    with pytest.raises(SageError, match="is not a file"):
        import_jsonl(conn, tmp_path)
    binary = tmp_path / "bank.jsonl"
    binary.write_bytes(b'{"format": "sagekernel.memory", "schema_version": 1}\n\xff\xfe\n')
    with pytest.raises(SageError, match=r"bank.jsonl:2: not UTF-8"):
        import_jsonl(conn, binary)
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"format": "sagekernel.memory", "schema_version": 1}\n'
                   '{"title": "a", "type": "fix", "q1": NaN}\n')
    with pytest.raises(SageError, match=r"nan.jsonl:2: invalid memory item \(q1"):
        import_jsonl(conn, nan)
    assert Store(conn).count() == 0
    with pytest.raises(SageError, match="is a directory"):
        export_jsonl(conn, tmp_path)


def test_export_keeps_eligible_episodes_of_never_retrieved_items(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "ws")
    load_seed(conn, SEED)
    store = Store(conn)
    with db.transaction(conn):
        for _ in range(7):
            store.record_episode("r", "op", "corr", 1.0)
    export_jsonl(conn, tmp_path / "bank.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "bank.jsonl").read_text().splitlines()[1:]]
    assert {x["eligible_episodes"] for x in lines} == {7}  # the column itself was never refreshed
    other = db.connect(tmp_path / "other")
    import_jsonl(other, tmp_path / "bank.jsonl")
    assert {m.born_episode for m in Store(other).all_items()} == {-7}


def _workspace_with_opt(ws: Path, t_first: float, t_best: float, rounds: list[float]) -> sqlite3.Connection:
    conn = db.connect(ws)
    load_seed(conn, SEED)
    conn.execute("INSERT INTO runs VALUES ('r', 'now', NULL, 'finished', 'sage', 'm', 'cpu', 's', 'o', "
                 "30, 0, '{}')")
    corr = RoundTrace(round=1, episode=EpisodeKind.CORR, correct=True, latency_ms=t_first)
    conn.execute("INSERT INTO round_traces VALUES ('r', 'op', 1, 'corr', 1, 1, ?, ?, 'now')",
                 (t_first, json.dumps(corr.to_dict())))
    for n, lat in enumerate(rounds, 2):
        rt = opt_round(n, lat)
        conn.execute("INSERT INTO round_traces VALUES ('r', 'op', ?, 'opt', 1, 1, ?, ?, 'now')",
                     (n, lat, json.dumps(rt.to_dict())))
    conn.execute("INSERT INTO operator_results (run_id, position, operator, level, category, compiled, "
                 "correct, rounds_used, t_first_ms, t_best_ms, recorded_at) "
                 "VALUES ('r', 0, 'op', 1, 'c', 1, 1, 3, ?, ?, 'now')", (t_first, t_best))
    return conn


def test_replay_scores_opt_episodes_with_the_recorded_t_best(tmp_path: Path) -> None:
    # A 2 % faster round is below the agent's noise margin: the run recorded T_best = T_first and
    # the live update scored −δ; the replay must too, not 1 − 9.8/10.
    conn = _workspace_with_opt(tmp_path / "ws", 10.0, 10.0, [9.8])
    opt = next(t for t in load_episodes(conn) if t.episode is EpisodeKind.OPT)
    assert (opt.t_first_ms, opt.t_best_ms) == (10.0, 10.0)
    assert terminal_score(opt, CFG) == -CFG.delta


def test_replay_without_recorded_results_skips_nan_latencies(tmp_path: Path) -> None:
    conn = _workspace_with_opt(tmp_path / "ws", 10.0, 10.0, [5.0, math.inf])
    conn.execute("DELETE FROM operator_results")
    conn.execute("UPDATE round_traces SET trace_json = replace(trace_json, 'Infinity', 'NaN')")
    opt = next(t for t in load_episodes(conn) if t.episode is EpisodeKind.OPT)
    assert opt.t_best_ms == 5.0 and terminal_score(opt, CFG) == pytest.approx(0.5)


def test_replay_copy_has_the_replayed_utilities_in_one_step(tmp_path: Path) -> None:
    conn = _workspace_with_opt(tmp_path / "ws", 10.0, 5.0, [5.0])
    conn.close()
    data = replay_workspace(tmp_path / "ws", "r", write_to=tmp_path / "copy", variant="uniform")
    copy = Store(db.connect(tmp_path / "copy"))
    by_title = {m.title: m.u for m in copy.all_items()}
    want = {r["title"]: r["uniform"] for r in data["items"]}
    assert by_title == pytest.approx(want) and max(want.values()) > 0
    with pytest.raises(SageError, match="already has"):  # never half-written over a filled store
        replay_workspace(tmp_path / "ws", "r", write_to=tmp_path / "copy")
