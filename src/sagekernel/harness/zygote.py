"""A warm, sandboxed correctness zygote: one long-lived process per harness process that forks a
fresh child for every candidate (config `warm_correctness`).

Why: a cold correctness child costs a bubblewrap start, an interpreter start and the imports of
ctypes and the seccomp bindings (~100-150 ms on the 2-core box) for a few milliseconds of kernel
calls. The zygote pays that once.

Why isolation per candidate is preserved:
- The zygote is started exactly like a cold child (same bwrap layers, prlimit, scrubbed env,
  children/ bound read-only) and imports only the stdlib and the seccomp bindings: no torch, no
  numpy, no sagekernel. It holds no seeds, inputs or references, and it never reads a request,
  writes a library, loads one or calls a kernel; it only forks.
- Every candidate runs in its own forked child, which before reading its request starts a new
  session (own process group, killed as a group), lowers its rlimits (CPU, address space, file
  size, open files, core), gets a private working/temporary directory and its own log, and closes
  every fd except its request pipe and a result pipe made for this candidate alone (the control
  socket to this process is closed). Then it runs the cold child's code: seccomp deny-list, load,
  file lock-down, calls. It exits after one candidate.
- The result pipe is fresh per candidate, so nothing one child writes can reach another's stream;
  the exit record comes on the control socket, which no child holds.
- After each child the zygote kills its process group and wipes the sandbox's temporary
  directories (and the sandbox's own /dev/shm), so nothing one candidate leaves is seen by the next.
- What children share is the zygote's memory image (copy-on-write, identical for all, nothing
  secret in it) and therefore its ASLR layout; the cold path remains available for comparison.
A zygote that dies or stops answering is killed and replaced on the next request.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sagekernel.harness import sandbox

CHILDREN_DIR = Path(__file__).resolve().parent / "children"
#: Seconds the parent waits beyond the child's wall limit before it gives up on the zygote.
GRACE_S = 10.0


class Zygote:
    def __init__(self, kind: str, threads: int, memory_limit_bytes: int) -> None:
        self.kind = kind
        self.scratch = Path(tempfile.mkdtemp(prefix="sage-zygote-"))
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = sandbox.SandboxCommand(
            argv=[
                *sandbox.python_argv("/box/children/kernel_runner.py"),
                "--serve",
                kind,
                *sandbox.site_paths(),
            ],
            ro_binds=[(str(CHILDREN_DIR), "/box/children")],
            env=sandbox.thread_env(threads),
        )
        limits = sandbox.Limits(wall_s=0, cpu_s=24 * 3600, address_space_bytes=memory_limit_bytes)
        argv, env, cwd = sandbox.command_line(
            cmd, kind=kind, limits=limits, result_fd=child_end.fileno(), scratch_dir=self.scratch
        )
        self.log = open(self.scratch / "zygote.log", "wb")  # noqa: SIM115 (lives as long as the zygote)
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(child_end.fileno(),),
                env=env,
                cwd=cwd,
                process_group=0,
            )
        finally:
            child_end.close()
        self.ctl = parent_end

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(
        self, nonce: str, request: bytes, limits: sandbox.Limits
    ) -> tuple[bytes, dict[str, Any] | None, bool]:
        """(result channel bytes, the exit record or None, zygote_failed) for one candidate."""
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        job = {
            "nonce": nonce,
            "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s,
            "as_bytes": limits.address_space_bytes,
            "fsize_bytes": limits.file_size_bytes,
            "nofile": limits.nofile,
        }
        try:
            socket.send_fds(self.ctl, [json.dumps(job).encode()], [req_r, res_w])
        except OSError:
            os.close(req_w)
            os.close(res_r)
            return b"", None, True
        finally:
            os.close(req_r)  # the zygote holds its own copies now
            os.close(res_w)
        writer = threading.Thread(target=_write_all, args=(req_w, request), daemon=True)
        writer.start()
        channel = bytearray()
        control = bytearray()
        exit_record: dict[str, Any] | None = None
        res_open = True
        deadline = time.monotonic() + limits.wall_s + GRACE_S
        drain_until: float | None = None  # after the exit record: a little longer for the pipe
        try:
            while res_open or exit_record is None:
                now = time.monotonic()
                limit = deadline if drain_until is None else min(deadline, drain_until)
                if now >= limit:
                    break
                watch = ([res_r] if res_open else []) + ([self.ctl] if exit_record is None else [])
                ready, _, _ = select.select(watch, [], [], min(limit - now, 1.0))
                if not ready and not self.alive():
                    break
                if res_r in ready:
                    chunk = os.read(res_r, 1 << 20)
                    if chunk:
                        if len(channel) < sandbox.MAX_CHANNEL_BYTES:
                            channel.extend(chunk[: sandbox.MAX_CHANNEL_BYTES - len(channel)])
                    else:
                        res_open = False
                if self.ctl in ready:
                    packet = self.ctl.recv(1 << 16)
                    if not packet:
                        break
                    control.extend(packet)
                    exit_record = _exit_record(control, nonce)
                    if exit_record is not None:
                        drain_until = time.monotonic() + 2.0
        finally:
            os.close(res_r)
            writer.join(timeout=2.0)
        return bytes(channel), exit_record, exit_record is None

    def close(self) -> None:
        sandbox.kill_group(self.proc)
        with contextlib.suppress(OSError):
            self.ctl.close()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:  # the child died or stopped reading
        pass
    finally:
        os.close(fd)


def _exit_record(control: bytearray, nonce: str) -> dict[str, Any] | None:
    if len(control) < 8:
        return None
    length = int.from_bytes(control[:8], "little")
    if len(control) < 8 + length:
        return None
    try:
        record = json.loads(bytes(control[8 : 8 + length]))
    except ValueError:
        return {"kind": "exit", "status": None, "signal": None, "timed_out": False, "tail": "bad record"}
    return record if isinstance(record, dict) and record.get("nonce") == nonce else None


_IDLE: dict[tuple[str, int, int], list[Zygote]] = {}
_LOCK = threading.Lock()


def run(
    kind: str, threads: int, limits: sandbox.Limits, nonce: str, request: bytes
) -> sandbox.SandboxResult:
    """Run one correctness request in a child of a warm zygote; the result has the cold path's shape."""
    key = (kind, threads, limits.address_space_bytes or 0)
    with _LOCK:
        pool = _IDLE.setdefault(key, [])
        zygote = None
        while pool and zygote is None:
            candidate = pool.pop()
            if candidate.alive():
                zygote = candidate
            else:
                candidate.close()
    if zygote is None:  # none idle (first use, or another thread holds it): start one
        zygote = Zygote(kind, threads, limits.address_space_bytes or (8 << 30))
    start = time.perf_counter()
    channel, record, failed = zygote.run(nonce, request, limits)
    wall = time.perf_counter() - start
    if failed or record is None:
        tail = (zygote.scratch / "zygote.log").read_bytes()[-sandbox.OUTPUT_TAIL_CHARS :]
        timed_out = wall >= limits.wall_s
        zygote.close()
        return sandbox.SandboxResult(
            kind=kind,
            returncode=None,
            timed_out=timed_out,
            channel=channel,
            output_tail=tail.decode("utf-8", "replace"),
            wall_s=wall,
            notes=["the correctness zygote failed; it will be restarted"],
        )
    with _LOCK:
        _IDLE.setdefault(key, []).append(zygote)
    sig = record.get("signal")
    status = record.get("status")
    return sandbox.SandboxResult(
        kind=kind,
        returncode=-int(sig) if sig else status,
        timed_out=bool(record.get("timed_out")),
        channel=channel,
        output_tail=str(record.get("tail", ""))[-sandbox.OUTPUT_TAIL_CHARS :],
        wall_s=wall,
        notes=["warm zygote"],
    )


def shutdown() -> None:
    with _LOCK:
        for pool in _IDLE.values():
            for zygote in pool:
                zygote.close()
        _IDLE.clear()


atexit.register(shutdown)
