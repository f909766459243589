"""NUMA and guests: NUMA_UNKNOWN, NUMA_CPULIST_MISMATCH, CPU_LESS_NUMA_NODE, NUMA_NODES_OVERLAP
and VM_FLAT_PCI_TREE (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.findings.context import (
    Context,
    node_cpus_evidence,
    node_memory_evidence,
    numa_evidence,
    sysfs_attr,
)
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Node


def check_numa(c: Context) -> list[Finding]:
    """NUMA_UNKNOWN, NUMA_CPULIST_MISMATCH and CPU_LESS_NUMA_NODE."""
    topo = c.topo
    out = []
    multi = topo.multi_node
    placed = [d for d in topo.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and not d.is_vf]
    unknown = [d for d in placed if d.numa_node is None]
    if unknown and multi and c.offline:
        out.append(
            c.finding(
                "NUMA_UNKNOWN",
                [d.id for d in unknown],
                [e for d in unknown[:8] for e in numa_evidence(c, d)],
                say="pasted",
                fix="pasted",
                severity=Severity.INFO,
                functions=len(unknown),
            )
        )  # a gap in the output given, not (yet) a fault of the host
    elif unknown and (multi or (topo.virtualized and topo.gpus)):
        vm = bool(topo.virtualized)
        out.append(
            c.finding(
                "NUMA_UNKNOWN",
                [d.id for d in unknown],
                [e for d in unknown[:8] for e in numa_evidence(c, d)],
                say="" if multi else "guest",
                fix="guest" if vm else "",
                severity=Severity.WARNING if multi else Severity.INFO,
                functions=len(unknown),
            )
        )
    for d in placed:
        if d.numa_source != "numa_node" or d.local_cpus is None:
            continue
        node = topo.node(d.numa_node)
        local = d.local_cpus
        if node is None or not node.cpus or local == topo.all_cpus or local & node.cpus:
            continue
        out.append(
            c.finding(
                "NUMA_CPULIST_MISMATCH",
                [d.id],
                numa_evidence(c, d)
                + [
                    Evidence(sysfs_attr(d, "local_cpulist"), str(d.local_cpus)),
                    Evidence(host_path(f"sys/devices/system/node/node{node.id}/cpulist"), node.cpulist),
                ],
                id=d.id,
                node=d.numa_node,
                node_cpus=node.cpulist,
                local_cpus=d.local_cpus,
            )
        )
    out.extend(_check_overlap(c))
    out.extend(_check_cpu_less(c))
    return out


def _check_cpu_less(c: Context) -> list[Finding]:
    """CPU_LESS_NUMA_NODE: nodes with memory and no CPUs, grouped by the CPU node to bind to;
    a GPU's own memory (Grace) is named as such.  A node without memory either (Grace's empty
    nodes for MIG memory partitions, ``memory_bytes`` 0) holds nothing to bind to: left out."""
    groups: dict[tuple[int | None, bool], list[Node]] = {}
    for n in c.topo.nodes:
        if n.cpu_less and n.memory_bytes != 0:
            groups.setdefault((n.nearest_cpu_node, n.gpu is not None), []).append(n)
    out = []
    for (target, gpu_memory), nodes in sorted(
        groups.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0, kv[0][1])
    ):
        ids = [n.id for n in nodes]
        names = ", ".join(str(i) for i in ids)
        bind = f"bind CPUs to node {target} instead" if target is not None else "no node has CPUs"
        out.append(
            c.finding(
                "CPU_LESS_NUMA_NODE",
                [f"node{i}" for i in ids],
                [node_memory_evidence(c, i) for i in ids[:8]],
                say="gpu memory" if gpu_memory else "",
                fix="" if target is not None else "no cpus",
                nodes=names,
                gpus=", ".join(str(n.gpu) for n in nodes),
                bind=bind,
                target=target,
                node=ids[0],
            )
        )
    return out


def _check_overlap(c: Context) -> list[Finding]:
    """NUMA_NODES_OVERLAP: nodes whose CPU lists share CPUs (a buggy SRAT), so no CPU set
    places a device on one node and binding "to a node" binds to the others' CPUs too."""
    owner: dict[int, int] = {}  # CPU -> the first node claiming it: linear in CPUs, not nodes^2
    overlapping: set[int] = set()
    for n in c.topo.nodes:
        for cpu in n.cpus:
            first = owner.setdefault(cpu, n.id)
            if first != n.id:
                overlapping.update((first, n.id))
    shared = sorted(overlapping)
    if not shared:
        return []
    return [
        c.finding(
            "NUMA_NODES_OVERLAP",
            [f"node{i}" for i in shared],
            [node_cpus_evidence(c, i) for i in shared[:8]],
            nodes=", ".join(str(i) for i in shared),
        )
    ]


def check_vm_flat(c: Context) -> list[Finding]:
    """VM_FLAT_PCI_TREE: a guest whose GPUs all sit on the root bus."""
    topo = c.topo
    if not topo.virtualized or len(topo.gpus) < 2:
        return []
    if any(g.ancestors for g in topo.gpus):
        return []
    return [
        c.finding(
            "VM_FLAT_PCI_TREE",
            [g.id for g in topo.gpus],
            [Evidence(sysfs_attr(g, ""), g.parent) for g in topo.gpus[:8]],
        )
    ]
