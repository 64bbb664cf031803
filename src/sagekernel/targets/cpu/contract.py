"""The C ABI contract of a task on the CPU target.

Every CPU kernel implements exactly one function:

    void sage_kernel(<inputs>, <outputs>, <sizes>, <attrs>);

- inputs: `const T* restrict name` for each input tensor, in the task's order;
- params: `const T* restrict name` for each of the reference Model's parameters and buffers
  (`Task.params`, e.g. `conv_weight`), in the task's order, initialised with the harness's seed;
- outputs: `T* restrict name` for each output tensor, in the task's order;
- sizes: `int64_t SYMBOL` for each size symbol, in the task's `sizes` order;
- attrs: `float name` (Python float) or `int64_t name` (Python int), in the task's order.

All tensors are dense, contiguous, row-major. Element types map as in C_TYPES; bool is one
byte (0/1) and float16/bfloat16 travel as their raw 16-bit patterns (uint16_t).
"""

from __future__ import annotations

from sagekernel.tasks.task import Task, TensorSpec

KERNEL_SYMBOL = "sage_kernel"

C_TYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "uint16_t",
    "bfloat16": "uint16_t",
    "int64": "int64_t",
    "int32": "int32_t",
    "int16": "int16_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "bool": "uint8_t",
}


def c_type(dtype: str) -> str:
    return C_TYPES[dtype]


def _shape_comment(spec: TensorSpec) -> str:
    return "[" + ", ".join(spec.dims) + "]" if spec.dims else "[] (one element)"


def c_parameters(task: Task) -> list[str]:
    """The parameter declarations of `sage_kernel`, in ABI order."""
    params = [f"const {c_type(t.dtype)}* restrict {t.name}" for t in task.inputs]
    params += [f"const {c_type(t.dtype)}* restrict {t.name}" for t in task.params]
    params += [f"{c_type(t.dtype)}* restrict {t.name}" for t in task.outputs]
    params += [f"int64_t {s}" for s in task.sizes]
    params += [f"{'float' if isinstance(v, float) else 'int64_t'} {k}" for k, v in task.attrs.items()]
    return params


def c_signature(task: Task) -> str:
    """The full prototype, e.g.
    `void sage_kernel(const float* restrict x, float* restrict out, int64_t N)`."""
    return f"void {KERNEL_SYMBOL}(" + ", ".join(c_parameters(task)) + ")"


def contract_text(task: Task) -> str:
    """The contract as shown to the model: prototype plus the layout of every tensor."""
    lines = ["#include <stdint.h>", "", c_signature(task) + ";", ""]
    for t in task.inputs:
        lines.append(f"// input  {t.name}: {t.dtype} {_shape_comment(t)}, contiguous row-major, read-only")
    for t in task.params:
        lines.append(f"// param  {t.name}: {t.dtype} {_shape_comment(t)}, the reference model's {t.origin}, "
                     "read-only")
    for a in task.forward_args:
        if a.kind == "none":
            lines.append(f"// absent {a.name}: the reference is called with None here; no parameter")
        elif a.kind == "string":
            lines.append(f"// string {a.name} = {a.value!r}: a string attribute of this input set; no "
                         "parameter, write the kernel for this value")
        elif a.kind == "tensors":
            lines.append(f"// list   {a.name}: {a.value} tensors, passed as consecutive inputs (one list "
                         "argument of the reference)")
    if task.groups:
        lines.append(f"// groups {len(task.groups)} input sets; this contract is for group "
                     f"{task.group_index or 0} ({task.groups[task.group_index or 0].name})")
    for t in task.outputs:
        lines.append(f"// output {t.name}: {t.dtype} {_shape_comment(t)}, contiguous row-major, "
                     "write every element")
    for s in task.sizes:
        lines.append(f"// size   {s}: runtime value; never assume the example value {task.sizes[s]}")
    for k, v in task.attrs.items():
        lines.append(f"// attr   {k}: scalar attribute (example value {v})")
    return "\n".join(lines)


def abi_kinds(task: Task) -> list[str]:
    """Argument kinds in ABI order, as the runtime's trampoline passes them: a pointer per input
    and parameter ("in") and output ("out"), int64 per size, float or int64 per attribute."""
    kinds = ["in"] * (len(task.inputs) + len(task.params)) + ["out"] * len(task.outputs)
    kinds += ["i64"] * len(task.sizes)
    return kinds + ["f32" if isinstance(v, float) else "i64" for v in task.attrs.values()]
