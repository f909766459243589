"""Devices whose PCIe link registers mean nothing: one entry per quirk, each with its public
reference.  A link finding is never raised for a function a quirk covers.

Add a quirk only with a public source that says so (a kernel commit, a datasheet, the PCIe
spec) and a test; never to silence one machine.
"""

from __future__ import annotations

import msgspec

from topoagent.core.pci import INTEL, PORT_CODES

__all__ = ["LINK_QUIRKS", "LinkQuirk", "link_quirk"]


class LinkQuirk(msgspec.Struct, frozen=True):
    """Functions whose link width/speed registers are not a real link.

    A quirk matches by vendor and device ids, or by PCIe Device/Port Type, or both.
    """

    name: str
    why: str
    reference: str
    vendor: int | None = None
    devices: frozenset[int] = frozenset()
    port_types: frozenset[int] = frozenset()

    def matches(self, vendor: int | None, device: int | None, port_type: int | None) -> bool:
        """Whether this quirk covers a function with these ids and port type."""
        if self.port_types and port_type in self.port_types:
            return True
        return self.vendor is not None and vendor == self.vendor and device in self.devices


LINK_QUIRKS: tuple[LinkQuirk, ...] = (
    LinkQuirk(
        name="Intel X722 LAN (Lewisburg PCH)",
        why="integrated in the C620-series chipset, on its internal fabric; its link registers report "
        "a nominal x1 link that says nothing of its bandwidth",
        reference="Linux i40e skips its PCIe bandwidth check for X722 (drivers/net/ethernet/intel/i40e/"
        "i40e_main.c, commit 3fced535079a); the X722 device ids are I40E_DEV_ID_*_X722 in i40e_devids.h",
        vendor=INTEL,
        devices=frozenset({0x37CE, 0x37CF, 0x37D0, 0x37D1, 0x37D2, 0x37D3}),
    ),
    LinkQuirk(
        name="Root Complex Integrated Endpoint",
        why="an RCiEP sits inside the root complex and has no PCIe link at all",
        reference="PCI Express Base Specification, PCI Express Capabilities Register, Device/Port "
        "Type 1001b (Root Complex Integrated Endpoint): no Link registers apply",
        port_types=frozenset({PORT_CODES["rc_integrated_endpoint"]}),
    ),
)


def link_quirk(vendor: int | None, device: int | None, port_type: int | None) -> LinkQuirk | None:
    """The quirk that makes a function's link registers meaningless, or None."""
    return next((q for q in LINK_QUIRKS if q.matches(vendor, device, port_type)), None)
