"""The runtime's binding of an NPUKernelBench operator: the skeleton's OpDef, not the task's names.

For a benchmark operator msOpGen generates the aclnn API from the skeleton's OpDef
(opdef.parse_opdef -> skeleton.op_json), so the binding calls
``aclnn<Op>GetWorkspaceSize(<OpDef inputs>, <OpDef attrs>, <OpDef outputs>, ...)`` with the
OpDef's names, in its order, and with each attribute's declared type. The harness sends the
task's tensors in the task's order (forward order: the benchmark's ``ModelNew`` calls
``kernel_gen_ops.<op>(...)`` with them in the OpDef's order), so the k-th task tensor is the
OpDef's k-th Input, and likewise for outputs; attributes are matched by name
(benchmark_attrs.py). A reference argument ``None`` is an absent OPTIONAL input (aclnn gets a
null tensor); numbers the OpDef takes as an input become a tensor (`value_inputs`); an OpDef
without Output writes through the input the benchmark's pybind returns (`inplace_input`). An
input declared ``.Scalar()`` is passed to aclnn as an aclScalar read from its (one-element)
tensor, as the benchmark's own pybind does (``ConvertTensorToAclScaler``).

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

What this binding cannot express is a plan problem (`binding_problems`, per case), so the build
refuses with the reason instead of compiling a call that cannot match: a count that still differs
between the task and the OpDef, a dtype the OpDef's combinations cannot be reached from by such a
conversion, an attribute with neither a task argument nor a default. The C++ is rendered by
benchmark_cpp.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sagekernel.targets.ascendc.benchmark_attrs import attr_layout, attr_sources, same_name
from sagekernel.targets.ascendc.contract import DTYPES
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.names import op_names
from sagekernel.targets.ascendc.opdef import NO_OUTPUT, OpDefSpec, TensorDecl
from sagekernel.tasks.task import Task, TensorSpec

#: Locals of the rendered run(): an OpDef name equal to one gets a trailing underscore in C++.
_LOCALS = frozenset({"run", "workspace", "workspaceSize", "workspacePtr", "executor", "owned", "scalars",
                     "lists", "keep", "release", "col", "dev", "stream", "rc", "t", "s", "l", "i", "r", "m"})


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
    #: An in-place operator (no OpDef Output): on the input, the output buffer the kernel writes
    #: through it; on that output, the input (C++ names).
    inplace: str = ""
    value_of: str = ""  # an input the reference passes as numbers: the task argument (value_inputs)


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
    values = value_inputs(task, spec)
    if len(slots) not in (len(spec.inputs), len(spec.inputs) - len(values)):
        slots = [a for a in slots if a.kind != "none"]
    ins = ([1 if a.kind == "tensor" else 0 if a.kind == "none" else int(a.value)  # type: ignore[arg-type]
            for a in slots] if any(a.kind != "tensor" for a in slots) else [1] * len(task.inputs))
    if values and len(ins) + len(values) == len(spec.inputs):  # numbers at their inputs' places
        rest = iter(ins)
        ins = [0 if k in values else next(rest) for k in range(len(spec.inputs))]
    lists = [i for i, d in enumerate(spec.outputs) if d.param_type == "DYNAMIC"]
    outs = [1] * len(spec.outputs)
    if len(lists) == 1:
        outs[lists[0]] = len(task.outputs) - len(spec.outputs) + 1
    elif len(spec.outputs) != len(task.outputs):
        outs = [1] * len(task.outputs)
    return ins, outs


def value_inputs(task: Task, spec: OpDefSpec) -> dict[int, str]:
    """OpDef inputs the reference passes as numbers, a scalar or list argument named as the input
    (TopKV3's ``k``, Fill's ``dims``): {input index: argument name}; run() makes each a tensor of
    the declared dtype from the harness's values. Only where the tensors alone fall short."""
    tensors = [a for a in task.forward_args if a.kind in ("tensor", "tensors")]
    if len(tensors) >= len(spec.inputs):
        return {}
    found: dict[int, str] = {}
    for a in task.forward_args:
        k = next((i for i, d in enumerate(spec.inputs) if i not in found and same_name(d.name, a.name)), None)
        if a.kind in ("scalar", "list") and k is not None:
            found[k] = a.name
    return found


def _absent_problems(task: Task, spec: OpDefSpec, ins: list[BoundArg]) -> list[str]:
    """An absent (``None``) reference argument must be an OPTIONAL OpDef input, and the one at its
    position: one named like another OpDef input shows the reference orders them otherwise."""
    names = [a.name for a in task.forward_args if a.kind in ("tensor", "tensors", "none")]
    problems = []
    for k, (a, d) in enumerate(zip(ins, spec.inputs, strict=True)):
        if a.count or a.value_of:
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
    inplace = any(a.inplace for a in outs)
    if task.params:  # the runtime's views would hold them between the inputs and the outputs
        problems.append(f"the task has {len(task.params)} model parameters: the binding passes inputs and "
                        "outputs only")
    for kind, given, bound in (("inputs", task.inputs, ins), ("outputs", task.outputs, outs)):
        if sum(a.count for a in bound) != len(given) or (
                len(bound) != len(getattr(spec, kind)) and not (inplace and kind == "outputs")):
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
        if want and a.inplace and _ge(t.dtype) != want:
            problems.append(f"{a.name!r}: the kernel works in place in the task's {t.dtype}, not the "
                            f"OpDef's {want} (its dtype combination {col})")
        elif want and not _convertible(_ge(t.dtype), want, output=output, scalar=a.scalar):
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
    written = any(a.inplace for a in bound_args(task)[1])  # in place: its pybind names the input
    problems = [f"skeleton OpDef: {p}" for p in spec.problems if not (written and p == NO_OUTPUT)]
    cases = task.group_tasks()
    for case in cases:
        numbers = set(value_inputs(case, spec).values())
        found = _case_problems(case, spec) + attr_sources(case, spec, numbers)[1]
        name = case.groups[case.group_index].name if case.group_index is not None else ""
        problems += [f"{name}: {p}" if len(cases) > 1 and name else p for p in found
                     if p not in problems and f"{name}: {p}" not in problems]
    return problems


def inplace_input(task: Task, spec: OpDefSpec) -> int | None:
    """An OpDef without Output (an in-place operator): the input its kernel writes the result
    into, i.e. the EXEC_NPU_CMD argument the benchmark's own ``validation/pybind.cpp`` returns
    (``EXEC_NPU_CMD(aclnnCustomOp, input, alpha, n, incx); return input;``); None otherwise."""
    path = task.source_path.parent / "pybind.cpp"
    if spec.outputs or not path.is_file():
        return None
    source = Source(path.read_text(encoding="utf-8", errors="replace"))
    calls = source.macro_invocations("EXEC_NPU_CMD")
    toks = source.tokens()
    returned = {toks[i + 1].text for i in range(len(toks) - 2)
                if toks[i].text == "return" and toks[i + 1].kind == "identifier" and toks[i + 2].text == ";"}
    args = calls[0][0][1:] if len(calls) == 1 else []
    hits = [k for k, a in enumerate(args[:len(spec.inputs)]) if a in returned]
    return hits[0] if len(hits) == 1 else None


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
        values = value_inputs(task, spec)
        ins = [BoundArg(d.name, _cpp(d.name), scalar=d.scalar, count=n, is_list=d.param_type == "DYNAMIC",
                        dtypes=d.dtypes, value_of=values.get(k, "") if not n else "")
               for k, (d, n) in enumerate(zip(spec.inputs, n_ins, strict=True))]
    if len(spec.outputs) == len(n_outs):
        outs = [BoundArg(d.name, _cpp(d.name), count=n, is_list=d.param_type == "DYNAMIC", dtypes=d.dtypes)
                for d, n in zip(spec.outputs, n_outs, strict=True)]
    attrs = [BoundArg(a.name, _cpp(a.name), attr_type=a.attr_type) for a in spec.attrs]
    k = inplace_input(task, spec)
    if k is not None and len(task.outputs) == 1 and len(ins) == len(spec.inputs):
        outs = [BoundArg(ins[k].name, ins[k].cpp, dtypes=ins[k].dtypes, count=ins[k].count)]
    # an Output named as an Input is a ref: msOpGen's aclnn takes it once, at the input's place
    # (`aclTensor* varRef`); the kernel updates the harness's output buffer, holding the input
    for j, o in enumerate(outs):
        i = next((i for i, a in enumerate(ins) if a.name == o.name and a.count == o.count and len(ins) ==
                  len(spec.inputs)), None)
        if i is not None:
            outs[j] = replace(o, cpp=f"{o.cpp}_result", inplace=ins[i].cpp, is_list=ins[i].is_list)
            ins[i] = replace(ins[i], inplace=outs[j].cpp)
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
    if spec is None:
        return []
    order = list(task.attrs)
    def carries(key: str, name: str) -> bool:  # `name`, or an element `name_<i>` of a list
        return key == name or (key.startswith(f"{name}_") and key[len(name) + 1:].isdigit())

    numbers = [[i for i, k in enumerate(order) if carries(k, a.value_of)]
               for a in bound_args(task)[0] if a.value_of]  # value inputs follow the attributes
    sources = attr_sources(task, spec, set(value_inputs(task, spec).values()))[0]
    return attr_layout(task, sources) + numbers


__all__ = [
    "GE_TYPES",
    "BoundArg",
    "binding_problems",
    "bound_args",
    "declared_column",
    "inplace_input",
    "runtime_attr_layout",
    "runtime_attr_names",
    "runtime_lists",
    "value_inputs",
]
