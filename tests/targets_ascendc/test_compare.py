"""NPUKernelBench's per-element rule (compare.compare_both_exceed)."""

from __future__ import annotations

import numpy as np

from sagekernel.targets.ascendc.compare import compare_both_exceed
from sagekernel.targets.ascendc.target import AscendCTarget


def test_fails_only_where_both_errors_exceed():
    e = np.array([1000.0, 1e-6, 1.0, 0.0], dtype=np.float32)
    # |d|=0.5 > atol but rel 5e-4 < rtol; |d|=1e-4 rel 100 but abs < atol; exact; abs 1e-4 on a zero
    a = np.array([1000.5, 1e-6 + 1e-4, 1.0, 1e-4], dtype=np.float32)
    assert compare_both_exceed(a, e, atol=1e-3, rtol=1e-3).ok
    bad = a.copy()
    bad[2] = 1.01  # abs 1e-2 and rel 1e-2 both exceed 1e-3
    r = compare_both_exceed(bad, e, atol=1e-3, rtol=1e-3)
    assert not r.ok and r.mismatches == 1 and r.first_index == (2,) and r.expected == 1.0
    assert "1 of 4 elements" in r.reason


def test_non_finite_values_must_match():
    e = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert compare_both_exceed(e.copy(), e, 1e-3, 1e-3).ok
    for i, v in ((0, 0.0), (1, -np.inf), (2, 5.0), (3, np.nan), (3, np.inf)):
        a = e.copy()
        a[i] = v
        r = compare_both_exceed(a, e, 1e-3, 1e-3)
        assert not r.ok and r.first_index == (i,), (i, v)


def test_integers_exact_and_shapes_checked():
    e = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert compare_both_exceed(e.copy(), e, 1.0, 1.0).ok
    a = e.copy()
    a[1, 2] += 1
    r = compare_both_exceed(a, e, 1.0, 1.0)
    assert not r.ok and r.first_index == (1, 2)
    assert not compare_both_exceed(e.reshape(3, 2), e, 1.0, 1.0).ok


def test_half_precision_inputs_compared_in_float64():
    e = np.array([2048.0], dtype=np.float16)
    a = np.array([2050.0], dtype=np.float16)  # one half ulp at 2048: abs 2 > 1e-3 but rel ~1e-3
    assert compare_both_exceed(a, e, atol=1e-3, rtol=1e-3).ok


def test_task_opts_into_the_rule(tmp_path, tasks):
    from dataclasses import replace

    assert AscendCTarget().comparison(tasks["abs"]) == ("allclose", tasks["abs"].atol, tasks["abs"].rtol)
    path = tmp_path / "abs.py"
    path.write_text(
        tasks["abs"].source_path.read_text()
        + '\nSAGE_ASCENDC = {"compare": "elementwise_both", "atol": 1e-3, "rtol": 1e-3}\n'
    )
    assert AscendCTarget().comparison(replace(tasks["abs"], source_path=path)) == (
        "elementwise_both",
        1e-3,
        1e-3,
    )
