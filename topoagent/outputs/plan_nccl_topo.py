"""``plan --format nccl-topo``: this host's PCIe tree as an NCCL topology file (NCCL_TOPO_FILE).

Element and attribute names are those NCCL's XML reader takes (NCCL src/graph/xml.cc,
``ncclTopoXmlLoadSystem``/``ncclTopoXmlLoadCpu``/``ncclTopoXmlLoadPci``/``ncclTopoXmlLoadNic``,
and src/graph/topo.cc, ``ncclTopoAddCpu``/``ncclTopoAddPci``/``ncclTopoAddNet``)::

    <system version="1">
      <cpu numaid="0" affinity="..." arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
        <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc030" ...
             link_speed="32.0 GT/s PCIe" link_width="16">
          <pci busid="0000:1b:00.0" class="0x030200" ...><gpu dev="0"/></pci>
          <pci busid="0000:18:00.0" class="0x020700" ...><nic><net name="mlx5_0" dev="0" speed="400000" port="1"/></nic></pci>

The nesting is NCCL's own: a device hangs below the PCI function two levels up its sysfs path
(a switch is known by its upstream port; root ports vanish), and below the ``<cpu>`` of its
NUMA node when that walk reaches the root bus (``ncclTopoGetXmlFromSys``).  ``link_speed`` and
``link_width`` are the lower of the device's and its port's maxima, spelled as sysfs spells
them.  NCCL's reader is strict: double quotes, one space between attributes, no XML
declaration -- the writer below follows it.

Left out on purpose, for NCCL to fill on the host: ``gdr``, ``maxconn``, ``guid``, ``coll`` and
``latency`` of a ``<net>`` and ``sm``/``rank``/``gdr`` of a ``<gpu>`` (NCCL sets those only where
unset, so a guess here would override its own detection); ``<gpu dev>`` and ``<nvlink>`` are
written only from NVML.  NCCL has no NODE class: devices under different host bridges of one
NUMA node share its ``<cpu>`` and are PHB to NCCL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topoagent.errors import InputError
from topoagent.outputs.escape import xml_attr
from topoagent.records import field, record
from topoagent.result import ScanResult
from topoagent.topology import Device, DeviceKind, Topology

#: Attribute order of a <cpu> and a <pci>, as NCCL's own topology dumps write them.
CPU_ATTRS = ("numaid", "affinity", "arch", "vendor", "familyid", "modelid")


@record(frozen=False)
class Element:
    """An XML element: name, attributes in order, children."""

    name: str
    attrs: list[tuple[str, str]] = field(default_factory=list)
    children: list[Element] = field(default_factory=list)


def link_speed(gts: float | None) -> str:
    """A speed in the spelling NCCL's table knows (``16.0 GT/s PCIe``); "" when unknown."""
    return f"{gts:.1f} GT/s PCIe" if gts else ""


def nccl_parent(d: Device) -> str | None:
    """The BDF of the function NCCL nests ``d`` under, None for the <cpu>: two levels up the
    sysfs path, unless that walk reaches the root bus first."""
    return d.ancestors[-2] if len(d.ancestors) >= 2 else None


def _pci(topo: Topology, d: Device) -> Element:
    parent = topo.by_bdf(d.parent) if d.parent else None
    speeds = [x for x in (d.link.max_gts, parent.link.max_gts if parent else None) if x]
    widths = [x for x in (d.link.max_width, parent.link.max_width if parent else None) if x]
    attrs = [("busid", d.bdf or ""),
             ("class", f"0x{d.class_code:06x}" if d.class_code is not None else "0x000000")]
    for name, value in (("vendor", d.vendor_id), ("device", d.device_id),
                        ("subsystem_vendor", d.subsystem_vendor_id), ("subsystem_device", d.subsystem_device_id)):
        if value is not None:
            attrs.append((name, f"0x{value:04x}"))
    attrs += [("link_speed", link_speed(min(speeds) if speeds else None)),
              ("link_width", str(min(widths) if widths else 0))]
    return Element("pci", attrs)


def _nets(topo: Topology, nic: Device, first_dev: int) -> list[Element]:
    rates = {r.name: r for r in topo.snapshot.rdma}
    speed_of_netdev = {n.name: n.speed_mbps for n in topo.snapshot.netdevs}
    out = []
    names = nic.rdma_devices or nic.netdevs
    for i, name in enumerate(names):
        attrs = [("name", name), ("dev", str(first_dev + i))]
        r = rates.get(name)
        speed = None
        port = None
        if r is not None and r.ports:
            speed = max((p.rate_gbps or 0) for p in r.ports) * 1000 or None
            port = r.ports[0].port
        elif speed_of_netdev.get(name):
            speed = speed_of_netdev[name]
        if speed:
            attrs.append(("speed", str(int(speed))))
        if port is not None:
            attrs.append(("port", str(port)))
        out.append(Element("net", attrs))
    return out


def build(result: ScanResult, cpu: Mapping[str, str] | None = None) -> Element:
    """The <system> element of a scanned host."""
    topo = result.topology
    nvml = {g.bdf: g for g in topo.snapshot.nvml_gpus}
    wanted = [d for d in topo.devices if d.bdf is not None and not d.is_vf
              and d.kind in (DeviceKind.GPU, DeviceKind.NIC)]
    if not any(d.kind is DeviceKind.GPU for d in wanted):
        raise InputError("an NCCL topology needs GPUs with PCI addresses (a sysfs tree, a capture or lspci output)")
    elements: dict[str, Element] = {}
    cpus: dict[int, Element] = {}
    net_dev = 0

    def place(d: Device) -> Element:
        assert d.bdf is not None
        if d.bdf in elements:
            return elements[d.bdf]
        el = elements[d.bdf] = _pci(topo, d)
        up = nccl_parent(d)
        up_dev = topo.by_bdf(up) if up else None
        if up_dev is not None:
            place(up_dev).children.append(el)
        else:
            node = d.numa_node if d.numa_node is not None else -1
            if node not in cpus:
                attrs = [("numaid", str(node))]
                n = topo.node(d.numa_node)
                if n is not None and n.cpus:
                    attrs.append(("affinity", n.cpus.mask()))
                attrs += [(k, (cpu or {})[k]) for k in CPU_ATTRS[2:] if (cpu or {}).get(k)]
                cpus[node] = Element("cpu", attrs)
            cpus[node].children.append(el)
        return el

    for d in wanted:
        el = place(d)
        if d.kind is DeviceKind.GPU:
            nv = nvml.get(d.bdf) if d.bdf else None
            gpu = Element("gpu", [("dev", str(nv.index))] if nv is not None else [])
            if nv is not None:
                for link in nv.nvlinks:
                    peer = topo.by_bdf(link.peer_bdf)
                    tclass = f"0x{peer.class_code:06x}" if peer is not None and peer.class_code else "0x068000"
                    gpu.children.append(Element("nvlink", [("target", link.peer_bdf), ("count", str(link.count)),
                                                           ("tclass", tclass)]))
            el.children.append(gpu)
        else:
            nets = _nets(topo, d, net_dev)
            net_dev += len(nets)
            if nets:
                el.children.append(Element("nic", [], nets))
    for e in [*elements.values(), *cpus.values()]:
        e.children.sort(key=lambda c: dict(c.attrs).get("busid", ""))
    return Element("system", [("version", "1")], [cpus[k] for k in sorted(cpus)])


def serialize(el: Element, indent: int = 0) -> str:
    """NCCL's dump format (``ncclTopoDumpXmlRec``): two-space indent, ``name="value"``; values
    escaped as XML attributes (:func:`~topoagent.outputs.escape.xml_attr`), so a device name
    holding ``"``, ``<`` or ``&`` stays data (real names hold none: nothing changes for them)."""
    head = " " * indent + "<" + el.name + "".join(f' {k}="{xml_attr(v)}"' for k, v in el.attrs)
    if not el.children:
        return head + "/>\n"
    return head + ">\n" + "".join(serialize(c, indent + 2) for c in el.children) + " " * indent + f"</{el.name}>\n"


def render(result: ScanResult, cpu: Mapping[str, str] | None = None, **_: Any) -> str:
    """``plan --format nccl-topo``: the XML for NCCL_TOPO_FILE."""
    return serialize(build(result, cpu))
