"""Helpers of the experiment tests: a scripted model that solves the e2e tasks, and spec files."""

from __future__ import annotations

import json
from pathlib import Path

TASKS = Path(__file__).parent / "e2e_tasks"
KERNELS = {
    "e2e_double": ("const float* restrict x, float* restrict out, int64_t N", "out[i] = 2.0f * x[i];"),
    "e2e_negate": ("const float* restrict x, float* restrict out, int64_t N", "out[i] = -x[i];"),
    "e2e_add": (
        "const float* restrict a, const float* restrict b, float* restrict out, int64_t N",
        "out[i] = a[i] + b[i];",
    ),
}
LESSON = """LESSON
title: Elementwise kernels: loop over every element with an int64_t index
type: correctness
category: elementwise
error_message: elements past the first block were never written
wrong_code:
```c
for (int i = 0; i < 64; ++i) out[i] = x[i];
```
correct_code:
```c
for (int64_t i = 0; i < N; ++i) out[i] = x[i];
```
"""


def write_script(path: Path) -> Path:
    """A script whose replies are correct kernels (matched on the operator named in the prompt),
    and one distilled lesson (so learning streams write memory)."""
    replies: list[dict[str, object]] = [{"match": "curating a memory", "text": LESSON}]
    for op, (params, body) in KERNELS.items():
        loop = f"for (int64_t i = 0; i < N; ++i) {body}"
        code = f"#include <stdint.h>\nvoid sage_kernel({params}) {{\n  {loop}\n}}\n"
        replies.append(
            {
                "match": f"(?m)^# Operator: {op} ",
                "on": "prompt",
                "text": f"DIAGNOSIS: one flat loop.\nADOPTION:\nRULES USED: NONE\n```c\n{code}```\n",
            }
        )
    path.write_text(json.dumps({"replies": replies, "fallback": "NONE"}), encoding="utf-8")
    return path


def write_spec(path: Path, blocks: str, *, name: str = "test-exp", budget: int = 2) -> Path:
    """An experiment file over the e2e tasks with the scripted model (label `scripted`)."""
    script = write_script(path.parent / "script.json")
    path.write_text(
        f'''name = "{name}"
[models]
scripted = "scripted:{script}"
[defaults]
suite = "{TASKS}"
target = "cpu"
budget = {budget}
[run]
embedder = "none"
max_reasks = 0
[run.harness]
skip_timing = true
canaries = false
held_out_shape = false
warmup = 1
iters = 2
trials = 1
{blocks}''',
        encoding="utf-8",
    )
    return path
