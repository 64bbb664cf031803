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

Where a case's dtypes are not the OpDef's, the binding converts as the benchmark's own flow
does (its pybind.cpp reads Muls' ``value`` as a float; check_precision compares an output after
torch's type promotion, a bool output as int): run() picks, at run time, the OpDef's dtype
combination the case's tensors match best, converts an input to the declared dtype, and lets
the kernel write an output in its declared dtype into a buffer then cast into the harness's
output. Only lossless conversions are made for inputs (bool to an integer, narrower to wider
within a kind; a `.Scalar()` within its kind, as the host reads it) and widening ones for outputs
(bool -> int -> float; a float to the reference's float dtype): a float read as an integer index,
or a float32 input rounded to float16, is a mismatch the plan names.

A ``DYNAMIC`` (tensor-list) argument takes the task tensors a ``tensors`` forward argument groups
(inputs) or what the fixed outputs leave (one list output); run() takes it as a Python list
(``std::vector<at::Tensor>``, the runtime's ``--lists``) and aclnn as an aclTensorList.

What this binding cannot express is a plan problem (`binding_problems`), so the build refuses
with the reason instead of compiling a call that cannot match: string or list attributes (the
harness sends numbers only), a count that differs between the task and the OpDef, a dtype the
OpDef's combinations cannot be reached from by such a conversion.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagekernel.targets.ascendc.benchmark_attrs import (
    ATTR_BUILD,
    ATTR_CALLS,
    attr_layout,
    attr_sources,
    same_name,
)
from sagekernel.targets.ascendc.bindings import aclnn_prelude, framework_binding
from sagekernel.targets.ascendc.contract import DTYPES
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names
from sagekernel.targets.ascendc.opdef import OpDefSpec, TensorDecl
from sagekernel.tasks.task import Task, TensorSpec

#: Locals of the rendered run(): an OpDef name equal to one gets a trailing underscore in C++.
_LOCALS = frozenset({"run", "workspace", "workspaceSize", "workspacePtr", "executor", "owned",
                     "scalars", "lists", "keep", "release", "col", "stream", "rc", "t", "s", "l", "i", "r",
                     "m"})


#: ge dtype -> (aclDataType, torch's at::ScalarType, kind: 0 bool / 1 integer / 2 floating point, bytes)
GE_TYPES: dict[str, tuple[str, str, int, int]] = {
    "DT_BOOL": ("ACL_BOOL", "at::kBool", 0, 1),
    "DT_UINT8": ("ACL_UINT8", "at::kByte", 1, 1),
    "DT_INT8": ("ACL_INT8", "at::kChar", 1, 1),
    "DT_INT16": ("ACL_INT16", "at::kShort", 1, 2),
    "DT_INT32": ("ACL_INT32", "at::kInt", 1, 4),
    "DT_INT64": ("ACL_INT64", "at::kLong", 1, 8),
    "DT_FLOAT16": ("ACL_FLOAT16", "at::kHalf", 2, 2),
    "DT_BF16": ("ACL_BF16", "at::kBFloat16", 2, 2),
    "DT_FLOAT": ("ACL_FLOAT", "at::kFloat", 2, 4),
    "DT_DOUBLE": ("ACL_DOUBLE", "at::kDouble", 2, 8),
}


@dataclass(frozen=True)
class BoundArg:
    name: str  # the OpDef's name
    cpp: str  # its C++ identifier in run()
    scalar: bool = False  # an input passed to aclnn as aclScalar
    attr_type: str = ""  # attributes only
    count: int = 1  # the task tensors it takes (a tensor list: its length in this case)
    is_list: bool = False  # ParamType(DYNAMIC): a Python list in run(), an aclTensorList for aclnn
    dtypes: tuple[str, ...] = ()  # the OpDef's ge dtype per combination


def _cpp(name: str) -> str:
    return f"{name}_" if name in _LOCALS or name.startswith(("acl_", "k_", "s_", "f_", "b_")) else name


def skeleton_spec(task: Task) -> OpDefSpec | None:
    from sagekernel.targets.ascendc.benchmark_project import skeleton_opdef

    return skeleton_opdef(task)


def _ge(dtype: str) -> str:
    return DTYPES[dtype][1].removeprefix("ge::") if dtype in DTYPES else dtype


def _counts(task: Task, spec: OpDefSpec) -> tuple[list[int], list[int]]:
    """The task tensors each OpDef input and output takes: a ``tensors`` forward argument is one
    (list) input, a ``none`` one an absent optional input (0) where counting them matches the
    OpDef; the outputs the fixed ones leave go to the one list output."""
    slots = [a for a in task.forward_args if a.kind in ("tensor", "tensors", "none")]
    if len(slots) != len(spec.inputs):
        slots = [a for a in slots if a.kind != "none"]
    ins = ([1 if a.kind == "tensor" else 0 if a.kind == "none" else int(a.value)  # type: ignore[arg-type]
            for a in slots] if any(a.kind != "tensor" for a in slots) else [1] * len(task.inputs))
    lists = [i for i, d in enumerate(spec.outputs) if d.param_type == "DYNAMIC"]
    outs = [1] * len(spec.outputs)
    if len(lists) == 1:
        outs[lists[0]] = len(task.outputs) - len(spec.outputs) + 1
    elif len(spec.outputs) != len(task.outputs):
        outs = [1] * len(task.outputs)
    return ins, outs


def _absent_problems(task: Task, spec: OpDefSpec, ins: list[BoundArg]) -> list[str]:
    """An absent (``None``) reference argument must be an OPTIONAL OpDef input, and the one at its
    position: one named like another OpDef input shows the reference orders them otherwise."""
    names = [a.name for a in task.forward_args if a.kind in ("tensor", "tensors", "none")]
    problems = []
    for k, (a, d) in enumerate(zip(ins, spec.inputs, strict=True)):
        if a.count:
            continue
        if d.param_type != "OPTIONAL":
            problems.append(f"input {d.name!r} is {d.param_type or 'REQUIRED'} but the reference passes None")
        named = next((e.name for e in spec.inputs if k < len(names) and same_name(e.name, names[k])), d.name)
        if named != d.name:
            problems.append(f"the reference passes None as {names[k]!r} where the OpDef declares {d.name!r}: "
                            "the reference orders its tensors otherwise than the OpDef")
    return problems


def declared_column(spec: OpDefSpec, input_dtypes: list[str], output_dtypes: list[str]) -> int:
    """The OpDef dtype combination a case of these ge dtypes selects: the one matching most of its
    inputs, then most of its outputs (a Cast's output picks among equal inputs), the first on ties;
    run()'s OpDefColumn makes the same choice at run time."""
    def matches(declared: tuple[TensorDecl, ...], given: list[str], k: int) -> int:
        return sum(k < len(d.dtypes) and d.dtypes[k] == g for d, g in zip(declared, given, strict=False))

    width = max((len(d.dtypes) for d in (*spec.inputs, *spec.outputs)), default=0)
    score = [(matches(spec.inputs, input_dtypes, k), matches(spec.outputs, output_dtypes, k))
             for k in range(width)]
    return score.index(max(score)) if score else 0


def _convertible(given: str, declared: str, *, output: bool, scalar: bool) -> bool:
    """Whether a case's `given` dtype reaches the OpDef's `declared` one: an output widens (the
    kernel's bool/int/float result cast up, as check_precision's promotion compares it; a float
    result is cast to the reference's float dtype, whose precision the reference has); an input
    is converted only without loss (bool to an integer, a narrower integer or float to a wider one),
    or within its kind when it is a `.Scalar()` read on the host (the benchmark's Muls reads its
    value as a float)."""
    if given == declared:
        return True
    if given not in GE_TYPES or declared not in GE_TYPES:
        return False
    (g, g_bytes), (d, d_bytes) = GE_TYPES[given][2:], GE_TYPES[declared][2:]
    if output:  # a float result may round to the reference's own float dtype; an integer never wraps
        return d < g or (d == g and (d == 2 or d_bytes <= g_bytes))
    return (g == 0 and d == 1) or (g == d and (scalar or d_bytes > g_bytes))


def _taken(bound: list[BoundArg], given: list[TensorSpec]) -> list[list[TensorSpec]]:
    """The task tensors each bound argument takes, in order."""
    at, out = 0, []
    for a in bound:
        out.append(given[at:at + a.count])
        at += a.count
    return out


def _case_problems(task: Task, spec: OpDefSpec) -> list[str]:
    ins, outs = bound_args(task)[:2]
    problems = []
    for kind, given, bound in (("inputs", task.inputs, ins), ("outputs", task.outputs, outs)):
        if sum(a.count for a in bound) != len(given) or len(bound) != len(getattr(spec, kind)):
            declared = getattr(spec, kind)
            problems.append(f"the task has {len(given)} {kind} ({', '.join(t.name for t in given)}) but "
                            f"the OpDef declares {len(declared)} ({', '.join(t.name for t in declared)})")
    if problems:
        return problems
    problems += [f"{a.name!r} takes {a.count} tensors but is not a tensor list (ParamType(DYNAMIC))"
                 for a in (*ins, *outs) if a.count > 1 and not a.is_list]
    problems += _absent_problems(task, spec, ins)
    taken_in, taken_out = _taken(ins, task.inputs), _taken(outs, task.outputs)
    col = declared_column(spec, [_ge(ts[0].dtype) if ts else "" for ts in taken_in],
                          [_ge(ts[0].dtype) if ts else "" for ts in taken_out])
    tensors = [(a, t, False) for a, ts in zip(ins, taken_in, strict=True) for t in ts]
    tensors += [(a, t, True) for a, ts in zip(outs, taken_out, strict=True) for t in ts]
    for a, t, output in tensors:
        want = a.dtypes[col] if col < len(a.dtypes) else ""
        if want and not _convertible(_ge(t.dtype), want, output=output, scalar=a.scalar):
            problems.append(f"{'output' if output else 'input'} {a.name!r}: the task's {t.dtype} is neither "
                            f"the OpDef's {want} (its dtype combination {col}) nor converted to it "
                            f"({'widening only' if output else 'without loss only'})")
    return problems


def binding_problems(task: Task) -> list[str]:
    """Why the skeleton's OpDef and the task cannot be bound as one call (empty: they can), over
    every case (input group) of the task."""
    spec = skeleton_spec(task)
    if spec is None:
        return [f"no skeleton OpDef ({op_names(task).host_file} under question/): the op JSON and "
                "the binding have no prototype to follow"]
    problems = [f"skeleton OpDef: {p}" for p in spec.problems]
    cases = task.group_tasks()
    for case in cases:
        found = _case_problems(case, spec) + attr_sources(case, spec)[1]
        name = case.groups[case.group_index].name if case.group_index is not None else ""
        problems += [f"{name}: {p}" if len(cases) > 1 and name else p for p in found
                     if p not in problems and f"{name}: {p}" not in problems]
    return problems


def bound_args(task: Task) -> tuple[list[BoundArg], list[BoundArg], list[BoundArg]]:
    """(inputs, outputs, attributes) as run() takes them: the OpDef's names where the OpDef and the
    task agree in number, else the task's own (a plan problem says why)."""
    spec = skeleton_spec(task)
    ins = [BoundArg(t.name, _cpp(t.name)) for t in task.inputs]
    outs = [BoundArg(t.name, _cpp(t.name)) for t in task.outputs]
    attrs = [BoundArg(k, _cpp(k), attr_type="float" if isinstance(v, float) else "int")
             for k, v in task.attrs.items()]
    if spec is None:
        return ins, outs, attrs
    n_ins, n_outs = _counts(task, spec)
    if len(spec.inputs) == len(n_ins):
        ins = [BoundArg(d.name, _cpp(d.name), scalar=d.scalar, count=n, is_list=d.param_type == "DYNAMIC",
                        dtypes=d.dtypes) for d, n in zip(spec.inputs, n_ins, strict=True)]
    if len(spec.outputs) == len(n_outs):
        outs = [BoundArg(d.name, _cpp(d.name), count=n, is_list=d.param_type == "DYNAMIC", dtypes=d.dtypes)
                for d, n in zip(spec.outputs, n_outs, strict=True)]
    attrs = [BoundArg(a.name, _cpp(a.name), attr_type=a.attr_type) for a in spec.attrs]
    return ins, outs, attrs


def runtime_lists(task: Task) -> list[list[int]]:
    """[first view, length] of each tensor list run() takes (the runtime's ``--lists``): the
    runtime hands those views to run() as one Python list."""
    ins, outs, _ = bound_args(task)
    found, at = [], 0
    for a in (*ins, *outs):
        if a.is_list:
            found.append([at, a.count])
        at += a.count
    return found


def runtime_attr_names(task: Task) -> list[str]:
    """The task attributes the harness sends, in its order (the runtime's --attrs): run()'s own
    attributes are built from them by `runtime_attr_layout`."""
    return list(task.attrs)


def runtime_attr_layout(task: Task) -> list[object]:
    """The runtime's ``--attr-layout`` (benchmark_attrs.attr_layout) for this case."""
    spec = skeleton_spec(task)
    return attr_layout(task, attr_sources(task, spec)[0]) if spec is not None else []


def aclnn_binding(task: Task) -> str:
    """The framework path's extension source: the skeleton's OpDef for an NPUKernelBench
    operator, else SAGE's own (bindings.framework_binding)."""
    return benchmark_framework_binding(task) if is_benchmark_task(task) else framework_binding(task)


#: run()'s helpers for the OpDef's dtype combinations and tensor lists.
_HELPERS = """#include <functional>
#include <memory>

static at::ScalarType AtTypeOf(aclDataType t)
{
    switch (t) {
%s
    default: throw std::runtime_error("no torch dtype for this OpDef dtype");
    }
}

static aclDataType FirstType(const std::vector<at::Tensor>& ts)
{
    return ts.empty() ? ACL_DT_UNDEFINED : AclTypeOf(ts[0]);
}

static size_t Matches(const std::vector<std::vector<aclDataType>>& declared,
                      const std::vector<aclDataType>& given, size_t c)
{
    size_t n = 0;
    for (size_t i = 0; i < declared.size() && i < given.size(); ++i) {
        n += (c < declared[i].size() && declared[i][c] == given[i]) ? 1 : 0;
    }
    return n;
}

// The OpDef's dtype combination the case selects: the one matching most of its inputs, then most
// of its outputs, the first on ties (benchmark_binding.declared_column: the same choice).
static size_t OpDefColumn(const std::vector<aclDataType>& inputs, const std::vector<aclDataType>& outputs)
{
    size_t best = 0, most = 0;
    const auto& rows = kInputTypes.empty() ? kOutputTypes : kInputTypes;
    size_t width = rows.empty() ? 0 : rows[0].size();
    for (size_t c = 0; c < width; ++c) {
        size_t n = Matches(kInputTypes, inputs, c) * 1000 + Matches(kOutputTypes, outputs, c);
        if (c == 0 || n > most) {
            best = c;
            most = n;
        }
    }
    return best;
}

// An input in the dtype the OpDef declares (a converted copy when the case's differs).
static at::Tensor AsDeclared(const at::Tensor& t, aclDataType want)
{
    return (want == ACL_DT_UNDEFINED || AclTypeOf(t) == want) ? t : t.to(AtTypeOf(want));
}

// An output buffer in the declared dtype: `t` itself, or one cast into `t` after the call.
static at::Tensor OutputIn(const at::Tensor& t, aclDataType want)
{
    return (want == ACL_DT_UNDEFINED || AclTypeOf(t) == want) ? t
        : at::empty_like(t, t.options().dtype(AtTypeOf(want)));
}

static aclTensorList* AclTensorListOf(const std::vector<at::Tensor>& ts)
{
    std::vector<aclTensor*> items;
    for (const at::Tensor& t : ts) {
        items.push_back(AclTensorOf(t));
    }
    return aclCreateTensorList(items.data(), items.size());
}

// An OpDef input declared .Scalar(): aclnn takes it as an aclScalar, read from the tensor.
static aclScalar* AclScalarOf(const at::Tensor& t)
{
    at::Tensor host = t.to(at::kCPU).contiguous();
    return aclCreateScalar(host.data_ptr(), AclTypeOf(t));
}"""


def _acl_row(a: BoundArg, width: int) -> str:
    return "{" + ", ".join(GE_TYPES.get(a.dtypes[k] if k < len(a.dtypes) else "", ("ACL_DT_UNDEFINED",))[0]
                           for k in range(width)) + "}"


def _prepare(a: BoundArg, table: str, i: int, convert: str) -> list[str]:
    """The declared-dtype tensor(s) k_<a> of run()'s argument `a`, and its acl object acl_<a>."""
    want = f"{table}[{i}][col]"
    if not a.count:  # an absent optional input: aclnn takes a null pointer
        return [f"    const aclTensor* acl_{a.cpp} = nullptr;  // absent (the reference passes None)"]
    if a.is_list:
        return [f"    std::vector<at::Tensor> k_{a.cpp};",
                f"    for (const at::Tensor& t : {a.cpp}) {{",
                f"        k_{a.cpp}.push_back({convert}(t, {want}));",
                "    }",
                f"    keep.insert(keep.end(), k_{a.cpp}.begin(), k_{a.cpp}.end());",
                f"    aclTensorList* acl_{a.cpp} = AclTensorListOf(k_{a.cpp});",
                f"    lists.push_back(acl_{a.cpp});"]
    kind, make, where = (("aclScalar", "AclScalarOf", "scalars") if a.scalar
                         else ("aclTensor", "AclTensorOf", "owned"))
    return [f"    at::Tensor k_{a.cpp} = {convert}({a.cpp}, {want});", f"    keep.push_back(k_{a.cpp});",
            f"    {kind}* acl_{a.cpp} = {make}(k_{a.cpp});", f"    {where}.push_back(acl_{a.cpp});"]


def benchmark_framework_binding(task: Task) -> str:
    n = op_names(task)
    ins, outs, attrs = bound_args(task)
    width = max((len(a.dtypes) for a in (*ins, *outs)), default=0) or 1
    tensor = {False: ("const at::Tensor&", "at::Tensor&"),
              True: ("const std::vector<at::Tensor>&", "std::vector<at::Tensor>&")}
    params = ([f"{tensor[a.is_list][0]} {a.cpp}" for a in ins if a.count]
              + [f"{tensor[a.is_list][1]} {a.cpp}" for a in outs]
              + [f"{ATTR_CALLS.get(a.attr_type, ('int64_t', ''))[0]} {a.cpp}" for a in attrs])
    call = ([f"acl_{a.cpp}" for a in ins]
            + [ATTR_CALLS.get(a.attr_type, ('', '{v}'))[1].format(v=a.cpp) for a in attrs]
            + [f"acl_{a.cpp}" for a in outs])
    built = [f"    {line.format(v=a.cpp)}" for a in attrs for line in ATTR_BUILD.get(a.attr_type, ())]
    given = {a.cpp: "ACL_DT_UNDEFINED" if not a.count else f"FirstType({a.cpp})" if a.is_list
             else f"AclTypeOf({a.cpp})" for a in (*ins, *outs)}
    copy_back = []
    for a in outs:  # an output the kernel wrote in another dtype is cast into the harness's buffer
        if a.is_list:
            copy_back += [f"    for (size_t i = 0; i < {a.cpp}.size(); ++i) {{",
                          f"        if (!k_{a.cpp}[i].is_same({a.cpp}[i])) {{",
                          f"            {a.cpp}[i].copy_(k_{a.cpp}[i]);", "        }", "    }"]
        else:
            copy_back += [f"    if (!k_{a.cpp}.is_same({a.cpp})) {{", f"        {a.cpp}.copy_(k_{a.cpp});",
                          "    }"]
    at_types = "\n".join(f"    case {acl}: return {at};" for acl, at, *_ in GE_TYPES.values())
    return "\n".join([
        *aclnn_prelude(task),
        "",
        f"// The skeleton's OpDef: inputs {[a.name for a in ins]}, outputs {[a.name for a in outs]}, "
        f"attributes {[a.name for a in attrs]}; its dtype combinations, one column each.",
        "static const std::vector<std::vector<aclDataType>> kInputTypes = {"
        + ", ".join(_acl_row(a, width) for a in ins) + "};",
        "static const std::vector<std::vector<aclDataType>> kOutputTypes = {"
        + ", ".join(_acl_row(a, width) for a in outs) + "};",
        "",
        _HELPERS % at_types,
        "",
        f"void run({', '.join(params)})",
        "{",
        f"    const size_t col = OpDefColumn({{{', '.join(given[a.cpp] for a in ins)}}}, "
        f"{{{', '.join(given[a.cpp] for a in outs)}}});",
        "    std::vector<at::Tensor> keep;  // converted inputs and declared-dtype outputs",
        "    std::vector<aclTensor*> owned;",
        "    std::vector<aclScalar*> scalars;",
        "    std::vector<aclTensorList*> lists;  // each owns its aclTensors",
        *[line for i, a in enumerate(ins) for line in _prepare(a, "kInputTypes", i, "AsDeclared")],
        *[line for i, a in enumerate(outs) for line in _prepare(a, "kOutputTypes", i, "OutputIn")],
        "    std::vector<std::function<void()>> release;  // list attributes' acl arrays",
        *built,
        "    uint64_t workspaceSize = 0;",
        "    aclOpExecutor* executor = nullptr;",
        f"    SAGE_CHECK({n.aclnn}GetWorkspaceSize({', '.join(call)}, &workspaceSize, &executor));",
        "    at::Tensor workspace = at::empty({static_cast<int64_t>(workspaceSize ? workspaceSize : 1)},",
        "                                     keep.back().options().dtype(at::kByte));",
        "    void* workspacePtr = workspaceSize ? workspace.data_ptr() : nullptr;",
        "    // The workspace, the tensors and the acl objects live until the queued call has run.",
        f'    SageEnqueue("{n.aclnn}", [=](aclrtStream stream) -> int {{',
        "        (void)workspace;",
        "        (void)keep;",
        f"        int rc = {n.aclnn}(workspacePtr, workspaceSize, executor, stream);",
        "        for (aclTensor* t : owned) {",
        "            aclDestroyTensor(t);",
        "        }",
        "        for (aclScalar* s : scalars) {",
        "            aclDestroyScalar(s);",
        "        }",
        "        for (aclTensorList* l : lists) {",
        "            aclDestroyTensorList(l);",
        "        }",
        "        for (const auto& r : release) {",
        "            r();",
        "        }",
        "        return rc;",
        "    });",
        "    // queued after the call, on the same queue",
        *copy_back,
        "}",
        "",
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }',
        "",
    ])


__all__ = ["GE_TYPES", "BoundArg", "aclnn_binding", "benchmark_framework_binding",
           "binding_problems", "bound_args", "declared_column", "runtime_attr_layout", "runtime_attr_names",
           "runtime_lists"]
