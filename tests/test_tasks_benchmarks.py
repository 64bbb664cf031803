"""Benchmark task files as their users have them: KernelBench (large published shapes, Python-scalar
inputs, init arguments of any kind, models with parameters), NPUKernelBench-style input groups with
JSON cases, non-tensor forward arguments and fp16/bf16, device-only packages, directory layouts.

The files below are written here in the published formats (not copies of third-party files).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from sagekernel.errors import TaskError
from sagekernel.targets.cpu.contract import c_parameters, contract_text
from sagekernel.tasks.budget import max_bytes
from sagekernel.tasks.loader import build_inputs, load_dir, load_task, reference_outputs
from sagekernel.tasks.record import task_from_json, task_to_json
from sagekernel.tasks.reference import param_tensors


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


RELU_PUBLISHED = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Applies ReLU."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
'''

SCALAR_INPUT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """C = A * s for a matrix A and a Python float s."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s

M = 16384 * 4
N = 4096 * 4

def get_inputs():
    A = torch.rand(M, N)
    s = 3.14
    return [A, s]

def get_init_inputs():
    return []
'''

GEMM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Linear layer, scaled, then LeakyReLU."""
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)

batch_size = 1024
in_features = 8192
out_features = 8192
multiplier = 2.0
negative_slope = 0.1

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
'''

CONV = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """2D convolution, square kernel, with bias."""
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride,
                                padding=padding, bias=bias)

    def forward(self, x):
        return self.conv2d(x)

batch_size = 16
in_channels = 16
out_channels = 128
kernel_size = 3
width = 1024
height = 1024

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

ODD_INIT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Max pooling with init arguments of every kind."""
    def __init__(self, kernel, mode, unused, scale):
        super().__init__()
        self.kernel, self.mode, self.scale = kernel, mode, scale

    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, self.kernel) * self.scale

batch = 4
size = 16

def get_inputs():
    return [torch.randn(batch, 3, size, size)]

def get_init_inputs():
    return [(2, 2), "max", None, 0.5]
'''

LAYER_NORM_GROUPS = '''
import json
import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm with an optional weight and bias."""

    def forward(self, x, normalized_shape, weight, bias, eps):
        return torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)


HERE = os.path.dirname(os.path.abspath(__file__))


def get_input_groups():
    with open(os.path.join(HERE, "layer_norm_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    groups = []
    for case in cases:
        dtype = getattr(torch, case["dtype"])
        d = case["shape"][-1]
        x = torch.randn(case["shape"], dtype=dtype)
        w = torch.randn(d, dtype=dtype) if case["affine"] else None
        b = torch.randn(d, dtype=dtype) if case["affine"] else None
        groups.append({"name": case["name"], "inputs": [x, [d], w, b, case["eps"]]})
    return groups


def get_init_inputs():
    return []
'''

CASES = [
    {"name": "fp16_small", "shape": [4, 64], "dtype": "float16", "affine": True, "eps": 1e-5},
    {"name": "bf16_3d", "shape": [2, 8, 128], "dtype": "bfloat16", "affine": True, "eps": 1e-6},
    {"name": "fp32_plain", "shape": [3, 32], "dtype": "float32", "affine": False, "eps": 1e-5},
]

NEEDS_NPU = '''
import torch
import torch_npu
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch_npu.npu_fast_gelu(x)

def get_inputs():
    return [torch.randn(8, 8).npu()]
'''

NEEDS_CUDA = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(8, 8).cuda()]
'''

NEVER_FITS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + 1

_ROWS = 8   # private, so not a size the policy may scale
WIDE = 12   # below the policy's floor: structural

def get_inputs():
    return [torch.rand(_ROWS * 4096, 4096, WIDE)]
'''


def test_published_kernelbench_shapes_are_scaled_to_the_cpu_budget(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "19_ReLU.py", RELU_PUBLISHED))
    assert task.published_sizes == {"batch_size": 4096, "dim": 393216}
    assert task.sizes["batch_size"] * task.sizes["dim"] * 4 * 2 <= max_bytes()
    assert "scaled down" in task.size_note and "393216" in task.size_note
    (x,) = build_inputs(task, seed=1)
    assert tuple(x.shape) == (task.sizes["batch_size"], task.sizes["dim"])
    (ref,) = reference_outputs(task, [x])
    assert torch.equal(ref, torch.relu(x))


def test_python_scalar_input_is_an_attr_and_reaches_the_reference(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "5_Matrix_scalar_multiplication.py", SCALAR_INPUT))
    assert [a.kind for a in task.forward_args] == ["tensor", "scalar"]
    assert task.attrs == {"s": 3.14} and len(task.inputs) == 1
    assert "float s" in c_parameters(task)
    (a,) = build_inputs(task, seed=2, distribution="normal")
    (ref,) = reference_outputs(task, [a])
    assert torch.allclose(ref, a * 3.14)


def test_init_inputs_of_any_kind_load(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "pool.py", ODD_INIT))
    assert task.attrs["kernel_0"] == 2 and task.attrs["kernel_1"] == 2 and task.attrs["scale"] == 0.5
    assert "mode" not in task.attrs and "unused" not in task.attrs
    (x,) = build_inputs(task)
    assert torch.allclose(reference_outputs(task, [x])[0], torch.nn.functional.max_pool2d(x, 2) * 0.5)


def test_model_parameters_are_kernel_arguments_seeded_like_kernelbench(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level2", "12_Gemm_Multiply_LeakyReLU.py", GEMM))
    names = [(p.name, p.dims, p.origin) for p in task.params]
    assert names == [("gemm_weight", ("out_features", "in_features"), "gemm.weight"),
                     ("gemm_bias", ("out_features",), "gemm.bias")]
    params = c_parameters(task)
    assert params[:3] == ["const float* restrict in0", "const float* restrict gemm_weight",
                          "const float* restrict gemm_bias"] and params[3] == "float* restrict out0"
    assert "the reference model's gemm.weight" in contract_text(task)
    w1, b1 = param_tensors(task, seed=1)
    w1_again, _ = param_tensors(task, seed=1)
    w2, _ = param_tensors(task, seed=2)
    assert torch.equal(w1, w1_again) and not torch.equal(w1, w2)
    (x,) = build_inputs(task, seed=3)
    (ref,) = reference_outputs(task, [x], seed=1)
    by_hand = torch.nn.functional.leaky_relu((x.double() @ w1.double().T + b1.double()) * 2.0, 0.1)
    assert torch.allclose(ref.double(), by_hand, atol=1e-5)
    (ref_given,) = reference_outputs(task, [x], params=[w2 * 0, b1 * 0 + 1])
    assert torch.allclose(ref_given, torch.full_like(ref_given, 2.0)), "explicit params are the ones used"


def test_convolution_weights_have_symbolic_dims_at_policy_sizes(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "63_conv_standard_2D.py", CONV))
    weight = next(p for p in task.params if p.origin == "conv2d.weight")
    assert weight.dims == ("out_channels", "in_channels", "kernel_size", "kernel_size")
    assert task.published_sizes["width"] == 1024 and task.sizes["width"] < 1024
    assert task.sizes["kernel_size"] == 3, "small structural ints are never scaled"
    (x,) = build_inputs(task)
    w, b = param_tensors(task, seed=0)
    (ref,) = reference_outputs(task, [x])
    assert torch.allclose(ref, torch.nn.functional.conv2d(x, w, b), atol=1e-4)


def test_input_groups_with_json_cases_none_and_half_precision(tmp_path: Path) -> None:
    folder = tmp_path / "normalization" / "layer_norm"
    write(folder, "layer_norm.py", LAYER_NORM_GROUPS)
    (folder / "layer_norm_cases.json").write_text(json.dumps(CASES))
    task = load_task(folder / "layer_norm.py", root=tmp_path)
    assert task.category == "normalization" and len(task.groups) == 3
    assert [g.name for g in task.groups] == ["fp16_small", "bf16_3d", "fp32_plain"]
    assert task.companion_files == [folder / "layer_norm_cases.json"]
    dtypes = []
    for g in task.group_tasks():
        inputs = build_inputs(g, seed=4)
        dtypes.append(inputs[0].dtype)
        (ref,) = reference_outputs(g, inputs)
        x = inputs[0].double()
        expect = torch.nn.functional.layer_norm(
            x, [x.shape[-1]], *(t.double() for t in inputs[1:]) if len(inputs) == 3 else (None, None),
            g.attrs["eps"])
        assert ref.dtype == inputs[0].dtype
        assert torch.allclose(ref.double(), expect.to(inputs[0].dtype).double(), atol=1e-2)
    assert dtypes == [torch.float16, torch.bfloat16, torch.float32]
    plain = task.group_task(2)
    assert [a.kind for a in plain.forward_args] == ["tensor", "list", "none", "none", "scalar"]
    assert "absent weight" in contract_text(plain) and len(plain.inputs) == 1
    assert c_parameters(task.group_task(0))[0] == "const uint16_t* restrict in0"  # fp16 as raw bits


def test_companion_files_travel_with_the_task_record(tmp_path: Path) -> None:
    folder = tmp_path / "src" / "layer_norm"
    write(folder, "layer_norm.py", LAYER_NORM_GROUPS)
    (folder / "layer_norm_cases.json").write_text(json.dumps(CASES))
    task = load_task(folder / "layer_norm.py")
    # What a sandboxed child does: copy the file and its companions to a private dir, rebuild the task.
    private = tmp_path / "child"
    private.mkdir()
    for f in [task.source_path, *task.companion_files]:
        shutil.copy(f, private / f.relative_to(task.task_dir))
    shutil.rmtree(folder)
    record = json.loads(json.dumps(task_to_json(task.group_task(1))))
    moved = task_from_json(record, source_path=private / "layer_norm.py")
    assert moved.companion_files == [private / "layer_norm_cases.json"]
    inputs = build_inputs(moved, seed=0)
    assert inputs[0].dtype == torch.bfloat16 and tuple(inputs[0].shape) == (2, 8, 128)


def test_device_packages_mean_needs_device_not_broken(tmp_path: Path) -> None:
    write(tmp_path / "level1", "fast_gelu.py", NEEDS_NPU)
    write(tmp_path / "level1", "double.py", NEEDS_CUDA)
    report = load_dir(tmp_path)
    kinds = {p.path.name: (p.kind, p.device) for p in report.problems}
    assert kinds["fast_gelu.py"][0] == "needs_device" and "npu" in kinds["fast_gelu.py"][1]
    assert kinds["double.py"] == ("needs_device", "cuda")


def test_directory_layouts_give_level_and_category(tmp_path: Path) -> None:
    write(tmp_path / "level2", "relu.py", RELU_PUBLISHED)
    write(tmp_path / "reference" / "activation", "my_op.py", RELU_PUBLISHED)
    write(tmp_path / "level3" / "fuse", "op.py", RELU_PUBLISHED)
    write(tmp_path / "level1", "relu.py", RELU_PUBLISHED)
    report = load_dir(tmp_path)
    got = {t.source_path.relative_to(tmp_path).as_posix(): (t.name, t.level, t.category)
           for t in report.tasks}
    assert got["level2/relu.py"] == ("relu_l2", 2, "activation"), "a clashing name gets its level"
    assert got["level1/relu.py"] == ("relu", 1, "activation")
    assert got["reference/activation/my_op.py"][1:] == (1, "activation")
    assert got["level3/fuse/op.py"][1:] == (3, "fuse")
    from sagekernel.cli import app

    result = CliRunner().invoke(app, ["tasks", "list", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    assert {"level": 3, "category": "fuse", "tasks": 1} in summary
    assert sum(row["tasks"] for row in summary) == 4


def test_a_task_the_policy_cannot_shrink_is_rejected_with_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="SAGE_TASK_MAX_BYTES") as info:
        load_task(write(tmp_path / "level1", "wide.py", NEVER_FITS))
    assert "Lower the sizes" in str(info.value)


def test_check_json_lists_every_file_with_status_or_reason(tmp_path: Path) -> None:
    write(tmp_path / "level1", "19_ReLU.py", RELU_PUBLISHED)
    write(tmp_path / "level1", "fast_gelu.py", NEEDS_NPU)
    write(tmp_path / "level1", "wide.py", NEVER_FITS)
    from sagekernel.cli import app

    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    by_name = {Path(f["path"]).name: f for f in data["files"]}
    assert by_name["19_ReLU.py"]["status"] == "loaded" and by_name["19_ReLU.py"]["published_sizes"]
    assert by_name["fast_gelu.py"]["status"] == "needs_device"
    assert by_name["wide.py"]["status"] == "rejected" and "Lower the sizes" in by_name["wide.py"]["reason"]
    assert data["counts"] == {"loaded": 1, "needs_device": 1, "rejected": 1}


def test_record_round_trip_keeps_every_field(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level2", "12_Gemm.py", GEMM))
    again = task_from_json(json.loads(json.dumps(task_to_json(task))))
    assert again == task


def test_paper_suites_say_their_operators_are_unknown_rather_than_guess(monkeypatch) -> None:
    from sagekernel.cli import app
    from sagekernel.tasks.suites import load_suite

    monkeypatch.delenv("SAGE_NPUKERNELBENCH", raising=False)
    with pytest.raises(TaskError, match="not its operator names"):
        load_suite("paper_xccl")
    # paper_eval's operators are known (tasks/npukb_subset.py); it needs an NPUKernelBench checkout
    with pytest.raises(TaskError, match="SAGE_NPUKERNELBENCH"):
        load_suite("paper_eval")
    result = CliRunner().invoke(app, ["tasks", "suites", "--json"])
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["paper_eval"]["size"] == 88 and rows["paper_eval"]["per_level"] == {"1": 20, "2": 50, "3": 18}
    assert rows["paper_eval"]["known"] is True
    assert rows["paper_xccl"]["size"] == 16 and rows["paper_xccl"]["known"] is False


SAGE_LINEAR = '''
import torch
import torch.nn as nn

B = 4
IN = 6
OUT = 5

SAGE_TASK = {
    "name": "linear", "level": 2, "category": "matmul",
    "inputs": {"x": ["B", "IN"]}, "outputs": {"out": ["B", "OUT"]},
    "sizes": {"B": 4, "IN": 6, "OUT": 5}, "variants": [{"IN": 9, "OUT": 3}],
}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(IN, OUT)

    def forward(self, x):
        return self.fc(x)

def get_inputs():
    return [torch.randn(B, IN)]
'''


def test_sage_task_files_with_parameters_declare_them_by_size(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, "linear.py", SAGE_LINEAR))
    assert [(p.name, p.dims) for p in task.params] == [("fc_weight", ("OUT", "IN")), ("fc_bias", ("OUT",))]
    w, b = param_tensors(task, {"IN": 9, "OUT": 3}, seed=7)
    assert tuple(w.shape) == (3, 9) and tuple(b.shape) == (3,)
    bad = SAGE_LINEAR.replace("OUT = 5", "OUT = 4").replace('"OUT": 5}', '"OUT": 4}')
    with pytest.raises(TaskError, match="more than one size"):
        load_task(write(tmp_path / "b", "linear.py", bad))


TUPLE_SHAPES = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Mean of a clamped product; shapes only agree while batch_size == input_shape[0]."""
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))

batch_size = 32768
input_shape = (32768,)

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]
'''


def test_size_tuples_scale_together_with_the_ints_they_must_equal(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "hinge.py", TUPLE_SHAPES))
    n = task.sizes["batch_size"]
    assert task.size_tuples == {"input_shape": (n,)} and n < 32768
    assert "input_shape=(32768,)" in task.size_note
    moved = task_from_json(json.loads(json.dumps(task_to_json(task))))
    assert moved.size_tuples == task.size_tuples
    p, t = build_inputs(moved, seed=5)
    assert tuple(p.shape) == (n, n) and tuple(t.shape) == (n,)
    (ref,) = reference_outputs(moved, [p, t])
    assert torch.allclose(ref.double(), torch.clamp(1 - p.double() * t.double(), min=0).mean())


def test_tasks_show_states_the_size_policy_and_the_sizes_used(tmp_path: Path) -> None:
    from sagekernel.cli import app

    write(tmp_path / "level1", "19_ReLU.py", RELU_PUBLISHED)
    result = CliRunner().invoke(app, ["tasks", "show", "relu", "--suite", str(tmp_path)],
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "size policy" in result.output and "published" in result.output
    assert "batch_size=4096, dim=393216" in result.output
    shown = json.loads(CliRunner().invoke(app, ["tasks", "show", "relu", "--suite", str(tmp_path),
                                                "--json"]).stdout)
    assert shown["published_sizes"] == {"batch_size": 4096, "dim": 393216}
    assert shown["sizes"]["dim"] < 393216 and "scaled down" in shown["size_note"]


DIAG_GROUPS = '''
import json
import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """Diagonal of a 2D tensor, offset given per case."""

    def forward(self, x, diagonal: int = 0):
        return torch.diagonal(x, offset=diagonal)


def get_input_groups():
    path = os.path.join(os.path.dirname(__file__), "3_Diag.json")
    with open(path, "r") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    groups = []
    for case in cases:
        x_info, offset = case["inputs"]
        groups.append([torch.randn(x_info["shape"], dtype=getattr(torch, x_info["dtype"])), offset["value"]])
    return groups


def get_init_inputs():
    return []
'''


def test_input_groups_from_json_lines_keep_per_group_scalars(tmp_path: Path) -> None:
    folder = tmp_path / "level1"
    write(folder, "3_Diag.py", DIAG_GROUPS)
    cases = [{"inputs": [{"shape": [5, 7], "dtype": "float32"}, {"value": 1}]},
             {"inputs": [{"shape": [6, 3], "dtype": "float16"}, {"value": -2}]}]
    (folder / "3_Diag.json").write_text("".join(json.dumps(c) + "\n" for c in cases))
    task = load_task(folder / "3_Diag.py")
    assert [g.attrs["diagonal"] for g in task.groups] == [1, -2]
    assert [a.kind for a in task.forward_args] == ["tensor", "scalar"]
    expected = ["const float* restrict in0", "float* restrict out0", "int64_t IN0_D0", "int64_t IN0_D1",
                "int64_t OUT0_D0", "int64_t diagonal"]
    assert c_parameters(task.group_task(0)) == expected
    assert c_parameters(task.group_task(1)) == [p.replace("float*", "uint16_t*") for p in expected]
    for g, offset in zip(task.group_tasks(), (1, -2), strict=True):
        (x,) = build_inputs(g, seed=3)
        (ref,) = reference_outputs(g, [x])
        assert torch.equal(ref, torch.diagonal(x, offset=offset))
