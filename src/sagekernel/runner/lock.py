"""One writer per workspace: a lock file naming the run and process that hold it.

`sage-run.lock` in the workspace holds `{"pid", "run_id", "host", "started_at"}`. It is created
with O_EXCL, so two runs cannot both take it. A lock left by a process that no longer exists on
this host (kill -9, power loss) is stale and taken over; a live holder makes `RunLocked` name
the other run and its pid.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from sagekernel.errors import RunLocked

LOCK_NAME = "sage-run.lock"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class WorkspaceLock:
    """`with WorkspaceLock(ws, run_id):` -- held for the whole run, released on exit."""

    def __init__(self, workspace: Path | str, run_id: str) -> None:
        self.path = Path(workspace) / LOCK_NAME
        self.run_id = run_id
        self.held = False

    def holder(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # unreadable or half-written: treated as stale below
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"pid": os.getpid(), "run_id": self.run_id, "host": socket.gethostname(),
                           "started_at": datetime.now(UTC).isoformat(timespec="seconds")})
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                info = self.holder()
                if info is None:
                    continue  # released between our open and read
                raw = info.get("pid")
                pid = raw if isinstance(raw, int) else 0
                same_host = info.get("host") in (None, socket.gethostname())
                if pid and (pid_alive(pid) or not same_host) and pid != os.getpid():
                    raise RunLocked(
                        f"the workspace {self.path.parent} is in use by run {info.get('run_id')!r} "
                        f"(pid {pid} on {info.get('host')}, since {info.get('started_at')}); wait for it "
                        f"to finish or stop it, or use another --workspace. If no such run is active (the "
                        f"pid was reused, or it ran on another host), delete {self.path}") from None
                self.path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body)
            self.held = True
            return
        raise RunLocked(f"could not take the workspace lock {self.path}; another run keeps taking it")

    def release(self) -> None:
        if self.held:
            info = self.holder()
            if info is not None and info.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> WorkspaceLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
