"""The one reader: every host file topoagent reads goes through :class:`HostFS`.

A ``HostFS`` holds a root (``/`` on a live host, a fake or captured tree in tests) and
resolves every path, symlinks included, inside that root.  Absolute symlink targets are
re-rooted, so a capture never leaks reads onto the machine that replays it.

Reads never raise for the ordinary failures of a host: an absent file is ``None`` (absence is
normal in sysfs), and anything else -- permission denied, an I/O error, bytes that are not
text, a symlink loop -- is recorded as a :class:`~topoagent.snapshot.ProbeError` with the
host path and also answered with ``None``.  Callers turn the values into facts; the errors
travel in the snapshot.
"""

from __future__ import annotations

import errno
import os
from pathlib import PurePosixPath

from topoagent.errors import TopoagentError
from topoagent.snapshot import ProbeError, host_path

_MAX_LINK_HOPS = 40  # the kernel's own MAXSYMLINKS


class NotAHostTree(TopoagentError):
    """The root holds no sysfs tree at all: nothing can be scanned."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, UnicodeDecodeError):
        return "not text (garbage bytes)"
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "symlink loop"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


class HostFS:
    """Read host files below ``root``; collect what could not be read.

    Paths are host paths relative to the root, written without the leading slash
    (``"sys/bus/pci/devices"``); :meth:`host_path` gives the form a person reads.
    """

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.errors: list[ProbeError] = []

    # -- naming -----------------------------------------------------------------------
    host_path = staticmethod(host_path)

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, rel.lstrip("/"))

    def record(self, rel: str, error: str) -> None:
        """Record a failed probe of ``rel`` (a host path relative to the root)."""
        self.errors.append(ProbeError(path=self.host_path(rel), error=error))

    # -- checks -----------------------------------------------------------------------
    def require_sysfs(self) -> None:
        """Raise :class:`NotAHostTree` unless the root looks like a Linux host tree."""
        if not os.path.exists(self.root):
            raise NotAHostTree(f"{self.root}: no such directory")
        if not os.path.isdir(self.root):
            raise NotAHostTree(f"{self.root}: not a directory")
        if not os.path.isdir(self._abs("sys/devices")) and not os.path.isdir(
            self._abs("sys/bus/pci/devices")
        ):
            raise NotAHostTree(
                f"{self.root}: not a sysfs tree (no sys/devices or sys/bus/pci/devices below it)"
            )

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self._abs(rel))

    def isdir(self, rel: str) -> bool:
        return os.path.isdir(self._abs(rel))

    # -- reads ------------------------------------------------------------------------
    def text(self, rel: str, *, limit: int | None = None, quiet: bool = False) -> str | None:
        """The file's text, stripped; ``None`` when absent or unreadable (recorded).

        ``quiet`` skips recording for files whose read fails in normal operation (a down
        interface's ``speed`` answers EINVAL).
        """
        data = self.bytes(rel, limit=limit, quiet=quiet)
        if data is None:
            return None
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            self.record(rel, _describe(exc))
            return None

    def bytes(self, rel: str, *, limit: int | None = None, quiet: bool = False) -> bytes | None:
        """The file's raw bytes (at most ``limit``); ``None`` when absent or unreadable."""
        try:
            # Unbuffered: sysfs attributes are one page at most, and read(n) would allocate n.
            with open(self._abs(rel), "rb", buffering=0) as fh:
                return fh.readall() if limit is None else fh.read(limit)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError) as exc:
            if not quiet:
                self.record(rel, _describe(exc))
            return None

    def listdir(self, rel: str) -> list[str]:
        """Sorted entries of a directory; ``[]`` when absent or unreadable (recorded)."""
        try:
            return sorted(os.listdir(self._abs(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            self.record(rel, _describe(exc))
            return []

    def link_name(self, rel: str) -> str | None:
        """The last component of a symlink's target (``driver`` -> ``"nvidia"``)."""
        try:
            return PurePosixPath(os.readlink(self._abs(rel))).name or None
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # not a symlink: some captures copy directories
                return None
            self.record(rel, _describe(exc))
            return None

    def resolve(self, rel: str) -> str | None:
        """Resolve ``rel`` through its symlinks, inside the root.

        Returns the resolved host path relative to the root, or ``None`` when a component is
        missing or the links loop (the loop is recorded).
        """
        parts = [p for p in rel.strip("/").split("/") if p]
        done: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = os.path.join(self.root, *done, part)
            try:
                target = os.readlink(candidate)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                if exc.errno == errno.EINVAL:  # a plain file or directory
                    done.append(part)
                    continue
                self.record(rel, _describe(exc))
                return None
            hops += 1
            if hops > _MAX_LINK_HOPS:
                self.record(rel, "symlink loop")
                return None
            if target.startswith("/"):
                done = []  # re-root absolute targets
            parts = [p for p in target.split("/") if p] + parts
        return "/".join(done)
