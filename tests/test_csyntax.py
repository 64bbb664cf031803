"""The one C-family front end (targets/cpu/syntax.py, syntax_names.py, syntax_query.py), three linters.

Each hostile case says what the regex front end (strip_source + patterns for CUDA, the raw-text
`extern "C"` check and the unspliced parse for Ascend C) did wrong, and asserts the new reading.
"""

from __future__ import annotations

import pytest

from sagekernel.targets.ascendc import integrity
from sagekernel.targets.ascendc.cparse import Source as AscendSource
from sagekernel.targets.ascendc.lint import check_includes, check_kernel_entry
from sagekernel.targets.ascendc.names import OpNames
from sagekernel.targets.cpu import syntax, syntax_names
from sagekernel.targets.cpu.lint import lint_source as cpu_lint
from sagekernel.targets.cpu.syntax_query import Source
from sagekernel.targets.cuda.lint import lint_source as cuda_lint

CPU_SIG = "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D)"
CPU_BODY = f"#include <stdint.h>\n{CPU_SIG} {{ for (int64_t i = 0; i < B*D; ++i) out[i] = x[i]; }}\n"
CU_HEAD = "#include <cuda_runtime.h>\n#include <stdint.h>\n"
CU_LAUNCH = (
    'extern "C" int sage_launch(const float* x, float* out, int64_t B, int64_t D, cudaStream_t stream) {\n'
    "  relu<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(x, out, B * D);\n"
    "  return (int)cudaGetLastError();\n}\n"
)
CU_KERNEL = (
    "__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {\n"
    "  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = fmaxf(x[i], 0.0f);\n}\n"
)


def cu_rules(source: str) -> set[str]:
    return {f.rule for f in cuda_lint(source)}


def cpu_rules(source: str) -> set[str]:
    return {f.rule for f in cpu_lint(source)}


# ---- the queries ----------------------------------------------------------------------------------


def test_queries_read_calls_includes_definitions_and_macros() -> None:
    src = Source(
        '#include <a.h>\n#include "b/c.h"\n#define TWICE(x) ((x) * 2)\n'
        "int add(int a, float *b) { return helper(a) + TWICE(3); }\n"
        "int main2(void) { return ns::f<int>(1) + obj.go(2); }\n",
        cxx=True,
    )
    assert src.includes() == [("a.h", 1), ("b/c.h", 2)]
    assert [(c.name, c.line) for c in src.calls()] == [("helper", 4), ("TWICE", 4), ("f", 5), ("go", 5)]
    assert src.function_names() == [("add", 4), ("main2", 5)]
    assert [params for _node, params in src.definitions_of("add")] == [["a", "b"]]
    assert src.macro_invocations("TWICE") == [(["x"], 3), (["3"], 4)]  # token level: the definition too
    assert src.method_calls("obj") == [("go", 5)]
    assert (2, 3, "2") in src.number_literals()  # a macro body's numbers are read too


def test_lines_survive_line_continuations() -> None:
    src = Source("int a;\nint f(void) { return g\\\n(1); }\nint h(void) { return k(2); }\n", cxx=False)
    assert [(c.name, c.line) for c in src.calls()] == [("g", 2), ("k", 4)]


def test_cuda_dialect_records_qualifiers_and_reads_launches() -> None:
    unit = syntax.parse(CU_HEAD + "__device__ int counter;\n" + CU_KERNEL + CU_LAUNCH, True, dialect="cuda")
    assert [q.word for q in unit.qualifiers][:3] == ["__device__", "__global__", "__restrict__"]
    assert not unit.tree.root_node.has_error  # `__global__` and `<<<...>>>` no longer split the tree
    src = Source(CU_KERNEL + CU_LAUNCH, dialect="cuda")
    assert "relu" in {c.name for c in src.calls()}


def test_mutable_state_reads_declarators() -> None:
    src = Source(
        "void (*slot)(void);\nint (* const fixed)(int) = 0;\nconst float *p;\nfloat * const q = 0;\n"
        "static const int T[3] = {1, 2, 3};\nint proto(int);\nextern int e;\n"
        "struct S { int x; static int count; static int f(int); } s;\n"
        "void k(void) { static int calls; static const int K = 3; int local; }\n",
        cxx=True,
    )
    assert [(s.line, s.scope) for s in src.mutable_state()] == [
        (1, "file"), (3, "file"), (8, "file"), (8, "type"), (9, "function")
    ]


# ---- hostile tricks: the regex front end was wrong -------------------------------------------------


def test_cuda_forbidden_name_without_a_call_paren() -> None:
    # The regexes wanted `name(`: a function pointer reached fopen unseen (cuBLAS: a declared
    # prototype has the paren, so that case was caught before and still is).
    body = "typedef void* (*opener)(const char*, const char*);\nstatic opener const o = (opener)fopen;\n"
    assert "os_access" in cu_rules(CU_HEAD + body + CU_KERNEL + CU_LAUNCH)
    lib = "extern \"C\" int cublasSaxpy_v2(void*, int);\nint (* const saxpy)(void*, int) = &cublasSaxpy_v2;\n"
    assert "library_op" in cu_rules(CU_HEAD + lib + CU_KERNEL + CU_LAUNCH)


def test_cuda_line_continuation_no_longer_hides_a_name() -> None:
    # strip_source does not splice lines: `cudaDevice\<newline>Reset()` passed.
    hidden = CU_LAUNCH.replace("  return (int)", "  cudaDevice\\\nReset();\n  return (int)")
    assert "device_state" in cu_rules(CU_HEAD + CU_KERNEL + hidden)


def test_cuda_comment_naming_a_clock_register_is_not_a_finding() -> None:
    # The PTX clock check read the raw text, comments included.
    note = "// never read %globaltimer or %clock64 here\n"
    assert "timer" not in cu_rules(note + CU_HEAD + CU_KERNEL + CU_LAUNCH)
    ptx = '  unsigned long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));\n  if (i'
    asm = CU_KERNEL.replace("  if (i", ptx)
    assert "timer" in cu_rules(CU_HEAD + asm + CU_LAUNCH)


def test_cuda_a_variable_named_like_a_word_is_not_the_function() -> None:
    ok = CU_KERNEL.replace("  if (i", "  int clock = 3, open = 1;\n  if (i + clock * open")
    assert cu_rules(CU_HEAD + ok + CU_LAUNCH) == set()
    reads = CU_KERNEL.replace("  if (i", "  long t = clock();\n  if (i")
    assert "timer" in cu_rules(CU_HEAD + reads + CU_LAUNCH)


def test_cuda_a_host_global_is_state_as_a_static_one_is() -> None:
    # Only `static` and `__device__` lines were state: `const float* last_x;` without `static`
    # (the pointer_cache hack) passed. Shared memory and the constant bank are not state.
    for decl in ("const float* last_x = nullptr;", "static const float* last_x = nullptr;"):
        assert "global_state" in cu_rules(CU_HEAD + decl + "\n" + CU_KERNEL + CU_LAUNCH), decl
    shared = CU_KERNEL.replace("  if (i", "  static __shared__ float t[32];\n  if (i")
    bank = "__constant__ float scale[4];\n" + shared
    assert "global_state" not in cu_rules(CU_HEAD + bank + CU_LAUNCH)


def test_cpu_pointer_to_const_is_state_and_static_member_function_is_not() -> None:
    # `const` before `=` made the regex call a mutable pointer constant; `static int f(int);` in a
    # struct body was read as a static variable.
    assert "global_state" in cpu_rules("#include <stdint.h>\nstatic const float* last = 0;\n" + CPU_BODY)
    member = "#include <stdint.h>\nstruct Op { static int f(int); };\n" + CPU_BODY
    assert "global_state" not in cpu_rules(member)


def test_ascendc_line_continuation_no_longer_hides_a_forbidden_api() -> None:
    # The old parse did not splice: `Sig\<newline>moid` read as two names.
    src = AscendSource("void f() {\n  AscendC::Sig\\\nmoid<float>(y, y, n);\n}\n")
    found = integrity.forbidden_references(src, ("Sigmoid",))
    assert [(r.name, r.line) for r, _api in found] == [("Sigmoid", 2)]


def test_ascendc_extern_c_in_a_comment_is_not_c_linkage() -> None:
    # `re.search(r'extern\s*"C"', text)` was satisfied by a comment.
    names = OpNames("AbsCustom", "abs_custom", "AbsCustomTilingData", "aclnnAbsCustom", "aclnn_abs_custom.h",
                    "aclrtlaunch_abs_custom.h", "sage_abs_custom")
    kernel = '// extern "C" is below\n__global__ __aicore__ void abs_custom(GM_ADDR x, GM_ADDR y) {}\n'
    findings = check_kernel_entry(AscendSource(kernel), "op_kernel/abs_custom.cpp", ("x", "y"), names)
    assert any('extern "C"' in f.reason for f in findings)
    linked = 'extern "C" ' + kernel.split("\n", 1)[1]
    assert check_kernel_entry(AscendSource(linked), "op_kernel/abs_custom.cpp", ("x", "y"), names) == []


def test_ascendc_other_file_directives_are_findings() -> None:
    # Only `preproc_include` nodes were read: `#include_next` / `#import` went unchecked.
    src = AscendSource('#include "kernel_operator.h"\n#include_next <acl/acl.h>\n#import "x.h"\n')
    assert [f.line for f in check_includes(src, "op_kernel/k.cpp", "kernel", set())] == [2, 3]


# ---- unparseable source is read strictly -----------------------------------------------------------


@pytest.mark.parametrize("lint", [cpu_lint, cuda_lint], ids=["cpu", "cuda"])
def test_state_in_an_error_region_is_still_state(lint) -> None:  # type: ignore[no-untyped-def]
    junk = "int ) static float carry [4] ( ;\n"
    src = (CU_HEAD + junk + CU_KERNEL + CU_LAUNCH) if lint is cuda_lint else (junk + CPU_BODY)
    assert syntax.parse(src, True, dialect="cuda" if lint is cuda_lint else None).tree.root_node.has_error
    assert "global_state" in {f.rule for f in lint(src)}


def test_names_in_an_error_region_are_read_and_words_there_are_strict() -> None:
    unit = syntax.parse("int ) ( open = 1 ; fopen ( ;\n", False)
    assert unit.tree.root_node.has_error
    assert {"open", "fopen"} <= {t.text for t in unit.tokens}
    open_tok = next(t for t in unit.tokens if t.text == "open")
    assert syntax_names.word_is_the_function(open_tok, syntax.variables_by_scope(unit.tokens))
    assert {"os_access"} <= cpu_rules("int ) ( open = 1 ;\n" + CPU_BODY)


def test_cpu_size_written_in_hex_or_behind_a_macro_is_still_a_literal() -> None:
    # The regex matched decimal digits only; the parse reads the literal's value (48 = 0x30).
    from pathlib import Path

    from sagekernel.tasks.loader import load_task

    task = load_task(Path(__file__).resolve().parent / "fixtures" / "tasks" / "relu_rows.py")
    loop = "{ for (int64_t i = 0; i < ROWS*D; ++i) out[i] = x[i]; }"
    for literal in ("0x30", "48"):
        ignores = f"#include <stdint.h>\n{CPU_SIG} {loop.replace('ROWS', literal)}"
        assert "hardcoded_shape" in {f.rule for f in cpu_lint(ignores, task)}, literal
    behind_macro = f"#include <stdint.h>\n#define ROWS 0x30\n{CPU_SIG} {loop}"
    assert "hardcoded_shape" in {f.rule for f in cpu_lint(behind_macro, task)}


def test_ascendc_macro_bodies_are_tokens_not_words() -> None:
    # Macro bodies were split by a word regex, so a string naming the API was a reference.
    quoted = AscendSource('#define MSG "uses no Sigmoid here"\nvoid f() {}\n')
    assert integrity.forbidden_references(quoted, ("Sigmoid",)) == []
    called = AscendSource("#define CALL(y) AscendC::Sigmoid<float>(y, y, 8)\n")
    found = integrity.forbidden_references(called, ("Sigmoid",))
    assert [(r.name, r.line, r.qualified_by, r.in_macro) for r, _ in found] == [("Sigmoid", 1, "AscendC", 1)]
