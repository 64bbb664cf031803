"""NPUKernelBench on the Ascend C target: the op JSON (msOpGen's input) and the runtime's binding
follow the `question/` skeleton's OpDef (targets/ascendc/opdef.py, benchmark_binding.py), not the
task's generic names; SAGE's own tasks render exactly as before. No CANN: nothing is built here."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from npukb_fixture import OPERATORS, write_benchmark
from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.opdef import parse_opdef
from sagekernel.tasks.loader import load_dir

#: SqrtX: two dtype combinations, inline lists.
SQRT_HOST = """#include "register/op_def_registry.h"
namespace ops {
class SqrtX : public OpDef {
public:
    explicit SqrtX(const char* name) : OpDef(name)
    {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND});
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(SqrtX);
}
"""

#: ScaledGelu: lists held in variables (one built by the count constructor), a float attribute
#: with an `f` suffix, a string attribute, a comment that must not count as a declaration.
GELU_HOST = """#include "register/op_def_registry.h"
namespace ops {
class ScaledGelu : public OpDef {
public:
    explicit ScaledGelu(const char* name) : OpDef(name)
    {
        static const std::vector<ge::DataType> dtypes = {ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16};
        std::vector<ge::Format> formats(dtypes.size(), ge::FORMAT_ND);
        // this->Input("old").ParamType(REQUIRED);
        this->Input("x").ParamType(REQUIRED).DataType(dtypes).Format(formats);
        this->Output("y").ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_BF16}).Format(formats);
        this->Attr("scale").AttrType(OPTIONAL).Float(1.0f);
        this->Attr("mode").AttrType(OPTIONAL).String("none");
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(ScaledGelu);
}
"""


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    chosen = ("level1/Math/SqrtX", "level2/Activation/ScaledGelu", "level1/Comparison/EqualX")
    root = write_benchmark(tmp_path_factory.mktemp("npukb-opdef") / "NPUKernelBench",
                           {k: v for k, v in OPERATORS.items() if k in chosen})
    for rel, op, text in (("level1/Math/SqrtX", "sqrt_x", SQRT_HOST),
                          ("level2/Activation/ScaledGelu", "scaled_gelu", GELU_HOST)):
        (root / "tasks" / rel / "question" / "op_host" / f"{op}.cpp").write_text(text, encoding="utf-8")
    report = load_dir(root)
    assert not report.problems, report.problems
    return {t.name: t for t in report.tasks}


def _op_json(task) -> dict:
    from sagekernel.targets.ascendc.skeleton import op_json

    (spec,) = json.loads(op_json(task))
    return spec


def test_the_op_json_is_the_skeletons_opdef(tasks) -> None:
    spec = _op_json(tasks["SqrtX"])
    assert spec["op"] == "SqrtX"
    assert spec["input_desc"] == [{"name": "x", "param_type": "required", "format": ["ND", "ND"],
                                   "type": ["float", "float16"]}]  # both dtypes, not the task's one
    assert spec["output_desc"] == [{"name": "y", "param_type": "required", "format": ["ND", "ND"],
                                    "type": ["float", "float16"]}]
    assert spec["attr"] == []
    assert "in0" not in json.dumps(spec) and "out0" not in json.dumps(spec)


def test_dtype_lists_in_variables_and_attributes_are_kept(tasks) -> None:
    spec = _op_json(tasks["ScaledGelu"])
    assert [d["name"] for d in spec["input_desc"]] == ["x"]
    assert spec["input_desc"][0]["type"] == ["float", "float16", "bfloat16"]
    assert spec["input_desc"][0]["format"] == ["ND", "ND", "ND"]
    assert spec["output_desc"][0]["type"] == ["float16", "float16", "bfloat16"]
    assert spec["attr"] == [
        {"name": "scale", "param_type": "optional", "type": "float", "default_value": "1.0"},
        {"name": "mode", "param_type": "optional", "type": "str", "default_value": "none"},
    ]


def test_what_the_parse_cannot_establish_is_a_problem_not_a_guess() -> None:
    complete = parse_opdef(Source(SQRT_HOST))
    assert complete.complete and complete.names() == {"Input": ["x"], "Output": ["y"], "Attr": []}
    unresolved = parse_opdef(Source(GELU_HOST.replace("DataType(dtypes)", "DataType(computed)")))
    assert any("'x'" in p and "DataType list" in p for p in unresolved.problems)
    uneven = parse_opdef(Source(SQRT_HOST.replace("ge::DT_FLOAT, ge::DT_FLOAT16})\n            .Format({ge::"
                                                  "FORMAT_ND, ge::FORMAT_ND});\n        this->Output",
                                                  "ge::DT_FLOAT})\n            .Format({ge::FORMAT_ND});"
                                                  "\n        this->Output")))
    assert any("different numbers of dtype combinations" in p for p in uneven.problems)
    required = parse_opdef(Source(SQRT_HOST.replace("this->AICore()", 'this->Attr("n").Int();\n        '
                                                    'this->Attr("k").AttrType(OPTIONAL).Int();\n'
                                                    "        this->AICore()", 1)))
    got = [(a.name, a.required, a.default) for a in required.attrs]
    assert got == [("n", True, None), ("k", False, None)]
    assert required.problems == ("attribute 'k' (line 12): optional without a default",)
    scalar = parse_opdef(Source(SQRT_HOST.replace(".Format({ge::FORMAT_ND, ge::FORMAT_ND});",
                                                  ".Format({ge::FORMAT_ND, ge::FORMAT_ND}).Scalar();", 1)))
    assert scalar.inputs[0].scalar and not scalar.outputs[0].scalar


def test_the_binding_uses_the_skeletons_names_and_order(tasks) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    task = tasks["SqrtX"]
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert "void run(const at::Tensor& x, at::Tensor& y)" in text
    assert "aclnnSqrtXGetWorkspaceSize(acl_x, acl_y, &workspaceSize, &executor)" in text
    assert "in0" not in text and "out0" not in text


def test_a_scalar_input_is_passed_as_an_acl_scalar(tasks, tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    task = tasks["SqrtX"]
    host = Path(task.benchmark.skeleton["op_host/sqrt_x.cpp"])
    original = host.read_text(encoding="utf-8")
    try:
        host.write_text(original.replace(".Format({ge::FORMAT_ND, ge::FORMAT_ND});",
                                         ".Format({ge::FORMAT_ND, ge::FORMAT_ND}).Scalar();", 1))
        text = aclnn_binding(task)
    finally:
        host.write_text(original, encoding="utf-8")
    assert "aclScalar* acl_x = AclScalarOf(k_x);" in text and "aclDestroyScalar(s);" in text
    assert "aclTensor* acl_x" not in text


def test_attributes_bind_with_the_opdefs_types_and_mismatches_refuse_the_build(tasks, tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
    from sagekernel.targets.ascendc.config import AscendConfig
    from sagekernel.targets.ascendc.plans import build_plan
    from sagekernel.targets.ascendc.target import AscendCTarget
    from sagekernel.targets.base import BuildResult

    task = tasks["ScaledGelu"]  # task: in0 float32 -> out0 float16, attrs {"scale": 1.5}, mode a string
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    built = BuildResult(True, "x", {"module": tmp_path / "m.so"}, {"plan": {"workdir": str(tmp_path)}})
    argv = AscendCTarget().runtime(built, task.group_task(1), "npu").argv
    assert "void run(const at::Tensor& x, at::Tensor& y, double scale, std::string mode)" in text
    assert "aclnnScaledGeluGetWorkspaceSize(acl_x, static_cast<double>(scale), s_mode.data(), acl_y," in text
    assert json.loads(argv[argv.index("--attrs") + 1]) == ["scale"]  # the numbers the harness sends
    # run()'s attributes: the harness's value 0 (an attributes trial's draw reaches it) and case1's mode
    assert json.loads(argv[argv.index("--attr-layout") + 1]) == [0, {"value": "tanh"}]
    host = Path(task.benchmark.skeleton["op_host/scaled_gelu.cpp"])
    original = host.read_text(encoding="utf-8")
    mode = '        this->Attr("mode").AttrType(OPTIONAL).String("none");\n'
    try:
        host.write_text(original.replace(mode, mode + '        this->Attr("k").AttrType(REQUIRED).Int();\n'))
        problems = binding_problems(task)
        candidate = Candidate({"op_host/scaled_gelu.cpp": "//\n"})
        plan = build_plan(candidate, task, tmp_path, device="npu", config=AscendConfig())
        two = "{ge::DT_FLOAT16, ge::DT_BF16}"
        host.write_text(original.replace("{ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16}", two)
                        .replace("{ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_BF16}", two))
        undeclared = binding_problems(task)
    finally:
        host.write_text(original, encoding="utf-8")
    assert "attribute 'k': no task argument of that name and no OpDef default" in " ".join(problems)
    assert set(problems) <= set(plan.problems)  # the build refuses with the reason
    assert any("input 'x': the task's float32 is neither the OpDef's DT_FLOAT16" in p for p in undeclared)


def test_a_skeleton_without_an_opdef_is_a_plan_problem(tasks, tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.config import AscendConfig
    from sagekernel.targets.ascendc.plans import build_plan

    task = tasks["EqualX"]  # the fixture's skeleton is a comment: no OpDef in it
    plan = build_plan(Candidate({}), task, tmp_path, device="npu", config=AscendConfig())
    assert "skeleton OpDef: the OpDef declares no Output" in plan.problems


#: Digests of what the Ascend C target renders for SAGE's own tasks (project files on the three
#: build paths, op JSON and bindings included, and the runtime's --attrs/--sizes/--dims), taken
#: from the code before the benchmark OpDef landed (commit 2ed2607): a non-benchmark task must
#: render byte for byte as before. A deliberate change to that rendering updates these values.
BEFORE = {
    "addcdiv/full": "345b674796b8ff54",
    "addcdiv/kernel-only": "7a97cf896e95af4a",
    "arange/full": "b9ce6a0c705585db",
    "arange/kernel-only": "6e47cb77468b4a77",
    "eye/full": "0f3f0762374696dd",
    "eye/kernel-only": "30c88ce5941af880",
    "clip_by_value/full": "c5c628fce878beff",
    "clip_by_value/kernel-only": "291014665bb7ff48",
    "scatter_add/full": "a890dcd8e841acd6",
    "scatter_add/kernel-only": "da5cbfafee6e1fd2",
    "softmax/full": "97619fd035886251",
    "softmax/kernel-only": "444e97db43e94b71",
    "grouped_matmul/full": "c9d716d5b4a15f4e",
    "grouped_matmul/kernel-only": "c9d716d5b4a15f4e",
}


def test_sages_own_tasks_render_exactly_as_before() -> None:
    from sagekernel.targets.ascendc.config import AscendConfig
    from sagekernel.targets.ascendc.project import project_files
    from sagekernel.targets.ascendc.target import AscendCTarget
    from sagekernel.targets.base import BuildResult
    from sagekernel.tasks.suites import find_task

    now = {}
    for key in BEFORE:
        name, template = key.split("/")
        task = find_task(name)
        config = AscendConfig(template=template)
        target = AscendCTarget(config=config)
        candidate = Candidate({f.path: "// x\n" for f in target.files(task)})
        rendered: dict = {path: project_files(candidate, task, config, path)
                          for path in ("framework", "direct", "twin")}
        built = BuildResult(True, "x", {"module": Path("/w/m.so")}, {"plan": {"workdir": "/w"}})
        argv = target.runtime(built, task, "npu").argv
        rendered["argv"] = {k: argv[argv.index(k) + 1] for k in ("--attrs", "--sizes", "--dims")}
        now[key] = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:16]
    assert now == BEFORE


NPUKB = os.environ.get("SAGE_NPUKERNELBENCH", "")


@pytest.mark.skipif(not (NPUKB and (Path(NPUKB) / "tasks").is_dir()),
                    reason="SAGE_NPUKERNELBENCH does not point at an NPUKernelBench checkout")
def test_a_published_skeleton_gives_its_own_op_json() -> None:
    """Addcdiv as published: four inputs (the last a .Scalar()), three dtypes each."""
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
    from sagekernel.tasks.npukernelbench import load_operator

    task = load_operator(Path(NPUKB) / "tasks/level1/Math/Addcdiv/validation/module.py")
    spec = _op_json(task)
    assert [d["name"] for d in spec["input_desc"]] == ["input_data", "x1", "x2", "value"]
    tensors = spec["input_desc"] + spec["output_desc"]
    assert all(d["type"] == ["float16", "float", "bfloat16"] for d in tensors)
    assert binding_problems(task) == []
    assert ("aclnnAddcdivGetWorkspaceSize(acl_input_data, acl_x1, acl_x2, acl_value, acl_y,"
            in aclnn_binding(task))


def test_the_survey_counts_complete_skeletons(tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.opdef import main, survey

    chosen = ("level1/Math/SqrtX", "level1/Comparison/EqualX")
    root = write_benchmark(tmp_path / "NPUKernelBench", {k: v for k, v in OPERATORS.items() if k in chosen})
    (root / "tasks/level1/Math/SqrtX/question/op_host/sqrt_x.cpp").write_text(SQRT_HOST, encoding="utf-8")
    complete, total, kinds, failing = survey(root)
    assert (complete, total) == (1, 2)
    assert failing == {"tasks/level1/Comparison/EqualX": ("the OpDef declares no Output",)}
    assert kinds == {"the OpDef declares no Output": 1}
    assert main([str(root)]) == 0 and main([]) == 2
