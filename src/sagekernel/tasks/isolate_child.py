"""The loading child of tasks/isolate.py (``python -m sagekernel.tasks.isolate_child``): loads each
file it is sent with `loader.load_one` under the limits the parent set, and reports each as one
JSON line. A module of its own so that the loader and its parent side import one way only."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from sagekernel.tasks.task import Task


def _bind_to_parent(parent: int | None) -> None:
    """Die with the parent (Linux PR_SET_PDEATHSIG), and adopt orphaned descendants (subreaper)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # not Linux: the parent's group kill still applies
        return
    if parent is not None and os.getppid() != parent:  # the parent died before the request was read
        os._exit(1)


def _kill_descendants() -> None:
    """Kill every process below this one (a subreaper adopts those whose parent exited)."""
    me = str(os.getpid())
    for _ in range(20):  # killed ones' children are adopted by us: repeat until none are left
        children = []
        for entry in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = entry.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1] == me:
                children.append(int(entry.parent.name))
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def main() -> None:
    import resource

    request = json.loads(sys.stdin.read())
    parent = request.get("parent")  # None inside bubblewrap's PID namespace (its parent is the init)
    _bind_to_parent(int(parent) if parent is not None else None)
    mem = int(request["mem"])
    if mem > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
    result = os.fdopen(int(request["fd"]), "w", encoding="utf-8")
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    from sagekernel.tasks.loader import load_one
    from sagekernel.tasks.record import LoadProblem, task_to_json

    root = Path(request["root"]) if request["root"] else None
    for index, name in enumerate(request["files"]):
        result.write(json.dumps({"start": index}) + "\n")
        result.flush()
        try:
            outcome = load_one(Path(name), root)
        except MemoryError:
            outcome = LoadProblem(Path(name), f"{name}: ran out of the loader's memory limit "
                                  f"({mem / 2**30:.1f} GiB); lower the sizes in the file", "memory")
        if isinstance(outcome, Task):
            line = json.dumps({"task": task_to_json(outcome)}, default=str)
        else:
            kind = outcome.kind
            if kind == "rejected" and ("can't allocate memory" in outcome.message
                                      or "ran out of memory" in outcome.message):
                kind = "memory"
            line = json.dumps({"problem": {"path": str(outcome.path), "message": outcome.message,
                                           "kind": kind, "device": outcome.device}})
        result.write(line + "\n")
        result.flush()
        _kill_descendants()
    result.close()


if __name__ == "__main__":
    main()
