"""Make planned changes and undo them: journal first, then write, then read back.

For every change: its undo record (the value it replaces) is appended to the journal, the
writer makes it, and the value is read back through the reader to verify.  A write the kernel
refuses (EIO on a kernel-managed IRQ) is an outcome, not an error: the rest go on.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Any

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import TopoagentError
from topoagent.core.hostfs import HostFS
from topoagent.core.read import kernel, process
from topoagent.core.read.process import thread_start
from topoagent.features.act import irqs
from topoagent.features.act.changes import FILE, IRQ, MODULE, PCI_CONFIG, THREAD, HostChange
from topoagent.features.act.irqs import affinity_rel
from topoagent.features.act.journal import Entry, Journal
from topoagent.features.act.validate import entry_problem
from topoagent.features.act.writer import META, HostWriter, WriteError

APPLIED, FAILED, REFUSED = "applied", "failed", "refused"
#: Undo only: a target changed again since apply (left as it is), a record not trusted.
LEFT, SKIPPED = "left", "skipped"


class Outcome(msgspec.Struct, frozen=True):
    """What became of one change (or one undo): ``applied``, ``refused`` (the kernel would
    not take the value: not fatal) or ``failed``; ``detail`` says why."""

    label: str
    what: str
    status: str
    detail: str | None = None


def current(fs: HostFS, kind: str, target: Any) -> str | None:
    """The value a change's target holds now, in the change's own spelling."""
    if kind == IRQ:
        cpus = irqs.irq_affinity(fs, int(target["irq"]))
        return None if cpus is None else str(cpus)
    if kind == THREAD:
        cpus = process.thread_affinity(int(target["tid"]))
        return None if cpus is None else str(cpus)
    if kind == PCI_CONFIG:
        data = kernel.config_bytes(fs, str(target["bdf"]))
        off = int(target["offset"])
        return None if data is None or len(data) < off + 2 else f"0x{int.from_bytes(data[off : off + 2], 'little'):04x}"
    if kind == FILE:
        return kernel.file_text(fs, str(target["path"]))
    if kind == MODULE:
        return "loaded" if fs.isdir(f"sys/module/{target['module']}") else "absent"
    raise WriteError(f"unknown change kind {kind!r}")


def target_rel(kind: str, target: Any) -> str | None:
    """The host file (root-relative) a change of ``kind`` writes; None for a thread, a module
    or an unknown kind."""
    if kind == IRQ:
        return affinity_rel(int(target["irq"]))
    if kind == PCI_CONFIG:
        return f"sys/bus/pci/devices/{target['bdf']}/config"
    if kind == FILE:
        return str(target["path"])
    return None


def perform(writer: HostWriter, kind: str, target: Any, value: str | None) -> None:
    """Make ``target`` hold ``value`` through the writer."""
    if kind == THREAD:
        writer.set_affinity(int(target["tid"]), CpuSet.parse(str(value)))
    elif kind == MODULE:
        writer.modprobe(str(target["module"]), remove=value != "loaded")
    elif (rel := target_rel(kind, target)) is None:
        raise WriteError(f"unknown change kind {kind!r}")
    elif kind == IRQ:
        writer.write_text(rel, str(value))
    elif kind == PCI_CONFIG:
        writer.write_at(rel, int(target["offset"]), int(str(value), 16).to_bytes(2, "little"))
    elif value is None:
        writer.remove_file(rel)
    else:
        writer.replace_file(rel, value, {k: target[k] for k in META} if "mode" in target else None)


def _same(kind: str, a: str | None, b: str | None) -> bool:
    if kind in (IRQ, THREAD) and a is not None and b is not None:
        return CpuSet.parse(a) == CpuSet.parse(b)
    return a == b


def _refusal(kind: str, exc: WriteError) -> str | None:
    """Why the kernel refused a value, where that is normal rather than a failure."""
    if kind == IRQ and exc.errno == errno.EIO:
        return "the kernel manages this IRQ's affinity (managed interrupt: writes answer EIO)"
    if kind == THREAD and exc.errno == errno.EINVAL:
        return "none of the CPUs is allowed to the thread (its cpuset excludes them)"
    if kind == THREAD and exc.errno == errno.ESRCH:
        return "the thread has ended"
    return None


def _write(writer: HostWriter, kind: str, target: Any, value: str | None) -> tuple[str, str | None]:
    try:
        perform(writer, kind, target, value)
    except WriteError as exc:
        why = _refusal(kind, exc)
        return (REFUSED, why) if why else (FAILED, str(exc))
    now = current(HostFS(writer.root), kind, target)  # a fresh reader: no cached errors
    if not _same(kind, now, value):
        return FAILED, f"read back {now!r}, expected {value!r}"
    return APPLIED, None


def apply_changes(changes: Sequence[HostChange], writer: HostWriter, journal: Journal) -> list[Outcome]:
    """Make each change: journal its undo record, write, read back, journal the result.  A file
    it replaces keeps its mode and owner, and the record keeps them for undo (:data:`META`)."""
    out = []
    for ch in changes:
        target = dict(ch.target)
        if ch.kind == FILE:
            target.update(writer.file_meta(str(target["path"])) or {})
        ident = journal.begin(
            root=writer.root, kind=ch.kind, target=target, before=ch.before, after=ch.after, label=ch.label
        )
        status, detail = _write(writer, ch.kind, target, ch.after)
        journal.mark(ident, "done" if status == APPLIED else status, detail)
        out.append(Outcome(ch.label, ch.what, status, detail))
    return out


def describe(entry: Entry) -> str:
    """One line naming a journalled change, for the undo listing."""
    t = entry.target
    where = {
        IRQ: lambda: f"IRQ {t.get('irq')}",
        THREAD: lambda: f"pid {t.get('pid')} thread {t.get('tid')}",
        PCI_CONFIG: lambda: f"{t.get('bdf')} config +{int(t.get('offset', 0)):#x}",
        FILE: lambda: f"/{t.get('path')}",
        MODULE: lambda: f"module {t.get('module')}",
    }
    name = where.get(entry.kind, lambda: entry.kind)()
    return f"{name} ({entry.label}) under {entry.root}"


def undo(journal: Journal, entries: Sequence[Entry], root: str) -> list[Outcome]:
    """Restore each entry's previous value, in the order given (newest first from
    :meth:`Journal.to_undo`), through a writer rooted at ``root`` (the one given now).

    An entry is first checked against what apply could have written (:func:`entry_problem`:
    a record for another root, an unknown kind, a target apply would refuse is skipped).  A
    value is restored only where the target still holds what apply wrote: a later change is
    reported and left; a thread is the one changed only if its start time matches (a reused
    tid is left alone).  One bad record never stops the others."""
    out = []
    writer = HostWriter(root)
    for e in entries:
        what = f"{describe(e)}: {e.after!r} -> {e.before!r}"
        why = entry_problem(e, writer.root)
        if why is not None:
            out.append(Outcome(e.label, what, SKIPPED, f"not a change apply could have made here: {why}: skipped"))
            continue
        try:
            status, detail = _undo_one(writer, e)
            journal.mark(e.id, {APPLIED: "undone", LEFT: "left"}.get(status, "undo-failed"), detail)
        except (TopoagentError, OSError, ValueError) as exc:
            status, detail = FAILED, str(exc)
            try:
                journal.mark(e.id, "undo-failed", detail)
            except TopoagentError:
                pass  # the failure is reported below all the same
        out.append(Outcome(e.label, what, status, detail))
    return out


def _undo_one(writer: HostWriter, e: Entry) -> tuple[str, str | None]:
    if e.before is None and e.kind in (IRQ, THREAD, PCI_CONFIG):
        return FAILED, "no previous value recorded"
    if e.kind == THREAD:
        started = thread_start(int(e.target["tid"]))
        if started is None:
            return APPLIED, "the thread has ended: nothing to restore"
        if e.target.get("start") is not None and started != e.target["start"]:
            return LEFT, (
                f"thread {e.target['tid']} is another thread now (started at tick {started}, the one "
                f"changed at {e.target['start']}: the id was reused): left alone"
            )
    now = current(HostFS(writer.root), e.kind, e.target)
    if _same(e.kind, now, e.before):
        return APPLIED, "already holds the previous value"
    if not _same(e.kind, now, e.after):
        return LEFT, f"changed since apply (now {now!r}, apply wrote {e.after!r}): left as it is"
    status, detail = _write(writer, e.kind, e.target, e.before)
    if e.kind == THREAD and status == REFUSED and detail == "the thread has ended":
        status = APPLIED  # nothing left to restore
    return status, detail
