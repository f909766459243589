"""The undo journal: one JSON line per event, in the state directory.

Each change is recorded as ``pending`` -- with the value it replaces -- *before* it is made,
then ``done`` or ``failed``; an undo appends ``undone``.  So a crash between the record and
the write leaves a pending entry whose undo is harmless (it restores the value that is
already there).  Changes name devices by their stable key (BDF), never by ``gpu0``.
The file is appended under an exclusive ``flock`` and fsynced after each record.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec

from topoagent.core.digest import short_sha256
from topoagent.core.errors import TopoagentError
from topoagent.core.read.textinput import read_fd
from topoagent.core.write.files import DEFAULT_STATE_DIR, untrusted

#: A journal holds a few hundred bytes per change: 64 MiB is ~200,000 changes.
MAX_JOURNAL_BYTES = 64 * 1024 * 1024

JOURNAL_NAME = "journal.jsonl"


class JournalError(TopoagentError):
    """The journal cannot be written or read."""


class Entry(msgspec.Struct, frozen=True):
    """A change as the journal holds it: what, where (root), the value before and after."""

    id: str
    root: str
    kind: str
    target: dict[str, Any]
    before: str | None
    after: str | None
    label: str
    state: str


#: The checksum each record carries: the first 16 hex digits of the SHA-256 of the record's
#: canonical JSON without it.  A torn or edited line fails it and is skipped, not trusted.
_SUM = "sum"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, ensure_ascii=True).encode("ascii")


def _checksum(record: dict[str, Any]) -> str:
    return short_sha256(_canonical(record))


def seal(record: dict[str, Any]) -> bytes:
    """One journal line: the record with its checksum, newline-terminated."""
    return _canonical({**record, _SUM: _checksum(record)}) + b"\n"


def unseal(line: str) -> dict[str, Any] | None:
    """The record a line holds, or None when it is not one this journal wrote whole."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get(_SUM), str):
        return None
    given = rec.pop(_SUM)
    return rec if given == _checksum(rec) else None


class Journal:
    """The journal file ``journal.jsonl`` below ``state_dir``.

    It is the writer's own: the state directory is made owner-only (0700), and a directory or
    journal owned by another user or writable by others is refused, as is a journal that is a
    link.  Each record is one ``write`` of one checksummed line; a line that fails its checksum
    (a tail torn by a full disk, an edit) is skipped with a line in :attr:`skipped`."""

    def __init__(self, state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR) -> None:
        self.dir = os.fspath(state_dir)
        self.path = os.path.join(self.dir, JOURNAL_NAME)
        self.skipped: list[str] = []

    def writable(self) -> bool:
        """Whether a record could be appended (the directory exists or can be made)."""
        d = self.dir
        while not os.path.lexists(d):
            parent = os.path.dirname(d)
            if parent == d:
                return False
            d = parent
        if not os.path.isdir(d):
            return False  # a file where a directory must be
        target = self.path if os.path.exists(self.path) else d
        return os.access(target, os.W_OK)

    def _open_dir(self, *, create: bool) -> int:
        if create:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
        fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC)
        try:
            _owned(os.fstat(fd), f"{self.dir}: the state directory")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open(self, flags: int) -> int:
        """The journal opened through its checked directory, checked itself on the descriptor."""
        create = bool(flags & os.O_CREAT)
        dir_fd = self._open_dir(create=create)
        try:
            fd = os.open(JOURNAL_NAME, flags | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise JournalError(f"{self.path}: not a regular file")
            _owned(st, self.path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _append(self, record: dict[str, Any]) -> None:
        line = seal(record)
        try:
            fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # after a torn tail: this record starts a line of its own
                if os.write(fd, line) != len(line):
                    raise OSError(errno.ENOSPC, "short write (disk full?)")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(f"{self.path}: {_why(exc)}") from None

    def begin(
        self, *, root: str, kind: str, target: dict[str, Any], before: str | None, after: str | None, label: str
    ) -> str:
        """Record a change about to be made (its undo record); returns its id."""
        ident = uuid.uuid4().hex[:12]
        self._append(
            {
                "id": ident,
                "at": time.time(),
                "event": "pending",
                "root": root,
                "kind": kind,
                "target": target,
                "before": before,
                "after": after,
                "label": label,
            }
        )
        return ident

    def mark(self, ident: str, event: str, detail: str | None = None) -> None:
        """Record what became of a change: ``done``, ``failed``, ``undone``, ``undo-failed``, ``left``."""
        self._append({"id": ident, "at": time.time(), "event": event, "detail": detail})

    def _records(self) -> Iterator[dict[str, Any]]:
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.path}: {_why(exc)}") from None
        try:
            data = read_fd(fd, MAX_JOURNAL_BYTES)
        except OSError as exc:
            raise JournalError(f"{self.path}: {_why(exc)}") from None
        finally:
            os.close(fd)
        if len(data) > MAX_JOURNAL_BYTES:
            raise JournalError(
                f"{self.path}: larger than {MAX_JOURNAL_BYTES // (1024 * 1024)} MiB: "
                "not a journal topoagent wrote (move it aside)"
            )
        for n, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            rec = unseal(raw.decode("utf-8", "replace"))
            if rec is None:
                self.skipped.append(f"{self.path}:{n}: not a whole record topoagent wrote (torn or altered): skipped")
                continue
            yield rec

    def entries(self) -> list[Entry]:
        """Every change recorded, oldest first, each with its latest state (records that are
        not well-formed are skipped, with a line each in :attr:`skipped`)."""
        self.skipped = []
        out: dict[str, Entry] = {}
        for r in self._records():
            ident = r.get("id")
            if r.get("event") == "pending":
                fields = ("root", "kind", "target", "before", "after", "label")
                if not (
                    isinstance(ident, str)
                    and all(k in r for k in fields)
                    and isinstance(r["kind"], str)
                    and isinstance(r["root"], str)
                    and isinstance(r["target"], dict)
                    and isinstance(r["label"], str)
                    and all(v is None or isinstance(v, str) for v in (r["before"], r["after"]))
                ):
                    self.skipped.append(f"{self.path}: record {str(ident)[:16]!r} is not well-formed: skipped")
                    continue
                out[ident] = Entry(
                    ident, r["root"], r["kind"], r["target"], r["before"], r["after"], r["label"], "pending"
                )
            elif isinstance(ident, str) and ident in out and isinstance(r.get("event"), str):
                e = out[ident]
                out[ident] = Entry(e.id, e.root, e.kind, e.target, e.before, e.after, e.label, r["event"])
        return list(out.values())

    def to_undo(self) -> list[Entry]:
        """Changes that were (or may have been) made and are not undone yet, newest first."""
        return [e for e in reversed(self.entries()) if e.state in ("done", "pending", "undo-failed")]


def _owned(st: os.stat_result, what: str) -> None:
    """Refuse a state directory or journal that another user owns or others may write."""
    why = untrusted(st)
    if why is not None:
        raise JournalError(f"{what} {why}: not trusted, nothing read or written")


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link: refused"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return exc.strerror or str(exc)
