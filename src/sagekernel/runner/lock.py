"""One writer per workspace: an advisory `flock` on `sage-run.lock`, which names the holder.

Every command that writes a workspace takes it (`sage run`, `sage mcp`, `sage memory import`,
`sage audit adoptions` when it stores ratings) and refuses with the holder's name while another
holds it; commands that only read (`report`, `memory list|show|stats|export`, `log`) take nothing.

The kernel releases a `flock` when its holder dies (kill -9 included), so there is no stale lock
to guess about and no pid-reuse race: a run either holds the lock or it does not. The file's
content, `{"pid", "run_id", "host", "started_at"}`, only serves the error message that names the
other run. The file itself is left in place on release; its content is rewritten by each holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from sagekernel.errors import RunLocked

LOCK_NAME = "sage-run.lock"


class WorkspaceLock:
    """`with WorkspaceLock(ws, run_id):` -- held for the whole run, released on exit or death."""

    def __init__(self, workspace: Path | str, run_id: str) -> None:
        """`workspace`: its folder or its database file; `run_id`: the run, or the command
        (e.g. "sage memory import") that holds it, for the message another writer gets."""
        ws = Path(workspace)
        self.path = (ws.parent if ws.suffix == ".db" and not ws.is_dir() else ws) / LOCK_NAME
        self.run_id = run_id
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> dict[str, object]:
        """What the current holder wrote about itself ({} if unreadable)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            info = self.holder()
            raise RunLocked(
                f"the workspace {self.path.parent} is in use by run {info.get('run_id')!r} "
                f"(pid {info.get('pid')} on {info.get('host')}, since {info.get('started_at')}); wait "
                "for it to finish or stop it, or use another --workspace") from None
        body = json.dumps({"pid": os.getpid(), "run_id": self.run_id, "host": socket.gethostname(),
                           "started_at": datetime.now(UTC).isoformat(timespec="seconds")})
        os.ftruncate(fd, 0)
        os.pwrite(fd, body.encode("utf-8"), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WorkspaceLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
