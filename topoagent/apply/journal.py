"""The undo journal: one JSON line per event, in the state directory.

Each change is recorded as ``pending`` -- with the value it replaces -- *before* it is made,
then ``done`` or ``failed``; an undo appends ``undone``.  So a crash between the record and
the write leaves a pending entry whose undo is harmless (it restores the value that is
already there).  Changes name devices by their stable key (BDF), never by ``gpu0``.
The file is appended under an exclusive ``flock`` and fsynced after each record.
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec

from topoagent.errors import InputError, TopoagentError
from topoagent.sources.textinput import read_regular

#: A journal holds a few hundred bytes per change: 64 MiB is ~200,000 changes.
MAX_JOURNAL_BYTES = 64 * 1024 * 1024

DEFAULT_STATE_DIR = "/var/lib/topoagent"
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


class Record(msgspec.Struct, frozen=True):
    """One line of the journal: a change about to be made (``pending``, with the value it
    replaces) or what became of one (``done``, ``failed``, ``undone``, ``undo-failed``)."""

    id: str
    event: str
    at: float = 0.0
    root: str | None = None
    kind: str | None = None
    target: dict[str, Any] | None = None
    before: str | None = None
    after: str | None = None
    label: str | None = None
    detail: str | None = None


_RECORD = msgspec.json.Decoder(Record)


class Journal:
    """The journal file ``journal.jsonl`` below ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR) -> None:
        self.dir = os.fspath(state_dir)
        self.path = os.path.join(self.dir, JOURNAL_NAME)

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

    def _append(self, record: dict[str, Any]) -> None:
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.write(msgspec.json.encode(record, order="sorted").decode() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise JournalError(f"{self.path}: {exc.strerror}") from None

    def begin(self, *, root: str, kind: str, target: dict[str, Any], before: str | None,
              after: str | None, label: str) -> str:
        """Record a change about to be made (its undo record); returns its id."""
        ident = uuid.uuid4().hex[:12]
        self._append({"id": ident, "at": time.time(), "event": "pending", "root": root, "kind": kind,
                      "target": target, "before": before, "after": after, "label": label})
        return ident

    def mark(self, ident: str, event: str, detail: str | None = None) -> None:
        """Record what became of a change: ``done``, ``failed``, ``undone``, ``undo-failed``."""
        self._append({"id": ident, "at": time.time(), "event": event, "detail": detail})

    def _records(self) -> Iterator[Record]:
        try:
            data = read_regular(self.path, MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.path}: {exc.strerror}") from None
        except InputError as exc:
            raise JournalError(f"{self.path}: {exc}") from None
        if len(data) > MAX_JOURNAL_BYTES:
            raise JournalError(f"{self.path}: larger than {MAX_JOURNAL_BYTES // (1024 * 1024)} MiB: "
                               "not a journal topoagent wrote (move it aside)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JournalError(f"{self.path}: not UTF-8: not a journal topoagent wrote") from None
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    yield _RECORD.decode(line)
                except msgspec.DecodeError:  # not JSON, or not a record (ValidationError)
                    raise JournalError(f"{self.path}:{n}: not a journal record") from None

    def entries(self) -> list[Entry]:
        """Every change recorded, oldest first, each with its latest state."""
        out: dict[str, Entry] = {}
        for r in self._records():
            if r.event == "pending":
                if r.root is None or r.kind is None or r.target is None or r.label is None:
                    raise JournalError(f"{self.path}: a record is not a journal record")
                out[r.id] = Entry(r.id, r.root, r.kind, r.target, r.before, r.after, r.label, "pending")
            elif r.id in out:
                out[r.id] = msgspec.structs.replace(out[r.id], state=r.event)
        return list(out.values())

    def to_undo(self) -> list[Entry]:
        """Changes that were (or may have been) made and are not undone yet, newest first."""
        return [e for e in reversed(self.entries()) if e.state in ("done", "pending", "undo-failed")]
