"""NUMA nodes: ``/sys/devices/system/node`` (drivers/base/node.c;
Documentation/ABI/stable/sysfs-devices-node).

Every file of a node is optional.  The nodes are the ``nodeN`` directories and those
``node/online`` lists (a capture may lack a directory).  A node's CPUs come from ``cpulist``,
else ``cpumap`` (kernels before 2.6.26 wrote only the mask), else the ``cpuN/nodeM`` links of
the CPUs (:meth:`~topoagent.core.read.cpu.CpuReader.node_links`), offline CPUs always left out
(:meth:`~topoagent.core.read.cpu.CpuReader.online`): nothing is planned on a CPU that does not
run; a node whose CPUs no file gives has ``cpus`` None (unknown, not CPU-less).  hwloc's
topology-linux.c reads the same files the same way.
"""

from __future__ import annotations

from topoagent.core.cpuset import CpuSet
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read.attr import numbered, value
from topoagent.core.read.cpu import CpuReader
from topoagent.core.snapshot import NumaNode

__all__ = ["NODE", "NODE_FILES", "numa_nodes"]

NODE = "sys/devices/system/node"
#: Optional files of ``nodeN/``: its CPUs as a list, else as a mask; ``MemTotal`` of its
#: ``meminfo``; its ``distance`` row.
NODE_FILES = ("cpulist", "cpumap", "meminfo", "distance")
#: The CPU files in the order they are tried, and their parsers.
_CPU_FILES = (("cpulist", sv.parse_cpulist_file), ("cpumap", sv.parse_cpumap_file))


def numa_nodes(fs: HostFS, cpus: CpuReader) -> tuple[NumaNode, ...]:
    """Every NUMA node; an unlistable node directory still yields the nodes the CPUs name."""
    names = fs.listdir(NODE)
    if not names and fs.isdir(NODE):
        # Listed nothing but exists: unreadable (the listing recorded why).  The nodes are
        # still named by each CPU's node link; never fold them into one implied node.
        return tuple(
            NumaNode(id=i, cpus=members, memory_bytes=None) for i, members in sorted(cpus.node_links().items())
        )
    ids = {i for n in names if (i := numbered(n, "node")) is not None}
    # The kernel makes a nodeN directory for every node in node/online (drivers/base/node.c);
    # one a capture left out is still a node, whose CPUs its CPUs' node links name.
    listed = value(fs, f"{NODE}/online", sv.parse_cpulist_file) if ids else None
    ids |= set(listed or ())
    online = cpus.online()
    return tuple(_node(fs, i, cpus, online) for i in sorted(ids))


def _node(fs: HostFS, i: int, cpus: CpuReader, online: CpuSet | None) -> NumaNode:
    """Node ``i`` from its files: its online CPUs, memory and distance row."""
    d = f"{NODE}/node{i}"
    members, source = _node_cpus(fs, d, i, cpus)
    return NumaNode(
        id=i,
        cpus=members & online if members is not None and online is not None else members,
        memory_bytes=value(fs, f"{d}/meminfo", sv.parse_node_meminfo_total),
        distances=value(fs, f"{d}/distance", sv.parse_distances) or (),
        cpus_file=None if source == "cpulist" else source,
    )


def _node_cpus(fs: HostFS, d: str, node: int, cpus: CpuReader) -> tuple[CpuSet | None, str | None]:
    """A node's CPUs and the file they came from (None, None where no file says)."""
    for name, parse in _CPU_FILES:
        members = value(fs, f"{d}/{name}", parse)
        if members is not None:
            return members, name
    # No link names a CPU-less node either: where the node's files fail, none is unknown.
    members = cpus.node_links().get(node)
    return (members, "cpu/cpu*/node*") if members is not None else (None, None)
