"""Paths resolved beneath a root, one directory descriptor at a time.

The writer never opens a host path by name: it opens the root, then walks each component
with ``openat(..., O_NOFOLLOW)`` from the directory descriptor it already holds, resolving a
symbolic link itself (its target spliced into the walk, ``..`` never rising above the root
of a fake tree).  A link swapped in after a component was checked makes the next ``openat``
fail with ``ELOOP`` instead of being followed, so no check-then-open race is left: what
``openat2(RESOLVE_IN_ROOT)`` does in the kernel (openat2(2)), done in Python, portably.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from topoagent.core.errors import TopoagentError

__all__ = ["DIR_FLAGS", "Outside", "beneath"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: How a directory on the way is opened: never through a link, never anything but a directory.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
#: Links followed in one walk, as the kernel's own limit (path_resolution(7)).
MAX_LINKS = 40


class Outside(TopoagentError, OSError):
    """The path leads outside the root (through ``..`` or a link): an OSError to the writer's
    callers, which report every failed write alike, and a TopoagentError like every refusal."""


@contextmanager
def beneath(root: str, rel: str, *, live: bool, create_dirs: bool = False) -> Iterator[tuple[int, list[str]]]:
    """The directory holding ``rel``'s last component, opened beneath ``root``, and the names
    still to walk: ``[name]`` normally, ``[missing_dir, ..., name]`` when directories on the way
    do not exist (made with mode 0755 when ``create_dirs``).  Links are followed on the way
    (sysfs's ``devices/<bdf>``), never as the last name: a link there is handed back as it is,
    for the caller's ``O_NOFOLLOW`` open to refuse.  Raises :class:`Outside` for a path leading out of a fake
    root (on the live host ``..`` stops at ``/``, as the kernel's does) and :class:`OSError`."""
    stack = [os.open(root, DIR_FLAGS)]
    try:
        rest = _walk(stack, [p for p in rel.split("/") if p not in ("", ".")], live=live, create=create_dirs)
        yield stack[-1], rest
    finally:
        for fd in stack:
            os.close(fd)


def _walk(stack: list[int], parts: list[str], *, live: bool, create: bool) -> list[str]:
    """Walk ``parts`` below ``stack[-1]``, opening each directory on the way; what is left when
    the walk stops (the last name, or the names that do not exist yet), ``["."]`` at its end."""
    links = 0
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            _up(stack, live)
            continue
        st = _stat(stack, name, create=create and bool(parts))
        if st is None:
            return [name, *parts]
        if stat.S_ISLNK(st.st_mode) and parts:
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links")
            parts[:0] = _follow(stack, name, live)
            continue
        if not parts:
            return [name]  # the file itself (a link here is never resolved: an O_NOFOLLOW open refuses it)
        stack.append(os.open(name, DIR_FLAGS, dir_fd=stack[-1]))
    return ["."]


def _up(stack: list[int], live: bool) -> None:
    """``..``: one directory up, stopping at the root (the live host's ``/``, as the kernel
    does); out of a fake root is refused."""
    if len(stack) == 1:
        if live:
            return
        raise Outside(errno.EXDEV, "resolves outside the root")
    os.close(stack.pop())


def _stat(stack: list[int], name: str, *, create: bool) -> os.stat_result | None:
    """``name`` in the current directory, not followed; a missing directory made where
    ``create`` (mode 0755); None where it is missing and not made."""
    try:
        return os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            return None
    os.mkdir(name, 0o755, dir_fd=stack[-1])
    return os.stat(name, dir_fd=stack[-1], follow_symlinks=False)


def _follow(stack: list[int], name: str, live: bool) -> list[str]:
    """The parts a link on the way names; an absolute target goes back to the root (the live
    host) or is refused (a fake root: it would lead out of it)."""
    target = os.readlink(name, dir_fd=stack[-1])
    if target.startswith("/"):
        if not live:
            raise Outside(errno.EXDEV, f"resolves outside the root (a link to {target})")
        while len(stack) > 1:
            os.close(stack.pop())
    return target.split("/")
