"""Whole files written all or nothing: the one helper for every file topoagent writes itself
(``capture -o``, ``draw -o``, daemon exports, configuration files it installs, libvirt
backups).

The target's directory is opened once and everything after happens relative to that
descriptor: what is at the target is looked at without following a link, and only a regular
file (or nothing) may be replaced -- a device, FIFO, directory or symbolic link there is
refused (renaming over ``/dev/null`` would replace the device with a plain file).  The data
goes to a new temp file beside it (``O_EXCL|O_NOFOLLOW``: it never follows a planted link and
never clobbers a name), is fsynced and given its owner and mode, and is renamed over the target,
so a reader sees the old content or the new, never a torn one.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile

from topoagent.core.filekind import kind_of
from topoagent.core.write.beneath import DIR_FLAGS

__all__ = ["DEFAULT_STATE_DIR", "kind_of", "unlink_quietly", "untrusted", "write_atomically", "write_in", "write_new"]

#: Where topoagent keeps what it wrote itself: the undo journal, libvirt backups, the daemon's state.
DEFAULT_STATE_DIR = "/var/lib/topoagent"

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def untrusted(st: os.stat_result) -> str | None:
    """Why a file or directory of topoagent's own state (the journal, libvirt backups) must not
    be read back -- another user owns it, or group or others may write it, so someone else could
    have put words in topoagent's mouth -- or None when it is this user's own."""
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user ({os.geteuid()})"
    if st.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def write_new(directory: str, prefix: str, data: bytes, *, mode: int = 0o600) -> str:
    """``data`` in a new file of ``directory`` (named ``prefix…tmp``), fsynced, with ``mode``:
    its path.  Raises :class:`OSError`; nothing is left behind on failure."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        unlink_quietly(tmp)
        raise
    return tmp


def write_in(dir_fd: int, name: str, data: bytes, *, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    """Replace ``name`` in the directory ``dir_fd`` with ``data``, all or nothing, with ``mode``
    and ``owner`` (uid, gid; None: the writer's own).  Refuses (:class:`OSError`, one line in
    ``strerror``) anything at ``name`` but a regular file, and an owner it may not give."""
    if name in ("", ".", "..") or "/" in name:
        raise OSError(errno.EISDIR, "not a file name")
    _check_target(dir_fd, name)
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            _give(fd, owner)
            os.fchmod(fd, mode)  # after fchown, which clears set-user-ID and set-group-ID
            os.fsync(fd)
        finally:
            os.close(fd)
        _check_target(dir_fd, name)  # looked at again just before the rename
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:  # already renamed or gone
            pass
        raise
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    except OSError:  # some file systems cannot sync a directory: the data is synced already
        pass


def _give(fd: int, owner: tuple[int, int] | None) -> None:
    """Give the new file ``owner`` (only root may give a file away: chown(2))."""
    st = os.fstat(fd)
    if owner is None or owner == (st.st_uid, st.st_gid):
        return
    try:
        os.fchown(fd, *owner)
    except PermissionError:
        raise OSError(
            errno.EPERM, f"its owner {owner[0]}:{owner[1]} cannot be kept: refused (nothing written)"
        ) from None


def _check_target(dir_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EEXIST, f"{kind_of(st.st_mode)} is there, not a regular file: refused (nothing written)")


def write_atomically(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` all or nothing (:func:`write_in` in its directory).
    Raises :class:`OSError`."""
    directory, name = os.path.split(path)
    dir_fd = os.open(directory or ".", DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    try:
        write_in(dir_fd, name, data, mode=mode)
    finally:
        os.close(dir_fd)


def unlink_quietly(path: str) -> None:
    """Remove ``path``; gone already (or its directory) is fine."""
    try:
        os.unlink(path)
    except OSError:  # already gone, or the directory went away: nothing left to clean
        return
