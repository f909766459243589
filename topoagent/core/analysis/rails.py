"""Rails: which NIC each GPU should use, and which NICs are not rails at all.

Pairing (NCCL's rules, NVIDIA/nccl src/graph/topo.cc ``ncclTopoGetLocalNet``): for every GPU,
its candidates are the compute NICs at the best path class; among those the fastest; then GPUs
are spread so that no NIC serves two GPUs while an equally close and equally fast NIC serves
none.  A GPU without GPUDirect RDMA to any of them takes, as NCCL does, the NICs it reaches
through an NVLinked peer GPU (PXN: :mod:`topoagent.core.analysis.pxn`).  Storage and management
NICs are never rails.
"""

from __future__ import annotations

import re
from collections import defaultdict
from enum import Enum

import msgspec

from topoagent.core.analysis.c2c import own_cpu_nic
from topoagent.core.analysis.nicspeed import nic_bandwidth_gbps
from topoagent.core.analysis.paths import Path, nccl_view, path_index
from topoagent.core.analysis.pxn import pxn_nics
from topoagent.core.frozen import FrozenMap
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import Device, Topology, id_key

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
    #: nvidia-smi prints it); ``PXN`` where NCCL routes through :attr:`pxn_via` (analysis.pxn).
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

    def rail(self, gpu: str) -> Rail | None:
        """The rail of a GPU (by device id), or None."""
        return next((r for r in self.rails if r.gpu == gpu), None)

    def users(self, nic: str) -> tuple[str, ...]:
        """The GPUs whose primary NIC is ``nic``."""
        return tuple(r.gpu for r in self.rails if r.nic == nic)


def _is_fabric(nic: Device) -> bool:
    return nic.rdma_capable or nic_bandwidth_gbps(nic) * 1000 >= _FABRIC_MBPS


def nic_roles(topo: Topology, paths: dict[tuple[str, str], Path]) -> FrozenMap[str, NicRole]:
    """Classify physical NICs (VFs are left out: they are a PF's slices, not rails)."""
    nics = [n for n in topo.nics if not n.is_vf]
    gpus = [g for g in topo.gpus if topo.physical(g) is g]  # a GPU VF's paths are its PF's
    roles: dict[str, NicRole] = {}
    for n in nics:
        names = " ".join(n.rdma_devices + n.netdevs)
        if re.search("stor", names, re.IGNORECASE):
            roles[n.id] = NicRole.STORAGE
        elif not _is_fabric(n):
            roles[n.id] = NicRole.MANAGEMENT
        else:
            roles[n.id] = NicRole.COMPUTE

    # A fabric NIC worse than PXB to every GPU, on a host whose other NICs do sit next to
    # GPUs, is placed for storage; if no NIC is near any GPU the host simply has poor rails.
    def near(n: Device) -> bool:
        """Whether any GPU reaches the NIC within one PCIe switch hierarchy (PXB or better)."""
        return any(paths[(g.id, n.id)].cls <= PathClass.PXB for g in gpus)

    def far(n: Device) -> bool:
        """Whether every GPU's path to the NIC is shown and worse than PXB (an unshown one may be near)."""
        return all((p := paths[(g.id, n.id)]).shown and p.cls > PathClass.PXB for g in gpus)

    compute = [n for n in nics if roles[n.id] is NicRole.COMPUTE]
    if gpus and any(near(n) for n in compute):
        for n in compute:
            if far(n):
                roles[n.id] = NicRole.STORAGE
    return FrozenMap(roles)


def pair_rails(topo: Topology, paths: tuple[Path, ...]) -> Rails:
    """Pair every GPU with its rail NICs (see the module docstring for the rules)."""
    idx = path_index(paths)
    roles = nic_roles(topo, idx)
    compute = [n for n in topo.nics if roles.get(n.id) is NicRole.COMPUTE]
    bw = {n.id: nic_bandwidth_gbps(n) for n in compute}

    best: dict[str, list[str]] = {}
    best_cls: dict[str, PathClass | None] = {}
    relay: dict[str, dict[str, str]] = {}  # GPU -> NIC -> the GPU NCCL relays through (PXN)
    for g in topo.gpus:
        if not compute:
            best[g.id], best_cls[g.id] = [], None
            continue
        phys = topo.physical(g)  # a GPU VF's paths are its PF's (analysis.paths.scan_paths)
        own = phys.id
        # A path no source shows has only a placeholder class: the best shown class decides;
        # with none shown every NIC is a candidate and the class is unknown (None), not a guess.
        shown = [n for n in compute if idx[(own, n.id)].shown]
        cls = min(idx[(own, n.id)].cls for n in shown or compute)
        same = [n for n in shown if idx[(own, n.id)].cls == cls] or compute
        if cls is PathClass.SYS:
            # nvidia-smi prints SYS from a Grace GPU (NVLink-C2C) to every NIC: those of its own
            # CPU come first -- NCCL's P2C path, GPUDirect RDMA on (analysis.c2c)
            same = [n for n in same if own_cpu_nic(topo, g, n)] or same
        best_cls[g.id] = cls if shown else None
        if shown and not any(nccl_view(topo, phys, n, idx[(own, n.id)])[1] for n in same):
            # No GPUDirect RDMA on the direct path: NCCL prefers a NIC it reaches through an
            # NVLinked peer (PATH_PXN ranks before PATH_PHB, analysis.pxn)
            routes = {r.nic: r.via for r in pxn_nics(topo, idx, phys) if roles.get(r.nic) is NicRole.COMPUTE}
            if routes:
                same = [n for n in compute if n.id in routes]
                relay[g.id] = routes
        top = max(bw[n.id] for n in same)
        best[g.id] = [n.id for n in same if bw[n.id] == top]

    # Most constrained GPU first, each to its least-loaded candidate (ties: lowest id).
    load: dict[str, int] = defaultdict(int)
    primary: dict[str, str | None] = {}
    order = sorted(topo.gpus, key=lambda g: (len(best[g.id]) or 1 << 20, id_key(g.id)))
    for g in order:
        cands = best[g.id]
        if not cands:
            primary[g.id] = None
            continue
        pick = min(cands, key=lambda n: (load[n], id_key(n)))
        primary[g.id] = pick
        load[pick] += 1

    primaries = set(v for v in primary.values() if v)
    rails = []
    for g in topo.gpus:
        nic = primary[g.id]
        extra = [n for n in best[g.id] if n != nic and n not in primaries]
        nics = ((nic,) if nic else ()) + tuple(extra)
        shared = tuple(o.id for o in topo.gpus if o.id != g.id and nic and primary[o.id] == nic)
        dev = topo.by_id(nic) if nic else None
        phys = topo.physical(g)
        p = idx[(phys.id, dev.id)] if dev is not None else None
        # A path no source shows has no class, so no NCCL name or GDR verdict either.
        nccl, gdr = nccl_view(topo, phys, dev, p) if dev is not None else (None, None)
        via = relay.get(g.id, {}).get(nic or "")
        if via is not None and p is not None:
            # through the NIC's local GPU over NVLink: GPUDirect RDMA from that GPU's memory
            rails.append(Rail(g.id, nic, p.cls, nics, shared, True, PathClass.PXN, via))
        else:
            rails.append(Rail(g.id, nic, best_cls[g.id], nics, shared, gdr, nccl))
    return Rails(roles, tuple(rails))
