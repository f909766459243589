"""This process and others (allowed CPUs, threads and their affinity) and the NIC byte
counters: everything read through psutil lives here (reads only).

The CPUs a caller may use are the intersection of its affinity (``sched_getaffinity``) and
its cgroup's ``cpuset.cpus.effective`` (cgroup v2; ``cpuset.effective_cpus`` on v1): a Slurm
job or a container is confined by both.
"""

from __future__ import annotations

import os
from types import ModuleType

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.errors import TopoagentError
from topoagent.core.hostfs import HostFS
from topoagent.core.snapshot import ThreadAffinity


class ProcessError(TopoagentError):
    """A process that is not there or cannot be read."""


def _psutil() -> ModuleType:
    """psutil, imported when a process or NIC counter is read: importing it reads the running
    host's ``/proc`` (``/proc/stat`` among others, in psutil/_pslinux.py), which a scan of a
    captured or fake root must never do (tests/core/test_hostile_fs.py)."""
    import psutil

    module: ModuleType = psutil  # untyped (no stubs): typed here, once
    return module


def cgroup_cpus(fs: HostFS | None = None, pid: int | str = "self") -> CpuSet | None:
    """The effective cpuset of a process's cgroup (this one's by default), or None where
    there is none to read."""
    fs = fs or HostFS("/")
    text = fs.text(f"proc/{pid}/cgroup", quiet=True)
    if not text:
        return None
    for line in text.splitlines():
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.strip("/")
        if hier == "0" and controllers == "":  # cgroup v2 (Documentation/admin-guide/cgroup-v2.rst)
            rel = "/".join(p for p in ("sys/fs/cgroup", path, "cpuset.cpus.effective") if p)
        elif "cpuset" in controllers.split(","):  # cgroup v1 cpuset controller
            rel = "/".join(p for p in ("sys/fs/cgroup/cpuset", path, "cpuset.effective_cpus") if p)
        else:
            continue
        value = fs.text(rel, quiet=True)
        if value:
            try:
                return CpuSet.parse(value)
            except ValueError:
                return None
    return None


def allowed_cpus() -> CpuSet:
    """The CPUs this process may run on: its affinity, within its cgroup's cpuset."""
    mine = CpuSet(os.sched_getaffinity(0))
    cg = cgroup_cpus()
    return mine & cg if cg else mine


def threads(pid: int) -> tuple[ThreadAffinity, ...]:
    """Every thread of ``pid`` with its current affinity (psutil lists the threads)."""
    psutil = _psutil()
    try:
        proc = psutil.Process(pid)
        tids = sorted(t.id for t in proc.threads())
    except psutil.NoSuchProcess:
        raise ProcessError(f"no process {pid}") from None
    except psutil.AccessDenied:
        raise ProcessError(f"process {pid}: permission denied reading its threads") from None
    out = []
    for tid in tids:
        try:
            out.append(ThreadAffinity(tid, CpuSet(os.sched_getaffinity(tid)), thread_start(tid)))
        except ProcessLookupError:
            continue  # the thread ended meanwhile
    if not out:
        raise ProcessError(f"no process {pid}")
    return tuple(out)


def thread_start(tid: int) -> int | None:
    """When a thread started, in clock ticks after boot (``/proc/TID/stat`` field 22,
    ``starttime``: proc(5)); None when it has ended.  A tid plus its start names one thread
    even after the kernel hands the number to another."""
    text = HostFS("/").text(f"proc/{tid}/stat", quiet=True)
    fields = (text or "").rpartition(")")[2].split()  # the name (field 2) may hold spaces and ')'
    return decimal(fields[19]) if len(fields) > 19 else None  # fields[0] is field 3


def thread_affinity(tid: int) -> CpuSet | None:
    """A thread's affinity now (None when it has ended)."""
    try:
        return CpuSet(os.sched_getaffinity(tid))
    except ProcessLookupError:
        return None


def owner_uid(pid: int) -> int | None:
    """The real uid of a process (None when it cannot be read)."""
    psutil = _psutil()
    try:
        return int(psutil.Process(pid).uids().real)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def interface_bytes() -> dict[str, int]:
    """Bytes sent plus received so far per network interface ({} when psutil cannot say)."""
    try:
        counters = _psutil().net_io_counters(pernic=True)
    except OSError:  # /proc/net/dev unreadable: no counters
        return {}
    return {name: c.bytes_sent + c.bytes_recv for name, c in counters.items()}
