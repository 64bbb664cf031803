"""Loading untrusted task files in a child process with time and memory limits.

A task file is code: its import, ``get_inputs()`` and reference may hang, allocate without bound,
print megabytes or kill the interpreter. `load_files_isolated` runs `loader.load_one` for each file
in a child (``python -m sagekernel.tasks.isolate_child``) that

- has its data segment limited (``RLIMIT_DATA``, `load_mem_bytes()`: 3 GiB, env
  ``SAGE_TASK_LOAD_MEM_BYTES``), so a runaway allocation fails inside the child;
- writes its own stdout/stderr into a pipe the parent drains and keeps at most 4 KiB of (the
  tail is quoted in a problem), so no task output reaches the user's terminal or ``--json``;
- reports each file as one JSON line on a separate result pipe, after announcing that it started.

The parent gives each file `load_timeout_s()` (60 s, env ``SAGE_TASK_LOAD_TIMEOUT_S``) after its
start; a file that overruns, or a child that dies, is recorded as a `LoadProblem` (kind "timeout",
"memory" or "crashed") and a fresh child carries on with the next file. Nothing a task file does
can stop the others loading.

Every process the file starts goes with it: the child leads its own process group, which the
parent kills on every exit path (finished, timed out, crashed, or the parent interrupted), so a
process a task forks cannot outlive `sage tasks check` or `sage run`; the child asks the kernel to
kill it when its parent dies (PR_SET_PDEATHSIG), so killing `sage` -- kill -9 included -- while it
loads tasks leaves no loader spinning; and the child is a subreaper that kills what its files
left behind, even a process that left the group (setsid), before it exits.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sagekernel.tasks.record import LoadProblem

DEFAULT_LOAD_TIMEOUT_S = 60.0
DEFAULT_LOAD_MEM_BYTES = 3 * 2**30
#: Seconds a fresh child may take to import torch before its first file starts.
STARTUP_TIMEOUT_S = 120.0
OUTPUT_KEEP = 4096


def load_timeout_s() -> float:
    return float(os.environ.get("SAGE_TASK_LOAD_TIMEOUT_S", DEFAULT_LOAD_TIMEOUT_S))


def load_mem_bytes() -> int:
    return int(float(os.environ.get("SAGE_TASK_LOAD_MEM_BYTES", DEFAULT_LOAD_MEM_BYTES)))


class _Output:
    """The child's stdout/stderr: total bytes seen and the last `OUTPUT_KEEP` of them."""

    def __init__(self) -> None:
        self.total = 0
        self.tail = b""

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (self.tail + data)[-OUTPUT_KEEP:]

    def text(self) -> str:
        return self.tail.decode("utf-8", errors="replace").strip()


def load_files_isolated(files: list[Path], root: Path | None, *, timeout_s: float | None = None,
                        mem_bytes: int | None = None) -> list[Any]:
    """`Task` or `LoadProblem` for every file, in order (see module docstring)."""
    timeout = load_timeout_s() if timeout_s is None else timeout_s
    memory = load_mem_bytes() if mem_bytes is None else mem_bytes
    results: dict[int, Any] = {}
    pending = list(range(len(files)))
    while pending:
        done = _run_child([files[i] for i in pending], root, timeout, memory)
        for k, outcome in enumerate(done):
            if outcome is None:
                break
            results[pending[k]] = outcome
        pending = [i for i in pending if i not in results]
        if pending and not done:  # the child never started a file: do not loop forever
            for i in pending:
                results[i] = LoadProblem(files[i], f"{files[i]}: the loading child could not start",
                                         "crashed")
            pending = []
    return [results[i] for i in range(len(files))]


def _run_child(files: list[Path], root: Path | None, timeout: float, memory: int) -> list[Any]:
    """Load `files` in one child; returns outcomes for a prefix of them (the rest: another child).
    A file that hangs or kills the child gets its problem here and ends the prefix."""
    from sagekernel.tasks.record import task_from_json

    read_fd, write_fd = os.pipe()
    request = json.dumps({"files": [str(f) for f in files], "root": str(root) if root else None,
                          "mem": memory, "fd": write_fd, "parent": os.getpid()})
    proc = subprocess.Popen(
        [sys.executable, "-m", "sagekernel.tasks.isolate_child"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    os.close(write_fd)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request.encode())
    proc.stdin.close()
    outcomes: list[Any] = []
    output = _Output()
    buffer = b""
    current: int | None = None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    sel = selectors.DefaultSelector()
    sel.register(read_fd, selectors.EVENT_READ, "result")
    sel.register(proc.stdout, selectors.EVENT_READ, "output")
    open_streams = 2
    try:
        while open_streams:
            wait = deadline - time.monotonic()
            if wait <= 0:
                index = current if current is not None else len(outcomes)
                if index < len(files):
                    outcomes.append(LoadProblem(
                        files[index], f"{files[index]}: loading took longer than {timeout:g} s (the import, "
                        "get_inputs() or the reference hangs or is too slow); it was stopped. Make it "
                        "finish quickly, or raise SAGE_TASK_LOAD_TIMEOUT_S" + _quote(output), "timeout"))
                return outcomes
            for key, _ in sel.select(timeout=min(wait, 1.0)):
                fd = key.fileobj
                data = os.read(fd if isinstance(fd, int) else fd.fileno(), 1 << 16)
                if not data:
                    sel.unregister(fd)
                    open_streams -= 1
                    continue
                if key.data == "output":
                    output.add(data)
                    continue
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if "start" in message:
                        current = int(message["start"])
                        output = _Output()
                        deadline = time.monotonic() + timeout
                    elif "task" in message:
                        outcomes.append(task_from_json(message["task"]))
                        current = None
                    elif "problem" in message:
                        p = message["problem"]
                        outcomes.append(LoadProblem(Path(p["path"]), p["message"], p["kind"],
                                                    p.get("device", "")))
                        current = None
        proc.wait(timeout=30)
        if current is not None and len(outcomes) == current:
            code = proc.returncode
            what = f"signal {-code}" if code < 0 else f"exit code {code}"
            kind = "memory" if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGBUS) else "crashed"
            outcomes.append(LoadProblem(
                files[current], f"{files[current]}: the loading child died ({what}) while running this "
                "file (out of memory, a crash in native code, or os._exit/kill in the file); fix the "
                "file or run it with smaller sizes" + _quote(output), kind))
        return outcomes
    finally:
        sel.close()
        os.close(read_fd)
        try:  # always: what the file forked in the child's group dies with it, even after a clean exit
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            if proc.poll() is None:
                proc.kill()
        proc.wait()
        proc.stdout.close()


def _quote(output: _Output) -> str:
    text = output.text()
    if not text:
        return ""
    return f" (it printed {output.total} bytes, ending: {text[-300:]!r})"
