"""The one reader: every host file topoagent reads goes through :class:`HostFS`.

A ``HostFS`` holds a root (``/`` on a live host, a fake or captured tree in tests and bug
reports) and owns it completely:

* every component of every path is resolved *inside* the root: relative and absolute symlink
  targets alike (absolute ones are re-rooted), ``..`` clamped at the root, so a capture whose
  ``numa_node`` links to ``/etc/passwd`` can never make the scan open the analyst's files;
* only regular files are read, opened non-blocking, so a FIFO or a device node in a hostile
  tree cannot stall or exhaust the scan; each read is bounded (:data:`ATTR_LIMIT` by default:
  a sysfs attribute is at most one page, and pages are at most 64 KiB on Linux);
* directories already resolved or listed are remembered, so walking a DGX-class tree costs
  about one ``readlink`` per directory rather than one per path component per file.

On the live root ``/`` the kernel resolves paths itself (nothing can escape ``/``) and a read
is three system calls: open, read, close.

A root may also be a :class:`~topoagent.core.tree.MemoryTree`, handed over as a value: a capture
archive's members held in memory (:mod:`topoagent.core.read.archive`), read by the same
resolution -- links re-rooted and clamped, only regular files read -- without a file being
written to disk.

Reads never raise for the ordinary failures of a host: an absent file is ``None`` (absence is
normal in sysfs), and anything else -- permission denied, an I/O error, bytes that are not
text, a symlink loop, a file too large or not a regular file -- is recorded as a
:class:`~topoagent.core.snapshot.ProbeError` with the host path and answered with ``None``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from topoagent.core.errors import TopoagentError
from topoagent.core.filekind import kind_of
from topoagent.core.snapshot import ProbeError, host_path
from topoagent.core.tree import MemoryTree, Root

__all__ = ["ATTR_LIMIT", "HostFS", "NotAHostTree"]

_MAX_LINK_HOPS = 40  # the kernel's own MAXSYMLINKS
#: The most one attribute read returns: sysfs attributes fit in a page (PAGE_SIZE is 4 KiB on
#: x86, up to 64 KiB on arm64/ppc64 kernels), procfs files we read are far smaller.
ATTR_LIMIT = 64 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class NotAHostTree(TopoagentError):
    """The root holds no sysfs tree at all: nothing can be scanned."""


class _Fail(Exception):
    """Internal: a path could not be resolved for a recorded reason."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


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


_ABSENT = (FileNotFoundError, NotADirectoryError)
_UNSEEN = "\0"  # a cache miss (None is a cached answer: absent); no path holds a NUL


def _refuse_special(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise _Fail(f"not a regular file ({kind_of(mode)})")


class HostFS:
    """Read host files below ``root`` (a directory, or a tree held in memory: its name is then
    the root); collect what could not be read.

    Paths are host paths relative to the root, written without the leading slash
    (``"sys/bus/pci/devices"``); :meth:`host_path` gives the form a person reads.
    """

    def __init__(self, root: Root | os.PathLike[str] = "/") -> None:
        self._tree = root if isinstance(root, MemoryTree) else None
        given = root.root if isinstance(root, MemoryTree) else os.path.abspath(os.fspath(root))
        self.root = given if self._tree is not None or not os.path.isdir(given) else os.path.realpath(given)
        self.errors: list[ProbeError] = []
        self._live = self.root == "/" and self._tree is None
        #: Real absolute paths known not to be links (directories, mostly): walked without a
        #: syscall.
        self._real_dirs: set[str] = {self.root}
        #: root-relative prefix as asked -> real absolute path (or None: absent).
        self._resolved: dict[str, str | None] = {}

    # -- naming -----------------------------------------------------------------------
    host_path = staticmethod(host_path)

    def record(self, rel: str, error: str) -> None:
        """Record a failed probe of ``rel`` (a host path relative to the root)."""
        self.errors.append(ProbeError(path=self.host_path(rel), error=error))

    # -- resolution -------------------------------------------------------------------
    def _rel_of(self, real: str) -> str:
        return "" if real == self.root else real[len(self.root) :].lstrip("/")

    def _walk(self, start: str, parts: list[str], follow_last: bool) -> str | None:
        """Resolve path components inside the root, from ``start`` (a real directory inside it);
        the real absolute path, None when absent.

        Raises :class:`_Fail` for a loop or an unreadable component.
        """
        real = start
        root, known = self.root, self._real_dirs
        hops = 0
        todo = parts[::-1]
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if real != root:
                    real = real.rpartition("/")[0] or "/"  # clamped at the root
                continue
            candidate = (real if real != "/" else "") + "/" + part
            if candidate in known:
                real = candidate
                continue
            if not todo and not follow_last:
                return candidate
            try:
                target = self._readlink(candidate)
            except _ABSENT:
                return None
            except OSError as exc:
                if exc.errno == errno.EINVAL:  # not a link: never ask again
                    known.add(candidate)
                    real = candidate
                    continue
                raise _Fail(_describe(exc)) from None
            hops += 1
            if hops > _MAX_LINK_HOPS:
                raise _Fail("symlink loop")
            if target.startswith("/"):
                real = root  # re-root absolute targets
            todo.extend(target.split("/")[::-1])
        return real

    def _prefix(self, head: str) -> str | None:
        """The real directory of a root-relative directory path (cached; None: absent).

        Resolution starts from the nearest ancestor already resolved, so the hundreds of
        sibling directories a scan reads (IOMMU groups, class devices) cost one component each.
        """
        resolved = self._resolved
        real = resolved.get(head, _UNSEEN)
        if real is not _UNSEEN:
            return real
        start, rest, base = self.root, [], head
        while base:
            base, _, last = base.rpartition("/")
            rest.append(last)
            if base:
                ancestor = resolved.get(base, _UNSEEN)
                if ancestor is None:  # below an absent directory: absent too
                    resolved[head] = None
                    return None
                if ancestor is not _UNSEEN:
                    start = ancestor
                    break
        real = self._walk(start, rest[::-1], True) if head else self.root
        if real is not None:
            self._real_dirs.add(real)
        resolved[head] = real
        return real

    def _real(self, rel: str, *, follow_last: bool = True) -> str | None:
        """The real absolute path of ``rel`` inside the root (None: absent).  Raises _Fail."""
        rel = rel.strip("/")
        if self._live:
            return "/" + rel  # the kernel resolves it on use; nothing escapes "/"
        head, _, last = rel.rpartition("/")
        prefix = self._prefix(head)
        if prefix is None:
            return None
        if last not in ("", ".", ".."):  # the common case, without a walk
            candidate = prefix + "/" + last
            if not follow_last or candidate in self._real_dirs:
                return candidate
        return self._walk(prefix, [last], follow_last)

    def _open_prefix(self, rel: str) -> str | None:
        """The path to hand to ``open``: on the live root the kernel resolves it; elsewhere the
        directory part is resolved inside the root and the last component is opened with
        O_NOFOLLOW (a link there is resolved by :meth:`_real` first)."""
        rel = rel.strip("/")
        if self._live:
            return "/" + rel
        head, _, last = rel.rpartition("/")
        prefix = self._prefix(head)
        if prefix is None:
            return None
        if last in ("", ".", ".."):  # never handed to open as is: "<root>/.." is outside it
            return self._walk(prefix, [last], True)
        return prefix + "/" + last

    # -- checks -----------------------------------------------------------------------
    # -- the file system: the disk, or a tree in memory --------------------------------------
    def _readlink(self, path: str) -> str:
        return self._tree.readlink(path) if self._tree is not None else os.readlink(path)

    def _lexists(self, path: str) -> bool:
        return self._tree.lexists(path) if self._tree is not None else os.path.lexists(path)

    def _isdir(self, path: str) -> bool:
        return self._tree.isdir(path) if self._tree is not None else os.path.isdir(path)

    def _entries(self, path: str) -> dict[str, bool]:
        """A directory's entries: name -> whether it is a directory (no link)."""
        if self._tree is not None:
            return self._tree.entries(path)
        with os.scandir(path) as entries:
            return {e.name: e.is_dir(follow_symlinks=False) for e in entries}

    def require_sysfs(self) -> None:
        """Raise :class:`NotAHostTree` unless the root looks like a Linux host tree.  A tree in
        memory's notes (what its archive held oddly) are recorded here: once, by the scan."""
        if self._tree is not None:
            if not self.isdir("sys/devices") and not self.isdir("sys/bus/pci/devices"):
                raise NotAHostTree(f"{self.root}: not a sysfs tree (no sys/devices or sys/bus/pci/devices in it)")
            for rel, why in self._tree.notes:
                self.record(rel, why)
            return
        if not os.path.exists(self.root):
            raise NotAHostTree(f"{self.root}: no such directory")
        if not os.path.isdir(self.root):
            raise NotAHostTree(f"{self.root}: not a directory")
        if not self.isdir("sys/devices") and not self.isdir("sys/bus/pci/devices"):
            raise NotAHostTree(f"{self.root}: not a sysfs tree (no sys/devices or sys/bus/pci/devices below it)")

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists (a dangling link counts: it is there, leading nowhere)."""
        try:
            real = self._real(rel, follow_last=False)
        except _Fail:
            return True  # a link that loops is there
        return real is not None and self._lexists(real)

    def isdir(self, rel: str) -> bool:
        """Whether ``rel`` resolves to a directory inside the root."""
        try:
            real = self._real(rel)
        except _Fail:
            return False
        return real is not None and self._isdir(real)

    # -- reads ------------------------------------------------------------------------
    def _read(self, rel: str, path: str, limit: int, *, quiet: bool, truncate: bool) -> bytes | None:
        """Read ``path`` (``rel``'s directory already resolved): a regular file, at most
        ``limit`` bytes (or its first ``limit`` with ``truncate``); failures recorded."""
        if self._tree is not None:
            return self._read_tree(rel, path, limit, quiet=quiet, truncate=truncate)
        try:
            checked = self._live and rel.startswith(("sys/", "proc/"))  # sysfs and procfs hold no FIFOs or devices
            target: str | None = path if checked else self._regular(rel, path)
            if target is None:
                return None
            fd = os.open(target, _OPEN_FLAGS | (0 if self._live else _NOFOLLOW))
            try:
                size = None
                if not checked:  # checked again on the descriptor: the name may have changed since
                    st = os.fstat(fd)
                    _refuse_special(st.st_mode)
                    size = st.st_size
                data = _read_bounded(fd, limit, size)
            finally:
                os.close(fd)
        except _ABSENT:
            return None
        except _Fail as exc:
            if not quiet:
                self.record(rel, exc.why)
            return None
        except (OSError, ValueError) as exc:
            if not quiet:
                self.record(rel, _describe(exc))
            return None
        return self._within(rel, data, limit, quiet=quiet, truncate=truncate)

    def _read_tree(self, rel: str, path: str, limit: int, *, quiet: bool, truncate: bool) -> bytes | None:
        """:meth:`_read` of a tree in memory: a link at the last component resolved inside the
        root, then the regular file's bytes (at most ``limit``, or its first ``limit``)."""
        assert self._tree is not None
        try:
            if path in self._tree.links:
                real = self._real(rel)
                if real is None:
                    return None
                path = real
            data = self._tree.read(path)
        except _ABSENT:
            return None
        except (_Fail, IsADirectoryError) as exc:
            if not quiet:
                self.record(rel, exc.why if isinstance(exc, _Fail) else f"not a regular file ({kind_of(stat.S_IFDIR)})")
            return None
        return self._within(rel, data, limit, quiet=quiet, truncate=truncate)

    def _within(self, rel: str, data: bytes, limit: int, *, quiet: bool, truncate: bool) -> bytes | None:
        """``data`` read from ``rel`` if it is within ``limit`` bytes, its first ``limit`` with
        ``truncate``; else None, recorded (unless ``quiet``)."""
        if len(data) <= limit:
            return data
        if truncate:
            return data[:limit]
        if not quiet:
            self.record(rel, f"larger than {limit} bytes: not a sysfs attribute")
        return None

    def _regular(self, rel: str, path: str) -> str | None:
        """The path to open for ``rel`` once ``lstat`` shows a regular file there (a last
        component that is a link resolved inside the root); anything else raises before it is
        opened: opening a device node can act (``/dev/watchdog`` arms a hardware watchdog:
        the kernel's Documentation/watchdog/watchdog-api.rst), a capture or a fake root may hold
        one, and a FIFO may block."""
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) and not self._live:
            real = self._real(rel)  # the last component is a link: resolve it inside the root
            if real is None:
                return None
            path, st = real, os.lstat(real)
        elif stat.S_ISLNK(st.st_mode):
            st = os.stat(path)
        _refuse_special(st.st_mode)
        return path

    def _decode(self, rel: str, data: bytes | None, truncate: bool = False) -> str | None:
        """Bytes read from ``rel`` as stripped UTF-8 text; text that is not UTF-8 is recorded
        (a truncated read may have cut a character: that is ignored)."""
        if data is None:
            return None
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            if truncate:
                return data.decode("utf-8", "ignore").strip()
            self.record(rel, _describe(exc))
            return None

    def text(self, rel: str, *, limit: int = ATTR_LIMIT, quiet: bool = False, truncate: bool = False) -> str | None:
        """The file's text, stripped; ``None`` when absent or unreadable (recorded).

        ``quiet`` skips recording for files whose read fails in normal operation (a down
        interface's ``speed`` answers EINVAL).  ``truncate`` keeps the first ``limit`` bytes of
        a larger file instead of refusing it (``/proc/cpuinfo``: the first CPU says enough).
        """
        return self._decode(rel, self.bytes(rel, limit=limit, quiet=quiet, truncate=truncate), truncate)

    def texts(self, directory: str, names: tuple[str, ...]) -> dict[str, str | None]:
        """Several attribute files of one directory, as :meth:`text` reads each, with the
        directory resolved once (a PCI function's ids, NUMA node and CPUs in one go)."""
        try:
            prefix = self._open_prefix(directory + "/x")
        except _Fail:
            prefix = None
        if prefix is None:  # unresolvable directory: let text() record why, file by file
            return {name: self.text(f"{directory}/{name}") for name in names}
        base = prefix[:-1]
        out: dict[str, str | None] = {}
        for name in names:
            rel = f"{directory}/{name}"
            out[name] = self._decode(rel, self._read(rel, base + name, ATTR_LIMIT, quiet=False, truncate=False))
        return out

    def texts_below(self, rel: str, name: str, keep: Callable[[str], bool]) -> dict[str, str | None]:
        """The file ``name`` in each entry of the directory ``rel`` that ``keep`` accepts, by
        entry (sorted), as :meth:`text` reads each: one listing, and no walk for entries the
        listing showed to be plain directories (the thousand IOMMU groups of an SR-IOV host)."""
        out: dict[str, str | None] = {}
        entries = [e for e in self.listdir(rel) if keep(e)]
        try:
            real = None if self._live else self._real(rel)
        except _Fail:
            real = None
        for entry in entries:
            path = f"{real}/{entry}" if real is not None else None
            if path is not None and path in self._real_dirs:
                file_rel = f"{rel}/{entry}/{name}"
                out[entry] = self._decode(
                    file_rel, self._read(file_rel, f"{path}/{name}", ATTR_LIMIT, quiet=False, truncate=False)
                )
            else:
                out[entry] = self.text(f"{rel}/{entry}/{name}")
        return out

    def bytes(self, rel: str, *, limit: int = ATTR_LIMIT, quiet: bool = False, truncate: bool = False) -> bytes | None:
        """The file's raw bytes (at most ``limit``); ``None`` when absent or unreadable."""
        try:
            path = self._open_prefix(rel)
        except _Fail as exc:
            if not quiet:
                self.record(rel, exc.why)
            return None
        return None if path is None else self._read(rel, path, limit, quiet=quiet, truncate=truncate)

    def listdir(self, rel: str) -> list[str]:
        """Sorted entries of a directory; ``[]`` when absent or unreadable (recorded)."""
        try:
            real = self._real(rel)
            if real is None:
                return []
            entries = self._entries(real)
            if not self._live:
                # The directory entry's type comes free with the listing: a subdirectory that
                # is no link needs no readlink when a later path walks through it.
                base = real if real != "/" else ""
                self._real_dirs.update(f"{base}/{name}" for name, is_dir in entries.items() if is_dir)
            return sorted(entries)
        except _ABSENT:
            return []
        except _Fail as exc:
            self.record(rel, exc.why)
            return []
        except OSError as exc:
            self.record(rel, _describe(exc))
            return []

    def names(self, rel: str) -> frozenset[str] | None:
        """A directory's entries, unsorted; None when it cannot be listed (nothing recorded:
        for a caller deciding which optional files to read, not for what a scan reports)."""
        try:
            real = self._real(rel)
            return None if real is None else frozenset(self._entries(real))
        except (_Fail, OSError):
            return None

    def link_name(self, rel: str) -> str | None:
        """The last component of a symlink's target (``driver`` -> ``"nvidia"``)."""
        try:
            real = self._real(rel, follow_last=False)
            if real is None:
                return None
            target = self._readlink(real)
        except _ABSENT:
            return None
        except _Fail as exc:
            self.record(rel, exc.why)
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # not a symlink: some captures copy directories
                return None
            self.record(rel, _describe(exc))
            return None
        name = target.rstrip("/").rsplit("/", 1)[-1]
        return name or None

    def link_target(self, rel: str) -> str | None:
        """Where the symlink ``rel`` points, as a root-relative path normalised as text (``..``
        clamped at the root), its components not resolved; None when ``rel`` is no symlink,
        is absent, or cannot be read (nothing recorded: callers fall back to :meth:`resolve`).

        One ``readlink`` and no ``open``: nothing outside the root is touched, whatever the
        target says.
        """
        try:
            real = self._real(rel, follow_last=False)
            if real is None:
                return None
            target = self._readlink(real)
        except (_Fail, OSError):
            return None
        base = "" if target.startswith("/") else self._rel_of(real.rpartition("/")[0])
        rest = target.lstrip("/")
        while rest.startswith("../"):  # a sysfs class link climbs, then names plain directories
            base, rest = base.rpartition("/")[0], rest[3:]
        probe = f"/{rest}/"
        if "//" in probe or "/./" in probe or "/../" in probe:
            parts = base.split("/") if base else []  # anything else, component by component
            for part in rest.split("/"):
                if part == "..":
                    if parts:
                        parts.pop()
                elif part not in ("", "."):
                    parts.append(part)
            return "/".join(parts)
        return f"{base}/{rest}" if base else rest

    def resolve(self, rel: str) -> str | None:
        """Resolve ``rel`` through its symlinks, inside the root.

        Returns the resolved host path relative to the root, or ``None`` when a component is
        missing or the links loop (the loop is recorded).
        """
        head, _, last = rel.strip("/").rpartition("/")
        try:
            prefix = self._prefix(head)
            real = None if prefix is None else self._walk(prefix, [last], True)
        except _Fail as exc:
            self.record(rel, exc.why)
            return None
        if real is None:
            return None
        rel_real = self._rel_of(real)
        self._resolved.setdefault(rel_real, real)  # reads below it will start from here
        return rel_real


def _read_bounded(fd: int, limit: int, size: int | None = None) -> bytes:
    """At most ``limit + 1`` bytes (one more than allowed tells the caller it was too large),
    in one ``read``: the kernel fills a sysfs attribute's whole page at once.  A regular file
    of ``size`` bytes (``fstat``) whose first read came back short -- read(2) may return fewer
    bytes than asked (a network or FUSE file system, a signal) -- is read on to its end or the
    limit, so a short read never truncates it (a fix's undo copy: :func:`~topoagent.core.read.kernel.file_text`)."""
    want = limit + 1
    data = os.read(fd, want)
    if size is None or not data or len(data) >= min(size, want):
        return data  # the common case: one read, no extra call to see the end
    chunks = [data]
    got = len(data)
    while got < want:
        chunk = os.read(fd, min(want - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
