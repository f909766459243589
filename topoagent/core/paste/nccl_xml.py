"""The facts of a parsed NCCL (or RCCL) topology XML: NUMA nodes with their CPUs, the PCI
functions NCCL sees with their NUMA node and link, its network devices as RDMA devices at the
functions NCCL places them (a ConnectX-8 Data Direct NET at its DMA function, a NIC to NCCL), the CPU's
identity, and the GPU links it states (NVLink, through NVSwitches or direct; RCCL's XGMI).

NCCL's nesting drops root ports and switch downstream ports (a ``<pci>`` hangs below the
function two levels up its sysfs path: :mod:`topoagent.core.parse.nccl_xml`), so a bridge here
is a switch's upstream port: each is given that port type, and each ``<pci>`` its place below
them.  The file cannot tell whether two devices under one ``<cpu>`` share a host bridge (NCCL
calls both PHB): those of one PCI domain are put on one (NCCL's PHB), another domain on its own
(NODE, as on a Grace tray).  A file of several hosts (multi-node NVLink dumps repeat the
``<cpu>`` elements with another ``host_hash``): the first host is read, the others are set aside
with a note.
"""

from __future__ import annotations

from itertools import combinations

import msgspec

from topoagent.core import pci
from topoagent.core.bdf import bdf_key
from topoagent.core.parse.nccl_xml import NcclPci, NcclTopology
from topoagent.core.parse.segment import NCCL_XML
from topoagent.core.pathclass import XGMI
from topoagent.core.snapshot import (
    ConfigSpace,
    CpuIdentity,
    GivenPath,
    LinkInfo,
    NumaNode,
    PciFunction,
    ProbeError,
    RdmaDevice,
    RdmaPort,
    Snapshot,
    SourceStatus,
)

__all__ = ["EVIDENCE", "snapshot_from_nccl_xml"]

#: How evidence names the source (the paste kind's ``evidence``) and a function's NUMA source.
EVIDENCE = NCCL_XML.evidence
#: A switch upstream port (PCIe capability port type 5): every bridge NCCL's XML holds.
_UPSTREAM = 5
#: The class NCCL gives an NVSwitch (``tclass`` of an ``<nvlink>`` to one, src/graph/topo.cc).
_NVSWITCH_CLASS = 0x068000


def _host(topo: NcclTopology) -> tuple[set[int], list[str]]:
    """The ``<cpu>`` indexes of the first host and the notes on the others."""
    if len(topo.hosts) <= 1:
        return set(range(len(topo.cpus))), []
    first = topo.hosts[0]
    keep = {i for i, c in enumerate(topo.cpus) if c.host_hash in (first, None)}
    return keep, [
        f"the file holds {len(topo.hosts)} hosts (host_hash {', '.join(topo.hosts)}, a multi-node NVLink dump): "
        f"the first one's {len(keep)} <cpu> elements are read, the others set aside"
    ]


def _paths(topo: NcclTopology, pcis: list[NcclPci]) -> dict[str, str]:
    """Each function's sysfs-like path: a root bus per ``<cpu>`` and PCI domain (named by the
    lowest bus NCCL puts directly below that ``<cpu>``), then the ``<pci>`` chain."""
    by_bdf = {p.bdf: p for p in pcis}
    roots: dict[tuple[int, str], str] = {}
    for p in pcis:
        if p.parent is None:
            dom, bus = p.bdf.split(":")[:2]
            key = (p.cpu, dom)
            roots[key] = min(roots.get(key, bus), bus)
    out: dict[str, str] = {}
    for p in pcis:
        chain = [p.bdf]
        top = p
        while top.parent is not None and top.parent in by_bdf and len(chain) <= len(pcis):
            top = by_bdf[top.parent]
            chain.append(top.bdf)
        dom = top.bdf.split(":")[0]
        root = f"pci{dom}:{roots.get((top.cpu, dom), top.bdf.split(':')[1])}"
        out[p.bdf] = "/".join([root, *reversed(chain)])
    return out


def _function(p: NcclPci, path: str, numa: int | None) -> PciFunction:
    bridge = p.class_code is not None and pci.is_p2p_bridge_class(p.class_code)
    link = LinkInfo(max_gts=p.link_gts, max_width=p.link_width)
    names = tuple(n.name for n in p.nets)
    # NCCL makes any <pci> holding a <nic> a NIC (topo.cc ncclTopoAddPci), whatever its class: a
    # ConnectX-8 Data Direct DMA function (class 0x080100) is the NET NCCL uses
    nic = bool(names) and (p.class_code is None or p.class_code >> 16 != 0x02)
    return PciFunction(
        bdf=p.bdf,
        sysfs_path=path,
        class_code=None if nic else p.class_code,
        vendor_id=p.vendor_id,
        device_id=p.device_id,
        subsystem_vendor_id=p.subsystem_vendor_id,
        subsystem_device_id=p.subsystem_device_id,
        numa_node=numa,
        numa_source=EVIDENCE if numa is not None else None,
        link=link,
        # NCCL writes only switch upstream ports (module docstring); its config space is unread
        config=ConfigSpace(size=64, header_type=1, pcie_port_type=_UPSTREAM) if bridge else None,
        rdma_names=names,
        rdma=True if names else None,
        kind="nic" if nic else "gpu" if p.gpu is not None and p.class_code is None else None,
    )


def _links(pcis: list[NcclPci], label: dict[str, str]) -> list[GivenPath]:
    """The GPU pairs the file links: NVLink direct or through NVSwitches (the narrower side's
    count, as nvidia-smi prints NV18 through them), XGMI (RCCL)."""
    gpus = [p for p in pcis if p.gpu is not None and p.bdf in label]
    out = []
    for a, b in combinations(gpus, 2):
        assert a.gpu is not None and b.gpu is not None
        if any(lk.kind == "xgmi" and lk.target == b.bdf for lk in a.gpu.links):
            out.append(GivenPath(label[a.bdf], label[b.bdf], XGMI))
            continue
        direct = sum(lk.count or 1 for lk in a.gpu.links if lk.kind == "nvlink" and lk.target == b.bdf)
        sw_a = sum(lk.count or 1 for lk in a.gpu.links if lk.kind == "nvlink" and lk.tclass == _NVSWITCH_CLASS)
        sw_b = sum(lk.count or 1 for lk in b.gpu.links if lk.kind == "nvlink" and lk.tclass == _NVSWITCH_CLASS)
        count = direct + min(sw_a, sw_b)
        if count:
            out.append(GivenPath(label[a.bdf], label[b.bdf], f"NV{count}"))
    return out


def snapshot_from_nccl_xml(topo: NcclTopology) -> Snapshot:
    """The snapshot of one NCCL topology file (see the module's docstring)."""
    keep, notes = _host(topo)
    pcis, seen, errors = [], set(), []
    for p in topo.pcis:
        if p.cpu not in keep:
            continue
        if p.bdf in seen:  # one function, one place: a hand-written file may say it twice
            errors.append(ProbeError(f"{EVIDENCE} <pci busid={p.bdf}>", "placed twice: the second one set aside"))
            continue
        seen.add(p.bdf)
        pcis.append(p)
    paths = _paths(topo, pcis)
    fns = [_function(p, paths[p.bdf], topo.cpus[p.cpu].numaid) for p in pcis]
    # GPUs labelled as nvidia-smi and rocm-smi number them (PCI bus order), for the links' pairs
    label = {b: f"GPU{i}" for i, b in enumerate(sorted((p.bdf for p in pcis if p.gpu is not None), key=bdf_key))}
    fns = [msgspec.structs.replace(f, label=label[f.bdf]) if f.bdf in label else f for f in fns]
    rdma = [
        RdmaDevice(n.name, p.bdf, (RdmaPort(n.port or 1, rate_gbps=n.speed_mbps / 1000 if n.speed_mbps else None),))
        for p in pcis
        for n in p.nets
    ]
    nodes: dict[int, NumaNode] = {}
    for i in sorted(keep):
        c = topo.cpus[i]
        if c.numaid is not None and c.numaid >= 0 and c.numaid not in nodes:
            nodes[c.numaid] = NumaNode(c.numaid, c.affinity, cpus_file=EVIDENCE if c.affinity is not None else None)
    first = topo.cpus[min(keep)] if keep else None
    ident = CpuIdentity(first.arch, first.vendor, first.familyid, first.modelid) if first is not None else None
    if not pcis:
        notes.append("the file places no PCI device")
    status = SourceStatus(EVIDENCE, "partial" if notes or topo.skipped or errors else "ok", "; ".join(notes) or None)
    return Snapshot(
        hostname=None,
        root=None,
        numa_nodes=tuple(nodes[k] for k in sorted(nodes)),
        pci=tuple(fns),
        rdma=tuple(rdma),
        given_paths=tuple(_links(pcis, label)),
        cpu_identity=ident,
        sources=(status,),
        probe_errors=tuple(ProbeError(f"{EVIDENCE} {s.where}", s.why) for s in topo.skipped) + tuple(errors),
    )
