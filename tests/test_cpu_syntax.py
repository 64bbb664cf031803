"""The CPU source rules on a real parse: every spelling of a banned construct is rejected with its
rule, in the source and after the preprocessor; honest kernels raise nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sagekernel.targets.cpu import syntax
from sagekernel.targets.cpu.flags import compiler_command, is_cxx
from sagekernel.targets.cpu.lint import lint_source
from sagekernel.targets.cpu.preprocessed import lint_preprocessed

SUITE = Path(__file__).resolve().parents[1] / "src" / "sagekernel" / "tasks" / "suite"
SIG = "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D)"
LOOP = "for (int64_t i = 0; i < B * D; ++i) out[i] = x[i];"


def c_kernel(top: str = "", body: str = "", include: str = "") -> str:
    return f"#include <stdint.h>\n{include}{top}\n{SIG} {{\n    {body}\n    {LOOP}\n}}\n"


def cxx_kernel(top: str = "", body: str = "") -> str:
    return f'#include <cstdint>\n{top}\nextern "C" {SIG} {{\n    {body}\n    {LOOP}\n}}\n'


def rules(source: str) -> set[str]:
    return {f.rule for f in lint_source(source)}


def preprocess(source: str) -> str:
    language = "c++" if is_cxx(source) else "c"
    exe = "g++" if language == "c++" else "gcc"
    if shutil.which(exe) is None:
        pytest.skip(f"{exe} is not installed (the CPU target needs it)")
    flags = [f for f in compiler_command(language)[1:] if f not in ("-shared",) and not f.startswith("-Wl")]
    done = subprocess.run([exe, *flags, "-E", "-x", language, "-", "-o", "-"], input=source,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    name = "kernel.cpp" if language == "c++" else "kernel.c"
    return done.stdout.replace('"<stdin>"', f'"{name}"')


def unit_rules(source: str) -> set[str]:
    return {f.rule for f in lint_preprocessed(preprocess(source), source)}


FAST_MATH = [
    c_kernel('__attribute__((noinline, optimize("fast-math"))) static float f(float v) { return v; }'),
    c_kernel('__attribute__((__optimize__("O3"))) static float f(float v) { return v; }'),
    c_kernel("__attribute ((hot, __optimize__(3))) static float f(float v) { return v; }"),
    c_kernel('static float __attribute__((cold)) __attribute__((optimize("Ofast"))) f(float v) '
             "{ return v; }"),
    cxx_kernel('[[gnu::optimize("fast-math")]] static float f(float v) { return v; }'),
    cxx_kernel('[[gnu::__optimize__("O3")]] static float f(float v) { return v; }'),
    cxx_kernel("[[gnu::__optimize__]] static float f(float v) { return v; }"),
    cxx_kernel('[[nodiscard, using gnu: optimize("fast-math")]] static float f(float v) { return v; }'),
    c_kernel('#pragma GCC optimize("fast-math")'),
    c_kernel('#pragma GCC opti\\\nmize("fast-math")'),
    c_kernel('/* a */ # /* b */ pragma GCC optimize ("O3")'),
    c_kernel('%:pragma GCC optimize("O3")'),
    c_kernel('_Pragma("GCC optimize(\\"fast-math\\")")'),
    c_kernel("#pragma GCC push_options"),
    c_kernel("#pragma clang fp contract(fast)"),
    c_kernel("#pragma STDC CX_LIMITED_RANGE ON"),
    c_kernel("", '_Pragma("GCC optimize(\\"fast-math\\")")'),
    c_kernel('#define FAST _Pragma("GCC optimize(\\"fast-math\\")")'),
    c_kernel('#define OPT __attribute__((optimize("O3")))'),
    c_kernel('[[gnu::optimize("fast-math")]] static float f(float v) { return v; }'),  # C grammar
]


@pytest.mark.parametrize("source", FAST_MATH)
def test_every_spelling_of_an_optimize_attribute_or_pragma_is_fast_math(source: str) -> None:
    assert "fast_math" in rules(source), source


ATTRIBUTES = [
    ('__attribute__((target("avx512f"))) static float f(float v) { return v; }', "target_attribute"),
    ('__attribute__((target_clones("avx2", "default"))) float f(float v) { return v; }', "target_attribute"),
    ('#pragma GCC target("avx2")', "target_attribute"),
    ('static void* pick(void) { return 0; }\nvoid g(void) __attribute__((ifunc("pick")));', "constructor"),
    ("__attribute__((used, constructor)) static void init(void) {}", "constructor"),
    ("__attribute__((__destructor__(101))) static void fini(void) {}", "constructor"),
    ('__attribute__((section(".init_array"))) static void (*p)(void) = 0;', "constructor"),
    ("#pragma init(setup)", "constructor"),
    ("__attribute__((weak)) float helper(float v) { return v; }", "symbol_attribute"),
    ('void other(void) __attribute__((alias("sage_kernel")));', "symbol_attribute"),
    ('__attribute__((visibility("default"))) float helper(float v) { return v; }', "symbol_attribute"),
    ("__attribute__((__used__)) static float helper(float v) { return v; }", "symbol_attribute"),
    ("#pragma weak helper", "symbol_attribute"),
    ("#pragma GCC visibility push(default)", "symbol_attribute"),
]


@pytest.mark.parametrize(("top", "rule"), ATTRIBUTES)
def test_load_time_target_and_symbol_attributes_are_rejected(top: str, rule: str) -> None:
    assert rule in rules(c_kernel(top)), top


@pytest.mark.parametrize(
    ("top", "rule"),
    [("[[gnu::constructor]] static void init() {}", "constructor"),
     ('[[gnu::target("avx2")]] static float f(float v) { return v; }', "target_attribute"),
     ("[[gnu::weak]] float helper(float v) { return v; }", "symbol_attribute")],
)
def test_standard_attribute_syntax_is_read_too(top: str, rule: str) -> None:
    assert rule in rules(cxx_kernel(top)), top


FP_ENVIRONMENT = [
    ("", "(fesetround)(0x400);"),
    ("", "(*&fesetenv)(0);"),
    ("", "int (*set)(int) = fesetround; set(0x400);"),
    ("", "int (*set)(int) = &fesetround; (void)set;"),
    ("", "__builtin_ia32_ldmxcsr(0x9fc0);"),
    ("", "_mm_setcsr(0x9fc0);"),
    ("", "_MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);"),
    ("", "_MM_SET_ROUNDING_MODE(_MM_ROUND_TOWARD_ZERO);"),
    ("", "unsigned csr = __builtin_ia32_stmxcsr(); (void)csr;"),
    ("", "fes\\\netround(0x400);"),
    ("extern int fesetround(int);", ""),
    ("#define SET fesetround", "SET(0x400);"),
    ("#pragma STDC FENV_ACCESS ON", ""),
]


@pytest.mark.parametrize(("top", "body"), FP_ENVIRONMENT)
def test_fp_environment_names_are_rejected_in_any_expression(top: str, body: str) -> None:
    assert "fp_environment" in rules(c_kernel(top, body, "#include <immintrin.h>\n")), (top, body)


LINE_MARKERS = [
    '#line 10 "/usr/include/stdio.h"',
    "#line 10",
    '# 10 "/usr/include/stdio.h" 1 3 4',
    "# 10",
    "%:line 10",
    "# /* hidden */ line 10",
    "#li\\\nne 10",
    "/* c */ #line 3",
    "#pragma GCC system_header",
]


@pytest.mark.parametrize("top", LINE_MARKERS)
def test_line_markers_written_by_the_candidate_are_rejected(top: str) -> None:
    assert "line_marker" in rules(c_kernel(top)), top


def test_a_marker_inside_a_literal_or_comment_is_not_a_directive() -> None:
    assert "line_marker" not in rules(c_kernel('static const char msg[] = "\\n#line 3";\n// #line 4\n'
                                                "/*\n#line 5\n*/"))


@pytest.mark.parametrize(
    ("body", "rule"),
    [("time(0);", "timer"), ("(time)(0);", "timer"), ("long (*t)(long*) = &time; (void)t;", "timer"),
     ("(signal)(11, 0);", "fallback"), ("int (*o)(const char*, int, ...) = open; (void)o;", "os_access"),
     ("omp_set_dynamic(1);", "omp_state"), ("__asm__ volatile(\"\");", "inline_asm")],
)
def test_calls_through_parentheses_and_pointers_are_calls(body: str, rule: str) -> None:
    assert rule in rules(c_kernel("", body)), body


def test_a_variable_named_like_a_function_is_not_the_function() -> None:
    body = "float time = 2.0f, clock = 1.0f; out[0] = x[0] * time * clock; int open = 0; (void)open;"
    assert rules(c_kernel("", body)) == set()


@pytest.mark.parametrize(
    ("top", "rule"),
    [("static void work(void) { std::thread t(work); t.join(); }", "threads"),
     ("using namespace std::chrono;", "timer")],
)
def test_cxx_qualified_names(top: str, rule: str) -> None:
    assert rule in rules(cxx_kernel(top)), top


def test_harmless_attributes_and_pragmas_pass() -> None:
    top = ("__attribute__((always_inline, hot, aligned(64))) static inline float f(float v) { return v; }\n"
           "#pragma GCC unroll 4\n#pragma GCC ivdep\n")
    body = "float acc __attribute__((aligned(32))) = 0.f; (void)acc;\n    #pragma omp simd\n"
    assert rules(c_kernel(top, body)) == set()
    attributed = cxx_kernel("[[maybe_unused]] static const int k = 3;", "[[maybe_unused]] int u = 0;")
    assert rules(attributed) == set()


# ---- after the preprocessor ---------------------------------------------------------------------------

HIDDEN = [
    ('#define OPT optimize\n__attribute__((OPT("fast-math"))) static float f(float v) { return v; }', "",
     "fast_math"),
    ('#define P(x) _Pragma(#x)\nP(GCC optimize("fast-math"))', "", "fast_math"),
    ("#define ATTR(n) __attribute__((n))\nATTR(constructor) static void init(void) {}", "", "constructor"),
    ("#define ATTR(n) __attribute__((n))\nATTR(target_clones(\"avx2\",\"default\")) float f(float v) "
     "{ return v; }", "", "target_attribute"),
    ("#define CALL(f, v) (f)(v)\n#define NAME fe##setround", "CALL(NAME, 0x400);", "fp_environment"),
    ("", "_MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);", "fp_environment"),
]


@pytest.mark.parametrize(("top", "body", "rule"), HIDDEN)
def test_macro_spellings_are_caught_in_the_preprocessed_unit(top: str, body: str, rule: str) -> None:
    source = c_kernel(top, body, "#include <immintrin.h>\n")
    found = lint_preprocessed(preprocess(source), source)
    assert rule in {f.rule for f in found}, found
    assert all(f.line is None or f.line > 2 for f in found if f.rule == rule)  # the candidate's lines


def test_candidate_markers_are_caught_in_the_unit_even_without_the_source_rule() -> None:
    renamed = c_kernel('#line 40 "/usr/include/stdio.h"\nstatic float cache[4];', "cache[0] = x[0];")
    found = lint_preprocessed(preprocess(renamed))  # no source: only the markers speak
    assert "line_marker" in {f.rule for f in found}
    entered = c_kernel('# 1 "/usr/include/stdio.h" 1 3 4\nstatic float cache[4];\n# 3 "kernel.c" 2')
    assert "line_marker" in unit_rules(entered)


def test_a_unit_splits_rows_by_the_preprocessors_own_markers() -> None:
    unit = syntax.parse("int a;\nint b = fes\\\netround;\n", False)
    assert unit.text.split("\n")[1] == "int b = fesetround;" and unit.line(1) == 2


@pytest.mark.parametrize(
    "top",
    ['/* a */ #include "ref.h"', '#inc\\\nlude "ref.h"', "%:include <cblas.h>", "#include_next <math.h>"],
)
def test_includes_are_read_as_directives(top: str) -> None:
    assert "include" in rules(c_kernel(top)), top


def test_a_macro_defined_before_an_include_is_rejected() -> None:
    hijack = '#define __inline __attribute__((optimize("fast-math"))) __inline\n#include <immintrin.h>\n'
    assert "macro_before_include" in rules(hijack + c_kernel())
    assert rules("#define _GNU_SOURCE\n" + c_kernel("#define TILE 8")) == set()


def test_library_definitions_are_rejected_unless_static() -> None:
    assert "defines_library_symbol" in rules(c_kernel("float expf(float v) { return v; }"))
    helper = "static inline float select(float a, float b, int c) { return c ? a : b; }"
    assert rules(c_kernel(helper)) == set()


HONEST = sorted(SUITE.glob("**/*.cpu.c"))


def test_the_suite_has_honest_kernels() -> None:
    assert len(HONEST) >= 20


@pytest.mark.parametrize("path", HONEST, ids=[p.stem for p in HONEST])
def test_honest_kernels_raise_no_findings(path: Path) -> None:
    source = path.read_text()
    assert lint_source(source) == []
    assert lint_preprocessed(preprocess(source), source) == []


@pytest.mark.parametrize(
    ("top", "rule"),
    [('#define P(x) _Pragma(#x)\nP(GCC optimize("fast-math"))', "fast_math"),
     ('# 1 "/usr/include/stdio.h" 1 3 4\nstatic float cache[4];\n# 9 "/box/build/kernel.c" 2',
      "line_marker")],
)
def test_the_build_checks_its_own_preprocessed_unit(tmp_path: Path, top: str, rule: str) -> None:
    """Through the real build (sandboxed gcc -save-temps), with no source lint in front of it."""
    from sagekernel.targets.cpu import build as build_mod

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (the CPU target needs it)")
    built = build_mod.build(c_kernel(top), tmp_path)
    assert not built.ok and built.stage == "lint", built.message
    assert rule in {f.rule for f in built.findings}, built.findings
