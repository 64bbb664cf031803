"""The tables behind the Triton lint: what host code may name, and the reason of every rule."""

from __future__ import annotations

import re

from sagekernel.targets.triton.interpreter_model import KERNEL_BUILTINS

#: The builtins a @triton.jit body may call: the runtime's own allow-list for interpreted kernels
#: (triton/interpreter_model.py), so the lint and the interpreter agree.
JIT_BUILTINS = frozenset(KERNEL_BUILTINS)

REASONS = {
    "syntax": "kernel.py does not parse",
    "no_model_new": "kernel.py must define class ModelNew(nn.Module) whose forward launches the kernels",
    "import": "only torch, torch.nn, triton, triton.language and math may be imported; other modules "
    "compute the operator for you or reach the OS, the harness or the reference",
    "torch_compute": "a torch operation computes on tensors outside the kernels; forward may only allocate "
    "(torch.empty*, torch.zeros*), take views and launch @triton.jit kernels",
    "functional": "torch.nn.functional (under any name) computes the operator itself; write it as a kernel",
    "torch_namespace": "this torch namespace is not allowed in host code (streams, devices, ops, autograd, "
    "compilation and internals escape the kernel contract or the timer)",
    "triton_host_api": "only triton.jit, autotune, heuristics, Config, cdiv and next_power_of_2 may be used "
    "on the host (the runtime, driver and testing APIs touch the device or the clock)",
    "tensor_method": "a tensor method that computes (or an unknown method) is called outside the kernels; "
    "forward may only call view and shape methods",
    "tensor_math": "arithmetic, comparisons or indexing on tensors outside the kernels compute the operator "
    "in torch; only sizes may be computed on the host",
    "tensor_write": "an assignment into a tensor (or a container) outside the kernels computes results on "
    "the host or keeps them between calls",
    "host_readback": "reading device data back to the host (.item(), .tolist(), .cpu(), .numpy()) stalls "
    "the device and lets the host compute; the kernels must produce the outputs",
    "reference": "the reference Model must not be used, subclassed or called: ModelNew computes the "
    "operator with its own kernels",
    "class_base": "classes may only subclass nn.Module (no tensor subclasses, autograd Functions or the "
    "reference Model)",
    "try_except": "try/except around the compute path hides a failing kernel behind a fallback; "
    "kernels must run or fail visibly",
    "builtin": "dynamic lookup, evaluation, I/O and introspection builtins (getattr, eval, exec, "
    "__import__, open, globals, vars, id, print, ...) are not allowed: they reach around the "
    "static rules or outside the module",
    "dunder": "double-underscore attributes (__dict__, __class__, __globals__, ...) reach around the "
    "static rules; only super().__init__() is allowed",
    "module_alias": "modules and their attributes must be used by their import names, not rebound "
    "(an alias hides which function is called)",
    "monkey_patch": "assigning to or deleting attributes of modules or other objects (monkey-patching) "
    "changes what the harness or torch does",
    "module_state": "state that outlives a call (module-level containers, self.x set outside __init__, "
    "global) can carry results between calls",
    "cached_output": "forward returns an attribute of the module: a result kept from an earlier call is "
    "not computed for these inputs",
    "context_manager": "only `with torch.no_grad():` is allowed in host code (streams, devices, graphs and "
    "profilers escape the timer)",
    "nested_def": "functions and classes must be defined at module level (a nested def hides host code "
    "from the rules)",
    "decorator": "only @triton.jit, @triton.autotune, @triton.heuristics (kernels) and @staticmethod "
    "decorators are allowed (caching decorators keep results between calls)",
    "module_code": "module-level code may only import, define functions and classes and bind constants",
    "async": "async functions are not allowed: their work escapes the timer",
    "filesystem": "file paths in a kernel module mean it reads or writes files, which it may not",
    "device_clock": "a kernel must not read a device clock or timer; timing belongs to the harness",
    "torch_in_kernel": "torch cannot be used inside a @triton.jit kernel; use triton.language",
    "jit_body": "a @triton.jit body may only use triton.language, math, its own parameters and locals, "
    "the module's kernels and constants, and a few builtins (range, min, max, len, ...): other Python "
    "is never compiled for a GPU but runs on the interpreter, so it would be judged on code a GPU "
    "never runs",
}

#: Modules (and parents of allowed names) a candidate may import.
ALLOWED_MODULES = ("torch", "torch.nn", "triton", "triton.language", "math", "typing", "__future__")
#: `from X import Y` where Y is a module.
SUBMODULES = frozenset({"torch.nn", "triton.language"})


def module_allowed(name: str) -> bool:
    return name in ALLOWED_MODULES or name.startswith("triton.language.")


#: torch names host code may use: allocation, dtypes, types, no_grad.
TORCH_ALLOCATORS = frozenset({"empty", "empty_like", "empty_strided", "zeros", "zeros_like"})
TORCH_DTYPES = frozenset(
    {
        "float32",
        "float",
        "float64",
        "double",
        "float16",
        "half",
        "bfloat16",
        "int64",
        "long",
        "int32",
        "int",
        "int16",
        "short",
        "int8",
        "uint8",
        "bool",
        "float8_e4m3fn",
        "float8_e5m2",
        "dtype",
    }
)
TORCH_NAMES = (
    TORCH_ALLOCATORS
    | TORCH_DTYPES
    | frozenset(
        {
            "Tensor",
            "Size",
            "device",
            "no_grad",
            "finfo",
            "iinfo",
            "is_tensor",
            "is_floating_point",
            "numel",
            "nn",
        }
    )
)
NN_NAMES = frozenset({"Module", "Parameter"})
TRITON_NAMES = frozenset(
    {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language", "constexpr"}
)
TORCH_NAMESPACES = frozenset(
    {
        "cuda",
        "npu",
        "mps",
        "xpu",
        "backends",
        "ops",
        "library",
        "_C",
        "_ops",
        "utils",
        "jit",
        "compile",
        "fx",
        "autograd",
        "distributed",
        "multiprocessing",
        "cpu",
        "_dynamo",
        "_inductor",
        "profiler",
        "func",
        "random",
        "hub",
        "package",
        "overrides",
        "storage",
        "accelerator",
        "Stream",
        "Event",
        "Generator",
        "set_default_dtype",
        "set_num_threads",
        "manual_seed",
        "use_deterministic_algorithms",
        "set_float32_matmul_precision",
        "load",
        "save",
        "from_numpy",
        "frombuffer",
    }
)


def path_allowed(path: list[str]) -> bool:
    """Whether host code may name this dotted path (torch.* and triton.* only are judged here)."""
    head = path[0]
    if head == "torch":
        if len(path) == 1:
            return True
        if path[1] == "nn":
            return len(path) == 2 or (len(path) == 3 and path[2] in NN_NAMES)
        if path[1] == "Tensor":
            return len(path) == 2  # torch.Tensor.softmax(x) is a compute call
        return len(path) == 2 and path[1] in TORCH_NAMES
    if head == "triton":
        if len(path) == 1:
            return True
        if path[1] == "language":
            return True
        return len(path) == 2 and path[1] in TRITON_NAMES
    return True


def rule_for_path(path: list[str]) -> str:
    if path[0] == "triton":
        return "triton_host_api"
    if len(path) > 2 and path[1] == "nn" and path[2] == "functional":
        return "functional"
    if len(path) > 1 and path[1] in TORCH_NAMESPACES:
        return "torch_namespace"
    return "torch_compute"


#: Tensor methods host code may call: views, shapes, layout, allocation of the same kind.
VIEW_METHODS = frozenset(
    {
        "view",
        "reshape",
        "contiguous",
        "flatten",
        "unflatten",
        "unsqueeze",
        "squeeze",
        "permute",
        "transpose",
        "t",
        "expand",
        "expand_as",
        "view_as",
        "reshape_as",
        "narrow",
        "select",
        "movedim",
        "as_strided",
        "split",
        "chunk",
        "unbind",
        "detach",
    }
)
SHAPE_ATTRS = frozenset(
    {
        "shape",
        "size",
        "stride",
        "numel",
        "dim",
        "ndim",
        "ndimension",
        "element_size",
        "dtype",
        "device",
        "is_contiguous",
        "storage_offset",
        "data_ptr",
        "nelement",
        "is_cuda",
        "itemsize",
        "nbytes",
    }
)
ALLOWED_METHODS = (
    VIEW_METHODS
    | SHAPE_ATTRS
    | frozenset(
        {
            "new_empty",
            "new_zeros",
            "zero_",
            "__init__",
            # plain Python values in host code (grids, config dicts)
            "get",
            "items",
            "keys",
            "values",
            "index",
            "count",
            "bit_length",
            "format",
            "join",
            "startswith",
            "register_buffer",
            "parameters",
            "eval",
        }
    )
)
READBACK_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
MUTATING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "update",
        "setdefault",
        "clear",
        "add",
        "remove",
        "discard",
        "__setitem__",
    }
)
FORBIDDEN_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs", "SAGE_TASK"})
FORBIDDEN_BUILTINS = frozenset(
    {
        "getattr",
        "setattr",
        "delattr",
        "hasattr",
        "eval",
        "exec",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "dir",
        "open",
        "input",
        "print",
        "breakpoint",
        "memoryview",
        "id",
        "hash",
        "type",
        "object",
        "classmethod",
        "exit",
        "quit",
        "help",
        "__builtins__",
        "__loader__",
        "__spec__",
    }
)
#: The Python a @triton.jit body may contain (an allow-list: anything else is `jit_body`).
JIT_NODES = frozenset(
    {
        "arguments",
        "arg",
        "Assign",
        "AugAssign",
        "AnnAssign",
        "For",
        "While",
        "If",
        "IfExp",
        "Expr",
        "Return",
        "Pass",
        "Break",
        "Continue",
        "Assert",
        "BinOp",
        "UnaryOp",
        "BoolOp",
        "Compare",
        "Call",
        "keyword",
        "Attribute",
        "Subscript",
        "Slice",
        "Name",
        "Constant",
        "Tuple",
        "List",
        "Starred",
        "JoinedStr",
        "FormattedValue",
        "Load",
        "Store",
        "Add",
        "Sub",
        "Mult",
        "Div",
        "FloorDiv",
        "Mod",
        "Pow",
        "LShift",
        "RShift",
        "BitOr",
        "BitXor",
        "BitAnd",
        "MatMult",
        "USub",
        "UAdd",
        "Not",
        "Invert",
        "And",
        "Or",
        "Eq",
        "NotEq",
        "Lt",
        "LtE",
        "Gt",
        "GtE",
        "Is",
        "IsNot",
        "In",
        "NotIn",
    }
)
#: Modules a @triton.jit body may reach (by their import path).
JIT_MODULES = ("triton.language", "math")
#: Names of `triton` itself a @triton.jit body may use.
JIT_TRITON_NAMES = frozenset({"language", "cdiv", "next_power_of_2", "jit", "constexpr"})
DEVICE_CLOCKS = frozenset({"globaltimer", "clock", "clock64", "smid", "globaltimer_lo", "globaltimer_hi"})
PATH_RX = re.compile(r"\s*(?:/(?:proc|dev|sys|tmp|etc|home|root|var|usr|box|work|run)\b|\.\.?/)")
