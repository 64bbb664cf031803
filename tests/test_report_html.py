"""The HTML report from two recorded runs: tables, figures, no network; plus the CLI and exports."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sagekernel.errors import SageError
from sagekernel.report.build import RunReport, build, notes_for, to_csv, to_json
from sagekernel.report.html import FIGURE_IDS, render_html, resident_figure, speedup_figure, utility_figure
from sagekernel.report.load import ReportError, load
from test_report_workspace import (
    Op,
    add_adoptions,
    add_item,
    add_run,
    add_snapshot,
    refinement_workspace,
    sage_workspace,
)


def two_runs(tmp_path: Path) -> list[RunReport]:
    loaded = load([str(sage_workspace(tmp_path / "sage_ws")), str(refinement_workspace(tmp_path / "ref_ws"))])
    return build(loaded, 1.0)


def table(html: str, table_id: str) -> list[list[str]]:
    """Cell texts of one table of the report, row by row."""
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert body, f"no table {table_id}"
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)]


def test_html_report_of_two_runs(tmp_path: Path) -> None:
    reports = two_runs(tmp_path)
    html = render_html(reports)
    # Table 1 order: Refinement before SAGE; the model is shown once for its group.
    assert table(html, "comparison") == [
        ["Model", "Method", "L1 ER", "L2 ER", "CR", "ER", "Fast_1.0", "S_self", "Solved"],
        ["qwen3-coder", "Refinement", "33.3", "0.0", "60.0", "20.0", "0.0", "1.00×", "1/5"],
        ["", "SAGE", "66.7", "50.0", "80.0", "60.0", "66.7", "1.50×", "3/5 (of 6 planned)"],
    ]
    details = table(html, "details")
    assert details[2][:6] == ["SAGE (qwen3-coder)", "66.7 (2/3)", "40.0 (2/5)", "2.00×", "1.59×",
                              "0.50×–4.00×"]
    assert details[2][6:] == ["4 (mean 4.0)", "3,667", "$0.0300"]
    memory = table(html, "memory")
    assert memory[2][:9] == ["SAGE (qwen3-coder)", "4", "2", "1", "1", "2 / 65 of 10,000", "62.5 (5/8)",
                             "+0.150 [-0.200, +0.600]", "0 / 0 (0)"]
    assert memory[2][9].endswith("ws")  # the memory read: the run's workspace
    # Figures: one div per plot, with its title.
    for div_id in FIGURE_IDS:
        assert f'id="{div_id}"' in html
    for title in ("Cumulative ER along the stream (learning curve)",
                  "Per-operator speedup over the reference",
                  "Resident-set (hot memory) evolution", "Utility distribution of memory items"):
        assert title in html
    assert "Guard the tail of the last tile" in html  # most adopted items
    # Self-contained: plotly.js inlined exactly once, no external script or stylesheet.
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert not re.search(r"<link[^>]*stylesheet", html)
    assert html.count("plotly.js v") == 1
    assert len(html) > 1_000_000


def test_figures_carry_the_numbers(tmp_path: Path) -> None:
    reports = two_runs(tmp_path)
    labels = [r.label for r in reports]
    assert labels == ["Refinement (qwen3-coder)", "SAGE (qwen3-coder)"]
    bars = speedup_figure(reports).data
    assert list(bars[1].x) == ["relu", "gelu", "layernorm"]
    assert list(bars[1].y) == pytest.approx([2.0, -1.0, 1.0])  # log2 of 4×, 0.5×, 2×
    assert list(bars[1].customdata) == pytest.approx([4.0, 0.5, 2.0])
    assert list(bars[0].y) == pytest.approx([math.log2(0.5)])
    resident = resident_figure(reports).data
    assert [list(t.y) for t in resident] == [[1, 2], [40, 65]]
    hist = utility_figure(reports).data
    assert len(hist) == 1 and sorted(hist[0].x) == [-0.2, -0.1, 0.3, 0.6]  # the refinement ws has no items


def test_html_escapes_stored_text(tmp_path: Path) -> None:
    ws = sage_workspace(tmp_path / "ws")
    add_item(ws, 9, "<script>alert(1)</script>", u=0.9, n_ado=9, adopters=["relu"])
    html = render_html(build(load([str(ws)])))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_without_memory_snapshots_says_so(tmp_path: Path) -> None:
    html = render_html(build(load([str(refinement_workspace(tmp_path / "ws"))])))
    assert "No hot-memory snapshots were recorded for these runs." in html
    assert "These workspaces hold no memory items." in html
    assert 'id="fig-learning-curve"' in html and 'id="fig-resident"' not in html


def test_same_method_and_model_get_their_run_id(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "r1", "sage", "m", [Op("relu", 1)], created_at="2026-11-01")
    add_run(ws, "r2", "sage", "m", [Op("relu", 1)], created_at="2026-11-02")
    assert [r.label for r in build(load([str(ws)]))] == ["SAGE (m) [r1]", "SAGE (m) [r2]"]


def test_notes_flag_partial_runs_and_speedups_to_audit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ops = [Op("relu", 1, t_best=1.0, t_ref=12.5), Op("gelu", 1, t_best=1.0, t_ref=9.0)]
    add_run(ws, "r", "sage", "m", ops, status="interrupted", planned=[Op("conv", 2)])
    notes = notes_for(build(load([str(ws)])))
    assert notes == ["SAGE (m): run is interrupted; 2 of 3 planned operators finished, "
                     "and every rate is over those",
                     "SAGE (m): speedup above 10× on relu (12.5×); audit these kernels before trusting them"]
    assert notes_for(build(load([str(refinement_workspace(tmp_path / "ref"))]))) == []
    html = render_html(build(load([str(ws)])), notes)
    assert '<div class="note">SAGE (m): run is interrupted' in html


def test_json_and_csv_export_the_same_numbers(tmp_path: Path) -> None:
    reports = two_runs(tmp_path)
    data = to_json(reports)
    sage = data["runs"][1]
    assert sage["metrics"]["er"] == 60.0 and sage["metrics"]["fast_all"] == 40.0
    assert sage["metrics"]["er_by_level"] == {"L1": pytest.approx(200 / 3), "L2": 50.0}
    assert sage["memory"]["adoption_rate"] == 62.5 and sage["memory"]["by_state"]["cold"] == 2
    assert [o["speedup"] for o in sage["operators"]] == [4.0, 0.5, None, 2.0, None]
    json.dumps(data)  # serialisable
    rows = list(csv.DictReader(io.StringIO(to_csv(reports))))
    assert [r["method"] for r in rows] == ["refinement", "sage"]
    assert float(rows[1]["ER"]) == 60.0 and float(rows[1]["Fast_1.0"]) == pytest.approx(200 / 3)
    assert float(rows[1]["S_self"]) == 1.5 and rows[0]["adoption_rate"] == ""
    assert rows[1]["resident_tokens"] == "65"


# ---------------------------------------------------------------- CLI
def cli_app() -> typer.Typer:
    from sagekernel.cli.report import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """A root with a callback, so `report` is a sub-command as in `sage`."""

    register(app)
    return app


def test_cli_prints_tables_and_writes_html_and_csv(tmp_path: Path) -> None:
    sage_workspace(tmp_path / "sage_ws")
    refinement_workspace(tmp_path / "ref_ws")
    out_html, out_csv = tmp_path / "out" / "report.html", tmp_path / "out" / "report.csv"
    result = CliRunner().invoke(cli_app(), ["report", str(tmp_path / "sage_ws"), str(tmp_path / "ref_ws"),
                                            "--html", str(out_html), "--csv", str(out_csv)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Comparison (Table 1 shape)" in result.output
    sage_row = r"SAGE\s+│\s+66\.7\s+│\s+50\.0\s+│\s+80\.0\s+│\s+60\.0\s+│\s+66\.7\s+│\s+1\.50×"
    assert re.search(sage_row, result.output)
    assert "Most adopted items" in result.output
    assert 'id="fig-speedup"' in out_html.read_text()
    assert out_csv.read_text().startswith("label,workspace,run_id,method,model")


def test_cli_json_and_fast_p(tmp_path: Path) -> None:
    ws = sage_workspace(tmp_path / "ws")
    result = CliRunner().invoke(cli_app(), ["report", f"{ws}:latest", "--json", "--fast-p", "1.9"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    m = data["runs"][0]["metrics"]
    assert data["fast_p"] == 1.9 and m["p"] == 1.9
    assert m["fast_solved"] == pytest.approx(200 / 3)  # 4× and 2× beat 1.9
    result = CliRunner().invoke(cli_app(), ["report", str(ws), "--json", "--fast-p", "3"])
    assert json.loads(result.stdout)["runs"][0]["metrics"]["fast_solved"] == pytest.approx(100 / 3)


def test_cli_errors_are_sage_errors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "empty", "sage", "m", [], status="running")
    result = CliRunner().invoke(cli_app(), ["report", f"{ws}:empty"])
    assert isinstance(result.exception, ReportError)
    assert "no finished operators yet" in str(result.exception)
    result = CliRunner().invoke(cli_app(), ["report", str(ws), "--fast-p", "-1"])
    assert "--fast-p: must be at least 0" in str(result.exception)
    sage_workspace(tmp_path / "ok")
    (tmp_path / "a_file").write_text("")
    result = CliRunner().invoke(cli_app(), ["report", str(tmp_path / "ok"), "--html",
                                            str(tmp_path / "a_file" / "r.html")])
    assert isinstance(result.exception, SageError)
    assert "cannot write the report to" in str(result.exception)


# ---------------------------------------------------------------- demo data (the docs screenshot)
def demo_workspaces(root: Path, n_ops: int = 40, seed: int = 7) -> list[Path]:
    """Three plausible runs over one stream (Refinement, Value Memory, SAGE) for the screenshot."""
    rng = random.Random(seed)
    names = [f"{kind}_{i}" for i, kind in enumerate(
        ["relu", "gelu", "softmax", "layernorm", "matmul", "conv2d", "scan", "topk", "rmsnorm", "attention"]
        * (n_ops // 10 + 1))][:n_ops]
    levels = [1 if i < n_ops * 0.3 else 2 if i < n_ops * 0.8 else 3 for i in range(n_ops)]
    out = []
    for method, solve0, learn, gain in (("refinement", 0.25, 0.0, 0.1), ("value-memory", 0.4, 0.25, 0.3),
                                        ("sage", 0.45, 0.45, 0.5)):
        ops = []
        for i, (name, level) in enumerate(zip(names, levels, strict=True)):
            p_solve = min(0.95, solve0 + learn * i / n_ops) / (1 + 0.4 * (level - 1))
            correct = rng.random() < p_solve
            t_ref = rng.uniform(0.2, 3.0)
            t_first = t_ref * rng.uniform(0.5, 2.2)
            t_best = t_first / (1 + rng.expovariate(1 / gain)) if correct else None
            ops.append(Op(name, level, compiled=correct or rng.random() < 0.6, correct=correct,
                          t_first=t_first, t_best=t_best, t_ref=t_ref, first_round=rng.randint(1, 20),
                          rounds=30, tokens=rng.randint(20_000, 90_000), cost=rng.uniform(0.02, 0.2)))
        ws = root / f"{method}_ws"
        run_id = f"20261130_0{len(out)}0000_{method}"
        add_run(ws, run_id, method, "qwen3-coder-next", ops, created_at=f"2026-11-30T0{len(out)}:00:00")
        if method != "refinement":
            for item_id in range(1, 61):
                n_ado = rng.randint(0, 9)
                u = max(-0.2, min(1.0, rng.gauss(0.05 + 0.04 * n_ado, 0.15)))
                state = "consolidated" if u > 0.35 and n_ado >= 3 else "validated" if u > 0 and n_ado >= 3 \
                    else "cold"
                add_item(ws, item_id, f"Rule {item_id}: " + rng.choice(
                    ["guard the ragged tail tile", "accumulate reductions in fp32", "double-buffer the loads",
                     "hoist the broadcast out of the loop", "align the tile to 32 bytes"]),
                    state=state, u=u, n_ret=n_ado + rng.randint(0, 8), n_ado=n_ado,
                    adopters=[names[j] for j in rng.sample(range(n_ops), min(n_ado, 5))], rule_tokens=120)
            add_adoptions(ws, run_id, [(names[rng.randrange(n_ops)], rng.randint(1, 30), rng.randint(1, 60),
                                        rng.random() < 0.55) for _ in range(300)])
            resident: list[tuple[int, int]] = []
            for k in range(2, n_ops + 1, 2):
                if rng.random() < 0.5 and len(resident) < 25:
                    resident.append((len(resident) + 1, rng.randint(80, 300)))
                if rng.random() < 0.1 and resident:
                    resident.pop(rng.randrange(len(resident)))
                add_snapshot(ws, run_id, k, resident, created_at=f"2026-11-30T00:{k:02d}:00")
        out.append(ws)
    return out


def test_demo_workspaces_report(tmp_path: Path) -> None:
    reports = build(load([str(ws) for ws in demo_workspaces(tmp_path, n_ops=20)]))
    assert [r.method for r in reports] == ["Refinement", "Value Memory", "SAGE"]
    html = render_html(reports)
    assert all(f'id="{div_id}"' in html for div_id in FIGURE_IDS)
