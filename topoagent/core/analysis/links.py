"""What a PCIe link can do and whether it does it: the one judgement findings, the daemon's link
watch and its metrics share.

A link has two ends: an upstream-facing port (an endpoint, a switch's upstream port) and the
downstream-facing port above it (a root port, a switch's downstream port).  Each end reports
its own maximum (Link Capabilities) and both report the same current speed and width (Link
Status).  The link trains to the lower of the two maxima, so a Gen5 x16 NIC in a Gen4 x8 slot
tops out at 16 GT/s x8 (PCI Express Base Specification, 4.2 "Link Initialization and
Training": the link comes up at the highest rate and width both components support).  That
lower value is the link's **capability**; a link is **degraded** when it runs below its
capability, not below one end's maximum.  A root port whose x8 card is in place reads "x8 of
max x16": not a fault.

A function whose link registers mean nothing (:mod:`topoagent.core.quirks`) has no capability and
is never degraded, and neither is the port at the other end of that link: both report the same
(meaningless) link.
"""

from __future__ import annotations

import msgspec

from topoagent.core.quirks import link_quirk
from topoagent.core.snapshot import LinkInfo
from topoagent.core.topology import BridgeRole, Device, Topology

__all__ = ["LinkCapability", "capability", "link_partner", "meaningful", "shortfall"]

_DOWNSTREAM_FACING = (BridgeRole.ROOT_PORT, BridgeRole.SWITCH_DOWNSTREAM)


class LinkCapability(msgspec.Struct, frozen=True):
    """What a link can train to (the lower of both ends' maxima); None where unknown."""

    gts: float | None = None
    width: int | None = None


def meaningful(d: Device) -> bool:
    """Whether ``d``'s link registers describe a real link (no quirk covers it)."""
    port = d.config.pcie_port_type if d.config is not None else None
    return link_quirk(d.vendor_id, d.device_id, port) is None


def link_partner(topo: Topology, d: Device) -> Device | None:
    """The device at the other end of the link ``d`` reports: for a downstream-facing port the
    function below it, for anything else its parent (the port above it)."""
    if d.role in _DOWNSTREAM_FACING and d.bdf is not None:
        kids = [c for c in topo.children(d.bdf) if not c.is_vf]
        return kids[0] if kids else None
    return topo.by_bdf(d.parent) if d.parent else None


def _lower(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else min(a, b)


def capability(topo: Topology, d: Device) -> LinkCapability:
    """The capability of the link ``d`` reports: min(its maximum, its partner's maximum)."""
    p = link_partner(topo, d)
    if not meaningful(d) or (p is not None and not meaningful(p)):
        return LinkCapability()
    other = p.link if p is not None else LinkInfo()
    width = _lower(d.link.max_width, other.max_width)
    return LinkCapability(_lower(d.link.max_gts, other.max_gts), int(width) if width is not None else None)


def shortfall(current_gts: float | None, current_width: int | None, cap: LinkCapability) -> tuple[bool, bool]:
    """(width below capability, speed below capability) of one reading; unknowns are not short."""
    width_low = current_width is not None and cap.width is not None and current_width < cap.width
    speed_low = current_gts is not None and cap.gts is not None and current_gts < cap.gts
    return width_low, speed_low
