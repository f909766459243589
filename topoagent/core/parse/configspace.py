"""Parse the bytes of a function's PCI configuration space.

Works on every view the kernel hands out through ``/sys/bus/pci/devices/X/config``: 64 bytes
(the header only, what an unprivileged reader gets), 256 (conventional space) and 4096 (PCIe
extended space, with CAP_SYS_ADMIN).  Offsets follow the PCI Local Bus Spec 3.0 §6 and the PCIe
Base Spec §7.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from topoagent.core.errors import InputError
from topoagent.core.pci import EXT_CAP_ID_ACS
from topoagent.core.snapshot import AcsInfo, ConfigSpace, LinkInfo, SriovCap

CAP_ID_PCIE = 0x10
#: Bridge Subsystem Vendor ID capability (PCI-to-PCI Bridge Architecture Spec 1.2, 3.2.5.13);
#: its vendor and device ids sit at +4 and +6 (include/uapi/linux/pci_regs.h PCI_SSVID_*).
CAP_ID_SSVID = 0x0D
#: Advanced Error Reporting (PCIe Base Spec 7.8.4): the kernel keeps AER counters for it.
EXT_CAP_ID_AER = 0x0001
#: SR-IOV extended capability and its registers (SR-IOV spec 1.1, 3.3; include/uapi/linux/
#: pci_regs.h PCI_SRIOV_TOTAL_VF, _NUM_VF, _VF_OFFSET, _VF_STRIDE, _VF_DID).
EXT_CAP_ID_SRIOV = 0x0010
_SRIOV_REGS = (0x0E, 0x10, 0x14, 0x16, 0x1A)

#: Link speed codes of Link Capabilities/Status (bits 3:0), in GT/s per lane.
SPEED_CODES = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


class ConfigSpaceError(InputError):
    """Bytes too short or malformed to be a configuration space header."""


_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from


def _u16(data: bytes, off: int) -> int | None:
    return _U16(data, off)[0] if off + 2 <= len(data) else None


def _u32(data: bytes, off: int) -> int | None:
    return _U32(data, off)[0] if off + 4 <= len(data) else None


def _link(cap: int | None, status: int | None) -> LinkInfo | None:
    if cap is None and status is None:
        return None

    def width(v: int | None) -> int | None:
        w = (v >> 4) & 0x3F if v is not None else None
        return w or None  # 0 lanes: link down / not trained

    return LinkInfo(
        current_gts=SPEED_CODES.get(status & 0xF) if status is not None else None,
        current_width=width(status),
        max_gts=SPEED_CODES.get(cap & 0xF) if cap is not None else None,
        max_width=width(cap),
    )


class _Standard(NamedTuple):
    """What the standard capability list says."""

    port_type: int | None
    link: LinkInfo | None
    ssvid: tuple[int, int] | None
    #: Whether the whole list was read (not cut off by a short read, a loop or a bad pointer).
    listed: bool
    caps: tuple[int, ...]


def _standard_caps(data: bytes) -> _Standard:
    """Walk the standard capability list: pointer at 0x34 when Status bit 4 says there is one;
    at most 48 entries (the list lives in 0x40..0xFF) so a corrupt loop ends."""
    size = len(data)
    port_type: int | None = None
    link: LinkInfo | None = None
    ssvid: tuple[int, int] | None = None
    caps: list[int] = []
    ptr = data[0x34] & 0xFC if data[0x06] & 0x10 else 0
    seen: set[int] = set()
    while ptr:
        if ptr < 0x40 or ptr in seen or len(seen) >= 48 or ptr + 2 > size:
            # a pointer into the header, a loop, too long (corrupt), or a list that runs past
            # what could be read (the 64-byte unprivileged view)
            return _Standard(port_type, link, ssvid, False, tuple(caps))
        seen.add(ptr)
        cap_id = data[ptr]
        caps.append(cap_id)
        if cap_id == CAP_ID_PCIE and link is None:
            flags = _u16(data, ptr + 0x02)
            if flags is not None:
                port_type = (flags >> 4) & 0xF
            link = _link(_u32(data, ptr + 0x0C), _u16(data, ptr + 0x12))
        elif cap_id == CAP_ID_SSVID and ssvid is None:
            if ptr + 8 > size:
                return _Standard(port_type, link, ssvid, False, tuple(caps))
            ssvid = (_U16(data, ptr + 4)[0], _U16(data, ptr + 6)[0])
        ptr = data[ptr + 1] & 0xFC
    return _Standard(port_type, link, ssvid, True, tuple(caps))


class _Extended(NamedTuple):
    """What the extended capability list says (empty where the bytes stop at 256)."""

    caps: tuple[int, ...]
    acs: AcsInfo | None
    sriov: SriovCap | None


def _extended_caps(data: bytes) -> _Extended:
    """Walk the extended capability list from 0x100 (PCIe Base Spec 7.6.3): a 32-bit header,
    id bits 15:0, next offset 31:20; at most 512 entries, none visited twice."""
    size = len(data)
    caps: list[int] = []
    acs: AcsInfo | None = None
    sriov: SriovCap | None = None
    off = 0x100
    visited: set[int] = set()
    while off and off not in visited and off + 4 <= size and len(visited) < 512:
        visited.add(off)
        header = _U32(data, off)[0]
        if header in (0, 0xFFFFFFFF):
            break  # no extended capabilities (conventional PCI device behind the bridge)
        cap_id = header & 0xFFFF
        caps.append(cap_id)
        if cap_id == EXT_CAP_ID_ACS and off + 8 <= size:
            acs = AcsInfo(capability=_U16(data, off + 4)[0], control=_U16(data, off + 6)[0], offset=off)
        elif cap_id == EXT_CAP_ID_SRIOV and sriov is None and off + 0x1C <= size:
            # through VF Device ID, the last register used
            sriov = SriovCap(*(_U16(data, off + r)[0] for r in _SRIOV_REGS))
        nxt = (header >> 20) & 0xFFC
        off = nxt if nxt >= 0x100 else 0
    return _Extended(tuple(caps), acs, sriov)


def parse_config_space(data: bytes, *, virtual_function: bool = False) -> ConfigSpace:
    """Parse a configuration space of any readable length (at least the 64-byte header).

    A vendor id of 0xffff or 0 means no device answered -- except on an SR-IOV virtual
    function, whose Vendor ID and Device ID registers read 0xffff by design (SR-IOV spec
    §3.4.1.1-2; Linux takes the ids from the PF instead, drivers/pci/iov.c).
    """
    size = len(data)
    if size < 64:
        raise ConfigSpaceError(f"config space truncated: {size} bytes, need 64")
    vendor, device = _U16(data, 0x00)[0], _U16(data, 0x02)[0]  # the 64-byte header is there
    if vendor in (0xFFFF, 0x0000) and not virtual_function:
        raise ConfigSpaceError(f"config space reads vendor {vendor:#06x}: device absent")
    header_type = data[0x0E] & 0x7F
    bridge = header_type == 1
    std = _standard_caps(data)
    extended = size >= 0x104
    ext = _extended_caps(data) if extended else _Extended((), None, None)
    return ConfigSpace(
        size=size,
        header_type=header_type,
        pcie_port_type=std.port_type,
        link=std.link,
        secondary_bus=data[0x19] if bridge else None,
        subordinate_bus=data[0x1A] if bridge else None,
        extended_readable=extended,
        extended_caps=ext.caps,
        acs=ext.acs,
        vendor_device=None if virtual_function else (vendor, device),
        subsystem=_subsystem(data, header_type, std.ssvid, std.listed),
        sriov=ext.sriov,
        caps=std.caps,
    )


def _subsystem(data: bytes, header_type: int, ssvid: tuple[int, int] | None, listed: bool) -> tuple[int, int] | None:
    """The subsystem ids the kernel shows in sysfs (drivers/pci/probe.c, pci_setup_device):
    a type-0 header's registers at 0x2C; a bridge's from its SSVID capability, 0 and 0 when it
    has none -- known only when the whole capability list could be read.  None: ask sysfs."""
    if header_type == 0:
        return (_u16(data, 0x2C) or 0, _u16(data, 0x2E) or 0)
    if header_type == 1 and (ssvid is not None or listed):
        return ssvid or (0, 0)
    return None
