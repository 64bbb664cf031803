"""NPUKernelBench's correctness rule, as the benchmark applies it (framework/batch_precision_eval.py).

Per case, the benchmark calls the task's ``custom_check_precision(param, outputs, outputs_new)``
when ``prepare_inputs.py`` defines one, else ``framework.utils.check_precision(outputs, outputs_new,
max_abs_error, max_rel_error)`` with the root config's tolerances. Both return
``(acc, abs_diff, rel_diff)``; a case passes when ``acc`` is 1. `check_precision` here is the
benchmark's default rule restated (an element fails when its absolute error exceeds
``max_abs_error`` and its relative error ``|d| / (|ref| + 1e-7)`` exceeds ``max_rel_error``; any
non-finite value in either output fails the case; bool outputs compare as ints); the loader's shim
serves it as ``framework.utils.check_precision`` to the 29 tasks that import it.

The rule is applied in addition to the harness's own check on hidden inputs: a kernel must pass
both to earn credit (`sagekernel.report.npukb_score`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from sagekernel.tasks.npukb_cases import CaseRow, Tolerances


def check_precision(outputs: Any, outputs_new: Any, max_abs_error: float,
                    max_rel_error: float) -> tuple[int, torch.Tensor, torch.Tensor]:
    """The benchmark's default rule (``framework.utils.check_precision``), same inputs and result."""
    outputs = [outputs] if not isinstance(outputs, list) else outputs
    outputs_new = [outputs_new] if not isinstance(outputs_new, list) else outputs_new
    all_abs, all_rel = [], []
    accurate = True
    for out, new in zip(outputs, outputs_new, strict=False):
        if new.dtype == torch.bool:
            out, new = out.to(torch.int), new.to(torch.int)
        abs_diff = torch.abs(out - new)
        rel_diff = abs_diff / (torch.abs(out) + 1e-7)
        all_abs.append(abs_diff.reshape(-1))
        all_rel.append(rel_diff.reshape(-1))
        finite = all(bool(torch.all(torch.isfinite(t))) for t in (out, new, abs_diff, rel_diff))
        if not finite or bool(((abs_diff > max_abs_error) & (rel_diff > max_rel_error)).any()):
            accurate = False
    empty = torch.zeros(0)
    return (1 if accurate else 0), (torch.cat(all_abs) if all_abs else empty), \
        (torch.cat(all_rel) if all_rel else empty)


@dataclass(frozen=True)
class CaseCheck:
    """The benchmark's verdict on one case."""

    passed: bool
    rule: str  # "custom_check_precision" or "check_precision(abs<=a or rel<=r)"
    max_abs_error: float
    max_rel_error: float
    error: str = ""


def _as_reported(values: Sequence[torch.Tensor]) -> Any:
    """What the benchmark's checks receive: the model's output as returned (one tensor, or a list)."""
    return values[0] if len(values) == 1 else list(values)


def _max(t: Any) -> float:
    if isinstance(t, torch.Tensor) and t.numel():
        return float(t.float().max())
    return 0.0


def apply_rule(custom: Callable[..., Any] | None, row: Mapping[str, Any], expected: Sequence[torch.Tensor],
               got: Sequence[torch.Tensor], tolerances: Tolerances) -> CaseCheck:
    """Run the benchmark's rule for one case: `custom` (the task's ``custom_check_precision``) when
    given, else `check_precision` with `tolerances`. A rule that raises fails the case."""
    ref = _as_reported([t.detach().cpu() for t in expected])
    out = _as_reported([t.detach().cpu() for t in got])
    if custom is not None:
        rule = "custom_check_precision"
    else:
        rule = f"check_precision(abs<={tolerances.max_abs_error:g} or rel<={tolerances.max_rel_error:g})"
    try:
        if custom is not None:
            acc, abs_diff, rel_diff = custom(row, ref, out)
        else:
            acc, abs_diff, rel_diff = check_precision(ref, out, tolerances.max_abs_error,
                                                      tolerances.max_rel_error)
    except Exception as exc:  # the benchmark logs the case as failed
        return CaseCheck(False, rule, float("inf"), float("inf"), f"{type(exc).__name__}: {exc}")
    return CaseCheck(bool(acc == 1), rule, _max(abs_diff), _max(rel_diff))


def case_check(task: Any, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
               expected: Sequence[torch.Tensor], sizes: Mapping[str, int], seed: int = 0) -> CaseCheck:
    """The benchmark's verdict on a kernel's `outputs` for one case of `task` (a group task of an
    NPUKernelBench operator) on that case's own inputs. The benchmark's reference is its Model run
    by CPU PyTorch in the case's dtypes (`declared_precision_outputs`); `expected` (the harness's
    float64-derived reference) stands in when that run fails."""
    from sagekernel.tasks import confine
    from sagekernel.tasks.modules import task_module
    from sagekernel.tasks.reference import declared_precision_outputs

    if (child := confine.child_for(task)) is not None:  # the task's own rule runs in its sandbox
        return CaseCheck(*confine.case_check(child, task, inputs, outputs, expected, sizes, seed))
    spec = task.benchmark
    group = task.groups[task.group_index or 0].name if task.groups else ""
    row = spec.cases.get(group, {}) if spec is not None else {}
    custom = getattr(task_module(task), "NPUKB_CUSTOM_CHECK", None)
    reference = declared_precision_outputs(task, list(inputs), dict(sizes), seed=seed) or list(expected)
    tolerances = Tolerances(spec.max_abs_error, spec.max_rel_error) if spec is not None else Tolerances()
    return apply_rule(custom, CaseRow(row), reference, outputs, tolerances)


def case_record(group: str, check: CaseCheck | None, harness_ok: bool) -> dict[str, Any]:
    """One case of a verdict's ``checks["benchmark"]``: the benchmark's rule and the harness's."""
    return {"case": group, "rule_passed": bool(check and check.passed), "harness_passed": harness_ok,
            "rule": check.rule if check else "", "max_abs_error": check.max_abs_error if check else None,
            "max_rel_error": check.max_rel_error if check else None, "error": check.error if check else
            "the kernel produced no outputs for this case"}


def score_record(case_count: int, cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A verdict's ``checks["benchmark"]``: the benchmark's cases, how many pass its rule, and how
    many pass both its rule and the harness (`passed`: the only ones SAGE credits)."""
    rule_passed = sum(1 for c in cases if c.get("rule_passed"))
    passed = sum(1 for c in cases if c.get("rule_passed") and c.get("harness_passed"))
    return {"cases": case_count, "rule_passed": rule_passed, "passed": passed, "per_case": list(cases)}
