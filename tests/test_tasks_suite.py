"""The whole built-in suite: every hand-written CPU kernel is correct, and no task is low-signal.

Fast in-process sanity check (gcc -O2 + ctypes); the sandboxed version lives in the harness.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from sagekernel.targets.cpu.contract import c_signature
from sagekernel.tasks.inputs import DISTRIBUTIONS, build_inputs, tolerance_scale, torch_dtype
from sagekernel.tasks.loader import task_files
from sagekernel.tasks.reference import reference_outputs
from sagekernel.tasks.suites import SUITE_ROOT, load_suite
from sagekernel.tasks.task import Task

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

SUITE_FILES = [p.relative_to(SUITE_ROOT).as_posix() for p in task_files(SUITE_ROOT)]
UNSCALED = False
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small reference ops: one intra-op thread avoids OpenMP spin-wait storms on a shared 2-core box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def suite() -> dict[str, Task]:
    tasks = load_suite("builtin")
    return {t.source_path.relative_to(SUITE_ROOT).as_posix(): t for t in tasks}


@pytest.fixture(scope="module")
def kernels(suite: dict[str, Task], tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    out_dir = tmp_path_factory.mktemp("suite_kernels")

    def build(item: tuple[str, Task]) -> tuple[str, Path | str]:
        rel, task = item
        src = task.reference_kernels["cpu"]
        so = out_dir / (re.sub(r"\W", "_", rel) + ".so")
        proc = subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", str(src),
                               "-o", str(so), "-lm"], capture_output=True, text=True, timeout=120)
        return rel, (so if proc.returncode == 0 else proc.stderr)

    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(pool.map(build, [(r, t) for r, t in suite.items() if "cpu" in t.reference_kernels]))
    failures = {r: v for r, v in built.items() if isinstance(v, str)}
    assert not failures, f"kernels failed to compile: {failures}"
    return {rel: ctypes.CDLL(str(so)) for rel, so in built.items()}


# ----------------------------------------------------------------------------- helpers

def _alloc(dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    """Output buffer pre-filled with a sentinel (NaN for floats, 0xAB bytes otherwise)."""
    if dtype in FLOAT_DTYPES:
        return torch.full(shape, float("nan"), dtype=torch_dtype(dtype))
    if dtype == "bool":
        return torch.full(shape, 0xAB, dtype=torch.uint8)
    t = torch.empty(shape, dtype=torch_dtype(dtype))
    t.view(torch.uint8).fill_(0xAB)
    return t


def run_kernel(lib: ctypes.CDLL, task: Task, inputs: list[torch.Tensor],
               sizes: dict[str, int]) -> list[torch.Tensor]:
    outs = [_alloc(s.dtype, tuple(sizes[d] for d in s.dims)) for s in task.outputs]
    args: list[object] = [ctypes.c_void_p(t.data_ptr()) for t in [*inputs, *outs]]
    args += [ctypes.c_int64(sizes[s]) for s in task.sizes]
    args += [ctypes.c_float(v) if isinstance(v, float) else ctypes.c_int64(v) for v in task.attrs.values()]
    fn = lib.sage_kernel
    fn.restype = None
    fn(*args)
    result = []
    for spec, o in zip(task.outputs, outs, strict=True):
        if spec.dtype == "bool":
            assert bool(((o == 0) | (o == 1)).all()), f"{task.name}: bool output {spec.name} is not 0/1"
            o = o.bool()
        result.append(o)
    return result


def close(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """|out - ref| <= atol + rtol*|ref| elementwise; NaN/inf must match exactly."""
    if out.shape != ref.shape:
        return False
    o, r = out.double(), ref.double()
    if not torch.equal(torch.isnan(o), torch.isnan(r)):
        return False
    fin = torch.isfinite(r)
    if not torch.equal(torch.isfinite(o), fin):
        return False
    inf = torch.isinf(r)
    if not torch.equal(o[inf], r[inf]):
        return False
    return bool(((o[fin] - r[fin]).abs() <= atol + rtol * r[fin].abs()).all())


def _digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _check(lib: ctypes.CDLL, task: Task, sizes: dict[str, int], seed: int, distribution: str) -> None:
    inputs = build_inputs(task, sizes, seed=seed, distribution=distribution)
    before = _digest(inputs)
    refs = reference_outputs(task, inputs, sizes)
    outs = run_kernel(lib, task, inputs, sizes)
    assert _digest(inputs) == before, f"{task.name}: the kernel modified its inputs"
    atol = task.atol * (1.0 if UNSCALED else tolerance_scale(inputs))
    for spec, out, ref in zip(task.outputs, outs, refs, strict=True):
        if not close(out, ref, atol, task.rtol):
            o, r = out.double(), ref.double()
            worst = float((o - r).abs().nan_to_num(float("inf")).max())
            pytest.fail(f"{task.name} {spec.name} at {sizes} seed={seed} {distribution}: max |d| = {worst:g} "
                        f"(atol={atol:g}, rtol={task.rtol:g})")


# ----------------------------------------------------------------------------- tests

def test_suite_is_large_and_covers_every_level(suite: dict[str, Task]) -> None:
    assert len(suite) >= 40
    assert {t.level for t in suite.values()} == {1, 2, 3}
    assert len(SUITE_FILES) == len(suite), "every file in the suite must load"
    for t in suite.values():
        assert "cpu" in t.reference_kernels, f"{t.name} has no hand-written CPU kernel"


@pytest.mark.parametrize("rel", SUITE_FILES)
def test_kernel_matches_contract_and_reference(rel: str, suite: dict[str, Task],
                                               kernels: dict[str, ctypes.CDLL]) -> None:
    task = suite[rel]
    source = " ".join(task.reference_kernels["cpu"].read_text().split())
    assert " ".join(c_signature(task).split()) in source, f"{rel}: kernel does not use the contract prototype"
    lib = kernels[rel]
    shapes = task.all_shapes()
    assert len(shapes) >= 2, f"{task.name} needs at least one shape variant"
    for i, sizes in enumerate(shapes):
        _check(lib, task, sizes, seed=i, distribution="default")
    for distribution in DISTRIBUTIONS[1:]:
        _check(lib, task, shapes[1], seed=11, distribution=distribution)


def _canaries(task: Task, inputs: list[torch.Tensor], refs: list[torch.Tensor],
              other_refs: list[torch.Tensor]) -> dict[str, list[torch.Tensor | None]]:
    """Null kernels per output: zeros, constants (this and another trial's mean/mode), input copy."""
    def constant(ref: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if like.dtype.is_floating_point:
            value = float(ref.double()[torch.isfinite(ref.double())].mean()) if ref.numel() else 0.0
        else:
            value = float(torch.mode(ref.reshape(-1).long()).values)
        return torch.full_like(like, value)

    copies: list[torch.Tensor | None] = []
    for r in refs:
        first = inputs[0] if inputs else None
        copies.append(first.reshape(r.shape).to(r.dtype) if first is not None and first.numel() == r.numel()
                      else None)
    return {
        "zeros": [torch.zeros_like(r) for r in refs],
        "other-trial constant": [constant(o, r) for o, r in zip(other_refs, refs, strict=True)],
        "same-trial constant": [constant(r, r) if r.dim() > 0 else None for r in refs],
        "input copy": copies,
    }


@pytest.mark.parametrize("rel", SUITE_FILES)
def test_task_is_not_low_signal(rel: str, suite: dict[str, Task]) -> None:
    task = suite[rel]
    inputs = build_inputs(task, seed=0)
    refs = reference_outputs(task, inputs)
    other_refs = reference_outputs(task, build_inputs(task, seed=1))
    if task.inputs:
        assert any(not torch.equal(a, b) for a, b in zip(refs, other_refs, strict=True)), \
            f"{task.name}: new inputs give the same output"
    for spec, ref in zip(task.outputs, refs, strict=True):
        if spec.dtype in FLOAT_DTYPES:
            finite = ref.double()[torch.isfinite(ref.double())]
            assert finite.numel() and float(finite.abs().max()) >= 10 * task.atol, \
                f"{task.name}: output {spec.name} is tiny relative to atol"
    for kind, outs in _canaries(task, inputs, refs, other_refs).items():
        for spec, out, ref in zip(task.outputs, outs, refs, strict=True):
            if out is not None:
                assert not close(out, ref, task.atol, task.rtol), \
                    f"{task.name}: the {kind} canary passes for output {spec.name}"


def test_distributions_listed() -> None:
    assert DISTRIBUTIONS[0] == "default"
    assert {"normal", "offset_uniform", "heavy_tailed", "large_magnitude", "uniform"} <= set(DISTRIBUTIONS)
