"""Guests: whether the host is a VM whose hypervisor hides the PCIe tree, and what shows it.

A hypervisor that passes GPUs and NICs through puts each on a root port of one emulated root
complex (QEMU's q35, Hyper-V) or straight on its root bus: the host's PCIe switches vanish, and
every GPU-NIC path inside the guest is PHB.  NCCL in the guest sees PHB and turns GPUDirect
RDMA off (``ncclTopoCheckGdr``, NVIDIA/nccl src/graph/paths.cc): NVIDIA/nccl-tests#256, a KVM
guest with 8 H200 behind q35 root ports, fell from 476 to 27 GB/s bus bandwidth.

What proves a guest: the kernel's word on a host tree (``/proc/cpuinfo``'s hypervisor flag,
``/sys/hypervisor``, DMI: :attr:`~topoagent.core.topology.Topology.virtualized`), or a function
only a hypervisor presents in pasted lspci (:func:`topoagent.core.pci.emulated_platform`).  What
suggests one: a pasted matrix whose NVLinked (SXM) GPUs reach every NIC, and every NIC every
other, through the host bridge (PHB) -- no bare-metal board wires SXM GPUs and their NICs
without PCIe switches, so only an emulated root complex prints that (an inference, never more).
"""

from __future__ import annotations

import msgspec

from topoagent.core.analysis.paths import Path
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import emulated_platform
from topoagent.core.topology import BridgeRole, Device, Topology

__all__ = ["FlatTree", "emulated_functions", "flat_tree", "matrix_suggests_guest"]


class FlatTree(msgspec.Struct, frozen=True):
    """A guest's flat PCI tree: the GPUs (and RDMA NICs) below no PCIe switch, and how the
    guest is known (``proven``: the kernel or an emulated device says so; else the matrix's
    PHB cells only suggest it)."""

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    proven: bool


def emulated_functions(topo: Topology) -> tuple[Device, ...]:
    """The functions only a hypervisor presents (an emulated chipset, Hyper-V's or QEMU's own
    devices), in PCI order."""
    return tuple(d for d in topo.devices if emulated_platform(d.vendor_id, d.device_id, d.name))


def _below_switch(topo: Topology, d: Device) -> bool:
    """Whether a PCIe switch port lies above ``d`` (a root port is the root complex's own)."""
    for bdf in d.ancestors:
        br = topo.by_bdf(bdf)
        if br is not None and br.role in (BridgeRole.SWITCH_UPSTREAM, BridgeRole.SWITCH_DOWNSTREAM):
            return True
    return False


def matrix_suggests_guest(topo: Topology, paths: tuple[Path, ...]) -> bool:
    """A pasted matrix without a tree whose GPUs are NVLinked to each other (SXM parts) and
    whose every GPU-NIC and NIC-NIC cell is PHB: the flat root complex of a hypervisor."""
    gpus = [g for g in topo.gpus if g.bdf is None]
    nics = [n for n in topo.nics if n.bdf is None and not n.is_vf]
    if len(gpus) < 2 or not nics or topo.from_host_tree:
        return False
    ids = {d.id for d in gpus + nics}
    cells = [p for p in paths if p.a in ids and p.b in ids and p.shown]
    gpu_ids = {g.id for g in gpus}
    gpu_gpu = [p for p in cells if p.a in gpu_ids and p.b in gpu_ids]
    others = [p for p in cells if not (p.a in gpu_ids and p.b in gpu_ids)]
    return bool(others) and all(p.nvlinks for p in gpu_gpu) and all(p.cls is PathClass.PHB for p in others)


def flat_tree(topo: Topology, paths: tuple[Path, ...]) -> FlatTree | None:
    """The flat PCI tree of a guest with two or more GPUs, none of them below a PCIe switch;
    None on bare metal, where the guest is not shown, or where a GPU sits below a switch (the
    hypervisor passed the hierarchy through)."""
    gpus = [g for g in topo.gpus if topo.physical(g) is g]
    if len(gpus) < 2:
        return None
    nics = [n for n in topo.nics if n.rdma_capable and not n.is_vf]
    if topo.virtualized:
        placed = [d for d in gpus + nics if d.bdf is not None]
        if len(placed) < len(gpus) or any(_below_switch(topo, d) for d in placed):
            return None
        return FlatTree(tuple(g.id for g in gpus), tuple(n.id for n in nics), True)
    if matrix_suggests_guest(topo, paths):
        return FlatTree(tuple(g.id for g in gpus), tuple(n.id for n in nics), False)
    return None
