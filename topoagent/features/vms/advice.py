"""NUMA affinity for VMs with passthrough devices: verdicts and the settings to write.  Pure.

A GPU or NIC passed through to a VM does its DMA to the VM's memory, and its interrupts and
driver threads run on the VM's vCPUs: when those sit on another NUMA node than the device,
every transfer crosses the socket interconnect.  For each VM with PCI passthrough devices this
module joins the devices with the host (a scan's topology and rails, or ESXi's
``esxcli hardware pci list``), and says:

- ``aligned``: memory and vCPUs are confined to the devices' node;
- ``unset``: nothing confines them (or only one of the two), so the scheduler may put them anywhere;
- ``misaligned``: a setting points at another node;
- ``split``: the devices sit on several nodes -- which split of the vCPUs (one guest NUMA cell
  per node) would fit, or that none does;
- ``unknown``: a device's node is unknown (``numa_node`` = -1, not on this host, chosen at
  power-on).  Nothing is recommended then: an unknown node is never guessed as 0.

The recommendation is NUMA affinity first -- libvirt ``<vcpu placement='static' cpuset=…>``
(the node's CPUs less ``reserve_cores`` cores kept for the host) and ``<numatune><memory
mode='strict' nodeset=…>`` (``<memnode>`` per guest cell when the VM spans nodes); VMware
``numa.nodeAffinity``.  Per-vCPU pinning (``vcpupin``/``emulatorpin``) only when asked
(``pin``): it stops the host scheduler from balancing vCPUs inside the node, lets one busy
host thread stall a vCPU, and must be redone when the VM is resized (the reasons VMware's
performance guides give for preferring NUMA affinity to CPU affinity; they hold for KVM too).

This module holds what both platforms share (the host side, the report types, the split
plan); :mod:`topoagent.features.vms.libvirt_advice` advises libvirt domains and
:mod:`topoagent.features.vms.vmware_advice` VMware VMs.  The libvirt XML is written by
:mod:`topoagent.features.vms.libvirt_xml`.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

import msgspec

from topoagent.core import pci
from topoagent.core.advice.cores import cores_in, host_cores
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.frozen import FrozenMap
from topoagent.core.pci import DeviceKind

if TYPE_CHECKING:
    from topoagent.core.analysis.rails import Rails
    from topoagent.core.topology import Topology
    from topoagent.features.vms.esxcli import EsxPciDevice

__all__ = [
    "Affinity",
    "DeviceReport",
    "HostDevice",
    "HostView",
    "Verdict",
    "VmAdvice",
    "VmReport",
    "VmsError",
    "device_nodes",
    "host_from_esxcli",
    "host_from_scan",
    "join_device",
    "node_cpus_for_vms",
    "nodes_text",
    "split_plan",
]


class VmsError(InputError):
    """Options that cannot be honoured (``--reserve-cores`` leaving a node no CPU)."""


class Verdict(str, Enum):
    """How a VM's CPU and memory placement matches the NUMA nodes of its passthrough devices."""

    ALIGNED = "aligned"
    UNSET = "unset"
    MISALIGNED = "misaligned"
    SPLIT = "split"
    UNKNOWN = "unknown"


# -- the host side --------------------------------------------------------------------------


class HostDevice(msgspec.Struct, frozen=True):
    """A host PCI function as the VM advice needs it."""

    bdf: str
    kind: DeviceKind
    numa_node: int | None
    name: str
    vendor_id: int | None = None
    device_id: int | None = None
    #: A GPU's rail NICs (BDFs), best first.
    rail_nics: tuple[str, ...] = ()


class HostView(msgspec.Struct, frozen=True):
    """The host: its devices by BDF, its nodes' CPUs and memory (empty where unknown, as from
    esxcli), and its cores (sibling-thread sets) for ``--reserve-cores`` and pinning."""

    source: str
    devices: FrozenMap[str, HostDevice]
    node_cpus: FrozenMap[int, CpuSet] = msgspec.field(default_factory=FrozenMap)
    node_memory: FrozenMap[int, int] = msgspec.field(default_factory=FrozenMap)
    cores: tuple[CpuSet, ...] = ()


def host_from_scan(topo: Topology, pairing: Rails, *, source: str) -> HostView:
    """The host side from a scan's topology and rails: every PCI function, GPUs with their rail
    NICs' BDFs, the cores."""
    devices = {}
    for d in topo.devices:
        if d.bdf is None:
            continue
        rails: tuple[str, ...] = ()
        rail = pairing.rail(d.id)
        if rail is not None:
            rails = tuple(n.bdf for nid in rail.nics if (n := topo.by_id(nid)) is not None and n.bdf)
        devices[d.bdf] = HostDevice(d.bdf, d.kind, d.numa_node, d.name, d.vendor_id, d.device_id, rails)
    return HostView(
        source=source,
        devices=FrozenMap(devices),
        node_cpus=FrozenMap({n.id: n.cpus for n in topo.nodes if n.cpus_known}),
        node_memory=FrozenMap({n.id: n.memory_bytes for n in topo.nodes if n.memory_bytes}),
        cores=host_cores(topo.cpus),
    )


def host_from_esxcli(devices: tuple[EsxPciDevice, ...], *, source: str) -> HostView:
    """The host side from ``esxcli hardware pci list``: devices and nodes, no node CPU lists."""
    out = {}
    for d in devices:
        kind = pci.kind_of(d.class_code, d.vendor_id)
        name = d.device_name or pci.device_name(d.vendor_id, d.device_id, d.class_code)
        out[d.bdf] = HostDevice(d.bdf, kind, d.numa_node, name, d.vendor_id, d.device_id)
    return HostView(source=source, devices=FrozenMap(out))


def node_cpus_for_vms(host: HostView, node: int, reserve_cores: int) -> tuple[CpuSet, CpuSet]:
    """(CPUs for VMs, CPUs kept for the host) of ``node``: its first ``reserve_cores`` cores
    (all their threads) are kept.  :class:`VmsError` when nothing would be left."""
    cpus = host.node_cpus.get(node, CpuSet())
    if reserve_cores <= 0 or not cpus:
        return cpus, CpuSet()

    cores = sorted(cores_in(host.cores, cpus), key=lambda c: c.first or 0)
    if reserve_cores >= len(cores):
        raise VmsError(f"--reserve-cores {reserve_cores} leaves node {node} no CPU for VMs (it has {len(cores)} cores)")
    kept = CpuSet().union(*cores[:reserve_cores])
    return cpus - kept, kept


# -- the VM side ----------------------------------------------------------------------------


class DeviceReport(msgspec.Struct, frozen=True):
    """A passthrough device joined with the host.  ``ref`` is how the VM's config names it
    (a BDF for libvirt, the ``pciPassthruN.id`` text for VMware)."""

    bdf: str | None
    ref: str
    kind: DeviceKind
    numa_node: int | None
    name: str | None
    rail_nics: tuple[str, ...] = ()
    note: str | None = None


class Affinity(msgspec.Struct, frozen=True):
    """libvirt settings to write: vCPU CPUs, memory nodes (and per guest cell), optional pins."""

    cpuset: CpuSet
    nodes: tuple[int, ...]
    mem_mode: str
    memnodes: tuple[tuple[int, int], ...] = ()
    vcpupins: tuple[tuple[int, CpuSet], ...] | None = None
    emulatorpin: CpuSet | None = None

    @property
    def nodeset(self) -> str:
        """The nodes in libvirt's nodeset syntax (``0-1``)."""
        return str(CpuSet(self.nodes))


class VmAdvice(msgspec.Struct, frozen=True):
    """One VM: its passthrough devices, current placement, verdict and the settings to make."""

    name: str
    state: str
    platform: str  # "kvm" | "vmware"
    vcpus: int | None
    memory_bytes: int | None
    devices: tuple[DeviceReport, ...]
    current: FrozenMap[str, str]
    verdict: Verdict
    recommend: FrozenMap[str, str]
    #: The XML (libvirt) or lines (.vmx) to put in the VM's definition; "" when none.
    snippet: str
    #: What ``--apply`` writes (libvirt, when a recommendation exists).
    affinity: Affinity | None
    notes: tuple[str, ...] = ()


class VmReport(msgspec.Struct, frozen=True):
    """Every VM with passthrough devices; the names of those without are listed apart."""

    source: str
    host: str
    vms: tuple[VmAdvice, ...]
    without_passthrough: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def nodes_text(nodes: tuple[int, ...] | list[int]) -> str:
    """Node ids, comma-separated (``0,1``)."""
    return ",".join(str(n) for n in nodes)


def join_device(bdf: str, ref: str, host: HostView) -> DeviceReport:
    """A VM's passthrough device ``bdf`` (``ref``: how the VM names it) joined with what the host knows of it."""
    d = host.devices.get(bdf)
    if d is None:
        missing = f"{ref}: no such device on this host ({host.source})"
        return DeviceReport(bdf, ref, DeviceKind.OTHER, None, None, note=missing)
    note = None if d.numa_node is not None else f"{bdf}: the host does not know its NUMA node"
    return DeviceReport(bdf, ref, d.kind, d.numa_node, d.name, d.rail_nics, note)


def device_nodes(devices: tuple[DeviceReport, ...]) -> tuple[int, ...] | None:
    """The devices' nodes, sorted; None when any is unknown."""
    if any(d.numa_node is None for d in devices):
        return None
    return tuple(sorted({d.numa_node for d in devices if d.numa_node is not None}))


def split_plan(
    vcpus: int | None, memory: int | None, nodes: tuple[int, ...], host: HostView, reserve_cores: int
) -> tuple[bool, str, tuple[int, ...]]:
    """Whether an even split of the vCPUs (one guest cell per node) fits, why, and the shares."""
    k = len(nodes)
    if not vcpus:
        return False, "the vCPU count is unknown", ()
    if vcpus < k:
        return False, f"{vcpus} vCPU{'s' if vcpus != 1 else ''} cannot span {k} nodes", ()
    shares = tuple(vcpus // k + (1 if i < vcpus % k else 0) for i in range(k))
    problems = []
    for node, share in zip(nodes, shares, strict=True):
        avail = node_cpus_for_vms(host, node, reserve_cores)[0] if host.node_cpus else None
        if avail is not None and share > len(avail):
            problems.append(f"node {node} has {len(avail)} CPUs for {share} vCPUs")
        mem = host.node_memory.get(node)
        if memory and mem and memory // k > mem:
            problems.append(f"node {node} has {mem >> 30} GiB for {(memory // k) >> 30} GiB")
    layout = "+".join(str(s) for s in shares)
    if problems:
        return False, f"{layout} vCPUs over nodes {nodes_text(nodes)} does not fit: " + "; ".join(problems), shares
    cells = ", ".join(f"cell {i} on node {n}" for i, n in enumerate(nodes))
    return True, f"{k} guest NUMA cells of {layout} vCPUs ({cells}) fit", shares
