"""Static rules for CUDA kernels, each with its one-line reason (comments and strings blanked first,
as the CPU rules do; the raw text is checked for clock registers in inline PTX)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu.lint import strip_source
from sagekernel.tasks.task import Task


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    pattern: re.Pattern[str]


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.MULTILINE)


RULES: tuple[Rule, ...] = (
    Rule(
        "library_op",
        "calls a library (cuBLAS, cuDNN, cuFFT, CUTLASS, Thrust, CUB, ATen) that does the "
        "operator's work; the kernel must compute it itself",
        _rx(
            r"\b(?:cublas\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*|curand\w*|cutlass|thrust|cub|at|"
            r"torch|c10)\s*::|\b(?:cublas|cudnn|cufft|cusparse|cusolver|cublasLt)\w*\s*\("
        ),
    ),
    Rule(
        "stream",
        "creates or captures streams or graphs, or defers host work: work outside the given "
        "stream escapes the timer; launch on `stream` only",
        _rx(
            r"\bcuda(?:StreamCreate\w*|StreamBeginCapture\w*|StreamEndCapture|Graph\w+|LaunchHostFunc|"
            r"StreamAddCallback|StreamWaitEvent|StreamQuery)\b|\bcudaStreamPerThread\b|\bcudaStreamLegacy\b|"
            r"\bcuStream\w+|\bcuGraph\w+"
        ),
    ),
    Rule(
        "timer",
        "reads a clock (device clock(), clock64(), events, host timers); timing belongs to the "
        "harness and a kernel must not observe it",
        _rx(
            r"\b(?:clock|clock64|__globaltimer|cudaEvent\w+|clock_gettime|gettimeofday|"
            r"omp_get_wtime)\s*\(|\bstd::chrono\b"
        ),
    ),
    Rule(
        "l2_persistence",
        "changes cache persistence or device limits (access-policy windows, persisting "
        "L2): the state outlives the call and defeats the harness's cache flush",
        _rx(
            r"\bcuda(?:StreamSetAttribute|DeviceSetLimit|CtxResetPersistingL2Cache|DeviceSetCacheConfig|"
            r"DeviceSetSharedMemConfig)\b|\baccessPolicyWindow\b|\bhitProp\b"
        ),
    ),
    Rule(
        "host_compute",
        "moves device data to host or managed memory, where the host could compute the "
        "result; inputs and outputs stay in device memory",
        _rx(
            r"\bcudaMemcpyDeviceToHost\b|\bcudaMemcpyDefault\b|\bcuda(?:MallocHost|HostAlloc|"
            r"MallocManaged|HostRegister|HostGetDevicePointer)\b|\b__managed__\b"
        ),
    ),
    Rule(
        "device_state",
        "resets or switches the device, or changes its flags: the harness owns the device and the context",
        _rx(
            r"\bcuda(?:DeviceReset|SetDevice|SetDeviceFlags|DeviceDisablePeerAccess|"
            r"DeviceEnablePeerAccess|ProfilerStart|ProfilerStop)\b"
        ),
    ),
    Rule(
        "os_access",
        "file, network, process or dynamic-loading calls are not allowed: a kernel may only "
        "read its inputs and write its outputs",
        _rx(
            r"\b(?:fopen|freopen|open|openat|creat|socket|connect|fork|vfork|execl|execlp|execv|execvp|"
            r"execve|system|popen|dlopen|dlsym|syscall|ptrace|mmap|getenv|memfd_create)\s*\("
        ),
    ),
    Rule(
        "threads",
        "host threads are not allowed: their work escapes the timer",
        _rx(r"\bpthread_create\b|\bstd::(?:j?thread|async)\b|\bthrd_create\b"),
    ),
    Rule(
        "fallback",
        "signal handlers, non-local jumps and exceptions hide failures and route around the kernel",
        _rx(r"\b(?:setjmp|longjmp|signal|sigaction)\s*\(|\btry\s*\{|\bcatch\s*\("),
    ),
    Rule(
        "constructor",
        "code that runs when the library is loaded or unloaded runs outside the harness's view",
        _rx(r"__attribute__\s*\(\([^)]*\b(?:constructor|destructor|section)\b"),
    ),
    Rule(
        "global_state",
        "mutable state that outlives a call (__device__ or static variables) can carry "
        "results between calls; keep state in registers, shared memory or per-call allocations",
        _rx(
            r"^[ \t]*(?:static[ \t]+)?__device__[ \t]+(?!__forceinline__|__noinline__|inline\b|"
            r"static\b|constexpr\b|const\b)(?:[\w:<>]+[ \t*&]+)+\w+[ \t]*(?:\[[^\]]*\][ \t]*)*(?:=[^;(]*)?;|"
            r"^[ \t]*static[ \t]+(?!__device__|__global__|__host__|inline\b|__forceinline__|constexpr\b|"
            r"const\b|void\b)(?:[\w:<>]+[ \t*&]+)+\w+[ \t]*(?:\[[^\]]*\][ \t]*)*(?:=[^;(]*)?;|"
            # `static const T* p`: the pointee is const, the pointer is not
            r"^[ \t]*static[ \t]+const[ \t]+[\w:<>]+[ \t]*\*+[ \t]*(?!const\b)\w+[ \t]*(?:=[^;(]*)?;"
        ),
    ),
)

ALLOWED_HEADERS = frozenset(
    {
        "cuda_runtime.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cuda_fp8.h",
        "cooperative_groups.h",
        "cooperative_groups/reduce.h",
        "cooperative_groups/memcpy_async.h",
        "mma.h",
        "cuda_pipeline.h",
        "cuda/pipeline",
        "cuda/barrier",
        "stdint.h",
        "cstdint",
        "math.h",
        "cmath",
        "float.h",
        "cfloat",
        "limits.h",
        "climits",
        "stddef.h",
        "cstddef",
        "type_traits",
        "utility",
        "algorithm",
        "limits",
        "math_constants.h",
        "vector_types.h",
        "cuda_runtime_api.h",
        "device_launch_parameters.h",
    }
)
INCLUDE_REASON = (
    "only the CUDA runtime, fp16/bf16/fp8, cooperative-groups, mma, pipeline and standard "
    "maths headers may be included; other headers bring in libraries or OS access"
)
PTX_CLOCK = re.compile(r"%(?:globaltimer\w*|clock64|clock)\b")


def lint_source(source: str, task: Task | None = None) -> list[LintFinding]:
    del task
    code, _strings = strip_source(source)
    lines = source.splitlines()
    findings: list[LintFinding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, reason: str, line: int) -> None:
        if (rule, line) not in seen:
            seen.add((rule, line))
            excerpt = lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""
            findings.append(LintFinding(rule=rule, reason=reason, line=line, excerpt=excerpt))

    for rule in RULES:
        for m in rule.pattern.finditer(code):
            add(rule.name, rule.reason, code.count("\n", 0, m.start()) + 1)
    for m in PTX_CLOCK.finditer(source):
        add(
            "timer",
            RULES[2].reason + " (a clock register in inline PTX)",
            source.count("\n", 0, m.start()) + 1,
        )
    for m in re.finditer(
        r"^[ \t]*#[ \t]*(include|include_next|import|embed)\b[ \t]*([<\"])?([^>\"\n]*)", source, re.MULTILINE
    ):
        header = m.group(3).strip()
        if m.group(1) != "include" or m.group(2) is None or header not in ALLOWED_HEADERS:
            add(
                "include",
                f"{INCLUDE_REASON} (found {m.group(0).strip()})",
                source.count("\n", 0, m.start()) + 1,
            )
    if not re.search(r'\bextern\s+"\s*"', code):  # string contents are blanked: extern "C" -> extern " "
        add("contract", 'sage_launch must be declared extern "C" (C++ would mangle its name)', 1)
    findings.sort(key=lambda f: (f.line or 0, f.rule))
    return findings
