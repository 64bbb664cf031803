"""`sage report` reads each run's memory figures from the memory the run learned into
(report/run_memory.py): its workspace's, its frozen snapshot, or the shared memory it recorded;
`--memory` names it (to give a password or a moved database) and must be that memory. The
PostgreSQL side runs in tests/test_shared_memory_streams.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.report.load import load
from sagekernel.report.run_memory import (
    SHARED,
    SNAPSHOT,
    WORKSPACE,
    MemorySource,
    RunMemoryError,
    choose,
    given,
    recorded,
)
from test_cli_values import invoke
from test_report_workspace import Op, add_item, add_run

URL = "postgresql://sage:secret@db.example:5432/sage"
RECORDED = "postgresql://sage:***@db.example:5432/sage"


def _record(ws: Path, run_id: str, cfg: dict[str, object]) -> None:
    conn = db.connect(ws)
    with db.transaction(conn):
        conn.execute("UPDATE runs SET config_json = ? WHERE run_id = ?", (json.dumps({"cfg": cfg}), run_id))
    conn.close()


def test_the_recorded_memory_of_a_run() -> None:
    ws = Path("/w")
    assert recorded({}, ws, "r") == MemorySource(WORKSPACE, "/w", path=ws)
    snap = recorded({"cfg": {"memory_from": "/donor"}}, ws, "r")
    assert snap.kind == SNAPSHOT and snap.path == ws / "memory-from-r.db"
    shared = recorded({"cfg": {"memory": RECORDED}}, ws, "r")
    assert shared.kind == SHARED and shared.label == RECORDED
    assert shared.url == "postgresql://sage@db.example:5432/sage"  # libpq finds the password (~/.pgpass)


def test_choosing_the_memory_to_read() -> None:
    shared = recorded({"cfg": {"memory": RECORDED}}, Path("/w"), "r")
    assert choose(shared, None, "w:r", env=URL).url == URL  # the password from $SAGE_MEMORY_URL
    other_env = "postgresql://sage:secret@db.example:5432/other"
    assert choose(shared, None, "w:r", env=other_env) == shared  # another memory's URL is not used
    assert choose(shared, given(URL), "w:r").url == URL
    with pytest.raises(RunMemoryError, match="learned into the shared memory"):
        choose(shared, given(other_env), "w:r")
    own = recorded({}, Path("/w"), "r")
    with pytest.raises(RunMemoryError, match="did not learn into a shared memory") as err:
        choose(own, given(URL), "w:r")
    assert "secret" not in str(err.value)


def test_given_refuses_what_is_no_memory(tmp_path: Path) -> None:
    with pytest.raises(RunMemoryError, match="not a PostgreSQL URL"):
        given("mysql://u:pw@h/d")
    with pytest.raises(RunMemoryError, match="no memory database"):
        given(str(tmp_path / "missing"))
    with pytest.raises(RunMemoryError):
        given(" ")


def test_a_frozen_run_is_reported_against_its_snapshot(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "r1", "sage", "m", [Op("softmax", 1)])
    add_item(ws, 1, "workspace item")
    _record(ws, "r1", {"memory_from": str(tmp_path / "donor"), "frozen": True})
    snapshot = ws / "memory-from-r1.db"
    for i in (1, 2, 3):
        add_item(snapshot, i, f"donor item {i}")
    run = load([str(ws)]).runs[0]
    assert run.memory is not None and len(run.memory.items) == 3 and run.memory.where == str(snapshot)
    # the workspace's own memory, named explicitly, is read instead (same kind: a SQLite memory)
    loaded = load([str(ws)], memory=str(ws))
    run = loaded.runs[0]
    assert run.memory is not None and [i.title for i in run.memory.items] == ["workspace item"]
    # ... and the report says when the memory read holds nothing of the run (a likely wrong memory)
    assert [n for n in loaded.notes if "holds no retrieval, snapshot or change of this run" in n]


def test_report_memory_option_on_a_workspace_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "r1", "sage", "m", [Op("softmax", 1)])
    add_item(ws, 1, "an item")
    code, out, err = invoke(["report", str(ws), "--json", "--memory", str(ws)])
    assert code == 0, err
    memory = json.loads(out)["runs"][0]["memory"]
    assert memory["where"] == str(ws) and memory["n_items"] == 1
    assert memory["provenance"] == {"created": 0, "credited": 0, "credited_of_other_runs": 0, "other_runs": 0}
    code, _, err = invoke(["report", str(ws), "--memory", URL])
    assert code == 2 and "did not learn into a shared memory" in err and "secret" not in err


def test_a_shared_memory_that_cannot_be_reached(tmp_path: Path) -> None:
    """The recorded memory unreachable: the results are reported, with a note instead of memory
    figures; the same memory named by --memory: a one-line error."""
    ws = tmp_path / "ws"
    add_run(ws, "r1", "sage", "m", [Op("softmax", 1)])
    down = "postgresql://sage:***@/sage?host=/nonexistent-sage-socket"
    _record(ws, "r1", {"memory": down})
    code, out, err = invoke(["report", str(ws), "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["runs"][0]["memory"] is None and data["runs"][0]["run_id"] == "r1"
    assert [n for n in data["notes"] if "its memory cannot be read" in n and "cannot connect" in n]
    code, _, err = invoke(["report", str(ws), "--memory", down.replace("***", "pw")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "cannot connect to the shared memory" in lines[0], err
    assert "pw@" not in err
