"""Journal records checked against what the writer could have written, before undo acts.

A record names its own root, kind, target and values; undo trusts none of it until it passes
the rules apply itself follows: the root is the one given now, the kind is one of the five,
an IRQ is a number, a thread a positive tid, a BDF a BDF, an offset inside config space, a
file one that topoagent installs (its mode and owner, where kept, numbers), a module one it
loads (never a name modprobe reads as an option), and each value in its kind's spelling.
"""

from __future__ import annotations

import re
from typing import Any

from topoagent.core.bdf import is_bdf
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.read.kernel import MAX_SAVED_FILE
from topoagent.features.act.changes import (
    FILE,
    GRUB_ACS_CONF,
    IRQ,
    MODULE,
    PCI_CONFIG,
    PEERMEM_CONF,
    PEERMEM_MODULE,
    THREAD,
)
from topoagent.features.act.journal import Entry
from topoagent.features.act.writer import META

__all__ = ["entry_problem"]

#: The files and modules topoagent changes (``fix peermem``, ``fix acs``'s grub drop-in): nothing
#: else is undone.
FILES = frozenset({PEERMEM_CONF, GRUB_ACS_CONF})
MODULES = frozenset({PEERMEM_MODULE})
_REGISTER = re.compile(r"0x[0-9a-f]{4}\Z")


def _int(value: Any, lo: int, hi: int) -> bool:
    return type(value) is int and lo <= value <= hi


def _target_problem(kind: str, t: dict[str, Any]) -> str | None:
    if kind == IRQ:
        return None if _int(t.get("irq"), 0, 1 << 20) else "the IRQ is not a number"
    if kind == THREAD:
        ok = _int(t.get("pid"), 1, 1 << 22) and _int(t.get("tid"), 1, 1 << 22)
        start = t.get("start")
        return None if ok and (start is None or _int(start, 0, 1 << 63)) else "pid/tid are not process ids"
    if kind == PCI_CONFIG:
        if not isinstance(t.get("bdf"), str) or not is_bdf(t["bdf"]):
            return "the device is not a PCI address"
        return None if _int(t.get("offset"), 0x100, 0xFFE) else "the offset is not inside config space"
    if kind == FILE:
        if t.get("path") not in FILES:
            return "not a file topoagent installs"
        meta = [t[k] for k in META if k in t]  # all or none: the file's mode and owner before
        limits = (0o777, (1 << 32) - 2, (1 << 32) - 2)
        ok = not meta or (len(meta) == len(META) and all(_int(v, 0, hi) for v, hi in zip(meta, limits, strict=True)))
        return None if ok else "its mode and owner are not a file's"
    if kind == MODULE:
        return None if t.get("module") in MODULES else "not a module topoagent loads"
    return f"unknown kind {kind[:32]!r}"


def _value_problem(kind: str, value: str | None) -> str | None:
    if value is None:
        return None
    if kind in (IRQ, THREAD):
        try:
            CpuSet.parse(value)
        except InputError:
            return "a value is not a CPU list"
        return None
    if kind == PCI_CONFIG:
        return None if _REGISTER.match(value) else "a value is not a 16-bit register"
    if kind == MODULE:
        return None if value in ("loaded", "absent") else "a value is not loaded/absent"
    return None if len(value) <= MAX_SAVED_FILE else "a saved file is larger than topoagent saves"


def entry_problem(entry: Entry, root: str) -> str | None:
    """Why a journal entry is not one apply could have written for ``root`` (None: it is)."""
    if entry.root != root:
        return f"made under the root {entry.root[:200]!r}, not {root!r} given now"
    why = _target_problem(entry.kind, entry.target)
    if why is None:
        why = _value_problem(entry.kind, entry.before) or _value_problem(entry.kind, entry.after)
    return why
