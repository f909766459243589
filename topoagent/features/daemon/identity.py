"""A device that fell off the bus keeps the identity the daemon last saw it with.

The kernel keeps a fallen-off function's ids in its ``vendor``, ``device`` and ``class``
files, so a scan normally still knows what it was.  Where those files cannot be read either,
the daemon's last good result still knows: the function is given the ids it had there (same
BDF), so it stays a GPU, is counted, and nothing after it is renumbered.  Pure.
"""

from __future__ import annotations

import msgspec

from topoagent.core.findings import CATALOGUE, sort_findings
from topoagent.core.result import ScanResult, reanalyse, with_timings
from topoagent.core.topology import Device

__all__ = ["recall_identity"]

_IDS = ("vendor_id", "device_id", "class_code", "subsystem_vendor_id", "subsystem_device_id")


def _recalled(d: Device, old: Device | None) -> dict[str, int]:
    """The ids ``d`` lacks that ``old`` knew (empty where there is nothing to take)."""
    if old is None or not d.fell_off_bus:
        return {}
    return {k: getattr(old, k) for k in _IDS if getattr(d, k) is None and getattr(old, k) is not None}


def recall_identity(previous: ScanResult | None, new: ScanResult) -> ScanResult:
    """``new``, re-analysed with the ids of its fallen-off functions that only ``previous``
    knew; ``new`` itself where there are none.  Findings of another tool's view (the family
    ``crosscheck``: ``SOURCES_DISAGREE``, which analysis alone cannot redo) are kept."""
    if previous is None or not any(d.fell_off_bus for d in new.topology.devices):
        return new
    recalled = {
        d.bdf: ids
        for d in new.topology.devices
        if d.bdf is not None and (ids := _recalled(d, previous.topology.by_bdf(d.bdf)))
    }
    if not recalled:
        return new
    redone = reanalyse(new, recalled)
    kept = tuple(x for x in new.findings if CATALOGUE[x.code].family == "crosscheck")
    return with_timings(msgspec.structs.replace(redone, findings=sort_findings(redone.findings + kept)), new.timings)
