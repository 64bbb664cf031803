"""The runtime's binding of an NPUKernelBench operator: the skeleton's OpDef, not the task's names.

For a benchmark operator msOpGen generates the aclnn API from the skeleton's OpDef
(opdef.parse_opdef -> skeleton.op_json), so the binding calls
``aclnn<Op>GetWorkspaceSize(<OpDef inputs>, <OpDef attrs>, <OpDef outputs>, ...)`` with the
OpDef's names, in its order, and with each attribute's declared type. The harness sends the
task's tensors and numeric attributes in the task's order (forward order: the benchmark's
``ModelNew`` calls ``kernel_gen_ops.<op>(...)`` with them in the OpDef's order), so the k-th task
input is the OpDef's k-th Input, and likewise for outputs and attributes. An input declared
``.Scalar()`` is passed to aclnn as an aclScalar read from its (one-element) tensor, as the
benchmark's own pybind does (``ConvertTensorToAclScaler``).

What this binding cannot express is a plan problem (`binding_problems`), so the build refuses
with the reason instead of compiling a call that cannot match: tensor lists (``DYNAMIC``),
string or list attributes (the harness sends numbers only), a count that differs between the
task and the OpDef, a task dtype the OpDef does not declare.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagekernel.targets.ascendc.bindings import aclnn_prelude, framework_binding
from sagekernel.targets.ascendc.contract import DTYPES
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names
from sagekernel.targets.ascendc.opdef import OpDefSpec
from sagekernel.tasks.task import Task

#: OpDef attribute type -> run()'s C++ parameter type (the runtime passes numbers) and the cast
#: to the type the generated aclnn API takes.
ATTR_CTYPES: dict[str, tuple[str, str]] = {
    "float": ("double", "static_cast<double>"),
    "int": ("int64_t", "static_cast<int64_t>"),
    "bool": ("int64_t", "static_cast<bool>"),
}

#: Locals of the rendered run(): an OpDef name equal to one gets a trailing underscore in C++.
_LOCALS = frozenset({"run", "workspace", "workspaceSize", "workspacePtr", "executor", "owned",
                     "scalars", "stream", "rc", "t", "s", "m"})


@dataclass(frozen=True)
class BoundArg:
    name: str  # the OpDef's name
    cpp: str  # its C++ identifier in run()
    scalar: bool = False  # an input passed to aclnn as aclScalar
    attr_type: str = ""  # attributes only


def _cpp(name: str) -> str:
    return f"{name}_" if name in _LOCALS or name.startswith("acl_") else name


def skeleton_spec(task: Task) -> OpDefSpec | None:
    from sagekernel.targets.ascendc.benchmark_project import skeleton_opdef

    return skeleton_opdef(task)


def binding_problems(task: Task) -> list[str]:
    """Why the skeleton's OpDef and the task cannot be bound as one call (empty: they can)."""
    spec = skeleton_spec(task)
    if spec is None:
        return [f"no skeleton OpDef ({op_names(task).host_file} under question/): the op JSON and "
                "the binding have no prototype to follow"]
    problems = [f"skeleton OpDef: {p}" for p in spec.problems]
    pairs = (("inputs", task.inputs, spec.inputs), ("outputs", task.outputs, spec.outputs))
    for kind, given, declared in pairs:
        if len(given) != len(declared):
            problems.append(f"the task has {len(given)} {kind} ({', '.join(t.name for t in given)}) but "
                            f"the OpDef declares {len(declared)} ({', '.join(t.name for t in declared)})")
            continue
        for t, d in zip(given, declared, strict=True):
            ge = DTYPES[t.dtype][1].removeprefix("ge::") if t.dtype in DTYPES else t.dtype
            if d.dtypes and ge not in d.dtypes:
                problems.append(f"{kind[:-1]} {d.name!r}: the task's {t.dtype} is not among the OpDef's "
                                f"data types {list(d.dtypes)}")
    problems += [f"{t.name!r} is a tensor list (ParamType(DYNAMIC)): the binding passes single tensors"
                 for t in (*spec.inputs, *spec.outputs) if t.param_type == "DYNAMIC"]
    problems += [f"attribute {a.name!r} is {a.attr_type or 'untyped'}: the runtime passes numbers "
                 f"({', '.join(ATTR_CTYPES)}) only" for a in spec.attrs if a.attr_type not in ATTR_CTYPES]
    if len(task.attrs) != len(spec.attrs):
        problems.append(f"the task passes {len(task.attrs)} attributes ({', '.join(task.attrs)}) but the "
                        f"OpDef declares {len(spec.attrs)} ({', '.join(a.name for a in spec.attrs)})")
    return problems


def bound_args(task: Task) -> tuple[list[BoundArg], list[BoundArg], list[BoundArg]]:
    """(inputs, outputs, attributes) as run() takes them: the OpDef's names where the OpDef and the
    task agree in number, else the task's own (a plan problem says why)."""
    spec = skeleton_spec(task)
    ins = [BoundArg(t.name, _cpp(t.name)) for t in task.inputs]
    outs = [BoundArg(t.name, _cpp(t.name)) for t in task.outputs]
    attrs = [BoundArg(k, _cpp(k), attr_type="float" if isinstance(v, float) else "int")
             for k, v in task.attrs.items()]
    if spec is not None and len(spec.inputs) == len(ins):
        ins = [BoundArg(d.name, _cpp(d.name), scalar=d.scalar) for d in spec.inputs]
    if spec is not None and len(spec.outputs) == len(outs):
        outs = [BoundArg(d.name, _cpp(d.name)) for d in spec.outputs]
    if spec is not None and len(spec.attrs) == len(attrs):
        attrs = [BoundArg(a.name, _cpp(a.name), attr_type=a.attr_type) for a in spec.attrs]
    return ins, outs, attrs


def runtime_attr_names(task: Task) -> list[str]:
    """The attributes run() takes, in order (the runtime's --attrs)."""
    return [a.name for a in bound_args(task)[2]]


def aclnn_binding(task: Task) -> str:
    """The framework path's extension source: the skeleton's OpDef for an NPUKernelBench
    operator, else SAGE's own (bindings.framework_binding)."""
    return benchmark_framework_binding(task) if is_benchmark_task(task) else framework_binding(task)


def benchmark_framework_binding(task: Task) -> str:
    n = op_names(task)
    ins, outs, attrs = bound_args(task)
    params = ([f"const at::Tensor& {a.cpp}" for a in ins] + [f"at::Tensor& {a.cpp}" for a in outs]
              + [f"{ATTR_CTYPES.get(a.attr_type, ('int64_t', ''))[0]} {a.cpp}" for a in attrs])
    tensors = [a for a in (*ins, *outs) if not a.scalar]
    scalars = [a for a in ins if a.scalar]
    call = ([f"acl_{a.cpp}" for a in ins]
            + [f"{ATTR_CTYPES.get(a.attr_type, ('', 'static_cast<int64_t>'))[1]}({a.cpp})" for a in attrs]
            + [f"acl_{a.cpp}" for a in outs])
    return "\n".join([
        *aclnn_prelude(task),
        "",
        "// An OpDef input declared .Scalar(): aclnn takes it as an aclScalar, read from the tensor.",
        "static aclScalar* AclScalarOf(const at::Tensor& t)",
        "{",
        "    at::Tensor host = t.to(at::kCPU).contiguous();",
        "    return aclCreateScalar(host.data_ptr(), AclTypeOf(t));",
        "}",
        "",
        f"// The skeleton's OpDef: inputs {[a.name for a in ins]}, outputs {[a.name for a in outs]}, "
        f"attributes {[a.name for a in attrs]}.",
        f"void run({', '.join(params)})",
        "{",
        *[f"    aclTensor* acl_{a.cpp} = AclTensorOf({a.cpp});" for a in tensors],
        *[f"    aclScalar* acl_{a.cpp} = AclScalarOf({a.cpp});" for a in scalars],
        "    uint64_t workspaceSize = 0;",
        "    aclOpExecutor* executor = nullptr;",
        f"    SAGE_CHECK({n.aclnn}GetWorkspaceSize({', '.join(call)}, &workspaceSize, &executor));",
        "    at::Tensor workspace = at::empty({static_cast<int64_t>(workspaceSize ? workspaceSize : 1)},",
        f"                                     {outs[-1].cpp}.options().dtype(at::kByte));",
        "    void* workspacePtr = workspaceSize ? workspace.data_ptr() : nullptr;",
        "    // The workspace tensor and the acl objects live until the queued call has run.",
        f"    std::vector<aclTensor*> owned{{{', '.join(f'acl_{a.cpp}' for a in tensors)}}};",
        f"    std::vector<aclScalar*> scalars{{{', '.join(f'acl_{a.cpp}' for a in scalars)}}};",
        f'    SageEnqueue("{n.aclnn}", [=](aclrtStream stream) -> int {{',
        "        (void)workspace;",
        f"        int rc = {n.aclnn}(workspacePtr, workspaceSize, executor, stream);",
        "        for (aclTensor* t : owned) {",
        "            aclDestroyTensor(t);",
        "        }",
        "        for (aclScalar* s : scalars) {",
        "            aclDestroyScalar(s);",
        "        }",
        "        return rc;",
        "    });",
        "}",
        "",
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }',
        "",
    ])


__all__ = ["ATTR_CTYPES", "BoundArg", "aclnn_binding", "benchmark_framework_binding", "binding_problems",
           "bound_args", "runtime_attr_names"]
