"""GPUs on NVLink-C2C to a Grace CPU (GH200, GB200, GB300, GB10): the one place for their rule.

Such a GPU reaches its CPU over NVLink-C2C, not PCIe: its PCI function sits alone under its own
root port, and the NICs hang off Grace's PCIe.  ``nvidia-smi topo -m`` therefore prints ``SYS``
between the GPU and every NIC, those of its own Grace too (sgl-project/sglang#11208 pastes a
GB200 tray's matrix).  NCCL tells them apart (NVIDIA/nccl src/graph/paths.cc,
``ncclTopoComputePaths``): the GPU's path to its CPU is ``PATH_C2C``, the CPU's to a NIC on it
``PATH_PHB``, and ``mergePathType`` makes the GPU -> NIC path ``PATH_P2C`` -- but only for the
GPU's *local* NICs, those ``ncclTopoGetLocal`` returns: the fastest paths first (the NIC's
speed, its ports merged), then the best type.  A slower NIC of the same CPU keeps ``PATH_PHB``
(GPUDirect RDMA off: PHB is above NCCL's P2C default), and a NIC of the other CPU stays
``PATH_SYS``.  (src/graph/topo.h orders them ``PATH_PXB`` 5 < ``PATH_P2C`` 6 < ``PATH_PHB`` 8 <
``PATH_SYS`` 9.)  With NVLinks to a peer GPU that has a P2C NIC, NCCL may still reach another
Grace's NIC through that peer (PXN, ``NCCL_PXN_C2C``); the verdicts here are for the direct
path.

:func:`is_c2c` says which GPUs these are; :func:`own_cpu_nic` says whether a NIC hangs off the
GPU's own CPU; :func:`p2c_nic` whether NCCL gives it the P2C path.  Findings
(``GPU_NIC_CROSS_SOCKET``), rails (which NICs come first) and the GPUDirect RDMA verdict
(:func:`topoagent.core.analysis.paths.gdr_by_default`) all use these.
"""

from __future__ import annotations

from topoagent.core.analysis.nicspeed import merged_bandwidth_gbps
from topoagent.core.pci import C2C_GPUS, DeviceKind
from topoagent.core.platform import ComplexKind
from topoagent.core.topology import Device, Topology


def is_c2c(topo: Topology, gpu: Device) -> bool:
    """A GPU on NVLink-C2C to a Grace CPU: a known part, or its memory onlined as a NUMA node
    (NVML's NUMA id, the driver's ``numa_status``, a pasted matrix's numeric ``GPU NUMA ID``)
    on an Arm CPU or one of unknown kind.  POWER9 onlines its V100s' memory too, over NVLink
    2.0 to the CPU, which NCCL does not treat as C2C: a known non-Arm CPU rules it out."""
    if gpu.kind is not DeviceKind.GPU:
        return False
    if (gpu.vendor_id, gpu.device_id) in C2C_GPUS:
        return True
    identity = topo.cpu_identity
    arch = identity.arch if identity is not None else None
    if arch is not None and arch != "arm64":
        return False
    return gpu.memory_node is not None


def own_cpu_nic(topo: Topology, gpu: Device, nic: Device) -> bool | None:
    """For a C2C GPU: True when ``nic`` hangs off the GPU's own CPU (NCCL's ``P2C`` path,
    GPUDirect RDMA on by default), False when off another CPU (``SYS``); None when the GPU is
    not on C2C or either NUMA node is unknown.  The CPU is told by NUMA node: a Grace is one
    node with CPUs, and the GPU's PCI function carries that node (its memory nodes are others)."""
    if not is_c2c(topo, gpu) or gpu.numa_node is None or nic.numa_node is None:
        return None
    return gpu.numa_node == nic.numa_node


def p2c_nic(topo: Topology, gpu: Device, nic: Device) -> bool:
    """Whether NCCL's path from a C2C ``gpu`` to ``nic`` is ``P2C``: ``nic`` hangs off the
    GPU's own CPU and is among the GPU's local NICs as ``ncclTopoGetLocal`` picks them
    (NVIDIA/nccl src/graph/topo.cc): of the RDMA NICs, those with the highest speed (ports of
    one device merged, :func:`topoagent.core.analysis.nicspeed.merged_bandwidth_gbps`), and among
    those the best path type -- the own CPU's (PHB) before another's (SYS)."""
    if not own_cpu_nic(topo, gpu, nic):
        return False
    own = topo.complex_of(gpu)
    if own is not None and own.kind is ComplexKind.DATA_DIRECT:
        # Its local NIC is its complex's, reached within the CX-8 switch (PXB) at a wider PCIe
        # link than any NIC through Grace: NCCL's P2C goes to no other (ncclTopoGetLocal).
        return False
    rdma = [n for n in topo.nics if n.rdma_capable and not n.is_vf]
    if nic.id not in {n.id for n in rdma}:
        return False
    # Among the fastest, an own-CPU NIC (PHB) comes before another CPU's (SYS), so an own-CPU
    # NIC at the top speed is always local.
    return merged_bandwidth_gbps(topo, nic) >= max(merged_bandwidth_gbps(topo, n) for n in rdma)
