"""The correctness stage: secret-seeded trials over several shapes and distributions, run in a
torch-free sandboxed child, judged in the parent.

What is checked (eval_integrity.md §0 items 2-5 and §2):
- every trial gets a fresh secret seed (`secrets`) and a distribution from the loader's list;
  shapes are the task default, every variant, and one held-out shape derived at random;
- outputs are pre-filled with NaN (a sentinel for integers) and compared element-wise with
  explicit NaN/Inf rules (compare.py);
- inputs must be byte-identical after each call; guard bytes around every buffer must survive
  (no writes outside the output);
- trials of one shape reuse the same buffers (same pointers, new contents): results cached by
  pointer come out stale; the first trial is repeated in fresh buffers and must give the same
  bits (uninitialised reads, hidden state);
- null-kernel canaries (zeros, the reference's mean, a copy of an input) are run through the
  same comparison: one that passes every trial marks the task broken. They judge the task, not
  the candidate, so the conclusion is computed once per task and settings in a process and cached.

The child is forked from a warm sandboxed zygote (zygote.py, `warm_correctness`) or started cold.
"""

from __future__ import annotations

import secrets
import signal as signal_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.harness import protocol, sandbox, zygote
from sagekernel.harness.compare import SENTINELS, Mismatch, compare, tensor_from_bytes
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.verdict import Stage
from sagekernel.tasks.inputs import tolerance_scale
from sagekernel.tasks.loader import DISTRIBUTIONS, build_inputs, reference_outputs
from sagekernel.tasks.task import Task

CHILDREN_DIR = Path(__file__).resolve().parent / "children"
#: Distribution order for the trials of a shape (the loader's names; "default" is the file's own).
DISTRIBUTION_ORDER = tuple(
    d
    for d in ("default", "normal", "heavy_tailed", "offset_uniform", "large_magnitude", "uniform")
    if d in DISTRIBUTIONS
)


@dataclass
class Trial:
    index: int
    shape_label: str  # "default", "variant 1", "held-out"
    sizes: dict[str, int]
    distribution: str
    seed: int
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    #: The task's atol scaled by the inputs' magnitude (tasks.inputs.tolerance_scale): float32
    #: rounding error grows with the operands, so ×1000 inputs get a ×1000 absolute tolerance.
    atol: float = 0.0

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{self.shape_label} shape ({sizes}), trial {self.index}, {self.distribution} inputs"


@dataclass
class Outcome:
    """What the correctness stage concluded."""

    stage: Stage  # OK, RUNTIME, CORRECTNESS, LOAD or BROKEN_TASK
    message: str
    sandbox: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def _held_out_sizes(task: Task, rng: secrets.SystemRandom) -> dict[str, int]:
    sizes = {}
    for sym, value in task.sizes.items():
        if value <= 2:
            sizes[sym] = value
            continue
        v = max(1, round(value * rng.uniform(0.55, 0.95)))
        sizes[sym] = v if v % 2 else v + 1
    return sizes


def plan_trials(task: Task, config: HarnessConfig) -> list[Trial]:
    """Inputs (fresh secret seeds) and reference outputs for every trial. Raises TaskError."""
    rng = secrets.SystemRandom()
    shapes: list[tuple[str, dict[str, int], int]] = [("default", dict(task.sizes), config.trials)]
    shapes += [(f"variant {i + 1}", s, config.variant_trials) for i, s in enumerate(task.all_shapes()[1:])]
    if config.held_out_shape and any(v > 2 for v in task.sizes.values()):
        shapes.append(("held-out", _held_out_sizes(task, rng), 1))
    trials: list[Trial] = []
    for label, sizes, count in shapes:
        for _ in range(count):
            # Cycle over the whole stream of trials so every distribution is exercised.
            dist = DISTRIBUTION_ORDER[len(trials) % len(DISTRIBUTION_ORDER)]
            seed = secrets.randbits(62)
            try:
                inputs = build_inputs(task, sizes, seed, dist)
                expected = reference_outputs(task, inputs, sizes)
            except TaskError:
                if label == "held-out":  # the task's sizes are coupled; the held-out guess is invalid
                    break
                raise
            trials.append(Trial(len(trials), label, sizes, dist, seed, inputs, expected,
                                task.atol * tolerance_scale(inputs)))
    return trials


def _raw(t: torch.Tensor) -> bytes:
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def scalar_args(task: Task, sizes: dict[str, int]) -> list[list[Any]]:
    args: list[list[Any]] = [["i64", int(sizes[s])] for s in task.sizes]
    args += [["f32", float(v)] if isinstance(v, float) else ["i64", int(v)] for v in task.attrs.values()]
    return args


def build_request(
    task: Task, trials: list[Trial], lib: str, nonce: str, lib_bytes: bytes | None = None
) -> tuple[bytes, list[tuple[Trial, str]]]:
    """The child's request and, per call, the trial it runs and its slot ("dup" = repeat of trial 0).

    With `lib_bytes` the library travels in the blob (a warm zygote's child has no mount of the
    build directory) and `lib` is ignored."""
    blob = bytearray()
    calls: list[dict[str, Any]] = []
    plan: list[tuple[Trial, str]] = [(t, f"shape:{t.shape_label}") for t in trials]
    plan.append((trials[0], "dup"))
    offsets: dict[int, list[list[int]]] = {}
    for trial in trials:
        spans = []
        for t in trial.inputs:
            data = _raw(t)
            spans.append([len(blob), len(data)])
            blob.extend(data)
        offsets[trial.index] = spans
    for i, (trial, slot) in enumerate(plan):
        calls.append(
            {
                "id": i,
                "slot": slot,
                "inputs": offsets[trial.index],
                "outputs": [len(_raw(e)) for e in trial.expected],
                "fills": [SENTINELS[spec.dtype].hex() for spec in task.outputs],
                "scalars": scalar_args(task, trial.sizes),
            }
        )
    header: dict[str, Any] = {
        "nonce": nonce,
        "symbol": "sage_kernel",
        "calls": calls,
        "site": sandbox.site_paths(),
    }
    if lib_bytes is None:
        header["lib"] = lib
    else:
        header["lib_span"] = [len(blob), len(lib_bytes)]
        blob.extend(lib_bytes)
    return protocol.encode_request(header, blob), plan


def _signal_text(sig: int) -> str:
    name = signal_mod.Signals(sig).name if sig in {s.value for s in signal_mod.Signals} else f"signal {sig}"
    hints = {
        "SIGSEGV": "segmentation fault: an out-of-bounds or NULL pointer access (allocations beyond "
        "the memory limit return NULL)",
        "SIGBUS": "bus error: misaligned or invalid memory access",
        "SIGFPE": "arithmetic exception, e.g. integer division by zero",
        "SIGABRT": "abort() or a failed assert",
        "SIGILL": "illegal instruction",
        "SIGXCPU": "CPU time limit exceeded",
        "SIGXFSZ": "file size limit exceeded",
        "SIGKILL": "killed (memory or time limit)",
    }
    return f"{name} ({hints[name]})" if name in hints else name


def run_child(
    task: Task, trials: list[Trial], library: Path, config: HarnessConfig, kind: str, scratch: Path
) -> tuple[sandbox.SandboxResult, protocol.ParsedChannel, list[tuple[Trial, str]]]:
    nonce = protocol.new_nonce()
    limits = sandbox.Limits(
        wall_s=config.run_timeout_s,
        cpu_s=int(config.run_timeout_s * config.threads) + 1,
        address_space_bytes=config.memory_limit_bytes,
    )
    if config.warm_correctness:
        request, plan = build_request(task, trials, "", nonce, lib_bytes=library.read_bytes())
        result = zygote.run(kind, config.threads, limits, nonce, request)
        return result, protocol.parse_frames(result.channel, nonce), plan
    cmd = sandbox.SandboxCommand(
        argv=sandbox.python_argv("/box/children/kernel_runner.py"),
        ro_binds=[(str(CHILDREN_DIR), "/box/children"), (str(library.parent), "/box/lib")],
        env=sandbox.thread_env(config.threads),
    )
    lib_path = sandbox.translate(kind, f"/box/lib/{library.name}", cmd)
    request, plan = build_request(task, trials, lib_path, nonce)
    result = sandbox.run(cmd, kind=kind, limits=limits, stdin_data=request, scratch_dir=scratch)
    return result, protocol.parse_frames(result.channel, nonce), plan


def judge(
    task: Task,
    config: HarnessConfig,
    result: sandbox.SandboxResult,
    parsed: protocol.ParsedChannel,
    plan: list[tuple[Trial, str]],
) -> Outcome:
    """Turn the child's frames into an outcome. Only authenticated frames count."""
    hello = parsed.first("hello")
    box = {"kind": result.kind, "seccomp": hello.record.get("seccomp") if hello else "unknown"}
    trials = [t for t, slot in plan if slot != "dup"]
    checks: dict[str, Any] = {
        "trials": [
            {"shape": t.shape_label, "sizes": t.sizes, "distribution": t.distribution, "seed": t.seed}
            for t in trials
        ]
    }

    def out(stage: Stage, message: str) -> Outcome:
        return Outcome(stage, message, box, checks)

    load_error = parsed.first("load_error")
    if load_error is not None:
        return out(Stage.LOAD, f"the library could not be loaded: {load_error.record.get('error')}")
    done = {f.record["id"]: f for f in parsed.all("done")}
    begun = [f.record["id"] for f in parsed.all("begin")]
    ended = parsed.first("end") is not None
    if not ended:
        running = next((i for i in begun if i not in done), None)
        where = f" during the call on the {plan[running][0].describe()}" if running is not None else ""
        if result.timed_out:
            return out(
                Stage.RUNTIME,
                f"timed out: the kernel did not finish within {config.run_timeout_s:g} s"
                f"{where} (an infinite loop, or far too slow)",
            )
        sig = result.signal
        if sig is not None:
            return out(Stage.RUNTIME, f"the process died from {_signal_text(sig)}{where}")
        if parsed.first("loaded") is None and hello is not None:
            return out(Stage.LOAD, "the library could not be loaded: " + result.output_tail.strip()[-400:])
        return out(
            Stage.RUNTIME,
            f"the process exited (status {result.returncode}) before returning every result"
            f"{where}; a kernel must return normally" + (f" [{parsed.problem}]" if parsed.problem else ""),
        )
    outputs: dict[int, list[bytes]] = {}
    for i, (trial, _slot) in enumerate(plan):
        frame = done.get(i)
        if frame is None:
            return out(Stage.RUNTIME, f"no result came back for the {trial.describe()}")
        rec = frame.record
        n_in = len(task.inputs)
        for spec, changed in zip(task.inputs, rec["inputs_changed"], strict=False):
            if changed >= 0:
                elem = changed // max(1, trial.inputs[task.inputs.index(spec)].element_size())
                return out(
                    Stage.CORRECTNESS,
                    f"input '{spec.name}' was modified by the kernel (first changed "
                    f"element at flat index {elem}) on the {trial.describe()}; inputs are read-only",
                )
        names = [s.name for s in task.inputs] + [s.name for s in task.outputs]
        for pos, ok in enumerate(rec["guards"]):
            if not ok:
                what = "input" if pos < n_in else "output"
                return out(
                    Stage.CORRECTNESS,
                    f"the kernel wrote outside the bounds of {what} '{names[pos]}' "
                    f"(guard bytes around the buffer changed) on the {trial.describe()}; check loop bounds "
                    "and vector tails against the sizes passed in",
                )
        sizes = [len(_raw(e)) for e in trial.expected]
        payload, pieces, pos = frame.payload, [], 0
        for n in sizes:
            pieces.append(payload[pos : pos + n])
            pos += n
        if pos != len(payload):
            return out(Stage.RUNTIME, "the result for a call had the wrong size")
        outputs[i] = pieces
    # Element-wise comparison, trial by trial.
    previous: dict[str, list[bytes]] = {}
    for i, (trial, slot) in enumerate(plan):
        if slot == "dup":
            if outputs[i] != outputs[0]:
                spec_i = next(k for k in range(len(task.outputs)) if outputs[i][k] != outputs[0][k])
                diff = _first_bytes_difference(task, spec_i, trial, outputs[0][spec_i], outputs[i][spec_i])
                return out(
                    Stage.CORRECTNESS,
                    "not deterministic: the same inputs gave different outputs on two "
                    f"calls ({diff}) on the {trial.describe()}; the kernel reads uninitialised memory or "
                    "keeps state between calls",
                )
            continue
        for k, spec in enumerate(task.outputs):
            exp = trial.expected[k]
            dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
            actual = tensor_from_bytes(outputs[i][k], dtype, tuple(exp.shape))
            mism = compare(actual, exp, trial.atol, task.rtol, spec.dtype, outputs[i][k])
            if mism is not None:
                stale = previous.get(slot)
                note = ""
                if stale is not None and stale[k] == outputs[i][k]:
                    note = (
                        " The output is identical to the previous call's, whose inputs were different: "
                        "the kernel returned a stale or cached result."
                    )
                return out(
                    Stage.CORRECTNESS,
                    f"wrong result on the {trial.describe()}: {mism.describe(spec.name)}." + note,
                )
        previous[slot] = outputs[i]
    checks["calls"] = len(plan)
    if config.canaries:
        passing, cached = task_canaries(task, config, trials)
        checks["canaries"] = {"checked": list(CANARIES), "passing": passing, "cached": cached}
        if passing:
            return Outcome(
                Stage.BROKEN_TASK,
                f"the task is broken: the null kernel(s) {', '.join(passing)} pass "
                "every trial, so passing says nothing about a candidate",
                box,
                checks,
                ["broken_task"],
            )
    return out(
        Stage.OK, f"correct on {len(trials)} trials over {len({t.shape_label for t in trials})} shapes"
    )


def _first_bytes_difference(task: Task, k: int, trial: Trial, a: bytes, b: bytes) -> str:
    spec = task.outputs[k]
    exp = trial.expected[k]
    dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
    ta = tensor_from_bytes(a, dtype, tuple(exp.shape)).reshape(-1)
    tb = tensor_from_bytes(b, dtype, tuple(exp.shape)).reshape(-1)
    diff = (
        (ta != tb) & ~(torch.isnan(ta.double()) & torch.isnan(tb.double()))
        if ta.is_floating_point()
        else ta != tb
    )
    nz = torch.nonzero(diff)
    if nz.numel() == 0:  # only NaN payload bits differ
        return f"output '{spec.name}' differs in NaN bit patterns"
    j = int(nz[0, 0])
    return f"output '{spec.name}' flat index {j}: {float(ta[j])!r} then {float(tb[j])!r}"


# ---- null-kernel canaries ------------------------------------------------------------------------

CANARIES = ("zeros", "constant", "input_copy")


def _constant_for(exp: torch.Tensor) -> float:
    wide = exp.double()
    finite = wide[torch.isfinite(wide)]
    return float(finite.mean()) if finite.numel() else 0.0


def canary_outputs(name: str, task: Task, trial: Trial, anchor: Trial | None = None) -> list[torch.Tensor]:
    """The outputs of null kernel `name` on `trial`. The "constant" kernel writes the mean of
    `anchor`'s reference (one fixed value for every trial, as a real constant kernel would)."""
    outs = []
    for k, exp in enumerate(trial.expected):
        if name == "zeros":
            outs.append(torch.zeros_like(exp))
        elif name == "constant":
            value = _constant_for((anchor or trial).expected[k])
            outs.append(torch.full_like(exp, value if exp.is_floating_point() else round(value)))
        else:
            src = next(
                (t for t in trial.inputs if t.numel() == exp.numel()),
                trial.inputs[0] if trial.inputs else None,
            )
            if src is None or src.numel() == 0:
                outs.append(torch.zeros_like(exp))
                continue
            flat = src.reshape(-1).to(exp.dtype)
            reps = exp.numel() // flat.numel() + 1
            outs.append(flat.repeat(reps)[: exp.numel()].reshape(exp.shape))
    return outs


#: Canary conclusions per (task file, its mtime, tolerances, trial plan): a property of the task and
#: the harness settings, not of a candidate, so it is computed on the first candidate of a task in
#: this process and reused (selfcheck also runs the C canaries through the full harness).
_CANARY_CACHE: dict[tuple[Any, ...], list[str]] = {}


def task_canaries(task: Task, config: HarnessConfig, trials: list[Trial]) -> tuple[list[str], bool]:
    """(null kernels that pass every trial, whether the answer came from the cache)."""
    try:
        mtime = Path(task.source_path).stat().st_mtime_ns
    except OSError:
        mtime = None
    key = (
        str(Path(task.source_path).resolve()),
        mtime,
        task.atol,
        task.rtol,
        config.trials,
        config.variant_trials,
        config.held_out_shape,
    )
    cached = _CANARY_CACHE.get(key)
    if cached is not None:
        return list(cached), True
    passing = passing_canaries(task, trials)
    _CANARY_CACHE[key] = list(passing)
    return passing, False


def passing_canaries(task: Task, trials: list[Trial]) -> list[str]:
    passing = []
    for name in CANARIES:
        ok = True
        for trial in trials:
            got_all = canary_outputs(name, task, trial, anchor=trials[0])
            for spec, got, exp in zip(task.outputs, got_all, trial.expected, strict=True):
                if compare(got, exp, trial.atol, task.rtol, spec.dtype) is not None:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            passing.append(name)
    return passing


__all__ = [
    "CANARIES",
    "Mismatch",
    "Outcome",
    "Trial",
    "build_request",
    "judge",
    "passing_canaries",
    "plan_trials",
    "run_child",
    "task_canaries",
]
