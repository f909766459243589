"""Whole files written all or nothing: the one helper for the files topoagent writes itself
(daemon exports, configuration files it installs, libvirt backups).

A new file is made with :func:`tempfile.mkstemp` in the target's own directory (it never
follows a planted link and never clobbers an existing name), written, fsynced and given its
mode; :func:`write_atomically` then renames it over the target, so a reader sees the old
content or the new, never a torn one.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["unlink_quietly", "write_atomically", "write_new"]


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


def write_atomically(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` all or nothing (a dot-named temp file beside it, then a
    rename).  Raises :class:`OSError`."""
    directory, name = os.path.split(os.path.abspath(path))
    tmp = write_new(directory, f".{name}.", data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise


def unlink_quietly(path: str) -> None:
    """Remove ``path``; gone already (or its directory) is fine."""
    try:
        os.unlink(path)
    except OSError:  # already gone, or the directory went away: nothing left to clean
        return
