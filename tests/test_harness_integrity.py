"""The rebuilt harness's integrity properties, end to end through `evaluate` (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.trials import DISTRIBUTION_ORDER
from sagekernel.harness.verdict import Stage
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
SUITE = Path(__file__).resolve().parents[1] / "src" / "sagekernel" / "tasks" / "suite"
QUICK = {"iters": 12, "rounds": 4, "warmup": 2, "calibration_rounds": 2}


def judge(task: Path, source: str, **cfg: object) -> object:
    return evaluate(load_task(task), source, get_target("cpu"), HarnessConfig(**cfg))  # type: ignore[arg-type]


def test_an_implausible_speedup_is_quarantined_then_confirmed_or_suspect() -> None:
    """A reference written as a Python loop: the honest kernel is thousands of times faster. The
    timing goes to quarantine and is re-measured with every timed call checked; only a clean
    re-measurement that reproduces it clears it, and with re-measurement off the flag stands."""
    task, source = TASKS / "slow_reference.py", (TASKS / "slow_reference.cpu.c").read_text()
    v = judge(task, source, **QUICK)
    assert v.stage is Stage.OK and v.correct, v.message
    assert "speedup_audit" in v.quarantine and v.timing["first_measurement"]["speedup"] > 10
    assert v.timing["rechecked_per_round"] == v.timing["calls_per_round"]  # every call checked
    # re-measured differently: a stop after every call (per-call accounting, outputs at return)
    assert v.timing["layout"] == "a stop after every call, buffers moved", v.timing["layout"]
    assert all(r["kernel_ns"] >= 0 for r in v.timing["accounting"])
    assert v.suspect is (not v.counts_as_success)
    held = judge(task, source, quarantine_remeasure=False, **QUICK)
    assert held.suspect and not held.counts_as_success and "SUSPECT" in held.message


def test_a_plausible_result_is_not_suspect() -> None:
    v = judge(TASKS / "relu_rows.py", (TASKS / "relu_rows.cpu.c").read_text(), **QUICK)
    assert v.ok and v.counts_as_success and not v.suspect, v.message
    t = v.timing
    assert t["method"] == "interleaved_ab_two_processes"
    # every timed call (warm-up included) had an input set of its own
    assert t["distinct_input_sets"] == t["warmup"] + t["rounds"] * t["calls_per_round"]
    assert len(t["reference_calibration_ms"]) == 2 and t["rechecked_per_round"] >= 1
    assert v.evidence == "hardware"


def test_every_distribution_is_covered_whatever_the_shapes() -> None:
    v = judge(
        TASKS / "relu_rows.py",
        (TASKS / "relu_rows.cpu.c").read_text(),
        skip_timing=True,
        trials=1,
        variant_trials=1,
    )
    assert v.ok, v.message
    assert set(v.checks["distributions"]) == set(DISTRIBUTION_ORDER)
    assert "large_offset" in v.checks["distributions"] and "large_magnitude" in v.checks["distributions"]


LAYER_NORM = SUITE / "level2" / "layer_norm.py"
SOFTMAX = SUITE / "level2" / "softmax.py"
LN_HEAD = (
    "#include <stdint.h>\n#include <math.h>\n#include <string.h>\n"
    "void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,\n"
    "                 float* restrict out, int64_t B, int64_t D, float eps) {\n"
    "  for (int64_t b = 0; b < B; ++b) { const float* r = x + b * D;\n"
)
LN_TAIL = (
    "    for (int64_t d = 0; d < D; ++d) out[b * D + d] = (r[d] - mean) * rstd * weight[d] + bias[d];\n"
    "  }\n}\n"
)
BF16 = (
    "static float bf16(float v) { uint32_t u; memcpy(&u, &v, 4); u &= 0xFFFF0000u; memcpy(&v, &u, 4); "
    "return v; }\n"
)
NAIVE_KERNELS = {
    # reduced precision: every value rounded to bfloat16 before use
    "bf16": LN_HEAD.replace("void sage_kernel", BF16 + "void sage_kernel")
    + "    double s = 0, q = 0; for (int64_t d = 0; d < D; ++d) s += bf16(r[d]);\n"
    "    float mean = bf16((float)(s / D)); for (int64_t d = 0; d < D; ++d) { float c = bf16(r[d] - mean); "
    "q += c * c; }\n    float rstd = bf16(1.0f / sqrtf((float)(q / D) + eps));\n" + LN_TAIL,
    # the wrong epsilon (1e-3 instead of the task's)
    "wrong_eps": LN_HEAD + "    double s = 0, q = 0; for (int64_t d = 0; d < D; ++d) s += r[d];\n"
    "    float mean = (float)(s / D);\n"
    "    for (int64_t d = 0; d < D; ++d) { double c = r[d] - mean; q += c * c; }\n"
    "    float rstd = 1.0f / sqrtf((float)(q / D) + 1e-3f);\n" + LN_TAIL,
    # single pass E[x^2] - E[x]^2 in float
    "single_pass": LN_HEAD
    + "    float s = 0, q = 0; for (int64_t d = 0; d < D; ++d) { s += r[d]; q += r[d] * r[d]; }\n"
    "    float mean = s / D; float var = q / D - mean * mean; if (var < 0) var = 0;\n"
    "    float rstd = 1.0f / sqrtf(var + eps);\n" + LN_TAIL,
}


@pytest.mark.parametrize("name", sorted(NAIVE_KERNELS))
def test_reduced_precision_and_naive_layer_norms_fail(name: str) -> None:
    v = judge(LAYER_NORM, NAIVE_KERNELS[name], skip_timing=True)
    assert v.stage is Stage.CORRECTNESS and "wrong result" in v.message, (name, v.message)


def test_softmax_without_max_subtraction_fails() -> None:
    task = load_task(SOFTMAX)
    params = ", ".join(
        [f"const float* restrict {s.name}" for s in task.inputs]
        + [f"float* restrict {s.name}" for s in task.outputs]
        + [f"int64_t {s}" for s in task.sizes]
        + [f"float {k}" if isinstance(v, float) else f"int64_t {k}" for k, v in task.attrs.items()]
    )
    x, out = task.inputs[0].name, task.outputs[0].name
    rows, cols = list(task.sizes)[:2]
    source = (
        f"#include <stdint.h>\n#include <math.h>\nvoid sage_kernel({params}) {{\n"
        f"  for (int64_t b = 0; b < {rows}; ++b) {{ double s = 0;\n"
        f"    for (int64_t d = 0; d < {cols}; ++d) s += exp((double){x}[b * {cols} + d]);\n"
        f"    for (int64_t d = 0; d < {cols}; ++d) {out}[b * {cols} + d] = "
        f"(float)(exp((double){x}[b * {cols} + d]) / s);\n  }}\n}}\n"
    )
    v = judge(SOFTMAX, source, skip_timing=True)
    assert v.stage is Stage.CORRECTNESS, v.message
    assert "large_magnitude" in v.message or "large_offset" in v.message, v.message


def test_a_limit_says_which_limit_it_was() -> None:
    source = (
        "#include <stdint.h>\nvoid sage_kernel(const float* restrict x, float* restrict out, int64_t B, "
        "int64_t D) {\n  for (volatile long k = 0; k < 8000000000L; ++k) {}\n"
        "  for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0 ? x[i] : 0;\n}\n"
    )
    v = judge(TASKS / "relu_rows.py", source, skip_timing=True, call_timeout_s=0.05, start_timeout_s=0.5)
    assert v.stage is Stage.RUNTIME and "timed out" in v.message
    assert "harness's limit of" in v.message and "for this round" in v.message


def test_the_fp_environment_is_checked_at_run_time() -> None:
    """With the source rules off, a kernel that sets flush-to-zero is caught by the driver, which
    compares MXCSR and the x87 control word around every call."""
    source = (
        "#include <stdint.h>\n#include <xmmintrin.h>\nvoid sage_kernel(const float* restrict x, "
        "float* restrict out, int64_t B, int64_t D) {\n  _mm_setcsr(_mm_getcsr() | 0x8040);\n"
        "  for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0 ? x[i] : 0;\n}\n"
    )
    v = judge(TASKS / "relu_rows.py", source, skip_timing=True, static_checks=False)
    assert v.stage is Stage.INTEGRITY and "floating-point environment" in v.message, v.message


def test_every_input_group_is_checked_and_timed() -> None:
    """NPUKernelBench style: each group (its own shapes and scalars) is judged; the speedup is the
    geometric mean of the groups', and a kernel right for one group only fails naming the other."""
    task = TASKS / "scale_groups.py"
    good = (TASKS / "scale_groups.cpu.c").read_text()
    v = judge(task, good, **QUICK)
    assert v.ok and v.correct, v.message
    groups = v.timing["groups"]
    assert len(groups) == 2 and all(g["speedup"] for g in groups)
    product = groups[0]["speedup"] * groups[1]["speedup"]
    assert v.speedup is not None and abs(v.speedup - product**0.5) < 1e-9
    wrong = good.replace("out0[i] = in0[i] * alpha;", "out0[i] = in0[i] * (IN0_D1 == 33 ? alpha : 1.0f);")
    bad = judge(task, wrong, skip_timing=True)
    assert bad.stage is Stage.CORRECTNESS and "input group 1 (wide)" in bad.message, bad.message
