"""One sandboxed runtime process driven round by round (docs/target_seam.md, the wire).

The harness starts a runtime (the CPU driver, a Python runtime, the reference timer) with its
plan, then sends each round's inputs with a control byte and reads the frames back as they come.
Between rounds the process waits on its stdin, so the harness can interleave rounds of two
processes (candidate and reference) and read each one's kernel-accounted run time
(/proc/PID/schedstat) around every round: a number the candidate cannot forge.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sagekernel import sandbox
from sagekernel.harness.wire import Frame, FrameStream, round_message


@dataclass
class Exit:
    """How a runtime process ended, as the parent observed it."""

    returncode: int | None
    timed_out: bool  # the harness's wall-clock limit ended it
    limit_s: float  # that limit
    tail: str  # the last characters of its stdout/stderr
    kind: str  # sandbox layer

    @property
    def signal(self) -> int | None:
        return sandbox.death_signal(self.kind, self.returncode)


class Session:
    """A started runtime. Use as a context manager; `close()` always reaps the process group."""

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
        self._init_state(kind, limits, nonce)
        scratch.mkdir(parents=True, exist_ok=True)
        self._log_path = scratch / "child.log"
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(OSError, AttributeError):  # fewer wake-ups for large outputs
            fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        info_r, info_w = os.pipe() if kind == "bwrap" else (-1, -1)
        argv, env, cwd = sandbox.command_line(
            cmd,
            kind=kind,
            limits=limits,
            result_fd=write_fd,
            scratch_dir=scratch,
            info_fd=info_w if info_w >= 0 else None,
        )
        self._read_fd = read_fd
        pass_fds = (write_fd, info_w) if info_w >= 0 else (write_fd,)
        with open(self._log_path, "wb") as log:
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=pass_fds,
                    env=env,
                    cwd=cwd,
                    process_group=0,
                )
            finally:
                os.close(write_fd)
                if info_w >= 0:
                    os.close(info_w)
        self._info_fd = info_r
        self._pid: int | None = None if kind == "bwrap" else self.proc.pid
        assert self.proc.stdin is not None
        self._stdin = self.proc.stdin
        self._write(request)

    def _init_state(self, kind: str, limits: sandbox.Limits, nonce: str) -> None:
        """What every session tracks, however its process was started (warm.py forks its own)."""
        self.kind = kind
        self.limits = limits
        self.stream = FrameStream(nonce)
        self.started = time.monotonic()
        self.deadline = self.started + limits.wall_s
        self._eof = False
        self._cursor = 0
        self._exit: Exit | None = None

    # ---- control --------------------------------------------------------------------------------

    def _write(self, data: bytes) -> bool:
        """Write to the runtime's stdin on a thread (a dead or stuck child never blocks us)."""
        stdin = self._stdin

        def feed() -> None:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(data)
                stdin.flush()

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        writer.join(timeout=max(0.1, self.deadline - time.monotonic()))
        return not writer.is_alive()

    def send_round(self, blob: bytes | bytearray) -> bool:
        return self._write(round_message(blob))

    def send_control(self, byte: bytes) -> bool:
        return self._write(byte)

    def next_frame(self, timeout_s: float | None = None) -> Frame | None:
        """The next frame the runtime sent (frames are consumed in order, none is skipped), or None
        when the stream ended, is corrupt, or the time ran out."""
        end = self.deadline if timeout_s is None else min(self.deadline, time.monotonic() + timeout_s)
        while True:
            if self._cursor < len(self.stream.frames):
                self._cursor += 1
                return self.stream.frames[self._cursor - 1]
            if self._eof or self.stream.problem:
                return None
            remaining = end - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._read_fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                self._eof = True
            else:
                self.stream.feed(chunk)

    @property
    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    # ---- the kernel's own accounting ------------------------------------------------------------

    def host_pid(self) -> int | None:
        """The runtime's pid on the host (bwrap runs it under its own init: read --info-fd)."""
        if self._pid is not None or self._info_fd < 0:
            return self._pid
        ready, _, _ = select.select([self._info_fd], [], [], 2.0)
        if ready:
            with contextlib.suppress(OSError, ValueError, KeyError):
                info = json.loads(os.read(self._info_fd, 4096) or b"{}")
                init = int(info["child-pid"])
                children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
                self._pid = int(children[0]) if children else None
        return self._pid

    def cpu_ns(self) -> int | None:
        """Nanoseconds this runtime has run on a CPU, all its threads together (kernel-accounted,
        /proc/PID/task/*/schedstat; threads that already exited are not counted)."""
        pid = self.host_pid()
        if pid is None:
            return None
        total, found = 0, False
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        for tid in tasks:
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
                found = True
            except (OSError, ValueError, IndexError):
                continue
        return total if found else None

    # ---- end ------------------------------------------------------------------------------------

    def close(self) -> Exit:
        if self._exit is not None:
            return self._exit
        with contextlib.suppress(OSError, ValueError):
            self._stdin.write(b"Q")
            self._stdin.close()
        timed_out = False
        if not sandbox.wait_exit(self.proc, max(0.0, min(2.0, self.deadline - time.monotonic()))):
            timed_out = self.out_of_time
            sandbox.kill_group(self.proc)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)  # anything it left in its group
        # drain what is left on the channel (the end frame, a last error)
        while not self._eof and not self.stream.problem:
            ready, _, _ = select.select([self._read_fd], [], [], 0.5)
            if not ready:
                break
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                break
            self.stream.feed(chunk)
        os.close(self._read_fd)
        if self._info_fd >= 0:
            os.close(self._info_fd)
        tail = self._log_path.read_bytes()[-sandbox.OUTPUT_TAIL_CHARS :].decode("utf-8", "replace")
        self._exit = Exit(self.proc.returncode, timed_out, self.limits.wall_s, tail, self.kind)
        return self._exit

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, timeout_s: float) -> bool:
        return sandbox.wait_exit(self.proc, timeout_s)

    def kill(self) -> Exit:
        sandbox.kill_group(self.proc)
        return self.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Exit", "Session"]
