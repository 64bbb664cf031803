"""Null kernels for a task, in C: they honour the contract but do no real work, so every one of
them must FAIL the harness on a well-posed task (eval_integrity.md §2 item 7)."""

from __future__ import annotations

from sagekernel.targets.cpu.contract import c_signature, c_type
from sagekernel.tasks.task import Task, TensorSpec

#: The bit pattern of 1.0 for the 16-bit float types (carried as uint16_t).
_ONE_BITS = {"float16": "0x3C00", "bfloat16": "0x3F80"}


def _numel(spec: TensorSpec) -> str:
    return " * ".join(spec.dims) if spec.dims else "1"


def _fill(spec: TensorSpec, value: str) -> str:
    n = _numel(spec)
    return f"    for (int64_t i = 0; i < (int64_t)({n}); ++i) {spec.name}[i] = ({c_type(spec.dtype)}){value};"


def canary_sources(task: Task) -> dict[str, str]:
    """name -> C source: "zeros", "constant" (1.0 everywhere), "input_copy" (bytes of the first input)."""
    head = "#include <stdint.h>\n#include <string.h>\n\n" + c_signature(task) + " {\n"
    zeros = head + "\n".join(_fill(o, "0") for o in task.outputs) + "\n}\n"
    constant = head + "\n".join(_fill(o, _ONE_BITS.get(o.dtype, "1")) for o in task.outputs) + "\n}\n"
    lines = []
    first = task.inputs[0] if task.inputs else None
    for o in task.outputs:
        out_bytes = f"(size_t)({_numel(o)}) * sizeof({c_type(o.dtype)})"
        if first is None:
            lines.append(f"    memset({o.name}, 0, {out_bytes});")
            continue
        in_bytes = f"(size_t)({_numel(first)}) * sizeof({c_type(first.dtype)})"
        lines.append(
            f"    {{ size_t sage_nin = {in_bytes}, sage_nout = {out_bytes};\n"
            f"      memcpy({o.name}, {first.name}, sage_nin < sage_nout ? sage_nin : sage_nout);\n"
            f"      if (sage_nout > sage_nin) memset((char*){o.name} + sage_nin, 0, sage_nout - sage_nin); }}"
        )
    copy = head + "\n".join(lines) + "\n}\n"
    return {"zeros": zeros, "constant": constant, "input_copy": copy}
