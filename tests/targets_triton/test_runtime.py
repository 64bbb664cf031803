"""The Triton runtime through the production path (`harness.evaluate` on the interpreter, in the
sandbox): the staged runtime folder, the seccomp lock, precision the interpreter models (TF32) or
refuses (bf16), and what a failing call reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel import sandbox
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.seam import BuildResult
from sagekernel.targets import get_target
from sagekernel.targets.device_host import SHARED_RUNTIME_FILES
from sagekernel.tasks.loader import load_task

pytest.importorskip("triton")

HERE = Path(__file__).resolve().parent
SUITE = HERE.parents[1] / "src" / "sagekernel" / "tasks" / "suite"
SOFTMAX = SUITE / "level2" / "softmax.py"
FAST = {
    "skip_timing": True,
    "held_out_shape": False,
    "canaries": False,
    "fresh_process_recheck": False,
    "trials": 2,
    "variant_trials": 0,
    "call_timeout_s": 30.0,
}


def judged(task: Path, source: str, **overrides: object) -> Verdict:
    cfg = HarnessConfig(**{**FAST, **overrides})  # type: ignore[arg-type]
    return evaluate(load_task(task), source, get_target("triton"), cfg, device="interpreter")


def test_the_runtime_folder_holds_the_runtime_and_nothing_else(tmp_path: Path) -> None:
    """No sagekernel source but the runtime's own files is bound into the candidate's sandbox: no
    reference runner, no lint tables, no harness."""
    module = tmp_path / "kernel.py"
    module.write_text("")
    spec = get_target("triton").runtime(
        BuildResult(True, "", {"module": module}), load_task(SOFTMAX), "interpreter"
    )
    ((host, mount),) = spec.ro_binds
    assert mount == "/box/rt"
    names = sorted(p.name for p in Path(host).iterdir())
    assert names == sorted(
        ["runtime.py", "interpreter_model.py", "warm_kernel.py", *(f.name for f in SHARED_RUNTIME_FILES)]
    )
    assert "reference_runner.py" not in names and not any(p.suffix != ".py" for p in Path(host).iterdir())
    assert {"integrity", "threads", "out_meta", "host_guard"} <= spec.reports
    assert spec.env["TRITON_F32_DEFAULT"] == "tf32"


def test_an_honest_kernel_passes_in_the_locked_sandbox() -> None:
    verdict = judged(SOFTMAX, (SUITE / "level2" / "softmax.triton.py").read_text())
    assert verdict.ok and verdict.evidence == "emulated", verdict.message
    if sandbox.best_kind("auto") == "bwrap":
        assert verdict.sandbox["kind"] == "bwrap"
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        pytest.skip("pyseccomp is not installed: the runtime cannot lock itself")
    assert verdict.sandbox["seccomp"] == "filter"  # locked before the candidate's first call


def test_tf32_dot_is_modelled_not_credited_as_float32() -> None:
    """tl.dot on float32 defaults to TF32 on NVIDIA GPUs; the interpreter rounds the operands to
    TF32, so a kernel that relies on the default fails a float32 tolerance here as it would on a
    GPU, while input_precision="ieee" passes."""
    task = HERE / "tasks" / "matmul_fp32.py"
    default = judged(task, (HERE / "precision" / "matmul_default.py").read_text(), trials=1)
    assert default.stage is Stage.CORRECTNESS and not default.counts_as_success, default.message
    ieee = judged(task, (HERE / "precision" / "matmul_ieee.py").read_text(), trials=1)
    assert ieee.ok, ieee.message


BF16_KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2 + 1, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scale[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
"""


def test_bf16_is_refused_on_the_interpreter() -> None:
    """The interpreter models no bf16 arithmetic: an emulated verdict would credit float32."""
    verdict = judged(HERE / "tasks" / "scale_bf16.py", BF16_KERNEL, trials=1)
    assert verdict.stage is Stage.LOAD and "not judged on the Triton interpreter" in verdict.message


@pytest.mark.slow
def test_a_failing_call_names_the_candidate_line() -> None:
    source = (
        (SUITE / "level2" / "softmax.triton.py")
        .read_text()
        .replace("        return out", "        raise ValueError('boom')", 1)
    )
    verdict = judged(SOFTMAX, source, trials=1)
    assert verdict.stage is Stage.RUNTIME and "kernel.py" in verdict.message and "boom" in verdict.message


@pytest.mark.slow
def test_autotune_with_several_configs_runs_on_the_interpreter() -> None:
    source = (
        (SUITE / "level2" / "softmax.triton.py")
        .read_text()
        .replace(
            "@triton.jit",
            "@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)],"
            " key=['D'])\n"
            "@triton.jit",
            1,
        )
    )
    verdict = judged(SOFTMAX, source, trials=1)
    assert verdict.ok, verdict.message
