"""``esxcli hardware pci list`` (VMware ESXi): one block per PCI function.

The shape, as ESXi prints it (samples with provenance in tests/vms_samples/README.md)::

    0000:3b:00.0
       Address: 0000:3b:00.0
       Segment: 0x0000
       Bus: 0x3b
       Slot: 0x00
       Function: 0x0
       VMkernel Name:
       Vendor Name: NVIDIA Corporation
       Device Name: GV100GL [Tesla V100 PCIe 32GB]
       Configured Owner: VM Passthru
       Current Owner: VM Passthru
       Vendor ID: 0x10de
       Device ID: 0x1db6
       ...
       Device Class: 0x0302
       Programming Interface: 0x00
       ...
       NUMA Node: 0
       Passthru Capable: true

The address is written the Linux way (hex bus, ``dddd:bb:dd.f``): unlike a .vmx's
``pciPassthruN.id`` (see :mod:`topoagent.features.vms.vmx`).  ``NUMA Node`` exists only from
ESXi 6.7 on (vsish's ``pciConfigHeader`` gained it then; vbondzio/sowasvonunsupported,
pci2numa.sh) and may be missing, ``-1``, or ``4294967295`` (the same -1 read unsigned, as
vsish prints it): all three mean *unknown*, never node 0.  Keys are matched without regard to
case (some tools save the output lower-cased), CRLF line ends are accepted.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import is_bdf, normalize_bus_id
from topoagent.core.digits import parse_decimal
from topoagent.core.errors import InputError

__all__ = ["EsxPciDevice", "EsxcliError", "parse_esxcli_pci_list"]


class EsxcliError(InputError):
    """Text that is not ``esxcli hardware pci list`` output."""


class EsxPciDevice(msgspec.Struct, frozen=True):
    """One function as ESXi lists it; ``class_code`` is 24-bit (class, subclass, prog-if)."""

    bdf: str
    vendor_id: int | None
    device_id: int | None
    class_code: int | None
    vendor_name: str | None
    device_name: str | None
    numa_node: int | None
    passthru_capable: bool | None
    current_owner: str | None
    vmkernel_name: str | None


_HEX = re.compile(r"^(?:0[xX])?[0-9a-fA-F]{1,8}$")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 ./()-]*")
_PROMPT = re.compile(r"esxcli|^\s*[\[$~]|[#$>]\s")
#: numa_node as vsish and some esxcli builds print "no node": -1 read as an unsigned 32-bit int.
_UNSIGNED_MINUS_ONE = 0xFFFFFFFF


def _hex(value: str | None, what: str, where: str) -> int | None:
    text = (value or "").strip()
    if not text:
        return None
    if _HEX.match(text) is None:  # ASCII hex only: int(…, 16) would also take "١" or "1_0"
        raise EsxcliError(f"{where}: {what} {text!r} is not a hex number")
    return int(text, 16)


def _numa(value: str | None, where: str) -> int | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        node = parse_decimal(text, signed=True)
    except ValueError:
        raise EsxcliError(f"{where}: NUMA Node {text!r} is not a number") from None
    if node < 0 or node == _UNSIGNED_MINUS_ONE:
        return None  # ESXi's "no NUMA node" (see the module docstring)
    return node


def _bool(value: str | None) -> bool | None:
    if value is None or not value.strip():
        return None
    return value.strip().lower() == "true"


def _field(line: str) -> tuple[str, str] | None:
    """An indented ``Vendor ID: 0x10de`` line as ``("vendor id", "0x10de")`` (the one space
    after the colon dropped), None for a line of another shape.  Split at the colon, not by one
    regex: a lazy key followed by ``\\s*:`` is quadratic in a run of spaces."""
    key, sep, value = line.partition(":")
    key = key.strip()
    if not sep or not line[:1].isspace() or not _KEY.fullmatch(key):
        return None
    return key.lower(), value[1:] if value[:1].isspace() else value


def _device(header: str, fields: dict[str, str], line_no: int) -> EsxPciDevice:
    address = fields.get("address", header).strip()
    bdf = normalize_bus_id(address) if is_bdf(address) else None
    if bdf is None:
        raise EsxcliError(f"line {line_no}: {address!r} is not a PCI address (dddd:bb:dd.f)")
    where = f"device {bdf}"
    cls16 = _hex(fields.get("device class"), "Device Class", where)
    progif = _hex(fields.get("programming interface"), "Programming Interface", where)
    class_code = None if cls16 is None else (cls16 << 8) | (progif or 0)

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value.strip() or None if value is not None else None

    return EsxPciDevice(
        bdf=bdf,
        vendor_id=_hex(fields.get("vendor id"), "Vendor ID", where),
        device_id=_hex(fields.get("device id"), "Device ID", where),
        class_code=class_code,
        vendor_name=text("vendor name"),
        device_name=text("device name"),
        numa_node=_numa(fields.get("numa node"), where),
        passthru_capable=_bool(fields.get("passthru capable")),
        current_owner=text("current owner"),
        vmkernel_name=text("vmkernel name"),
    )


def parse_esxcli_pci_list(text: str) -> tuple[EsxPciDevice, ...]:
    """Every device block of ``esxcli hardware pci list`` output, in the order given.

    :class:`EsxcliError` names the line when a block's address is not a PCI address, a value
    that must be a number is not, or no block is found at all.
    """
    devices: list[EsxPciDevice] = []
    header: str | None = None
    header_line = 0
    fields: dict[str, str] = {}
    seen: set[str] = set()

    def close() -> None:
        if header is None:
            return
        dev = _device(header, fields, header_line)
        if dev.bdf in seen:
            raise EsxcliError(f"line {header_line}: device {dev.bdf} listed twice")
        seen.add(dev.bdf)
        devices.append(dev)

    for no, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():  # a block header: the address alone on its line
            if not is_bdf(line.strip()) and _PROMPT.search(line):
                continue  # the shell prompt and command a paste often starts with
            close()
            header, header_line, fields = line.strip(), no, {}
            continue
        kv = _field(line)
        if kv is None:
            continue  # a wrapped value or decoration: nothing we read
        if header is None:
            raise EsxcliError(f"line {no}: {line.strip()!r} comes before any device address line")
        fields.setdefault(*kv)
    close()
    if not devices:
        raise EsxcliError("no device blocks found: not `esxcli hardware pci list` output")
    return tuple(devices)
