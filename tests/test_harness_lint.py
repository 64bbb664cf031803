"""Static rules: each fires on its construct, and ordinary kernels raise no false positives."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.targets.cpu import syntax, syntax_names
from sagekernel.targets.cpu.lint import lint_source
from sagekernel.tasks.loader import load_task

TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
SIG = "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D)"


def rules(src: str) -> set[str]:
    return {f.rule for f in lint_source(src, load_task(TASKS / "relu_rows.py"))}


CLEAN = [
    # OpenMP, SIMD intrinsics, static const tables, a local helper, tiles equal to small powers of two
    f"""#include <stdint.h>
#include <immintrin.h>
#include <omp.h>
static const float LUT[4] = {{0.f, 1.f, 2.f, 3.f}};
static inline float relu(float v) {{ return v > 0.f ? v : 0.f; }}
{SIG} {{
    #pragma omp parallel for
    for (int64_t i = 0; i < B; ++i) {{
        int64_t j = 0;
        for (; j + 8 <= D; j += 8)
            _mm256_storeu_ps(out + i*D + j, _mm256_max_ps(_mm256_loadu_ps(x + i*D + j), _mm256_setzero_ps()));
        for (; j < D; ++j) out[i*D + j] = relu(x[i*D + j]) + LUT[0];
    }}
}}""",
    # C++ with extern "C", std::vector, a timer word inside a comment and a string
    f"""#include <vector>
#include <cstdint>
// do not call clock_gettime or fopen here
extern "C" {SIG} {{
    const char* note = "time(0) is not used";
    (void)note;
    std::vector<float> tmp(D);
    for (int64_t i = 0; i < B; ++i) for (int64_t j = 0; j < D; ++j) out[i*D+j] = x[i*D+j] > 0 ? x[i*D+j] : 0;
}}""",
]


@pytest.mark.parametrize("src", CLEAN)
def test_ordinary_kernels_pass(src: str) -> None:
    assert rules(src) == set()


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("struct timespec t; clock_gettime(0, &t);", "timer"),
        ("double t = omp_get_wtime(); (void)t;", "timer"),
        ('FILE* f = fopen("/proc/self/maps", "r"); (void)f;', "os_access"),
        ('const char* p = "/proc/self/mem"; (void)p;', "filesystem_path"),
        ('system("ls");', "os_access"),
        ('void* h = dlopen("libm.so", 2); (void)h;', "os_access"),
        ("static float cache[16]; (void)cache;", "global_state"),
        ('__asm__("nop");', "inline_asm"),
        ("signal(11, 0);", "fallback"),
    ],
)
def test_rules_fire_inside_a_kernel(snippet: str, rule: str) -> None:
    loop = "for (int64_t i = 0; i < B*D; ++i) out[i] = x[i];"
    src = f"#include <stdint.h>\n{SIG} {{\n    {snippet}\n    {loop}\n}}\n"
    assert rule in rules(src)


def test_file_scope_mutable_global_is_flagged_but_const_is_not() -> None:
    body = f"{SIG} {{ for (int64_t i = 0; i < B*D; ++i) out[i] = x[i]; }}\n"
    assert "global_state" in rules("#include <stdint.h>\nfloat scratch[64];\n" + body)
    assert "global_state" not in rules("#include <stdint.h>\nconst float k[2] = {1, 2};\n" + body)


def test_include_allow_list_and_fast_math() -> None:
    body = f"{SIG} {{ for (int64_t i = 0; i < B*D; ++i) out[i] = x[i]; }}\n"
    assert "include" in rules("#include <cblas.h>\n#include <stdint.h>\n" + body)
    assert "include" in rules('#include "ref.h"\n#include <stdint.h>\n' + body)
    assert "fast_math" in rules('#include <stdint.h>\n__attribute__((optimize("Ofast")))\n' + body)


def test_hardcoded_size_only_when_the_parameter_is_ignored() -> None:
    uses_param = (
        f"#include <stdint.h>\n{SIG} {{ for (int64_t i = 0; i < B*D && i < 500000; ++i) out[i] = x[i]; }}"
    )
    assert "hardcoded_shape" not in rules(uses_param)
    ignores = f"#include <stdint.h>\n{SIG} {{ for (int64_t i = 0; i < 48*D; ++i) out[i] = x[i]; }}"
    assert "hardcoded_shape" in rules(ignores)


def test_front_end_keeps_lines_and_collects_strings() -> None:
    # strip_source (the regex front end) is gone: the one parse keeps comments out of the code
    # and gives each string literal its line.
    unit = syntax.parse('int a; /* x\ny */ const char* s = "/tmp/x"; // fopen(\n', cxx=False)
    names = {t.text for t in unit.tokens}
    assert "fopen" not in names and "a" in names and "s" in names
    assert [(unit.line(t.row), v) for t, v in syntax_names.string_runs(unit.tokens)] == [(2, "/tmp/x")]


def test_function_pointer_globals_are_state_and_lines_are_exact() -> None:
    body = f"{SIG} {{ for (int64_t i = 0; i < B*D; ++i) out[i] = x[i]; }}\n"
    found = lint_source("#include <stdint.h>\n\nvoid (*slot)(void);\nfloat g;\nint helper(int);\n" + body)
    assert [(f.rule, f.line) for f in found] == [("global_state", 3), ("global_state", 4)]
    const_ptr = "#include <stdint.h>\nint (* const fixed)(int) = 0;\n" + body
    assert "global_state" not in rules(const_ptr)


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("_mm_setcsr(0x9fc0);", "fp_environment"),
        ("omp_set_num_threads(4);", "omp_state"),
        ("omp_set_schedule(omp_sched_static, 7);", "omp_state"),
    ],
)
def test_state_outside_the_kernel_is_flagged(snippet: str, rule: str) -> None:
    src = f"#include <stdint.h>\n{SIG} {{\n    {snippet}\n    out[0] = x[0];\n}}\n"
    assert rule in rules(src)


def test_omp_locks_and_num_threads_clause_stay_allowed() -> None:
    src = (
        f"#include <stdint.h>\n#include <omp.h>\n{SIG} {{\n    omp_lock_t l; omp_init_lock(&l);\n"
        "    omp_set_lock(&l); omp_unset_lock(&l); omp_destroy_lock(&l);\n"
        "    #pragma omp parallel for num_threads(2)\n"
        "    for (int64_t i = 0; i < B*D; ++i) out[i] = x[i];\n}\n"
    )
    assert rules(src) == set()


def test_computed_and_nonstandard_includes_are_flagged() -> None:
    body = f"{SIG} {{ out[0] = x[0]; }}\n"
    for directive in ("#include HDR", "#include_next <stdint.h>", '#import "x.h"', "#embed <data>"):
        src = f"#include <stdint.h>\n#define HDR <stdint.h>\n{directive}\n" + body
        assert "include" in rules(src), directive


def test_preprocessed_text_keeps_the_candidate_lines() -> None:
    from sagekernel.targets.cpu.preprocessed import lint_preprocessed, main_file_text

    unit = (
        '# 0 "k.c"\n# 1 "/usr/include/stdint.h" 1 3 4\nstatic int in_header;\n'
        '# 2 "k.c" 2\n\nvoid f(void) { static int hidden; }\n# 1 "/tmp/ref.c" 1\nint leaked;\n'
    )
    text, files = main_file_text(unit)
    assert text.splitlines()[2] == "void f(void) { static int hidden; }"
    assert files == ["/usr/include/stdint.h", "/tmp/ref.c"]
    found = {(f.rule, f.line) for f in lint_preprocessed(unit)}
    assert ("global_state", 3) in found and ("include", None) in found
    assert all(f.line != 1 for f in lint_preprocessed(unit))  # the header's own static is not ours
