"""Harness settings (one dataclass; every field documented)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HarnessConfig:
    """How one candidate is judged."""

    warmup: int = 5  #: untimed calls of each side before timing
    iters: int = 100  #: timed calls of each side, split evenly over `rounds`
    rounds: int = 10  #: interleaved A/B rounds (random order per round); speedup = median of per-round ratios
    threads: int = 1  #: OpenMP / torch threads for candidate and reference alike
    trials: int = 3  #: correctness trials on the default shape (fresh secret seed and distribution each)
    variant_trials: int = 2  #: trials on every shape variant
    held_out_shape: bool = True  #: also test one shape derived at random from the defaults (odd sizes)
    build_timeout_s: float = 60.0  #: wall-clock limit for the compiler
    run_timeout_s: float = 20.0  #: wall-clock limit for the correctness process (all calls together)
    timing_timeout_s: float = 120.0  #: wall-clock limit for the timing process
    memory_limit_bytes: int = 4 << 30  #: address-space limit (RLIMIT_AS) of the correctness process
    timing_memory_limit_bytes: int = 16 << 30  #: the timing process also holds torch
    speedup_ceiling: float = 10.0  #: speedups above this are flagged "speedup_audit"
    skip_timing: bool = False  #: stop after correctness (the verdict then has no latencies)
    sandbox: str = "auto"  #: "auto" (strongest available), "bwrap", "unshare" or "process"
    static_checks: bool = True  #: source lint + symbol checks; False only in tests of the runtime defences
    canaries: bool = True  #: check that null kernels (zeros, constant, input copy) fail this task's trials
    timing_pool: int = 2  #: distinct input sets the timed calls rotate through (contents permuted per round)
    warm_timing: bool = True  #: reuse a sandboxed server that imported torch once (forks per request)
    warm_correctness: bool = True  #: fork each correctness child from a warm sandboxed zygote (zygote.py)
    parent_threads: int = 1  #: torch threads of this process for inputs/references/comparisons (restored)
