"""Inside the sandbox: the seccomp deny-list of Python runtimes, and reaping forked children
(the framed result channel is wire_child.py).

Stdlib + pyseccomp only (this file runs in a bare interpreter; it must not import sagekernel).
Two phases: `lock_process()` before the candidate is loaded (no network, no new processes, no
ptrace/namespace/module/bpf calls), `lock_files()` after it is loaded (no opening files: the
kernel cannot read /proc, the task directory or anything else while it runs).
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any

CLONE_THREAD = 0x00010000

DENY_ALWAYS = (
    # network
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendto",
    "sendmsg",
    "sendmmsg",
    # process creation and replacement (threads stay allowed: clone with CLONE_THREAD)
    "fork",
    "vfork",
    "execve",
    "execveat",
    # reading or steering other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_open",
    "pidfd_getfd",
    # namespaces, mounts, kernel facilities
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "reboot",
    "swapon",
    "swapoff",
    "personality",
    "acct",
)
DENY_AFTER_LOAD = (
    "open",
    "openat",
    "openat2",
    "creat",
    "name_to_handle_at",
    "open_by_handle_at",
    "memfd_create",
    "mknod",
    "mknodat",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "truncate",
    "chdir",
)


#: Sonames tried before `ctypes.util.find_library`, which runs `ldconfig -p` and then gcc/ld
#: subprocesses when there is no /etc/ld.so.cache (inside bwrap): ~40-90 ms per process start.
_KNOWN_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}


def _seccomp_module() -> Any:
    import ctypes
    import ctypes.util

    original = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        soname = _KNOWN_SONAMES.get(name)
        if soname is not None:
            try:
                ctypes.CDLL(soname)
                return soname
            except OSError:
                pass
        return original(name)

    ctypes.util.find_library = find_library
    try:
        import pyseccomp as sc

        return sc
    except ImportError:
        pass
    finally:
        ctypes.util.find_library = original
    try:
        import seccomp as sc  # Debian's python3-seccomp (system python only)

        return sc
    except ImportError:
        return None


def _load(names: tuple[str, ...], extra: bool) -> str:
    sc = _seccomp_module()
    if sc is None:
        return "unavailable"
    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in names:
        try:
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        except Exception:  # syscall unknown on this architecture
            continue
    if extra:
        with contextlib.suppress(Exception):
            flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
        with contextlib.suppress(Exception):  # glibc falls back to clone for threads
            flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        pid = os.getpid()  # signals only to itself: never to the parent, siblings or a server
        for name in ("kill", "tgkill"):
            with contextlib.suppress(Exception):
                flt.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(0, sc.NE, pid))
    flt.load()
    return "deny-list"


def preload() -> None:
    """Import the seccomp bindings now (a warm server calls this once, before it forks)."""
    _seccomp_module()


def lock_process() -> str:
    return _load(DENY_ALWAYS, extra=True)


def lock_files() -> str:
    return _load(DENY_AFTER_LOAD, extra=False)


def reap(pid: int, wall_s: float) -> tuple[bool, int]:
    """(timed_out, wait status) of forked child `pid`, killing its process group after `wall_s`.

    Waits on a pidfd (no polling); without one, polls every millisecond."""
    import select
    import signal
    import time

    deadline = time.monotonic() + wall_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    try:
        while True:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            if done:
                return False, wstatus
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                _, wstatus = os.waitpid(pid, 0)
                return True, wstatus
            if pidfd >= 0:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(remaining, 0.001))
    finally:
        if pidfd >= 0:
            os.close(pidfd)
