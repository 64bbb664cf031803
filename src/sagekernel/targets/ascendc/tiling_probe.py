"""The kernel-only tiling function run on the evaluation shapes and next to them (paper C.3: tiling
must follow the sizes). Needs only a host C++ compiler: the model's `Compute<Op>Tiling` is plain C++.

The function is compiled with a driver SAGE writes, and run once, sandboxed (it is the model's
code), for every shape of the task (the timed one and the held-out ones) and for neighbours of
each (every size +1, and doubled plus 3), at the core count and UB size of a 910B. For each the
plan must:
- launch 1..coreNum blocks;
- when it uses the contract's partition (formerNum / formerLength / tailLength), cover every
  element once, up to each core's rounding to a 32-element block:
  totalLength <= formerNum * formerLength + (usedCoreNum - formerNum) * tailLength
             < totalLength + usedCoreNum * 32.
A tiling fixed for the timed shape (`40 x 1600` for 64 x 1000) fails on the others.
What a run prints is the model's to forge; this check rejects, it never vouches: the held-out
shapes at run time stay the judge.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sagekernel import sandbox
from sagekernel.seam import LintFinding
from sagekernel.targets.ascendc.contract import kernel_only_fields
from sagekernel.targets.ascendc.names import op_names
from sagekernel.targets.ascendc.skeleton import plain_tiling_header
from sagekernel.tasks.task import Task

RULE = "tiling_behaviour"
CORES, UB_BYTES = 40, 192 * 1024  # a 910B2: 40 AIV cores (48 on B1), 192 KB UB
SLACK_PER_CORE = 32
PARTITION = ("formerNum", "formerLength", "tailLength")


@dataclass(frozen=True)
class Plan:
    shape: dict[str, int]
    total: int
    used: int
    former_num: int
    former_len: int
    tail_len: int


def probe_shapes(task: Task) -> list[dict[str, int]]:
    out: list[dict[str, int]] = []
    for shape in task.all_shapes():
        for variant in (
            shape,
            {k: v + 1 for k, v in shape.items()},
            {k: 2 * v + 3 for k, v in shape.items()},
        ):
            if variant not in out:
                out.append(variant)
    return out


def driver(task: Task, shapes: list[dict[str, int]]) -> str:
    n = op_names(task)
    fields = {f.name for f in kernel_only_fields(task)}
    ints = {k: int(v) for k, v in task.attrs.items() if not isinstance(v, float) and k in fields}
    floats = {k: float(v) for k, v in task.attrs.items() if isinstance(v, float) and k in fields}
    total = " * ".join(f"t.{d}" for d in task.outputs[0].dims) or "1"
    lines = [
        "#include <cstdio>",
        "#include <cstdlib>",
        f'#include "{n.snake}_tiling.h"',
        f"void Compute{n.op_type}Tiling({n.tiling_struct}& t, uint32_t coreNum, uint64_t ubBytes);",
        "int main()",
        "{",
        '    const char* fd = std::getenv("SAGE_RESULT_FD");',
        '    FILE* out = fd ? fdopen(std::atoi(fd), "w") : stdout;',
    ]
    for i, shape in enumerate(shapes):
        lines += ["    {", f"        {n.tiling_struct} t{{}};"]
        lines += [f"        t.{k} = {v};" for k, v in shape.items() if k in fields]
        lines += [f"        t.{k} = {v};" for k, v in ints.items()]
        lines += [f"        t.{k} = {v!r}f;" for k, v in floats.items()]
        lines += [
            f"        t.totalLength = {total};",
            f"        Compute{n.op_type}Tiling(t, {CORES}, {UB_BYTES});",
            f'        std::fprintf(out, "R {i} %lld %u %lld %lld %lld\\n", (long long)t.totalLength, '
            "t.usedCoreNum, (long long)t.formerNum, (long long)t.formerLength, (long long)t.tailLength);",
            "    }",
        ]
    lines += ["    std::fflush(out);", "    return 0;", "}", ""]
    return "\n".join(lines)


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


def run_tiling(task: Task, tiling_source: str, timeout_s: float = 60.0) -> tuple[list[Plan] | None, str]:
    """(plans, "") or (None, why it could not run)."""
    cxx = compiler()
    if cxx is None:
        return None, "no host C++ compiler"
    n = op_names(task)
    shapes = probe_shapes(task)
    with tempfile.TemporaryDirectory(prefix="sage-tiling-") as tmp:
        wd = Path(tmp)
        (wd / f"{n.snake}_tiling.h").write_text(plain_tiling_header(task, kernel_side=False))
        (wd / "tiling.cpp").write_text(tiling_source)
        (wd / "driver.cpp").write_text(driver(task, shapes))
        argv = [cxx, "-std=c++17", "-O1", "-I", str(wd), str(wd / "tiling.cpp"), str(wd / "driver.cpp")]
        build = subprocess.run(
            [*argv, "-o", str(wd / "probe")], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if build.returncode != 0:
            return None, "the tiling function does not compile as plain C++: " + build.stderr.strip()[-400:]
        scratch = wd / "scratch"
        scratch.mkdir()
        result = sandbox.run(
            sandbox.SandboxCommand(argv=[str(wd / "probe")], ro_binds=[(str(wd), str(wd))], python=False),
            kind=sandbox.best_kind("auto"),
            limits=sandbox.Limits(wall_s=timeout_s, cpu_s=int(timeout_s)),
            scratch_dir=scratch,
        )
    if result.returncode != 0:
        return (
            None,
            f"the tiling function did not finish (exit {result.returncode}, timed out {result.timed_out})",
        )
    plans = []
    for line in result.channel.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[0] == "R" and parts[1].isdigit() and int(parts[1]) < len(shapes):
            i, total, used, fnum, flen, tlen = (int(x) for x in parts[1:])
            plans.append(Plan(shapes[i], total, used, fnum, flen, tlen))
    if len(plans) != len(shapes):
        return None, f"the probe reported {len(plans)} of {len(shapes)} shapes"
    return plans, ""


def check_plans(plans: list[Plan], uses_partition: bool, path: str) -> list[LintFinding]:
    out = []
    for p in plans:
        where = ", ".join(f"{k}={v}" for k, v in p.shape.items())
        if not 1 <= p.used <= CORES:
            out.append(LintFinding(RULE, f"{path}: at {where} the tiling launches usedCoreNum={p.used} "
                                         f"blocks (1..{CORES} cores available)", None, ""))  # fmt: skip
            continue
        if not uses_partition:
            continue
        covered = p.former_num * p.former_len + (p.used - p.former_num) * p.tail_len
        if not 0 <= p.former_num <= p.used or not p.total <= covered < p.total + p.used * SLACK_PER_CORE:
            out.append(
                LintFinding(
                    RULE,
                    f"{path}: at {where} ({p.total} elements) the plan covers {covered} "
                    f"(formerNum={p.former_num} x {p.former_len} + {p.used - p.former_num} x {p.tail_len}): "
                    "the tiling does not follow the sizes",
                    None,
                    "",
                )
            )
    return out[:3]


def check_tiling_behaviour(
    task: Task, tiling_source: str, assigned: set[str], path: str
) -> list[LintFinding]:
    """Findings, or [] when the plans hold (or the probe cannot run here: no compiler, or the file
    does not compile as plain C++, which the build reports)."""
    plans, why = run_tiling(task, tiling_source)
    if plans is None:  # a crash or a hang on some shape is the model's; a compile failure is the build's
        return [LintFinding(RULE, f"{path}: {why}", None, "")] if "did not finish" in why else []
    return check_plans(plans, set(PARTITION) <= assigned, path)


__all__ = [
    "CORES",
    "RULE",
    "Plan",
    "check_plans",
    "check_tiling_behaviour",
    "driver",
    "probe_shapes",
    "run_tiling",
]
