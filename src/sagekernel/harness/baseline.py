"""What a speedup is measured against (`HarnessConfig.baseline`, `--baseline`; issue 31).

- `eager`: the task's PyTorch `Model.forward`, as written (the paper's and KernelBench's baseline);
- `compile`: `torch.compile(Model)` (inductor, one compile thread), compiled and warmed on public
  inputs of the timed shape before the reference process is locked, so no timed call pays for it.
  Beating eager by fusing what `torch.compile` fuses anyway is not a win users care about;
- `best`: per round, the faster of eager and compiled (both timed on the round's inputs, in an order
  alternating by round; the minimum of two noisy rounds favours the baseline, never the candidate).

The reference timer of the CPU target (children/reference_runner.py) implements all three. Device
targets time their reference inside the device runtime (targets/devloop), which compiles nothing
yet: `baseline_problem` refuses `compile` and `best` there before anything runs. Inductor needs a
C++ compiler on the CPU; a missing one is refused up front too.
"""

from __future__ import annotations

import shutil

BASELINES = ("eager", "compile", "best")
#: The reference process's file-size limit when it compiles: inductor's precompiled torch header
#: alone exceeds the default 64 MiB (sandbox.Limits). It runs in a fresh process then, not a child
#: of the warm server (whose own limit a child cannot raise).
COMPILE_FILE_SIZE_BYTES = 2 << 30
#: Targets whose reference timer can compile the reference.
COMPILING_TARGETS = ("cpu",)


def reference_file_size(baseline: str) -> int:
    """RLIMIT_FSIZE of the reference timer's process for this baseline."""
    from sagekernel.sandbox import Limits

    return Limits().file_size_bytes if baseline == "eager" else COMPILE_FILE_SIZE_BYTES


def baseline_problem(baseline: str, target: str) -> str | None:
    """Why `baseline` cannot be used on `target` here (None: it can). Checked before the first model call."""
    if baseline not in BASELINES:
        return f"must be one of {', '.join(BASELINES)}, got {baseline!r}"
    if baseline == "eager":
        return None
    if target not in COMPILING_TARGETS:
        return (f"the {baseline!r} baseline is implemented for the {', '.join(COMPILING_TARGETS)} target's "
                f"reference timer only; target {target!r} times its reference inside the device runtime, "
                "which does not compile it (use --baseline eager)")
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return "torch.compile on the CPU needs a C++ compiler (g++, c++ or clang++) on PATH; none was found"
    try:
        import torch._inductor  # noqa: F401
    except ImportError as exc:
        return f"this PyTorch has no inductor backend for torch.compile: {exc}"
    return None


__all__ = ["BASELINES", "baseline_problem"]
