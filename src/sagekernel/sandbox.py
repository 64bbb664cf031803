"""Run one untrusted command in a sandbox and collect what it sends back on a private channel.

Layers (eval_integrity.md §4a), strongest available first:

- ``bwrap``: bubblewrap with ``--unshare-all`` (no network, own PID namespace), a read-only
  minimal filesystem (/usr, /lib*, /bin, the interpreter prefix, the given binds), a private
  tmpfs at /tmp, ``--die-with-parent``, ``--new-session``, ``--cap-drop ALL``, ``--clearenv``,
  uid/gid 65534.
- ``unshare``: util-linux ``unshare --net`` (root only) when bwrap is missing: no network, but
  the host filesystem is visible.
- ``process``: a plain child process.

Every layer ALSO gets: its own process group (killed as a group on timeout), rlimits set by the
util-linux ``prlimit`` wrapper (never ``preexec_fn``), a scrubbed environment (a pinned
process's device-selection variables kept: devices.py), a private temporary directory
as working directory, stdout/stderr into a size-capped file, and a result pipe passed as the only
extra fd. Inside the child, ``children/guard.py`` adds the seccomp deny-list. RLIMIT_NPROC does not
bind root (measured, eval_integrity.md §4a.3), so process creation is denied by seccomp instead
(clone without CLONE_THREAD, fork, vfork, execve).

The warm servers (timing_server.py, zygote.py) start through the same layers and then fork one
child per candidate, which re-applies the per-candidate parts (session, rlimits, seccomp).

Nothing the child prints or returns as exit status decides anything; callers parse the channel
bytes (framed, with a nonce) and judge them in the parent.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from sagekernel.devices import selection_env

#: Most bytes accepted on the result channel; the rest is dropped (and the run fails to parse).
MAX_CHANNEL_BYTES = 1 << 31
#: Tail of the child's stdout/stderr kept for messages.
OUTPUT_TAIL_CHARS = 2000

SANDBOX_KINDS = ("bwrap", "unshare", "process")


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed command."""

    wall_s: float = 30.0  # wall-clock timeout; the whole process group is killed after it
    cpu_s: int = 30  # RLIMIT_CPU (seconds of CPU time)
    address_space_bytes: int | None = 8 << 30  # RLIMIT_AS; None leaves it unlimited
    file_size_bytes: int = 64 << 20  # RLIMIT_FSIZE: caps every file the child writes
    nofile: int = 256  # RLIMIT_NOFILE
    nproc: int = 4096  # RLIMIT_NPROC (only binds non-root uids; seccomp covers root)


@dataclass
class SandboxResult:
    """What happened to one sandboxed command, as observed by the parent."""

    kind: str  # which sandbox layer was used (SANDBOX_KINDS)
    returncode: int | None
    timed_out: bool
    channel: bytes  # everything the child wrote on the result fd
    output_tail: str  # last characters of the child's stdout+stderr
    wall_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def signal(self) -> int | None:
        """The signal that killed the child, else None."""
        return death_signal(self.kind, self.returncode)


def death_signal(kind: str, returncode: int | None) -> int | None:
    """The signal that ended a sandboxed child, from its return code: negative codes are signals,
    and bwrap reports a payload killed by signal N as exit status 128+N."""
    if returncode is not None and returncode < 0:
        return -returncode
    if kind == "bwrap" and returncode is not None and 128 < returncode < 128 + 65:
        return returncode - 128
    return None


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """True when bubblewrap exists and can create the namespaces we ask for."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        proc = subprocess.run(
            [exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"],
            capture_output=True,
            timeout=10,
            env={},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@lru_cache(maxsize=1)
def unshare_net_works() -> bool:
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        proc = subprocess.run([exe, "--net", "--", "/bin/true"], capture_output=True, timeout=10, env={})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def best_kind(requested: str = "auto") -> str:
    """The sandbox layer to use: the requested one, or the strongest available for "auto"."""
    if requested != "auto":
        if requested not in SANDBOX_KINDS:
            raise ValueError(f"unknown sandbox kind {requested!r}; choose from {SANDBOX_KINDS}")
        return requested
    if bwrap_works():
        return "bwrap"
    if unshare_net_works():
        return "unshare"
    return "process"


def python_prefix() -> str:
    """The real interpreter's install prefix (not a pyenv shim), bound read-only into bwrap."""
    return os.path.realpath(sys.base_prefix)


#: Packages a Python runtime imports; the directory holding each is put on its path and bound.
RUNTIME_PACKAGES = ("sagekernel", "torch", "numpy", "triton")


@lru_cache(maxsize=1)
def import_roots() -> list[str]:
    """The directories a `-I -S` Python runtime must add to its path: this environment's
    site-packages (a venv's, a conda env's, the base interpreter's, the user site) and the
    directory each of RUNTIME_PACKAGES is imported from (an editable checkout, a .pth entry).
    The harness's own script directory and the temporary directory are never among them."""
    import importlib.util
    import site

    dirs = list(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.append(site.getusersitepackages())
    for name in RUNTIME_PACKAGES:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations:
                dirs.append(os.path.dirname(next(iter(spec.submodule_search_locations))))
    out: list[str] = []
    for d in dirs:
        real = os.path.realpath(d)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    return out


@lru_cache(maxsize=1)
def python_roots() -> list[str]:
    """Every directory a Python runtime needs, bound read-only at the same path: the base
    interpreter's prefix (pyenv, uv-managed or system Python), the environment's own prefix (a
    venv or conda env), and the import roots (import_roots). Nested paths are dropped: binding
    the outer one covers them."""
    candidates = [
        python_prefix(),
        os.path.realpath(sys.prefix),
        os.path.dirname(python_executable()),
        *import_roots(),
    ]
    roots: list[str] = []
    for path in sorted(set(candidates), key=len):
        if path in ("/", "/usr", "/bin", "/lib", "/lib64", "/tmp") or path.startswith("/usr/"):
            continue  # already bound, or the sandbox's private tmpfs
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            roots.append(path)
    return roots


def python_executable() -> str:
    return os.path.realpath(sys.executable)


def python_argv(script: str) -> list[str]:
    """Interpreter command for a child script: isolated (-I) and without site processing (-S),
    which saves ~20 ms per start; the child adds `site_paths()` itself."""
    return [python_executable(), "-I", "-S", script]


def site_paths() -> list[str]:
    """The import path a `-I -S` Python runtime adds to `sys.path` (import_roots)."""
    return import_roots()


def thread_env(threads: int) -> dict[str, str]:
    """Environment that holds a candidate process to `threads` threads. OMP_THREAD_LIMIT caps every
    OpenMP team for the whole process, so a `num_threads(64)` clause cannot exceed the budget (it
    is read once when libgomp loads; a kernel has no API to raise it). Idle OpenMP threads sleep
    (OMP_WAIT_POLICY=passive) rather than spin for milliseconds after a parallel region: the parent
    charges every nanosecond a candidate's process runs outside its calls (harness/charging.py),
    and spinning workers would be charged to honest kernels on both sides alike."""
    n = str(max(1, threads))
    return {
        "OMP_NUM_THREADS": n,
        "OMP_THREAD_LIMIT": n,
        "OMP_DYNAMIC": "false",
        "OMP_WAIT_POLICY": "passive",
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
    }


def _prlimit_prefix(limits: Limits) -> list[str]:
    exe = shutil.which("prlimit")
    if exe is None:
        return []
    args = [
        exe,
        f"--cpu={limits.cpu_s}",
        f"--fsize={limits.file_size_bytes}",
        f"--nofile={limits.nofile}",
        f"--nproc={limits.nproc}",
        "--core=0",
    ]
    if limits.address_space_bytes is not None:
        args.append(f"--as={limits.address_space_bytes}")
    return [*args, "--"]


def _bwrap_prefix(
    ro_binds: list[tuple[str, str]],
    rw_binds: list[tuple[str, str]],
    env: dict[str, str],
    workdir: str,
    *,
    python: bool = True,
    device_nodes: list[str] | None = None,
    info_fd: int | None = None,
) -> list[str]:
    args = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/lib",
        "/lib",
        "--ro-bind-try",
        "/lib64",
        "/lib64",
        "--ro-bind",
        "/bin",
        "/bin",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/box",
    ]
    if python:
        for root in python_roots():
            args += ["--ro-bind", root, root]
    for node in device_nodes or []:
        args += ["--dev-bind-try", node, node]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    for key, value in env.items():
        args += ["--setenv", key, value]
    for src, dst in ro_binds:
        args += ["--ro-bind", src, dst]
    for src, dst in rw_binds:
        args += ["--bind", src, dst]
    return [*args, "--chdir", workdir, "--"]


@dataclass
class SandboxCommand:
    """A command to run in the sandbox. Paths in `argv` are as the child sees them.

    `ro_binds`/`rw_binds` map host paths to sandbox paths. Outside bwrap there is no mount
    namespace, so sandbox paths under /box are rewritten to their host paths (callers use
    `translate()` on any path they put in argv or the request).
    """

    argv: list[str]
    ro_binds: list[tuple[str, str]] = field(default_factory=list)
    rw_binds: list[tuple[str, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/tmp"
    python: bool = True  #: bind the interpreter, its environment and import roots (bwrap)
    device_nodes: list[str] = field(default_factory=list)  #: e.g. /dev/nvidia0, bound for GPU runs only


def translate(kind: str, path: str, cmd: SandboxCommand) -> str:
    """The path a child of this sandbox kind must use for sandbox path `path`."""
    if kind == "bwrap":
        return path
    for src, dst in [*cmd.ro_binds, *cmd.rw_binds]:
        if path == dst or path.startswith(dst.rstrip("/") + "/"):
            return src + path[len(dst) :]
    return path


def _drain(fd: int, sink: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError:
            return
        if not chunk:
            return
        if len(sink) < MAX_CHANNEL_BYTES:
            sink.extend(chunk[: MAX_CHANNEL_BYTES - len(sink)])


def command_line(
    cmd: SandboxCommand,
    *,
    kind: str,
    limits: Limits,
    result_fd: int,
    scratch_dir: Path,
    info_fd: int | None = None,
) -> tuple[list[str], dict[str, str], str | None]:
    """(argv, env for Popen, cwd) that run `cmd` in sandbox `kind` with the result fd `result_fd`."""
    private_tmp = scratch_dir / "tmp"
    private_tmp.mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LC_ALL": "C",
        **cmd.env,
        # the device slot this process is pinned to (a worker's, `sage run --device cuda:N`): the
        # environment is rebuilt here, so without this every child would see every card
        **selection_env(),
        "SAGE_RESULT_FD": str(result_fd),
    }
    if kind == "bwrap":
        env["TMPDIR"] = "/tmp"
        argv = (
            _prlimit_prefix(limits)
            + _bwrap_prefix(
                cmd.ro_binds,
                cmd.rw_binds,
                env,
                cmd.workdir,
                python=cmd.python,
                device_nodes=cmd.device_nodes,
                info_fd=info_fd,
            )
            + cmd.argv
        )
        return argv, {}, None
    env["TMPDIR"] = str(private_tmp)
    env["HOME"] = str(private_tmp)
    prefix = _prlimit_prefix(limits)
    if kind == "unshare":
        prefix += [shutil.which("unshare") or "unshare", "--net", "--"]
    argv = prefix + [translate(kind, a, cmd) if a.startswith("/box") else a for a in cmd.argv]
    return argv, env, str(private_tmp)


def run(
    cmd: SandboxCommand, *, kind: str, limits: Limits, stdin_data: bytes = b"", scratch_dir: Path
) -> SandboxResult:
    """Run `cmd` in sandbox `kind`; the child finds the result fd number in env SAGE_RESULT_FD.

    `scratch_dir` is a parent-owned directory for the output log and, outside bwrap, the child's
    private temporary directory.
    """
    read_fd, write_fd = os.pipe()
    argv, popen_env, cwd = command_line(
        cmd, kind=kind, limits=limits, result_fd=write_fd, scratch_dir=scratch_dir
    )
    log_path = scratch_dir / "child.log"
    sink = bytearray()
    start = time.perf_counter()
    timed_out = False
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=popen_env,
                cwd=cwd,
                process_group=0,
            )
        finally:
            os.close(write_fd)
        reader = threading.Thread(target=_drain, args=(read_fd, sink), daemon=True)
        reader.start()
        writer = threading.Thread(target=_feed, args=(proc, stdin_data), daemon=True)
        writer.start()
        try:
            if not wait_exit(proc, limits.wall_s):
                timed_out = True
                kill_group(proc)
        except BaseException:
            kill_group(proc)
            raise
        finally:
            writer.join(timeout=2.0)
            # The channel's writer may be inherited by a stray grandchild; never wait forever.
            reader.join(timeout=2.0)
            if reader.is_alive():
                kill_group(proc)
                reader.join(timeout=2.0)
            os.close(read_fd)
    wall = time.perf_counter() - start
    tail = log_path.read_bytes()[-OUTPUT_TAIL_CHARS:].decode("utf-8", "replace")
    return SandboxResult(
        kind=kind,
        returncode=proc.returncode,
        timed_out=timed_out,
        channel=bytes(sink),
        output_tail=tail,
        wall_s=wall,
    )


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError):  # BrokenPipeError: the child exited without reading
        if data:
            proc.stdin.write(data)
    with contextlib.suppress(OSError):
        proc.stdin.close()


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for `proc` to exit; False on timeout. Event-driven through a pidfd where the kernel has
    one: `Popen.wait(timeout)` polls with sleeps of up to 50 ms, which a ~50 ms compile or
    correctness run pays on every call."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel / platform), or already reaped
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        ready, _, _ = select.select([pidfd], [], [], max(0.0, timeout_s))
    finally:
        os.close(pidfd)
    if not ready:
        return False
    proc.wait()
    return True


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
