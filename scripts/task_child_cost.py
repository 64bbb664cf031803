"""What running task code in the sandboxed task child (tasks/confine.py) costs per evaluation.

    PYTHONPATH=src python3 scripts/task_child_cost.py untimed abs addcdiv exp clip_by_value
    PYTHONPATH=src python3 scripts/task_child_cost.py timed abs exp

Judges the named built-in tasks' reference CPU kernels three rounds over, each round once with
task code in this process (`confine.child_for` patched to None: the harness before the task child)
and once in the warm task child, and prints the median seconds per evaluation of each and their
difference. The child's cold start (bubblewrap, importing torch) is timed first, once.
"""

from __future__ import annotations

import statistics
import sys
import time

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks import confine, task_child
from sagekernel.tasks.suites import load_suite


def main(mode: str, names: list[str]) -> None:
    tasks = [t for t in load_suite("builtin") if t.name in names]
    cpu = get_target("cpu")
    config = HarnessConfig(skip_timing=mode != "timed")
    in_child = confine.child_for
    t0 = time.perf_counter()
    with task_child.confined("auto"):
        child = in_child(tasks[0])
        assert child is not None
        child.call("ints", tasks[0], {})  # starts it
    print(f"cold start of one task child: {time.perf_counter() - t0:.2f} s")
    times: dict[str, list[float]] = {"in-process": [], "task child": []}
    for _ in range(3):
        for where in times:
            confine.child_for = in_child if where == "task child" else (lambda task: None)  # type: ignore[assignment]
            for task in tasks:
                t0 = time.perf_counter()
                verdict = evaluate(task, task.reference_kernels["cpu"].read_text(), cpu, config)
                times[where].append(time.perf_counter() - t0)
                assert verdict.stage.value == "ok", verdict.message
    for where, xs in times.items():
        print(f"{where}: median {statistics.median(xs):.3f} s per evaluation over {len(xs)}")
    extra = statistics.median(times["task child"]) - statistics.median(times["in-process"])
    print(f"task child overhead: {extra:+.3f} s per evaluation (median)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
