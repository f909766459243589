"""The facts of a parsed ``lstopo`` console tree: NUMA nodes (CPUs, memory), PCI functions
with their NUMA node, netdevs and RDMA devices, and -- where ``-v`` gave every bridge its busid
-- the PCIe tree (``sysfs_path``-like strings from the nesting, as :mod:`.lspci` builds them).

Without ``-v`` a ``PCIBridge`` names no function, but the indentation still shows which GPUs
and NICs sit below which bridges of one host bridge: their classes are stated as nvidia-smi
names them (:func:`nested_class`), and their NUMA node is still lstopo's; between host bridges
the path is unknown.
"""

from __future__ import annotations

from itertools import combinations

from topoagent.core import pci
from topoagent.core.parse.lstopo import LstopoDevice, LstopoReport
from topoagent.core.snapshot import (
    GivenPath,
    NetDevice,
    NumaNode,
    PciFunction,
    ProbeError,
    RdmaDevice,
    Snapshot,
    SourceStatus,
)

__all__ = ["nested_class", "snapshot_from_lstopo"]


def _path(d: LstopoDevice) -> str | None:
    if not d.path_known or d.bdf is None:
        return None
    first = d.ancestors[0] if d.ancestors else d.bdf
    return "/".join((f"pci{first.rsplit(':', 2)[0]}:{first.split(':')[-2]}", *d.ancestors, d.bdf))


#: The OS devices hwloc attaches to a compute GPU (its NVML, CUDA, OpenCL, ROCm SMI, Level Zero
#: plugins: hwloc's ``GPU(NVML) "nvml0"``, ``CoProc(CUDA) "cuda0"``).
_COMPUTE = ("CoProc", "GPU(NVML)", "GPU(RSMI)", "GPU(LevelZero)")


def _console(d: LstopoDevice) -> bool:
    """A VGA function whose vendor lstopo does not print (no ``-v``) and below which hwloc shows
    no compute device: a BMC's (ASPEED, Matrox) or a hypervisor's (QEMU, Cirrus) console as
    likely as a GPU, so no GPU is claimed (a data-centre GPU is a 3D controller, 0302)."""
    return d.class_code == 0x0300 and d.vendor_id is None and not any(k.startswith(_COMPUTE) for k, _ in d.osdevs)


def nested_class(a: LstopoDevice, b: LstopoDevice) -> str:
    """nvidia-smi's class between two functions below one host bridge, from the bridges above
    each: below none in common, the host bridge (PHB); else one switch -- the last bridge both
    are below and at most one more on each side, its downstream ports -- (PIX), or more (PXB)."""
    common = 0
    for x, y in zip(a.bridges, b.bridges, strict=False):
        if x != y:
            break
        common += 1
    if not common:
        return "PHB"
    return "PIX" if len(a.bridges) - common <= 1 and len(b.bridges) - common <= 1 else "PXB"


def _nested_paths(report: LstopoReport) -> tuple[GivenPath, ...]:
    """The classes lstopo's nesting shows between the GPUs and NICs of each host bridge whose
    bridges print no busid (with ``-v`` the tree itself gives them)."""
    ends = [
        d
        for d in report.devices
        if d.bdf is not None
        and not d.path_known
        and d.host_bridge is not None
        and d.class_code is not None
        and ((d.class_code >> 8 == 0x03 and not _console(d)) or pci.is_nic_class(d.class_code))
    ]
    return tuple(
        GivenPath(a.bdf, b.bdf, nested_class(a, b))  # type: ignore[arg-type]
        for a, b in combinations(ends, 2)
        if a.host_bridge == b.host_bridge
    )


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
        console = _console(d)
        fns.append(
            PciFunction(
                bdf=d.bdf,
                sysfs_path=_path(d),
                class_code=d.class_code << 8 if d.class_code is not None and not console else None,
                name="VGA controller (vendor not shown: a BMC's or hypervisor's console, no GPU)" if console else None,
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
            f"{unnamed} bridge(s) printed without a busid (lstopo without -v): GPU and NIC paths below one host "
            "bridge are read from the nesting, paths between host bridges are unknown, the NUMA nodes are lstopo's"
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
        given_paths=_nested_paths(report),
    )
