"""The CUDA target here (no GPU): contract, lint, the nvcc build of every hand-written kernel and the
symbol checks, the adversarial suite's static half, and the runtime's clean refusal without a GPU.
The GPU half (running and timing) is in test_cuda_gpu.py (marked gpu) and scripts/gpu_check.sh."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sagekernel.candidate import Candidate
from sagekernel.protocols import Target
from sagekernel.targets import get_target
from sagekernel.targets.base import BuildResult, Evidence
from sagekernel.targets.cuda.build import nvcc_path
from sagekernel.targets.cuda.lint import lint_source
from sagekernel.tasks.loader import load_dir, load_task

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "src" / "sagekernel" / "tasks" / "suite"
TASKS = [t for t in load_dir(SUITE).tasks if "cuda" in t.reference_kernels]
ADVERSARIAL = sorted((Path(__file__).parent / "adversarial").glob("*.cu"))
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc (CUDA toolkit) is not installed")


def test_target_protocol_and_records() -> None:
    target = get_target("cuda")
    assert isinstance(target, Target) and target.language == "cuda"
    assert [(d.name, d.evidence, d.timed) for d in target.devices()] == [("cuda", Evidence.HARDWARE, True)]
    assert target.available("interpreter")[0] is False
    ok, reason = target.available("cuda")
    assert isinstance(ok, bool) and reason
    task = load_task(SUITE / "level2" / "rms_norm.py")
    assert [f.path for f in target.files(task)] == ["kernel.cu"]
    contract = target.contract(task)
    assert (
        'extern "C" int sage_launch(const float* __restrict__ x, const float* __restrict__ weight, '
        "float* __restrict__ out, int64_t B, int64_t D, float eps, cudaStream_t stream)"
    ) in contract
    k = target.knowledge()
    assert len(k.quick_reference) > 500 and len(k.debugging_guide) > 500 and "sage_launch" in k.example
    items = [json.loads(x) for x in target.seed_memory_path().read_text().splitlines() if x.strip()]
    assert len(items) >= 20 and len({i["title"] for i in items}) == len(items)
    spec = target.runtime(BuildResult(True, "built"), task, "cuda")
    assert spec.reference_in_process and spec.address_space_bytes is None and spec.python


def test_at_least_ten_cuda_kernels() -> None:
    assert len(TASKS) >= 10


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_hand_written_kernels_lint_clean(task) -> None:  # type: ignore[no-untyped-def]
    assert lint_source(task.reference_kernels["cuda"].read_text()) == []


@needs_nvcc
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_hand_written_kernels_compile_with_nvcc(task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cand = Candidate.single("kernel.cu", task.reference_kernels["cuda"].read_text())
    built = get_target("cuda").build(cand, task, tmp_path, device="cuda")
    assert built.ok, built.message
    assert built.library is not None and built.library.stat().st_size > 0
    assert built.info["arch"] == "sm_90"


@needs_nvcc
def test_compile_errors_are_trimmed_with_the_file_name(tmp_path: Path) -> None:
    task = load_task(SUITE / "level1" / "abs.py")
    src = task.reference_kernels["cuda"].read_text().replace("fabsf(x[i])", "fabsf(x[i], y)")
    built = get_target("cuda").build(Candidate.single("kernel.cu", src), task, tmp_path, device="cuda")
    assert not built.ok and built.message.startswith("nvcc failed:")
    assert "kernel.cu(" in built.message and "/box/" not in built.message and "error" in built.message


@needs_nvcc
def test_missing_launcher_is_rejected(tmp_path: Path) -> None:
    task = load_task(SUITE / "level1" / "abs.py")
    src = task.reference_kernels["cuda"].read_text().replace('extern "C" int sage_launch', "int sage_launch")
    built = get_target("cuda").build(Candidate.single("kernel.cu", src), task, tmp_path, device="cuda")
    assert not built.ok and built.stage == "lint" and "sage_launch" in built.message


def expectations(path: Path) -> tuple[set[str], set[str], str]:
    line = re.search(r"EXPECT: (.*)", path.read_text())
    assert line, path
    lint: set[str] = set()
    build: set[str] = set()
    runtime = ""
    for part in line.group(1).split(";"):
        kind, _, rest = part.strip().partition(" ")
        names = {r.strip() for r in rest.split(",") if r.strip()}
        if kind == "lint":
            lint |= names
        elif kind == "build":
            build |= names
        else:
            runtime = rest
    return lint, build, runtime


def test_adversarial_suite_size() -> None:
    assert len(ADVERSARIAL) >= 6 and all("HACK:" in p.read_text() for p in ADVERSARIAL)


@pytest.mark.parametrize("path", ADVERSARIAL, ids=[p.stem for p in ADVERSARIAL])
def test_adversarial_rejected_for_its_reason(path: Path, tmp_path: Path) -> None:
    lint, build, runtime = expectations(path)
    found = {f.rule for f in lint_source(path.read_text())}
    assert lint <= found, (path.name, lint, found)
    if build and nvcc_path() is not None:
        # The object check on its own (the lint would stop it first in the harness).
        from sagekernel.targets.cuda import build as build_mod

        built = build_mod.build(path.read_text(), tmp_path)
        assert not built.ok and {f.rule for f in built.findings} >= build, built.message
    if not lint:
        assert runtime, f"{path.name}: no lint rule and no runtime check named"


def test_evaluate_refuses_cleanly_without_a_gpu() -> None:
    """Without a GPU the production path stops at availability, with the reason."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: test_cuda_gpu.py covers the runtime")
    from sagekernel.harness.evaluate import evaluate

    task = load_task(SUITE / "level1" / "abs.py")
    source = (SUITE / "level1" / "abs.cuda.cu").read_text()
    verdict = evaluate(task, source, get_target("cuda"), device="cuda")
    assert not verdict.ok and "cannot run on 'cuda' here" in verdict.message


def test_runtime_binds_only_the_staged_runtime_folder(tmp_path: Path) -> None:
    """No sagekernel source other than the runtime's own files is bound into the sandbox."""
    lib = tmp_path / "k.so"
    lib.write_bytes(b"\x7fELF")
    spec = get_target("cuda").runtime(
        BuildResult(True, "", {"library": lib}), load_task(SUITE / "level1" / "abs.py"), "cuda"
    )
    ((host, mount),) = spec.ro_binds
    assert mount == "/box/rt"
    assert sorted(p.name for p in Path(host).iterdir()) == sorted(
        ["runtime.py", "loop.py", "devices.py", "hostguard.py", "wire_child.py", "guard.py"]
    )
    assert {"integrity", "threads", "out_meta"} <= spec.reports


def test_seed_items_load_into_an_empty_store(tmp_path: Path) -> None:
    from sagekernel import db
    from sagekernel.memory.io import load_seed

    assert load_seed(db.connect(tmp_path / "m.db"), get_target("cuda").seed_memory_path()) >= 20


@needs_nvcc
def test_worked_example_compiles(tmp_path: Path) -> None:
    blocks = re.findall(r"```cpp\n(.*?)```", get_target("cuda").knowledge().example, re.S)
    full = [b for b in blocks if "__global__" in b]
    assert len(full) == 1 and lint_source(full[0]) == []
    from sagekernel.targets.cuda import build as build_mod

    built = build_mod.build(full[0], tmp_path)
    assert built.ok, built.message
