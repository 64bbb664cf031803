"""Inside the sandbox: load the candidate .so and run the calls the parent asked for.

Stdlib only (no torch, no numpy: start-up must stay ~tens of ms). The parent sends every input
byte and the output sizes; this process owns no reference, no seed and no verdict. For each call
it copies the inputs into guard-padded buffers (a page before, at least a page after), pre-fills
outputs with the sentinel, calls `sage_kernel`, and reports the outputs, whether inputs changed
and whether guard bytes around any buffer were overwritten. Calls naming the same `slot` reuse the
same buffers (same addresses, new contents), so a kernel that caches results by pointer returns
stale data.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from guard import Channel, lock_files, lock_process, preload, read_request, reap

#: Guard bytes before each buffer (a whole page: the buffer stays page- and so 64-byte aligned).
GUARD = 4096
#: At least this many guard bytes after each buffer; the rest of the last page is guarded too, so
#: an unrolled SIMD tail that overshoots by hundreds of bytes is caught, not just the next element.
TAIL_GUARD = 4096
PAGE = mmap.PAGESIZE
GUARD_BYTE = 0xA5
_libc = ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


class Buffer:
    """`nbytes` usable bytes, page aligned, with GUARD bytes of 0xA5 before and at least TAIL_GUARD
    after (to the end of the mapping)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        size = -(-(GUARD + max(nbytes, 1) + TAIL_GUARD) // PAGE) * PAGE
        self.mem = mmap.mmap(-1, size)
        self.end = GUARD + nbytes
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.addr = self.base + GUARD
        self.mem[:GUARD] = bytes([GUARD_BYTE]) * GUARD
        self.mem[self.end :] = bytes([GUARD_BYTE]) * (size - self.end)
        self.pad = bytes([GUARD_BYTE]) * max(GUARD, size - self.end)

    def fill(self, pattern: bytes) -> None:
        reps = self.nbytes // len(pattern) + 1
        self.mem[GUARD : GUARD + self.nbytes] = (pattern * reps)[: self.nbytes]

    def load(self, data: memoryview) -> None:
        self.mem[GUARD : GUARD + self.nbytes] = data

    def guards_intact(self) -> bool:
        tail = len(self.mem) - self.end
        return self.mem[:GUARD] == self.pad[:GUARD] and self.mem[self.end :] == self.pad[:tail]

    def first_difference(self, data: memoryview, data_addr: int) -> int:
        """-1 if the contents equal `data` (at address `data_addr`), else the first differing byte."""
        if _memcmp(self.addr, data_addr, len(data)) == 0:
            return -1
        view = self.view()
        for i in range(len(data)):
            if view[i] != data[i]:
                return i
        return -1

    def view(self) -> memoryview:
        return memoryview(self.mem)[GUARD : GUARD + self.nbytes]


def main(stdin: Any = None, result_fd: int | None = None, workdir: str | None = None) -> int:
    """One request: from `stdin` (default: this process's stdin), results to `result_fd` (default:
    env SAGE_RESULT_FD). A request carrying `lib_span` brings the library's bytes in its blob; they
    are written to `workdir` (this child's private directory) and loaded from there."""
    header, blob = read_request(stdin if stdin is not None else sys.stdin.buffer)
    sys.path.extend(p for p in header.get("site", []) if p not in sys.path)  # run with -S
    blob_addr = ctypes.addressof(ctypes.c_char.from_buffer(blob)) if len(blob) else 0
    fd = result_fd if result_fd is not None else int(os.environ["SAGE_RESULT_FD"])
    chan = Channel(fd, header["nonce"])
    lib_path = header.get("lib", "")
    if "lib_span" in header:
        off, n = header["lib_span"]
        lib_path = os.path.join(workdir or os.getcwd(), "kernel.so")
        with open(lib_path, "wb") as f:
            f.write(blob[off : off + n])
    seccomp = lock_process()
    chan.send({"kind": "hello", "seccomp": seccomp})
    try:
        lib = ctypes.CDLL(lib_path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        fn = getattr(lib, header["symbol"])
    except (OSError, AttributeError) as exc:
        chan.send({"kind": "load_error", "error": str(exc)})
        return 0
    fn.restype = None
    lock_files()
    chan.send({"kind": "loaded"})
    slots: dict[str, tuple[list[Buffer], list[Buffer]]] = {}
    for call in header["calls"]:
        in_sizes = [n for _, n in call["inputs"]]
        out_sizes = list(call["outputs"])
        cached = slots.get(call["slot"])
        if (
            cached is None
            or [b.nbytes for b in cached[0]] != in_sizes
            or [b.nbytes for b in cached[1]] != out_sizes
        ):
            cached = ([Buffer(n) for n in in_sizes], [Buffer(n) for n in out_sizes])
            slots[call["slot"]] = cached
        ins, outs = cached
        for buf, (off, n) in zip(ins, call["inputs"], strict=False):
            buf.load(blob[off : off + n])
        for buf, fill in zip(outs, call["fills"], strict=False):
            buf.fill(bytes.fromhex(fill))
        args: list[object] = [ctypes.c_void_p(b.addr) for b in ins + outs]
        for kind, value in call["scalars"]:
            args.append(ctypes.c_int64(int(value)) if kind == "i64" else ctypes.c_float(float(value)))
        chan.send({"kind": "begin", "id": call["id"]})
        t0 = time.perf_counter()
        fn(*args)
        seconds = time.perf_counter() - t0
        changed = [
            buf.first_difference(blob[off : off + n], blob_addr + off)
            for buf, (off, n) in zip(ins, call["inputs"], strict=False)
        ]
        guards = [b.guards_intact() for b in ins + outs]
        payload = b"".join(bytes(b.view()) for b in outs)
        chan.send(
            {
                "kind": "done",
                "id": call["id"],
                "seconds": seconds,
                "inputs_changed": changed,
                "guards": guards,
            },
            payload,
        )
    chan.send({"kind": "end"})
    return 0


# ---- warm mode: a zygote that forks one child per candidate ----------------------------------

#: Bytes of the child's stdout/stderr log returned to the parent.
TAIL_BYTES = 2000


def _limit(which: int, value: int) -> None:
    import resource

    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _child(job: dict[str, Any], req_fd: int, res_fd: int, workdir: str) -> int:
    """In the forked child, before any candidate byte is read: own session and process group,
    lowered rlimits, a private working/temporary directory, stdout/stderr into a log there, and no
    fd but the request pipe, the log and the result pipe. Then the same code as a cold child."""
    import resource
    import tempfile

    os.setsid()
    _limit(resource.RLIMIT_CPU, int(job["cpu_s"]))
    if job.get("as_bytes"):
        _limit(resource.RLIMIT_AS, int(job["as_bytes"]))
    _limit(resource.RLIMIT_FSIZE, int(job["fsize_bytes"]))
    _limit(resource.RLIMIT_NOFILE, int(job["nofile"]))
    _limit(resource.RLIMIT_CORE, 0)
    log = os.open(os.path.join(workdir, "child.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    # keep only 0-2, the request pipe and the result pipe (the control socket is closed here)
    keep = sorted({0, 1, 2, req_fd, res_fd})
    for lo, hi in zip(keep, [*keep[1:], 1 << 16], strict=True):
        os.closerange(lo + 1, hi)
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    os.environ["HOME"] = workdir
    tempfile.tempdir = workdir
    with os.fdopen(req_fd, "rb") as stdin:
        return main(stdin, res_fd, workdir)


def _wipe(directory: str) -> None:
    """Remove everything under `directory` (what one candidate left for the next)."""
    import shutil

    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for name in entries:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def serve(kind: str, site: list[str]) -> int:
    """Warm mode. The control socket (env SAGE_RESULT_FD, a SOCK_SEQPACKET socket) brings one job
    per packet: a small JSON record (nonce, limits) plus two fds, the read end of a request pipe
    and the write end of a fresh result pipe. This process forks a child per job and never reads
    the request, loads a library or calls a kernel itself; it reaps the child (killing its
    process group after the wall limit), wipes the temporary directories, and answers with an
    "exit" frame (status, signal, timeout, log tail) on the control socket."""
    import signal
    import socket
    import tempfile

    sys.path.extend(p for p in site if p not in sys.path)
    preload()  # pay for the seccomp bindings once, not per candidate
    ctl = socket.socket(fileno=int(os.environ["SAGE_RESULT_FD"]))
    base = tempfile.gettempdir()
    scratch = [base]
    if kind == "bwrap" and os.access("/dev/shm", os.W_OK):  # the sandbox's own /dev, never the host's
        scratch.append("/dev/shm")
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 2)
        except OSError:
            return 0
        if not msg:
            return 0
        job = json.loads(msg)
        if len(fds) != 2 or not str(job.get("nonce", "")).isalnum():
            for fd in fds:
                os.close(fd)
            continue
        req_fd, res_fd = fds
        workdir = os.path.join(base, f"sage-run-{job['nonce']}")
        os.mkdir(workdir, 0o700)
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                ctl.close()
                status = _child(job, req_fd, res_fd, workdir)
            except BaseException as exc:  # report, never fall back into the server loop
                with contextlib.suppress(BaseException):
                    error = f"{type(exc).__name__}: {exc}"
                    Channel(res_fd, job["nonce"]).send({"kind": "error", "error": error})
                status = 1
            finally:
                os._exit(status)
        os.close(req_fd)
        os.close(res_fd)
        timed_out, wstatus = reap(pid, float(job["wall_s"]))
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # anything the child left in its process group
        tail = b""
        try:
            with open(os.path.join(workdir, "child.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - TAIL_BYTES))
                tail = f.read()
        except OSError:
            pass
        for directory in scratch:
            _wipe(directory)
        record = {
            "kind": "exit",
            "nonce": job["nonce"],
            "status": os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None,
            "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
            "timed_out": timed_out,
            "tail": tail.decode("utf-8", "replace"),
        }
        head = json.dumps(record).encode() + b"\n"
        try:
            ctl.sendall(len(head).to_bytes(8, "little") + head)
        except OSError:
            return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2], sys.argv[3:]))
    sys.exit(main())
