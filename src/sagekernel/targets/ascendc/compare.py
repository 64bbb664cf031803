"""NPUKernelBench's per-element rule, as a pure function the harness calls per output.

An element fails only where BOTH its absolute error exceeds atol AND its relative error
(|actual - expected| / |expected|) exceeds rtol; non-finite values must match exactly (NaN where
NaN is expected, the same infinity where an infinity is expected; any non-finite value where a
finite one is expected fails). Integer and bool outputs must match exactly.

Who calls it (audit T4): the calibration step (calibrate.py) for a task that opts in with
`SAGE_ASCENDC = {"compare": "elementwise_both", "atol": ..., "rtol": ...}`. The harness's
correctness stage does NOT call it yet: it judges every target with its own comparator and the
task's atol / rtol. `AscendCTarget.comparison(task)` states the rule and tolerances a harness
that honours per-target rules would use; wiring it is a harness change (harness/compare.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementwiseResult:
    ok: bool
    mismatches: int
    total: int
    first_index: tuple[int, ...] | None
    expected: float | None  # at the first mismatch
    actual: float | None
    max_abs_error: float  # over finite pairs
    max_rel_error: float
    reason: str

    @property
    def mismatch_ratio(self) -> float:
        return self.mismatches / self.total if self.total else 0.0


def compare_both_exceed(
    actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float
) -> ElementwiseResult:
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return ElementwiseResult(
            False,
            a.size,
            e.size,
            None,
            None,
            None,
            float("inf"),
            float("inf"),
            f"shape {a.shape} != expected {e.shape}",
        )
    if not (np.issubdtype(e.dtype, np.floating) or np.issubdtype(a.dtype, np.floating)):
        bad = a != e
        abs_err = np.zeros(e.shape)
        rel_err = abs_err
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        finite_e, finite_a = np.isfinite(e64), np.isfinite(a64)
        both = finite_e & finite_a
        with np.errstate(divide="ignore", invalid="ignore"):
            abs_err = np.where(both, np.abs(a64 - e64), 0.0)
            rel_err = np.where(both, np.where(abs_err == 0, 0.0, abs_err / np.abs(e64)), 0.0)
        numeric_bad = both & (abs_err > atol) & (rel_err > rtol)
        nonfinite_bad = ~finite_e & ~((np.isnan(e64) & np.isnan(a64)) | (np.isinf(e64) & (a64 == e64)))
        nonfinite_bad |= finite_e & ~finite_a
        bad = numeric_bad | nonfinite_bad
    count = int(np.count_nonzero(bad))
    max_abs = float(abs_err.max()) if abs_err.size else 0.0
    max_rel = float(np.nan_to_num(rel_err, posinf=np.inf).max()) if rel_err.size else 0.0
    if count == 0:
        return ElementwiseResult(True, 0, e.size, None, None, None, max_abs, max_rel, "ok")
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    exp_v, act_v = float(e[idx]), float(a[idx])
    return ElementwiseResult(
        False,
        count,
        e.size,
        idx,
        exp_v,
        act_v,
        max_abs,
        max_rel,
        f"{count} of {e.size} elements exceed both atol={atol:g} and rtol={rtol:g} "
        f"(first at {list(idx)}: expected {exp_v!r}, got {act_v!r})",
    )


__all__ = ["ElementwiseResult", "compare_both_exceed"]
