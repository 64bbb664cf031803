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

The child is confined like candidate code (sandbox.py), in the layer the harness's ``sandbox``
setting chooses (`loader_sandbox`): under bubblewrap it has no network, sees a read-only file
system (the interpreter, its packages, the tasks' folders; nothing else of the host) with a
private tmpfs at /tmp, and runs in its own PID namespace, so whatever it starts -- a daemon that
double-forked, after the loader was killed for a timeout included -- dies with it, and it cannot
see or signal `sage`. "auto" takes the strongest layer that works here, as candidates do; a layer
asked for by name that does not work is refused with the reason.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from sagekernel import sandbox
from sagekernel.errors import TaskError
from sagekernel.tasks.record import LoadProblem

DEFAULT_LOAD_TIMEOUT_S = 60.0
DEFAULT_LOAD_MEM_BYTES = 3 * 2**30
#: Seconds a fresh child may take to import torch before its first file starts.
STARTUP_TIMEOUT_S = 120.0
OUTPUT_KEEP = 4096
#: The host environment a loading child keeps (a sandbox starts from an empty one): where the
#: interpreter finds native libraries and which devices it may use. Nothing else (no API keys).
LOADER_ENV_PREFIXES = ("LD_LIBRARY_PATH", "CUDA_", "NVIDIA_", "ASCEND_", "HIP_", "ROCR_")
#: The loading child's resource limits besides its data segment (RLIMIT_DATA, set inside): its
#: wall time is the parent's per-file deadline, so the CPU limit only stops a runaway.
LOADER_LIMITS = sandbox.Limits(wall_s=0, cpu_s=24 * 3600, address_space_bytes=None, nofile=1024)


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


def loader_sandbox(requested: str = "auto") -> str:
    """The sandbox layer the loading child runs in: the one the harness's ``sandbox`` setting
    names (candidates' policy: "auto" is the strongest that works here). A layer named explicitly
    that does not work is a `TaskError`, before any task code runs."""
    kind = sandbox.best_kind(requested)
    works = {"bwrap": sandbox.bwrap_works, "unshare": sandbox.unshare_net_works}.get(kind, lambda: True)
    if not works():
        what = {"bwrap": "bubblewrap (bwrap)", "unshare": "`unshare --net` (root only)"}[kind]
        raise TaskError(f"sandbox {kind!r} was asked for, but {what} does not work on this machine, so "
                        "task files cannot be loaded in it; install it, or use sandbox auto (the "
                        "strongest layer that works here: `sage doctor` names it)")
    return kind


#: What a weaker layer than bubblewrap leaves a task file (shown by `sage tasks check`).
WEAKER_LAYER = {
    "unshare": "no network, but the host's file system and processes (bubblewrap does not work here)",
    "process": "the host's file system, network and processes (neither bubblewrap nor `unshare --net` "
               "works here)",
}


def load_files_isolated(files: list[Path], root: Path | None, *, timeout_s: float | None = None,
                        mem_bytes: int | None = None, sandbox_kind: str = "auto") -> list[Any]:
    """`Task` or `LoadProblem` for every file, in order (see module docstring). `sandbox_kind`:
    the harness's ``sandbox`` setting (`loader_sandbox`)."""

    timeout = load_timeout_s() if timeout_s is None else timeout_s
    memory = load_mem_bytes() if mem_bytes is None else mem_bytes
    kind = loader_sandbox(sandbox_kind)
    results: dict[int, Any] = {}
    pending = list(range(len(files)))
    while pending:
        done = _run_child([files[i] for i in pending], root, timeout, memory, kind)
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


def task_folders(files: list[Path], root: Path | None) -> list[str]:
    """The folders the loading child sees (read-only): the suite's root and the folder of every
    file outside it, and the NPUKernelBench checkout above them (its tolerances, base_config.yaml,
    sit above the ``tasks/`` folder that is loaded)."""
    from sagekernel.tasks.npukernelbench import repository_root

    folders = {Path(root).resolve()} if root is not None else set()
    folders |= {Path(f).resolve().parent for f in files
                if root is None or not Path(f).resolve().is_relative_to(Path(root).resolve())}
    folders |= {repo for f in list(folders) if (repo := repository_root(f / "_")) is not None}
    return sorted({str(f) for f in folders}, key=len)


def loader_command(
    files: list[Path], root: Path | None, kind: str, result_fd: int, scratch: Path,
    module: str = "sagekernel.tasks.isolate_child",
) -> tuple[list[str], dict[str, str], str | None]:
    """(argv, environment, working directory) of a loading child in sandbox `kind`: the tasks'
    folders read-only at their own paths, no other host path but the interpreter's, a private
    /tmp, the device nodes of this host's GPUs (a task file may ask for one while it loads).
    `module`: the child's main module (tasks/task_child.py's task child is confined the same way)."""
    from sagekernel.devices import gpu_device_nodes, npu_device_nodes

    keep = {k: v for k, v in os.environ.items() if k.startswith(LOADER_ENV_PREFIXES)}
    folders = task_folders(files, root)
    cmd = sandbox.SandboxCommand(
        argv=[sandbox.python_executable(), "-m", module],
        ro_binds=[(f, f) for f in folders if not any(f.startswith(o.rstrip("/") + "/") for o in folders)],
        env={**keep, "PYTHONPATH": os.pathsep.join(sandbox.site_paths()), "PYTHONDONTWRITEBYTECODE": "1"},
        device_nodes=gpu_device_nodes() + npu_device_nodes(),  # the Ascend C calibration's reference
    )
    return sandbox.command_line(cmd, kind=kind, limits=LOADER_LIMITS, result_fd=result_fd,
                                scratch_dir=scratch)


def _run_child(files: list[Path], root: Path | None, timeout: float, memory: int, kind: str) -> list[Any]:
    """Load `files` in one child; returns outcomes for a prefix of them (the rest: another child).
    A file that hangs or kills the child gets its problem here and ends the prefix."""
    from sagekernel.tasks.record import task_from_json

    read_fd, write_fd = os.pipe()
    # inside bubblewrap's PID namespace the parent is its init, not `sage`: no parent check there
    # absolute paths: the child's working directory is its private /tmp
    request = json.dumps({"files": [str(Path(f).resolve()) for f in files],
                          "root": str(Path(root).resolve()) if root else None,
                          "mem": memory, "fd": write_fd, "parent": None if kind == "bwrap" else os.getpid()})
    scratch = Path(tempfile.mkdtemp(prefix="sage-load-"))
    argv, env, cwd = loader_command(files, root, kind, write_fd, scratch)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), start_new_session=True, env=env, cwd=cwd,
        )
    except OSError:
        os.close(read_fd)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
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
            died_of = sandbox.death_signal(kind, code)
            what = f"signal {died_of}" if died_of is not None else f"exit code {code}"
            problem = "memory" if died_of in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS) else "crashed"
            outcomes.append(LoadProblem(
                files[current], f"{files[current]}: the loading child died ({what}) while running this "
                "file (out of memory, a crash in native code, or os._exit/kill in the file); fix the "
                "file or run it with smaller sizes" + _quote(output), problem))
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
        shutil.rmtree(scratch, ignore_errors=True)


def _quote(output: _Output) -> str:
    text = output.text()
    if not text:
        return ""
    return f" (it printed {output.total} bytes, ending: {text[-300:]!r})"
