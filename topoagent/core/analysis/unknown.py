"""What a scan could not read: one list, computed once, that every output says where it prints
the fact (the tree's ``Unknown`` line, the JSON's ``unknown``, the matrix's ``?`` cells, the
plan, ``topoagent_topology_info{unknown}``, NFD's ``topoagent.unknown`` and ``acs.blocking``).

Each :class:`Unknown` names a kind of fact (:data:`FACTS`), the devices it is unknown for and
why.  The kinds are those a placement or a fleet comparison rests on:

- ``acs``: the ACS control register of a bridge GPU traffic crosses (between a GPU and its host
  bridge, or where a GPU's peer path turns, or a port an NVIDIA platform sets) -- its extended
  config space was not seen (a scan without root reads 64 bytes; a 256-byte function has none);
- ``iommu``: the IOMMU domain type of a GPU's or RDMA NIC's group (pasted output; a kernel
  before 5.11 writes no group ``type`` file);
- ``nvlinks``: the NVLinks (XGMI on AMD) between GPUs -- only NVML (KFD) shows them, so a scan
  of a root tree, ``--no-nvml`` or pasted output without a matrix leaves them unknown;
- ``peer_memory``: whether a GPUDirect peer-memory module is loaded (pasted output);
- ``shape``: the host's CPU/NUMA shape (pasted output).

A device that fell off the bus is left out: what it lacks is a fault of its own (FELL_OFF_BUS),
not a scan that knows less.  Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from topoagent.core import pci
from topoagent.core.analysis.fingerprint import host_shape, iommu_type
from topoagent.core.analysis.paths import Path
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import no_extended_reason
from topoagent.core.topology import Device, Topology, common_ancestors, id_key

__all__ = ["FACTS", "Unknown", "acs_unknown", "acs_unseen", "peer_bridges", "unknown_facts"]

#: The kinds of fact, in the order every output lists them.
FACTS = ("acs", "iommu", "nvlinks", "peer_memory", "shape")


class Unknown(msgspec.Struct, frozen=True):
    """A kind of fact (:data:`FACTS`) the scan could not read, the devices (ids) it is unknown
    for (none for a host-wide fact) and why, in words."""

    fact: str
    subjects: tuple[str, ...]
    why: str


def acs_unseen(d: Device) -> bool:
    """Whether a bridge's ACS is unknown: its extended config space was not seen (a readable
    space without the capability is a bridge without ACS, which is known)."""
    cfg = d.config
    return cfg is None or (cfg.acs is None and not cfg.extended_readable)


def peer_bridges(topo: Topology, a: Device, b: Device) -> list[Device]:
    """Bridges where peer traffic between ``a`` and ``b`` turns round: from their common
    ancestor down both sides (none for devices under different root ports)."""
    common = common_ancestors(a, b)
    if not common:
        return []
    bdfs = dict.fromkeys(a.ancestors[common - 1 :] + b.ancestors[common - 1 :])
    return [d for bdf in bdfs if (d := topo.by_bdf(bdf)) is not None]


def _gpu_bridges(topo: Topology, paths: Iterable[Path]) -> dict[str, Device]:
    """The bridges GPU traffic crosses, by id: every bridge between a GPU and its host bridge
    (ACS redirect on a root port sends a peer's requests up through the root complex: AMD root
    ports, REFERENCE's pain point 1), every bridge where a GPU's PIX/PXB peer path turns, and
    every port an NVIDIA platform sets (:mod:`topoagent.core.platform`)."""
    out: dict[str, Device] = {}
    for g in topo.gpus:
        if g.fell_off_bus or g.is_vf:
            continue
        for bdf in g.ancestors:
            br = topo.by_bdf(bdf)
            if br is not None and br.role is not None:
                out[br.id] = br
    for p in paths:
        if p.pcie > PathClass.PXB or p.pcie is PathClass.X:
            continue
        a, b = topo.by_id(p.a), topo.by_id(p.b)
        if a is None or b is None or DeviceKind.GPU not in (a.kind, b.kind):
            continue
        out.update((br.id, br) for br in peer_bridges(topo, a, b))
    for rule in topo.platform.acs:
        port = topo.by_bdf(rule.bdf)
        if port is not None:
            out[port.id] = port
    return out


def acs_unknown(topo: Topology, paths: Iterable[Path]) -> Unknown | None:
    """The bridges GPU traffic crosses whose ACS was not seen, in PCI order, and why (None:
    every one was read): what ACS_UNKNOWN names, NFD's ``acs.blocking=unknown`` and the
    ``acs`` of every output's unknown facts."""
    unseen = sorted((d for d in _gpu_bridges(topo, paths).values() if acs_unseen(d)), key=lambda d: d.bdf or d.id)
    if not unseen:
        return None
    why = (
        "lspci -vvv as root shows it (ACSCtl); the output given does not"
        if not topo.from_host_tree
        else "; ".join(sorted({no_extended_reason(d.config) for d in unseen}))
    )
    return Unknown("acs", tuple(d.id for d in unseen), why)


def _iommu(topo: Topology) -> Unknown | None:
    devices = [
        d
        for d in topo.devices
        if (d.kind is DeviceKind.GPU or (d.kind is DeviceKind.NIC and d.rdma_capable))
        and not d.is_vf
        and not d.fell_off_bus
        and iommu_type(topo, d) is None
    ]
    if not devices:
        return None
    why = (
        "pasted output says nothing of IOMMU groups"
        if not topo.from_host_tree
        else "the kernel writes no iommu_groups/N/type file (before Linux 5.11)"
    )
    return Unknown("iommu", tuple(d.id for d in devices), why)


def _nvlinks(topo: Topology, paths: Iterable[Path]) -> Unknown | None:
    gpus = {x for p in paths if not p.links_known for x in (p.a, p.b)}
    if not gpus:
        return None
    amd = all(d.vendor_id == pci.AMD_ATI for x in gpus if (d := topo.by_id(x)) is not None)
    nvml = next((s for s in topo.sources if s.name == "nvml"), None)
    if amd:
        why = "KFD's topology (io_links) was not read: only it shows XGMI links"
    elif nvml is not None:
        why = f"NVML {nvml.status}" + (f" ({nvml.detail})" if nvml.detail else "") + ": only NVML shows NVLinks"
    else:
        why = "NVML not asked (another root, --no-nvml or pasted output): only NVML shows NVLinks"
    return Unknown("nvlinks", tuple(sorted(gpus, key=id_key)), why)


def unknown_facts(topo: Topology, paths: tuple[Path, ...]) -> tuple[Unknown, ...]:
    """What the scan of ``topo`` could not read, one :class:`Unknown` per kind of fact, in
    :data:`FACTS` order (empty: nothing that matters is unknown)."""
    found = [acs_unknown(topo, paths), _iommu(topo), _nvlinks(topo, paths)]
    if topo.peer_memory is None:
        found.append(Unknown("peer_memory", (), "no host tree was read: pasted output names no loaded module"))
    if host_shape(topo) is None:
        found.append(Unknown("shape", (), "no host tree was read: pasted output names neither cores nor memory"))
    return tuple(u for u in found if u is not None)
