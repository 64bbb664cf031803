"""How the Triton runtime makes the interpreter model the GPU, or refuse what it cannot model.

Runs inside the sandbox (imported by runtime.py from the staged runtime folder; no sagekernel
import). The interpreter (TRITON_INTERPRET=1) runs a kernel's body as ordinary Python over numpy,
so three things differ from a compiled kernel, and each is handled here before the candidate
module is loaded:

- precision: `tl.dot` on float32 operands defaults to TF32 on NVIDIA GPUs (10 mantissa bits per
  operand) while the interpreter multiplies in full float32. `create_dot` rounds float32 operands
  to TF32 whenever the requested input precision is TF32 (the GPU default), so an emulated
  "correct" never credits float32 precision a GPU run would not have; what the emulator has no
  model for (fp8 products, which sm_90 accumulates imprecisely by default) is refused, not run;
- builtins: the body is Python, so a branch the compiler would resolve statically (on `hasattr`,
  `getattr`, ...) runs here. Every kernel body is re-executed with an allow-list of builtins
  (`KERNEL_BUILTINS`), and rewritten eagerly at load, before the runtime stops opening files;
- autotune: several configs benchmark through a GPU driver; every Autotuner keeps its first.
"""

from __future__ import annotations

import builtins
from typing import Any

#: The builtins a kernel body may use on the interpreter (a compiled kernel has none of the rest).
KERNEL_BUILTINS = (
    "range",
    "len",
    "min",
    "max",
    "abs",
    "int",
    "float",
    "bool",
    "tuple",
    "list",
    "zip",
    "enumerate",
    "isinstance",
    "slice",
    "print",
    "AssertionError",
    "ValueError",
    "TypeError",
    "IndexError",
    "RuntimeError",
    "StopIteration",
)


def restricted_builtins() -> dict[str, Any]:
    return {name: getattr(builtins, name) for name in KERNEL_BUILTINS}


def model_tf32(notes: list[str]) -> None:
    """Round float32 `tl.dot` operands to TF32 when TF32 is the requested input precision."""
    import numpy as np
    from triton.runtime import interpreter

    builder_cls = type(interpreter.interpreter_builder)
    original = builder_cls.create_dot
    round_tf32 = interpreter._round_f32_to_tf32
    tf32 = interpreter._ir.INPUT_PRECISION.TF32
    used: list[bool] = []

    def create_dot(
        self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any
    ) -> Any:
        fp8 = any(t.dtype.primitive_bitwidth == 8 and t.dtype.is_floating() for t in (a, b))
        if max_num_imprecise_acc or fp8:
            raise RuntimeError(
                "tl.dot on fp8 operands is not modelled by the interpreter (on sm_90 Triton "
                "accumulates fp8 products with limited precision by default, max_num_imprecise_acc): "
                "its verdict would credit precision a GPU does not give; judge this kernel on a GPU"
            )
        if input_precision == tf32:
            if a.data.dtype == np.float32:
                a = interpreter.TensorHandle(round_tf32(a.data), a.dtype.scalar)
            if b.data.dtype == np.float32:
                b = interpreter.TensorHandle(round_tf32(b.data), b.dtype.scalar)
            if not used:
                used.append(True)
                notes.append("tl.dot in TF32 (the GPU default for float32): operands rounded to TF32")
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder_cls.create_dot = create_dot


def _kernel_value(value: Any) -> bool:
    """Whether a module-level value may be seen from a kernel body: Triton and math modules,
    kernels, constants and Triton dtypes -- not torch, not classes, not host functions."""
    import types

    import triton
    import triton.language as tl
    from triton.runtime.jit import KernelInterface

    if isinstance(value, types.ModuleType):
        name = value.__name__
        return name == "math" or name == "triton" or name.startswith("triton.language")
    if isinstance(value, (KernelInterface, tl.constexpr, tl.dtype)):
        return True
    if isinstance(value, (bool, int, float, str, type(None))):
        return True
    if isinstance(value, tuple):
        return all(_kernel_value(v) for v in value)
    return value is triton.cdiv or value is triton.next_power_of_2


def kernel_scope(module_globals: dict[str, Any]) -> dict[str, Any]:
    scope = {k: v for k, v in module_globals.items() if not k.startswith("__") and _kernel_value(v)}
    scope["__name__"] = module_globals.get("__name__", "kernel")
    return scope


def restrict_kernel_builtins(module_name: str) -> None:
    """Every rewritten kernel body of the module `module_name` (the candidate's) runs in a filtered
    copy of its module's globals (`kernel_scope`) whose `__builtins__` holds `KERNEL_BUILTINS`
    only; the interpreter otherwise executes it in the module itself. Triton's own library
    functions keep their scope."""
    from triton.runtime import interpreter

    names = restricted_builtins()
    original = interpreter.FunctionRewriter._compile_and_exec

    def compile_and_exec(self: Any, transformed_ast: Any) -> Any:
        if self.fn.__globals__.get("__name__") != module_name:
            return original(self, transformed_ast)
        code = compile(transformed_ast, filename=self.filename, mode="exec")
        scope = kernel_scope(self.fn.__globals__)
        for key, value in vars(interpreter).items():
            scope.setdefault(key, value)
        scope["__builtins__"] = names
        local: dict[str, Any] = {**self.kwargs}
        exec(code, scope, local)
        return local[self.fn.__name__]

    interpreter.FunctionRewriter._compile_and_exec = compile_and_exec


def force_single_config(notes: list[str]) -> None:
    from triton.runtime import autotuner

    original = autotuner.Autotuner.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if len(self.configs) > 1:
            notes.append(
                f"autotune on the interpreter: kept the first of {len(self.configs)} configs "
                f"({self.configs[0]})"
            )
            self.configs = self.configs[:1]

    autotuner.Autotuner.__init__ = init


def rewrite_kernels(module: Any) -> int:
    """Rewrite every kernel the module defines now (the interpreter would read their source on
    first launch, after the runtime has stopped opening files). Returns how many."""
    from triton.runtime.interpreter import InterpretedFunction

    count = 0
    for value in list(vars(module).values()):
        fn = value
        for _ in range(8):  # Autotuner / Heuristics wrap the function in `.fn`
            if isinstance(fn, InterpretedFunction):
                fn.rewrite()
                count += 1
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
    return count


def _warm_interpreter() -> None:
    """Launch a kernel of the runtime's own once: the interpreter imports modules lazily on its
    first launches, which must happen before the runtime stops opening files."""
    import torch
    from warm_kernel import warm_launch

    warm_launch(torch.randn(64), torch.randn(16, 16))


def prepare(notes: list[str], module_name: str) -> None:
    """Everything above, before the candidate's module `module_name` is imported."""
    force_single_config(notes)
    _warm_interpreter()
    model_tf32(notes)
    restrict_kernel_builtins(module_name)
