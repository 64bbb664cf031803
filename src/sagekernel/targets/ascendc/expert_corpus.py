"""The static checks on NPUKernelBench's expert `answer/` implementations: the false-rejection test.

NPUKernelBench (github weich97/NPUKernelBench) ships, per operator, a `question/` (the op
definition and an empty kernel: the contract), an `answer/0/` (an expert msOpGen project) and
`validation/test_cases.csv` (the evaluated shapes). Every answer must pass every static check this
target applies -- parse, file set, names and kernel signature against the question, OpDef
inputs / outputs / attributes against the question, tiling-field agreement, and the integrity
rules with the task's forbidden APIs and its evaluated sizes -- with zero rejections. The
repository is never part of SAGE: point SAGE_NPUKERNELBENCH at a checkout (its root, with tasks/).

    python -m sagekernel.targets.ascendc.expert_corpus [ROOT] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sagekernel.seam import LintFinding
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.lint import _POW2, LintSpec, lint_files
from sagekernel.targets.ascendc.names import OpNames, snake_from_camel
from sagekernel.targets.ascendc.settings import BUILTIN_FORBIDDEN
from sagekernel.targets.base import FileSpec

ENV_VAR = "SAGE_NPUKERNELBENCH"


def corpus_root(given: str | None = None) -> Path | None:
    """The checkout's root (it holds tasks/), from the argument or SAGE_NPUKERNELBENCH."""
    value = given or os.environ.get(ENV_VAR)
    if not value:
        return None
    root = Path(value).expanduser()
    return root if (root / "tasks").is_dir() else None


def operators(root: Path) -> list[Path]:
    """Every operator directory with an expert answer, in a stable order."""
    return sorted(p.parent.parent for p in (root / "tasks").glob("level*/*/*/answer/0"))


#: The op-library API layer some answers carry (their own aclnn L2 entry on l0op, from the CANN ops
#: repositories): msOpGen generates that layer for a custom op, SAGE's build never compiles a
#: model-written one, and its file set refuses it. It is set aside (and counted), not checked.
def is_api_layer(path: str, text: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("op_host/") and (
        name.startswith("aclnn_") or "_l0." in name or '#include "opdev/' in text
    )


def read_tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).parts[0] in ("op_host", "op_kernel")
    }


def evaluated_sizes(csv_path: Path) -> dict[int, str]:
    """Sizes in test_cases.csv (shape lists and integer columns) and each shape's element count,
    as the lint's `suspicious` table (no power of two, nothing at or below 16)."""
    values: dict[int, str] = {}
    if not csv_path.is_file():
        return values
    lines = csv_path.read_text(encoding="utf-8", errors="replace").splitlines()
    header = lines[0].split(";") if lines else []
    for line in lines[1:]:
        for column, cell in zip(header, line.split(";"), strict=False):
            if column.strip() in ("case_id", "id"):
                continue
            for shape in re.findall(r"\[([0-9,\s]+)\]", cell) or ([cell] if cell.strip().isdigit() else []):
                dims = [int(x) for x in re.findall(r"\d+", shape)]
                count = 1
                for d in dims:
                    count *= d
                    if d > 16 and d not in _POW2:
                        values.setdefault(d, f"the evaluated size {d} ({column.strip()})")
                if len(dims) > 1 and count > 16 and count not in _POW2:
                    values.setdefault(count, f"the element count {count} of shape [{shape.strip()}]")
    return values


def _opdef_names(host: Source) -> dict[str, list[str]]:
    return {
        kind: [a[0].strip('"') for a, _ in host.macro_invocations(kind) if a and a[0].startswith('"')]
        for kind in ("Input", "Output", "Attr")
    }


@dataclass
class OperatorResult:
    operator: str  # level/category/name
    findings: list[LintFinding] = field(default_factory=list)
    skipped: str = ""  # why this operator could not be checked (its question has no contract)
    api_layer: list[str] = field(default_factory=list)  # files set aside (is_api_layer)

    @property
    def rejected(self) -> bool:
        return bool(self.findings)


def spec_for_answer(
    task_dir: Path, answer: dict[str, str], builtin_forbidden: bool = False
) -> tuple[LintSpec | None, str]:
    """The contract the question states: names, file set, kernel parameters, OpDef names."""
    op_type = task_dir.name
    snake = snake_from_camel(op_type)
    question = read_tree(task_dir / "question")
    q_host = question.get(f"op_host/{snake}.cpp", "")
    q_kernel = question.get(f"op_kernel/{snake}.cpp", "")
    if not q_kernel:
        return None, f"the question has no op_kernel/{snake}.cpp"
    header_path = f"op_host/{snake}_tiling.h"
    registered = Source(answer.get(header_path, "")).macro_invocations("REGISTER_TILING_DATA_CLASS")
    struct = registered[0][0][1] if registered and len(registered[0][0]) == 2 else f"{op_type}TilingData"
    names = OpNames(op_type, snake, struct, f"aclnn{op_type}", f"aclnn_{snake}.h", "", f"sage_{snake}")
    kernel_q = Source(q_kernel)
    params = None
    for fn_node in kernel_q.of_type("function_declarator"):
        if kernel_q.node_text(fn_node.child_by_field_name("declarator")) == snake:
            plist = fn_node.child_by_field_name("parameters")
            params = tuple(kernel_q.node_text(p).split()[-1].lstrip("*&") for p in plist.named_children)
    proto = _opdef_names(Source(q_host)) if q_host else None
    # NPUKernelBench's contract is the question's kernel entry; the host side may be split
    # (<op>.cpp, <op>_def.cpp, <op>_tiling.cpp, ...), so only the files present are named.
    files: tuple[FileSpec, ...] = (
        FileSpec(header_path, "cpp", "tiling"),
        FileSpec(f"op_host/{snake}.cpp", "cpp", "host"),
        FileSpec(f"op_kernel/{snake}.cpp", "cpp", "kernel"),
    )
    files = tuple(f for f in files if f.role == "kernel" or f.path in answer)
    spec = LintSpec(
        names=names,
        template="full",
        files=files,
        # NPUKernelBench forbids no API; SAGE's table is for its own tasks of those names (opt-in)
        forbidden=BUILTIN_FORBIDDEN.get(snake, ()) if builtin_forbidden else (),
        suspicious=evaluated_sizes(task_dir / "validation" / "test_cases.csv"),
        prototype=proto if proto and any(proto.values()) else None,
        kernel_params=params,
        helper_files=True,
    )
    return spec, ""


def check_operator(task_dir: Path, root: Path, builtin_forbidden: bool = False) -> OperatorResult:
    name = task_dir.relative_to(root / "tasks").as_posix()
    answer = read_tree(task_dir / "answer" / "0")
    api = sorted(p for p, text in answer.items() if is_api_layer(p, text))
    answer = {p: t for p, t in answer.items() if p not in api}
    spec, why = spec_for_answer(task_dir, answer, builtin_forbidden)
    if spec is None:
        return OperatorResult(name, skipped=why, api_layer=api)
    return OperatorResult(name, lint_files(answer, spec), api_layer=api)


def check_corpus(root: Path, builtin_forbidden: bool = False) -> list[OperatorResult]:
    return [check_operator(d, root, builtin_forbidden) for d in operators(root)]


def summary(results: list[OperatorResult]) -> dict[str, object]:
    checked = [r for r in results if not r.skipped]
    rejected = [r for r in checked if r.rejected]
    return {
        "operators": len(results),
        "checked": len(checked),
        "skipped": {r.operator: r.skipped for r in results if r.skipped},
        "false_rejections": len(rejected),
        "api_layer_files_set_aside": sum(len(r.api_layer) for r in results),
        "rejected": {r.operator: [f"[{f.rule}] {f.reason}" for f in r.findings] for r in rejected},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sagekernel.targets.ascendc.expert_corpus", description=__doc__
    )
    p.add_argument("root", nargs="?", help=f"NPUKernelBench checkout (default: ${ENV_VAR})")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--builtin-forbidden",
        action="store_true",
        help="also apply SAGE's forbidden-API table to operators that share a built-in task's name",
    )
    a = p.parse_args(argv)
    root = corpus_root(a.root)
    if root is None:
        print(f"no NPUKernelBench checkout: pass its root or set {ENV_VAR}", file=sys.stderr)
        return 2
    report = summary(check_corpus(root, a.builtin_forbidden))
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['checked']} of {report['operators']} expert answers checked; "
            f"{report['false_rejections']} rejected"
        )
        for op, lines in dict(report["rejected"]).items():  # type: ignore[call-overload]
            print(f"  {op}:")
            for line in lines[:5]:
                print(f"    {line}")
    return 0 if report["false_rejections"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "ENV_VAR",
    "OperatorResult",
    "check_corpus",
    "check_operator",
    "corpus_root",
    "operators",
    "summary",
]
