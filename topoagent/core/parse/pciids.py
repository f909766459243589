"""Parse the pci.ids database (the names ``lspci`` prints): vendors and their devices.

Format (https://pci-ids.ucw.cz/, the header of every ``pci.ids``)::

    vendor  vendor_name
    \\tdevice  device_name
    \\t\\tsubvendor subdevice  subsystem_name
    C class  class_name            (the class section, after all vendors)

Only vendor and device lines are kept; subsystem lines and the class section are skipped.
Pure and linear in the size of the text; a line that does not fit the format is skipped.
"""

from __future__ import annotations

import re

import msgspec

__all__ = ["PciIds", "parse_pci_ids"]

_VENDOR = re.compile(r"([0-9a-fA-F]{4})\s+(\S.{0,200})")
_DEVICE = re.compile(r"\t([0-9a-fA-F]{4})\s+(\S.{0,200})")


class PciIds(msgspec.Struct, frozen=True):
    """Vendor names by id, device names by (vendor, device)."""

    vendors: dict[int, str] = msgspec.field(default_factory=dict)
    devices: dict[tuple[int, int], str] = msgspec.field(default_factory=dict)

    def name(self, vendor: int, device: int) -> str | None:
        """``NVIDIA Corporation GH100 [H200 SXM 141GB]``, as lspci prints it; None if unknown."""
        dev = self.devices.get((vendor, device))
        if dev is None:
            return None
        ven = self.vendors.get(vendor)
        return f"{ven} {dev}" if ven else dev


def parse_pci_ids(text: str, vendors: frozenset[int] | None = None) -> PciIds:
    """The vendors and devices of a ``pci.ids`` text (only ``vendors`` when given)."""
    out = PciIds()
    current: int | None = None
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        if line[0] == "C" and line[1:2] == " ":
            break  # the class section: no vendors after it
        if line[0] != "\t":
            m = _VENDOR.fullmatch(line.rstrip())
            current = int(m.group(1), 16) if m else None
            if m and current is not None and (vendors is None or current in vendors):
                out.vendors[current] = m.group(2).strip()
            continue
        if current is None or line.startswith("\t\t") or (vendors is not None and current not in vendors):
            continue
        m = _DEVICE.fullmatch(line.rstrip())
        if m:
            out.devices[(current, int(m.group(1), 16))] = m.group(2).strip()
    return out
