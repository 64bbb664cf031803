"""Harness settings (one dataclass; every field documented)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sagekernel.errors import SageError


class HarnessConfigError(SageError):
    """A harness setting of the wrong type or out of its range (named, before anything runs)."""


#: The least value of each numeric setting (a setting not listed here may be any value of its type).
#: `iters=-3` used to be accepted and time a single call; a zero timeout or limit would judge nothing.
MINIMUM: dict[str, float] = {
    "warmup": 0, "iters": 1, "rounds": 1, "recheck_per_round": 0, "timing_input_budget_bytes": 1 << 20,
    "calibration_rounds": 0, "threads": 1, "trials": 1, "variant_trials": 0, "build_timeout_s": 0.01,
    "call_timeout_s": 0.01, "start_timeout_s": 0.01, "timing_timeout_s": 0.01, "memory_limit_bytes": 64 << 20,
    "timing_memory_limit_bytes": 64 << 20, "speedup_ceiling": 1.0, "parent_threads": 1,
}
#: The values a string setting may take.
CHOICES: dict[str, tuple[str, ...]] = {"sandbox": ("auto", "bwrap", "unshare", "process"),
                                       "baseline": ("eager", "compile", "best")}


@dataclass
class HarnessConfig:
    """How one candidate is judged."""

    warmup: int = 5  #: untimed calls of each side before timing
    iters: int = 100  #: timed calls of each side, split evenly over `rounds` (each on never-seen inputs)
    rounds: int = 10  #: interleaved A/B rounds (random order per round); speedup = median of per-round ratios
    recheck_per_round: int = 2  #: timed calls per round whose outputs are checked, drawn after the round
    timing_input_budget_bytes: int = (
        512 << 20
    )  #: bytes of distinct inputs per timing run; fewer calls if larger
    calibration_rounds: int = 3  #: reference rounds timed before the candidate is loaded (disturbance check)
    fresh_process_recheck: bool = (
        True  #: re-run the default shape reversed in a fresh process (cross-call state)
    )
    warm_reference: bool = True  #: time the reference in a child of a warm server that imported torch once
    quarantine_remeasure: bool = True  #: re-measure a flagged timing in fresh processes before deciding
    threads: int = 1  #: OpenMP / torch threads for candidate and reference alike
    trials: int = 3  #: correctness trials on the default shape (fresh secret seed and distribution each)
    variant_trials: int = 2  #: trials on every shape variant
    held_out_shape: bool = True  #: also test the held-out shapes drawn per evaluation (tasks/sizegen.py)
    coverage_trials: bool = True  #: special values, ties, edge cases, drawn attributes (tasks/coverage.py)
    timed_held_out: bool = True  #: also time the large held-out shape; the verdict's speedup is the worse
    held_out_rounds: int = 3  #: interleaved rounds of the held-out timing (as many calls per round)
    build_timeout_s: float = 60.0  #: wall-clock limit for the compiler
    call_timeout_s: float = 20.0  #: wall-clock allowance per kernel call (a round may take calls x this)
    start_timeout_s: float = 15.0  #: allowance for a runtime process to start and load its artifact
    timing_timeout_s: float = 300.0  #: wall-clock limit for a whole timing run (both processes)
    memory_limit_bytes: int = 4 << 30  #: address-space limit (RLIMIT_AS) of the correctness process
    timing_memory_limit_bytes: int = 16 << 30  #: the timing process also holds torch
    speedup_ceiling: float = 10.0  #: speedups above this are flagged "speedup_audit"
    skip_timing: bool = False  #: stop after correctness (the verdict then has no latencies)
    sandbox: str = "auto"  #: "auto" (strongest available), "bwrap", "unshare" or "process"
    static_checks: bool = True  #: source lint + symbol checks; False only in tests of the runtime defences
    canaries: bool = True  #: check that null kernels (zeros, constant, input copy) fail this task's trials
    #: what the speedup is over: the reference's PyTorch eager forward, its `torch.compile`d forward
    #: (inductor; compiled before timing), or per round the faster of the two (harness/baseline.py)
    baseline: str = "eager"
    parent_threads: int = 1  #: torch threads of this process for inputs/references/comparisons (restored)

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = setting_problem(f.name, f.type, getattr(self, f.name))
            if problem:
                raise HarnessConfigError(f"harness setting {f.name}: {problem}")


def setting_problem(name: str, annotation: Any, value: Any) -> str | None:
    """Why `value` is not a valid value of the harness setting `name` (None: it is)."""
    kind = str(annotation)
    if kind == "bool":
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        return f"expected a whole number, got {value!r}"
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, int | float) or value != value):
        return f"expected a number, got {value!r}"
    if kind == "str" and not isinstance(value, str):
        return f"expected text, got {value!r}"
    if name in MINIMUM and value < MINIMUM[name]:
        return f"must be at least {MINIMUM[name]:g}, got {value!r}"
    if name in CHOICES and value not in CHOICES[name]:
        return f"must be one of {', '.join(CHOICES[name])}, got {value!r}"
    return None
