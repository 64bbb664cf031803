"""An OpDef registration read back from its C++ source: the op prototype a skeleton declares.

NPUKernelBench's ``question/op_host/<k>.cpp`` registers the operator the model must build::

    this->Input("x1").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
        .Format({ge::FORMAT_ND, ge::FORMAT_ND});
    this->Attr("alpha").AttrType(OPTIONAL).Float(1.0);

`parse_opdef` reads every ``Input`` / ``Output`` / ``Attr`` chain from the token stream
(cparse.Source.tokens: comments and strings handled by the parser, not by regexes), resolving a
``DataType(name)`` whose list is a variable declared in the same file. `op_json` renders it as
msOpGen's op prototype (``msopgen gen -i <k>.json``), so the generated project, the aclnn API
(`aclnn<Op>(inputs..., attrs..., outputs...)`) and the benchmark's own flow agree on names,
order, dtype lists and formats. What the parse cannot establish is reported in
`OpDefSpec.problems`, never guessed.

The JSON spellings below follow msOpGen's op prototype files as the CANN samples write them
(``"type": ["float16", "float"]``, ``"format": ["ND", "ND"]``, ``"param_type": "required"``);
the list-attribute spellings have not been run through msOpGen here (no CANN on this machine).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sagekernel.targets.ascendc.cparse import Source, Token

#: ge::DataType -> the op JSON's type name
GE_DTYPES: dict[str, str] = {
    "DT_FLOAT": "float",
    "DT_FLOAT16": "float16",
    "DT_BF16": "bfloat16",
    "DT_DOUBLE": "double",
    "DT_INT8": "int8",
    "DT_INT16": "int16",
    "DT_INT32": "int32",
    "DT_INT64": "int64",
    "DT_UINT8": "uint8",
    "DT_UINT16": "uint16",
    "DT_UINT32": "uint32",
    "DT_UINT64": "uint64",
    "DT_BOOL": "bool",
    "DT_COMPLEX32": "complex32",
    "DT_COMPLEX64": "complex64",
}

#: ge::Format -> the op JSON's format name
GE_FORMATS: dict[str, str] = {
    "FORMAT_ND": "ND",
    "FORMAT_NCHW": "NCHW",
    "FORMAT_NHWC": "NHWC",
    "FORMAT_NCDHW": "NCDHW",
    "FORMAT_FRACTAL_NZ": "FRACTAL_NZ",
}

#: OpDef attribute setter -> the op JSON's attribute type
ATTR_SETTERS: dict[str, str] = {
    "Int": "int",
    "Float": "float",
    "Bool": "bool",
    "String": "str",
    "ListInt": "list_int",
    "ListFloat": "list_float",
    "ListBool": "list_bool",
}

PARAM_TYPES = ("REQUIRED", "OPTIONAL", "DYNAMIC")

#: The problem of an OpDef without Output (an in-place operator: benchmark_binding.inplace_input).
NO_OUTPUT = "the OpDef declares no Output"


@dataclass(frozen=True)
class TensorDecl:
    """One Input or Output as the OpDef declares it (dtypes and formats as ge names)."""

    name: str
    param_type: str  # REQUIRED | OPTIONAL | DYNAMIC ("" when not declared)
    dtypes: tuple[str, ...]  # ("DT_FLOAT", "DT_FLOAT16")
    formats: tuple[str, ...]  # ("FORMAT_ND", "FORMAT_ND")
    scalar: bool = False  # `.Scalar()`: the aclnn API takes it as an aclScalar
    line: int = 0


@dataclass(frozen=True)
class AttrDecl:
    name: str
    attr_type: str  # int | float | bool | str | list_int | ... ("" when no setter was found)
    required: bool
    default: str | None  # the setter's argument as text (None: no default given)
    line: int = 0


@dataclass(frozen=True)
class OpDefSpec:
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    attrs: tuple[AttrDecl, ...]
    problems: tuple[str, ...]  # why this is not a complete op prototype (empty: complete)

    @property
    def complete(self) -> bool:
        return not self.problems

    def names(self) -> dict[str, list[str]]:
        return {"Input": [t.name for t in self.inputs], "Output": [t.name for t in self.outputs],
                "Attr": [a.name for a in self.attrs]}


def _close(toks: list[Token], i: int) -> int:
    """Index of the bracket closing the one at toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text in "([{":
            depth += 1
        elif toks[j].text in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _chain(toks: list[Token], i: int) -> list[tuple[str, list[Token]]]:
    """The `.Method(args)` calls chained after the call whose "(" is toks[i]."""
    calls = []
    j = _close(toks, i) + 1
    while j + 2 < len(toks) and toks[j].text == "." and toks[j + 2].text == "(":
        end = _close(toks, j + 2)
        calls.append((toks[j + 1].text, toks[j + 3:end]))
        j = end + 1
    return calls


def _list_variables(toks: list[Token]) -> dict[str, list[str]]:
    """`std::vector<ge::DataType> name = {ge::DT_A, ...};` (or `name({...})`, `name{...}`): the ge
    enumerators each variable of the file is initialised with."""
    found: dict[str, list[str]] = {}
    for i in range(len(toks) - 2):
        if toks[i].kind != "identifier":
            continue
        k = i + 1
        if toks[k].text in ("=", "("):
            k += 1
        if k >= len(toks) or toks[k].text != "{":
            continue
        items = [t.text for t in toks[k:_close(toks, k)] if t.text.startswith(("DT_", "FORMAT_"))]
        if items:
            found.setdefault(toks[i].text, items)
    for i in range(len(toks) - 2):
        if toks[i].text == "#define" and toks[i + 2].kind == "preproc_arg":  # `#define ALL_ND {ge::...}`
            items = re.findall(r"\b(?:DT|FORMAT)_\w+", toks[i + 2].text)
            if items:
                found.setdefault(toks[i + 1].text, items)
        elif (toks[i].kind == "identifier" and toks[i + 1].text == "=" and toks[i + 2].text in found
              and i + 3 < len(toks) and toks[i + 3].text == ";"):  # `b = a;`: a copy
            found.setdefault(toks[i].text, list(found[toks[i + 2].text]))
    _mapped_lists(toks, found)
    for i in range(len(toks) - 8):  # `name(other.size(), ge::FORMAT_ND)`: one per entry of `other`
        t = toks[i:i + 8]
        if (t[0].kind == "identifier" and t[1].text == "(" and t[3].text == "." and t[4].text == "size"
                and t[5].text == "(" and t[6].text == ")" and t[7].text == "," and t[2].text in found):
            value = [x.text for x in toks[i + 8:_close(toks, i + 1)] if x.text.startswith(("DT_", "FORMAT_"))]
            if len(value) == 1:
                found.setdefault(t[0].text, value * len(found[t[2].text]))
    return found


def _dtype_maps(toks: list[Token]) -> dict[str, dict[str, str]]:
    """Functions of the file that map one ge dtype to another (``inline ge::DataType F(ge::DataType d)
    { switch (d) { case ge::DT_BF16: return ge::DT_FLOAT; ... } }``): {F: {DT_in: DT_out}}."""
    maps: dict[str, dict[str, str]] = {}
    for i in range(len(toks) - 1):
        if toks[i].kind != "identifier" or toks[i + 1].text != "(":
            continue
        body = _close(toks, i + 1) + 1
        if body >= len(toks) or toks[body].text != "{":
            continue
        pairs: dict[str, str] = {}
        keys: list[str] = []  # case labels falling through to the next return
        for j in range(body, _close(toks, body)):
            if toks[j].text in ("case", "return") and j + 3 < len(toks):
                dt = next((t.text for t in toks[j + 1:j + 4] if t.text.startswith("DT_")), "")
                if toks[j].text == "case":
                    keys.append(dt)
                elif dt:
                    pairs.update(dict.fromkeys(keys, dt))
                    keys = []
        if pairs:
            maps[toks[i].text] = pairs
    return maps


def _mapped_lists(toks: list[Token], found: dict[str, list[str]]) -> None:
    """``std::for_each(src.cbegin(), src.cend(), [&dst](ge::DataType d){ dst.push_back(F(d)); })``:
    `dst` is `src` mapped through the file's dtype function F (the Foreach skeletons build their
    scalar inputs' dtype lists so at run time); added to `found`."""
    maps = _dtype_maps(toks)
    for i in range(len(toks) - 3):
        if toks[i].text != "for_each" or toks[i + 1].text != "(" or toks[i + 2].text not in found:
            continue
        args = toks[i + 2:_close(toks, i + 1)]
        for k in range(len(args) - 5):
            dst, fn = args[k].text, args[k + 4].text
            if (args[k + 1].text, args[k + 2].text, args[k + 3].text) == (".", "push_back", "(") \
                    and fn in maps and dst not in found:
                mapped = [maps[fn].get(d, "DT_UNDEFINED") for d in found[toks[i + 2].text]]
                found[dst] = mapped


def _enumerators(args: list[Token], prefix: str, variables: dict[str, list[str]]) -> tuple[str, ...] | None:
    """The ge enumerators an argument lists, inline or through a variable; None if unresolved."""
    inline = [t.text for t in args if t.text.startswith(prefix)]
    if inline:
        return tuple(inline)
    named = [t.text for t in args if t.kind == "identifier"]
    if len(named) == 1 and named[0] in variables:
        return tuple(x for x in variables[named[0]] if x.startswith(prefix))
    return None


def _default(args: list[Token]) -> str | None:
    if not args:
        return None
    text = "".join(t.text for t in args)
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if len(args) == 1 and args[0].kind == "string_literal":
        return text.strip('"')
    if text and text[-1] in "fF" and text[:-1].replace(".", "", 1).lstrip("-").isdigit():
        text = text[:-1]
    return text


def parse_opdef(source: Source) -> OpDefSpec:
    """The prototype `source` registers. A name declared again (a second AICore config) counts
    once, as first declared."""
    toks = source.tokens()
    variables = _list_variables(toks)
    inputs: list[TensorDecl] = []
    outputs: list[TensorDecl] = []
    attrs: list[AttrDecl] = []
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for i in range(1, len(toks) - 2):
        kind = toks[i].text
        if (kind not in ("Input", "Output", "Attr") or toks[i - 1].text not in (".", "->")
                or toks[i + 1].text != "(" or toks[i + 2].kind != "string_literal"):
            continue
        name = toks[i + 2].text.strip('"')
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        line = toks[i].line
        chain = _chain(toks, i + 1)
        methods = {m: args for m, args in chain}
        if kind == "Attr":
            setters = [(m, a) for m, a in chain if m in ATTR_SETTERS]
            attr_type = ATTR_SETTERS[setters[0][0]] if setters else ""
            default = _default(setters[0][1]) if setters else None
            # no AttrType and a setter without a value (`Attr("n").Int()`): nothing to default to
            required = (any(t.text == "REQUIRED" for t in methods.get("AttrType", []))
                        or ("AttrType" not in methods and default is None))
            if not attr_type:
                problems.append(f"attribute {name!r} (line {line}): no type setter "
                                f"({', '.join(ATTR_SETTERS)}) in its declaration")
            elif default is None and not required:
                problems.append(f"attribute {name!r} (line {line}): optional without a default")
            attrs.append(AttrDecl(name, attr_type, required, default, line))
            continue
        param = next((t.text for t in methods.get("ParamType", []) if t.text in PARAM_TYPES), "")
        dtypes = _enumerators(methods.get("DataType", []), "DT_", variables)
        formats = _enumerators(methods.get("Format", []), "FORMAT_", variables)
        what = f"{kind.lower()} {name!r} (line {line})"
        if not param:
            problems.append(f"{what}: no ParamType(REQUIRED | OPTIONAL | DYNAMIC)")
        if not dtypes:
            problems.append(f"{what}: its DataType list is missing or not resolvable in this file")
        if not formats:
            problems.append(f"{what}: its Format list is missing or not resolvable in this file")
        if dtypes and formats and len(dtypes) != len(formats):
            problems.append(f"{what}: {len(dtypes)} data types but {len(formats)} formats")
        unknown = [d for d in (*(dtypes or ()), *(formats or ()))
                   if d not in GE_DTYPES and d not in GE_FORMATS]
        if unknown:
            problems.append(f"{what}: no op JSON name for {', '.join(sorted(set(unknown)))}")
        decl = TensorDecl(name, param, dtypes or (), formats or (), "Scalar" in methods, line)
        (inputs if kind == "Input" else outputs).append(decl)
    if not outputs:
        problems.append(NO_OUTPUT)
    combos = {len(t.dtypes) for t in (*inputs, *outputs) if t.dtypes}
    if len(combos) > 1:
        problems.append(f"the tensors declare different numbers of dtype combinations: {sorted(combos)}")
    return OpDefSpec(tuple(inputs), tuple(outputs), tuple(attrs), tuple(problems))


def op_json(spec: OpDefSpec, op_type: str) -> str:
    """msOpGen's op prototype for `spec`: every dtype combination and format as declared."""

    def desc(t: TensorDecl) -> dict[str, object]:
        return {"name": t.name, "param_type": t.param_type.lower(),
                "format": [GE_FORMATS.get(f, f) for f in t.formats],
                "type": [GE_DTYPES.get(d, d) for d in t.dtypes]}

    def attr(a: AttrDecl) -> dict[str, object]:
        out: dict[str, object] = {"name": a.name, "param_type": "required" if a.required else "optional",
                                  "type": a.attr_type}
        if a.default is not None:
            out["default_value"] = a.default
        return out

    body = {
        "op": op_type,
        "language": "cpp",
        "input_desc": [desc(t) for t in spec.inputs],
        "output_desc": [desc(t) for t in spec.outputs],
        "attr": [attr(a) for a in spec.attrs],
    }
    return json.dumps([body], indent=4) + "\n"


def survey(root: Path) -> tuple[int, int, Counter[str], dict[str, tuple[str, ...]]]:
    """(operators whose skeleton OpDef is complete, operators, problem kinds, problems by
    operator) over an NPUKernelBench checkout's ``tasks/level*/<Category>/<Op>/question/op_host``."""
    ops = sorted(p for p in Path(root).glob("tasks/level*/*/*") if p.is_dir())
    kinds: Counter[str] = Counter()
    failing: dict[str, tuple[str, ...]] = {}
    for op in ops:
        hosts = sorted((op / "question" / "op_host").glob("*.cpp"))
        problems = ((f"{len(hosts)} op_host sources, not one",) if len(hosts) != 1 else
                    parse_opdef(Source(hosts[0].read_text(encoding="utf-8", errors="replace"))).problems)
        if problems:
            failing[op.relative_to(root).as_posix()] = problems
            kinds.update({p.split(": ", 1)[-1] for p in problems})
    return len(ops) - len(failing), len(ops), kinds, failing


def main(argv: list[str]) -> int:
    """`python -m sagekernel.targets.ascendc.opdef ROOT`: how many skeletons give a complete op JSON."""
    if len(argv) != 1:
        print("usage: python -m sagekernel.targets.ascendc.opdef NPUKERNELBENCH_ROOT", file=sys.stderr)
        return 2
    complete, total, kinds, failing = survey(Path(argv[0]))
    for op, problems in failing.items():
        print(f"{op}: {'; '.join(problems)}")
    print(f"{complete} of {total} operators: the skeleton's OpDef parses into a complete op JSON")
    for kind, count in kinds.most_common():
        print(f"  {count} operator(s): {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["ATTR_SETTERS", "GE_DTYPES", "GE_FORMATS", "NO_OUTPUT", "AttrDecl", "OpDefSpec", "TensorDecl",
           "main", "op_json", "parse_opdef", "survey"]
