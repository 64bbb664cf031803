"""A warm, sandboxed timing server: torch is imported once, each request runs in a forked child.

Importing torch costs ~1.6 s, far more than timing a Level-1 kernel. The server is one sandboxed
process (same layers as any candidate process: bwrap, prlimit, scrubbed env, result pipe) that
imported torch and the task helpers and then only forks. It holds no seeds, inputs or references
between requests, and never runs candidate code itself: every request's child starts a new
session, lowers its rlimits, installs the seccomp filters (which deny signalling any other process,
the server included) and exits when done. The server reports how the child ended (exit status,
signal, timeout) in a frame with the request's nonce. A dead server is replaced on the next request.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sagekernel.harness import protocol, sandbox

CHILDREN_DIR = Path(__file__).resolve().parent / "children"
PACKAGE_DIR = Path(__file__).resolve().parents[1]


class TimingServer:
    def __init__(self, kind: str, threads: int, memory_limit_bytes: int) -> None:
        self.kind = kind
        self.scratch = Path(tempfile.mkdtemp(prefix="sage-timing-server-"))
        read_fd, write_fd = os.pipe()
        pkg = "/box/pkg" if kind == "bwrap" else str(PACKAGE_DIR.parent)
        cmd = sandbox.SandboxCommand(
            argv=[
                *sandbox.python_argv("/box/children/timing_runner.py"),
                "--serve",
                pkg,
                *sandbox.site_paths(),
            ],
            ro_binds=[(str(CHILDREN_DIR), "/box/children"), (str(PACKAGE_DIR), "/box/pkg/sagekernel")],
            env=sandbox.thread_env(threads),
        )
        limits = sandbox.Limits(wall_s=0, cpu_s=24 * 3600, address_space_bytes=memory_limit_bytes)
        argv, env, cwd = sandbox.command_line(
            cmd, kind=kind, limits=limits, result_fd=write_fd, scratch_dir=self.scratch
        )
        self.log = open(self.scratch / "server.log", "wb")  # noqa: SIM115 (lives as long as the server)
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=env,
                cwd=cwd,
                process_group=0,
            )
        finally:
            os.close(write_fd)
        self.read_fd = read_fd
        self.buffer = bytearray()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(
        self, header: dict[str, Any], blob: bytes | bytearray, timeout_s: float
    ) -> tuple[protocol.ParsedChannel, dict[str, Any] | None, bool]:
        """(frames of this request, the server's exit record or None, server_died)."""
        nonce = header["nonce"]
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(protocol.encode_request(header, blob))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return protocol.ParsedChannel(problem="timing server is not running"), None, True
        data = bytearray()
        deadline = time.monotonic() + timeout_s + 30.0  # the server enforces timeout_s itself
        while True:
            parsed = protocol.parse_frames(bytes(data), nonce)
            exit_frame = parsed.first("exit")
            if exit_frame is not None:
                return parsed, exit_frame.record, False
            if parsed.problem and parsed.problem not in ("truncated frame", "truncated frame header"):
                return parsed, None, False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return parsed, None, True
            ready, _, _ = select.select([self.read_fd], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    return parsed, None, True
                data.extend(chunk)
            elif not self.alive():
                return parsed, None, True

    def close(self) -> None:
        sandbox.kill_group(self.proc)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


_SERVERS: dict[tuple[str, int, int], TimingServer] = {}
_LOCK = threading.Lock()


def request(
    kind: str,
    threads: int,
    memory_limit_bytes: int,
    header: dict[str, Any],
    blob: bytes | bytearray,
    timeout_s: float,
) -> tuple[protocol.ParsedChannel, dict[str, Any] | None, str]:
    """Run one timing request on the shared server for (kind, threads); (frames, exit record, problem)."""
    key = (kind, threads, memory_limit_bytes)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None or not server.alive():
            if server is not None:
                server.close()
            server = TimingServer(kind, threads, memory_limit_bytes)
            _SERVERS[key] = server
        parsed, exit_record, died = server.request(header, blob, timeout_s)
        problem = ""
        if died:
            tail = (server.scratch / "server.log").read_bytes()[-600:].decode("utf-8", "replace").strip()
            problem = "the timing server stopped" + (f": {tail}" if tail else "")
            server.close()
            del _SERVERS[key]
        return parsed, exit_record, problem


def shutdown() -> None:
    with _LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


atexit.register(shutdown)
