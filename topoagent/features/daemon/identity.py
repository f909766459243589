"""A device that fell off the bus keeps the identity the daemon last saw it with.

The kernel keeps a fallen-off function's ids in its ``vendor``, ``device`` and ``class``
files, so a scan normally still knows what it was.  Where those files cannot be read either,
the daemon's last good result still knows: the function is given the ids it had there (same
BDF), so it stays a GPU, is counted, and nothing after it is renumbered.  Pure.
"""

from __future__ import annotations

import msgspec

from topoagent.core.findings import sort_findings
from topoagent.core.result import ScanResult, analyse, with_timings
from topoagent.core.snapshot import PciFunction

__all__ = ["recall_identity"]

_IDS = ("vendor_id", "device_id", "class_code", "subsystem_vendor_id", "subsystem_device_id")


def _recalled(f: PciFunction, old: PciFunction | None) -> PciFunction | None:
    """``f`` with the ids it lacks taken from ``old``; None where there is nothing to take."""
    if old is None or not f.fell_off_bus:
        return None
    missing = {k: getattr(old, k) for k in _IDS if getattr(f, k) is None and getattr(old, k) is not None}
    return msgspec.structs.replace(f, **missing) if missing else None


def recall_identity(previous: ScanResult | None, new: ScanResult) -> ScanResult:
    """``new``, re-analysed with the ids of its fallen-off functions that only ``previous``
    knew; ``new`` itself where there are none.  Findings of another tool's view
    (``SOURCES_DISAGREE``, which analysis alone cannot redo) are kept."""
    if previous is None or not any(f.fell_off_bus for f in new.snapshot.pci):
        return new
    old = {f.bdf: f for f in previous.snapshot.pci if f.bdf is not None}
    pci, changed = [], False
    for f in new.snapshot.pci:
        r = _recalled(f, old.get(f.bdf) if f.bdf is not None else None)
        changed |= r is not None
        pci.append(r if r is not None else f)
    if not changed:
        return new
    redone = analyse(msgspec.structs.replace(new.snapshot, pci=tuple(pci)))
    kept = tuple(x for x in new.findings if x.code == "SOURCES_DISAGREE")
    return with_timings(msgspec.structs.replace(redone, findings=sort_findings(redone.findings + kept)), new.timings)
