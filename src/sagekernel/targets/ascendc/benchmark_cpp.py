"""The C++ source of an NPUKernelBench operator's torch extension (benchmark_binding's plan, rendered).

run() takes the OpDef's arguments as benchmark_binding.bound_args lays them out (a tensor, a list
of tensors, an absent optional input, an attribute), picks the OpDef's dtype combination the case
matches (OpDefColumn, the same rule as benchmark_binding.declared_column), converts inputs to the
declared dtypes, lets the kernel write outputs in theirs and casts them into the harness's
buffers after the call, queued on torch_npu's task queue like every other launch
(bindings.SageEnqueue). The acl objects live until the queued call has run. Not compiled here
(no CANN on this machine): tests check the text.
"""

from __future__ import annotations

from sagekernel.targets.ascendc.benchmark_attrs import ATTR_BUILD, ATTR_CALLS
from sagekernel.targets.ascendc.benchmark_binding import GE_TYPES, BoundArg, bound_args
from sagekernel.targets.ascendc.bindings import aclnn_prelude, framework_binding
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names
from sagekernel.tasks.task import Task

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
    if a.value_of:  # numbers the reference passes: a tensor of the declared dtype beside the others
        return [f"    at::Tensor k_{a.cpp} = at::tensor({a.cpp}, at::TensorOptions().dtype(at::kDouble))",
                f"        .to(AtTypeOf({want})).to(dev);",
                f"    keep.push_back(k_{a.cpp});", f"    aclTensor* acl_{a.cpp} = AclTensorOf(k_{a.cpp});",
                f"    owned.push_back(acl_{a.cpp});"]
    if not a.count:  # an absent optional input: aclnn takes a null pointer
        return [f"    const aclTensor* acl_{a.cpp} = nullptr;  // absent (the reference passes None)"]
    if a.inplace and convert == "OutputIn":  # written through its input
        return []
    if a.inplace and a.is_list:  # in place: the kernel updates the harness's output buffers
        return [f"    std::vector<at::Tensor> k_{a.cpp};",
                f"    for (size_t i = 0; i < {a.cpp}.size(); ++i) {{",
                f"        {a.inplace}[i].copy_({a.cpp}[i]);", f"        k_{a.cpp}.push_back({a.inplace}[i]);",
                "    }", f"    keep.insert(keep.end(), k_{a.cpp}.begin(), k_{a.cpp}.end());",
                f"    aclTensorList* acl_{a.cpp} = AclTensorListOf(k_{a.cpp});",
                f"    lists.push_back(acl_{a.cpp});"]
    if a.inplace:  # in place: the kernel updates the harness's output buffer, holding the input
        return [f"    {a.inplace}.copy_({a.cpp});", f"    at::Tensor k_{a.cpp} = {a.inplace};",
                f"    keep.push_back(k_{a.cpp});", f"    aclTensor* acl_{a.cpp} = AclTensorOf(k_{a.cpp});",
                f"    owned.push_back(acl_{a.cpp});"]
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


def aclnn_binding(task: Task) -> str:
    """The framework path's extension source: the skeleton's OpDef for an NPUKernelBench
    operator, else SAGE's own (bindings.framework_binding)."""
    return benchmark_framework_binding(task) if is_benchmark_task(task) else framework_binding(task)


def benchmark_framework_binding(task: Task) -> str:
    n = op_names(task)
    ins, outs, attrs = bound_args(task)
    width = max((len(a.dtypes) for a in (*ins, *outs)), default=0) or 1
    tensor = {False: ("const at::Tensor&", "at::Tensor&"),
              True: ("const std::vector<at::Tensor>&", "std::vector<at::Tensor>&")}
    params = ([f"{tensor[a.is_list][0]} {a.cpp}" for a in ins if a.count]
              + [f"{tensor[a.is_list][1]} {a.cpp}" for a in outs]
              + [f"{ATTR_CALLS.get(a.attr_type, ('int64_t', ''))[0]} {a.cpp}" for a in attrs]
              + [f"std::vector<double> {a.cpp}" for a in ins if a.value_of])
    call = ([f"acl_{a.cpp}" for a in ins]
            + [ATTR_CALLS.get(a.attr_type, ('', '{v}'))[1].format(v=a.cpp) for a in attrs]
            + [f"acl_{a.cpp}" for a in outs if not a.inplace])
    built = [f"    {line.format(v=a.cpp)}" for a in attrs for line in ATTR_BUILD.get(a.attr_type, ())]
    given = {a.cpp: "ACL_DT_UNDEFINED" if not a.count else f"FirstType({a.cpp})" if a.is_list
             else f"AclTypeOf({a.cpp})" for a in (*ins, *outs)}
    present = [a for a in (*ins, *outs) if a.count and not a.inplace]
    device = "" if not any(a.value_of for a in ins) or not present else (
        f"{present[0].cpp}[0].device()" if present[0].is_list else f"{present[0].cpp}.device()")
    copy_back = []
    for a in outs:  # an output the kernel wrote in another dtype is cast into the harness's buffer
        if a.inplace:
            continue
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
        *([f"    const at::Device dev = {device};  // where number inputs' tensors go"] if device else []),
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


__all__ = ["aclnn_binding", "benchmark_framework_binding"]
