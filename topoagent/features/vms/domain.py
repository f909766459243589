"""libvirt domain XML: read a definition into frozen values, and rewrite its NUMA affinity.

Pure: text in, values (or text) out; no file, no virsh.  What is read, per the libvirt domain
format (https://libvirt.org/formatdomain.html):

- ``<name>``, ``<uuid>``, ``<memory unit=…>`` (bytes), ``<vcpu placement=… cpuset=… current=…>N``;
- PCI passthrough: ``<hostdev mode='subsystem' type='pci' [managed='yes|no']>`` with
  ``<source><address domain= bus= slot= function=/>``, and SR-IOV VFs given as
  ``<interface type='hostdev'>`` with the same ``<source><address type='pci' …/>``;
- ``<numatune>``: ``<memory mode= nodeset= placement=/>`` and ``<memnode cellid= mode= nodeset=/>``;
- ``<cputune>``: ``<vcpupin vcpu= cpuset=/>``, ``<emulatorpin cpuset=/>``,
  ``<iothreadpin iothread= cpuset=/>``;
- guest NUMA cells: ``<cpu><numa><cell id= cpus= memory= unit=/>``.

Address numbers are read as libvirt reads them: ``virPCIDeviceAddressParseXML``
(src/conf/device_conf.c) uses ``virStrToLong_uip(…, 0)``, C's base 0, so ``0x1b`` is hex,
``27`` decimal and a leading ``0`` octal.  The BDF we give is Linux's ``dddd:bb:dd.f``.

CPU and node sets use libvirt's syntax (``0-3,^2,8``: ``virBitmapParse``, src/util/virbitmap.c),
which adds ``^N`` exclusions to the kernel's list format.

Safety: domain XML comes from virsh or from files under ``/etc/libvirt/qemu``, but a file can
be anything, so text holding a DOCTYPE or an entity declaration is refused before parsing
(no entity expansion, no external fetches), and so is text over :data:`MAX_XML_BYTES`.
``xml.etree`` is imported inside the functions: the scan path never pays for it.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import msgspec

from topoagent.core.cpuset import MAX_CPUS, CpuSet, CpuSetError
from topoagent.core.digits import parse_decimal
from topoagent.core.errors import InputError

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

__all__ = [
    "MAX_XML_BYTES",
    "Domain",
    "DomainXmlError",
    "GuestCell",
    "HostdevPci",
    "MemNode",
    "Pin",
    "canonical_xml",
    "parse_domain",
    "parse_libvirt_set",
    "with_affinity",
]

#: The largest domain definition we read (real ones are a few kB).
MAX_XML_BYTES = 4 * 1024 * 1024

_UNITS = {
    "b": 1,
    "bytes": 1,
    "kb": 1000,
    "k": 1024,
    "kib": 1024,
    "mb": 1000**2,
    "m": 1024**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "g": 1024**3,
    "gib": 1024**3,
    "tb": 1000**4,
    "t": 1024**4,
    "tib": 1024**4,
}  # libvirt's scaled integers (formatdomain.html#memory-allocation); the default unit is KiB


class DomainXmlError(InputError):
    """A domain definition that cannot be read (not XML, no <domain>, a bad address or set)."""


class HostdevPci(msgspec.Struct, frozen=True):
    """One PCI function passed through to the guest."""

    bdf: str
    managed: bool | None
    #: ``hostdev`` (``<hostdev type='pci'>``) or ``interface`` (``<interface type='hostdev'>``, a VF).
    via: str = "hostdev"


class Pin(msgspec.Struct, frozen=True):
    """A ``vcpupin``/``iothreadpin`` (``id`` is the vCPU or iothread number)."""

    id: int
    cpuset: str


class MemNode(msgspec.Struct, frozen=True):
    """A ``<numatune><memnode>``: one guest cell's memory mode and host nodes."""

    cellid: int
    mode: str | None
    nodeset: str


class GuestCell(msgspec.Struct, frozen=True):
    """A guest NUMA cell (``<cpu><numa><cell>``)."""

    id: int
    cpus: str
    memory_bytes: int | None


class Domain(msgspec.Struct, frozen=True):
    """What a domain definition says about its placement."""

    name: str
    uuid: str | None
    type: str | None
    vcpus: int | None
    vcpus_current: int | None
    vcpu_placement: str | None
    vcpu_cpuset: str | None
    memory_bytes: int | None
    hostdevs: tuple[HostdevPci, ...]
    numatune_mode: str | None
    numatune_nodeset: str | None
    numatune_placement: str | None
    memnodes: tuple[MemNode, ...]
    vcpupins: tuple[Pin, ...]
    emulatorpin: str | None
    iothreadpins: tuple[Pin, ...]
    cells: tuple[GuestCell, ...]


# -- sets -----------------------------------------------------------------------------------


def parse_libvirt_set(text: str, *, what: str = "cpuset") -> CpuSet:
    """libvirt's CPU/node set syntax (``0-3,^2,8``) as a set of ids; :class:`DomainXmlError`
    when it is not one (an empty text is the empty set).  The kernel's list format plus ``^N``
    exclusions, so both halves are read by :meth:`CpuSet.parse` (ASCII digits, bounded)."""
    keep: list[str] = []
    drop: list[str] = []
    for raw in text.split(","):
        chunk = raw.strip()
        if chunk.startswith("^"):
            chunk = chunk[1:].strip()
            if not chunk:
                raise DomainXmlError(f"bad {what} {text!r}")
            drop.append(chunk)
        elif chunk:
            keep.append(chunk)
    try:
        return CpuSet.parse(",".join(keep)) - CpuSet.parse(",".join(drop))
    except CpuSetError:
        raise DomainXmlError(f"bad {what} {text!r}") from None


_C_INT = re.compile(r"0x([0-9a-f]{1,16})|0([0-7]{1,22})")  # what a 64-bit long holds


def _c_int(value: str | None, what: str) -> int:
    """An integer the way C's ``strtol(…, 0)`` reads it: ``0x`` hex, leading ``0`` octal
    (``"010"`` = 8, which Python's base 0 would refuse); ASCII digits only."""
    if value is None:
        raise DomainXmlError(f"{what} missing")
    text = value.strip().lower()
    m = _C_INT.fullmatch(text)
    try:
        if m is not None:
            return int(m.group(1), 16) if m.group(1) is not None else int(m.group(2), 8)
        if len(text) > 1 and text.startswith("0"):
            raise ValueError(text)  # "08", "0x": C's octal or hex, malformed
        return parse_decimal(text, signed=True)
    except ValueError:
        raise DomainXmlError(f"{what} {value!r} is not a number") from None


def _bytes(value: str | None, unit: str | None, what: str) -> int | None:
    if value is None or not value.strip():
        return None
    scale = _UNITS.get((unit or "KiB").strip().lower())
    if scale is None:
        raise DomainXmlError(f"{what}: unknown unit {unit!r}")
    number = _int_or_none(value, what)
    return None if number is None else number * scale


def _int_or_none(value: str | None, what: str) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        return parse_decimal(value, signed=True)
    except ValueError:
        raise DomainXmlError(f"{what} {value!r} is not a number") from None


def _vcpu_count(value: str | None, what: str) -> int | None:
    """A vCPU count: 0 .. MAX_CPUS (a domain's vCPUs are pinned one by one, so the count
    drives loops: an absurd one is refused here, not iterated)."""
    number = _int_or_none(value, what)
    if number is not None and not 0 <= number <= MAX_CPUS:
        raise DomainXmlError(f"{what} {value!r} is out of range (0..{MAX_CPUS})")
    return number


# -- parsing --------------------------------------------------------------------------------

_FORBIDDEN = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def _root(text: str) -> Element:
    """The parsed ``<domain>`` element of ``text``, refusing what is unsafe or not a domain."""
    if len(text.encode("utf-8", errors="replace")) > MAX_XML_BYTES:
        raise DomainXmlError(f"larger than {MAX_XML_BYTES // (1024 * 1024)} MiB: not a domain definition")
    if _FORBIDDEN.search(text):
        raise DomainXmlError("holds a DOCTYPE or ENTITY declaration: refused (a domain definition has none)")
    if not text.strip():
        raise DomainXmlError("empty: no <domain> element")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DomainXmlError(f"not well-formed XML ({exc})") from None
    except UnicodeError:  # a lone surrogate: text no tool writes
        raise DomainXmlError("not text (holds characters that are not valid Unicode)") from None
    if root.tag != "domain":
        raise DomainXmlError(f"root element is <{root.tag}>, not <domain>")
    return root


def _address_bdf(addr: Element, where: str) -> str:
    """The Linux BDF of a ``<address domain= bus= slot= function=/>``."""
    dom = _c_int(addr.get("domain", "0"), f"{where}: address domain")
    bus = _c_int(addr.get("bus"), f"{where}: address bus")
    slot = _c_int(addr.get("slot"), f"{where}: address slot")
    fn = _c_int(addr.get("function"), f"{where}: address function")
    if not (0 <= dom <= 0xFFFFFFFF and 0 <= bus <= 0xFF and 0 <= slot <= 0x1F and 0 <= fn <= 7):
        raise DomainXmlError(
            f"{where}: PCI address out of range (domain {dom:#x}, bus {bus:#x}, slot {slot:#x}, function {fn})"
        )
    return f"{dom:04x}:{bus:02x}:{slot:02x}.{fn:x}"


def _managed(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "on", "true")


def _hostdevs(root: Element) -> tuple[HostdevPci, ...]:
    out: list[HostdevPci] = []
    devices = root.find("devices")
    if devices is None:
        return ()
    for n, hd in enumerate(devices.findall("hostdev")):
        if hd.get("mode", "subsystem") != "subsystem" or hd.get("type") != "pci":
            continue
        addr = hd.find("source/address")
        if addr is None:
            raise DomainXmlError(f"hostdev #{n + 1} (type pci) has no <source><address>")
        out.append(HostdevPci(_address_bdf(addr, f"hostdev #{n + 1}"), _managed(hd.get("managed"))))
    for n, iface in enumerate(devices.findall("interface")):
        if iface.get("type") != "hostdev":
            continue
        addr = iface.find("source/address")
        if addr is None or addr.get("type", "pci") != "pci":
            continue  # a USB or other non-PCI hostdev interface: not ours
        out.append(
            HostdevPci(
                _address_bdf(addr, f"interface #{n + 1} (type hostdev)"),
                _managed(iface.get("managed")),
                via="interface",
            )
        )
    return tuple(out)


def _checked_set(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    parse_libvirt_set(value, what=what)
    return value.strip()


def _pins(tune: Element | None, tag: str, id_attr: str) -> tuple[Pin, ...]:
    if tune is None:
        return ()
    out = []
    for el in tune.findall(tag):
        ident = _int_or_none(el.get(id_attr), f"<{tag} {id_attr}>")
        cpuset = _checked_set(el.get("cpuset"), f"<{tag}> cpuset")
        if ident is None or cpuset is None:
            raise DomainXmlError(f"<{tag}> needs {id_attr} and cpuset")
        out.append(Pin(ident, cpuset))
    return tuple(out)


def parse_domain(text: str) -> Domain:
    """A domain definition (``virsh dumpxml`` output or an ``/etc/libvirt/qemu/*.xml`` file)."""
    root = _root(text)
    name = (root.findtext("name") or "").strip()
    if not name:
        raise DomainXmlError("<domain> has no <name>")
    vcpu = root.find("vcpu")
    vcpus = _vcpu_count(vcpu.text, "<vcpu>") if vcpu is not None else None
    mem = root.find("memory")
    memory = _bytes(mem.text, mem.get("unit"), "<memory>") if mem is not None else None
    numatune = root.find("numatune")
    nmem = numatune.find("memory") if numatune is not None else None
    memnodes = tuple(
        MemNode(
            _c_int(m.get("cellid"), "<memnode cellid>"),
            m.get("mode"),
            _checked_set(m.get("nodeset"), "<memnode> nodeset") or "",
        )
        for m in (numatune.findall("memnode") if numatune is not None else ())
    )
    cputune = root.find("cputune")
    emu = cputune.find("emulatorpin") if cputune is not None else None
    cells = tuple(
        GuestCell(
            _int_or_none(c.get("id"), "<cell id>") or 0 if c.get("id") is not None else i,
            _checked_set(c.get("cpus"), "<cell> cpus") or "",
            _bytes(c.get("memory"), c.get("unit"), "<cell memory>"),
        )
        for i, c in enumerate(root.findall("cpu/numa/cell"))
    )
    return Domain(
        name=name,
        uuid=(root.findtext("uuid") or "").strip() or None,
        type=root.get("type"),
        vcpus=vcpus,
        vcpus_current=_vcpu_count(vcpu.get("current"), "<vcpu current>") if vcpu is not None else None,
        vcpu_placement=vcpu.get("placement") if vcpu is not None else None,
        vcpu_cpuset=_checked_set(vcpu.get("cpuset"), "<vcpu> cpuset") if vcpu is not None else None,
        memory_bytes=memory,
        hostdevs=_hostdevs(root),
        numatune_mode=nmem.get("mode") if nmem is not None else None,
        numatune_nodeset=_checked_set(nmem.get("nodeset"), "<numatune> nodeset") if nmem is not None else None,
        numatune_placement=nmem.get("placement") if nmem is not None else None,
        memnodes=memnodes,
        vcpupins=_pins(cputune, "vcpupin", "vcpu"),
        emulatorpin=_checked_set(emu.get("cpuset"), "<emulatorpin> cpuset") if emu is not None else None,
        iothreadpins=_pins(cputune, "iothreadpin", "iothread"),
        cells=cells,
    )


# -- rewriting ------------------------------------------------------------------------------


def _register_prefixes(text: str) -> None:
    """Keep the document's namespace prefixes (``qemu:``, ``test:``) when it is written back.

    ElementTree names unknown namespaces ``ns0``; libvirt matches namespaces by URI, so that
    would still work, but a person reading the diff should see the prefixes they wrote.
    """
    try:
        for _event, (prefix, uri) in ET.iterparse(io.StringIO(text), events=("start-ns",)):
            if prefix:
                try:
                    ET.register_namespace(prefix, uri)
                except ValueError:
                    pass  # a reserved prefix (ns0…): ElementTree picks one
    except ET.ParseError:
        pass


def _serialise(root: Element) -> str:
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def canonical_xml(text: str) -> str:
    """``text`` re-indented the way :func:`with_affinity` writes, so the two diff line by line."""
    root = _root(text)  # size and DOCTYPE checks before anything parses the whole text
    _register_prefixes(text)
    return _serialise(root)


_AFTER_PINS = frozenset({"iothreadpin", "vcpusched", "iothreadsched", "emulatorsched", "cachetune", "memorytune"})


def _insert_after(root: Element, new: Element, after: tuple[str, ...]) -> None:
    """Insert ``new`` right after the last present element named in ``after`` (else at the end
    of the leading metadata), keeping libvirt's own order (vcpu, iothreads, cputune, numatune)."""
    children = list(root)
    pos = None
    for i, child in enumerate(children):
        if child.tag in after:
            pos = i
    root.insert(pos + 1 if pos is not None else len(children), new)


def with_affinity(
    text: str,
    *,
    cpuset: str,
    mem_mode: str,
    nodeset: str,
    memnodes: tuple[MemNode, ...] = (),
    vcpupins: tuple[Pin, ...] | None = None,
    emulatorpin: str | None = None,
) -> str:
    """The definition with its NUMA affinity set, and nothing else changed.

    Sets ``<vcpu placement='static' cpuset=…>`` (the count and ``current`` kept), replaces
    ``<numatune>`` with ``<memory mode= nodeset=>`` plus ``memnodes``, and -- only when
    ``vcpupins`` is given (``--pin``, or a split VM's per-cell pins) -- replaces the ``vcpupin``
    entries of ``<cputune>``, and its ``emulatorpin`` when one is given (its other settings
    kept).  Returned in :func:`canonical_xml`'s layout.
    """
    root = _root(text)  # size and DOCTYPE checks before anything parses the whole text
    _register_prefixes(text)
    vcpu = root.find("vcpu")
    if vcpu is None:
        raise DomainXmlError("<domain> has no <vcpu>: cannot set its cpuset")
    vcpu.set("placement", "static")
    vcpu.set("cpuset", cpuset)

    if vcpupins is not None:
        cputune = root.find("cputune")
        if cputune is None:
            cputune = ET.Element("cputune")
            _insert_after(root, cputune, ("vcpu", "vcpus", "iothreads", "iothreadids"))
        # Where libvirt writes them (virDomainCputuneDefFormat, src/conf/domain_conf.c): after
        # shares/period/quota, before iothreadpin and the schedulers -- so the diff stays small.
        children = list(cputune)
        # Without an emulatorpin of its own, the domain's is kept (a split VM's cell pins).
        replaced = ("vcpupin", "emulatorpin") if emulatorpin is not None else ("vcpupin",)
        old = [c for c in children if c.tag in replaced]
        later = [i for i, c in enumerate(children) if c.tag in _AFTER_PINS]
        at = children.index(old[0]) if old else (later[0] if later else len(children))
        for c in old:
            cputune.remove(c)
        pins = [ET.Element("vcpupin", {"vcpu": str(p.id), "cpuset": p.cpuset}) for p in vcpupins]
        if emulatorpin is not None:
            pins.append(ET.Element("emulatorpin", {"cpuset": emulatorpin}))
        for offset, el in enumerate(pins):
            cputune.insert(at + offset, el)

    numatune = root.find("numatune")
    fresh = ET.Element("numatune")
    ET.SubElement(fresh, "memory", {"mode": mem_mode, "nodeset": nodeset})
    for m in memnodes:
        ET.SubElement(fresh, "memnode", {"cellid": str(m.cellid), "mode": m.mode or mem_mode, "nodeset": m.nodeset})
    if numatune is not None:
        index = list(root).index(numatune)
        fresh.tail = numatune.tail
        root.remove(numatune)
        root.insert(index, fresh)
    else:
        _insert_after(root, fresh, ("vcpu", "vcpus", "iothreads", "iothreadids", "cputune"))
    return _serialise(root)
