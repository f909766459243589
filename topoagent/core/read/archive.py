"""Read capture tarballs for ``--root`` (``topoagent capture`` packs them: :mod:`topoagent.features.capture.pack`).

:func:`resolve_root`: ``--root`` accepts a capture tarball (or its unpacked directory).  The
tarball is read into memory (:func:`load_capture`: a :class:`~topoagent.core.tree.MemoryTree`
named by the archive's own path, handed to the reader as a value), never written out: a DGX capture's 3,000 files cost a
tenth of a second to hold where unpacking them cost seconds (issue 32: a DGX capture replayed 10x
slower than its directory), and nothing lands on disk, so no member can land outside it.  The
reader then resolves every link inside the root as it does for a directory.
:func:`unpack_capture` still unpacks one to a directory for a person, with tarfile's ``data``
filter (PEP 706).  Both read the tarball, untrusted input, through the same checks: size and
member-count caps, no hard links, no member at or under a symbolic link, no special files.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import platform
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable

from topoagent.core.errors import InputError
from topoagent.core.tree import MemoryTree, Root

__all__ = [
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "CaptureError",
    "load_capture",
    "resolve_root",
    "unpack_capture",
]

# Unpacking limits: a capture of the largest host is a few MB.
MAX_MEMBERS = 200_000
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024


class CaptureError(InputError):
    """A capture tarball that cannot be (safely) unpacked."""


class _CappedStream(io.RawIOBase):
    """A tarball's bytes, decompressed where it is gzip, bzip2 or xz (what tarfile's ``r:*``
    reads), with a cap on what tarfile may read.

    tarfile reads a PAX or GNU long-name header whole, at whatever size the header declares,
    and follows a chain of them by recursion, all before it yields a member that
    :func:`unpack_capture` could check: without the cap a 500 KB gzip of zeros declaring one
    such header takes 500 MB of memory.  So no read may exceed what one member may hold, and
    nothing is read or skipped past the members' bytes plus their headers.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        # The file is opened once: the magic is peeked from it and the decompressor reads it.
        self.raw: io.BufferedReader = open(path, "rb")  # noqa: SIM115  closed by close()
        magic = self.raw.peek(6)[:6]
        self.stream: io.BufferedIOBase
        if magic.startswith(b"\x1f\x8b"):
            self.stream = gzip.GzipFile(fileobj=self.raw, mode="rb")
        elif magic.startswith(b"BZh"):
            self.stream = bz2.BZ2File(self.raw, "rb")
        elif magic.startswith(b"\xfd7zXZ\x00"):
            self.stream = lzma.LZMAFile(self.raw, "rb")  # noqa: SIM115  closed by close()
        else:
            self.stream = self.raw
        self.path = path
        # Each member: its header, a PAX header for a long name, its data's padding.
        self.limit = MAX_TOTAL_BYTES + (MAX_MEMBERS + 1) * 4 * tarfile.BLOCKSIZE

    def _check(self, end: int) -> None:
        if end > self.limit:
            raise CaptureError(f"{self.path}: more than {self.limit} bytes of members and headers")

    def read(self, size: int = -1, /) -> bytes:
        if size < 0 or size > MAX_MEMBER_BYTES + tarfile.BLOCKSIZE:
            raise CaptureError(f"{self.path}: a header or member larger than {MAX_MEMBER_BYTES} bytes")
        self._check(self.stream.tell() + size)
        return self.stream.read(size)

    def seek(self, pos: int, whence: int = io.SEEK_SET, /) -> int:
        self._check(pos if whence == io.SEEK_SET else self.stream.tell() + pos)
        return self.stream.seek(pos, whence)

    def tell(self) -> int:
        return self.stream.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self.stream.close()
        self.raw.close()  # a decompressor given a file object leaves it open
        super().close()


#: What reading a hostile or broken tarball can raise besides :class:`CaptureError`: decompressor
#: errors, the data filter's refusals (``tarfile.FilterError`` is a ``TarError``), the recursion
#: of tarfile's header chains, and a name holding a NUL (``ValueError`` from the path functions).
_UNPACK_ERRORS = (OSError, EOFError, tarfile.TarError, RecursionError, ValueError, zlib.error, lzma.LZMAError)


def unpack_capture(path: str, dest: str | None = None) -> str:
    """Unpack a capture tarball into ``dest`` (a new temporary directory when None) and return
    the directory to use as ``--root``.

    Refuses (with :class:`CaptureError`, nothing left behind): whatever tarfile's ``data``
    filter refuses (a member or link that would land outside the destination, a link to an
    absolute path, device files and FIFOs), hard links, a member at or under a symbolic link,
    more than :data:`MAX_MEMBERS` members, a member over :data:`MAX_MEMBER_BYTES` or a total
    over :data:`MAX_TOTAL_BYTES`; and every tarball on a Python whose tarfile has no data
    filter.
    """
    if not hasattr(tarfile, "data_filter"):
        raise CaptureError(
            f"{path}: cannot unpack a capture safely with Python {platform.python_version()}: "
            "it needs tarfile's data filter (PEP 706: Python 3.10.12, 3.11.4, 3.12 or later)"
        )
    stream, tar = _open_tarball(path)
    created = dest is None
    out = os.path.realpath(dest or tempfile.mkdtemp(prefix="topoagent-capture-"))
    try:
        with stream, tar:
            members = _checked_members(tar, path)
            tar.extractall(out, members=members, filter="data")
    except (CaptureError, *_UNPACK_ERRORS) as exc:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: cannot unpack: {exc}") from None
    return _capture_root(out)


def _open_tarball(path: str) -> tuple[_CappedStream, tarfile.TarFile]:
    """The capped stream of ``path`` and the tarfile reading it; :class:`CaptureError` when
    the file is no tarball (the stream closed)."""
    stream = None
    try:
        stream = _CappedStream(path)
        return stream, tarfile.open(fileobj=stream, mode="r:")
    except (CaptureError, *_UNPACK_ERRORS) as exc:
        if stream is not None:
            stream.close()
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: not a capture tarball ({exc})") from None


def _checked_members(
    tar: tarfile.TarFile, path: str, each: Callable[[tarfile.TarInfo], None] | None = None
) -> list[tarfile.TarInfo]:
    """Every member that names something below the root, read through once, with the checks
    the data filter does not make: the count and size caps, no hard link, and nothing written
    at or through a symbolic link.

    The filter asks only where each path resolves when its member is extracted, and has been
    bypassed through chains of links and through the hard-link fallback (python/cpython
    gh-135034, gh-149486, gh-151558); a capture holds no hard link and never needs to write
    through a link, so refusing both closes those paths whatever the Python.  A member whose
    name has no component (``./``, an empty name) names the root itself and is left out.
    ``each`` is called with every member kept, as it is read (its data is next in the stream).
    """
    members: list[tarfile.TarInfo] = []
    total = 0
    for count, member in enumerate(tar, 1):
        if count > MAX_MEMBERS:
            raise CaptureError(f"{path}: more than {MAX_MEMBERS} members")
        if member.islnk():
            raise CaptureError(f"member {member.name!r}: a hard link (a capture holds none)")
        if member.isreg():
            if member.size > MAX_MEMBER_BYTES:
                raise CaptureError(f"member {member.name!r}: larger than {MAX_MEMBER_BYTES} bytes")
            total += member.size
            if total > MAX_TOTAL_BYTES:
                raise CaptureError(f"{path}: more than {MAX_TOTAL_BYTES} bytes unpacked")
        if _parts(member.name):
            members.append(member)
            if each is not None:
                each(member)
    _refuse_through_links(members)
    return members


def _parts(name: str) -> list[str]:
    """A member name's components as extraction walks them (the data filter strips a leading
    ``/``; ``.`` and empty components name nothing)."""
    return [p for p in name.split("/") if p not in ("", ".")]


def _refuse_through_links(members: list[tarfile.TarInfo]) -> None:
    """Refuse a member whose path goes through one of the link members, or that names a link
    member again."""
    links = {"/".join(_parts(m.name)) for m in members if m.issym()}
    seen: set[str] = set()
    for member in members:
        parts = _parts(member.name)
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in links:
                raise CaptureError(f"member {member.name!r}: lies under the link {'/'.join(parts[:i])!r}")
        name = "/".join(parts)
        if name in links and name in seen:
            raise CaptureError(f"member {member.name!r}: listed twice, once as a link")
        seen.add(name)


def load_capture(path: str) -> MemoryTree:
    """A capture tarball's members in memory, as the tree below its root (the directory holding
    ``sys/``: the archive's top, or its one top-level directory), named by the archive's real
    path.  Refuses, with :class:`CaptureError`, what :func:`unpack_capture` refuses: a hard
    link, a member at or under a symbolic link, a device file or FIFO, a name with a ``..``
    component, and the count and size caps.  What no file system holds -- one path twice, a
    file that is a directory too -- is read and said (the tree's ``notes``)."""
    stream, tar = _open_tarball(path)
    name = os.path.realpath(path)
    tree = MemoryTree(name)
    data: dict[str, bytes] = {}

    def keep(m: tarfile.TarInfo) -> None:
        # Read while the stream is at its data (no seeking back through the decompressor); a
        # regular member is stored whole (sparse members are GNU tar's, never a capture's).
        if m.isreg():
            if m.issparse():
                raise CaptureError(f"member {m.name!r}: a sparse file (a capture holds none)")
            stream.seek(m.offset_data)
            data[m.name] = stream.read(m.size)

    try:
        with stream, tar:
            members = _checked_members(tar, path, keep)
        top = _top(members)
        for m in members:
            _add_member(tree, m, data.get(m.name, b""), top)
        twice = Counter("/".join(_parts(m.name)[top:]) for m in members if not m.isdir())
        tree.notes = sorted(
            [(rel, "in the capture twice: the last copy is read") for rel, n in twice.items() if n > 1]
            + [
                (p[len(name) + 1 :], "both a file and a directory in the capture")
                for p in tree.files.keys() & tree.dirs
            ]
        )
    except (CaptureError, *_UNPACK_ERRORS) as exc:
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: cannot read: {exc}") from None
    return tree


def _top(members: list[tarfile.TarInfo]) -> int:
    """How many leading components to drop: 1 where everything is below one directory that
    holds ``sys/`` (a capture made by hand with ``tar czf x.tar.gz host/``), else 0."""
    firsts = {_parts(m.name)[0] for m in members}
    if len(firsts) == 1:
        (only,) = firsts
        if any(_parts(m.name)[:2] == [only, "sys"] for m in members):
            return 1
    return 0


def _add_member(tree: MemoryTree, member: tarfile.TarInfo, data: bytes, top: int) -> None:
    parts = _parts(member.name)
    if ".." in parts:
        raise CaptureError(f"member {member.name!r}: a name that climbs out of the capture")
    rel = "/".join(parts[top:])
    if member.isdir():
        tree.add_dir(rel)
    elif member.issym():
        tree.add_link(rel, member.linkname)
    elif member.isreg():
        tree.add_file(rel, data)
    else:
        raise CaptureError(f"member {member.name!r}: not a regular file, directory or symbolic link")


def _capture_root(directory: str) -> str:
    """The directory holding ``sys/``: ``directory`` itself or its one subdirectory."""
    if os.path.isdir(os.path.join(directory, "sys")):
        return directory
    subs = [e.path for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    if len(subs) == 1 and os.path.isdir(os.path.join(subs[0], "sys")):
        return subs[0]
    return directory


def resolve_root(root: str) -> Root:
    """``--root`` as a root :class:`~topoagent.core.hostfs.HostFS` reads: a capture tarball read
    into memory (:func:`load_capture`; the tree is the caller's, and goes when it lets go of it),
    a directory as is, or its one subdirectory holding ``sys/`` (a tarball unpacked by hand).
    Anything else is returned unchanged for the scan to judge.  Raises :class:`CaptureError`
    for a tarball that cannot be read safely."""
    try:
        st = os.stat(root)
    except OSError:
        return root
    if stat.S_ISDIR(st.st_mode):
        return _capture_root(root)
    return load_capture(root) if stat.S_ISREG(st.st_mode) else root
