"""Rails: which NIC each GPU should use, and which NICs are not rails at all.

Pairing is NCCL's own choice, asked of the one model of it (NVIDIA/nccl src/graph/topo.cc
``ncclTopoGetLocalNet``, :mod:`topoagent.core.analysis.ncclnet`): the compute NICs are the
NETs; each GPU takes the NET NCCL's channel 0 gives it among its local ones (the highest path
bandwidth, then the best path type, routes through an NVLinked peer GPU -- PXN -- included).
Storage and management NICs are never rails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum

import msgspec

from topoagent.core.analysis.ncclnet import nccl_net_choice
from topoagent.core.analysis.nicspeed import nic_bandwidth_gbps
from topoagent.core.analysis.paths import Path, nccl_view, path_index
from topoagent.core.frozen import FrozenMap
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import Device, Topology

#: Below this a NIC without RDMA is a management/front-end port, not a GPU fabric port.
_FABRIC_MBPS = 100_000


class NicRole(str, Enum):
    """What a NIC is for: a GPU rail (compute), storage traffic, or management."""

    COMPUTE = "compute"
    STORAGE = "storage"
    MANAGEMENT = "management"


class Rail(msgspec.Struct, frozen=True):
    """A GPU's pairing: its primary NIC (or none), the path class, and the NICs it may use."""

    gpu: str
    nic: str | None
    #: The class to ``nic``: None without a NIC, or where no source shows the path (a pasted
    #: matrix's missing row): unknown, never the placeholder.
    cls: PathClass | None
    #: All rail NICs for this GPU, best first (``nic`` first).
    nics: tuple[str, ...]
    #: Other GPUs whose primary NIC is the same.
    shared_with: tuple[str, ...] = ()
    #: Whether NCCL uses GPUDirect RDMA to ``nic`` by default (analysis.paths.gdr_by_default):
    #: PXB or better, or a C2C GPU's local NIC on its own Grace (P2C); None without a NIC or
    #: where no source shows the path.
    gdr: bool | None = None
    #: The path to ``nic`` as NCCL classes it where that differs from ``cls``: ``P2C`` (or
    #: ``PHB`` for a slower one) for a C2C GPU's NIC on its own Grace (``cls`` is SYS, as
    #: nvidia-smi prints it); ``PXN`` where NCCL routes through :attr:`pxn_via` (analysis.ncclnet).
    nccl_path: PathClass | None = None
    #: The NIC's local GPU that NCCL relays this GPU's traffic through over NVLink (PXN), with
    #: GPUDirect RDMA on from that GPU's memory; None where the GPU uses its direct path.
    pxn_via: str | None = None

    @property
    def nccl_class(self) -> PathClass | None:
        """The class to rank and grade the rail by: NCCL's where it differs from nvidia-smi's
        (``P2C`` on Grace), else ``cls``; None where the class is unknown."""
        return self.nccl_path if self.nccl_path is not None else self.cls


class Rails(msgspec.Struct, frozen=True):
    """The rail pairing: every physical NIC's role (by device id) and every GPU's rail, in GPU
    order (:func:`pair_rails`)."""

    roles: FrozenMap[str, NicRole]
    rails: tuple[Rail, ...]
    #: The fabric NICs every GPU reaches worse than PXB, by a path some source shows: on a
    #: host read from sysfs, storage NICs (:func:`nic_roles`); in a paste, NICs no GPU is near.
    far: tuple[str, ...] = ()

    def rail(self, gpu: str) -> Rail | None:
        """The rail of a GPU (by device id), or None."""
        return next((r for r in self.rails if r.gpu == gpu), None)

    def users(self, nic: str) -> tuple[str, ...]:
        """The GPUs whose primary NIC is ``nic``."""
        return tuple(r.gpu for r in self.rails if r.nic == nic)


def compute_nics(topo: Topology, roles: Mapping[str, NicRole]) -> tuple[Device, ...]:
    """The NICs ``roles`` calls compute, in PCI order: the rail NICs (rail *i* is the *i*-th),
    the NETs NCCL is given.  Physical functions only (:func:`nic_roles` leaves VFs out)."""
    return tuple(n for n in topo.nics if roles.get(n.id) is NicRole.COMPUTE)


def _is_fabric(nic: Device) -> bool:
    return nic.rdma_capable or nic_bandwidth_gbps(nic) * 1000 >= _FABRIC_MBPS


def far_nics(topo: Topology, paths: dict[tuple[str, str], Path]) -> tuple[str, ...]:
    """The physical fabric NICs every GPU's shown path reaches worse than PXB, on a host whose
    other fabric NICs do sit next to GPUs (if none is near any GPU, the host simply has poor
    rails)."""
    nics = [n for n in topo.nics if not n.is_vf and _is_fabric(n)]
    gpus = [g for g in topo.gpus if topo.physical(g) is g]  # a GPU VF's paths are its PF's

    def near(n: Device) -> bool:
        """Whether any GPU reaches the NIC within one PCIe switch hierarchy (PXB or better)."""
        return any(paths[(g.id, n.id)].cls <= PathClass.PXB for g in gpus)

    def far(n: Device) -> bool:
        """Whether every GPU's path to the NIC is shown and worse than PXB (an unshown one may be near)."""
        return all((p := paths[(g.id, n.id)]).shown and p.cls > PathClass.PXB for g in gpus)

    if not gpus or not any(near(n) for n in nics):
        return ()
    return tuple(n.id for n in nics if far(n))


def nic_roles(topo: Topology, paths: dict[tuple[str, str], Path]) -> FrozenMap[str, NicRole]:
    """Classify physical NICs (VFs are left out: they are a PF's slices, not rails).  A NIC's
    name can say storage (``mlx5_stor_0``); on a host read from sysfs a fabric NIC far from every
    GPU (:func:`far_nics`) is placed for storage too.  A paste proves no role: there a far NIC
    stays a compute NIC that no GPU is near."""
    nics = [n for n in topo.nics if not n.is_vf]
    roles: dict[str, NicRole] = {}
    for n in nics:
        names = " ".join(n.rdma_devices + n.netdevs)
        if re.search("stor", names, re.IGNORECASE):
            roles[n.id] = NicRole.STORAGE
        elif not _is_fabric(n):
            roles[n.id] = NicRole.MANAGEMENT
        else:
            roles[n.id] = NicRole.COMPUTE
    if topo.from_host_tree:
        for nid in far_nics(topo, paths):
            if roles[nid] is NicRole.COMPUTE:
                roles[nid] = NicRole.STORAGE
    return FrozenMap(roles)


def pair_rails(topo: Topology, paths: tuple[Path, ...]) -> Rails:
    """Pair every GPU with its rail NICs as NCCL does (:mod:`topoagent.core.analysis.ncclnet`):
    the compute NICs are the NETs; a GPU's primary NIC is the one NCCL's channel 0 takes among its
    local NETs (highest path bandwidth, then best path type, PXN routes included), its rail NICs
    those its channels use, then the other local NETs no GPU takes first."""
    idx = path_index(paths)
    roles = nic_roles(topo, idx)
    far = far_nics(topo, idx)
    compute = compute_nics(topo, roles)
    choice = nccl_net_choice(topo, compute, idx) if compute else None
    used = {g.id: choice.channels(g.id) if choice is not None else [] for g in topo.gpus}
    picks = {g: nets[0] if nets else None for g, nets in used.items()}
    primaries = {n for n in picks.values() if n is not None}
    rails = []
    for g in topo.gpus:
        nic = picks[g.id]
        local = choice.local(g.id) if choice is not None else []
        # the NETs its channels use, then equally local ones no GPU takes first
        extra = [n for n in local if n not in used[g.id] and n not in primaries]
        nics = tuple(used[g.id]) + tuple(extra)
        shared = tuple(o.id for o in topo.gpus if o.id != g.id and nic and picks[o.id] == nic)
        dev = topo.by_id(nic) if nic else None
        phys = topo.physical(g)  # a GPU VF's paths are its PF's (analysis.paths.scan_paths)
        p = idx[(phys.id, dev.id)] if dev is not None else None
        via = choice.via(g.id, nic) if choice is not None and nic is not None else None
        if via is not None and p is not None:
            # through the NIC's local GPU over NVLink: GPUDirect RDMA from that GPU's memory
            rails.append(Rail(g.id, nic, p.cls, nics, shared, True, PathClass.PXN, via))
            continue
        # A path no source shows has no class, so no NCCL name or GDR verdict either.
        nccl, gdr = nccl_view(topo, phys, dev, p) if dev is not None else (None, None)
        cls = p.cls if p is not None and p.shown else None
        rails.append(Rail(g.id, nic, cls, nics, shared, gdr, nccl))
    return Rails(roles, tuple(rails), far)
