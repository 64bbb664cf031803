"""NPUKernelBench on the Ascend C target, by class of binding: tensor lists (ParamType(DYNAMIC))
bound as aclTensorList, a case's dtypes reaching the OpDef's dtype combination (lossless input
conversion, widening output cast) and dtype lists a skeleton builds in C++ at run time. Synthetic
skeletons written here (no benchmark file copied); nothing is built or run on an NPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npukb_fixture import OPERATORS, write_benchmark
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.opdef import parse_opdef
from sagekernel.tasks.loader import load_dir

#: A Foreach-style prototype: list input and output, a scalar tensor whose dtype list the OpDef
#: builds at run time through a mapping function (fallthrough case labels included).
LIST_HOST = """#include <algorithm>
#include "register/op_def_registry.h"
namespace ops {
inline ge::DataType ToScalarType(ge::DataType dtype) {
    switch (dtype) {
        case ge::DT_FLOAT16:
        case ge::DT_FLOAT:
            return ge::DT_FLOAT;
        case ge::DT_INT32:
            return ge::DT_INT64;
        default:
            return ge::DT_UNDEFINED;
    }
}
class ForeachAddScalarX : public OpDef {
public:
    explicit ForeachAddScalarX(const char* name) : OpDef(name) {
        std::vector<ge::DataType> list_types = {ge::DT_FLOAT16, ge::DT_FLOAT, ge::DT_INT32};
        std::vector<ge::Format> nd(list_types.size(), ge::FORMAT_ND);
        std::vector<ge::DataType> scalar_types;
        std::for_each(list_types.cbegin(), list_types.cend(),
                      [&scalar_types](ge::DataType d) { scalar_types.push_back(ToScalarType(d)); });
        this->Input("x").ParamType(DYNAMIC).DataType(list_types).Format(nd);
        this->Input("scalar").ParamType(REQUIRED).DataType(scalar_types).Format(nd);
        this->Output("y").ParamType(DYNAMIC).DataType(list_types).Format(nd);
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(ForeachAddScalarX);
}
"""

#: A comparison: two inputs in three dtypes, a bool output (the task's reference returns int32).
COMPARE_HOST = """#include "register/op_def_registry.h"
namespace ops {
class EqualX : public OpDef {
public:
    explicit EqualX(const char* name) : OpDef(name) {
        this->Input("x1").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_INT8, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("x2").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_INT8, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y").ParamType(REQUIRED).DataType({ge::DT_BOOL, ge::DT_BOOL, ge::DT_BOOL})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
    }
};
OP_ADD(EqualX);
}
"""


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    chosen = ("level2/Foreach/ForeachAddScalarX", "level1/Comparison/EqualX")
    root = write_benchmark(tmp_path_factory.mktemp("npukb-binding") / "NPUKernelBench",
                           {k: v for k, v in OPERATORS.items() if k in chosen})
    for rel, op, text in (("level2/Foreach/ForeachAddScalarX", "foreach_add_scalar_x", LIST_HOST),
                          ("level1/Comparison/EqualX", "equal_x", COMPARE_HOST)):
        (root / "tasks" / rel / "question" / "op_host" / f"{op}.cpp").write_text(text, encoding="utf-8")
    report = load_dir(root)
    assert not report.problems, report.problems
    return {t.name: t for t in report.tasks}


def test_a_dtype_list_built_at_run_time_is_read_through_its_mapping_function() -> None:
    spec = parse_opdef(Source(LIST_HOST))
    assert spec.problems == ()
    assert [(t.name, t.param_type, t.dtypes) for t in spec.inputs] == [
        ("x", "DYNAMIC", ("DT_FLOAT16", "DT_FLOAT", "DT_INT32")),
        ("scalar", "REQUIRED", ("DT_FLOAT", "DT_FLOAT", "DT_INT64")),  # fallthrough labels share one return
    ]
    unmapped = parse_opdef(Source(LIST_HOST.replace("ToScalarType(d)", "Unknown(d)")))
    assert ("input 'scalar' (line 24): its DataType list is missing or not resolvable in this file"
            in unmapped.problems)


def test_a_tensor_list_is_bound_as_an_acl_tensor_list_case_by_case(tasks, tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems, runtime_lists
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
    from sagekernel.targets.ascendc.target import AscendCTarget
    from sagekernel.targets.base import BuildResult

    task = tasks["ForeachAddScalarX"]  # case0: 2 tensors in the list, case1: 3
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert ("void run(const std::vector<at::Tensor>& x, const at::Tensor& scalar, std::vector<at::Tensor>& y)"
            in text)
    assert "aclnnForeachAddScalarXGetWorkspaceSize(acl_x, acl_scalar, acl_y, &workspaceSize," in text
    assert "aclTensorList* acl_x = AclTensorListOf(k_x);" in text and "aclDestroyTensorList(l);" in text
    # one extension for every case: the source does not depend on a case's list lengths
    assert aclnn_binding(task.group_task(1)) == text
    assert [runtime_lists(t) for t in task.group_tasks()] == [[[0, 2], [3, 2]], [[0, 3], [4, 3]]]
    built = BuildResult(True, "x", {"module": tmp_path / "m.so"}, {"plan": {"workdir": str(tmp_path)}})
    argv = AscendCTarget().runtime(built, task.group_task(1), "npu").argv
    assert json.loads(argv[argv.index("--lists") + 1]) == [[0, 3], [4, 3]]


def test_the_runtime_hands_each_list_range_to_run_as_one_list() -> None:
    from sagekernel.targets.ascendc.runtime.ascendc_runtime import packed

    assert packed(list("abcde"), [[0, 2], [3, 2]]) == [["a", "b"], "c", ["d", "e"]]
    assert packed(list("abc"), []) == ["a", "b", "c"]


def test_a_case_reaches_the_opdefs_dtypes_by_lossless_inputs_and_widening_outputs(tasks) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems, declared_column
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
    from sagekernel.targets.ascendc.benchmark_project import skeleton_opdef

    task = tasks["EqualX"]  # the reference returns int32; the OpDef's y is bool in every combination
    spec = skeleton_opdef(task)
    assert spec is not None and binding_problems(task) == []
    cases = ("DT_FLOAT", "DT_INT8", "DT_FLOAT16")
    assert [declared_column(spec, [d, d], ["DT_INT32"]) for d in cases] == [0, 1, 2]
    text = aclnn_binding(task)
    assert "std::vector<std::vector<aclDataType>> kOutputTypes = {{ACL_BOOL, ACL_BOOL, ACL_BOOL}};" in text
    assert "at::Tensor k_y = OutputIn(y, kOutputTypes[0][col]);" in text
    assert "y.copy_(k_y);" in text  # the kernel's bool result, cast into the harness's int32 buffer


def test_a_conversion_that_loses_information_is_a_plan_problem(tasks) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems

    task = tasks["EqualX"]
    host = Path(task.benchmark.skeleton["op_host/equal_x.cpp"])
    original = host.read_text(encoding="utf-8")
    try:  # no float combination: a float case would have to be rounded to an integer
        host.write_text(original.replace("ge::DT_FLOAT, ge::DT_INT8, ge::DT_FLOAT16",
                                         "ge::DT_INT8, ge::DT_INT8, ge::DT_INT32"))
        narrowed = binding_problems(task)
        host.write_text(original.replace("{ge::DT_BOOL, ge::DT_BOOL, ge::DT_BOOL}",
                                         "{ge::DT_INT64, ge::DT_INT64, ge::DT_INT64}"))
        wide_output = binding_problems(task)
    finally:
        host.write_text(original, encoding="utf-8")
    assert any("input 'x1': the task's float32 is neither the OpDef's DT_INT8" in p
               and "without loss only" in p for p in narrowed)
    assert {p.split(":")[0] for p in narrowed} == {"case0", "case2"}  # the int8 case (case1) binds
    assert any("output 'y': the task's int32 is neither the OpDef's DT_INT64" in p and "widening only" in p
               for p in wide_output)


#: An operator whose reference takes a None optional tensor, a list of ints and a float.
RESHAPE_MODULE = """import torch
import torch_npu
from torch_npu.contrib import transfer_to_npu
import torch.nn as nn
import kernel_gen_ops


class Model(nn.Module):
    def forward(self, x, bias, shape, scale):
        y = x.reshape(shape) * scale
        return y if bias is None else y + bias
"""

RESHAPE_INPUTS = """import torch


def get_inputs(param, device=None):
    shape = eval(param['shape'])
    return torch.randn(shape[0] * shape[1], device=device), None, shape, float(param['scale'])


def get_init_inputs(param, device=None):
    return []
"""

#: Its OpDef: `bias` optional, `shape` a ListInt, `scale` spelt otherwise, `axis` defaulted;
#: the dtype and format lists come from a macro and a copied variable.
RESHAPE_HOST = """#include "register/op_def_registry.h"
namespace ops {
#define ND_FORMATS { ge::FORMAT_ND }
static const std::vector<ge::DataType> x_types = {ge::DT_FLOAT};
static const std::vector<ge::DataType> y_types = x_types;
class ScaledReshapeX : public OpDef {
public:
    explicit ScaledReshapeX(const char* name) : OpDef(name) {
        this->Input("x").ParamType(REQUIRED).DataType(x_types).Format(ND_FORMATS);
        this->Input("bias").ParamType(OPTIONAL).DataType(x_types).Format(ND_FORMATS);
        this->Output("y").ParamType(REQUIRED).DataType(y_types).Format(ND_FORMATS);
        this->Attr("shape").ListInt();
        this->Attr("scale_value").AttrType(OPTIONAL).Float(1.0);
        this->Attr("axis").AttrType(OPTIONAL).Int(-1);
    }
};
OP_ADD(ScaledReshapeX);
}
"""


def test_list_and_defaulted_attributes_and_an_absent_optional_input_bind(tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import (
        binding_problems,
        runtime_attr_layout,
        runtime_attr_names,
    )
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    rel = "level2/TensorMove/ScaledReshapeX"
    cases = "case_id;shape;scale\n0;[2, 6];2.0\n1;[3, 4];0.5\n"
    root = write_benchmark(tmp_path / "NPUKernelBench",
                           {rel: ("scaled_reshape_x", RESHAPE_MODULE, RESHAPE_INPUTS, cases)})
    host = root / "tasks" / rel / "question/op_host/scaled_reshape_x.cpp"
    host.write_text(RESHAPE_HOST, encoding="utf-8")
    report = load_dir(root)
    assert not report.problems, report.problems
    (task,) = report.tasks
    spec = parse_opdef(Source(RESHAPE_HOST))
    assert spec.problems == ()
    assert spec.outputs[0].dtypes == ("DT_FLOAT",) and spec.inputs[1].formats == ("FORMAT_ND",)
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert ("void run(const at::Tensor& x, at::Tensor& y, std::vector<int64_t> shape, double scale_value, "
            "int64_t axis)" in text)
    assert "const aclTensor* acl_bias = nullptr;" in text  # the reference passes None: aclnn gets a null
    assert "aclIntArray* acl_shape = aclCreateIntArray(shape.data(), shape.size());" in text
    assert ("GetWorkspaceSize(acl_x, acl_bias, acl_shape, static_cast<double>(scale_value), "
            "static_cast<int64_t>(axis), acl_y," in text)
    case1 = task.group_task(1)
    names = runtime_attr_names(case1)
    layout = runtime_attr_layout(case1)
    # the list's elements and the float come from the harness's values; axis is the OpDef default
    assert [layout[0], layout[1], layout[2]] == [[names.index("shape_0"), names.index("shape_1")],
                                                 names.index("scale"), {"value": -1}]

    from sagekernel.targets.ascendc.runtime.ascendc_runtime import laid_out

    values = [case1.attrs[k] for k in names]
    assert laid_out(values, layout) == [[3, 4], 0.5, -1]


#: An in-place prototype: no Output; the benchmark's pybind returns the input it passed.
INPLACE_HOST = """#include "register/op_def_registry.h"
namespace ops {
class SqrtX : public OpDef {
public:
    explicit SqrtX(const char* name) : OpDef(name) {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND});
    }
};
OP_ADD(SqrtX);
}
"""

INPLACE_PYBIND = """#include "pytorch_npu_helper.hpp"
at::Tensor custom_pybind_api(at::Tensor &input)
{
    EXEC_NPU_CMD(aclnnCustomOp, input);
    return input;
}
"""


def test_an_inplace_operator_writes_through_the_input_its_pybind_returns(tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    rel = "level1/Math/SqrtX"
    root = write_benchmark(tmp_path / "NPUKernelBench", {rel: OPERATORS[rel]})
    folder = root / "tasks" / rel
    (folder / "question/op_host/sqrt_x.cpp").write_text(INPLACE_HOST, encoding="utf-8")
    (task,) = load_dir(root).tasks
    no_output = "skeleton OpDef: the OpDef declares no Output"
    assert no_output in binding_problems(task)  # the fixture's pybind.cpp is a comment: no result named
    (folder / "validation/pybind.cpp").write_text(INPLACE_PYBIND, encoding="utf-8")
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert "void run(const at::Tensor& x, at::Tensor& x_result)" in text
    # the harness's output buffer takes the input's values, and the kernel updates it in place
    assert "    x_result.copy_(x);\n    at::Tensor k_x = x_result;" in text
    assert "aclnnSqrtXGetWorkspaceSize(acl_x, &workspaceSize, &executor)" in text
    (folder / "validation/pybind.cpp").write_text(INPLACE_PYBIND.replace("return input;", "return other;"),
                                                  encoding="utf-8")
    assert no_output in binding_problems(task)


def test_numbers_the_opdef_takes_as_an_input_become_a_tensor_of_its_dtype(tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems, runtime_attr_layout
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    rel = "level2/TensorMove/ScaledReshapeX"
    cases = "case_id;shape;scale\n0;[2, 6];2.0\n"
    root = write_benchmark(tmp_path / "NPUKernelBench",
                           {rel: ("scaled_reshape_x", RESHAPE_MODULE, RESHAPE_INPUTS, cases)})
    shape_input = ('        this->Input("shape").ParamType(REQUIRED).DataType({ge::DT_INT64})'
                   '.Format(ND_FORMATS);\n')
    host = RESHAPE_HOST.replace('        this->Attr("shape").ListInt();\n', "").replace(
        '        this->Input("bias")', shape_input + '        this->Input("bias")')
    (root / "tasks" / rel / "question/op_host/scaled_reshape_x.cpp").write_text(host, encoding="utf-8")
    (task,) = load_dir(root).tasks
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert "std::vector<double> shape)" in text  # after the attributes, from the harness's values
    assert "at::Tensor k_shape = at::tensor(shape, at::TensorOptions().dtype(at::kDouble))" in text
    assert "GetWorkspaceSize(acl_x, acl_shape, acl_bias, static_cast<double>(scale_value)" in text
    names = list(task.attrs)
    assert runtime_attr_layout(task)[-1] == [names.index("shape_0"), names.index("shape_1")]


def test_an_output_named_as_an_input_is_a_ref_passed_once(tmp_path: Path) -> None:
    from sagekernel.targets.ascendc.benchmark_binding import binding_problems
    from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding

    rel = "level1/Math/SqrtX"
    root = write_benchmark(tmp_path / "NPUKernelBench", {rel: OPERATORS[rel]})
    ref = INPLACE_HOST.replace("            .Format({ge::FORMAT_ND, ge::FORMAT_ND});\n",
                               "            .Format({ge::FORMAT_ND, ge::FORMAT_ND});\n"
                               '        this->Output("x").ParamType(REQUIRED)'
                               '.DataType({ge::DT_FLOAT, ge::DT_FLOAT16})\n'
                               "            .Format({ge::FORMAT_ND, ge::FORMAT_ND});\n", 1)
    (root / "tasks" / rel / "question/op_host/sqrt_x.cpp").write_text(ref, encoding="utf-8")
    (task,) = load_dir(root).tasks
    assert binding_problems(task) == []
    text = aclnn_binding(task)
    assert "void run(const at::Tensor& x, at::Tensor& x_result)" in text  # two C++ names, one OpDef name
    assert "    x_result.copy_(x);\n    at::Tensor k_x = x_result;" in text
    assert "aclnnSqrtXGetWorkspaceSize(acl_x, &workspaceSize, &executor)" in text  # the ref, once


def test_an_attribute_takes_the_argument_of_its_own_name_before_a_longer_one() -> None:
    from types import SimpleNamespace

    from sagekernel.targets.ascendc.benchmark_attrs import attr_sources
    from sagekernel.tasks.task import ForwardArg

    spec = parse_opdef(Source(SQRT_ATTRS_HOST))
    task = SimpleNamespace(attrs={"eps": 1e-5}, forward_args=[
        ForwardArg("string", "quant_mode", "dynamic"), ForwardArg("string", "mode", "sum"),
        ForwardArg("scalar", "eps", 1e-5)])
    sources, problems = attr_sources(task, spec)  # type: ignore[arg-type]
    assert problems == []
    assert [(s.attr.name, s.kind, s.value or s.keys) for s in sources] == [
        ("mode", "string", "sum"), ("quant_mode", "string", "dynamic"), ("epsilon", "scalar", ("eps",)),
        ("axis", "default", -1)]


SQRT_ATTRS_HOST = """namespace ops {
class SqrtX : public OpDef {
public:
    explicit SqrtX(const char* name) : OpDef(name) {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->Output("y").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->Attr("mode").AttrType(OPTIONAL).String("mean");
        this->Attr("quant_mode").AttrType(OPTIONAL).String("static");
        this->Attr("epsilon").AttrType(OPTIONAL).Float(1e-6);
        this->Attr("axis").AttrType(OPTIONAL).Int(-1);
    }
};
}
"""
