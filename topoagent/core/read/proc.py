"""What the scan reads below ``/proc``: the host name, the kernel command line, the first CPU's
``cpuinfo``, this process's allowed CPUs, and the NVIDIA driver's GPU memory nodes.

Every file is optional: a value it would give stays unknown (None).
"""

from __future__ import annotations

from topoagent.core.bdf import is_bdf
from topoagent.core.cpuset import CpuSet
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read.attr import value
from topoagent.core.snapshot import GpuMemoryNode

__all__ = [
    "CMDLINE",
    "CPUINFO",
    "HOSTNAME",
    "NVIDIA_GPUS",
    "SELF_STATUS",
    "allowed_cpus",
    "cpuinfo",
    "gpu_memory_nodes",
]

HOSTNAME = "proc/sys/kernel/hostname"
CMDLINE = "proc/cmdline"
#: Its head only: the first CPU's block holds the flags and model lines (a 1,000-CPU cpuinfo
#: runs to megabytes).
CPUINFO = "proc/cpuinfo"
#: Its ``Cpus_allowed_list`` line.
SELF_STATUS = "proc/self/status"
#: ``<BDF>/numa_status`` of each GPU whose memory the driver onlines as a NUMA node.
NVIDIA_GPUS = "proc/driver/nvidia/gpus"


def cpuinfo(fs: HostFS) -> str | None:
    """``/proc/cpuinfo``'s head (the first CPU's block)."""
    return fs.text(CPUINFO, truncate=True)


def allowed_cpus(fs: HostFS) -> CpuSet | None:
    """The CPUs this process may run on (``Cpus_allowed_list``); None when unknown."""
    return value(fs, SELF_STATUS, sv.parse_cpus_allowed)


def gpu_memory_nodes(fs: HostFS) -> tuple[GpuMemoryNode, ...]:
    """GPU memory onlined as NUMA nodes (POWER9 + V100, Grace Hopper), by owning GPU."""
    out = []
    for entry in fs.listdir(NVIDIA_GPUS):
        if not is_bdf(entry):
            continue
        node = value(fs, f"{NVIDIA_GPUS}/{entry}/numa_status", sv.parse_nvidia_numa_status)
        if node is not None:
            out.append(GpuMemoryNode(bdf=entry.lower(), node=node))
    return tuple(out)
