"""The facts of a parsed ``lstopo`` console tree: NUMA nodes (CPUs, memory), PCI functions
with their NUMA node, netdevs and RDMA devices, and -- where ``-v`` gave every bridge its busid
-- the PCIe tree (``sysfs_path``-like strings from the nesting, as :mod:`.lspci` builds them).

Without ``-v`` a ``PCIBridge`` names no function: the devices' place in the tree is then
unknown and no path between them is computed from it (their NUMA node still is lstopo's).
"""

from __future__ import annotations

from topoagent.core.parse.lstopo import LstopoDevice, LstopoReport
from topoagent.core.snapshot import NetDevice, NumaNode, PciFunction, ProbeError, RdmaDevice, Snapshot, SourceStatus

__all__ = ["snapshot_from_lstopo"]


def _path(d: LstopoDevice) -> str | None:
    if not d.path_known or d.bdf is None:
        return None
    first = d.ancestors[0] if d.ancestors else d.bdf
    return "/".join((f"pci{first.rsplit(':', 2)[0]}:{first.split(':')[-2]}", *d.ancestors, d.bdf))


def snapshot_from_lstopo(report: LstopoReport) -> Snapshot:
    """The snapshot of one lstopo tree."""
    fns: list[PciFunction] = []
    netdevs: list[NetDevice] = []
    rdma: list[RdmaDevice] = []
    unnamed = 0
    for d in report.devices:
        if d.bdf is None:
            unnamed += 1
            continue
        names = tuple(name for kind, name in d.osdevs if kind == "OpenFabrics")
        fns.append(
            PciFunction(
                bdf=d.bdf,
                sysfs_path=_path(d),
                class_code=d.class_code << 8 if d.class_code is not None else None,
                vendor_id=d.vendor_id,
                device_id=d.device_id,
                numa_node=d.numa_node,
                numa_source="lstopo" if d.numa_node is not None else None,
                rdma_names=names,
                rdma=True if names else None,
            )
        )
        netdevs += [NetDevice(name, d.bdf) for kind, name in d.osdevs if kind == "Net"]
        rdma += [RdmaDevice(name, d.bdf) for name in names]
    notes = []
    if unnamed:
        notes.append(
            f"{unnamed} bridge(s) printed without a busid (lstopo without -v): the PCIe tree below them is unknown, "
            "their devices' NUMA nodes are lstopo's"
        )
    status = SourceStatus("lstopo", "partial" if notes else "ok", "; ".join(notes) or None)
    errors = tuple(ProbeError(path=f"lstopo {s.where}", error=s.why) for s in report.skipped)
    return Snapshot(
        hostname=None,
        root=None,
        numa_nodes=tuple(NumaNode(n.id, n.cpus, n.memory_bytes, cpus_file="lstopo") for n in report.nodes),
        pci=tuple(fns),
        netdevs=tuple(netdevs),
        rdma=tuple(rdma),
        sources=(status,),
        probe_errors=errors,
    )
