"""CPUs: ``/sys/devices/system/cpu`` (drivers/base/cpu.c, drivers/base/topology.c;
Documentation/ABI/stable/sysfs-devices-system-cpu).

Read as the kernel writes them (hwloc's topology-linux.c reads the same files the same way):
offline CPUs left out (``online``), cores from ``thread_siblings_list``, packages from
``physical_package_id``, else from the package sibling lists.  Every file is optional: a CPU
whose files are missing keeps unknown core and package.
"""

from __future__ import annotations

from topoagent.core.cpuset import CpuSet
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read.attr import numbered, parsed, value
from topoagent.core.snapshot import Cpu

__all__ = ["CPU", "NODE_LINK_PREFIX", "ONLINE", "TOPOLOGY_FILES", "CpuReader"]

CPU = "sys/devices/system/cpu"
#: Optional: the CPUs that run (else each ``cpuN/online``; every ``cpuN`` counts where no file says).
ONLINE = f"{CPU}/online"
#: Optional files of ``cpuN/topology/``: the core's threads, the package id (-1: none, on s390
#: and some POWER), the package's CPUs (``package_cpus_list``; ``core_siblings_list`` before
#: Linux 5.3).
TOPOLOGY_FILES = ("thread_siblings_list", "physical_package_id", "package_cpus_list", "core_siblings_list")
#: Optional links ``cpuN/nodeM``: read only where a NUMA node's own CPU files fail
#: (:meth:`CpuReader.node_links`).
NODE_LINK_PREFIX = "node"

_UNREAD = object()


class CpuReader:
    """The CPUs below a :class:`HostFS` root; ``online`` and the node links read once."""

    def __init__(self, fs: HostFS) -> None:
        self.fs = fs
        #: ``online`` once read (None: the kernel does not say).
        self._online: CpuSet | None | object = _UNREAD
        #: node -> CPUs from the CPUs' node links, read only where a node's own files fail.
        self._node_links: dict[int, CpuSet] | None = None

    def online(self) -> CpuSet | None:
        """``cpu/online``: the CPUs that run; where that file is missing (kernels before 2.6.30
        and captures that left it out), every ``cpuN`` but those whose own ``online`` reads 0
        (drivers/base/cpu.c writes one per hot-pluggable CPU; the boot CPU of old x86 kernels
        has none and is online); None where the kernel does not say."""
        if self._online is _UNREAD:
            self._online = value(self.fs, ONLINE, sv.parse_cpulist_file)
            if self._online is None:
                self._online = self._online_from_cpus()
        return self._online  # type: ignore[return-value]

    def _online_from_cpus(self) -> CpuSet | None:
        """The CPUs whose ``cpuN/online`` does not read 0, where one does (an offline CPU); None
        where none does, as before the kernel listed them (every ``cpuN`` counts then)."""
        ids = [i for n in self.fs.listdir(CPU) if (i := numbered(n, "cpu")) is not None]
        offline = {i for i in ids if (self.fs.text(f"{CPU}/cpu{i}/online") or "").strip() == "0"}
        return CpuSet(i for i in ids if i not in offline) if offline else None

    def node_links(self) -> dict[int, CpuSet]:
        """Node -> CPUs from the ``cpuN/nodeM`` links drivers/base/node.c makes for each online
        CPU (``register_cpu_under_node``); read only when a node's own files fail."""
        if self._node_links is None:
            members: dict[int, set[int]] = {}
            for n in self.fs.listdir(CPU):
                cpu = numbered(n, "cpu")
                if cpu is None:
                    continue
                for entry in self.fs.names(f"{CPU}/{n}") or ():
                    node = numbered(entry, NODE_LINK_PREFIX)
                    if node is not None:
                        members.setdefault(node, set()).add(cpu)
            self._node_links = {node: CpuSet(cpus) for node, cpus in members.items()}
        return self._node_links

    def cpus(self) -> tuple[Cpu, ...]:
        """The online CPUs (every ``cpuN`` where ``online`` is missing), with package and core;
        a package the kernel numbers -1 (s390, some POWER) is numbered by its CPU set.

        One read per core and two per package, not per CPU: a CPU's thread_siblings_list names
        its core's threads and package_cpus_list its package's CPUs.
        """
        online = self.online()
        ids = sorted(
            {
                i
                for n in self.fs.listdir(CPU)
                if (i := numbered(n, "cpu")) is not None and (online is None or i in online)
            }
        )
        core_of: dict[int, CpuSet] = {}
        package_of: dict[int, int | None] = {}
        unnumbered: set[CpuSet] = set()  # packages whose id the kernel writes as -1
        for i in ids:
            topology = f"{CPU}/cpu{i}/topology"
            if i not in core_of:
                self._read_core(topology, i, core_of)
            if i not in package_of:
                self._read_package(topology, i, package_of, unnumbered)
        _number_packages(package_of, unnumbered)
        return tuple(Cpu(id=i, package=package_of.get(i), siblings=core_of.get(i)) for i in ids)

    def _read_core(self, topology: str, cpu: int, core_of: dict[int, CpuSet]) -> None:
        """Note the core of ``cpu`` (and of its threads) from its ``thread_siblings_list``."""
        siblings = value(self.fs, f"{topology}/thread_siblings_list", sv.parse_cpulist_file)
        if siblings is not None and cpu in siblings:
            core_of.update(dict.fromkeys(siblings, siblings))

    def _read_package(
        self, topology: str, cpu: int, package_of: dict[int, int | None], unnumbered: set[CpuSet]
    ) -> None:
        """Note the package of ``cpu`` (and of the package's other CPUs); a package numbered -1
        goes to ``unnumbered``."""
        text = self.fs.text(f"{topology}/physical_package_id")
        package = parsed(self.fs, f"{topology}/physical_package_id", text, sv.parse_numa_node)  # -1: none
        members = self._package_cpus(topology)
        cpus = members if members is not None and cpu in members else CpuSet((cpu,))
        package_of.update(dict.fromkeys(cpus, package))
        # Only the kernel's own -1 is numbered here: an unreadable file stays unknown rather
        # than making a socket of its own.
        if text == "-1" and members is not None and cpu in members:
            unnumbered.add(members)

    def _package_cpus(self, topology: str) -> CpuSet | None:
        """The package's CPUs: ``package_cpus_list``, else ``core_siblings_list``."""
        for name in TOPOLOGY_FILES[2:]:
            cpus = value(self.fs, f"{topology}/{name}", sv.parse_cpulist_file)
            if cpus is not None:
                return cpus
        return None


def _number_packages(package_of: dict[int, int | None], unnumbered: set[CpuSet]) -> None:
    """Number the packages the kernel writes as -1 as hwloc makes them too (with an unknown
    index): after the known ids, in the order of their first CPU, so every CPU keeps a socket."""
    first = max((p for p in package_of.values() if p is not None), default=-1) + 1
    for k, members in enumerate(sorted(unnumbered, key=lambda m: m.first or 0)):
        package_of.update(dict.fromkeys(members, first + k))
