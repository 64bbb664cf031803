"""Time per agent round of the embedded local model, with and without prompt-prefix reuse.

A realistic SAGE round prompt: a ~1.5k-token stable prefix (instructions, resident rules, target
quick reference, the operator's task) and a changing tail (the previous round's feedback and the
retrieved experience), answered with a short completion.

Both variants run in one process on one loaded model, round by round on the same prompts:
"with prefix reuse" keeps llama.cpp's KV cache from the previous call (the default,
`prefix_cache=True`), "without" clears it first (`clear_cache()`, i.e. `prefix_cache=False`).
Each round runs "with" first, then "without": the cache "with" finds is then the previous round's
prompt + reply, exactly what a run without the benchmark would leave. One model instance (not two)
keeps the two variants from competing for cores and memory bandwidth. Round 0 (cold for both) is
reported separately; medians are over rounds 1..R.

    python benchmarks/bench_prefix_cache.py [--rounds 5] [--max-tokens 32] [--n-ctx 4096] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from typing import Any

from sagekernel.models import Message, ModelConfig
from sagekernel.models.local import LocalModel, usable_cores

INSTRUCTIONS = """You are SAGE, an agent that writes and optimises compute kernels in C for a CPU target.
Each round you receive the operator's PyTorch reference, the kernel contract, feedback from the previous
round (compiler output, mismatches against the reference, timings) and a few retrieved experience items.
Reply in exactly this format:
1. DIAGNOSIS: one paragraph explaining what went wrong in the previous round, or why the kernel is slow.
2. ADOPTION: for every retrieved item, one line `item-<id>: adopted|not adopted - <rationale>`.
3. CODE: the complete kernel in one ```c fenced block implementing the contract exactly.
Never call the reference implementation, never allocate memory inside the kernel, never read or write
outside the given buffers, never depend on uninitialised output memory, and never special-case the
test inputs. The kernel is compiled with -O3 -march=native -fopenmp and checked on several random
inputs and shapes; a correct but slow kernel is better than a fast wrong one.
"""

RULES = [
    "Accumulate reductions in double or use Kahan summation when n exceeds 4096 elements.",
    "Subtract the row maximum before exponentiating in softmax and log-softmax to avoid overflow.",
    "Keep the innermost loop unit-stride; transpose a tile into a local buffer when it is not.",
    "Hoist loop-invariant index arithmetic out of the inner loop; compilers miss it through pointers.",
    "Mark non-aliasing pointer arguments restrict so the compiler can vectorise loads and stores.",
    "Parallelise the outermost independent loop with `#pragma omp parallel for` and static schedule.",
    "Tile matrix multiplication in 64x64 blocks with a 4x16 register micro-kernel for the AVX2 path.",
    "Use fmaf and expf from math.h; do not call the double versions on float data.",
    "Check every index expression against the contract shapes; off-by-one in the tail loop is common.",
    "Fuse elementwise epilogues (bias, activation, scaling) into the producing loop nest.",
    "For convolutions, precompute the output spatial bounds instead of branching on padding per tap.",
    "Prefer int64_t loop counters: products of dimensions overflow 32-bit integers on large shapes.",
    "Write each output element exactly once; never rely on the output buffer being zero-initialised.",
    "Handle the remainder of a vectorised loop with a scalar epilogue, not by over-reading.",
    "Reduce across threads with per-thread partial sums combined after the parallel region.",
    "Layer norm: compute mean and variance in one pass with Welford's algorithm in double.",
    "Avoid division in inner loops; multiply by a precomputed reciprocal.",
    "Keep working sets of the inner two loops inside L1 (32 KiB) when choosing tile sizes.",
    "Do not use variable-length arrays on the stack larger than 16 KiB; they overflow worker stacks.",
    "Verify the kernel against the reference mentally on a 2x3 example before answering.",
]

QUICK_REFERENCE = """Target cpu (C11, gcc 12, OpenMP 4.5). Kernel contract:
  int kernel(const float* restrict x, float* restrict out, int64_t batch, int64_t dim);
returns 0 on success. Inputs are contiguous row-major float32. Available headers: math.h, stdint.h,
string.h, omp.h, immintrin.h (AVX2 and FMA are available; AVX-512 is not). Timing: median of 50 runs
after 5 warm-up runs, L2 flushed between runs, 1 thread per physical core.
"""

DEBUGGING_GUIDE = """Debugging guide for the cpu target:
- "undeclared" or "implicit declaration": a helper was used before it was defined, or a header is
  missing; define helpers above the kernel as static inline functions.
- "conflicting types for 'kernel'": the signature differs from the contract; copy it verbatim.
- Mismatch only on the largest shape: an int overflow in an index product, or a float accumulator
  losing precision; switch to int64_t indices and double accumulators.
- Mismatch only on shapes whose last dimension is not a multiple of 8: the vector tail is wrong.
- NaN or inf in the output: an exponent of a large value without subtracting the maximum, a division
  by a zero sum, or reading uninitialised memory.
- Timeouts: an accidental O(n^2) loop over the reduction dimension, or false sharing between threads
  writing neighbouring elements; give each thread whole rows.
- Slower than the reference: check that the inner loop vectorises (-fopt-info-vec-missed), that the
  parallel loop has enough iterations per thread, and that memory is traversed in storage order.
- Crashes (SIGSEGV): an out-of-bounds pointer in the tail loop or a stack buffer sized by a runtime
  dimension; bound every access by the contract's shape arguments.
"""

TASK = '''Operator: softmax_rows (level 1, category: reduction+elementwise)
PyTorch reference:
```python
import torch
class Model(torch.nn.Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=self.dim)
def get_inputs():
    return [torch.randn(256, 4096)]
def get_init_inputs():
    return [-1]
```
Shape variants: (256, 4096), (1024, 1000), (7, 131072). Tolerance: atol 1e-5, rtol 1e-5.
'''


def stable_prefix() -> tuple[str, str]:
    rules = "\n".join(f"R{i + 1}. {rule}" for i, rule in enumerate(RULES))
    system = (INSTRUCTIONS + "\nResident rules (learned from earlier operators):\n" + rules + "\n\n"
              + QUICK_REFERENCE + "\n" + DEBUGGING_GUIDE)
    return system, TASK


def round_tail(k: int) -> str:
    feedback = [
        "Previous round: compiled, but mismatched on shape (7, 131072): max abs error 3.1e-2 at row 3.",
        f"Previous round: compile error: kernel.c:{17 + k}:9: error: 'rowmax' undeclared (first use here).",
        f"Previous round: correct; {1.9 + 0.1 * k:.2f} ms vs reference 1.42 ms "
        f"(speedup {1.42 / (1.9 + 0.1 * k):.2f}).",
        "Previous round: correct; the inner loop did not vectorise "
        "(-fopt-info: not vectorized: control flow).",
    ][k % 4]
    items = "\n".join(f"item-{100 + 7 * k + j}: [{['reduction', 'softmax', 'openmp'][j]}] "
                      f"{RULES[(3 * k + 5 * j) % len(RULES)]}" for j in range(3))
    return f"\n--- Round {k} of 8 ---\n{feedback}\nRetrieved experience:\n{items}\nWrite the next kernel."


def prompt(k: int) -> list[Message]:
    system, task = stable_prefix()
    return [Message("system", system), Message("user", task + round_tail(k))]


def run(rounds: int, max_tokens: int, n_ctx: int, threads: int | None) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    model = LocalModel(config=ModelConfig(n_ctx=n_ctx, n_threads=threads, prefix_cache=True))
    started = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - started
    names = ["with prefix reuse", "without (cleared)"]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for k in range(rounds + 1):
        for name in names:
            if name.startswith("without"):
                model.clear_cache()
            reply = model.complete(prompt(k), max_tokens=max_tokens, temperature=0.0, seed=k)
            samples[name].append({"round": k, "latency_s": reply.latency_s,
                                  "prompt_tokens": reply.prompt_tokens,
                                  "prompt_eval_tokens": reply.extra.get("prompt_eval_tokens"),
                                  "completion_tokens": reply.completion_tokens,
                                  "tokens_per_s": reply.extra.get("tokens_per_s"), "text": reply.text})
            print(f"  round {k} {name:18s} {reply.latency_s:7.2f}s  prompt {reply.prompt_tokens} tok "
                  f"(computed {reply.extra.get('prompt_eval_tokens')}), {reply.extra.get('tokens_per_s')} "
                  "gen tok/s", file=sys.stderr, flush=True)
    summary = {}
    for name, rows in samples.items():
        warm = rows[1:]
        summary[name] = {
            "cold_round_s": rows[0]["latency_s"],
            "median_round_s": statistics.median(r["latency_s"] for r in warm),
            "median_prompt_tokens": statistics.median(r["prompt_tokens"] for r in warm),
            "median_prompt_tokens_computed": statistics.median(r["prompt_eval_tokens"] or 0 for r in warm),
            "median_completion_tokens": statistics.median(r["completion_tokens"] for r in warm),
            "median_generation_tokens_per_s": statistics.median(r["tokens_per_s"] or 0 for r in warm),
        }
    with_, without = summary[names[0]]["median_round_s"], summary[names[1]]["median_round_s"]
    same = sum(a["text"] == b["text"] for a, b in zip(samples[names[0]], samples[names[1]], strict=True))
    return {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "rounds": rounds,
            "max_tokens": max_tokens, "n_ctx": n_ctx, "threads": model.n_threads, "load_s": load_s,
            "variants": summary, "speedup_median": without / with_ if with_ else None,
            "identical_replies": f"{same}/{rounds + 1}", "cpus": usable_cores(),
            "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)], "samples": samples}


def print_table(result: dict[str, Any]) -> None:
    print(f"$ {result['command']}")
    print(f"local model, {result['threads']} threads, n_ctx {result['n_ctx']}, "
          f"{result['rounds']} warm rounds (+1 cold), {result['max_tokens']}-token completions, "
          f"temperature 0; {result['cpus']} usable cores, 1-min load average "
          f"{result['loadavg_1m'][0]} before / {result['loadavg_1m'][1]} after; "
          f"model load {result['load_s']:.1f}s")
    header = (f"{'variant':20s} {'median s/round':>14s} {'cold round s':>12s} {'prompt tok':>10s} "
              f"{'computed tok':>12s} {'gen tok/s':>9s}")
    print(header)
    print("-" * len(header))
    for name, s in result["variants"].items():
        print(f"{name:20s} {s['median_round_s']:14.2f} {s['cold_round_s']:12.2f} "
              f"{s['median_prompt_tokens']:10.0f} {s['median_prompt_tokens_computed']:12.0f} "
              f"{s['median_generation_tokens_per_s']:9.1f}")
    print(f"ratio (without / with), median time per round: {result['speedup_median']:.2f}x; "
          f"identical replies: {result['identical_replies']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="warm rounds per variant (default 5)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=None, help="default: all usable cores")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.rounds, args.max_tokens, args.n_ctx, args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
