"""The sysfs source: a host's PCI, NUMA, CPU, network and RDMA facts from sysfs and procfs, as
one snapshot.

Each kernel directory has its reader, with its table of required and optional files:
:mod:`.pci` (``bus/pci/devices``), :mod:`.node` (``devices/system/node``), :mod:`.cpu`
(``devices/system/cpu``), :mod:`.net` (``class/net``), :mod:`.infiniband`
(``class/infiniband``), :mod:`.iommu` (``kernel/iommu_groups``), :mod:`.modules` (``module``,
``kernel/mm/memory_peers``), :mod:`.dmi` (``class/dmi/id``), :mod:`.hypervisor` and
:mod:`.proc` (``/proc``).  This module composes them.  Every read goes through
:class:`~topoagent.core.hostfs.HostFS`; every value goes through a pure parser.  A file that
fails to read or parse becomes a probe error and an unknown value; the scan carries on.
"""

from __future__ import annotations

import functools

import msgspec

from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read import Collection, dmi, hypervisor, infiniband, iommu, kernel, kfd, modules, net, node, proc
from topoagent.core.read.cpu import CpuReader
from topoagent.core.read.pci import PciReader
from topoagent.core.snapshot import PciFunction, Snapshot, SourceStatus, no_extended_reason

__all__ = ["collect", "read_sysfs"]


def read_sysfs(fs: HostFS) -> Snapshot:
    """Read a snapshot of the host below ``fs``'s root (checks that it is a sysfs tree first);
    its ``probe_errors`` hold what could not be read, in reading order."""
    fs.require_sysfs()
    pci = PciReader(fs)
    functions = pci.functions()
    vfs = frozenset(f.bdf for f in functions if f.physfn is not None and f.bdf is not None)
    cpus = CpuReader(fs)
    system = functools.cache(functools.partial(dmi.system, fs))  # read where first needed, once
    hostname = fs.text(proc.HOSTNAME)
    cmdline = fs.text(proc.CMDLINE)
    cpuinfo = proc.cpuinfo(fs)
    snap = Snapshot(
        hostname=hostname,
        root=fs.root,
        kernel_cmdline=cmdline,
        virtualized=hypervisor.virtualized(fs, cpuinfo, system),
        allowed_cpus=proc.allowed_cpus(fs),
        numa_nodes=node.numa_nodes(fs, cpus),
        cpus=cpus.cpus(),
        pci=functions,
        netdevs=net.netdevs(fs, pci.owner, vfs),
        rdma=infiniband.rdma_devices(fs, pci.owner, vfs),
        iommu_groups=iommu.iommu_groups(fs),
        modules=modules.modules(fs),
        memory_peers=modules.memory_peers(fs),
        gpu_memory_nodes=proc.gpu_memory_nodes(fs),
        dmi_vendor=system()[0],
        dmi_product=system()[1],
        cpu_model=sv.parse_cpuinfo_model(cpuinfo) if cpuinfo else None,
        system_model=dmi.device_tree_model(fs) or (sv.parse_cpuinfo_system(cpuinfo) if cpuinfo else None),
        cpu_identity=sv.parse_cpu_identity(cpuinfo) if cpuinfo else None,
        amd_gpus=kfd.amd_gpus(fs),
        # Without /sys/class (a capture that left it out: hwloc's gather does) no RDMA or
        # network device is listed, and no absence of one is proven.
        lists_every_nic=fs.isdir("sys/class"),
        kernel_release=kernel.kernel_release(fs),
        nvidia_open_module=kernel.nvidia_open_module(fs),
    )
    status = "partial" if fs.errors else "ok"
    detail = f"{len(fs.errors)} probe(s) failed" if fs.errors else None
    return msgspec.structs.replace(
        snap,
        sources=(SourceStatus("sysfs", status, detail), _config_status(functions)),
        probe_errors=tuple(fs.errors),
    )


def _config_status(functions: tuple[PciFunction, ...]) -> SourceStatus:
    """Whether config space was seen whole (extended space, where ACS lives) on every function."""
    configs = [f.config for f in functions if f.config is not None]
    if not configs:
        return SourceStatus("configspace", "unavailable", "no config files readable")
    if all(c.extended_readable for c in configs):
        return SourceStatus("configspace", "ok")
    reasons = sorted({no_extended_reason(c) for c in configs if not c.extended_readable})
    return SourceStatus(
        "configspace",
        "partial",
        f"extended config space not seen on some functions ({'; '.join(reasons)}): ACS unknown there",
    )


def collect(c: Collection) -> None:
    """The primary source of a host scan: the snapshot of ``inputs.root`` (whose root, in the
    snapshot, is a capture archive's path where the root is the archive read into memory)."""
    c.snapshot = read_sysfs(HostFS(c.inputs.root))
