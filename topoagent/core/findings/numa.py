"""NUMA and guests: NUMA_UNKNOWN, NUMA_CPULIST_MISMATCH, CPU_LESS_NUMA_NODE, NUMA_NODES_OVERLAP,
NUMA_SWITCH_MISMATCH and VM_FLAT_PCI_TREE (their words and rules:
:mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis.guest import emulated_functions
from topoagent.core.analysis.locality import switch_node_mismatches
from topoagent.core.findings.context import (
    Context,
    given_evidence,
    node_cpus_evidence,
    node_memory_evidence,
    numa_evidence,
    sysfs_attr,
)
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Node


def check_numa(c: Context) -> list[Finding]:
    """NUMA_UNKNOWN, NUMA_CPULIST_MISMATCH, NUMA_NODES_OVERLAP and CPU_LESS_NUMA_NODE."""
    topo = c.topo
    out = _numa_unknown(c)
    placed = [d for d in topo.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and not d.is_vf]
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


def _numa_unknown(c: Context) -> list[Finding]:
    """NUMA_UNKNOWN: GPUs/NICs without a NUMA node on a host known to have several (or in a
    guest with GPUs); from pasted text, also where the paste shows several nodes without
    naming the device's (``N/A``, a list such as ``0-7`` for a GPU that is not on Grace)."""
    topo = c.topo
    placed = [d for d in topo.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and not d.is_vf]
    unknown = [d for d in placed if d.numa_node is None]
    if not unknown:
        return []
    evidence = [e for d in unknown[:8] for e in numa_evidence(c, d)]
    if c.offline:
        if not (topo.multi_node or _paste_shows_nodes(c)):
            return []
        return [
            c.finding(
                "NUMA_UNKNOWN",
                [d.id for d in unknown],
                evidence,
                say="pasted",
                fix="pasted",
                severity=Severity.INFO,  # a gap in the output given, not (yet) a fault of the host
                functions=len(unknown),
            )
        ]
    multi = topo.multi_node
    if not (multi or (topo.virtualized and topo.gpus)):
        return []
    ids = {d.id for d in unknown}
    worst = sum(1 for p in c.paths if (p.a in ids or p.b in ids) and p.shown and not p.locality_known)
    return [
        c.finding(
            "NUMA_UNKNOWN",
            [d.id for d in unknown],
            evidence,
            say="" if multi else "guest",
            fix="guest" if topo.virtualized else "",
            severity=Severity.WARNING if multi else Severity.INFO,
            functions=len(unknown),
            paths=(
                f"; {worst} of their paths cross host bridges and are taken at their worst (SYS, marked unknown)"
                if worst
                else "; their path classes come from the PCIe tree, which places them"
            ),
        )
    ]


def _paste_shows_nodes(c: Context) -> bool:
    """Whether pasted output shows several NUMA nodes where it names none for a device: a stated
    SYS cell (between NUMA nodes, in nvidia-smi's legend), or GPUs with disjoint CPU affinities."""
    if any(p.pcie is PathClass.SYS and p.shown and p.locality_known for p in c.paths):
        return True
    sets = {g.local_cpus for g in c.topo.gpus if g.local_cpus}
    return any(not (a & b) for a in sets for b in sets if a != b)


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


def check_switch_node(c: Context) -> list[Finding]:
    """NUMA_SWITCH_MISMATCH: a GPU or NIC whose NUMA node disagrees with its switch siblings'
    (analysis.locality)."""
    out = []
    for m in switch_node_mismatches(c.topo):
        d = c.dev(m.device)
        sibs = [c.dev(i) for i in m.siblings]
        out.append(
            c.finding(
                "NUMA_SWITCH_MISMATCH",
                [d.id, *m.siblings],
                numa_evidence(c, d) + [e for s in sibs[:3] for e in numa_evidence(c, s)],
                id=d.id,
                node=m.node,
                siblings=", ".join(m.siblings[:4]) + (", ..." if len(m.siblings) > 4 else ""),
                siblings_node=m.siblings_node,
                switch=m.switch,
            )
        )
    return out


def check_vm_flat(c: Context) -> list[Finding]:
    """VM_FLAT_PCI_TREE: a guest whose GPUs sit below no PCIe switch (analysis.guest)."""
    flat = c.flat
    if flat is None:
        return []
    gpus = [c.dev(i) for i in flat.gpus]
    subjects = [*flat.gpus, *flat.nics]
    if not flat.proven:
        nics = [c.dev(i) for i in flat.nics]
        cells = [e for g in gpus[:2] for n in nics[:2] for e in given_evidence(c, g, n)]
        cells += given_evidence(c, gpus[0], gpus[1])
        inferred = Evidence("inferred: NVLinked GPUs, every GPU-NIC and NIC-NIC cell PHB", "an emulated root complex")
        return [c.finding("VM_FLAT_PCI_TREE", subjects, [*cells, inferred], say="suggested")]
    on_root = all(g.parent == g.root_bus for g in gpus)
    evidence = [Evidence(sysfs_attr(g, "") if not c.offline else f"lspci {g.bdf}: parent", g.parent) for g in gpus[:8]]
    if c.offline:
        evidence += [Evidence(f"lspci {d.bdf}", d.name) for d in emulated_functions(c.topo)[:2]]
    return [
        c.finding(
            "VM_FLAT_PCI_TREE",
            subjects,
            evidence,
            where="on the root bus" if on_root else "on a root port of one emulated root complex",
        )
    ]
