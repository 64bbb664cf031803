"""Environment variables that change what a run computes, read once into the run's identity.

A variable listed here changes retrieval, task shapes, the build or the timing of the kernels a
run produces, so a run records the values it started with (`RunConfig.environment`, part of its
key) and a resume under other values is refused (`environment_change`): resuming would silently
mix two retrieval modes or two sets of shapes within one run. Variables that only say where
caches live or how many jobs build in parallel (SAGE_CACHE_DIR, SAGE_ASCENDC_CACHE,
SAGE_ASCENDC_JOBS) or how long loading may take (SAGE_TASK_LOAD_*) are not listed: they change no
result. The modules that read these variables read them from the process environment; a run's
values equal the process's because a run never opens under other values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Variables that change the results of a run of every target: why each one does.
COMMON: dict[str, str] = {
    "SAGE_NO_EMBED": "1 turns dense retrieval off (memory/embedding.py)",
    "SAGE_TASK_MAX_BYTES": "the memory budget that picks published tasks' shapes (tasks/budget.py)",
    "SAGE_TASK_MAX_FLOPS": "the compute budget that picks published tasks' shapes (tasks/budget.py)",
    "SAGE_NPUKERNELBENCH": "the NPUKernelBench checkout the paper_eval suites load (tasks/suites.py)",
}

#: Variables that change the results of one target's runs (the other targets never read them).
BY_TARGET: dict[str, dict[str, str]] = {
    "ascendc": {
        "SAGE_ASCENDC_TEMPLATE": "the project template the candidates are written into",
        "SAGE_ASCENDC_BUILD": "the build path (framework or direct)",
        "SAGE_ASCENDC_SOC": "the SoC the kernels are compiled for",
        "SAGE_ASCENDC_NPU_ARCH": "the NPU architecture the kernels are compiled for",
        "SAGE_ASCENDC_TIMING": "the timing protocol (batched or cold-l2)",
        "SAGE_ASCENDC_PROFILE": "msprof op reports in the diagnostics fed back to the model",
    },
}


def result_variables(target: str) -> dict[str, str]:
    """The variables that change the results of a run of `target` (name: why)."""
    return {**COMMON, **BY_TARGET.get(target, {})}


def read_environment(target: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The result-changing variables set in `env` (default: this process's) for `target`."""
    env = os.environ if env is None else env
    return {name: env[name] for name in sorted(result_variables(target)) if name in env}


def environment_change(recorded: Mapping[str, str], target: str,
                       env: Mapping[str, str] | None = None) -> list[str]:
    """How this process's result-changing variables differ from those a run recorded, one line
    per variable (empty: the same)."""
    current = read_environment(target, env)
    lines = []
    for name in sorted(set(recorded) | set(current)):
        was, now = recorded.get(name), current.get(name)
        if was != now:
            lines.append(f"{name}: the run has {_shown(was)}, this process has {_shown(now)} "
                         f"({result_variables(target).get(name, 'changes results')})")
    return lines


def _shown(value: str | None) -> str:
    return "it unset" if value is None else f"{value!r}"


#: Variables sagekernel reads that change no result, and why: with COMMON and BY_TARGET every
#: SAGE_* variable the source reads is classified (tests/test_run_config.py checks it), so a new
#: one cannot change results outside the run's identity unnoticed.
NO_RESULT: dict[str, str] = {
    "SAGE_CACHE_DIR": "where compiled drivers are cached",
    "SAGE_ASCENDC_CACHE": "where Ascend builds are cached",
    "SAGE_ASCENDC_JOBS": "how many Ascend builds run at once",
    "SAGE_ASCENDC_VENDOR": "the vendor directory name of the built operator package",
    "SAGE_TASK_LOAD_TIMEOUT_S": "how long loading a task file may take (a slow load fails, named)",
    "SAGE_TASK_LOAD_MEM_BYTES": "the memory loading a task file may take (a larger load fails, named)",
    "SAGE_RESULT_FD": "internal: the descriptor a sandboxed child reports on",
    "SAGE_MCP_TOKEN": "the bearer token of `sage mcp --http`",
    "SAGE_MEMORY_URL": "the default of --memory; the memory chosen is the run's `memory` setting, part of "
    "its identity",
    "SAGE_TEAM": "the team stamped on provenance records; retrieval depends on it only through "
    "--retrieve-only team=..., part of the run's identity",
}
