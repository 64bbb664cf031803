"""Every table keyed by an enum (or by the method names) covers every member.

A table that lacks a member fails only when that member first turns up, which may be late in a
long run (distillation's stage rank lacked `integrity` and `broken_task`: an episode with such a
verdict raised KeyError at its end, at every resume). The test finds the tables itself: every
module-level or class-level mapping of the package whose keys are all members of one Enum, so a
table added later is checked too.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from enum import Enum
from typing import Any

import pytest

import sagekernel
from sagekernel.memory.policies import METHODS, VARIANTS
from sagekernel.report.build import METHOD_LABELS

#: Scripts that run inside the sandboxed child with their own import path, and modules that need an
#: optional runtime: they cannot be imported here (and hold no tables of the package's enums).
_NOT_IMPORTABLE = ("sagekernel.targets.devloop.loop", "sagekernel.models.local",
                   "sagekernel.experiment.ray_backend")


def _modules() -> list[Any]:
    found = []
    for info in pkgutil.walk_packages(sagekernel.__path__, "sagekernel."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:
            if not info.name.startswith(_NOT_IMPORTABLE):
                raise
    return found


def _enum_tables() -> list[tuple[str, type[Enum], Mapping[Any, Any]]]:
    tables = []
    seen: set[int] = set()
    for module in _modules():
        scopes: list[tuple[str, dict[str, Any]]] = [(module.__name__, vars(module))]
        scopes += [(f"{module.__name__}.{name}", vars(obj)) for name, obj in vars(module).items()
                   if isinstance(obj, type) and obj.__module__ == module.__name__]
        for where, scope in scopes:
            for name, value in scope.items():
                if not isinstance(value, Mapping) or len(value) < 2 or id(value) in seen:
                    continue
                kinds = {type(k) for k in value}
                if len(kinds) == 1 and issubclass(next(iter(kinds)), Enum):
                    seen.add(id(value))
                    tables.append((f"{where}.{name}", next(iter(kinds)), value))
    return tables


def test_every_enum_keyed_table_is_total() -> None:
    tables = _enum_tables()
    names = {name for name, _, _ in tables}
    # the finder works: the tables named in the issue are among those it found
    assert "sagekernel.agent.distill.STAGE_RANK" in names
    assert "sagekernel.memory.retrieval._STATE_CODE" in names
    missing = {name: sorted(m.value for m in enum if m not in table) for name, enum, table in tables}
    assert {name: lack for name, lack in missing.items() if lack} == {}


@pytest.mark.parametrize("table", [METHOD_LABELS, {**VARIANTS, "refinement": None}],
                         ids=["report labels", "policy variants (refinement has no memory)"])
def test_every_method_keyed_table_is_total(table: Mapping[str, Any]) -> None:
    assert set(table) == set(METHODS)


def test_distillation_ranks_every_stage_without_failing() -> None:
    """An episode of verdicts at every stage, in every order pair, distils without a KeyError."""
    from sagekernel.agent.distill import STAGE_RANK, transitions
    from sagekernel.agent.state import OperatorOutcome
    from sagekernel.harness.verdict import Stage
    from sagekernel.records import EpisodeKind, EpisodeTrace, RoundTrace
    from sagekernel.tasks.suites import load_suite

    task = load_suite("demo")[0]
    stages = list(Stage)
    trace = EpisodeTrace(operator=task.name, category=task.category, level=task.level,
                         episode=EpisodeKind.CORR)
    outcome = OperatorOutcome(task=task, budget=len(stages) ** 2, started=0.0)
    number = 0
    for before in stages:
        for after in stages:
            for stage in (before, after):
                number += 1
                digest = f"h{number}"
                trace.rounds.append(RoundTrace(round=number, episode=EpisodeKind.CORR, candidate_hash=digest,
                                               verdict={"stage": stage.value, "message": stage.value}))
                outcome.sources[digest] = f"src {number}"
    found = transitions(trace, outcome)
    assert found  # progress between ranked stages is still a transition
    assert set(STAGE_RANK) == set(Stage)
