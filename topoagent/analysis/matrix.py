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
    snap = topo.snapshot
    nvml_numa = {g.bdf: g.numa_node for g in snap.nvml_gpus}
    cpus = {p.gpu: p.cpus for p in result.plan.gpus}
    # Offline (a pasted matrix): a GPU's CPU Affinity and GPU NUMA ID are printed as given.
    given_memory = {} if snap.from_host_tree else {m.label: m.node for m in snap.gpu_memory_nodes}
    rows: list[tuple[str, TopoDevice]] = []
    for g in topo.gpus:
        given_cpus = not snap.from_host_tree and g.label is not None and g.local_cpus is not None
        rows.append((g.id, TopoDevice(
            label=f"GPU{len(rows)}", kind="gpu", cpu_affinity=g.local_cpus if given_cpus else cpus.get(g.id),
            numa_affinity=str(g.numa_node) if g.numa_node is not None else None,
            gpu_numa_id=_gpu_numa_id(nvml_numa, given_memory, g))))
    n = 0
    for nic in topo.nics:
        # A NIC the source calls RDMA-capable without naming its RDMA device still has a row.
        for rdma in nic.rdma_devices or ((None,) if nic.rdma else ()):
            rows.append((nic.id, TopoDevice(label=f"NIC{n}", kind="nic", rdma_name=rdma)))
            n += 1
    def cell(i: int, j: int) -> str:
        (a, _), (b, _) = rows[i], rows[j]
        if i == j:
            return "X"
        return "PIX" if a == b else idx[(a, b)].token  # two RDMA devices of one function

    cells = tuple(tuple(cell(i, j) for j in range(len(rows))) for i in range(len(rows)))
    return TopoMatrix(devices=tuple(d for _, d in rows), cells=cells)


def _gpu_numa_id(nvml: dict, given: dict, g) -> int | None:  # type: ignore[type-arg]
    value = nvml.get(g.bdf) if g.bdf is not None else None
    return given.get(g.label) if value is None and g.label is not None else value
