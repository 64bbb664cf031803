"""A small NPUKernelBench-layout repository written into a temp dir (no benchmark files copied).

Operators, in the benchmark's layout (tasks/level<N>/<Category>/<Op>/...):

- level1/Math/SqrtX: torch_npu + transfer_to_npu + kernel_gen_ops imports (as every published
  module.py), one fp32 and one fp16 case; no custom rule (the root's tolerances apply).
- level1/Comparison/EqualX: int8 and float cases drawn with ``torch.randn`` (as the benchmark's
  Equal does), int32 output.
- level2/Activation/ScaledGelu: init arguments (a float, a string mode, a dtype), a
  ``custom_check_precision`` built on ``framework.utils.check_precision``.
- level2/Foreach/ForeachAddScalarX: a list of tensors plus a scalar tensor.
- level2/Activation/SquareGrad: a gradient operator (torch.autograd.grad of an input built with
  requires_grad=True), as the benchmark's *Grad operators are.
- level1/Math/Broken: prepare_inputs.py lacks get_inputs (must be rejected, naming it).

Every operator has ``answer/0/...`` files carrying `ANSWER_MARKER`; the loader must never read them.
"""

from __future__ import annotations

from pathlib import Path

ANSWER_MARKER = "EXPERT_ANSWER_7f3a9c_DO_NOT_LEAK"

BASE_CONFIG = """run_dir: "runs"
n_case: 1
eval:
  verbose: True
  num_perf_trials: 100
  num_correct_trials: 1
  max_rel_error: 0.002
  max_abs_error: 0.003
"""

HEADER = '''import torch
import torch_npu
from torch_npu.contrib import transfer_to_npu
import torch.nn as nn
import kernel_gen_ops
'''

SQRT_MODULE = HEADER + '''

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        return kernel_gen_ops.sqrt_x(x)
'''

SQRT_INPUTS = '''import torch


def get_inputs(param, device=None):
    shape = eval(param.get('shape', '[1]'))
    dtype = getattr(torch, param.get('dtype', 'float16'))
    return [torch.rand(shape, device=device, dtype=dtype) + 0.1]


def get_init_inputs(param, device=None):
    return []
'''

EQUAL_MODULE = HEADER + '''

class Model(nn.Module):
    def forward(self, input1, input2):
        return torch.eq(input1, input2).to(dtype=torch.int)


class ModelNew(nn.Module):
    def forward(self, input1, input2):
        return kernel_gen_ops.equal_x(input1, input2).to(dtype=torch.int)
'''

EQUAL_INPUTS = '''import torch


def get_inputs(param, device=None):
    shape = eval(param.get('shape', '[1]'))
    dtype = getattr(torch, param.get('dtype', 'float16'))
    a = torch.randn(shape, device=device, dtype=dtype)
    return (a, a.clone() if param['same'] else torch.randn(shape, device=device, dtype=dtype))


def get_init_inputs(param, device=None):
    return []
'''

GELU_MODULE = HEADER + '''

class Model(nn.Module):
    def __init__(self, scale, mode, out_dtype):
        super(Model, self).__init__()
        self.scale, self.mode, self.out_dtype = scale, mode, out_dtype

    def forward(self, x):
        y = torch.nn.functional.gelu(x.float(), approximate=self.mode) * self.scale
        return y.to(self.out_dtype)


class ModelNew(nn.Module):
    def __init__(self, scale, mode, out_dtype):
        super(ModelNew, self).__init__()
        self.args = (scale, mode, out_dtype)

    def forward(self, x):
        return kernel_gen_ops.scaled_gelu(x, *self.args)
'''

GELU_INPUTS = '''import torch
from framework.utils import check_precision


def get_inputs(param, device=None):
    rows, cols = int(param['rows']), int(param['cols'])
    return [torch.randn(rows, cols, device=device, dtype=torch.float32)]


def get_init_inputs(param, device=None):
    return [float(param['scale']), param['mode'], torch.float16]


def custom_check_precision(param, outputs, outputs_new):
    return check_precision(outputs.float(), outputs_new.float(), max_abs_error=0.01, max_rel_error=0.01)
'''

FOREACH_MODULE = HEADER + '''
from typing import List


class Model(nn.Module):
    def forward(self, x: List[torch.Tensor], scalar: torch.Tensor) -> List[torch.Tensor]:
        return [t + scalar for t in x]
'''

FOREACH_INPUTS = '''import torch


def get_inputs(param, device=None):
    shapes = eval(param.get('input_shape', '[[1]]'))
    xs = [torch.randn(s, device=device, dtype=torch.float32) for s in shapes]
    return xs, torch.tensor(float(param['scalar']), dtype=torch.float32)


def get_init_inputs(param, device=None):
    return []
'''

GRAD_MODULE = HEADER + '''

class Model(nn.Module):
    def forward(self, x, dy):
        with torch.enable_grad():
            y = x * x
            return torch.autograd.grad(outputs=y, inputs=x, grad_outputs=dy)[0]
'''

GRAD_INPUTS = '''import torch


def get_inputs(param, device=None):
    shape = eval(param['shape'])
    x = torch.rand(shape, device=device, dtype=torch.float32, requires_grad=True)
    return [x, torch.randn(shape, device=device, dtype=torch.float32)]


def get_init_inputs(param, device=None):
    return []
'''

BROKEN_INPUTS = '''import torch


def get_init_inputs(param, device=None):
    return []
'''

OPERATORS = {
    "level1/Math/SqrtX": ("sqrt_x", SQRT_MODULE, SQRT_INPUTS,
                          "case_id;shape;dtype\n0;[4, 8];float32\n1;[3, 5, 2];float16\n"),
    "level1/Comparison/EqualX": ("equal_x", EQUAL_MODULE, EQUAL_INPUTS,
                                 "case_id;shape;dtype;same\n0;[4, 3];float32;True\n"
                                 "1;[16, 8];int8;False\n2;[2, 5];float16;False\n"),
    "level2/Activation/ScaledGelu": ("scaled_gelu", GELU_MODULE, GELU_INPUTS,
                                     "case_id;rows;cols;scale;mode\n0;4;16;1.5;none\n1;2;8;0.5;tanh\n"),
    "level2/Foreach/ForeachAddScalarX": ("foreach_add_scalar_x", FOREACH_MODULE, FOREACH_INPUTS,
                                         "case_id;input_shape;scalar\n0;[[4, 3], [5]];2.5\n"
                                         "1;[[2, 2], [3, 1], [6]];-1.0\n"),
    "level2/Activation/SquareGrad": ("square_grad", GRAD_MODULE, GRAD_INPUTS, "case_id;shape\n0;[3, 4]\n"),
    "level1/Math/Broken": ("broken", SQRT_MODULE, BROKEN_INPUTS, "case_id;shape\n0;[2]\n"),
}


def write_benchmark(root: Path, operators: dict[str, tuple[str, str, str, str]] | None = None) -> Path:
    """Write the repository at `root` (returns it)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "base_config.yaml").write_text(BASE_CONFIG, encoding="utf-8")
    (root / "framework").mkdir(exist_ok=True)
    (root / "framework" / "utils.py").write_text(
        "raise RuntimeError('the real framework is never imported')\n", encoding="utf-8")
    for rel, (op, module, inputs, cases) in (operators or OPERATORS).items():
        folder = root / "tasks" / rel
        name = rel.rsplit("/", 1)[-1]
        (folder / "validation").mkdir(parents=True, exist_ok=True)
        (folder / "validation" / "module.py").write_text(module, encoding="utf-8")
        (folder / "validation" / "prepare_inputs.py").write_text(inputs, encoding="utf-8")
        (folder / "validation" / "test_cases.csv").write_text(cases, encoding="utf-8")
        (folder / "validation" / "pybind.cpp").write_text(f"// EXEC_NPU_CMD(aclnn{name}, ...)\n",
                                                          encoding="utf-8")
        (folder / "api_desc.md").write_text(
            f"# {name}\n\nComputes {op} elementwise.\n\n## Interface\n\n`kernel_gen_ops.{op}(x)`\n",
            encoding="utf-8")
        for sub in ("op_host", "op_kernel"):
            (folder / "question" / sub).mkdir(parents=True, exist_ok=True)
            (folder / "question" / sub / f"{op}.cpp").write_text(
                f"// skeleton of {op} ({sub}): complete me\n", encoding="utf-8")
            (folder / "answer" / "0" / sub).mkdir(parents=True, exist_ok=True)
            (folder / "answer" / "0" / sub / f"{op}.cpp").write_text(
                f"// {ANSWER_MARKER}: expert {op} ({sub})\n", encoding="utf-8")
        (folder / "answer" / "0" / "op_host" / f"{op}_tiling.h").write_text(f"// {ANSWER_MARKER}\n",
                                                                           encoding="utf-8")
    return root
