"""One daemon per state directory: an ``flock`` on ``<state-dir>/topoagent.lock``.

flock(2) locks are released by the kernel when the holder exits, however it exits, so a
crashed daemon never leaves a stale lock behind (unlike a PID file).  The file holds the
holder's PID, for the one-line message a second instance prints.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from topoagent.core.digits import decimal
from topoagent.core.errors import TopoagentError

__all__ = ["AlreadyRunning", "LockRefused", "StateLock"]

LOCK_NAME = "topoagent.lock"


class AlreadyRunning(TopoagentError):
    """Another daemon holds the lock."""


class LockRefused(TopoagentError):
    """The lock's path holds something topoagent did not make (a link, a FIFO, a device)."""


class StateLock:
    """An exclusive, non-blocking lock on a state directory."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`AlreadyRunning` (held) / :class:`OSError` (cannot create)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        # never through a link (a planted one would be followed and its target truncated),
        # never a FIFO or device: a regular file, checked on the descriptor itself
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):
                raise LockRefused(
                    f"{self.path}: {'a symbolic link' if exc.errno == errno.ELOOP else 'a FIFO'}, "
                    "not a regular file: refused (remove it)"
                ) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise LockRefused(f"{self.path}: not a regular file: refused (remove it)")
        if st.st_nlink != 1 or st.st_uid != os.geteuid():
            # a hard link planted here would have its other name truncated below
            os.close(fd)
            raise LockRefused(f"{self.path}: a hard link or another user's file, not this daemon's lock: refused")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f" (pid {holder})" if holder else ""
                raise AlreadyRunning(
                    f"another topoagent daemon{who} already uses state directory "
                    f"{os.path.dirname(self.path)} (lock {self.path})"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock (closing the file drops the flock)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return decimal(text)
