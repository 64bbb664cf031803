"""The CUDA contract of a task: one `kernel.cu` with an extern "C" host launcher.

    extern "C" int sage_launch(<inputs>, <outputs>, <sizes>, <attrs>, cudaStream_t stream);

- inputs: `const T* __restrict__ name` (device pointers), in the task's order;
- outputs: `T* __restrict__ name` (device pointers, pre-filled by the harness), in order;
- sizes: `int64_t SYMBOL`, in the task's `sizes` order; attrs: `float` or `int64_t`;
- stream: the stream to launch on (every launch goes there; no other stream may be created);
- returns 0 on success, else a `cudaError_t` value (e.g. `return (int)cudaGetLastError();`).

The argument order is the CPU target's (targets/cpu/contract.py) plus the stream, so the wire's
`args` are the same list. nvcc compiles it for sm_90 into an object (its symbols are checked),
then a shared library linked with the static CUDA runtime, which the runtime loads with ctypes and
calls with the `data_ptr()`s of torch tensors on the device.
"""

from __future__ import annotations

from sagekernel.tasks.task import Task, TensorSpec

KERNEL_FILE = "kernel.cu"
LAUNCH_SYMBOL = "sage_launch"
CUDA_TYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int64": "int64_t",
    "int32": "int32_t",
    "int16": "int16_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "bool": "bool",
}


def _shape(spec: TensorSpec) -> str:
    return "[" + ", ".join(spec.dims) + "]" if spec.dims else "[] (one element)"


def parameters(task: Task) -> list[str]:
    params = [f"const {CUDA_TYPES[t.dtype]}* __restrict__ {t.name}" for t in task.inputs]
    params += [f"{CUDA_TYPES[t.dtype]}* __restrict__ {t.name}" for t in task.outputs]
    params += [f"int64_t {s}" for s in task.sizes]
    params += [f"{'float' if isinstance(v, float) else 'int64_t'} {k}" for k, v in task.attrs.items()]
    return [*params, "cudaStream_t stream"]


def signature(task: Task) -> str:
    return f'extern "C" int {LAUNCH_SYMBOL}(' + ", ".join(parameters(task)) + ")"


def contract_text(task: Task) -> str:
    dtypes = {t.dtype for t in task.inputs + task.outputs}
    lines = ["#include <cuda_runtime.h>", "#include <stdint.h>"]
    if "float16" in dtypes:
        lines.append("#include <cuda_fp16.h>")
    if "bfloat16" in dtypes:
        lines.append("#include <cuda_bf16.h>")
    lines += ["", signature(task) + ";", ""]
    for t in task.inputs:
        lines.append(
            f"// input  {t.name}: {t.dtype} {_shape(t)}, device memory, contiguous row-major, read-only"
        )
    for t in task.outputs:
        lines.append(
            f"// output {t.name}: {t.dtype} {_shape(t)}, device memory, contiguous row-major, write "
            "every element"
        )
    for s, example in task.sizes.items():
        lines.append(f"// size   {s}: runtime value; never assume the example value {example}")
    for k, v in task.attrs.items():
        lines.append(f"// attr   {k}: scalar attribute (example value {v})")
    lines += [
        "// stream: launch every kernel on it (kernel<<<grid, block, smem, stream>>>);",
        "//         create no other stream",
        "// return (int)cudaGetLastError(); -- 0 means success",
        "// compiled with nvcc -O3 -std=c++17 -arch=sm_90;",
        "// no cuBLAS/cuDNN/CUTLASS/Thrust/CUB, no host threads",
    ]
    return "\n".join(lines)
