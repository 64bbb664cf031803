"""The Triton runtime on its own: a wire request built by hand (struct + json), the runtime run as a
subprocess with TRITON_INTERPRET=1 on hand-written kernels, and the frames it sends back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sagekernel.harness import sandbox
from sagekernel.harness.compare import compare
from sagekernel.targets.base import BuildResult
from sagekernel.targets.devloop.direct import build_request, outputs_of, parse_frames, run_runtime
from sagekernel.targets.triton.target import TritonTarget
from sagekernel.tasks.inputs import reference_outputs
from sagekernel.tasks.loader import load_task

pytest.importorskip("triton")

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src" / "sagekernel"
RUNTIME = SRC / "targets" / "triton" / "runtime.py"
SOFTMAX = SRC / "tasks" / "suite" / "level2" / "softmax.py"
SIZES = {"B": 5, "D": 37}


def softmax_source() -> bytes:
    return SOFTMAX.with_name("softmax.triton.py").read_bytes()


def kinds(frames: list) -> list[str]:
    return [f["kind"] for f, _ in frames]


def test_frames_rounds_and_returned_subset() -> None:
    task = load_task(SOFTMAX)
    rounds = [{"calls": [0, 1, 2, 0], "return": 2}, {"calls": [2], "return": "all"}]
    req = build_request(
        task, softmax_source(), {"file": "kernel.py"}, sizes=SIZES, seeds=(1, 2, 3), rounds=rounds
    )
    frames, rc, err = run_runtime(RUNTIME, "interpreter", req)
    assert rc == 0, err
    k = kinds(frames)
    assert k[:2] == ["hello", "loaded"] and k[-1] == "end"
    assert k.count("done") == 5 and k.count("outputs") == 3 and k.count("round_end") == 2
    assert all(f["nonce"] == req.nonce for f, _ in frames)
    hello = frames[0][0]
    assert hello["runtime"] == "triton-interpreter" and hello["seccomp"] in ("off", "filter", "strict")
    loaded = frames[1][0]
    assert loaded["timed"] is False and loaded["warmup"] == 0
    first_round = [f for f, _ in frames[2:8] if f["kind"] == "outputs"]
    assert len(first_round) == 2  # "return": 2 -> two of the four calls, drawn after the round
    for f, payload in frames:
        if f["kind"] == "outputs":
            s = f["set"]
            got = outputs_of([(f, payload)], task, SIZES)[f["call"]][0]
            assert (
                compare(
                    got, reference_outputs(task, req.inputs[s], SIZES)[0], task.atol, task.rtol, "float32"
                )
                is None
            )
            assert f["out_meta"][0] | {"storage": 0} == {
                "dtype": "float32",
                "shape": [5, 37],
                "plain": True,
                "device": "cpu",
                "alias": -1,
                "storage": 0,
            }


def test_quit_before_any_round() -> None:
    task = load_task(SOFTMAX)
    req = build_request(task, softmax_source(), {"file": "kernel.py"}, sizes=SIZES)
    frames, rc, _ = run_runtime(RUNTIME, "interpreter", req, controls=b"Q")
    assert kinds(frames) == ["hello", "loaded", "end"] and rc == 0


def test_frames_after_a_wrong_nonce_are_ignored() -> None:
    task = load_task(SOFTMAX)
    req = build_request(task, softmax_source(), {"file": "kernel.py"}, sizes=SIZES)
    frames, _, _ = run_runtime(RUNTIME, "interpreter", req)
    assert parse_frames(b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"kind":"end"}\n\n', req.nonce) == []
    assert frames


def test_load_error_without_model_new() -> None:
    task = load_task(SOFTMAX)
    src = b"import torch\nclass Other(torch.nn.Module):\n    pass\n"
    frames, rc, _ = run_runtime(RUNTIME, "interpreter", build_request(task, src, {}, sizes=SIZES))
    assert kinds(frames) == ["hello", "load_error", "end"] and rc == 0
    assert "ModelNew" in frames[1][0]["error"]


def test_call_error_names_the_candidate_line() -> None:
    task = load_task(SOFTMAX)
    src = softmax_source().replace(b"        return out", b"        raise ValueError('boom')")
    frames, _, _ = run_runtime(
        RUNTIME, "interpreter", build_request(task, src, {"file": "kernel.py"}, sizes=SIZES)
    )
    err = next(f for f, _ in frames if f["kind"] == "call_error")
    assert "boom" in err["error"] and "kernel.py" in err["error"] and err["side"] == "candidate"
    assert kinds(frames)[-1] == "end"


def test_autotune_keeps_one_config_on_the_interpreter() -> None:
    task = load_task(SOFTMAX)
    src = softmax_source().replace(
        b"@triton.jit",
        b"@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)],"
        b" key=['D'])\n"
        b"@triton.jit",
    )
    req = build_request(task, src, {"file": "kernel.py"}, sizes=SIZES)
    frames, _, err = run_runtime(RUNTIME, "interpreter", req)
    assert "done" in kinds(frames), (frames, err)
    notes = next(f for f, _ in frames if f["kind"] == "loaded")["notes"]
    assert any("kept the first of 2 configs" in n for n in notes)


BF16_KERNEL = b"""
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


def test_bf16_upcast_gives_correct_bf16_outputs() -> None:
    task = load_task(HERE / "tasks" / "scale_bf16.py")
    req = build_request(task, BF16_KERNEL, {"file": "kernel.py"})
    frames, _, err = run_runtime(RUNTIME, "interpreter", req)
    loaded = next(f for f, _ in frames if f["kind"] == "loaded")
    assert any("bf16" in n for n in loaded["notes"]), (frames, err)
    outs = outputs_of(frames, task)
    for call, tensors in outs.items():
        assert tensors[0].dtype == torch.bfloat16
        assert (
            compare(
                tensors[0], reference_outputs(task, req.inputs[call])[0], task.atol, task.rtol, "bfloat16"
            )
            is None
        )


def test_bf16_refused_on_request() -> None:
    task = load_task(HERE / "tasks" / "scale_bf16.py")
    frames, _, _ = run_runtime(
        RUNTIME, "interpreter", build_request(task, BF16_KERNEL, {"file": "kernel.py", "bf16": "refuse"})
    )
    assert kinds(frames) == ["hello", "load_error", "end"]
    assert "bfloat16" in frames[1][0]["error"]


def test_reference_in_process_reports_ref_done() -> None:
    task = load_task(SOFTMAX)
    req = build_request(task, softmax_source(), {"file": "kernel.py"}, sizes=SIZES, reference=True)
    frames, _, _ = run_runtime(RUNTIME, "interpreter", req)
    ref = [f for f, _ in frames if f["kind"] == "ref_done"]
    assert len(ref) == 2 and all(f["ns"] is None for f in ref)


@pytest.mark.skipif(sandbox.best_kind() != "bwrap", reason="bubblewrap is not usable here")
def test_runtime_spec_runs_in_the_bwrap_sandbox(tmp_path: Path) -> None:
    task = load_task(SOFTMAX)
    spec = TritonTarget().runtime(BuildResult(True, "built"), task, "interpreter")
    assert spec.python and spec.device_nodes == [] and not spec.reference_in_process
    req = build_request(task, softmax_source(), {"file": "kernel.py"}, sizes=SIZES)
    cmd = sandbox.SandboxCommand(argv=spec.argv, ro_binds=spec.ro_binds, env=spec.env)
    result = sandbox.run(
        cmd,
        kind="bwrap",
        limits=sandbox.Limits(wall_s=120, cpu_s=120, address_space_bytes=spec.address_space_bytes),
        stdin_data=req.data + b"".join(req.round_messages) + b"Q",
        scratch_dir=tmp_path,
    )
    frames = parse_frames(result.channel, req.nonce)
    assert [f["kind"] for f, _ in frames][-1] == "end", result.output_tail
    assert sum(f["kind"] == "outputs" for f, _ in frames) == 2
