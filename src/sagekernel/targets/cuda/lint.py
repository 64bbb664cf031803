"""Static rules for CUDA kernels, each with its one-line reason. The source is read through the one
C-family front end (targets/cpu/syntax.py, CUDA dialect: `__device__` and friends are recorded
qualifiers, `k<<<g, b>>>(x)` a call), so comments and strings never fire a rule and a name is
found wherever it stands; this module holds only the tables and what each finding says."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import syntax
from sagekernel.targets.cpu import syntax_names as names
from sagekernel.targets.cpu.syntax_query import Source, one_per_rule_and_line
from sagekernel.tasks.task import Task

TIMER_REASON = (
    "reads a clock (device clock(), clock64(), events, host timers); timing belongs to the "
    "harness and a kernel must not observe it"
)
OS_REASON = (
    "file, network, process or dynamic-loading calls are not allowed: a kernel may only "
    "read its inputs and write its outputs"
)
FALLBACK_REASON = "signal handlers, non-local jumps and exceptions hide failures and route around the kernel"
HOST_COMPUTE_REASON = (
    "moves device data to host or managed memory, where the host could compute the "
    "result; inputs and outputs stay in device memory"
)
LIBRARY_REASON = (
    "calls a library (cuBLAS, cuDNN, cuFFT, CUTLASS, Thrust, CUB, ATen) that does the "
    "operator's work; the kernel must compute it itself"
)
RULES: tuple[names.NameRule, ...] = (
    names.NameRule("library_op", LIBRARY_REASON,
             names.whole(r"(?:cublas|cudnn|cufft|cusparse|cusolver|cublasLt)\w*")),
    names.NameRule(
        "stream",
        "creates or captures streams or graphs, or defers host work: work outside the given "
        "stream escapes the timer; launch on `stream` only",
        names.whole(
            r"cuda(?:StreamCreate\w*|StreamBeginCapture\w*|StreamEndCapture|Graph\w+|LaunchHostFunc|"
            r"StreamAddCallback|StreamWaitEvent|StreamQuery)|cudaStreamPerThread|cudaStreamLegacy|"
            r"cuStream\w+|cuGraph\w+"
        ),
    ),
    names.NameRule("timer", TIMER_REASON, names.whole(
        r"clock64|__globaltimer|cudaEvent\w+|clock_gettime|gettimeofday|omp_get_wtime|std::chrono")),
    names.NameRule("timer", TIMER_REASON, names.whole(r"clock"), word=True),
    names.NameRule(
        "l2_persistence",
        "changes cache persistence or device limits (access-policy windows, persisting "
        "L2): the state outlives the call and defeats the harness's cache flush",
        names.whole(
            r"cuda(?:StreamSetAttribute|DeviceSetLimit|CtxResetPersistingL2Cache|DeviceSetCacheConfig|"
            r"DeviceSetSharedMemConfig)|accessPolicyWindow|hitProp"
        ),
    ),
    names.NameRule("host_compute", HOST_COMPUTE_REASON, names.whole(
        r"cudaMemcpyDeviceToHost|cudaMemcpyDefault|cuda(?:MallocHost|HostAlloc|MallocManaged|HostRegister|"
        r"HostGetDevicePointer)"
    )),
    names.NameRule(
        "device_state",
        "resets or switches the device, or changes its flags: the harness owns the device and the context",
        names.whole(
            r"cuda(?:DeviceReset|SetDevice|SetDeviceFlags|DeviceDisablePeerAccess|"
            r"DeviceEnablePeerAccess|ProfilerStart|ProfilerStop)"
        ),
    ),
    names.NameRule("os_access", OS_REASON, names.whole(
        r"fopen|freopen|openat|vfork|execl|execlp|execv|execvp|execve|popen|dlopen|dlsym|ptrace|getenv|"
        r"memfd_create"
    )),
    names.NameRule("os_access", OS_REASON, names.whole(r"open|creat|socket|connect|fork|system|syscall|mmap"),
             word=True),
    names.NameRule("threads", "host threads are not allowed: their work escapes the timer",
             names.whole(r"pthread_create|std::j?thread|std::async|thrd_create")),
    names.NameRule("fallback", FALLBACK_REASON, names.whole(r"setjmp|longjmp|sigaction")),
    names.NameRule("fallback", FALLBACK_REASON, names.whole(r"signal"), word=True),
)
#: Namespaces of libraries that do the operator's work (`thrust::sort`, `at::matmul`).
LIBRARY_NAMESPACES = frozenset({"cutlass", "thrust", "cub", "at", "torch", "c10"})
CONSTRUCTOR_REASON = "code that runs when the library is loaded or unloaded runs outside the harness's view"
CONSTRUCTOR_ATTRIBUTES = frozenset({"constructor", "destructor", "section"})
GLOBAL_STATE_REASON = (
    "mutable state that outlives a call (host or __device__ globals, static variables) can carry "
    "results between calls; keep state in registers, shared memory or per-call allocations"
)
#: Every variable that outlives a call is state (syntax_query.Source.mutable_state), except
#: `__shared__` (it lives for one block) and `__constant__` (the read-only parameter bank).
NOT_STATE_WORDS = frozenset({"__shared__", "__constant__"})

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
    return one_per_rule_and_line(source, _findings(Source(source, dialect="cuda")))


def _findings(src: Source) -> Iterator[tuple[str, str, int]]:
    unit = src.unit
    tokens = unit.tokens
    variables = syntax.variables_by_scope(tokens)
    for tok in unit.expanded:  # macro bodies and directive arguments included
        yield from ((r, why, unit.line(tok.row)) for r, why in _token_rules(tok, variables))
    for i in range(len(tokens)):
        if names.attribute_opens(tokens, i):
            for name_tok in names.attribute_group(tokens, i):
                if names.attribute_name(name_tok.text) in CONSTRUCTOR_ATTRIBUTES:
                    yield "constructor", CONSTRUCTOR_REASON, unit.line(name_tok.row)
    for q in unit.qualifiers:
        if q.word == "__managed__":
            yield "host_compute", HOST_COMPUTE_REASON, unit.line(q.row)
    for state in src.mutable_state():
        if not state.words & NOT_STATE_WORDS:
            yield "global_state", GLOBAL_STATE_REASON, state.line
    for first, value in names.string_runs(tokens):  # inline PTX (and any other string) naming a clock
        if PTX_CLOCK.search(value):
            yield "timer", TIMER_REASON + " (a clock register in inline PTX)", unit.line(first.row)
    for d in unit.directives:
        allowed = d.name == "include" and d.header is not None and d.header[1] in ALLOWED_HEADERS
        if d.name in syntax.FILE_DIRECTIVES and not allowed:
            yield "include", f"{INCLUDE_REASON} (found #{d.name} {d.rest[:80]})", unit.line(d.row)
    if not names.has_extern_c(tokens):
        yield "contract", 'sage_launch must be declared extern "C" (C++ would mangle its name)', 1


def _token_rules(tok: syntax.Token, variables: dict[int | None, set[str]]) -> Iterator[tuple[str, str]]:
    if tok.kind in ("try", "catch"):
        yield "fallback", FALLBACK_REASON
    elif tok.kind == "namespace_identifier" and tok.text in LIBRARY_NAMESPACES:
        yield "library_op", LIBRARY_REASON
    elif (hit := names.name_rule(tok, RULES, variables, members=True)) is not None:
        yield hit.rule, hit.reason
