"""PCI addresses: a function's BDF (``dddd:bb:dd.f``) and a root bus name (``pciDDDD:BB``).

Domains are 4 hex digits normally and up to 8 for VMD and some hypervisors (``10000:00:00.0``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: A PCI address as tools print it, the domain optional (``18:00.0``, ``0000:18:00.0``): a
#: pattern to build the pasted-output parsers' expressions from.
PRINTED_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_BDF = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_BUS_ID = re.compile(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*")


def is_bdf(name: str) -> bool:
    """Whether ``name`` is a full PCI function address (a sysfs directory name)."""
    return _BDF.fullmatch(name) is not None


def printed_bdf(text: str) -> str:
    """A PCI address a tool printed (:data:`PRINTED_BDF`) as sysfs names it (``0000:18:00.0``)."""
    dom, bus, rest = text.lower().rsplit(":", 2) if text.count(":") == 2 else ("0", *text.lower().split(":", 1))
    return f"{int(dom, 16):04x}:{bus}:{rest}"


def bdf_key(bdf: str) -> tuple[int, int, int, int]:
    """Sort key in PCI bus order (domain, bus, device, function) -- nvidia-smi's and CUDA's order."""
    dom, bus, devfn = bdf.split(":")
    dev, fn = devfn.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def vf_bdfs(pf: str, first_offset: int, stride: int, count: int) -> Iterator[str]:
    """The BDFs of an SR-IOV PF's first ``count`` VFs, where the kernel puts them: routing ID =
    the PF's + First VF Offset + n * VF Stride (SR-IOV spec 1.1, 3.3.9-3.3.10;
    drivers/pci/iov.c, pci_iov_virtfn_bus/_devfn).  Ends past the last bus (routing ID
    0xFFFF) and after one VF when the stride is 0 (it would name that VF again)."""
    _, bus, dev, fn = bdf_key(pf)
    first = (bus << 8 | dev << 3 | fn) + first_offset
    prefix = pf.split(":", 1)[0]
    for n in range(count if stride else min(count, 1)):
        rid = first + n * stride
        if rid > 0xFFFF:
            return
        yield f"{prefix}:{rid >> 8:02x}:{rid >> 3 & 0x1F:02x}.{rid & 7}"


def root_bus_key(name: str) -> tuple[int, int]:
    """Sort key of a root bus directory name (``pci0000:3d``)."""
    dom, bus = name[3:].split(":")
    return int(dom, 16), int(bus, 16)


def normalize_bus_id(value: Any) -> str | None:
    """NVML's PCI bus id (``00000000:1B:00.0``, bytes or str) as a sysfs BDF (``0000:1b:00.0``).

    ``None`` for an empty or malformed id.
    """
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).split(b"\0", 1)[0].decode("ascii", "replace")
    if not isinstance(value, str):
        return None
    m = _BUS_ID.fullmatch(value)
    if not m:
        return None
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"
