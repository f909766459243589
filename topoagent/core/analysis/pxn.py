"""PXN: a GPU that reaches a NIC through an NVLinked peer GPU, as NCCL routes it.

NCCL >= 2.12 (``NCCL_PXN_DISABLE=0`` by default) lets a GPU whose own path to a NIC crosses the
CPU send through the NIC's *local GPU* instead: the data crosses NVLink to that GPU, whose
memory the NIC reads with GPUDirect RDMA.  ``ncclTopoComputePaths`` (NVIDIA/nccl
src/graph/paths.cc) sets the GPU -> NIC path to ``PATH_PXN`` when all of:

1. the peer is the NIC's local GPU (``ncclTopoGetLocalGpu``, src/graph/topo.cc: of the GPUs
   nearest the NIC, the first whose own NIC for some channel is this one);
2. the peer's path to the NIC is ``PATH_PXB`` or better (``PATH_P2C`` with ``NCCL_PXN_C2C=1``,
   the default) and GPUDirect RDMA is on for it (``ncclTopoCheckGdr``);
3. the peer reaches the GPU over NVLink (``PATH_NVL``: direct, or through NVSwitches);
4. the peer's path to the NIC is faster, or the GPU's own path is worse than ``PATH_PXN``
   (``PATH_PHB``: through the CPU, which NCCL's PHB covers with nvidia-smi's NODE; or ``PATH_SYS``).

``PATH_PXN`` (7) ranks before ``PATH_PHB`` (8) in src/graph/topo.h, so NCCL then prefers such a
NIC to one it reaches only through the CPU (``ncclTopoGetLocal``: the fastest paths, then the best
type).  Bandwidths are not compared here: a paste gives none, and the NICs a GPU can choose
between are compared by path type alone (:func:`pxn_nics`).  Distance only: peer memory, ACS
and the IOMMU are findings of their own (as :func:`topoagent.core.analysis.paths.gdr_by_default`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from topoagent.core.analysis.ncclnet import mirror_bits
from topoagent.core.analysis.paths import Path, nccl_path_type
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import Device, Topology

__all__ = ["MAXCHANNELS", "PxnRoute", "local_gpu", "pxn_nics"]

#: NCCL's channel count bound (src/include/device.h ``MAXCHANNELS``): ``ncclTopoGetLocalGpu``
#: tries every channel before it gives up.
MAXCHANNELS = 64
#: The worst path a peer may have to the NIC for PXN: ``PATH_P2C`` with ``NCCL_PXN_C2C=1``.
_PXN_PEER_LEVEL = PathClass.P2C


class PxnRoute(msgspec.Struct, frozen=True):
    """A GPU's route to ``nic`` through ``via``, the NIC's local GPU, over NVLink."""

    nic: str
    via: str


class _Nccl:
    """NCCL's view of the GPU-NIC paths of one host: path types by (GPU, NIC) id."""

    def __init__(self, topo: Topology, idx: Mapping[tuple[str, str], Path]) -> None:
        self.topo = topo
        self.idx = idx
        self.gpus = [g for g in topo.gpus if topo.physical(g) is g]
        self.nics = [n for n in topo.nics if n.rdma_capable and not n.is_vf]
        self._local_net: dict[tuple[str, int], str | None] = {}
        self._local_gpu: dict[str, str | None] = {}

    def type(self, gpu: Device, nic: Device) -> PathClass | None:
        """The GPU -> NIC path type as NCCL numbers it (its PHB covers nvidia-smi's NODE), or
        None where no source shows the path."""
        p = self.idx.get((gpu.id, nic.id))
        if p is None or not p.shown:
            return None
        t = nccl_path_type(self.topo, gpu, nic, p)
        return PathClass.PHB if t is PathClass.NODE else t

    def _nearest(self, candidates: Sequence[Device], to: Device, gpu_side: bool) -> list[Device]:
        """``ncclTopoGetLocal`` by path type: the candidates at the best type from ``to``."""
        types = {c.id: self.type(to, c) if gpu_side else self.type(c, to) for c in candidates}
        known = [t for t in types.values() if t is not None]
        if not known:
            return []
        best = min(known)
        return [c for c in candidates if types[c.id] == best]

    def local_net(self, gpu: Device, channel: int) -> str | None:
        """``ncclTopoGetLocalNetType``: the NIC NCCL gives ``gpu`` on ``channel``."""
        key = (gpu.id, channel)
        if key not in self._local_net:
            nets = self._nearest(self.nics, gpu, gpu_side=True)
            pick = None
            if nets:
                gpus = self._nearest(self.gpus, nets[0], gpu_side=False) or [gpu]
                per_gpu = -(-len(nets) // len(gpus))
                # gpu.dev (the CUDA index, PCI order) % localGpuCount, as ncclTopoGetLocalNetType has it
                # in releases with NCCL_NETDEVS_POLICY; older ones take gpu.dev alone
                net = self.gpus.index(gpu) % len(gpus)
                if len(nets) & (len(nets) - 1) == 0:
                    net = mirror_bits(net, len(nets))
                pick = nets[(net + channel % per_gpu) % len(nets)].id
            self._local_net[key] = pick
        return self._local_net[key]

    def local_gpu(self, nic: Device) -> str | None:
        """``ncclTopoGetLocalGpu``: of the GPUs nearest the NIC, the first (channel by channel)
        whose own NIC is this one; None where none is."""
        if nic.id not in self._local_gpu:
            found = None
            near = self._nearest(self.gpus, nic, gpu_side=False)
            for channel in range(MAXCHANNELS):
                found = next((g.id for g in near if self.local_net(g, channel) == nic.id), None)
                if found is not None:
                    break
            self._local_gpu[nic.id] = found
        return self._local_gpu[nic.id]


def _nvlinked(idx: Mapping[tuple[str, str], Path], a: Device, b: Device) -> bool:
    p = idx.get((a.id, b.id))
    return p is not None and p.shown and p.nvlinks > 0


def local_gpu(topo: Topology, idx: Mapping[tuple[str, str], Path], nic: Device) -> str | None:
    """The NIC's local GPU as NCCL picks it (``ncclTopoGetLocalGpu``), or None."""
    return _Nccl(topo, idx).local_gpu(nic)


def pxn_nics(topo: Topology, idx: Mapping[tuple[str, str], Path], gpu: Device) -> tuple[PxnRoute, ...]:
    """The NICs ``gpu`` reaches through PXN (the conditions of the module docstring), in NIC
    order; () where its own path to every such NIC is already PXB or better (or P2C), or no
    NVLinked peer qualifies."""
    if not any(p.nvlinks for (a, _), p in idx.items() if a == gpu.id):
        return ()
    nccl = _Nccl(topo, idx)
    out = []
    for nic in nccl.nics:
        own = nccl.type(gpu, nic)
        if own is None or own <= PathClass.P2C:
            continue  # GPUDirect on already (or the path is not shown): condition 4 fails
        via_id = nccl.local_gpu(nic)
        via = topo.by_id(via_id) if via_id is not None else None
        if via is None or via.id == gpu.id or not _nvlinked(idx, gpu, via):
            continue
        peer = nccl.type(via, nic)
        if peer is not None and peer <= _PXN_PEER_LEVEL:
            out.append(PxnRoute(nic.id, via.id))
    return tuple(out)
