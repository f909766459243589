"""Mutations of fake host trees: what a broken, truncated or hostile capture does to sysfs.

A :class:`Mutation` damages one path of a generated fixture tree in place; :func:`apply` returns
the undo, so one generated tree serves thousands of examples (the original is moved aside on
the same file system and moved back).  :func:`draw_mutations` draws mutations from a
:class:`random.Random`: hypothesis hands one in (``st.randoms(use_true_random=False)``), the
audited worker (:mod:`tests.fuzz.worker`) seeds its own, so both draw the same kinds of damage.

Kinds of damage (``Mutation.op``): truncation, garbage bytes, hostile values (non-ASCII digits,
``0-999999999`` ...), an empty file, a directory where a file is and a file where a directory
is, removal, symlinks out of the root (absolute and climbing), symlink loops, FIFOs, character
devices (``/dev/zero``'s numbers; a link to ``/dev/zero`` where ``mknod`` is not allowed), a
sparse 1 GiB file, entries with non-UTF-8 and non-ASCII names (``node²``, ``cpu١``, an
upper-case BDF alias), links re-aimed at such names (``iommu_group -> ../²``), and a deep
directory nest.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz import HOSTILE_TEXTS

__all__ = ["OPS", "Mutation", "Targets", "apply", "apply_all", "draw_mutations", "targets"]

OPS: tuple[str, ...] = (
    "truncate",
    "garbage",
    "hostile_text",
    "empty",
    "dir_for_file",
    "file_for_dir",
    "remove",
    "link_out",
    "link_escape",
    "link_loop",
    "link_self",
    "fifo",
    "chardev",
    "huge",
    "link_dev_zero",
    "odd_name",
    "alias_name",
    "deep_dir",
    "odd_link",
)

#: Targets outside the root a hostile capture links to.
OUTSIDE = ("/etc/passwd", "/proc/self/environ", "/sys", "/", "/dev/zero", "/proc/self/mem", "/etc", "/proc/kcore")
#: Names that look like something sysfs lists, but are not what they seem.
ODD_NAMES: tuple[bytes, ...] = (
    "node²".encode(),
    "node١".encode(),
    b"node01",
    b"node99999999999999999999",
    "cpu١".encode(),
    b"cpu007",
    "０000:17:00.0".encode(),
    b"0000:17:00.0\n",
    b"\xff\xfe",
    b"node\xff",
    b"mlx5_\xc3",
    b"x" * 255,
    "ｎｏｄｅ1".encode(),
    b"0000:zz:00.0",
    b"-1",
    "²".encode(),
    b"00",
)

_BACKUP = ".fuzz-backup"
_counter = itertools.count()


@dataclass(frozen=True)
class Mutation:
    """One damage: ``op`` applied to ``path`` (relative to the root) with ``payload``."""

    path: str
    op: str
    payload: bytes = b""
    number: int = 0

    def __str__(self) -> str:
        shown = self.payload[:40]
        return f"{self.op}({self.path!r}, {shown!r}{'...' if len(self.payload) > 40 else ''}, {self.number})"


@dataclass(frozen=True)
class Targets:
    """A tree's paths: those a clean scan reads (most damage goes there) and all the others."""

    read: tuple[str, ...]
    every: tuple[str, ...]
    dirs: tuple[str, ...]
    #: Directories a clean scan lists (an odd name there is seen).
    listed: tuple[str, ...] = ()
    #: Symbolic links a clean scan follows or reads.
    links: tuple[str, ...] = ()


def targets(root: Path, read: set[str] | None = None) -> Targets:
    """Every path below ``root`` (links not followed), and those of ``read`` that exist."""
    every, dirs = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            every.append(rel)
            if name in dirnames and not os.path.islink(os.path.join(dirpath, name)):
                dirs.append(rel)
    every.sort()
    dirs.sort()
    chosen = sorted(p for p in (read or ()) if p and os.path.lexists(root / p))
    listed = [p for p in chosen if (root / p).is_dir()]
    links = [p for p in chosen if (root / p).is_symlink()] or [p for p in every if (root / p).is_symlink()]
    return Targets(
        tuple(chosen) or tuple(every),
        tuple(every),
        tuple(dirs),
        tuple(listed) or tuple(dirs),
        tuple(links) or tuple(every),
    )


def draw_mutations(rng: random.Random, t: Targets, most: int = 3) -> list[Mutation]:
    """One to ``most`` mutations of a tree with targets ``t``."""
    out = []
    for _ in range(rng.randint(1, most)):
        op = rng.choice(OPS)
        if op in ("odd_name", "alias_name", "deep_dir"):
            path = rng.choice(t.listed if rng.random() < 0.8 else t.dirs)
        elif op == "odd_link":
            path = rng.choice(t.links)
        else:
            path = rng.choice(t.read if rng.random() < 0.8 else t.every)
        payload = b""
        if op == "garbage":
            payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        elif op == "hostile_text":
            payload = rng.choice(HOSTILE_TEXTS).encode("utf-8", "surrogateescape") + rng.choice((b"", b"\n"))
        elif op in ("odd_name", "odd_link"):
            payload = rng.choice(ODD_NAMES)
        elif op in ("link_out", "link_escape"):
            payload = rng.choice(OUTSIDE).encode()
        out.append(Mutation(path, op, payload, rng.randrange(1, 600)))
    return out


def _backup_dir(root: Path) -> Path:
    d = root.parent / _BACKUP
    d.mkdir(exist_ok=True)
    return d


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif os.path.lexists(p):
        p.unlink()


def _aside(root: Path, target: Path) -> Callable[[], None]:
    """Move ``target`` out of the tree; the returned undo removes what took its place and puts
    it back."""
    backup = _backup_dir(root) / f"{next(_counter)}"
    os.rename(target, backup)

    def undo() -> None:
        _remove(target)
        os.rename(backup, target)

    return undo


def _added(p: Path) -> Callable[[], None]:
    return lambda: _remove(p)


def _is_plain_file(t: Path) -> bool:
    return t.is_file() and not t.is_symlink()


#: What a target must be for each op that needs something particular (others take anything).
_NEEDS: dict[str, Callable[[Path], bool]] = {
    **dict.fromkeys(("odd_name", "alias_name", "deep_dir"), Path.is_dir),
    "odd_link": Path.is_symlink,
    **dict.fromkeys(("truncate", "garbage", "hostile_text", "empty", "huge"), _is_plain_file),
    "file_for_dir": lambda t: t.is_dir() and not t.is_symlink(),
}


def _huge(target: Path) -> None:
    with open(target, "wb") as f:  # sparse: costs no disk, reads as a GiB of zeros
        f.truncate(1 << 30)


def _dir_for_file(target: Path) -> None:
    target.mkdir()
    (target / "0").write_text("0\n")


def _chardev(target: Path) -> None:
    try:
        os.mknod(target, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        os.symlink("/dev/zero", target)


def _link_escape(target: Path, m: Mutation) -> None:
    depth = m.path.count("/") + 1 + m.number % 4
    os.symlink("../" * depth + m.payload.decode().lstrip("/"), target)


#: What takes the target's place (moved aside first) for each op.
_WRITE: dict[str, Callable[[Path, Mutation], None]] = {
    "garbage": lambda t, m: t.write_bytes(m.payload),
    "hostile_text": lambda t, m: t.write_bytes(m.payload),
    "empty": lambda t, m: t.write_bytes(b""),
    "huge": lambda t, m: _huge(t),
    "dir_for_file": lambda t, m: _dir_for_file(t),
    "file_for_dir": lambda t, m: t.write_text("0\n"),
    "remove": lambda t, m: None,
    "link_out": lambda t, m: os.symlink(m.payload.decode(), t),
    "link_escape": _link_escape,
    "link_self": lambda t, m: os.symlink(f"../{t.parent.name}/{t.name}/x/..", t),
    "fifo": lambda t, m: os.mkfifo(t),
    "chardev": lambda t, m: _chardev(t),
    "link_dev_zero": lambda t, m: os.symlink("/dev/zero", t),
}


def _odd_link(root: Path, target: Path, m: Mutation) -> Callable[[], None]:
    """The same link, to a strangely named neighbour of its target."""
    old = os.fsencode(os.readlink(target))
    undo = _aside(root, target)
    os.symlink(os.path.join(os.path.dirname(old), m.payload), target)
    return undo


def _truncate(root: Path, target: Path, m: Mutation) -> Callable[[], None]:
    data = target.read_bytes()
    undo = _aside(root, target)
    target.write_bytes(data[: m.number % (len(data) + 1)])
    return undo


def _link_loop(root: Path, target: Path, m: Mutation) -> Callable[[], None]:
    inner = _aside(root, target)
    other = target.parent / f".loop{next(_counter)}"
    os.symlink(other.name, target)
    os.symlink(target.name, other)

    def undo() -> None:
        _remove(other)
        inner()

    return undo


def _replace(root: Path, target: Path, m: Mutation) -> Callable[[], None]:
    write = _WRITE.get(m.op)
    if write is None:  # pragma: no cover - a new op without a case
        raise ValueError(m.op)
    undo = _aside(root, target)
    write(target, m)
    return undo


#: Ops that do more than put one thing in the target's place.
_APPLY: dict[str, Callable[[Path, Path, Mutation], Callable[[], None] | None]] = {
    **dict.fromkeys(("odd_name", "alias_name", "deep_dir"), lambda r, t, m: _add_entry(r, t, m)),
    "odd_link": _odd_link,
    "truncate": _truncate,
    "link_loop": _link_loop,
}


def apply(root: Path, m: Mutation) -> Callable[[], None] | None:
    """Damage the tree; the undo, or None when the damage cannot be done here (its path is gone,
    an earlier mutation made it something else)."""
    target = root / m.path
    try:
        if not os.path.lexists(target):
            return None
        needs = _NEEDS.get(m.op)
        if needs is not None and not needs(target):
            return None
        return _APPLY.get(m.op, _replace)(root, target, m)
    except FileNotFoundError:
        return None


def _add_entry(root: Path, target: Path, m: Mutation) -> Callable[[], None] | None:
    """odd_name: a new entry with a strange name (a link to a sibling, else a small file);
        alias_name: a BDF-named entry again, upper case or with a longer domain (a second name for
    one device);
        deep_dir: a nest ``m.number`` directories deep with a file at the bottom."""
    names = sorted(os.listdir(target))
    if m.op == "deep_dir":
        top = target / f"deep{next(_counter)}"
        fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.mkdir(top.name, dir_fd=fd)
            cur = os.open(top.name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        finally:
            os.close(fd)
        try:  # relative to an open directory: no path grows past PATH_MAX on the way down
            for _ in range(m.number):
                os.mkdir("d", dir_fd=cur)
                nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
                os.close(cur)
                cur = nxt
            w = os.open("numa_node", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=cur)
            os.write(w, b"0\n")
            os.close(w)
        finally:
            os.close(cur)
        return _added(top)
    if m.op == "alias_name":
        bdfs = [n for n in names if n.count(":") == 2]
        if not bdfs:
            return None
        first = bdfs[m.number % len(bdfs)]
        # Upper-case hex where the name has letters, else the domain spelled with one more digit.
        alias = target / (first.upper() if first != first.upper() else "0" + first)
        if os.path.lexists(alias):
            return None
        src = target / first
        os.symlink(os.readlink(src) if src.is_symlink() else first, alias)
        return _added(alias)
    new = os.path.join(os.fsencode(target), m.payload)
    if os.path.lexists(new):
        return None
    if names:
        sibling = names[m.number % len(names)]
        src = target / sibling
        os.symlink(os.readlink(src) if src.is_symlink() else sibling, new)
    else:
        with open(new, "wb") as f:
            f.write(b"0\n")
    return lambda: os.unlink(new)


def apply_all(root: Path, mutations: list[Mutation]) -> tuple[list[Mutation], Callable[[], None]]:
    """Apply what can be applied, in order; (those applied, one undo for them all)."""
    done: list[Mutation] = []
    undos: list[Callable[[], None]] = []
    for m in mutations:
        undo = apply(root, m)
        if undo is not None:
            done.append(m)
            undos.append(undo)

    def undo_all() -> None:
        for u in reversed(undos):
            u()

    return done, undo_all
