"""The one writer: every change topoagent makes to a host goes through :class:`HostWriter`.

Like :class:`~topoagent.core.hostfs.HostFS` it holds a root (``/`` on a live host, a fake tree in
tests) and writes only inside it: a path whose symlinks lead outside the root is refused, so a
capture or a fake tree can never redirect a write onto the machine running the tests.
Process affinity and kernel modules are changes too, so they are made here as well; modules
only on the live host (``root == "/"``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import Any

from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import TopoagentError
from topoagent.core.read.tools import run_tool
from topoagent.core.write.beneath import Outside, beneath
from topoagent.core.write.files import kind_of, write_in

_WRITE = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: How a file's bytes travel as text through plans and the journal: undecodable bytes as lone
#: surrogates (PEP 383), so a saved file comes back byte for byte.
FILE_ENCODING = ("utf-8", "surrogateescape")
#: A file's metadata as the journal keeps it beside its path: its permission bits (never
#: set-user-ID, set-group-ID or sticky: no file topoagent writes has them) and owner.
META = ("mode", "uid", "gid")


class WriteError(TopoagentError):
    """A write that failed; ``errno`` says why (EIO: the kernel refused the value)."""

    def __init__(self, message: str, err: int | None = None) -> None:
        super().__init__(message)
        self.errno = err


class HostWriter:
    """Write host files below ``root`` (paths without a leading slash, as HostFS takes them).

    Every path is walked from the root's descriptor (:func:`~topoagent.core.write.beneath.beneath`)
    and the file is opened relative to its directory with ``O_NOFOLLOW|O_NONBLOCK`` and checked
    on the opened descriptor to be a regular file: a FIFO, a device or a swapped-in link is
    refused, never written or waited on."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = os.path.realpath(os.fspath(root))

    @property
    def live(self) -> bool:
        """Whether the root is this machine's own ``/``."""
        return self.root == "/"

    def _where(self, rel: str, *, create_dirs: bool = False) -> Any:
        return beneath(self.root, rel, live=self.live, create_dirs=create_dirs)

    def _fail(self, rel: str, exc: OSError) -> WriteError:
        if isinstance(exc, Outside):
            return WriteError(f"/{rel.lstrip('/')}: {exc.strerror} {self.root}: refused", exc.errno)
        return WriteError(f"/{rel.lstrip('/')}: {exc.strerror or exc}", exc.errno)

    def why_not(self, rel: str) -> str | None:
        """Why ``rel`` (or, for a file still to be made, its nearest existing directory) could
        not be written -- ``None`` when it could.  An ``EACCES`` answer starts ``permission``."""
        try:
            with self._where(rel) as (dir_fd, rest):
                name = rest[0] if len(rest) == 1 else "."
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    name = "."
                    st = os.fstat(dir_fd)
                if name != "." and not stat.S_ISREG(st.st_mode):
                    return f"/{rel}: {kind_of(st.st_mode)}, not a regular file: refused"
                if not os.access(name, os.W_OK, dir_fd=dir_fd):
                    return "permission denied"
        except OSError as exc:
            return str(self._fail(rel, exc))
        return None

    # -- files ----------------------------------------------------------------------------
    def _open(self, rel: str, flags: int) -> int:
        """An existing regular file below the root, opened for writing."""
        try:
            with self._where(rel) as (dir_fd, rest):
                if len(rest) != 1:
                    raise FileNotFoundError(errno.ENOENT, "No such file or directory")
                fd = os.open(rest[0], _WRITE | flags, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # O_NONBLOCK on a FIFO nobody reads
                raise WriteError(f"/{rel}: a FIFO, not a regular file: refused", exc.errno) from None
            raise self._fail(rel, exc) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise WriteError(f"/{rel}: {kind_of(mode)}, not a regular file: refused", errno.EINVAL)
        return fd

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

    def file_meta(self, rel: str) -> dict[str, int] | None:
        """The :data:`META` of the regular file ``rel``; None where there is none."""
        try:
            with self._where(rel) as (dir_fd, rest):
                return _meta(dir_fd, rest[0]) if len(rest) == 1 else None
        except OSError:
            return None

    def replace_file(self, rel: str, text: str, meta: Mapping[str, Any] | None = None) -> None:
        """Write a whole configuration file atomically (temp file, then rename) with the mode
        and owner ``meta`` names (:data:`META`) -- by default the replaced file's own: a file
        someone made private stays private and theirs; a new one is 0644 and the writer's.
        ``text`` is the file's bytes as :data:`FILE_ENCODING` decoded them (byte for byte)."""
        try:
            with self._where(rel, create_dirs=True) as (dir_fd, rest):
                meta = meta or _meta(dir_fd, rest[0]) or {"mode": 0o644}
                owner = (meta["uid"], meta["gid"]) if "uid" in meta else None
                write_in(dir_fd, rest[0], text.encode(*FILE_ENCODING), mode=meta["mode"], owner=owner)
        except OSError as exc:
            raise self._fail(rel, exc) from None

    def remove_file(self, rel: str) -> None:
        """Remove a regular file topoagent created (absent already is fine)."""
        try:
            with self._where(rel) as (dir_fd, rest):
                if len(rest) != 1:
                    return
                st = os.stat(rest[0], dir_fd=dir_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise WriteError(f"/{rel}: {kind_of(st.st_mode)}, not a regular file: not removed", errno.EINVAL)
                os.unlink(rest[0], dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._fail(rel, exc) from None

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

        out = run_tool(["modprobe", *(["-r"] if remove else []), "--", module], timeout=60)
        if not out.ok:
            raise WriteError(f"modprobe {'-r ' if remove else ''}{module}: {out.error}")


def _meta(dir_fd: int, name: str) -> dict[str, int] | None:
    """The :data:`META` of ``name`` in ``dir_fd`` where it is a regular file (a link not followed)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return {"mode": st.st_mode & 0o777, "uid": st.st_uid, "gid": st.st_gid} if stat.S_ISREG(st.st_mode) else None
