"""The GPU/NIC matrix of a scan, as the value ``nvidia-smi topo -m`` prints.

Rows are GPUs in PCI bus order, then one NIC per RDMA device (nvidia-smi lists RDMA devices,
not netdevs), labelled ``NIC<n>`` with a legend naming the RDMA device.  GPU rows carry the
CPU affinity (the GPU's NUMA-local CPUs within the caller's cpuset, as nvidia-smi intersects
them) and the NUMA affinity; ``GPU NUMA ID`` is the GPU's own memory node where NVML has one
(Grace), ``N/A`` elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topoagent.analysis.rails import path_index
from topoagent.parsers.nvsmi_topo import TopoDevice, TopoMatrix

if TYPE_CHECKING:
    from topoagent.api import ScanResult


def matrix_of(result: "ScanResult") -> TopoMatrix:
    topo = result.topology
    idx = path_index(result.paths)
    nvml_numa = {g.bdf: g.numa_node for g in topo.snapshot.nvml_gpus}
    cpus = {p.gpu: p.cpus for p in result.plan.gpus}
    rows: list[tuple[str, TopoDevice]] = []
    for g in topo.gpus:
        rows.append((g.id, TopoDevice(
            label=f"GPU{len(rows)}", kind="gpu", cpu_affinity=cpus.get(g.id),
            numa_affinity=str(g.numa_node) if g.numa_node is not None else None,
            gpu_numa_id=nvml_numa.get(g.bdf))))
    n = 0
    for nic in topo.nics:
        for rdma in nic.rdma_devices:
            rows.append((nic.id, TopoDevice(label=f"NIC{n}", kind="nic", rdma_name=rdma)))
            n += 1
    def cell(i: int, j: int) -> str:
        (a, _), (b, _) = rows[i], rows[j]
        if i == j:
            return "X"
        return "PIX" if a == b else idx[(a, b)].token  # two RDMA devices of one function

    cells = tuple(tuple(cell(i, j) for j in range(len(rows))) for i in range(len(rows)))
    return TopoMatrix(devices=tuple(d for _, d in rows), cells=cells)
