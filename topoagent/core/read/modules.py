"""Kernel modules and the peer-memory clients they register: ``/sys/module`` and
``/sys/kernel/mm/memory_peers``.

Both are about GPUDirect RDMA: a loaded module has a directory in ``/sys/module`` (built-in
ones with parameters too); each registered peer-memory client (``nv_mem`` from
``nvidia_peermem``) has one in ``memory_peers`` with a ``version`` file, the file NCCL checks
(NVIDIA/nccl src/transport/net_ib.cc, ncclIbGdrSupport).  Nothing here is required: an absent
directory is a module not loaded, a client not registered.
"""

from __future__ import annotations

from topoagent.core.hostfs import HostFS
from topoagent.core.snapshot import PEER_MEMORY_MODULES

__all__ = ["MEMORY_PEERS", "MODULES_OF_INTEREST", "memory_peers", "modules"]

#: Kernel modules whose presence matters for GPUDirect RDMA: the peer-memory modules NCCL
#: checks for (NVIDIA/nccl src/transport/net_ib.cc, ncclIbGdrSupport) and their drivers.
MODULES_OF_INTEREST = (
    "nvidia",
    *PEER_MEMORY_MODULES,
    "nvidia_uvm",
    "ib_core",
    "mlx5_core",
    "efa",
    "vfio_pci",
)
MEMORY_PEERS = "sys/kernel/mm/memory_peers"


def modules(fs: HostFS) -> tuple[str, ...]:
    """The modules of interest that are loaded (``sys/module/<name>`` is a directory)."""
    return tuple(m for m in MODULES_OF_INTEREST if fs.isdir(f"sys/module/{m}"))


def memory_peers(fs: HostFS) -> tuple[str, ...]:
    """The registered peer-memory clients (each ``memory_peers/<name>/version`` exists)."""
    return tuple(n for n in fs.listdir(MEMORY_PEERS) if fs.exists(f"{MEMORY_PEERS}/{n}/version"))
