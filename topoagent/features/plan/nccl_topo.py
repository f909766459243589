"""``plan --format nccl-topo``: this host's PCIe tree as an NCCL topology file (NCCL_TOPO_FILE).

Element and attribute names are those NCCL's XML reader takes (NCCL src/graph/xml.cc,
``ncclTopoXmlLoadSystem``/``ncclTopoXmlLoadCpu``/``ncclTopoXmlLoadPci``/``ncclTopoXmlLoadNic``,
and src/graph/topo.cc, ``ncclTopoAddCpu``/``ncclTopoAddPci``/``ncclTopoAddNet``)::

    <system version="1">
      <cpu numaid="0" affinity="..." arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
        <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc030" ...
             link_speed="32.0 GT/s PCIe" link_width="16">
          <pci busid="0000:1b:00.0" class="0x030200" ...><gpu dev="0"/></pci>
          <pci busid="0000:18:00.0" class="0x020700" ...><nic><net name="mlx5_0" speed="400000" port="1"/></nic></pci>

The nesting is NCCL's own: a device hangs below the PCI function two levels up its sysfs path
(a switch is known by its upstream port; root ports vanish), and below the ``<cpu>`` of its
NUMA node when that walk reaches the root bus (``ncclTopoGetXmlFromSys``).  ``link_speed`` and
``link_width`` are the lower of the device's and its port's maxima, spelled as sysfs spells
them.  NCCL's reader is strict: double quotes, one space between attributes, no XML
declaration -- the writer below follows it.

Every rank of a node loads the file, completes it from its own view, and NCCL fuses the ranks'
trees (``ncclTopoFuseXml``), matching an element only when its name and *every* attribute are
equal (xml.h ``xmlFindNode``).  NCCL completes only the path above the rank's own GPU
(``ncclTopoGetXmlFromSys``/``ncclTopoGetXmlFromCpu`` add what is missing), so an attribute left
out of one ``<cpu>`` or ``<pci>`` makes the ranks' copies differ and the fused system holds that
CPU twice (SYS between its halves).  Hence every ``<cpu>`` carries ``numaid``, ``affinity``
(none for numaid -1, as NCCL reads none), ``arch`` and, on x86, ``vendor``, ``familyid`` and
``modelid`` (``ncclTopoAddCpu`` requires ``familyid``/``modelid`` for Intel and reads ``familyid``
for AMD); every ``<pci>`` the eight attributes NCCL reads from sysfs.  Where the CPU identity or a
node's CPUs are unknown (pasted tool output) and the file would hold several ``<cpu>``, it is
refused rather than written to be fused wrong; with a single ``<cpu>`` they are left for NCCL to
fill, the same on every rank.

A ConnectX-8 with a Data Direct DMA function has two ``<net>``s: its RDMA device's name at its own
function and ``<name>_dma`` at the DMA function, in the order ``NCCL_IB_DATA_DIRECT=2`` lists them
(:func:`~topoagent.core.analysis.ncclnet.net_functions`); NCCL keeps the ones its IB plugin lists
(``ncclTopoPopulateNics``, ``ncclTopoTrimXml``), so each setting finds its NETs where sysfs puts them.

Left out on purpose, for NCCL to fill on the host: ``dev`` of a ``<net>`` (its net plugin's device
index, which NCCL sets itself -- older releases kept a file's value, which cannot know the
plugin's order), ``gdr``, ``maxconn``, ``guid``, ``coll``, ``latency``, and ``sm``/``rank``/
``gdr`` of a ``<gpu>`` (NCCL sets those only where unset, so a guess here would override its own
detection); ``<gpu dev>`` and ``<nvlink>`` are written only from NVML.  A GPU the scan calls unusable
(FELL_OFF_BUS) is left out, as from ``gres.conf``.  NCCL has no NODE class:
devices under different host bridges of one NUMA node share its ``<cpu>`` and are PHB to NCCL.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import msgspec

from topoagent.core.analysis.ncclnet import DMA_SUFFIX, nccl_nesting, nccl_order, net_functions
from topoagent.core.errors import InputError
from topoagent.core.pci import DeviceKind
from topoagent.core.render.escape import xml_attr
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import CpuIdentity, active_port
from topoagent.core.topology import Device, Topology

#: Attribute order of a <cpu> and a <pci>, as NCCL's own topology dumps write them.
CPU_ATTRS = ("numaid", "affinity", "arch", "vendor", "familyid", "modelid")


class Element(msgspec.Struct):
    """An XML element: name, attributes in order, children."""

    name: str
    attrs: list[tuple[str, str]] = msgspec.field(default_factory=list)
    children: list[Element] = msgspec.field(default_factory=list)


def link_speed(gts: float | None) -> str:
    """A speed in the spelling NCCL's table knows (``16.0 GT/s PCIe``); "" when unknown."""
    return f"{gts:.1f} GT/s PCIe" if gts else ""


def _pci(topo: Topology, d: Device) -> Element:
    parent = topo.by_bdf(d.parent) if d.parent else None
    speeds = [x for x in (d.link.max_gts, parent.link.max_gts if parent else None) if x]
    widths = [x for x in (d.link.max_width, parent.link.max_width if parent else None) if x]
    attrs = [("busid", d.bdf or ""), ("class", f"0x{d.class_code:06x}" if d.class_code is not None else "0x000000")]
    for name, value in (
        ("vendor", d.vendor_id),
        ("device", d.device_id),
        ("subsystem_vendor", d.subsystem_vendor_id),
        ("subsystem_device", d.subsystem_device_id),
    ):
        if value is not None:
            attrs.append((name, f"0x{value:04x}"))
    attrs += [
        ("link_speed", link_speed(min(speeds) if speeds else None)),
        ("link_width", str(min(widths) if widths else 0)),
    ]
    return Element("pci", attrs)


def _nets(nic: Device, suffix: str = "") -> list[Element]:
    out = []
    names = nic.rdma_devices or nic.netdevs
    for name in names:
        attrs = [("name", name + suffix)]
        ports = nic.rdma_ports.get(name)
        speed = None
        port = None
        if ports:
            speed = max((p.rate_gbps or 0) for p in ports) * 1000 or None
            port = active_port(ports)
        elif nic.netdev_speeds.get(name):
            speed = nic.netdev_speeds[name]
        if speed:
            attrs.append(("speed", str(int(speed))))
        if port is not None:
            attrs.append(("port", str(port)))
        out.append(Element("net", attrs))
    return out


def build(result: ScanResult) -> Element:
    """The <system> element of a scanned host, its elements in the order NCCL's own fused tree
    holds them (:func:`~topoagent.core.analysis.ncclnet.nccl_order`): NCCL numbers its GPUs and
    NETs in the file's order, so the file gives the order NCCL reading sysfs would."""
    topo = result.topology
    # a GPU a finding makes unusable (FELL_OFF_BUS) is left out: NCCL on the host cannot see it either
    wanted = [
        d
        for d in topo.devices
        if d.bdf is not None
        and not d.is_vf
        and d.kind in (DeviceKind.GPU, DeviceKind.NIC)
        and d.id not in result.unusable
    ]
    gpus = [d for d in wanted if d.kind is DeviceKind.GPU]
    if not gpus:
        raise InputError("an NCCL topology needs GPUs with PCI addresses (a sysfs tree, a capture or lspci output)")
    nics = [d for d in wanted if d.kind is DeviceKind.NIC]
    order = nccl_order(topo, gpus, nics, every_mode=True)
    at = {d.id: i for i, d in enumerate(order)}
    dma_of: dict[str, list[Device]] = {}  # a Data Direct DMA function's NICs, in the plugin's order
    for nic in sorted(nics, key=lambda x: at[x.id]):
        place = net_functions(topo, nic)[0]
        if place is not nic:
            dma_of.setdefault(place.id, []).append(nic)
    elements: dict[str, Element] = {}
    cpus: dict[int, Element] = {}
    for d in order:
        node, chain = nccl_nesting(topo, d)
        if node not in cpus:
            attrs = [("numaid", str(node))]
            n = topo.node(node)
            if n is not None and n.cpus:
                attrs.append(("affinity", n.cpus.mask()))
            cpus[node] = Element("cpu", attrs + cpu_identity_attrs(topo.cpu_identity))
        parent = cpus[node]
        for x in chain:
            if x.id not in elements:
                elements[x.id] = _pci(topo, x)
                parent.children.append(elements[x.id])
            parent = elements[x.id]
        if d.kind is DeviceKind.GPU:
            parent.children.append(_gpu(topo, d))
        elif nets := ([x for nic in dma_of[d.id] for x in _nets(nic, DMA_SUFFIX)] if d.id in dma_of else _nets(d)):
            parent.children.append(Element("nic", [], nets))
    _check_fusable(cpus.values(), elements.values())
    return Element("system", [("version", "1")], list(cpus.values()))


def _gpu(topo: Topology, d: Device) -> Element:
    """A <gpu>: its ``dev`` and <nvlink> elements from NVML, else empty for NCCL to fill."""
    nv = d.nvml
    if nv is None:
        return Element("gpu")
    gpu = Element("gpu", [("dev", str(nv.index))])
    for link in nv.nvlinks:
        peer = topo.by_bdf(link.peer_bdf)
        tclass = f"0x{peer.class_code:06x}" if peer is not None and peer.class_code else "0x068000"
        gpu.children.append(
            Element("nvlink", [("target", link.peer_bdf), ("count", str(link.count)), ("tclass", tclass)])
        )
    return gpu


def cpu_identity_attrs(cpu: CpuIdentity | None) -> list[tuple[str, str]]:
    """The identity attributes of a ``<cpu>``: ``arch``, and on x86 ``vendor``, ``familyid`` and
    ``modelid`` -- all of them or none, for NCCL to fill from its own CPUID where unset (xml.cc
    ``ncclTopoGetXmlFromCpu``).  From the snapshot: a capture replayed elsewhere names the
    captured CPU, not the replaying one."""
    if cpu is None or cpu.arch is None:
        return []
    if cpu.arch != "x86_64":
        return [("arch", cpu.arch)]  # NCCL reads no vendor/family/model off x86
    if not (cpu.vendor and cpu.familyid and cpu.modelid):
        return []
    return [("arch", cpu.arch), ("vendor", cpu.vendor), ("familyid", cpu.familyid), ("modelid", cpu.modelid)]


#: What NCCL reads from sysfs for a ``<pci>`` when unset (xml.cc ``ncclTopoGetXmlFromSys``).
PCI_ATTRS = ("busid", "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "link_speed", "link_width")


def _check_fusable(cpus: Collection[Element], pcis: Iterable[Element]) -> None:
    """Refuse a file whose ``<cpu>`` or ``<pci>`` elements NCCL would complete differently on each
    rank (only above the rank's own GPU), which fuses them into duplicates."""
    for el in pcis:
        a = dict(el.attrs)
        missing = [k for k in PCI_ATTRS if k not in a]
        if missing:
            raise InputError(
                f"an NCCL topology needs {', '.join(missing)} on every <pci> (NCCL completes only the "
                f"path above each rank's own GPU, and ranks' files that differ fuse into duplicate "
                f"switches); this input does not say them for {a['busid']}: give lspci -vvvnn output, "
                f"a capture, or run plan on the host"
            )
    if len(cpus) < 2:
        return  # one <cpu>: every rank completes it alike
    for el in cpus:
        a = dict(el.attrs)
        missing = [
            k
            for k in CPU_ATTRS
            if k not in a
            and not (k == "affinity" and a["numaid"] == "-1")
            and not (k in CPU_ATTRS[3:] and a.get("arch") not in (None, "x86_64"))
        ]
        if missing:
            raise InputError(
                f"an NCCL topology of several NUMA nodes needs {', '.join(missing)} on every <cpu> "
                f"(NCCL fills them only above each rank's own GPU, and ranks' files that differ fuse "
                f"into duplicate CPUs); this input does not say them: run plan on the host or on a capture"
            )


def serialize(el: Element, indent: int = 0) -> str:
    """NCCL's dump format (``ncclTopoDumpXmlRec``): two-space indent, ``name="value"``; values
    escaped as XML attributes (:func:`~topoagent.core.render.escape.xml_attr`), so a device name
    holding ``"``, ``<`` or ``&`` stays data (real names hold none: nothing changes for them)."""
    head = " " * indent + "<" + el.name + "".join(f' {k}="{xml_attr(v)}"' for k, v in el.attrs)
    if not el.children:
        return head + "/>\n"
    return head + ">\n" + "".join(serialize(c, indent + 2) for c in el.children) + " " * indent + f"</{el.name}>\n"


def render(result: ScanResult, **_: Any) -> str:
    """``plan --format nccl-topo``: the XML for NCCL_TOPO_FILE."""
    return serialize(build(result))
