"""Whether GPUDirect RDMA needs a peer-memory module here: the one verdict ``scan``
(``NO_PEER_MEMORY``) and ``fix peermem`` both give.

NCCL's InfiniBand transport maps GPU memory for the NIC through a peer-memory client
(``nvidia_peermem``, the older ``nv_peer_mem``, or the driver's ``/sys/kernel/mm/memory_peers``)
or through DMA-BUF (Linux >= 5.12 with the open GPU kernel module): NVIDIA/nccl
src/transport/net_ib.cc (``ncclIbGdrSupport``, ``ncclIbDmaBufSupport``).  It is needed only
where NCCL uses GPUDirect RDMA at all by its defaults: a rail within one PCIe switch
hierarchy, a Grace GPU's own-CPU NIC (P2C), or a NIC reached through an NVLinked peer (PXN)
-- a rail that crosses the CPU stages through host memory whatever is loaded.
"""

from __future__ import annotations

import msgspec

from topoagent.core.analysis.rails import Rails
from topoagent.core.topology import Topology

__all__ = ["PeermemNeed", "peermem_need"]


class PeermemNeed(msgspec.Struct, frozen=True):
    """Whether GPUDirect RDMA needs a peer-memory module here, why (one sentence), and the GPUs
    whose rail uses GPUDirect RDMA by NCCL's defaults."""

    needed: bool
    why: str
    gpus: tuple[str, ...] = ()


def peermem_need(topo: Topology, rails: Rails, *, dmabuf: bool | None = None) -> PeermemNeed:
    """The verdict for this host (``dmabuf``: whether DMA-BUF is available, the host's
    :attr:`~topoagent.core.topology.Topology.dmabuf` where not given; unknown counts as not)."""
    if not any(g.vendor_id == 0x10DE for g in topo.gpus):
        return PeermemNeed(False, "no NVIDIA GPU")
    near = tuple(
        r.gpu
        for r in rails.rails
        if r.nic is not None and r.gdr and (n := topo.by_id(r.nic)) is not None and n.rdma_capable
    )
    if not near:
        return PeermemNeed(
            False,
            "no GPU uses GPUDirect RDMA by NCCL's defaults (no RDMA NIC under its PCIe switch, on its Grace, "
            "or through an NVLinked peer): a peer-memory module would change nothing",
        )
    if topo.peer_memory:
        return PeermemNeed(False, "a peer-memory module is already loaded", near)
    if topo.peer_memory is None:
        return PeermemNeed(False, "which kernel modules are loaded is unknown (pasted tool output)", near)
    available = topo.dmabuf if dmabuf is None else dmabuf
    if available:
        return PeermemNeed(False, "DMA-BUF is available (kernel >= 5.12, open GPU kernel module): NCCL uses it", near)
    state = (
        "is not available (kernel < 5.12 or the proprietary GPU kernel module)"
        if available is False
        else "may not be (the kernel release or GPU kernel module is unknown)"
    )
    return PeermemNeed(
        True,
        f"{len(near)} GPU(s) use GPUDirect RDMA by NCCL's defaults, no peer-memory module is loaded and DMA-BUF "
        + state,
        near,
    )
