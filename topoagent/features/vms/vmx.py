"""VMware ``.vmx`` files: ``key = "value"`` lines, and the PCI passthrough and NUMA settings in them.

A .vmx is one setting per line, ``key = "value"``, ``#`` comments, often CRLF line ends; keys
are case-insensitive (``pciPassthru0.id`` and ``pcipassthru0.id`` are one key) and a later line
overrides an earlier one.  Read here: ``displayName``, ``numvcpus``, ``memSize`` (MiB),
``numa.nodeAffinity``, ``sched.cpu.affinity``, ``sched.mem.affinity`` and every
``pciPassthruN.present/.id/.deviceId/.vendorId/.systemId`` (``N`` = 0…).

``pciPassthruN.id`` is not a Linux BDF.  ESXi writes it with the format ``%05d:%03d:%02d.%d``,
every field decimal, so the function Linux calls ``0000:3b:00.0`` is ``"00000:059:00.0"`` and
``0000:0d:00.0`` is ``"00000:013:00.0"``; a hand-written hex BDF is refused by ESXi at power-on.
The forms accepted (where each was seen: tests/vms_samples/README.md):

=====================  =========================================  ==========================
form                   example                                    read as
=====================  =========================================  ==========================
ESXi's own             ``00000:059:00.0``, ``00000:002:00.1``     decimal (5:3:2.1 digits)
short decimal          ``0:66:0.0`` (bus 0x42), ``0:134:0.0``      decimal (no zero padding)
Linux-style            ``0000:3b:00.0``                           hex, with a warning: ESXi
                                                                  would not power the VM on
bus:slot.fn            ``59:00.0``                                ambiguous: both readings
                                                                  are kept, the host decides
=====================  =========================================  ==========================

A present device without an id (Dynamic DirectPath I/O picks the device at power-on, vGPU
profiles name no function) is kept with ``bdfs = ()``: its node cannot be known from the file.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError
from topoagent.core.frozen import FrozenMap

__all__ = ["PassthruDevice", "VmxConfig", "VmxError", "parse_passthru_id", "parse_vmx"]


class VmxError(InputError):
    """Text that is not a .vmx, or a passthrough entry that cannot be read."""


class PassthruDevice(msgspec.Struct, frozen=True):
    """One ``pciPassthruN`` entry that is present.

    ``bdfs``: the Linux BDFs the id can mean (one, or two for the ambiguous ``bus:slot.fn``
    form, none when there is no id); ``warning``: what is odd about the id, for a person.
    """

    index: int
    id: str | None
    bdfs: tuple[str, ...]
    vendor_id: int | None
    device_id: int | None
    system_id: str | None
    warning: str | None = None


class VmxConfig(msgspec.Struct, frozen=True):
    """The NUMA-relevant settings of a VMware .vmx file."""

    display_name: str | None
    numvcpus: int | None
    memory_bytes: int | None
    node_affinity: str | None
    cpu_affinity: str | None
    mem_affinity: str | None
    devices: tuple[PassthruDevice, ...]
    #: every setting, keys lower-cased
    settings: FrozenMap[str, str]


# Matched against a stripped line, so the value needs no trailing ``\s*`` (a lazy value before
# one would be quadratic in a run of spaces).
_LINE = re.compile(r"([A-Za-z0-9_.:\[\]-]+)\s*=\s*(.*)")
_ESXI_FORM = re.compile(r"^([0-9]{5}):([0-9]{3}):([0-9]{2})\.([0-9])$")
_DECIMAL = re.compile(r"^([0-9]{1,5}):([0-9]{1,3}):([0-9]{1,2})\.([0-9])$")
_LINUX = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_SHORT = re.compile(r"^([0-9a-fA-F]{1,3}):([0-9a-fA-F]{1,2})\.([0-7])$")
_NUMBER = re.compile(r"^-?(0[xX][0-9a-fA-F]{1,8}|[0-9]{1,19})$")
_PASSTHRU = re.compile(r"^pcipassthru([0-9]{1,9})\.(present|id|deviceid|vendorid|systemid)$")


def _bdf(dom: int, bus: int, slot: int, fn: int) -> str | None:
    if dom > 0xFFFF or bus > 0xFF or slot > 0x1F or fn > 7:
        return None
    return f"{dom:04x}:{bus:02x}:{slot:02x}.{fn:x}"


def parse_passthru_id(text: str) -> tuple[tuple[str, ...], str | None]:
    """The Linux BDFs a ``pciPassthruN.id`` can mean, and a warning (or None).

    :class:`VmxError` when the text is none of the accepted forms (see the module docstring).
    """
    value = text.strip()
    m = _ESXI_FORM.match(value)
    linux = _LINUX.match(value)
    if m is None and linux is None:
        m = _DECIMAL.match(value)
    if m is not None:
        bdf = _bdf(*(int(g, 10) for g in m.groups()))
        if bdf is None:
            raise VmxError(f"pciPassthru id {value!r}: decimal fields out of range for a PCI address")
        return (bdf,), None
    if linux is not None:
        bdf = _bdf(*(int(g, 16) for g in linux.groups()))
        if bdf is None:
            raise VmxError(f"pciPassthru id {value!r}: out of range for a PCI address")
        return (bdf,), (
            f"id {value!r} is written as a Linux (hex) BDF; ESXi writes ids as "
            f"%05d:%03d:%02d.%d decimal and refuses this one at power-on"
        )
    short = _SHORT.match(value)
    if short is not None:
        readings: list[str] = []
        if all(is_decimal(g) for g in short.groups()):
            dec = _bdf(0, *(int(g, 10) for g in short.groups()))
            if dec is not None:
                readings.append(dec)
        hexed = _bdf(0, *(int(g, 16) for g in short.groups()))
        if hexed is not None and hexed not in readings:
            readings.append(hexed)
        if not readings:
            raise VmxError(f"pciPassthru id {value!r}: out of range for a PCI address")
        warning = (
            None
            if len(readings) == 1
            else f"id {value!r} has no segment: read as decimal ({readings[0]}) or hex ({readings[1]})"
        )
        return tuple(readings), warning
    raise VmxError(
        f"pciPassthru id {value!r} is not a PCI address ESXi writes "
        f'(expected e.g. "00000:059:00.0", decimal %05d:%03d:%02d.%d)'
    )


def _unquote(raw: str, line_no: int) -> str:
    if raw.startswith('"'):
        if len(raw) < 2 or not raw.endswith('"'):
            raise VmxError(f"line {line_no}: value {raw!r} has no closing quote")
        raw = raw[1:-1]
    # VMware escapes special characters in values as |XX (hex): |22 is '"', |7C is '|'.
    return re.sub(r"\|([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw)


def _int(value: str | None, what: str) -> int | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if _NUMBER.match(text) is None:
            raise ValueError(text)
        number = int(text, 0)  # ASCII decimal or 0x hex only (topoagent.core.digits' rule)
    except ValueError:
        raise VmxError(f"{what} {value!r} is not a number") from None
    # The vSphere API hands ids > 32767 as negative shorts (two's complement); undo that.
    return number & 0xFFFF if number < 0 else number


def parse_vmx(text: str) -> VmxConfig:
    """A .vmx file's settings and its present passthrough devices, in ``N`` order."""
    settings: dict[str, str] = {}
    for no, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            raise VmxError(f'line {no}: {line[:60]!r} is not a `key = "value"` setting')
        settings[m.group(1).lower()] = _unquote(m.group(2), no)
    if not settings:
        raise VmxError("no settings found: not a .vmx file")

    entries: dict[int, dict[str, str]] = {}
    for key, value in settings.items():
        pm = _PASSTHRU.match(key)
        if pm is not None:
            if len(pm.group(1)) > 1 and pm.group(1).startswith("0"):  # keys are exact: 00 is not 0
                raise VmxError(
                    f"{key}: a pciPassthru number with a leading zero is not one VMware writes "
                    f"(ambiguous with pciPassthru{int(pm.group(1))}): refused"
                )
            entries.setdefault(int(pm.group(1)), {})[pm.group(2)] = value
    devices = []
    for index in sorted(entries):
        entry = entries[index]
        if entry.get("present", "").strip().lower() != "true":
            continue
        where = f"pciPassthru{index}"
        ident = entry.get("id", "").strip() or None
        bdfs: tuple[str, ...] = ()
        warning = None
        if ident is None:
            warning = (
                f"{where} has no id: the device is chosen at power-on (Dynamic DirectPath "
                f"I/O or vGPU), so its NUMA node is not known from the .vmx"
            )
        else:
            try:
                bdfs, warning = parse_passthru_id(ident)
            except VmxError as exc:
                raise VmxError(f"{where}.id: {exc}") from None
        devices.append(
            PassthruDevice(
                index=index,
                id=ident,
                bdfs=bdfs,
                vendor_id=_int(entry.get("vendorid"), f"{where}.vendorId"),
                device_id=_int(entry.get("deviceid"), f"{where}.deviceId"),
                system_id=entry.get("systemid"),
                warning=warning,
            )
        )
    mem_mib = _int(settings.get("memsize"), "memSize")
    return VmxConfig(
        display_name=settings.get("displayname") or None,
        numvcpus=_int(settings.get("numvcpus"), "numvcpus"),
        memory_bytes=mem_mib * 1024 * 1024 if mem_mib is not None else None,
        node_affinity=settings.get("numa.nodeaffinity") or None,
        cpu_affinity=settings.get("sched.cpu.affinity") or None,
        mem_affinity=settings.get("sched.mem.affinity") or None,
        devices=tuple(devices),
        settings=FrozenMap(settings),
    )
