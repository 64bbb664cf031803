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
from dataclasses import dataclass, field

from sagekernel.candidate import Candidate
from sagekernel.seam import LintFinding
from sagekernel.targets.ascendc import integrity, tiling_check
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import (
    TilingField,
    files_for,
    kernel_only_fields,
    kernel_parameters,
    template_of,
)
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.names import OpNames, is_benchmark_task, is_helper_path, op_names
from sagekernel.targets.ascendc.settings import task_settings
from sagekernel.targets.ascendc.skeleton import prototype
from sagekernel.targets.base import FileSpec
from sagekernel.targets.cpu.syntax_names import has_extern_c
from sagekernel.tasks.task import Task

KERNEL_INCLUDES = ("kernel_operator.h", "kernel_tiling/kernel_tiling.h", "kernel_utils.h", "acl/acl.h")
#: Ascend C API headers: high-level (lib/matmul_intf.h, ...), the basic API's per-architecture
#: implementation (impl/dav_c220/...), and the kernel_* API headers.
KERNEL_INCLUDE_PREFIXES = ("lib/", "impl/dav_", "kernel_")
#: CANN infrastructure for host code: op registration, tiling, graph, platform queries, logging
#: and error reporting. Not operator implementations: aclnnop/, aclnn_kernels/, op_api/, ops-*.
HOST_INCLUDE_PREFIXES = (
    "register/", "tiling/", "graph/", "exe_graph/", "platform/", "error/", "log/", "toolchain/",
    "experiment/metadef/", "aclnn/opdev/op_log.h", "opdev/op_log.h", "opdev/op_def.h",
)  # fmt: skip
#: The C++ and C standard library headers (declarations only: they carry no operator code).
STD_HEADERS = frozenset(
    """
    algorithm any array atomic bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes
    climits clocale cmath complex condition_variable cstdarg cstddef cstdint cstdio cstdlib cstring
    ctime cwchar deque exception forward_list fstream functional initializer_list iomanip ios
    iosfwd iostream istream iterator limits list locale map memory mutex new numeric optional
    ostream queue random ratio regex set sstream stack stdexcept streambuf string string_view
    system_error thread tuple type_traits typeindex typeinfo unordered_map unordered_set utility
    valarray variant vector assert.h ctype.h errno.h float.h inttypes.h limits.h math.h stdarg.h
    stdbool.h stddef.h stdint.h stdio.h stdlib.h string.h time.h
    """.split()  # noqa: SIM905 (one word list, kept compact)
)
_POW2 = {1 << k for k in range(64)}


def _finding(rule: str, reason: str, src: Source | None = None, line: int | None = None) -> LintFinding:
    return LintFinding(rule, reason, line, src.line_text(line) if src is not None and line else "")


@dataclass(frozen=True)
class LintSpec:
    """What one operator's files are checked against: built from a task and the configuration
    (`spec_for_task`), or from another contract with the same shape (expert_corpus.py)."""

    names: OpNames
    template: str  # "full" | "kernel-only"
    files: tuple[FileSpec, ...]  # the files the contract names
    forbidden: tuple[str, ...] = ()
    suspicious: dict[int, str] = field(default_factory=dict)  # constant value -> which size it is
    prototype: dict[str, list[str]] | None = None  # OpDef Input / Output / Attr names; None: unchecked
    kernel_params: tuple[str, ...] | None = None  # the kernel entry's parameter names; None: unchecked
    plain_fields: tuple[TilingField, ...] = ()  # kernel-only: the fixed struct
    helper_files: bool = False  # further files under op_host/ and op_kernel/ are allowed (and checked)
    #: tiling fields that carry a size (kernel-only: the size symbols and totalLength); the full
    #: template's are found by data flow from the host's shape queries (integrity.py)
    size_fields: tuple[str, ...] = ()


def spec_for_task(task: Task, config: AscendConfig) -> LintSpec:
    """An NPUKernelBench operator's OpDef names and kernel parameters are its skeleton's
    (benchmark_project.py); other tasks' are derived from the task."""
    from sagekernel.targets.ascendc import benchmark_project as bench

    own_proto = bench.skeleton_prototype(task) if is_benchmark_task(task) else None
    own_params = bench.skeleton_kernel_params(task) if is_benchmark_task(task) else None
    return LintSpec(
        names=op_names(task),
        template=template_of(task, config),
        files=tuple(files_for(task, config)),
        forbidden=task_settings(task).forbidden_apis,
        suspicious=suspicious_literals(task),
        prototype=own_proto if own_proto is not None else prototype(task),
        kernel_params=own_params if own_params is not None else
        tuple(p.split()[-1] for p in kernel_parameters(task)),
        plain_fields=tuple(kernel_only_fields(task)),
        size_fields=(*task.sizes, "totalLength"),
        # the benchmark's projects (its answers, its flow's output) split code into helper files
        helper_files=is_benchmark_task(task),
    )


def role_of(path: str, spec: LintSpec) -> str | None:
    """kernel | host for a file the spec accepts, else None."""
    for f in spec.files:
        if f.path == path:
            return "kernel" if f.role == "kernel" else "host"
    if spec.helper_files and is_helper_path(path):
        return "kernel" if path.startswith("op_kernel/") else "host"
    return None


def check_file_set(files: dict[str, str], spec: LintSpec) -> list[LintFinding]:
    expected = [f.path for f in spec.files]
    from sagekernel.targets.ascendc.names import benchmark_layout_missing  # its kernel and a host source
    lacking = benchmark_layout_missing(files, spec.names) if spec.helper_files else expected
    out = [_finding("file_set", f"missing file {p} (the contract names: {', '.join(expected)})")
           for p in lacking if p not in files]
    out += [
        _finding("file_set", f"unexpected file {p}: write only {', '.join(expected)}")
        for p in files
        if role_of(p, spec) is None
    ]
    out += [_finding("file_set", f"{p} is empty") for p in expected if p in files and not files[p].strip()]
    return out


def check_kernel_entry(
    kernel: Source, path: str, want: tuple[str, ...] | None, names: OpNames
) -> list[LintFinding]:
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
    for node, got in kernel.definitions_of(names.kernel_entry):
        line = kernel.line(node)
        if want is not None and len(got) != len(want):
            out.append(
                _finding(
                    "names",
                    f"{names.kernel_entry} takes {len(got)} parameters; the contract has "
                    f"{len(want)}: {', '.join(want)}",
                    kernel,
                    line,
                )
            )
        if not has_extern_c(kernel.unit.tokens):  # in code: a comment saying so is not linkage
            why = f'{names.kernel_entry} must be declared extern "C" __global__ __aicore__'
            out.append(_finding("names", why, kernel, line))
    return out


def check_opdef(
    host: Source | list[Source], path: str, proto: dict[str, list[str]] | None, names: OpNames
) -> list[LintFinding]:
    """The OpDef class, its OP_ADD and its Input / Output / Attr names, over every host file."""
    hosts = host if isinstance(host, list) else [host]
    out = []
    defining = [
        h
        for h in hosts
        for n in h.of_type("class_specifier")
        if n.child_by_field_name("name") is not None
        and h.node_text(n.child_by_field_name("name")) == names.op_type
    ]
    if not defining:  # a class the parser lost among unknown macros: read it from the tokens
        pattern = re.compile(
            rf"\bclass\s+{re.escape(names.op_type)}\s*(?:final\s*)?:\s*public\s+(?:ops::)?OpDef\b"
        )
        defining = [h for h in hosts if pattern.search(" ".join(t.text for t in h.tokens()))]
    if not defining:
        out.append(_finding("names", f"{path} must define class {names.op_type} : public OpDef"))
    added = [a[0] for h in hosts for a, _ in h.macro_invocations("OP_ADD") if a]
    if names.op_type not in added:
        out.append(
            _finding(
                "names", f"{path} must register OP_ADD({names.op_type}) (found {', '.join(added) or 'none'})"
            )
        )
    source = defining[0] if defining else hosts[0]
    for kind, want in (proto or {}).items():
        # a name listed twice is one prototype entry declared for several configurations
        got = list(
            dict.fromkeys(
                a[0].strip('"') for a, _ in source.macro_invocations(kind) if a and a[0].startswith('"')
            )
        )
        if got != want:
            out.append(
                _finding(
                    "names",
                    f"{path}: OpDef {kind}s are {got or 'none'}; the contract's are "
                    f"{want or 'none'}, in that order",
                )
            )
    return out


def _own_relative(path: str, inc: str, own: set[str]) -> bool:
    """`#include "../x_base.h"` or `"erf/x.h"` naming one of the candidate's own files, resolved
    against the including file's folder (never above op_host/ or op_kernel/)."""
    parts = path.split("/")[:-1]
    for piece in inc.split("/"):
        if piece == "..":
            if len(parts) <= 1:
                return False
            parts.pop()
        elif piece not in ("", "."):
            parts.append(piece)
    return "/".join(parts) in own


def check_includes(
    src: Source, path: str, role: str, own: set[str], forbidden: tuple[str, ...] = ()
) -> list[LintFinding]:
    out = [
        _finding("include", f"#{name} is not allowed: use #include for an allowed header", src, line)
        for name, line in src.file_directives()
    ]
    for inc, line in src.includes():
        base = inc.rsplit("/", 1)[-1]
        if inc.startswith("/") or (".." in inc.split("/") and not _own_relative(path, inc, own)):
            out.append(
                _finding("include", f'#include "{inc}": absolute and parent paths are not allowed', src, line)
            )
            continue
        if inc in own or (base in own and "/" not in inc) or _own_relative(path, inc, own):
            continue
        if role == "kernel":
            ok = inc in KERNEL_INCLUDES or inc.startswith(KERNEL_INCLUDE_PREFIXES) or inc in STD_HEADERS
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


def check_calls(
    src: Source, path: str, forbidden: tuple[str, ...], task_name: str, own: set[str] | None = None
) -> list[LintFinding]:
    """Forbidden APIs and framework / loader names, by every reference (integrity.py); `own`:
    the names every file of the candidate defines (default: this file's)."""
    out = []
    for ref, api in integrity.forbidden_references(src, forbidden, own):
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
        for line in integrity.token_pasting(src, forbidden)
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


def check_literals(
    src: Source, path: str, suspicious: dict[int, str], shape_fields: set[str] | None = None
) -> list[LintFinding]:
    return [
        _finding(
            "hardcoded_shape",
            f"{path}: a constant equal to {suspicious[s.value]} is {s.how}: the code is specialised "
            "to that shape; read shapes from the tiling data (held-out shapes are evaluated)",
            src,
            s.line,
        )
        for s in integrity.specialisations(src, suspicious, shape_fields)
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


def lint_candidate(
    candidate: Candidate, task: Task, config: AscendConfig, *, run_tiling: bool = False
) -> list[LintFinding]:
    """The static checks; with `run_tiling`, the kernel-only tiling function is also run on the
    evaluation shapes and their neighbours (tiling_probe.py: needs only a host C++ compiler)."""
    spec = spec_for_task(task, config)
    findings = lint_files(candidate.files, spec)
    source = candidate.files.get(spec.names.tiling_func_file, "")
    if run_tiling and spec.template == "kernel-only" and source.strip() and not findings:
        from sagekernel.targets.ascendc import tiling_probe

        assigned = tiling_check.assigned_fields(Source(source))
        findings += tiling_probe.check_tiling_behaviour(task, source, assigned, spec.names.tiling_func_file)
    return findings


def lint_files(files: dict[str, str], spec: LintSpec) -> list[LintFinding]:
    """Every static check on one operator's files (no toolchain)."""
    findings = check_file_set(files, spec)
    n = spec.names
    own = {p.rsplit("/", 1)[-1] for p in files} | {f.path.rsplit("/", 1)[-1] for f in spec.files}
    own |= set(files)
    own.add(f"{n.snake}_tiling.h")
    parsed: dict[str, Source] = {}
    for path, text in sorted(files.items()):
        if role_of(path, spec) is not None and text.strip():
            parsed[path] = Source(text)
    defined = set().union(*(integrity.defined_names(src) for src in parsed.values())) if parsed else set()
    shape_fields = integrity.shape_derived_fields(list(parsed.values()), spec.size_fields)
    for path, src in parsed.items():
        role = role_of(path, spec) or "host"
        findings += check_includes(src, path, role, own, spec.forbidden)
        findings += check_calls(src, path, spec.forbidden, n.op_type, defined)
        findings += check_literals(src, path, spec.suspicious, shape_fields)
    kernels = [(src, p) for p, src in parsed.items() if role_of(p, spec) == "kernel"]
    kernels.sort(key=lambda kp: kp[1] != n.kernel_file)
    if kernels:
        entry = next(((s, p) for s, p in kernels if n.kernel_entry in dict(s.function_names())), kernels[0])
        findings += check_kernel_entry(entry[0], entry[1], spec.kernel_params, n)
    hosts = [(src, p) for p, src in parsed.items() if role_of(p, spec) == "host"]
    hosts.sort(key=lambda hp: hp[1] != n.host_file)
    if spec.template == "full":
        from sagekernel.targets.ascendc.names import is_tiling_header

        headers = [(s, p) for s, p in hosts if is_tiling_header(p, files[p], n, spec.helper_files)]
        others = [(s, p) for s, p in hosts if (s, p) not in headers]
        if others:  # named by the file that holds the OpDef, wherever the project put it
            holder = next((p for _, p in others if "OpDef" in files[p]), n.host_file)
            findings += check_opdef([s for s, _ in others], holder, spec.prototype, n)
            for s, p in others:
                findings += check_host_device_memory(s, p)
        if headers and others and kernels:
            findings += tiling_check.check_full_files(headers, others, kernels, n)
    else:
        tiling = parsed.get(n.tiling_func_file)
        kernel = parsed.get(n.kernel_file)
        if tiling is not None:
            entry_fn = f"Compute{n.op_type}Tiling"
            if entry_fn not in dict(tiling.function_names()):
                findings.append(_finding("names", f"{n.tiling_func_file} must define {entry_fn}"))
        if tiling is not None and kernel is not None:
            findings += tiling_check.check_kernel_only(
                tiling, n.tiling_func_file, kernel, n.kernel_file, n, list(spec.plain_fields)
            )
    return findings


__all__ = ["LintSpec", "lint_candidate", "lint_files", "role_of", "spec_for_task", "suspicious_literals"]
