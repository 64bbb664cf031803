"""A warm reference timer: one sandboxed process that imported torch once and forks a fresh child
for every timing run (config `warm_reference`).

Why: starting Python and importing torch costs about a second on the 2-core box, more than the
rest of a Level-1 evaluation together. Why it is safe: the server runs only harness code (the
reference timer, children/reference_runner.py) and never a candidate -- the CPU target's
candidate runs in the native driver, a separate process -- so the warm image holds nothing a
candidate could have touched. Each timing run gets its own forked child: a new session and process
group, its own rlimits, its own request pipe and result pipe, the seccomp deny-list, and a private
directory wiped afterwards. A server that dies is replaced on the next request.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sagekernel import sandbox
from sagekernel.harness.session import Exit, Session

CHILDREN_DIR = Path(__file__).resolve().parent / "children"


class ReferenceServer:
    def __init__(self, kind: str, threads: int) -> None:
        self.kind = kind
        self.scratch = Path(tempfile.mkdtemp(prefix="sage-refserver-"))
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = sandbox.SandboxCommand(
            argv=[
                *sandbox.python_argv("/box/children/reference_runner.py"),
                "--serve",
                *sandbox.site_paths(),
            ],
            ro_binds=[(str(CHILDREN_DIR), "/box/children")],
            env=sandbox.thread_env(threads),
            python=True,
        )
        if kind != "bwrap":
            cmd.argv = [sandbox.translate(kind, a, cmd) if a.startswith("/box") else a for a in cmd.argv]
        limits = sandbox.Limits(wall_s=0, cpu_s=24 * 3600, address_space_bytes=None)
        argv, env, cwd = sandbox.command_line(
            cmd, kind=kind, limits=limits, result_fd=child_end.fileno(), scratch_dir=self.scratch
        )
        self.log = open(self.scratch / "server.log", "wb")  # noqa: SIM115 (lives as long as the server)
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
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        sandbox.kill_group(self.proc)
        with contextlib.suppress(OSError):
            self.ctl.close()
        self.log.close()


_SERVERS: dict[tuple[str, int], ReferenceServer] = {}
_SERVERS_LOCK = threading.Lock()


def server(kind: str, threads: int) -> ReferenceServer:
    with _SERVERS_LOCK:
        current = _SERVERS.get((kind, threads))
        if current is None or not current.alive():
            if current is not None:
                current.close()
            current = _SERVERS[(kind, threads)] = ReferenceServer(kind, threads)
        return current


@atexit.register
def _close_all() -> None:
    for srv in list(_SERVERS.values()):
        srv.close()
    _SERVERS.clear()


class WarmSession(Session):
    """A Session whose process is a child forked by the warm server (same interface)."""

    def __init__(
        self,
        cmd: sandbox.SandboxCommand,
        *,
        kind: str,
        limits: sandbox.Limits,
        scratch: Path,
        request: bytes,
        nonce: str,
    ) -> None:
        del cmd  # the server's child always runs the reference timer
        self._init_state(kind, limits, nonce)
        self._pid = None
        self._info_fd = -1
        self._record: dict[str, Any] | None = None
        self._server = server(kind, self._threads_of(request))
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        job = {
            "nonce": nonce,
            "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s,
            "fsize_bytes": limits.file_size_bytes,
            "nofile": limits.nofile,
        }
        self._server.lock.acquire()  # one timing child at a time per server: the exit record is unambiguous
        try:
            socket.send_fds(self._server.ctl, [json.dumps(job).encode()], [req_r, res_w])
        except OSError:
            self._server.lock.release()
            raise
        finally:
            os.close(req_r)
            os.close(res_w)
        self._read_fd = res_r
        self._stdin = os.fdopen(req_w, "wb")
        self._write(request)

    @staticmethod
    def _threads_of(request: bytes) -> int:
        with contextlib.suppress(ValueError, KeyError, IndexError):
            hlen = int.from_bytes(request[8:16], "little")
            return int(json.loads(request[16 : 16 + hlen])["threads"])
        return 1

    def host_pid(self) -> int | None:
        return None

    def alive(self) -> bool:
        return self._record is None and self._server.alive() and not self._await_exit(0.0)

    def wait_exit(self, timeout_s: float) -> bool:
        return self._await_exit(timeout_s)

    def _await_exit(self, timeout_s: float) -> bool:
        if self._record is not None:
            return True
        ready, _, _ = select.select([self._server.ctl], [], [], max(0.0, timeout_s))
        if ready:
            with contextlib.suppress(OSError, ValueError):
                packet = self._server.ctl.recv(1 << 16)
                self._record = json.loads(packet) if packet else {"status": None, "signal": None, "tail": ""}
        return self._record is not None

    def kill(self) -> Exit:
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()  # the child sees end of input; the server reaps it within its wall limit
        return self.close()

    def close(self) -> Exit:
        if self._exit is not None:
            return self._exit
        with contextlib.suppress(OSError, ValueError):
            self._stdin.write(b"Q")
            self._stdin.close()
        done = self._await_exit(max(0.5, min(10.0, self.deadline - time.monotonic() + 5.0)))
        if not done:  # the server is stuck: replace it
            self._server.close()
        while not self._eof and not self.stream.problem:
            ready, _, _ = select.select([self._read_fd], [], [], 0.5)
            if not ready:
                break
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                break
            self.stream.feed(chunk)
        os.close(self._read_fd)
        self._server.lock.release()
        rec = self._record or {}
        code = rec.get("status")
        sig = rec.get("signal")
        self._exit = Exit(
            -sig if sig else code,
            bool(rec.get("timed_out")),
            self.limits.wall_s,
            str(rec.get("tail", "")),
            "process",
        )
        return self._exit


__all__ = ["ReferenceServer", "WarmSession", "server"]
