"""How many NPUKernelBench expert answers `sage eval <op> answer/0 --target ascendc --plan` accepts.

Trusted side only: the expert `answer/0` folders are read here as candidate folders and never
reach a model, prompt, memory or workspace of a run. No CANN is needed: each answer goes through
the target's folder reader (the benchmark's layout), its static checks and its build plan.

    PYTHONPATH=src python3 scripts/npukb_answer_plans.py /path/to/NPUKernelBench [--list]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sagekernel.targets.ascendc.plan import plan_report
from sagekernel.targets.ascendc.target import AscendCTarget
from sagekernel.tasks.loader import load_dir


def main(argv: list[str]) -> int:
    root, listing = Path(argv[0]), "--list" in argv
    t0 = time.perf_counter()
    tasks = load_dir(root).tasks
    target = AscendCTarget()
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as scratch:
        for task in tasks:
            answer = task.source_path.parent.parent / "answer" / "0"
            if not answer.is_dir():
                continue
            counts["with an answer"] += 1
            _, missing = target.folder_files(task, answer)
            if missing:
                counts["layout refused"] += 1
                print(f"{task.name}: layout: missing {', '.join(missing)}") if listing else None
                continue
            report = plan_report(task, [answer], workdir=Path(scratch) / task.name, target=target)
            lint, problems = report["lint"], report["build"]["problems"]
            counts["layout accepted"] += 1
            counts["static checks clean"] += not lint
            counts["plan without problems"] += not problems
            counts["static checks clean and plan without problems"] += not lint and not problems
            if listing and (lint or problems):
                print(f"{task.name}: {[f['reason'] for f in lint][:3]} {problems[:2]}")
    for key, value in counts.items():
        print(f"{key}: {value}")
    print(f"wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
