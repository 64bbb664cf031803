"""`sage memory ...` and `sage simulate` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sagekernel import db
from sagekernel.cli import app
from sagekernel.memory.io import load_seed

SEED = Path(__file__).parents[1] / "src/sagekernel/targets/cpu/seed_memory.jsonl"
runner = CliRunner()


def test_memory_commands(workspace: Path, tmp_path: Path) -> None:
    load_seed(db.connect(workspace), SEED)
    ws = ["--workspace", str(workspace)]
    res = runner.invoke(app, ["memory", "stats", *ws, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["items"] == 30
    res = runner.invoke(app, ["memory", "list", *ws, "--limit", "3", "--json"])
    assert [m["id"] for m in json.loads(res.output)] == [1, 2, 3]
    res = runner.invoke(app, ["memory", "list", *ws, "--limit", "2"])
    assert res.exit_code == 0 and "memory items (2 shown)" in res.output
    res = runner.invoke(app, ["memory", "show", "2", *ws, "--json"])
    assert json.loads(res.output)["title"].startswith("Implement exactly the contract")
    out = tmp_path / "m.jsonl"
    res = runner.invoke(app, ["memory", "export", str(out), *ws])
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == 31
    other = ["--workspace", str(tmp_path / "w2")]
    res = runner.invoke(app, ["memory", "import", str(out), *other, "--json"])
    assert json.loads(res.output) == {"imported": 30, "skipped": 0}
    res = runner.invoke(app, ["memory", "import", str(out), *other, "--mode", "merge", "--json"])
    assert json.loads(res.output) == {"imported": 0, "skipped": 30}


def test_memory_errors_are_sage_errors(workspace: Path, tmp_path: Path) -> None:
    load_seed(db.connect(workspace), SEED)
    res = runner.invoke(app, ["memory", "show", "999", "--workspace", str(workspace)])
    assert res.exit_code != 0 and "no memory item with id 999" in str(res.exception)
    res = runner.invoke(app, ["memory", "stats", "--workspace", str(tmp_path / "none")])
    assert "no SAGE workspace database" in str(res.exception)


def test_simulate_json_shape() -> None:
    res = runner.invoke(app, ["simulate", "--items", "120", "--operators", "40", "--seeds", "2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data["methods"]) == {"atu", "uniform", "relevance"}
    for row in data["methods"].values():
        assert 0 <= row["precision_at_5"] <= 1 and 0 <= row["success_rate"] <= 1
    assert data["seeds"] == 2 and len(data["per_seed"]) == 2
