"""TritonTarget: devices, availability, files, contract, knowledge, seeds and building (compile gate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel.candidate import Candidate
from sagekernel.protocols import Target
from sagekernel.targets import get_target
from sagekernel.targets.base import Evidence
from sagekernel.tasks.loader import load_task

SUITE = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "tasks" / "suite"
SOFTMAX = SUITE / "level2" / "softmax.py"


def test_registered_and_protocol() -> None:
    target = get_target("triton")
    assert isinstance(target, Target) and target.name == "triton" and target.language == "python"
    devices = {d.name: d for d in target.devices()}
    assert devices["interpreter"].evidence is Evidence.EMULATED and not devices["interpreter"].timed
    assert devices["cuda"].evidence is Evidence.HARDWARE and devices["cuda"].timed
    assert devices["npu"].timed


def test_available_never_raises_and_gives_reasons() -> None:
    target = get_target("triton")
    for device in ("interpreter", "cuda", "npu", "tpu"):
        ok, reason = target.available(device)
        assert isinstance(ok, bool) and reason
    assert target.available("tpu")[0] is False


def test_files_contract_knowledge_and_seeds() -> None:
    target = get_target("triton")
    task = load_task(SUITE / "level2" / "rms_norm.py")
    assert [f.path for f in target.files(task)] == ["kernel.py"]
    contract = target.contract(task)
    assert "class ModelNew(nn.Module)" in contract and "def __init__(self, eps)" in contract
    assert "def forward(self, x: torch.Tensor, weight: torch.Tensor)" in contract
    k = target.knowledge()
    assert len(k.quick_reference) > 500 and len(k.debugging_guide) > 500 and "ModelNew" in k.example
    items = [json.loads(line) for line in target.seed_memory_path().read_text().splitlines() if line.strip()]
    assert len(items) >= 20
    keys = {"title", "type", "category", "error_message", "wrong_code", "correct_code"}
    assert all(keys <= set(i) for i in items) and len({i["title"] for i in items}) == len(items)


def test_build_passes_the_compile_gate(tmp_path: Path) -> None:
    task = load_task(SOFTMAX)
    cand = Candidate.single("kernel.py", SOFTMAX.with_name("softmax.triton.py").read_text())
    built = get_target("triton").build(cand, task, tmp_path, device="interpreter", timeout_s=120)
    assert built.ok, built.message
    assert built.artifacts["module"].read_text() == cand.main
    aot = built.info["aot"]
    assert aot["target"] == "cuda sm_90" and aot["compiled"][0]["kernel"] == "softmax_rows"
    assert aot["compiled"][0]["signature"] == {
        "x_ptr": "*fp32",
        "out_ptr": "*fp32",
        "D": "i32",
        "BLOCK": "constexpr",
    }


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("tl.exp(x)", "tl.exp(x, 3)"), "triton.compile failed for kernel softmax_rows"),
        (
            ("tl.arange(0, BLOCK)", "tl.arange(0, D)"),
            "triton.compile failed",
        ),  # arange needs constexpr bounds
        (("softmax_rows[(b,)](x, out, d, BLOCK=", "softmax_rows[(b,)](x, out, BLOCK="), "forward raised"),
        (("        softmax_rows[(b,)]", "        pass  # "), "launched no @triton.jit kernel"),
        (("def forward", "def forward(:"), "SyntaxError"),
    ],
)
def test_build_rejects(tmp_path: Path, edit: tuple[str, str], needle: str) -> None:
    task = load_task(SOFTMAX)
    src = SOFTMAX.with_name("softmax.triton.py").read_text().replace(*edit)
    built = get_target("triton").build(
        Candidate.single("kernel.py", src), task, tmp_path, device="interpreter"
    )
    assert not built.ok and needle in built.message, built.message


def test_seed_items_load_into_an_empty_store(tmp_path: Path) -> None:
    from sagekernel import db
    from sagekernel.memory.io import load_seed

    assert load_seed(db.connect(tmp_path / "m.db"), get_target("triton").seed_memory_path()) >= 20


def test_worked_example_runs_on_the_interpreter(tmp_path: Path) -> None:
    """What the model is told must itself be right: the example's module lints clean, and both of
    its kernels match torch's F.normalize on the interpreter."""
    import re
    import subprocess
    import sys

    from sagekernel.targets.triton.lint import lint_source

    blocks = re.findall(r"```python\n(.*?)```", get_target("triton").knowledge().example, re.S)
    assert len(blocks) == 2 and lint_source(blocks[0]) == []
    module = tmp_path / "example_kernel.py"
    module.write_text(blocks[0] + "\n\n" + blocks[1])
    driver = (
        "import importlib.util, torch, triton\n"
        f"spec = importlib.util.spec_from_file_location('example_kernel', {str(module)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "x = torch.randn(7, 1500); x[3] = 0\n"
        "ref = torch.nn.functional.normalize(x, dim=-1, eps=1e-12)\n"
        "a = m.ModelNew(1e-12)(x)\n"
        "b = torch.empty_like(x)\n"
        "m.l2_normalize_rows_chunked[(7,)](x, b, 1500, 1e-12, BLOCK=512)\n"
        "assert torch.allclose(a, ref, atol=1e-6), (a - ref).abs().max()\n"
        "assert torch.allclose(b, ref, atol=1e-6), (b - ref).abs().max()\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_gate_compiles_the_first_autotune_config_and_lists_unlaunched_kernels(tmp_path: Path) -> None:
    task = load_task(SOFTMAX)
    src = SOFTMAX.with_name("softmax.triton.py").read_text()
    src = src.replace(
        "@triton.jit",
        "@triton.autotune(configs=[triton.Config({}, num_warps=8), triton.Config({}, num_warps=4)],"
        " key=['D'])\n@triton.jit",
    )
    src += "\n\n@triton.jit\ndef never_launched(x_ptr):\n    pass\n"
    cand = Candidate.single("kernel.py", src)
    built = get_target("triton").build(cand, task, tmp_path, device="interpreter")
    assert built.ok, built.message
    assert [c["num_warps"] for c in built.info["aot"]["compiled"]] == [8]
    assert built.info["aot"]["uncompiled"] == ["never_launched"]


def test_npu_build_skips_the_cuda_gate(tmp_path: Path) -> None:
    task = load_task(SOFTMAX)
    cand = Candidate.single("kernel.py", SOFTMAX.with_name("softmax.triton.py").read_text())
    built = get_target("triton").build(cand, task, tmp_path, device="npu")
    assert built.ok and built.info["aot"].startswith("skipped")
