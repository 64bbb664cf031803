"""The integrity rules by what the code reaches (audit §4: R1-R9, P1-P4, and other members of each
class the audit did not list), on edits of the hand-written reference operators."""

from __future__ import annotations

import pytest

from sagekernel.targets.ascendc.lint import lint_candidate

from .conftest import config_for, edit, reference_candidate

MS_K = "op_kernel/mul_sigmoid_custom.cpp"
SM_K, SM_HOST = "op_kernel/softmax_custom.cpp", "op_host/softmax_custom.cpp"
ABS_T = "op_host/abs_custom_tiling_func.cpp"
SIGMOID_BODY = "Muls(y, y, -1.0f, count);"


def rules(name, candidate, tasks):
    return sorted({f.rule for f in lint_candidate(candidate, tasks[name], config_for(name))})


def sigmoid_variant(prefix: str, body: str):
    """mul_sigmoid with `prefix` before the kernel's first line and `body` replacing its sigmoid."""
    c = reference_candidate("mul_sigmoid")
    text = c.files[MS_K].replace('#include "kernel_operator.h"', '#include "kernel_operator.h"\n' + prefix, 1)
    text = text.replace(SIGMOID_BODY, body + "\n        " + SIGMOID_BODY, 1)
    return type(c)({**c.files, MS_K: text})


# each: (what, prefix at file scope, statement in Compute)
FORBIDDEN_REACH = [
    ("R1 macro alias", "#define SM_IMPL AscendC::Sigmoid", "SM_IMPL<float>(y, y, count);"),
    ("function-like macro", "#define ACT(d, s, n) Sigmoid<float>(d, s, n)", "ACT(y, y, count);"),
    ("R2 *Impl function", "", "AscendC::SigmoidImpl<float, false>(y, y, count);"),
    ("R8 function pointer", "", "auto sig = &AscendC::Sigmoid<float, false>; sig(y, y, count);"),
    ("using alias", "using AscendC::Sigmoid;", "Sigmoid<float>(y, y, count);"),
    ("namespace alias", "namespace A = AscendC;", "A::Sigmoid<float>(y, y, count);"),
    ("family member Swish", "", "Swish<float>(y, y, count, 1.0f);"),
    ("token pasting", "#define CAT(a, b) a##b", "CAT(Sig, moid)<float>(y, y, count);"),
]


@pytest.mark.parametrize(("what", "prefix", "body"), FORBIDDEN_REACH, ids=[c[0] for c in FORBIDDEN_REACH])
def test_forbidden_api_by_any_reach(tasks, what, prefix, body):
    assert rules("mul_sigmoid", sigmoid_variant(prefix, body), tasks) == ["forbidden_api"], what


def test_own_helper_named_like_the_family_is_fine(tasks):
    c = sigmoid_variant(
        "__aicore__ inline void SigmoidTile(int n) { (void)n; }", "SigmoidTile(static_cast<int>(count));"
    )
    assert rules("mul_sigmoid", c, tasks) == []


def test_operator_library_header_rejected(tasks):
    """R2's include: the header of the forbidden API itself, though lib/ is otherwise allowed."""
    c = sigmoid_variant('#include "lib/activation/sigmoid.h"', "")
    assert rules("mul_sigmoid", c, tasks) == ["include"]
    fine = sigmoid_variant('#include "lib/matmul_intf.h"', "")
    assert rules("mul_sigmoid", fine, tasks) == []


def test_logsoftmax_for_softmax(tasks):
    """R3: the table is completed (LogSoftMax for softmax)."""
    c = edit(
        reference_candidate("softmax"),
        SM_K,
        "Exp(y, y, n);",
        "LogSoftMax<float>(y, y, n);\n        Exp(y, y, n);",
    )
    assert rules("softmax", c, tasks) == ["forbidden_api"]


LOADER_REACH = [
    ("R6 self-declared dlsym", 'extern "C" void* dlsym(void*, const char*);',
     'auto fn = dlsym(nullptr, "aclnnSoftmax");'),
    ("dlopen", 'extern "C" void* dlopen(const char*, int);', 'void* h = dlopen("libopapi.so", 2);'),
    ("function pointer to aclnn", "", "auto api = &aclnnSoftmaxGetWorkspaceSize;"),
    ("system()", "", 'system("true");'),
]  # fmt: skip


@pytest.mark.parametrize(("what", "prefix", "stmt"), LOADER_REACH, ids=[c[0] for c in LOADER_REACH])
def test_framework_reach_on_the_host(tasks, what, prefix, stmt):
    c = reference_candidate("softmax")
    text = c.files[SM_HOST].replace(
        '#include "register/op_def_registry.h"', '#include "register/op_def_registry.h"\n' + prefix, 1
    )
    text = text.replace(
        "context->SetBlockDim(static_cast<uint32_t>(used));",
        "context->SetBlockDim(static_cast<uint32_t>(used));\n    " + stmt,
        1,
    )
    assert rules("softmax", type(c)({**c.files, SM_HOST: text}), tasks) == ["framework_call"], what


def test_a_helper_named_npu_is_not_a_framework_call(tasks):
    """L4: the old `npu_` prefix rejected the model's own helpers."""
    c = sigmoid_variant("__aicore__ inline int npu_round(int n) { return n; }", "(void)npu_round(1);")
    assert rules("mul_sigmoid", c, tasks) == []


SPECIALISED = [
    ("R7 literal compare", "if (t.totalLength == 64000) {\n        t.tileLength = 4000;\n    }"),
    ("R9 product compare", "if (t.totalLength == 64 * 1000) {\n        t.tileLength = 4000;\n    }"),
    ("named constant",
     "constexpr int64_t kTimed = 64 * 1000;\n    if (kTimed == t.totalLength) { t.bufferNum = 1; }"),
    ("case label", "switch (t.D) {\n    case 1000: t.bufferNum = 1; break;\n    default: break;\n    }"),
    ("stored into a size field", "t.totalLength = 63 * 1000 + 1000;"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "code"), SPECIALISED, ids=[c[0] for c in SPECIALISED])
def test_shape_specialisation(tasks, what, code):
    c = edit(
        reference_candidate("abs"),
        ABS_T,
        "    t.bufferNum = 2;\n",
        "    t.bufferNum = 2;\n    " + code + "\n",
    )
    assert rules("abs", c, tasks) == ["hardcoded_shape"], what


def test_constants_equal_to_a_size_elsewhere_are_fine(tasks):
    """P4: 33 is a held-out size, used here as an ordinary constant; and arithmetic on a size read
    at run time is not a specialisation."""
    assert 33 in __import__("sagekernel.targets.ascendc.lint", fromlist=["x"]).suspicious_literals(
        tasks["softmax"]
    )
    c = edit(
        reference_candidate("softmax"),
        SM_K,
        "Exp(y, y, n);",
        "Exp(y, y, n);\n        constexpr int32_t kUnroll = 33;\n        (void)kUnroll;",
    )
    assert rules("softmax", c, tasks) == []
    c = edit(
        reference_candidate("abs"),
        ABS_T,
        "    t.bufferNum = 2;\n",
        "    t.bufferNum = 2;\n    t.extra[0] = t.totalLength * 1000;\n",
    )
    assert rules("abs", c, tasks) == []


@pytest.mark.parametrize("name", ["abs", "mul_sigmoid", "softmax"])
def test_honest_operators_pass(tasks, name):
    """P1-P3."""
    assert lint_candidate(reference_candidate(name), tasks[name], config_for(name)) == []


def test_tiling_run_on_held_out_shapes(tasks):
    """R4: a tiling fixed for the timed shape with no literal equal to a size (40 x 1600 = 64000)
    passes every static rule and fails when the function runs on the other shapes; the honest one
    passes. Needs a host C++ compiler (skips without)."""
    from sagekernel.targets.ascendc import tiling_probe

    if tiling_probe.compiler() is None:
        pytest.skip("no host C++ compiler")
    honest = reference_candidate("abs")
    assert lint_candidate(honest, tasks["abs"], config_for("abs"), run_tiling=True) == []
    fixed = edit(
        honest,
        ABS_T,
        "    t.tileLength = tile;\n",
        "    t.tileLength = tile;\n    t.usedCoreNum = 40;\n    t.formerNum = 0;\n"
        "    t.formerLength = 1600;\n    t.tailLength = 1600;\n",
    )
    assert lint_candidate(fixed, tasks["abs"], config_for("abs")) == []  # no static rule sees it
    found = lint_candidate(fixed, tasks["abs"], config_for("abs"), run_tiling=True)
    assert found and {f.rule for f in found} == {"tiling_behaviour"}
    assert "does not follow the sizes" in found[0].reason
    crash = edit(
        honest,
        ABS_T,
        "    t.bufferNum = 2;\n",
        "    t.bufferNum = 2;\n    if (t.D % 2 == 1) { __builtin_trap(); }\n",
    )
    found = lint_candidate(crash, tasks["abs"], config_for("abs"), run_tiling=True)
    assert [f.rule for f in found] == ["tiling_behaviour"] and "did not finish" in found[0].reason
