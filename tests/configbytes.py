"""Build PCI configuration-space bytes for parser tests (PCI 3.0 §6, PCIe Base §7)."""

from __future__ import annotations

import struct

SPEED_CODE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def config_bytes(
    *,
    size: int = 4096,
    vendor: int = 0x10B5,
    device: int = 0x8796,
    header_type: int = 0,
    port_type: int | None = 0,
    link_cap: tuple[float, int] | None = (16.0, 16),
    link_status: tuple[float, int] | None = (16.0, 16),
    buses: tuple[int, int, int] | None = None,
    acs: tuple[int, int] | None = None,
    pcie_at: int = 0x68,
    ssvid: tuple[int, int] | None = None,
    vf_device: int | None = None,
    vfs: tuple[int, int, int] = (0, 0, 0),
) -> bytes:
    b = bytearray(4096)
    struct.pack_into("<HH", b, 0x00, vendor, device)
    b[0x0E] = header_type
    if buses:
        b[0x18], b[0x19], b[0x1A] = buses
    if port_type is not None:
        struct.pack_into("<H", b, 0x06, 0x0010)  # capabilities list present
        b[0x34] = 0x40
        b[0x40], b[0x41] = 0x01, pcie_at  # power management -> PCIe
        if ssvid:  # power management -> bridge subsystem ids (at 0x58) -> PCIe
            b[0x41] = 0x58
            b[0x58], b[0x59] = 0x0D, pcie_at
            struct.pack_into("<HH", b, 0x5C, *ssvid)
        b[pcie_at], b[pcie_at + 1] = 0x10, 0x00
        struct.pack_into("<H", b, pcie_at + 2, 0x0002 | (port_type << 4))
        if link_cap:
            struct.pack_into("<I", b, pcie_at + 0x0C, SPEED_CODE[link_cap[0]] | (link_cap[1] << 4))
        if link_status:
            struct.pack_into("<H", b, pcie_at + 0x12, SPEED_CODE[link_status[0]] | (link_status[1] << 4))
    # Extended list: AER at 0x100 -> (ACS at 0x148) -> (SR-IOV at 0x160) -> end.
    nxt = 0x148 if acs else 0x160 if vf_device is not None else 0
    struct.pack_into("<I", b, 0x100, 0x0001 | (2 << 16) | (nxt << 20))
    if acs:
        nxt = 0x160 if vf_device is not None else 0
        struct.pack_into("<I", b, 0x148, 0x000D | (1 << 16) | (nxt << 20))
        struct.pack_into("<HH", b, 0x14C, acs[0], acs[1])
    if vf_device is not None:  # SR-IOV: TotalVFs 8, NumVFs, First VF Offset, VF Stride, VF Device ID
        struct.pack_into("<I", b, 0x160, 0x0010 | (1 << 16))
        struct.pack_into("<HH", b, 0x16E, 8, vfs[0])
        struct.pack_into("<HH", b, 0x174, vfs[1], vfs[2])
        struct.pack_into("<H", b, 0x17A, vf_device)
    return bytes(b[:size])
