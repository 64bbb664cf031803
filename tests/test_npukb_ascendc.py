"""NPUKernelBench on the Ascend C target (targets/ascendc/benchmark_project.py), without CANN:
the starting project is the task's `question/` skeleton, a candidate has the benchmark's layout
both ways, the lint checks the skeleton's names, and no `answer/` text reaches a prompt. (The
build itself needs CANN: tests/targets_ascendc, npu-marked.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npukb_fixture import ANSWER_MARKER, OPERATORS, write_benchmark
from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.names import op_names
from sagekernel.tasks.loader import load_dir

#: A skeleton as the benchmark writes one (question/op_host, question/op_kernel): OpDef names x, y.
HOST_SKELETON = """#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {
static ge::graphStatus TilingFunc(gert::TilingContext *context)
{
    context->SetBlockDim(platform_ascendc::PlatformAscendCManager::GetInstance()->GetCoreNumAiv());
    return ge::GRAPH_SUCCESS;
}
}

namespace ops {
class SqrtX : public OpDef {
public:
    explicit SqrtX(const char* name) : OpDef(name)
    {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND});
        this->AICore().SetTiling(optiling::TilingFunc);
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(SqrtX);
}
"""
KERNEL_SKELETON = """#include "kernel_operator.h"
using namespace AscendC;

extern "C" __global__ __aicore__ void sqrt_x(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling)
{

}
"""
TILING = """#ifndef SQRT_X_TILING_H
#define SQRT_X_TILING_H
#include "register/tilingdata_base.h"
namespace optiling {
BEGIN_TILING_DATA_DEF(SqrtXTilingData)
  TILING_DATA_FIELD_DEF(uint32_t, totalLength);
END_TILING_DATA_DEF;
REGISTER_TILING_DATA_CLASS(SqrtX, SqrtXTilingData)
}
#endif
"""
HOST = HOST_SKELETON.replace(
    "context->SetBlockDim(",
    "uint32_t n = context->GetInputShape(0)->GetStorageShape().GetShapeSize();\n    (void)n;\n"
    "    context->SetBlockDim(").replace(
    '#include "register', '#include "sqrt_x_tiling.h"\n#include "register', 1)
KERNEL = KERNEL_SKELETON.replace("{\n\n}", "{\n    GET_TILING_DATA(t, tiling);\n    (void)t;\n}")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = ("level1/Math/SqrtX", "level2/Activation/ScaledGelu")
    root = write_benchmark(tmp_path_factory.mktemp("npukb-ascendc") / "NPUKernelBench",
                           {k: v for k, v in OPERATORS.items() if k in chosen})
    question = root / "tasks" / "level1" / "Math" / "SqrtX" / "question"
    (question / "op_host" / "sqrt_x.cpp").write_text(HOST_SKELETON, encoding="utf-8")
    (question / "op_kernel" / "sqrt_x.cpp").write_text(KERNEL_SKELETON, encoding="utf-8")
    (question / "api_desc.md").write_text("# SqrtX (a copy of the specification)\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tasks(bench: Path) -> dict:
    report = load_dir(bench)
    assert not report.problems, report.problems
    return {t.name: t for t in report.tasks}


def _question(bench: Path, rel: str) -> dict[str, str]:
    question = bench / "tasks" / rel / "question"
    return {p.relative_to(question).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(question.rglob("*.cpp"))}


def test_the_starting_project_is_the_skeleton_and_the_files_are_the_benchmark_layout(bench, tasks) -> None:
    from sagekernel.agent.prompt import Prompts
    from sagekernel.targets import get_target
    from sagekernel.targets.ascendc.benchmark_project import starting_project

    target = get_target("ascendc")
    for name, rel, kernel in (("SqrtX", "level1/Math/SqrtX", "sqrt_x"),
                              ("ScaledGelu", "level2/Activation/ScaledGelu", "scaled_gelu")):
        task = tasks[name]
        skeleton = _question(bench, rel)
        assert starting_project(task) == skeleton  # its source files exactly; api_desc.md is the spec
        assert [f.path for f in target.files(task)] == [
            f"op_host/{kernel}_tiling.h", f"op_host/{kernel}.cpp", f"op_kernel/{kernel}.cpp"]
        system = Prompts().system(target, task)
        for text in skeleton.values():
            assert text.rstrip("\n") in system  # verbatim, as the model receives it
        assert ANSWER_MARKER not in system and "answer/" not in system
    contract = target.contract(tasks["SqrtX"])
    assert "OP_ADD(SqrtX);" in contract and "aclnnSqrtX" in contract and "SqrtXCustom" not in contract
    assert ('extern "C" __global__ __aicore__ void sqrt_x(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, '
            'GM_ADDR tiling);') in contract  # the skeleton's entry, not in0/out0


def test_a_candidate_round_trips_through_the_benchmark_layout(tmp_path: Path, tasks) -> None:
    from sagekernel.targets.ascendc.benchmark_project import candidate_paths, read_candidate
    from sagekernel.targets.ascendc.project import write_candidate

    task = tasks["SqrtX"]
    paths = candidate_paths(task)
    candidate = Candidate(dict(zip(paths, (TILING, HOST, KERNEL), strict=True)))
    write_candidate(tmp_path / "src", candidate)
    # where framework/batch_compile.py writes the model's three files
    for rel, text in (("op_host/sqrt_x_tiling.h", TILING), ("op_host/sqrt_x.cpp", HOST),
                      ("op_kernel/sqrt_x.cpp", KERNEL)):
        assert (tmp_path / "src" / rel).read_text(encoding="utf-8") == text
    (tmp_path / "src" / "CMakeLists.txt").write_text("# the flow's own file: not the candidate's\n")
    back, missing = read_candidate(tmp_path / "src", paths, op_names(task))
    assert back == candidate and back.digest == candidate.digest and missing == []
    (tmp_path / "src" / "op_host" / "sqrt_x_tiling.h").unlink()
    assert read_candidate(tmp_path / "src", paths, op_names(task))[1] == []  # the header is named freely
    (tmp_path / "src" / "op_host" / "sqrt_x.cpp").unlink()
    assert read_candidate(tmp_path / "src", paths, op_names(task))[1] == [
        "op_host/*.cpp (a host source with the OpDef, e.g. op_host/sqrt_x.cpp)"]
    (tmp_path / "src" / "op_host" / "sqrt_x.cpp").write_text(HOST, encoding="utf-8")
    # a helper file of the benchmark's projects (its answers split code so) travels with it
    write_candidate(tmp_path / "src", Candidate({"op_host/sqrt_x_tiling.h": TILING,
                                                 "op_kernel/sqrt_x_common.h": "#pragma once\n"}))
    back, _ = read_candidate(tmp_path / "src", paths, op_names(task))
    assert sorted(back.files) == sorted([*paths, "op_kernel/sqrt_x_common.h"])
    from sagekernel.targets.ascendc.config import AscendConfig
    from sagekernel.targets.ascendc.project import project_files

    built = project_files(back, task, AscendConfig(), "framework")
    assert "project/op_kernel/sqrt_x_common.h" in built and "project/CMakeLists.txt" not in built
    with pytest.raises(ValueError, match="outside"):
        write_candidate(tmp_path / "x", Candidate({"../escape.cpp": "int x;"}))


def test_the_lint_checks_the_skeletons_names(tasks) -> None:
    from sagekernel.targets import get_target

    target, task = get_target("ascendc"), tasks["SqrtX"]
    paths = [f.path for f in target.files(task)]
    good = Candidate(dict(zip(paths, (TILING, HOST, KERNEL), strict=True)))
    assert [f for f in target.lint(good, task) if f.rule in ("names", "file_set")] == []
    including = KERNEL.replace("using namespace", '#include "sqrt_x_common.h"\nusing namespace')
    helped = Candidate({**good.files, "op_kernel/sqrt_x_common.h": "#pragma once\n", paths[2]: including})
    assert [f for f in target.lint(helped, task) if f.rule in ("names", "file_set", "include")] == []
    renamed = Candidate({**good.files, paths[1]: HOST.replace('Input("x")', 'Input("in0")')})
    assert any("OpDef Inputs are ['in0']" in f.reason for f in target.lint(renamed, task))
    short = Candidate({**good.files, paths[2]: KERNEL.replace("GM_ADDR x, ", "")})
    assert any("takes 3 parameters" in f.reason for f in target.lint(short, task))


def test_sage_eval_takes_a_folder_in_the_benchmark_layout(tmp_path: Path, bench, tasks) -> None:
    from sagekernel.cli import app
    from sagekernel.targets.ascendc.benchmark_project import candidate_paths
    from sagekernel.targets.ascendc.project import write_candidate

    module = bench / "tasks" / "level1" / "Math" / "SqrtX" / "validation" / "module.py"
    folder = tmp_path / "from_the_flow"
    write_candidate(folder, Candidate(dict(zip(candidate_paths(tasks["SqrtX"]), (TILING, HOST, KERNEL),
                                                strict=True))))
    judged = CliRunner().invoke(app, ["eval", str(module), str(folder), "--target", "ascendc", "--json"])
    verdict = json.loads(judged.stdout)
    # the three files were taken: with CANN the build runs; without it the verdict stops at the
    # device, never at "the reply is missing the file(s)"
    assert "missing the file" not in verdict["message"], verdict["message"]
    assert verdict["stage"] != "parse" or "cannot run on 'npu' here" in verdict["message"]
    (folder / "op_kernel" / "sqrt_x.cpp").unlink()
    refused = CliRunner().invoke(app, ["eval", str(module), str(folder), "--target", "ascendc"])
    assert refused.exit_code != 0
    assert "without op_kernel/sqrt_x.cpp" in refused.output + str(refused.exception)


def test_a_reply_in_the_benchmarks_own_format_gives_the_three_files(tasks) -> None:
    """framework/kernel_parser.py's full-mode tags: `=== op_host/<k>_tiling.h ===` then a cpp block.
    op_host/sqrt_x.cpp and op_kernel/sqrt_x.cpp share a file name: each goes to its own path."""
    from sagekernel.agent.files import fenced_blocks, pick_files
    from sagekernel.targets import get_target

    paths = [f.path for f in get_target("ascendc").files(tasks["SqrtX"])]
    reply = "\n".join(f"================== {p} ==================\n```cpp\n{text}```\n"
                      for p, text in zip(paths, (TILING, HOST, KERNEL), strict=True))
    files, unknown = pick_files(fenced_blocks(reply)[0], paths)
    assert files == dict(zip(paths, (TILING, HOST, KERNEL), strict=True)) and unknown == []


def _split(host: str) -> dict[str, str]:
    """A host side split as 15 of the benchmark's expert projects split theirs: the OpDef in
    `<k>_def.cpp`, the tiling function in `<k>_tiling.cpp`, the tiling header under another name."""
    cut = host.index("namespace ops {")
    tiling = host[:cut].replace('#include "sqrt_x_tiling.h"', '#include "sqrt_tiling_data.h"')
    opdef = '#include "register/op_def_registry.h"\nnamespace optiling {\n' \
            "ge::graphStatus TilingFunc(gert::TilingContext *context);\n}\n" + host[cut:]
    return {"op_host/sqrt_tiling_data.h": TILING, "op_host/sqrt_x_tiling.cpp": tiling,
            "op_host/sqrt_x_def.cpp": opdef, "op_kernel/sqrt_x.cpp": KERNEL}


def test_a_split_host_side_and_a_free_tiling_header_plan_as_the_benchmark_builds_them(
        tmp_path: Path, tasks) -> None:
    from sagekernel.targets import get_target
    from sagekernel.targets.ascendc.config import AscendConfig
    from sagekernel.targets.ascendc.plan import plan_report
    from sagekernel.targets.ascendc.project import STUB_NOTE, project_files, write_candidate

    target, task = get_target("ascendc"), tasks["SqrtX"]
    split = Candidate(_split(HOST))
    assert target.missing_files(task, split) == []
    assert [f.reason for f in target.lint(split, task)] == []
    # the OpDef is checked in the file that holds it, and the tiling fields in the renamed header
    renamed = Candidate({**split.files, "op_host/sqrt_x_def.cpp":
                         split.files["op_host/sqrt_x_def.cpp"].replace('Input("x")', 'Input("in0")')})
    assert any(f.reason.startswith("op_host/sqrt_x_def.cpp: OpDef Inputs are ['in0']")
               for f in target.lint(renamed, task))
    # the renamed header is the tiling header: a field the kernel reads and no host source sets
    unset = Candidate({**split.files, "op_kernel/sqrt_x.cpp": KERNEL.replace(
        "(void)t;", "uint32_t n = t.totalLength; (void)n;")})
    assert any("reads totalLength, but" in f.reason for f in target.lint(unset, task))
    # msOpGen's stubs at the paths the project leaves free are emptied, so they register nothing
    built = project_files(split, task, AscendConfig(), "framework")
    for stub in ("project/op_host/sqrt_x.cpp", "project/op_host/sqrt_x_tiling.h"):
        assert built[stub].startswith(f"// {STUB_NOTE}") and "OP_ADD" not in built[stub]
    assert built["project/op_host/sqrt_x_def.cpp"] == split.files["op_host/sqrt_x_def.cpp"]
    whole = Candidate(dict(zip([f.path for f in target.files(task)], (TILING, HOST, KERNEL), strict=True)))
    assert not any(STUB_NOTE in t for t in project_files(whole, task, AscendConfig(), "framework").values())
    # `sage eval --plan` on the folder: every file given, the stubs named, no finding
    write_candidate(tmp_path / "answer", split)
    report = plan_report(task, [tmp_path / "answer"], workdir=tmp_path / "wd", target=target)
    assert report["lint"] == [] and not report["build"]["problems"]
    assert report["files"]["op_host/sqrt_x_def.cpp"] == "given"
    assert report["files"]["op_host/sqrt_x.cpp"].startswith("replaced msOpGen stub")
    # what the benchmark's build cannot do without is still refused
    no_host = Candidate({p: t for p, t in split.files.items() if not p.endswith(".cpp") or "kernel" in p})
    assert target.missing_files(task, no_host) == [
        "op_host/*.cpp (a host source with the OpDef, e.g. op_host/sqrt_x.cpp)"]
    assert any("missing file op_host/*.cpp" in f.reason for f in target.lint(no_host, task))
    no_kernel = Candidate({p: t for p, t in split.files.items() if not p.startswith("op_kernel/")})
    assert target.missing_files(task, no_kernel) == ["op_kernel/sqrt_x.cpp"]


@pytest.mark.slow
def test_the_benchmarks_expert_projects_plan() -> None:
    """Every expert answer/0 of a checkout through the folder reader, lint and build plan
    (scripts/npukb_answer_plans.py; trusted side: answers are read here as candidates only)."""
    import os
    import subprocess
    import sys

    root = os.environ.get("SAGE_NPUKERNELBENCH")
    if not root:
        pytest.skip("SAGE_NPUKERNELBENCH is not set (a checkout of weich97/NPUKernelBench)")
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(repo / "scripts" / "npukb_answer_plans.py"), root],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(repo / "src")},
                         check=True).stdout
    counts = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert counts.get("layout refused", "0") == "0", out
    assert int(counts["static checks clean"]) >= 140, out
