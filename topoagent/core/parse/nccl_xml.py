"""Parse an NCCL (or RCCL) topology XML: what ``NCCL_TOPO_DUMP_FILE`` writes and ``NCCL_TOPO_FILE``
reads -- the CPUs, the PCI tree NCCL sees, its GPUs and its network devices.

NCCL's format (NVIDIA/nccl ``src/graph/xml.cc``, ``ncclTopoDumpXmlRec`` and the loaders
``ncclTopoXmlLoadSystem/Cpu/Pci/Gpu/Nic``)::

    <system version="1">
      <cpu host_hash="0x..." numaid="0" affinity="00000000,ffffffff" arch="x86_64" vendor="GenuineIntel"
           familyid="6" modelid="143">
        <pci busid="0000:08:00.0" class="0x060400" vendor="0x1000" device="0xc030" ...
             link_speed="32.0 GT/s PCIe" link_width="16">
          <pci busid="0000:0f:00.0" class="0x030200" ...><gpu dev="0" sm="90" rank="0" gdr="1">
              <nvlink target="0000:1c:00.0" count="5" tclass="0x068000"/></gpu></pci>
          <pci busid="0000:0c:00.0" class="0x020000" ...><nic>
              <net name="mlx5_0" dev="0" speed="400000" port="1" guid="0x..." gdr="1"/></nic></pci>

A ``<pci>`` hangs below the function two levels up its sysfs path, below its ``<cpu>`` where that
walk reaches the root bus (``ncclTopoGetXmlFromSys``): root ports and switch downstream ports
never appear, so a bridge here is a switch's upstream port.  RCCL's models (ROCm/rccl
``tools/topo_expl/models``) use ``<system version="2">``, ``<xgmi>`` links between GPUs, a GPU's
``gcn`` and ``link_speed="16 GT/s"``; NCCL dumps of several hosts (multi-node NVLink) repeat the
``<cpu>`` elements with another ``host_hash``.  Pure and lenient: an element or attribute it
cannot read is skipped with its line (:class:`~topoagent.core.parse.paste.Skipped`); only a text
with no ``<system>`` is refused (:class:`NcclXmlParseError`).
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.cpuset import CpuSet, CpuSetError
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, merge_skipped

__all__ = [
    "START",
    "NcclCpu",
    "NcclGpu",
    "NcclLink",
    "NcclNet",
    "NcclPci",
    "NcclTopology",
    "NcclXmlParseError",
    "read_nccl_xml",
]


class NcclXmlParseError(InputError):
    """The text holds no NCCL topology (no ``<system>`` element)."""


#: The line an NCCL topology starts at: its ``<system>`` element.
START = re.compile(r"^\s*<system(?:\s+version=[\"']\d+[\"'])?\s*/?>")
# (attributes up to the next "<" or ">": a tag never closed costs its own text, nothing more)
_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)([^<>]*?)(/?)>")
_ATTR = re.compile(r"([\w.:-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
_BUSID = re.compile(rf"^{PRINTED_BDF}$")
#: Elements the format holds, by the parent that holds them (xml.cc's loaders; ``xgmi`` RCCL's).
_CHILDREN = {
    None: {"system"},
    "system": {"cpu"},
    "cpu": {"pci", "nic"},
    "pci": {"pci", "gpu", "nic", "pcilink"},
    "gpu": {"nvlink", "xgmi", "c2c"},
    "nic": {"net"},
}


class NcclNet(msgspec.Struct, frozen=True):
    """A ``<net>``: a network device of the net plugin (``mlx5_0``, ``mlx5_0_dma``)."""

    name: str
    speed_mbps: int | None = None
    port: int | None = None
    gdr: bool | None = None


class NcclLink(msgspec.Struct, frozen=True):
    """A GPU's ``<nvlink>``, ``<xgmi>`` (RCCL) or ``<c2c>``: its target's bus id (none for C2C),
    the link count and the target's class."""

    kind: str
    target: str | None = None
    count: int | None = None
    tclass: int | None = None


class NcclGpu(msgspec.Struct, frozen=True):
    """A ``<gpu>``: its device index, rank, SM (``sm``; RCCL's ``gcn`` names the architecture)."""

    dev: int | None = None
    rank: int | None = None
    sm: str | None = None
    gcn: str | None = None
    gdr: bool | None = None
    links: tuple[NcclLink, ...] = ()


class NcclPci(msgspec.Struct, frozen=True):
    """A ``<pci>``: the function, the ``<pci>`` it hangs below (None: its ``<cpu>``), the index of
    that ``<cpu>`` in :attr:`NcclTopology.cpus`, what the file says of it, and its GPU or NETs."""

    bdf: str
    parent: str | None
    cpu: int
    class_code: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    subsystem_vendor_id: int | None = None
    subsystem_device_id: int | None = None
    link_gts: float | None = None
    link_width: int | None = None
    gpu: NcclGpu | None = None
    nets: tuple[NcclNet, ...] = ()


class NcclCpu(msgspec.Struct, frozen=True):
    """A ``<cpu>``: a NUMA node (``numaid``, -1 unknown), its CPUs and the CPU's identity."""

    numaid: int | None
    affinity: CpuSet | None = None
    arch: str | None = None
    vendor: str | None = None
    familyid: str | None = None
    modelid: str | None = None
    host_hash: str | None = None


class NcclTopology(msgspec.Struct, frozen=True):
    """One file: ``version``, its ``<cpu>`` and ``<pci>`` elements in file order, the hosts
    (``host_hash`` values, in order of appearance) and the lines not read."""

    version: int | None
    cpus: tuple[NcclCpu, ...]
    pcis: tuple[NcclPci, ...]
    hosts: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()


def _int(value: str | None) -> int | None:
    """An attribute as ``strtol(value, NULL, 0)`` reads it (``0x1000``, ``16``), None if not a number."""
    if value is None:
        return None
    try:
        return int(value.strip(), 0)
    except ValueError:
        return None


def _flag(value: str | None) -> bool | None:
    n = _int(value)
    return None if n is None else n != 0


class _Open(msgspec.Struct):
    """An element being read: its name, attributes, line, and what its children gave."""

    name: str
    attrs: dict[str, str]
    line: int
    known: bool
    pci: int | None = None  # index in the pcis read, for a <pci>
    links: list[NcclLink] = msgspec.field(default_factory=list)
    nets: list[NcclNet] = msgspec.field(default_factory=list)


class _Reader:
    def __init__(self) -> None:
        self.version: int | None = None
        self.cpus: list[NcclCpu] = []
        self.pcis: list[NcclPci] = []
        self.skipped: list[Skipped] = []
        self.stack: list[_Open] = []

    def skip(self, line: int, why: str) -> None:
        self.skipped.append(Skipped(line, line, why))

    def open(self, name: str, attrs: dict[str, str], line: int) -> _Open:
        parent = self.stack[-1] if self.stack else None
        known = (parent is None or parent.known) and name in _CHILDREN.get(parent.name if parent else None, set())
        el = _Open(name, attrs, line, known)
        if not known:
            if parent is None or parent.known:
                self.skip(line, f"<{name}> is not an element of an NCCL topology here: skipped with what it holds")
            return el
        if name == "system":
            self.version = _int(attrs.get("version"))
        elif name == "cpu":
            self.cpus.append(_cpu(attrs, line, self))
        elif name == "pci":
            el.pci = self._pci(attrs, line, parent)
        return el

    def _pci(self, attrs: dict[str, str], line: int, parent: _Open | None) -> int | None:
        busid = attrs.get("busid", "")
        if not _BUSID.match(busid) or not self.cpus:
            self.skip(line, f"<pci> without a bus id ({busid!r}) or outside a <cpu>: skipped")
            return None
        up = self.pcis[parent.pci].bdf if parent is not None and parent.pci is not None else None
        self.pcis.append(
            NcclPci(
                bdf=printed_bdf(busid),
                parent=up,
                cpu=len(self.cpus) - 1,
                class_code=_int(attrs.get("class")),
                vendor_id=_int(attrs.get("vendor")),
                device_id=_int(attrs.get("device")),
                subsystem_vendor_id=_int(attrs.get("subsystem_vendor")),
                subsystem_device_id=_int(attrs.get("subsystem_device")),
                link_gts=float(m.group(1)) if (m := _SPEED.match(attrs.get("link_speed", ""))) else None,
                link_width=_int(attrs.get("link_width")) or None,
            )
        )
        return len(self.pcis) - 1

    def close(self, el: _Open) -> None:
        if not el.known:
            return
        parent = self.stack[-1] if self.stack else None
        a = el.attrs
        if el.name in ("nvlink", "xgmi", "c2c") and parent is not None:
            target = a.get("target")
            parent.links.append(
                NcclLink(el.name, printed_bdf(target) if target and _BUSID.match(target) else target,
                         _int(a.get("count")), _int(a.get("tclass")))
            )  # fmt: skip
        elif el.name == "net" and parent is not None:
            if not a.get("name"):
                self.skip(el.line, "<net> without a name: skipped")
            else:
                parent.nets.append(NcclNet(a["name"], _int(a.get("speed")), _int(a.get("port")), _flag(a.get("gdr"))))
        elif el.name == "nic" and parent is not None:
            parent.nets.extend(el.nets)  # a <nic> lends its NETs to its <pci>
        elif el.name == "gpu" and parent is not None and parent.pci is not None:
            gpu = NcclGpu(_int(a.get("dev")), _int(a.get("rank")), a.get("sm"), a.get("gcn"), _flag(a.get("gdr")),
                          tuple(el.links))  # fmt: skip
            self.pcis[parent.pci] = msgspec.structs.replace(self.pcis[parent.pci], gpu=gpu)
        elif el.name == "pci" and el.pci is not None and el.nets:
            self.pcis[el.pci] = msgspec.structs.replace(self.pcis[el.pci], nets=tuple(el.nets))


def _cpu(attrs: dict[str, str], line: int, r: _Reader) -> NcclCpu:
    affinity = None
    if "affinity" in attrs:
        try:
            affinity = CpuSet.parse_mask(attrs["affinity"])
        except CpuSetError as exc:
            r.skip(line, f"<cpu> affinity not read: {exc}")
    return NcclCpu(
        _int(attrs.get("numaid")),
        affinity,
        attrs.get("arch"),
        attrs.get("vendor"),
        attrs.get("familyid"),
        attrs.get("modelid"),
        attrs.get("host_hash"),
    )


def _line_of(starts: list[int], pos: int, first: int) -> int:
    """The 1-based line of offset ``pos`` (``starts``: each line's first offset)."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return first + lo


def read_nccl_xml(text: str) -> NcclTopology:
    """The topology in ``text`` (see the module's docstring).  Lines before ``<system>`` and after
    ``</system>`` are none of its business; blank lines a paste leaves inside are read through."""
    body = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    start = re.search(r"<system\b", body)
    if start is None:
        raise NcclXmlParseError("no <system> element: not an NCCL topology")
    starts = [0] + [m.end() for m in re.finditer(r"\n", body)]
    first = 1
    r = _Reader()
    pos = start.start()
    for m in _TAG.finditer(body, pos):
        line = _line_of(starts, m.start(), first)
        closing, name, raw, single = m.groups()
        if closing:
            if not r.stack or r.stack[-1].name != name:
                r.skip(line, f"</{name}> closes no open <{name}>: skipped")
                continue
            r.close(r.stack.pop())
            if not r.stack:
                break
            continue
        attrs = {k: a if a else b for k, a, b in _ATTR.findall(raw)}
        el = r.open(name, attrs, line)
        if single:
            r.stack.append(el)
            r.close(r.stack.pop())
        else:
            r.stack.append(el)
    while r.stack:  # unclosed (a paste cut short): what was read stands
        el = r.stack.pop()
        r.skip(el.line, f"<{el.name}> is never closed: the text ends inside it")
        r.close(el)
    hosts = tuple(dict.fromkeys(c.host_hash for c in r.cpus if c.host_hash))
    return NcclTopology(r.version, tuple(r.cpus), tuple(r.pcis), hosts, tuple(merge_skipped(r.skipped)))
