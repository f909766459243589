"""What a file that is not a regular one is, in words, for the one line that refuses it: the
reader (a special file in a root or an input) and the writer (something in the way) both say it."""

from __future__ import annotations

import stat

__all__ = ["kind_of"]

_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


def kind_of(mode: int) -> str:
    """``a FIFO``, ``a directory``…: what a non-regular file is, for a refusal."""
    return _KINDS.get(stat.S_IFMT(mode), "a special file")
