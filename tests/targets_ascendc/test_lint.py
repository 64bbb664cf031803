"""The static checks on the hand-written reference operators and on targeted breakages of them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.lint import lint_candidate, suspicious_literals

from .conftest import config_for, edit, reference_candidate

ABS_K, ABS_T = "op_kernel/abs_custom.cpp", "op_host/abs_custom_tiling_func.cpp"
MS_K = "op_kernel/mul_sigmoid_custom.cpp"
SM_H, SM_HOST, SM_K = (
    "op_host/softmax_custom_tiling.h",
    "op_host/softmax_custom.cpp",
    "op_kernel/softmax_custom.cpp",
)


def rules(candidate, task, name):
    return [f.rule for f in lint_candidate(candidate, task, config_for(name))]


@pytest.mark.parametrize("name", ["abs", "mul_sigmoid", "softmax"])
def test_reference_operators_are_clean(tasks, name):
    assert lint_candidate(reference_candidate(name), tasks[name], config_for(name)) == []


def test_forbidden_high_level_substitution(tasks):
    c = edit(
        reference_candidate("mul_sigmoid"),
        MS_K,
        "Muls(y, y, -1.0f, count);\n        Exp(y, y, count);\n"
        "        Adds(y, y, 1.0f, count);\n        Div(out, x, y, count);",
        "AscendC::Sigmoid<float>(y, y, count);\n        Mul(out, x, y, count);",
    )
    findings = lint_candidate(c, tasks["mul_sigmoid"], config_for("mul_sigmoid"))
    assert [f.rule for f in findings] == ["forbidden_api"]
    assert "AscendC::Sigmoid" in findings[0].reason and "substitution" in findings[0].reason
    assert findings[0].line is not None and "Sigmoid" in findings[0].excerpt


def test_forbidden_api_is_per_task(tasks):
    # abs may use the Abs instruction (it is primitive), and a comment or string naming Sigmoid is no call
    c = edit(
        reference_candidate("abs"),
        ABS_K,
        "Abs(y, x, static_cast<uint32_t>(n));",
        "Abs(y, x, static_cast<uint32_t>(n));  // not Sigmoid(y, x, n)\n"
        '        const char* s = "aclnnAbs(x)";',
    )
    assert rules(c, tasks["abs"], "abs") == []


def test_framework_calls_rejected(tasks):
    c = edit(
        reference_candidate("softmax"),
        SM_HOST,
        "context->SetBlockDim(static_cast<uint32_t>(used));",
        "context->SetBlockDim(static_cast<uint32_t>(used));\n"
        "    aclnnSoftmaxGetWorkspaceSize(nullptr, 1, nullptr, "
        "nullptr, nullptr);\n    at::softmax(t, 1);",
    )
    assert rules(c, tasks["softmax"], "softmax").count("framework_call") == 2


def test_include_allow_list(tasks):
    c = edit(
        reference_candidate("abs"),
        ABS_K,
        '#include "abs_custom_tiling.h"',
        '#include "abs_custom_tiling.h"\n#include "../../ops-nn/softmax_v2.h"\n'
        '#include "aclnnop/aclnn_abs.h"\n'
        "#include <vector>",
    )
    found = [f for f in lint_candidate(c, tasks["abs"], config_for("abs")) if f.rule == "include"]
    # parent path and the aclnn header; a standard header carries no operator code (expert
    # NPUKernelBench kernels include <type_traits>, <cstdint>, <tuple>)
    assert len(found) == 2
    host = edit(
        reference_candidate("softmax"),
        SM_HOST,
        '#include "register/op_def_registry.h"',
        '#include "register/op_def_registry.h"\n#include <algorithm>\n#include "torch/extension.h"',
    )
    assert rules(host, tasks["softmax"], "softmax") == ["include"]  # <algorithm> is fine on the host


def test_hard_coded_evaluation_shape(tasks):
    assert {1000, 64000, 1531, 7 * 1531} <= set(suspicious_literals(tasks["abs"]))
    assert 64 not in suspicious_literals(tasks["abs"])  # powers of two are ordinary constants
    from sagekernel.tasks.suites import find_task

    assert 1024 not in suspicious_literals(find_task("reduce_sum"))  # a power-of-two product too
    c = edit(
        reference_candidate("abs"),
        ABS_T,
        "const int64_t blocks = (t.totalLength + kBlockElems - 1)",
        "if (t.totalLength == 64000) {\n        t.tileLength = 4000;\n    }\n"
        "    const int64_t blocks = (t.totalLength + kBlockElems - 1)",
    )
    findings = [f for f in lint_candidate(c, tasks["abs"], config_for("abs")) if f.rule == "hardcoded_shape"]
    assert len(findings) == 1 and "element count of x" in findings[0].reason
    assert "compared with a shape" in findings[0].reason


def test_host_reading_device_memory(tasks):
    c = edit(
        reference_candidate("softmax"),
        SM_HOST,
        "const int64_t rows = shape.GetDim(0);",
        "const int64_t rows = *context->GetInputTensor(0)->GetData<int64_t>();",
    )
    findings = lint_candidate(c, tasks["softmax"], config_for("softmax"))
    assert [f.rule for f in findings] == ["host_device_memory"]
    ok = edit(
        c,
        SM_HOST,
        ".Format({ge::FORMAT_ND});\n        this->Output",
        ".Format({ge::FORMAT_ND}).ValueDepend(REQUIRED);\n        this->Output",
    )
    assert rules(ok, tasks["softmax"], "softmax") == []


def test_kernel_reads_undefined_tiling_field(tasks):
    c = edit(reference_candidate("softmax"), SM_K, "tilingData.tailRows);", "tilingData.tailRowz);")
    findings = lint_candidate(c, tasks["softmax"], config_for("softmax"))
    assert [f.rule for f in findings] == ["tiling_fields"]
    assert "tailRowz" in findings[0].reason and "tailRows" in findings[0].reason


def test_kernel_reads_field_the_host_never_sets(tasks):
    c = edit(
        reference_candidate("softmax"),
        SM_HOST,
        "    tiling.set_tailRows(static_cast<uint32_t>(rows / used));\n",
        "",
    )
    findings = lint_candidate(c, tasks["softmax"], config_for("softmax"))
    assert [f.rule for f in findings] == ["tiling_fields"] and "set_tailRows" in findings[0].reason


def test_host_sets_undefined_field(tasks):
    c = edit(reference_candidate("softmax"), SM_HOST, "tiling.set_rows(", "tiling.set_rowCount(")
    reasons = [f.reason for f in lint_candidate(c, tasks["softmax"], config_for("softmax"))]
    assert any("sets rowCount" in r for r in reasons)


def test_tiling_field_type_narrowing(tasks):
    header = edit(
        reference_candidate("softmax"),
        SM_H,
        "TILING_DATA_FIELD_DEF(uint32_t, rowLength);",
        "TILING_DATA_FIELD_DEF(float, rowLength);",
    )
    c = edit(
        header,
        SM_K,
        "    KernelSoftmax op;",
        "    uint32_t len = tilingData.rowLength;\n    KernelSoftmax op;",
    )
    findings = [
        f for f in lint_candidate(c, tasks["softmax"], config_for("softmax")) if f.rule == "tiling_fields"
    ]
    assert len(findings) == 1 and "float field read into a uint32_t local" in findings[0].reason
    k = edit(
        reference_candidate("abs"),
        ABS_K,
        "        tileLength_ = t.tileLength;",
        "        uint32_t narrow = t.tileLength;\n        tileLength_ = narrow;",
    )
    findings = [f for f in lint_candidate(k, tasks["abs"], config_for("abs")) if f.rule == "tiling_fields"]
    assert len(findings) == 1 and "int64_t field narrowed into a uint32_t local" in findings[0].reason


def test_kernel_only_plan_fields_must_be_assigned(tasks):
    c = edit(reference_candidate("abs"), ABS_T, "    t.tileLength = tile;\n", "")
    reasons = [f.reason for f in lint_candidate(c, tasks["abs"], config_for("abs"))]
    assert reasons == [f"the kernel reads tileLength, but {ABS_T} never assigns it (it would read 0)"]
    c = edit(reference_candidate("abs"), ABS_T, "    t.usedCoreNum = static_cast<uint32_t>(used);\n", "")
    assert any("usedCoreNum" in f.reason for f in lint_candidate(c, tasks["abs"], config_for("abs")))


def test_kernel_only_struct_must_not_be_redefined(tasks):
    c = edit(
        reference_candidate("abs"),
        ABS_T,
        '#include "abs_custom_tiling.h"',
        "struct AbsCustomTilingData { int64_t totalLength; };",
    )
    assert "tiling_fields" in rules(c, tasks["abs"], "abs")


def test_file_set_and_names(tasks):
    ref = reference_candidate("abs")
    missing = Candidate({ABS_K: ref.files[ABS_K]})
    assert rules(missing, tasks["abs"], "abs") == ["file_set"]
    extra = Candidate({**ref.files, "op_host/CMakeLists.txt": "add_subdirectory(x)"})
    assert rules(extra, tasks["abs"], "abs") == ["file_set"]
    renamed = edit(ref, ABS_K, "void abs_custom(", "void abscustom(")
    findings = lint_candidate(renamed, tasks["abs"], config_for("abs"))
    assert [f.rule for f in findings] == ["names"] and "abs_custom" in findings[0].reason
    params = edit(ref, ABS_K, "GM_ADDR x, GM_ADDR out, GM_ADDR workspace", "GM_ADDR x, GM_ADDR out")
    assert rules(params, tasks["abs"], "abs") == ["names"]


def test_opdef_names_and_registration(tasks):
    ref = reference_candidate("softmax")
    assert rules(
        edit(ref, SM_HOST, "OP_ADD(SoftmaxCustom);", "OP_ADD(Softmax);"), tasks["softmax"], "softmax"
    ) == ["names"]
    assert rules(
        edit(ref, SM_HOST, 'this->Input("x")', 'this->Input("input")'), tasks["softmax"], "softmax"
    ) == ["names"]
    bad_reg = edit(
        ref, SM_H, "REGISTER_TILING_DATA_CLASS(SoftmaxCustom,", "REGISTER_TILING_DATA_CLASS(Softmax,"
    )
    assert rules(bad_reg, tasks["softmax"], "softmax") == ["names"]


def test_parser_tolerates_ascend_qualifiers_and_macros():
    src = Source(
        'extern "C" __global__ __aicore__ void k(GM_ADDR x, GM_ADDR tiling) {\n'
        "  GET_TILING_DATA(t, tiling);\n  uint64_t n = t.total; // t.fake\n}\n"
    )
    assert src.function_names() == [("k", 1)]
    assert [(r.field, r.declared_type) for r in src.field_reads("t")] == [("total", "uint64_t")]
    assert src.macro_invocations("GET_TILING_DATA") == [(["t", "tiling"], 2)]


def test_lint_uses_template_from_config(tasks):
    # the abs reference is kernel-only: checked against the full template its file set is wrong
    assert "file_set" in [
        f.rule
        for f in lint_candidate(reference_candidate("abs"), tasks["abs"], AscendConfig(template="full"))
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from(list('abcxyz_(){}[]<>;:,."#/*\n 0123456789&=+-')), max_size=300))
def test_lint_never_raises_on_arbitrary_text(tasks, text):
    candidate = Candidate({"op_host/abs_custom_tiling_func.cpp": text, "op_kernel/abs_custom.cpp": text})
    findings = lint_candidate(candidate, tasks["abs"], config_for("abs"))
    assert all(f.rule and f.reason for f in findings)
