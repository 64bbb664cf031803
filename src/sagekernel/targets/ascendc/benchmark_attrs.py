"""The attributes of an NPUKernelBench operator's aclnn call, matched to the task's arguments by name.

The skeleton's OpDef declares attributes (``Attr("reduce").String("update")``,
``Attr("shape").ListInt()``, ``Attr("epsilon").Float(1e-5)``); the task knows the reference's
non-tensor arguments by their Python names (tasks/task.ForwardArg: a number, a list of numbers
sent as the attrs ``name_0 ..``, a string such as a reduction mode). Each OpDef attribute takes:

1. the task argument whose name is its own, spelt either way (``mList`` / ``m_list``) or one
   name extending the other (``eps`` / ``epsilon``, ``training`` / ``is_training``);
2. else, when the attributes and arguments left unmatched are as many and of the same kinds,
   the next one in order (the benchmark's ModelNew passes them in the OpDef's order);
3. else its OpDef default (what the generated aclnn API takes when the caller omits it; the
   benchmark's pybind passes GeGluV2's ``dim=-1`` and ``activate_left=true`` the same way).

Numbers (and each number of a list) travel as the harness's attribute values, so an attributes
trial's drawn values reach the kernel; strings and defaults are constants of the case, written
into the runtime's ``--attr-layout``. A task argument no attribute takes is left out, as the
benchmark's own ModelNew leaves out what its pybind does not take (num_features of a BatchNorm:
the shapes carry it); if the reference needs it, the kernel fails the check, not the binding.
run() takes an int/float/bool attribute as a number, a list
as a Python list, a string as a str, and hands aclnn what msOpGen's generated API takes
(``const aclIntArray*`` for ListInt, ``char*`` for String; the string-attribute spelling is from
CANN samples, unrun here).
"""

from __future__ import annotations

from dataclasses import dataclass

from sagekernel.targets.ascendc.opdef import AttrDecl, OpDefSpec
from sagekernel.tasks.task import Task

#: OpDef attribute type -> (run()'s C++ parameter, the argument aclnn receives, built from `{v}`).
ATTR_CALLS: dict[str, tuple[str, str]] = {
    "float": ("double", "static_cast<double>({v})"),
    "int": ("int64_t", "static_cast<int64_t>({v})"),
    "bool": ("int64_t", "static_cast<bool>({v})"),
    "str": ("std::string", "s_{v}.data()"),
    "list_int": ("std::vector<int64_t>", "acl_{v}"),
    "list_float": ("std::vector<double>", "acl_{v}"),
    "list_bool": ("std::vector<int64_t>", "acl_{v}"),
}

#: How run() builds the aclnn argument of a string or list attribute `{v}` (and releases it).
ATTR_BUILD: dict[str, tuple[str, ...]] = {
    "str": ("std::vector<char> s_{v}({v}.begin(), {v}.end());", "s_{v}.push_back('\\0');"),
    "list_int": ("aclIntArray* acl_{v} = aclCreateIntArray({v}.data(), {v}.size());",
                 "release.push_back([acl_{v}]() {{ aclDestroyIntArray(acl_{v}); }});"),
    "list_float": ("std::vector<float> f_{v}({v}.begin(), {v}.end());",
                   "aclFloatArray* acl_{v} = aclCreateFloatArray(f_{v}.data(), f_{v}.size());",
                   "release.push_back([acl_{v}]() {{ aclDestroyFloatArray(acl_{v}); }});"),
    "list_bool": ("std::unique_ptr<bool[]> b_{v}(new bool[{v}.size() + 1]);",
                  "for (size_t i = 0; i < {v}.size(); ++i) {{ b_{v}[i] = {v}[i] != 0; }}",
                  "aclBoolArray* acl_{v} = aclCreateBoolArray(b_{v}.get(), {v}.size());",
                  "release.push_back([acl_{v}]() {{ aclDestroyBoolArray(acl_{v}); }});"),
}

_KINDS = {"float": "scalar", "int": "scalar", "bool": "scalar", "str": "string",
          "list_int": "list", "list_float": "list", "list_bool": "list"}


@dataclass(frozen=True)
class AttrSource:
    """Where an OpDef attribute's value comes from in one case."""

    attr: AttrDecl
    kind: str  # "scalar" | "list" | "string" | "default"
    keys: tuple[str, ...] = ()  # the task attrs carrying the value (a list: one per element)
    value: str | float | int | tuple[float, ...] | None = None  # a string's or a default's value
    arg: str = ""  # the task argument's name


def _norm(name: str) -> str:
    return name.lower().replace("_", "")


def same_name(a: str, b: str) -> bool:
    """`a` and `b` name the same argument: equal up to case and underscores, or one extending the other."""
    x, y = _norm(a), _norm(b)
    short, long_ = sorted((x, y), key=len)
    return x == y or (len(short) >= 3 and (long_.startswith(short) or long_.endswith(short)))


def task_arguments(task: Task) -> list[tuple[str, str, tuple[str, ...], object]]:
    """(name, kind, task attr keys, value) of the task's non-tensor arguments, in call order."""
    found: list[tuple[str, str, tuple[str, ...], object]] = []
    covered: set[str] = set()
    for a in task.forward_args:
        if a.kind == "scalar" and a.name in task.attrs:
            found.append((a.name, "scalar", (a.name,), a.value))
        elif a.kind == "list" and isinstance(a.value, tuple):
            keys = tuple(f"{a.name}_{i}" for i in range(len(a.value)))
            found.append((a.name, "list", tuple(k for k in keys if k in task.attrs), a.value))
        elif a.kind == "string":
            found.append((a.name, "string", (), a.value))
        else:
            continue
        covered.update(found[-1][2])
    found += [(k, "scalar", (k,), v) for k, v in task.attrs.items() if k not in covered]
    return found


def _default(attr: AttrDecl) -> str | float | int | tuple[float, ...] | None:
    text = attr.default
    if text is None:
        return None
    kind = attr.attr_type
    try:
        if kind.startswith("list_"):
            return tuple(float(x) for x in text.split(",") if x.strip())
        if kind == "float":
            return float(text)
        if kind in ("int", "bool"):
            named = {"true": 1, "false": 0}.get(text.lower())
            return named if named is not None else int(text, 0)
    except ValueError:
        return None
    return text


def attr_sources(task: Task, spec: OpDefSpec,
                 inputs: set[str] | None = None) -> tuple[list[AttrSource], list[str]]:
    """(each OpDef attribute's source in this case, problems); `inputs`: task arguments bound to
    OpDef inputs instead (benchmark_binding.value_inputs)."""
    args = [t for t in task_arguments(task) if t[0] not in (inputs or set())]
    chosen: dict[int, int] = {}  # OpDef attr index -> task argument index
    for exact in (True, False):  # equal names first: `mode` must not take `quant_mode` from its owner
        for i, a in enumerate(spec.attrs):
            j = next((j for j, t in enumerate(args) if i not in chosen and j not in chosen.values() and (
                _norm(a.name) == _norm(t[0]) if exact else same_name(a.name, t[0]))), None)
            if j is not None:
                chosen[i] = j
    left_attrs = [i for i in range(len(spec.attrs)) if i not in chosen]
    left_args = [j for j in range(len(args)) if j not in chosen.values()]
    pairs = list(zip(left_attrs, left_args, strict=False))
    if left_attrs and len(left_attrs) == len(left_args) and all(
            _KINDS.get(spec.attrs[i].attr_type) == args[j][1] for i, j in pairs):
        chosen.update(pairs)
    sources, problems = [], []
    for i, a in enumerate(spec.attrs):
        if a.attr_type not in ATTR_CALLS:
            problems.append(f"attribute {a.name!r} is {a.attr_type or 'untyped'}: no aclnn argument for it")
            continue
        if i not in chosen:
            value = _default(a)
            if value is None:
                problems.append(f"attribute {a.name!r}: no task argument of that name and no OpDef default")
            sources.append(AttrSource(a, "default", value=value))
            continue
        name, kind, keys, given = args[chosen[i]]
        if _KINDS[a.attr_type] != kind:
            problems.append(f"attribute {a.name!r} is {a.attr_type} but the task's {name!r} is a {kind}")
        sources.append(AttrSource(a, kind, keys, str(given) if kind == "string" else None, name))
    return sources, problems


def attr_layout(task: Task, sources: list[AttrSource]) -> list[object]:
    """The runtime's ``--attr-layout``: per run() attribute, the index of its task attr value (a
    list: the indices), or ``{"value": constant}`` for a string or a default."""
    order = list(task.attrs)
    out: list[object] = []
    for s in sources:
        if s.kind == "scalar":
            out.append(order.index(s.keys[0]))
        elif s.kind == "list":
            out.append([order.index(k) for k in s.keys])
        else:
            out.append({"value": list(s.value) if isinstance(s.value, tuple) else s.value})
    return out


__all__ = ["ATTR_BUILD", "ATTR_CALLS", "AttrSource", "attr_layout", "attr_sources", "same_name",
           "task_arguments"]
