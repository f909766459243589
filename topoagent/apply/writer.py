"""The one writer: every change topoagent makes to a host goes through :class:`HostWriter`.

Like :class:`~topoagent.hostfs.HostFS` it holds a root (``/`` on a live host, a fake tree in
tests) and writes only inside it: a path whose symlinks lead outside the root is refused, so a
capture or a fake tree can never redirect a write onto the machine running the tests.
Process affinity and kernel modules are changes too, so they are made here as well; modules
only on the live host (``root == "/"``).
"""

from __future__ import annotations

import errno
import os

from topoagent.apply.files import write_atomically
from topoagent.cpuset import CpuSet
from topoagent.errors import TopoagentError


class WriteError(TopoagentError):
    """A write that failed; ``errno`` says why (EIO: the kernel refused the value)."""

    def __init__(self, message: str, err: int | None = None) -> None:
        super().__init__(message)
        self.errno = err


class HostWriter:
    """Write host files below ``root`` (paths without a leading slash, as HostFS takes them)."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = os.path.realpath(os.fspath(root))

    @property
    def live(self) -> bool:
        """Whether the root is this machine's own ``/``."""
        return self.root == "/"

    def path(self, rel: str) -> str:
        """The real path of ``rel`` below the root; refuses one that resolves outside it."""
        target = os.path.realpath(os.path.join(self.root, rel.lstrip("/")))
        if not self.live and os.path.commonpath([self.root, target]) != self.root:
            raise WriteError(f"/{rel.lstrip('/')}: resolves outside the root {self.root} ({target}): refused")
        return target

    def can_write(self, rel: str) -> bool:
        """Whether ``rel`` (or, for a file still to be made, its nearest existing parent) is writable."""
        try:
            p = self.path(rel)
        except WriteError:
            return False
        while not os.path.exists(p):
            parent = os.path.dirname(p)
            if parent == p:
                return False
            p = parent
        return os.access(p, os.W_OK)

    # -- files ----------------------------------------------------------------------------
    def _open(self, rel: str, flags: int) -> int:
        """An existing file below the root, opened for writing."""
        try:
            return os.open(self.path(rel), os.O_WRONLY | flags)
        except OSError as exc:
            raise WriteError(f"/{rel}: {exc.strerror}", exc.errno) from None

    def write_text(self, rel: str, text: str) -> None:
        """Write ``text`` to an existing file (a sysfs/procfs attribute) in one write."""
        fd = self._open(rel, os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        except OSError as exc:
            raise WriteError(f"/{rel}: {exc.strerror}", exc.errno) from None
        finally:
            os.close(fd)

    def write_at(self, rel: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` of an existing file (PCI config space through sysfs)."""
        fd = self._open(rel, 0)
        try:
            if os.pwrite(fd, data, offset) != len(data):
                raise WriteError(f"/{rel}: short write at {offset:#x}", errno.EIO)
        except OSError as exc:
            raise WriteError(f"/{rel}: {exc.strerror}", exc.errno) from None
        finally:
            os.close(fd)

    def replace_file(self, rel: str, text: str) -> None:
        """Write a whole configuration file atomically (temp file, then rename), mode 0644."""
        p = self.path(rel)
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            write_atomically(p, text.encode(), mode=0o644)
        except OSError as exc:
            raise WriteError(f"/{rel}: {exc.strerror}", exc.errno) from None

    def remove_file(self, rel: str) -> None:
        """Remove a file topoagent created (absent already is fine)."""
        try:
            os.unlink(self.path(rel))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise WriteError(f"/{rel}: {exc.strerror}", exc.errno) from None

    # -- processes and modules ----------------------------------------------------------------
    def set_affinity(self, tid: int, cpus: CpuSet) -> None:
        """Bind one thread (a tid; a pid is its main thread) to ``cpus``."""
        try:
            os.sched_setaffinity(tid, set(cpus))
        except OSError as exc:
            raise WriteError(f"thread {tid}: {exc.strerror}", exc.errno) from None

    def modprobe(self, module: str, *, remove: bool = False) -> None:
        """Load (or unload) a kernel module with modprobe; live host only."""
        if not self.live:
            raise WriteError(f"modprobe {module}: not run, the root {self.root} is not this host")
        from topoagent.sources.tools import run_tool

        out = run_tool(["modprobe", *(["-r"] if remove else []), module], timeout=60)
        if not out.ok:
            raise WriteError(f"modprobe {'-r ' if remove else ''}{module}: {out.error}")
