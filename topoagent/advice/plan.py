"""Placement plans: per GPU, the NUMA node, CPUs, NICs and environment a rank should use.

A plan is a value; making one changes nothing.  CPU sets are always intersected with the
caller's allowed CPUs (a Slurm or container cpuset), never widened (REFERENCE §6.9).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topoagent.analysis.rails import RailPlan
from topoagent.cpuset import CpuSet
from topoagent.frozen import FrozenMap
from topoagent.topology import Device, Topology


@dataclass(frozen=True)
class GpuPlan:
    gpu: str
    bdf: str | None
    #: PCI-bus-order index: what CUDA_VISIBLE_DEVICES means with CUDA_DEVICE_ORDER=PCI_BUS_ID.
    cuda_index: int
    numa_node: int | None
    cpus: CpuSet | None
    nics: tuple[str, ...]
    env: FrozenMap[str, str] = field(default_factory=FrozenMap)
    numactl: str | None = None


@dataclass(frozen=True)
class NumaGroup:
    """GPUs that share a NUMA node: one mask per node for per-socket jobs."""

    numa_node: int | None
    gpus: tuple[str, ...]
    cuda_visible_devices: str
    cpus: CpuSet | None


@dataclass(frozen=True)
class Plan:
    gpus: tuple[GpuPlan, ...]
    numa_groups: tuple[NumaGroup, ...]


def gpu_cpus(topo: Topology, gpu: Device) -> CpuSet | None:
    """The CPUs local to a GPU: its node's, else its socket's, else its own local CPU list."""
    node = topo.node(gpu.numa_node)
    if node is not None and node.cpus:
        return node.cpus
    if gpu.socket is not None:
        sock = next((s for s in topo.sockets if s.id == gpu.socket), None)
        if sock is not None and sock.cpus:
            return sock.cpus
    if gpu.local_cpus is not None:
        local = gpu.local_cpus
        if local and local != topo.all_cpus:
            return local
    return None


def _allowed(topo: Topology) -> CpuSet | None:
    return topo.snapshot.allowed_cpus


def make_plan(topo: Topology, rails: RailPlan) -> Plan:
    allowed = _allowed(topo)
    plans = []
    for index, g in enumerate(topo.gpus):
        local = gpu_cpus(topo, g)
        cpus = local if local is not None else allowed
        if cpus is not None and allowed is not None:
            cpus = cpus & allowed
        rail = rails.rail(g.id)
        nics = rail.nics if rail else ()
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(index)}
        ib = [name for n in nics if (d := topo.by_id(n)) is not None and d.driver != "efa" for name in d.rdma_devices]
        if ib:
            env["NCCL_IB_HCA"] = "=" + ",".join(ib)
            env["UCX_NET_DEVICES"] = ",".join(f"{name}:1" for name in ib)
        node = topo.node(g.numa_node)
        numactl = f"numactl --cpunodebind={node.id} --membind={node.id}" if node is not None and node.cpus else None
        plans.append(GpuPlan(g.id, g.bdf, index, g.numa_node, cpus,
                             nics, FrozenMap(env), numactl))
    groups: dict[int | None, list[GpuPlan]] = {}
    for p in plans:
        groups.setdefault(p.numa_node, []).append(p)
    numa_groups = []
    for node, members in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        cpus = CpuSet().union(*(m.cpus for m in members if m.cpus)) if any(m.cpus for m in members) else None
        numa_groups.append(NumaGroup(node, tuple(m.gpu for m in members),
                                     ",".join(str(m.cuda_index) for m in members),
                                     cpus))
    return Plan(tuple(plans), tuple(numa_groups))
