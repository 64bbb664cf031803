"""The Ascend C static checks, run on the model's files before anything is built (no toolchain).

Rules (each finding names one):
- `file_set`: exactly the files the contract names, none empty, nothing else.
- `names`: op type <-> files <-> kernel entry <-> tiling struct <-> OpDef agree (names.py).
- `tiling_fields`: host definition vs kernel reads (tiling_check.py).
- `forbidden_api` (paper C.3, no equivalent high-level substitution): a task can name the Ascend C
  APIs that would implement its core (settings.py); any reference to one or to its
  implementation family -- a call, a macro, an alias, a function pointer, `*Impl` -- is
  rejected, and so is token pasting (integrity.py).
- `framework_call`: no reference to aclnn / torch / torch_npu / ACL runtime names, nor to the
  dynamic loader (dlopen / dlsym) inside the operator: it is measured, so it must not hand the
  work to another implementation.
- `include` (no expert-implementation leakage): includes come from an allow-list per role; no
  absolute or parent-relative paths, nothing from operator libraries, and not the high-level
  API header that implements a forbidden API (`lib/activation/sigmoid.h` for mul_sigmoid).
- `hardcoded_shape` (no hard-coded tiling): a constant expression equal to an evaluation size or a
  product of sizes, where it specialises the code: compared with a run-time value, a case label,
  or stored into a tiling field (integrity.specialisations). Elsewhere such a constant is fine.
- `tiling_behaviour` (kernel-only, where a host compiler exists): the model's tiling function run
  on the evaluation shapes and on shapes next to them; its plan must cover every element
  (tiling_probe.py).
- `host_device_memory` (the paper's GatherV3 case): host tiling reading tensor data
  (`GetInputTensor(..)->GetData`) of an input the OpDef does not declare `ValueDepend`: that
  pointer is device memory, and the host would read garbage or fault.
Reduced precision is not a static rule: the harness's tolerance judges it at run time.
"""

from __future__ import annotations

import re

from sagekernel.candidate import Candidate
from sagekernel.harness.verdict import LintFinding
from sagekernel.targets.ascendc import integrity, tiling_check
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import files_for, kernel_only_fields, kernel_parameters, template_of
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.names import OpNames, op_names
from sagekernel.targets.ascendc.settings import task_settings
from sagekernel.targets.ascendc.skeleton import prototype
from sagekernel.tasks.task import Task

KERNEL_INCLUDES = ("kernel_operator.h", "kernel_tiling/kernel_tiling.h")
KERNEL_INCLUDE_PREFIXES = ("lib/",)  # Ascend C high-level API headers (lib/matmul_intf.h, ...)
HOST_INCLUDE_PREFIXES = ("register/", "tiling/", "graph/", "exe_graph/")
STD_HEADERS = frozenset(
    (
        "cstdint",
        "cstddef",
        "cstring",
        "cmath",
        "climits",
        "cfloat",
        "algorithm",
        "limits",
        "type_traits",
        "utility",
        "numeric",
        "array",
        "vector",
        "string",
        "stdint.h",
        "stddef.h",
        "string.h",
        "math.h",
    )
)
_POW2 = {1 << k for k in range(64)}


def _finding(rule: str, reason: str, src: Source | None = None, line: int | None = None) -> LintFinding:
    return LintFinding(rule, reason, line, src.line_text(line) if src is not None and line else "")


def check_file_set(candidate: Candidate, task: Task, config: AscendConfig) -> list[LintFinding]:
    expected = [f.path for f in files_for(task, config)]
    out = [
        _finding("file_set", f"missing file {p} (the contract names: {', '.join(expected)})")
        for p in expected
        if p not in candidate.files
    ]
    out += [
        _finding("file_set", f"unexpected file {p}: write only {', '.join(expected)}")
        for p in candidate.files
        if p not in expected
    ]
    out += [
        _finding("file_set", f"{p} is empty")
        for p in expected
        if p in candidate.files and not candidate.files[p].strip()
    ]
    return out


def check_kernel_entry(kernel: Source, path: str, task: Task, names: OpNames) -> list[LintFinding]:
    defined = dict(kernel.function_names())
    if names.kernel_entry not in defined:
        return [
            _finding(
                "names",
                f"{path} must define the kernel entry {names.kernel_entry} "
                f"(found functions: {', '.join(defined) or 'none'})",
            )
        ]
    out = []
    for node in kernel.of_type("function_definition"):
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None or kernel.node_text(decl.child_by_field_name("declarator")) != names.kernel_entry:
            continue
        params = decl.child_by_field_name("parameters")
        got = [kernel.node_text(p).split()[-1].lstrip("*&") for p in params.named_children] if params else []
        want = [p.split()[-1] for p in kernel_parameters(task)]
        line = node.start_point[0] + 1
        if len(got) != len(want):
            out.append(
                _finding(
                    "names",
                    f"{names.kernel_entry} takes {len(got)} parameters; the contract has "
                    f"{len(want)}: {', '.join(want)}",
                    kernel,
                    line,
                )
            )
        if 'extern "C"' not in kernel.text:
            out.append(
                _finding(
                    "names",
                    f'{names.kernel_entry} must be declared extern "C" __global__ __aicore__',
                    kernel,
                    line,
                )
            )
    return out


def check_opdef(host: Source, path: str, task: Task, names: OpNames) -> list[LintFinding]:
    out = []
    classes = {
        host.node_text(n.child_by_field_name("name"))
        for n in host.of_type("class_specifier")
        if n.child_by_field_name("name") is not None
    }
    if names.op_type not in classes:
        out.append(_finding("names", f"{path} must define class {names.op_type} : public OpDef"))
    added = [a[0] for a, _ in host.macro_invocations("OP_ADD") if a]
    if names.op_type not in added:
        out.append(
            _finding(
                "names", f"{path} must register OP_ADD({names.op_type}) (found {', '.join(added) or 'none'})"
            )
        )
    for kind, want in prototype(task).items():
        got = [a[0].strip('"') for a, _ in host.macro_invocations(kind) if a and a[0].startswith('"')]
        if got != want:
            out.append(
                _finding(
                    "names",
                    f"{path}: OpDef {kind}s are {got or 'none'}; the contract's are "
                    f"{want or 'none'}, in that order",
                )
            )
    return out


def check_includes(
    src: Source, path: str, role: str, own: set[str], forbidden: tuple[str, ...] = ()
) -> list[LintFinding]:
    out = []
    for inc, line in src.includes():
        base = inc.rsplit("/", 1)[-1]
        if inc.startswith("/") or ".." in inc.split("/"):
            out.append(
                _finding("include", f'#include "{inc}": absolute and parent paths are not allowed', src, line)
            )
            continue
        if inc in own or (base in own and "/" not in inc):
            continue
        if role == "kernel":
            ok = inc in KERNEL_INCLUDES or inc.startswith(KERNEL_INCLUDE_PREFIXES)
        else:
            ok = inc.startswith(HOST_INCLUDE_PREFIXES) or inc in STD_HEADERS
        stem = re.sub(r"[^a-z0-9]", "", base.rsplit(".", 1)[0].lower())
        api = next((a for a in forbidden if stem and stem == re.sub(r"[^a-z0-9]", "", a.lower())), None)
        if ok and api is not None:
            out.append(
                _finding(
                    "include",
                    f'#include "{inc}" is the library header of AscendC::{api}, which this operator '
                    "may not use (it is the operator itself)",
                    src,
                    line,
                )
            )
        elif not ok:
            allowed = (
                ", ".join(KERNEL_INCLUDES) + ", lib/..."
                if role == "kernel"
                else "register/..., tiling/..., graph/..., exe_graph/..., the C++ standard headers"
            )
            out.append(
                _finding(
                    "include",
                    f'#include "{inc}" is outside the allow-list for a {role} file '
                    f"({allowed}, and your own files)",
                    src,
                    line,
                )
            )
    return out


def check_calls(src: Source, path: str, forbidden: tuple[str, ...], task_name: str) -> list[LintFinding]:
    """Forbidden APIs and framework / loader names, by every reference (integrity.py)."""
    out = []
    for ref, api in integrity.forbidden_references(src, forbidden):
        how = "in a macro" if ref.in_macro else "by name"
        shown = f"{ref.qualified_by}::{ref.name}" if ref.qualified_by else ref.name
        out.append(
            _finding(
                "forbidden_api",
                f"{path} reaches {shown} ({how}; the AscendC::{api} family): for {task_name} that API is "
                "the operator itself (equivalent high-level substitution); compose it from "
                "basic vector instructions",
                src,
                ref.line,
            )
        )
    out += [
        _finding(
            "forbidden_api",
            f"{path} pastes tokens (##) in a macro: names built that way cannot be checked; write them out",
            src,
            line,
        )
        for line in integrity.token_pasting(src)
    ]
    seen: set[int] = set()
    for ref, why in integrity.framework_references(src):
        if ref.line in seen:  # `at::softmax` is two names, one use
            continue
        seen.add(ref.line)
        shown = f"{ref.qualified_by}::{ref.name}" if ref.qualified_by else ref.name
        out.append(
            _finding(
                "framework_call",
                f"{path} uses {shown} ({why}): the operator must do the work itself, not reach aclnn, "
                "torch, torch_npu, the ACL runtime or a loaded library",
                src,
                ref.line,
            )
        )
    return out


def suspicious_literals(task: Task) -> dict[int, str]:
    values: dict[int, str] = {}
    for shape in task.all_shapes():
        for s, v in shape.items():
            if v > 16 and v not in _POW2:
                values.setdefault(v, f"the evaluation size {s}={v}")
        for t in (*task.inputs, *task.outputs):
            if len(t.dims) >= 2:
                n = t.numel(shape)
                if n > 16 and n not in _POW2:  # 1024 = 32 x 32 is also an ordinary constant
                    values.setdefault(n, f"the element count of {t.name} ({'*'.join(t.dims)}={n})")
    return values


def check_literals(src: Source, path: str, suspicious: dict[int, str]) -> list[LintFinding]:
    return [
        _finding(
            "hardcoded_shape",
            f"{path}: a constant equal to {suspicious[s.value]} is {s.how}: the code is specialised "
            "to that shape; read shapes from the tiling data (held-out shapes are evaluated)",
            src,
            s.line,
        )
        for s in integrity.specialisations(src, suspicious)
    ]


def check_host_device_memory(host: Source, path: str) -> list[LintFinding]:
    if any(t.text == "ValueDepend" for t in host.tokens()):
        return []
    return [
        _finding(
            "host_device_memory",
            f"{path} reads tensor data with {c.qualified} in host tiling, but no "
            "input is declared ValueDepend: that address is device memory. Pass the value as an "
            "attribute, or mark the input .ValueDepend(REQUIRED)",
            host,
            c.line,
        )
        for c in host.calls()
        if c.name in ("GetData", "GetValue") and "GetInputTensor" in c.qualified
    ]


def lint_candidate(candidate: Candidate, task: Task, config: AscendConfig) -> list[LintFinding]:
    findings = check_file_set(candidate, task, config)
    n = op_names(task)
    settings = task_settings(task)
    specs = files_for(task, config)
    own = {s.path.rsplit("/", 1)[-1] for s in specs} | {f"{n.snake}_tiling.h"}
    suspicious = suspicious_literals(task)
    parsed: dict[str, Source] = {}
    for spec in specs:
        text = candidate.files.get(spec.path, "")
        if not text.strip():
            continue
        src = parsed[spec.path] = Source(text)
        role = "kernel" if spec.role == "kernel" else "host"
        findings += check_includes(src, spec.path, role, own, settings.forbidden_apis)
        findings += check_calls(src, spec.path, settings.forbidden_apis, task.name)
        findings += check_literals(src, spec.path, suspicious)
    kernel = parsed.get(n.kernel_file)
    if kernel is not None:
        findings += check_kernel_entry(kernel, n.kernel_file, task, n)
    if template_of(task, config) == "full":
        header, host = parsed.get(n.tiling_header), parsed.get(n.host_file)
        if host is not None:
            findings += check_opdef(host, n.host_file, task, n)
            findings += check_host_device_memory(host, n.host_file)
        if header is not None and host is not None and kernel is not None:
            findings += tiling_check.check_full(
                header, n.tiling_header, host, n.host_file, kernel, n.kernel_file, n
            )
    else:
        tiling = parsed.get(n.tiling_func_file)
        if tiling is not None:
            entry = f"Compute{n.op_type}Tiling"
            if entry not in dict(tiling.function_names()):
                findings.append(_finding("names", f"{n.tiling_func_file} must define {entry}"))
        if tiling is not None and kernel is not None:
            findings += tiling_check.check_kernel_only(
                tiling, n.tiling_func_file, kernel, n.kernel_file, n, kernel_only_fields(task)
            )
    return findings


__all__ = ["lint_candidate", "suspicious_literals"]
