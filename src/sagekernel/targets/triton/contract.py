"""The Triton contract of a task (KernelBench convention, as the field uses it).

The candidate is one Python module, `kernel.py`, holding `@triton.jit` kernels and
`class ModelNew(nn.Module)`: the same constructor arguments as the task's `Model`
(`get_init_inputs()`), and a `forward` taking the task's input tensors in order and returning its
outputs (one tensor, or a tuple in the task's output order). `forward` and its helpers may only
allocate (`torch.empty*`), take views and shapes, do integer arithmetic on sizes and launch the
module's kernels; the operator itself is computed by the kernels (lint.py enforces this).
"""

from __future__ import annotations

from sagekernel.tasks.task import Task, TensorSpec

KERNEL_FILE = "kernel.py"

TRITON_DTYPES = {
    "float32": "tl.float32",
    "float64": "tl.float64",
    "float16": "tl.float16",
    "bfloat16": "tl.bfloat16",
    "int64": "tl.int64",
    "int32": "tl.int32",
    "int16": "tl.int16",
    "int8": "tl.int8",
    "uint8": "tl.uint8",
    "bool": "tl.int1",
}


def _shape(spec: TensorSpec) -> str:
    return "[" + ", ".join(spec.dims) + "]" if spec.dims else "[] (0-dim)"


def init_signature(task: Task) -> str:
    """The constructor's parameters: the task's init values, named as the reference names them (read
    in the sandboxed task child, tasks/task_child.py: building a prompt never imports a task file here)."""
    from sagekernel.tasks.reference import init_parameters
    from sagekernel.tasks.task_child import confined

    with confined():
        return ", ".join(init_parameters(task))


def contract_text(task: Task) -> str:
    init = init_signature(task)
    ins = ", ".join(f"{t.name}: torch.Tensor" for t in task.inputs)
    outs = ", ".join(t.name for t in task.outputs)
    lines = [
        "# kernel.py -- one Python module (KernelBench convention)",
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
        "",
        "@triton.jit",
        "def my_kernel(...):  # one or more kernels; all computation happens here",
        "    ...",
        "",
        "class ModelNew(nn.Module):",
        f"    def __init__(self{', ' + init if init else ''}):  # same arguments as the task's Model",
        "        super().__init__()",
        f"    def forward(self{', ' + ins if ins else ''}):",
        "        # allocate outputs (torch.empty / empty_like), compute the grid, launch kernels",
        f"        return {outs}",
        "",
    ]
    for t in task.inputs:
        lines.append(
            f"# input  {t.name}: {t.dtype} {_shape(t)} ({TRITON_DTYPES[t.dtype]}), contiguous, read-only"
        )
    for t in task.outputs:
        lines.append(
            f"# output {t.name}: {t.dtype} {_shape(t)} ({TRITON_DTYPES[t.dtype]}), returned "
            "from forward, new tensor"
        )
    for s, example in task.sizes.items():
        lines.append(f"# size   {s}: read it from the tensors' shapes; never assume the example {example}")
    for k, v in task.attrs.items():
        lines.append(f"# attr   {k}: passed to __init__ (example value {v})")
    lines += [
        "# forward may only allocate, take views/shapes and launch kernels: no torch compute ops,",
        "# no torch.nn.functional, no tensor math methods, no try/except, no threads or streams.",
    ]
    return "\n".join(lines)
