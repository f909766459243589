"""A host tree held in memory, and the roots a reader reads: a directory by its path, or such a tree.

A capture archive's members are read into a :class:`MemoryTree`
(:func:`topoagent.core.read.archive.load_capture`), which travels as a value -- in
:class:`~topoagent.core.inputs.Inputs`, to :class:`~topoagent.core.hostfs.HostFS` -- to whoever
reads it: no registry names it, so two scans never share or lose one.
"""

from __future__ import annotations

import errno
import os

__all__ = ["MemoryTree", "Root", "is_this_host", "root_name"]


class MemoryTree:
    """A host tree held in memory: regular files, directories and symbolic links by absolute
    path below ``root`` (a name, never opened: a capture archive's own path).  Answers what
    :class:`~topoagent.core.hostfs.HostFS` asks of a file system the way the kernel would
    (``FileNotFoundError``, EINVAL from ``readlink`` of what is no link).  ``notes``: what the
    archive said oddly (host path, what), for the scan to report."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.dirs: dict[str, dict[str, bool]] = {self.root: {}}
        self.notes: list[tuple[str, str]] = []

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def _parent(self, path: str) -> None:
        """Add ``path``'s directories, each entered in its parent's listing."""
        head, _, name = path.rpartition("/")
        if head not in self.dirs:
            self._parent(head)
            self.dirs[head] = {}
        self.dirs[head].setdefault(name, False)

    def add_dir(self, rel: str) -> None:
        """A directory at ``rel`` (components already checked: no ``..``, none empty)."""
        path = self._path(rel)
        if path != self.root and path not in self.dirs:
            self._parent(path)
            self.dirs[path] = {}
            self.dirs[path.rpartition("/")[0]][path.rpartition("/")[2]] = True

    def add_file(self, rel: str, data: bytes) -> None:
        """A regular file at ``rel``."""
        path = self._path(rel)
        self._parent(path)
        self.files[path] = data

    def add_link(self, rel: str, target: str) -> None:
        """A symbolic link at ``rel`` (its target resolved by the reader, inside the root)."""
        path = self._path(rel)
        self._parent(path)
        self.links[path] = target

    def readlink(self, path: str) -> str:
        """A link's target; EINVAL for what is no link, ENOENT for what is not there."""
        target = self.links.get(path)
        if target is not None:
            return target
        if path in self.files or path in self.dirs:
            raise OSError(errno.EINVAL, "not a symbolic link", path)
        raise FileNotFoundError(errno.ENOENT, "no such file", path)

    def lexists(self, path: str) -> bool:
        """Whether anything is at ``path`` (a link not followed)."""
        return path in self.files or path in self.dirs or path in self.links

    def isdir(self, path: str) -> bool:
        """Whether ``path`` (no link) is a directory."""
        return path in self.dirs

    def read(self, path: str) -> bytes:
        """A regular file's bytes (``path`` is no link: the reader resolved it)."""
        data = self.files.get(path)
        if data is not None:
            return data
        if path in self.dirs:
            raise IsADirectoryError(errno.EISDIR, "a directory", path)
        raise FileNotFoundError(errno.ENOENT, "no such file", path)

    def entries(self, path: str) -> dict[str, bool]:
        """A directory's entries: name -> whether it is a directory (not a link)."""
        listing = self.dirs.get(path)
        if listing is None:
            if self.lexists(path):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        return listing


#: A root to read: a directory's path (``/`` is the live host), or a tree held in memory.
Root = str | MemoryTree


def root_name(root: Root) -> str:
    """What a root is called in reports and messages: a directory's path, or the path of the
    capture archive a tree was read from."""
    return root.root if isinstance(root, MemoryTree) else root


def is_this_host(root: Root) -> bool:
    """Whether ``root`` is the machine this runs on (``/``, by any path that resolves to it)."""
    return isinstance(root, str) and os.path.realpath(root) == "/"
