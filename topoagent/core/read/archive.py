"""Unpack capture tarballs for ``--root`` (``topoagent capture`` packs them: :mod:`topoagent.features.capture.pack`).

:func:`unpack_capture` and :func:`resolve_root`: ``--root`` accepts a
capture tarball (or its unpacked directory); the tarball is untrusted input and is unpacked
with every member checked (no absolute names, no ``..``, no devices, FIFOs or hard links, no
link that resolves outside the capture, size caps).
"""

from __future__ import annotations

import atexit
import bz2
import gzip
import io
import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import zlib

from topoagent.core.errors import InputError

__all__ = [
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "CaptureError",
    "replay_root",
    "resolve_root",
    "unpack_capture",
]

# Unpacking limits: a capture of the largest host is a few MB.
MAX_MEMBERS = 200_000
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024


class CaptureError(InputError):
    """A capture tarball that cannot be (safely) unpacked."""


def _inside(base: str, path: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _member_name(name: str) -> str:
    if "\x00" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise CaptureError(f"member {name!r}: absolute name")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise CaptureError(f"member {name!r}: '..' in the name")
    return "/".join(parts)


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
#: errors, and the recursion of tarfile's header chains.
_UNPACK_ERRORS = (OSError, EOFError, tarfile.TarError, RecursionError)


def unpack_capture(path: str, dest: str | None = None) -> str:
    """Unpack a capture tarball into ``dest`` (a new temporary directory when None) and return
    the directory to use as ``--root``.

    Refuses (with :class:`CaptureError`, nothing left behind): absolute names, ``..``,
    device files, FIFOs, hard links, links whose target is absolute or resolves outside the
    capture, members under a link, more than :data:`MAX_MEMBERS` members, a member over
    :data:`MAX_MEMBER_BYTES` or a total over :data:`MAX_TOTAL_BYTES`.  Links are created last, so
    nothing is ever written through one.
    """
    stream, tar = _open_tarball(path)
    created = dest is None
    out = os.path.realpath(dest or tempfile.mkdtemp(prefix="topoagent-capture-"))
    try:
        with stream, tar:
            dirs, files, links = _checked_members(tar, path)
            _refuse_under_links(dirs, files, links)
            _write_members(tar, out, dirs, files, links)
    except (CaptureError, *_UNPACK_ERRORS, zlib.error, lzma.LZMAError) as exc:
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
    except (CaptureError, *_UNPACK_ERRORS, zlib.error, lzma.LZMAError) as exc:
        if stream is not None:
            stream.close()
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: not a capture tarball ({exc})") from None


_Members = tuple[list[str], list[tuple[str, tarfile.TarInfo]], list[tuple[str, str]]]


def _checked_members(tar: tarfile.TarFile, path: str) -> _Members:
    """The directories, regular files and links of the tarball, each name and size checked;
    anything else is refused."""
    files: list[tuple[str, tarfile.TarInfo]] = []
    dirs: list[str] = []
    links: list[tuple[str, str]] = []
    total = count = 0
    for member in tar:
        count += 1
        if count > MAX_MEMBERS:
            raise CaptureError(f"{path}: more than {MAX_MEMBERS} members")
        name = _member_name(member.name)
        if not name:
            continue
        if member.isreg():
            if member.size > MAX_MEMBER_BYTES:
                raise CaptureError(f"member {name!r}: larger than {MAX_MEMBER_BYTES} bytes")
            total += member.size
            if total > MAX_TOTAL_BYTES:
                raise CaptureError(f"{path}: more than {MAX_TOTAL_BYTES} bytes unpacked")
            files.append((name, member))
        elif member.isdir():
            dirs.append(name)
        elif member.issym():
            links.append((name, _link_target(name, member.linkname)))
        else:
            raise CaptureError(f"member {name!r}: not a regular file, directory or symbolic link")
    return dirs, files, links


def _link_target(name: str, target: str) -> str:
    """A link member's target, refused when absolute or leading outside the capture."""
    if not target or target.startswith("/") or "\x00" in target:
        raise CaptureError(f"member {name!r}: link to an absolute path")
    if posixpath.normpath(posixpath.join(posixpath.dirname(name), target)).startswith(".."):
        raise CaptureError(f"member {name!r}: link leads outside the capture")
    return target


def _refuse_under_links(
    dirs: list[str], files: list[tuple[str, tarfile.TarInfo]], links: list[tuple[str, str]]
) -> None:
    """Refuse a member whose path goes through one of the links."""
    link_names = {n for n, _ in links}
    for name in [*dirs, *(n for n, _ in files), *link_names]:
        parent = posixpath.dirname(name)
        while parent:
            if parent in link_names:
                raise CaptureError(f"member {name!r}: lies under the link {parent!r}")
            parent = posixpath.dirname(parent)


def _write_members(
    tar: tarfile.TarFile,
    out: str,
    dirs: list[str],
    files: list[tuple[str, tarfile.TarInfo]],
    links: list[tuple[str, str]],
) -> None:
    """Create the checked members under ``out``: directories, files, then links (so nothing is
    written through a link), then check where chains of links resolve."""
    for name in dirs:
        os.makedirs(os.path.join(out, name), mode=0o755, exist_ok=True)
    for name, member in files:
        full = os.path.join(out, name)
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        src = tar.extractfile(member)
        if src is None:
            raise CaptureError(f"member {name!r}: unreadable")
        data = src.read(MAX_MEMBER_BYTES + 1)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    for name, target in links:
        full = os.path.join(out, name)
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        if os.path.lexists(full):
            raise CaptureError(f"member {name!r}: listed twice")
        os.symlink(target, full)
    for name, _ in links:  # chains of links checked on the real tree
        if not _inside(out, os.path.realpath(os.path.join(out, name))):
            raise CaptureError(f"member {name!r}: link leads outside the capture")


def _capture_root(directory: str) -> str:
    """The directory holding ``sys/``: ``directory`` itself or its one subdirectory."""
    if os.path.isdir(os.path.join(directory, "sys")):
        return directory
    subs = [e.path for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    if len(subs) == 1 and os.path.isdir(os.path.join(subs[0], "sys")):
        return subs[0]
    return directory


_UNPACKED: dict[tuple[str, int, int], str] = {}


def resolve_root(root: str) -> str:
    """``--root`` as a directory: a capture tarball is unpacked (once per process, into a
    temporary directory removed at exit); a directory is returned as is, or its one
    subdirectory holding ``sys/`` (a tarball unpacked by hand).  Anything else is returned
    unchanged for the scan to judge.  Raises :class:`CaptureError` for a tarball that cannot be
    unpacked safely."""
    try:
        st = os.stat(root)
    except OSError:
        return root
    if stat.S_ISDIR(st.st_mode):
        return _capture_root(root)
    if not stat.S_ISREG(st.st_mode):
        return root
    key = (os.path.realpath(root), st.st_size, st.st_mtime_ns)
    if key not in _UNPACKED:
        tmp = tempfile.mkdtemp(prefix="topoagent-capture-")
        atexit.register(shutil.rmtree, tmp, True)
        _UNPACKED[key] = unpack_capture(root, tmp)
    return _UNPACKED[key]


def replay_root(root: str) -> tuple[str, str | None]:
    """``root`` as :func:`resolve_root` makes it a directory to read, and what reports should
    call the root: the archive's own path when ``root`` is a capture archive (unpacked into a
    temporary directory nobody asked to see), else None (the directory read is the root)."""
    resolved = resolve_root(root)
    shown = os.path.realpath(root) if resolved != root and os.path.isfile(root) else None
    return resolved, shown
