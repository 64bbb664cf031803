"""Task code the harness runs -- inputs, parameters, references, init arguments, the benchmark's
precision rule -- in a sandboxed child, never in `sage`'s own process.

While `confined(kind)` is open (the harness opens it around each evaluation), every function of
tasks/reference.py, `inputs.build_inputs`, `sizegen`'s reading of module ints and
`npukb_rule.case_check` hand their work to a `TaskChild` (through the seam tasks/confine.py)
instead of importing the task file here.
The child (tasks/confine_child.py) is confined exactly as the loading child is (tasks/isolate.py,
`loader_command`): the sandbox layer the harness's ``sandbox`` setting names (a layer named that
does not work is refused with the loader's message), under bubblewrap no network, the tasks'
folders read-only, a private /tmp, its own PID namespace and a cut-down environment; its data
segment limited to `load_mem_bytes()`; each request limited to `load_timeout_s()` of wall time.

Tensors come back as raw bytes with a JSON header (tasks/frames.py), never pickle: the child is
untrusted. This process keeps the seeds: it draws them and sends each request its own.

One child serves every task under the same folders and stays warm across evaluations (torch is
imported once per folder, not per trial); `POOL_SIZE` children at most. A request that overruns
its limit, a child that dies, or this process being interrupted while it waits kills the child's
whole process group (and the kernel kills the child when `sage` dies: PR_SET_PDEATHSIG); the
request raises `confine.TaskChildFailure`, which the harness reports as the task's fault
(``broken_task``), and the next request starts a fresh child.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from sagekernel import sandbox
from sagekernel.errors import TaskError
from sagekernel.tasks import confine, frames
from sagekernel.tasks.isolate import (
    STARTUP_TIMEOUT_S,
    _Output,
    load_mem_bytes,
    load_timeout_s,
    loader_command,
    loader_sandbox,
)
from sagekernel.tasks.task import Task

#: Warm children kept at once (one per distinct set of task folders); the least recently used goes.
POOL_SIZE = 4
CHILD_MODULE = "sagekernel.tasks.confine_child"

_LOCK = threading.Lock()
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sage-task-child-spawner")
_KINDS: list[str] = []  # the sandbox layers of the `confined` blocks open now (innermost last)
_POOL: OrderedDict[tuple[str, tuple[str, ...]], TaskChild] = OrderedDict()


@contextmanager
def confined(requested: str = "auto") -> Iterator[str]:
    """Within the block, task code runs in a sandboxed child (layer: `loader_sandbox(requested)`,
    refused as the loader refuses). Yields the layer."""
    kind = loader_sandbox(requested)
    with _LOCK:
        _KINDS.append(kind)
    try:
        yield kind
    finally:
        with _LOCK:
            _KINDS.remove(kind)


def _child_for(task: Task) -> TaskChild | None:
    """The warm child that runs `task`'s code, or None outside `confined` (run it here)."""
    from sagekernel.tasks.isolate import task_folders

    with _LOCK:
        if not _KINDS:
            return None
        key = (_KINDS[-1], tuple(task_folders([Path(task.source_path)], None)))
        child = _POOL.get(key)
        if child is None:
            child = _POOL[key] = TaskChild(key[0], list(key[1]))
        _POOL.move_to_end(key)
        evicted = [_POOL.popitem(last=False)[1] for _ in range(max(0, len(_POOL) - POOL_SIZE))]
    for old in evicted:
        old.close()
    return child


confine.register(_child_for)

#: The least descriptor number a warm child's pipes are moved to (`_high`).
HIGH_FD = 512


def _high(fd: int) -> int:
    """`fd` moved to a free descriptor >= HIGH_FD (close-on-exec); the old number is closed."""
    import fcntl

    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    except OSError:  # fewer descriptors allowed than that: keep it where it is
        return fd
    os.close(fd)
    return moved


def _rehome(stream: Any, mode: str) -> Any:
    """A buffered pipe `stream` reopened on a high descriptor (`_high`); the old one closed."""
    fd = os.dup(stream.fileno())
    stream.close()
    return os.fdopen(_high(fd), mode)


@atexit.register
def close_all() -> None:
    """Stop every warm child (also run at exit)."""
    with _LOCK:
        children = list(_POOL.values())
        _POOL.clear()
    for child in children:
        child.close()


class TaskChild:
    """One sandboxed child and its pipes; `call` is serialised (one request at a time)."""

    def __init__(self, kind: str, folders: list[str]) -> None:
        self.kind = kind
        self.folders = folders
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.read_fd = -1
        self.scratch: Path | None = None
        self.sent: dict[str, str] = {}  # task JSON -> id, for records the child already holds
        self.output = _Output()
        self.starts = 0

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        self.scratch = Path(tempfile.mkdtemp(prefix="sage-taskchild-"))
        files = [Path(f) / "_" for f in self.folders]
        argv, env, cwd = loader_command(files, None, self.kind, write_fd, self.scratch, module=CHILD_MODULE)
        try:
            # started from one long-lived thread: the child's PR_SET_PDEATHSIG (and bwrap's
            # --die-with-parent) fire when the *thread* that forked it ends, and the harness asks
            # from its planner thread, which ends with each evaluation
            self.proc = _SPAWNER.submit(
                subprocess.Popen, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True, env=env, cwd=cwd,
            ).result()
        except OSError as exc:
            os.close(read_fd)
            raise confine.TaskChildFailure(f"the sandboxed task child could not start: {exc}") from exc
        finally:
            os.close(write_fd)
        # a warm child's pipes live at high descriptors: the low ones a runtime's result pipe
        # gets stay as they were without it (a kernel guessing them meets the same numbers)
        self.read_fd = _high(read_fd)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin = _rehome(self.proc.stdin, "wb")
        self.proc.stdout = _rehome(self.proc.stdout, "rb")
        self.sent = {}
        self.output = _Output()
        self.starts += 1
        assert self.proc.stdin is not None
        setup = {"mem": load_mem_bytes(), "fd": write_fd,
                 "parent": None if self.kind == "bwrap" else os.getpid()}
        self.proc.stdin.write(json.dumps(setup).encode() + b"\n")
        self.proc.stdin.flush()
        self._answer(STARTUP_TIMEOUT_S, "starting (importing torch)")

    def close(self) -> None:
        """Kill the child's process group and forget it (the next call starts a fresh one)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                if proc.poll() is None:
                    proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    # ------------------------------------------------------------------ one request
    def call(self, op: str, task: Task, args: dict[str, Any],
             tensors: Sequence[torch.Tensor] = ()) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """Run `op` for `task` in the child; (answer header, tensors). Raises `TaskError`."""
        from sagekernel.tasks.record import task_to_json

        override = confine.standing_task()
        if override is not None and Path(override.source_path) == Path(task.source_path):
            task = override
        with self.lock:
            done = False
            try:
                if self.proc is None:
                    self._start()
                assert self.proc is not None and self.proc.stdin is not None
                record = json.dumps(task_to_json(task), sort_keys=True, default=str)
                request: dict[str, Any] = {"op": op, "args": args, "threads": torch.get_num_threads()}
                if record not in self.sent:  # each task record crosses once per child
                    self.sent[record] = str(len(self.sent))
                    request["task_json"] = json.loads(record)
                request["task_id"] = self.sent[record]
                frame = frames.encode(request, tensors)
                try:
                    self.proc.stdin.write(frame)
                    self.proc.stdin.flush()
                except OSError:
                    pass  # the child died: its death is read and reported below
                header, out = self._answer(load_timeout_s(), f"running {_WHAT.get(op, op)}")
                done = True
            except TaskError as exc:  # an overrun, a death, a malformed frame: the child's doing
                raise confine.TaskChildFailure(f"{task.source_path}: {exc}") from None
            finally:
                if not done:  # overrun, died, malformed, or this thread interrupted: no half state
                    self.close()
        if not header.get("ok"):
            kind = header.get("kind")
            error = str(header.get("error", ""))[:4000]
            note = " (lower the sizes, or raise SAGE_TASK_LOAD_MEM_BYTES)" if kind == "memory" else ""
            # a TaskError the task's code raised (refusing a size) stays one; anything else it
            # raised (RuntimeError, running out of memory) is its fault whatever the shape, as
            # it was in-process, where such errors were never caught as a refusal
            failure = TaskError if kind == "task" else confine.TaskChildFailure
            raise failure(f"{task.source_path}: {_WHAT.get(op, op)} failed in the task sandbox: "
                          f"{error}{note}")
        return header, out

    def _answer(self, limit: float, doing: str) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """Read one frame from the child within `limit` seconds, draining its output meanwhile."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + limit
        buffer = bytearray()
        need: tuple[int, int] | None = None
        sel = selectors.DefaultSelector()
        sel.register(self.read_fd, selectors.EVENT_READ, "result")
        sel.register(self.proc.stdout, selectors.EVENT_READ, "output")
        try:
            while True:
                if need is None and len(buffer) >= frames.PREFIX.size:
                    need = frames.sizes_of(bytes(buffer[:frames.PREFIX.size]))
                if need is not None and len(buffer) >= frames.PREFIX.size + need[0] + need[1]:
                    start = frames.PREFIX.size
                    return frames.decode(bytes(buffer[start:start + need[0]]),
                                         bytes(buffer[start + need[0]:start + need[0] + need[1]]))
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise confine.TaskChildFailure(
                        f"the task's code took longer than {limit:g} s {doing} in the task sandbox (it "
                        "hangs, or is too slow); it was stopped. Make it finish quickly, or raise "
                        f"SAGE_TASK_LOAD_TIMEOUT_S{self._quote()}")
                events = sel.select(timeout=min(wait, 1.0))
                for key, _ in events:
                    fd = key.fileobj
                    data = os.read(fd if isinstance(fd, int) else fd.fileno(), 1 << 20)
                    if key.data == "output":
                        if data:
                            self.output.add(data)
                        else:
                            sel.unregister(fd)
                        continue
                    if not data:
                        raise confine.TaskChildFailure(self._death(doing))
                    buffer += data
        finally:
            sel.close()

    def _death(self, doing: str) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        died_of = sandbox.death_signal(self.kind, code)
        what = f"signal {died_of}" if died_of is not None else f"exit code {code}"
        return (f"the sandboxed task child died ({what}) while {doing} (out of memory, a crash in "
                f"native code, or os._exit/kill in the task file){self._quote()}")

    def _quote(self) -> str:
        text = self.output.text()
        return f" (it printed {self.output.total} bytes, ending: {text[-300:]!r})" if text else ""


_WHAT = {"trial": "get_inputs() and the reference", "sets": "get_inputs() for the timed calls",
         "checked": "the references of a timed call",
         "inputs": "get_inputs()", "params": "building the model's parameters", "reference": "the reference",
         "declared": "the declared-precision reference", "init": "get_init_inputs()",
         "ints": "reading the file's sizes", "work": "counting the reference's FLOPs",
         "case_check": "the benchmark's precision rule", "signature": "reading Model.__init__'s signature",
         "device": "the reference on the device"}


__all__ = ["POOL_SIZE", "TaskChild", "close_all", "confined"]
