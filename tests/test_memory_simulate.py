"""The simulator's claim, in the default test run: on the same synthetic streams, ATU ranks truly
useful items above uniform credit and relevance (`sage simulate`, memory/simulate.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sagekernel.cli import app
from sagekernel.memory.simulate import SimConfig, simulate, utility_auc


@pytest.fixture(scope="module")
def result() -> dict:
    return simulate(SimConfig(), seeds=5)  # ~3 s: the default stream, five seeds


def test_atu_ranks_useful_items_above_uniform_credit_and_relevance(result: dict) -> None:
    for row in result["per_seed"]:  # every seed, not only on average
        assert row["relevance"]["utility_auc"] == 0.5  # no updates: every utility ties
        assert row["atu"]["utility_auc"] > row["uniform"]["utility_auc"] + 0.1
        assert row["atu"]["utility_auc"] > 0.7
    means = result["methods"]
    assert means["atu"]["precision_at_5"] > means["uniform"]["precision_at_5"]
    assert means["atu"]["precision_at_5"] > means["relevance"]["precision_at_5"]
    assert means["atu"]["success_rate"] >= means["relevance"]["success_rate"]


def test_the_auc_itself() -> None:
    assert utility_auc([1.0, 0.5, 0.0], [True, False, False]) == 1.0
    assert utility_auc([0.0, 1.0], [True, False]) == 0.0
    assert utility_auc([0.2, 0.2], [True, False]) == 0.5
    assert utility_auc([0.2], [True]) == 0.5  # nothing to separate


def test_sage_simulate_prints_json() -> None:
    args = ["simulate", "--items", "60", "--operators", "15", "--seeds", "1", "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert set(data["methods"]) == {"relevance", "uniform", "atu"} and data["seeds"] == 1
