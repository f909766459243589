"""One daemon per state directory: an ``flock`` on ``<state-dir>/topoagent.lock``.

flock(2) locks are released by the kernel when the holder exits, however it exits, so a
crashed daemon never leaves a stale lock behind (unlike a PID file).  The file holds the
holder's PID, for the one-line message a second instance prints.
"""

from __future__ import annotations

import errno
import os

from topoagent.digits import is_decimal
from topoagent.errors import TopoagentError

__all__ = ["AlreadyRunning", "StateLock"]

LOCK_NAME = "topoagent.lock"


class AlreadyRunning(TopoagentError):
    """Another daemon holds the lock."""


class StateLock:
    """An exclusive, non-blocking lock on a state directory."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`AlreadyRunning` (held) / :class:`OSError` (cannot create)."""
        import fcntl

        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f" (pid {holder})" if holder else ""
                raise AlreadyRunning(f"another topoagent daemon{who} already uses state directory "
                                     f"{os.path.dirname(self.path)} (lock {self.path})") from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if is_decimal(text) else None
