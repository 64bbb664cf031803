"""`sage audit adoptions` on a run recorded by the scripted model (tests/test_e2e_run.py's stream)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import test_e2e_run as e2e
from openai_server import OpenAITestServer
from sagekernel.cli import app
from sagekernel.report.adoption_audit import AdoptedRecord, auto_check, sample
from sagekernel.runner.run import run

RUN = "audited"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("audit") / "ws"
    e2e.prepare(ws)
    with OpenAITestServer(fallback=e2e.Script()) as srv:
        assert run(e2e.config(ws, srv).model_copy(update={"run_id": RUN})).status == "finished"
    return ws


def audit(ws: Path, *args: str, input: str | None = None) -> Any:
    result = CliRunner().invoke(app, ["audit", "adoptions", f"{ws}:{RUN}", *args], input=input)
    return result


def as_json(ws: Path, *args: str) -> dict[str, Any]:
    result = audit(ws, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_adopted_decision_is_an_audit_record(recorded: Path) -> None:
    traces = [json.loads(t) for (t,) in e2e.query(recorded, "SELECT trace_json FROM round_traces")]
    adopted = sum(1 for t in traces for d in t["decisions"] if d["adopted"] is True)
    data = as_json(recorded)
    assert data["adopted_records"] == adopted == data["sampled"] > 0
    first = next(r for r in data["records"] if r["id"] == "e2e_double/1/E1")
    assert first["title"] == e2e.ANCHOR and first["rationale"] == "it is exactly this loop"
    # the structured decision and the raw reply it was read from, side by side
    assert first["decision"] == {"id": "E1", "decision": "ADOPTED", "rationale": "it is exactly this loop",
                                 "channel": "prose"}
    assert first["evidence"] == "- E1: ADOPTED - it is exactly this loop"
    assert first["raw_reply"].startswith("[round]\nDIAGNOSIS:") and first["evidence"] in first["raw_reply"]
    assert "[reask-1]" in first["raw_reply"]  # that round's re-ask answer is part of it
    shown = audit(recorded, "--sample", "1", "--no-interactive")
    assert shown.exit_code == 0 and "structured" in shown.output and "raw reply" in shown.output
    assert any("this is not C" in line for line in first["diff"] if line.startswith("+"))
    matched = sum(1 for r in data["records"] if r["auto"]["matched"])
    assert data["auto_matched"] == matched and data["auto_share"] == pytest.approx(matched / adopted)
    # an opt round that resubmits the same kernel shows no revision, so the automatic check misses it
    same = [r for r in data["records"] if not r["diff"]]
    assert same and not any(r["auto"]["matched"] for r in same)


def test_sampling_is_reproducible(recorded: Path) -> None:
    a, b = as_json(recorded, "--sample", "3"), as_json(recorded, "--sample", "3")
    assert [r["id"] for r in a["records"]] == [r["id"] for r in b["records"]] and a["sampled"] == 3
    other = as_json(recorded, "--sample", "3", "--seed", "7")
    assert other["sampled"] == 3 and other["adopted_records"] == a["adopted_records"]


def test_ratings_are_stored_from_options_a_file_and_the_prompt(recorded: Path, tmp_path: Path) -> None:
    ids = [r["id"] for r in as_json(recorded)["records"]]
    result = audit(recorded, "--rate", f"{ids[0]}=full", "--rate", f"{ids[1]}=p", "--rater", "ann")
    assert result.exit_code == 0, result.output
    assert "2 of" in result.output and "full 1, partial 1" in result.output
    file = tmp_path / "ratings.txt"
    file.write_text(f"# second pass\n{ids[2]}=unrelated\n")
    assert audit(recorded, "--ratings", str(file), "--rater", "ann").exit_code == 0
    data = as_json(recorded, "--rater", "ann")
    assert [r["rating"] for r in data["records"]][:3] == ["full", "partial", "unrelated"]
    assert data["ratings"] == {"full": 1, "partial": 1, "unrelated": 1}
    assert data["full_or_partial_share"] == pytest.approx(2 / 3)
    result = audit(recorded, "--interactive", "--rater", "bob", input="f\nu\nq\n")
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(recorded / "sage.db")
    rows = conn.execute("SELECT operator, round, item_id, rating, rater FROM adoption_ratings "
                        "ORDER BY rater, rated_at").fetchall()
    conn.close()
    assert [(r[3], r[4]) for r in rows] == [("full", "ann"), ("partial", "ann"), ("unrelated", "ann"),
                                            ("full", "bob"), ("unrelated", "bob")]
    bad = audit(recorded, "--rate", "nosuch/1/E1=full")
    assert bad.exit_code != 0 and "not in this sample" in str(bad.exception)


def _record(revision: str, previous: str | None = None, correct: str = "void f(const float* restrict x)",
            wrong: str = "void f(float* x)") -> AdoptedRecord:
    return AdoptedRecord("r", "op", 2, "opt", 3, "use restrict", wrong, correct, "why", revision, previous)


def test_the_automatic_check_looks_at_the_revision_only() -> None:
    before = "void sage_kernel(float* x, float* out) {\n}\n"
    follows = _record("void sage_kernel(float* restrict x, float* restrict out) {\n}\n", before)
    assert auto_check(follows).matched and auto_check(follows).identifiers == ["restrict"]
    unrelated = _record("void sage_kernel(float* x, float* out) {\n  out[0] = 1;\n}\n", before)
    assert not auto_check(unrelated).matched
    loop = "for (int64_t i = 0; i < N; ++i) out[i] = x[i];"
    idiom = _record(loop + "\n", "", correct=loop, wrong="for (int i = 0; i < 64; ++i)")
    assert auto_check(idiom).idiom
    assert not auto_check(_record(before, before)).matched  # no revision, no evidence


def test_sample_keeps_stream_order() -> None:
    records = [_record(str(i)) for i in range(10)]
    picked = sample(records, 4, seed=1)
    assert len(picked) == 4 and picked == [r for r in records if r in picked]
    assert sample(records, 50) == records
