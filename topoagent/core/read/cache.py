"""Which CPUs share a last-level (L3) cache: the core complexes of a host.

On AMD EPYC each CCD (Zen 2/3: each CCX) has its own L3, so a socket holds 8-16 of them; on
Intel one L3 usually spans the socket.  The kernel says so per CPU in
``sys/devices/system/cpu/cpuN/cache/indexM/`` (Documentation/ABI/testing/sysfs-devices-system-cpu,
"cache/index*"): ``level`` and ``shared_cpu_list``, the CPUs that share that cache.  On x86 and
arm64 the leaves come L1d, L1i, L2, L3 (drivers/base/cacheinfo.c numbers them in the order the
CPU reports them), so ``index3`` is the L3 where there is one; its ``level`` is checked, and a
CPU whose ``index3`` is absent or is no level-3 cache has no complex.

One read per complex, not per CPU: every CPU a ``shared_cpu_list`` names is settled by it.  A
source of its own (``api.SOURCES``), so the sysfs reader stays as it is.
"""

from __future__ import annotations

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read import Collection
from topoagent.core.snapshot import Cpu

__all__ = ["collect", "l3_domains"]

CPU_DIR = "sys/devices/system/cpu"


def _domain(fs: HostFS, cpu: int) -> CpuSet | None:
    """The CPUs sharing ``cpu``'s L3 (``index3``), or None where it has none the kernel names."""
    base = f"{CPU_DIR}/cpu{cpu}/cache/index3"
    level = fs.text(f"{base}/level", quiet=True)
    if level is None or level.strip() != "3":
        return None
    text = fs.text(f"{base}/shared_cpu_list")
    if text is None:
        return None
    try:
        shared = sv.parse_cpulist_file(text)
    except ValueError as exc:
        fs.record(f"{base}/shared_cpu_list", f"unparsable: {exc}")
        return None
    return shared if cpu in shared else None


def l3_domains(fs: HostFS, cpus: tuple[Cpu, ...]) -> tuple[CpuSet, ...]:
    """The L3 domains of the online ``cpus`` (each cut to them), ordered by first CPU; () where
    the kernel names none.  A CPU whose L3 is not known is in no domain."""
    online = CpuSet(c.id for c in cpus)
    first = min(online, default=None)
    # The kernel makes cache/ for every online CPU or for none (drivers/base/cacheinfo.c builds
    # it at CPU online); without it on the first CPU, no CPU has one: one look, not one per CPU.
    if first is None or fs.names(f"{CPU_DIR}/cpu{first}/cache") is None:
        return ()
    seen: set[int] = set()
    out: list[CpuSet] = []
    for c in sorted(cpus, key=lambda x: x.id):
        if c.id in seen:
            continue
        shared = _domain(fs, c.id)
        if shared is None:
            seen.add(c.id)
            continue
        shared = shared & online
        seen.update(shared)
        out.append(shared)
    return tuple(sorted(out, key=lambda s: s.first or 0))


def collect(c: Collection) -> None:
    """Add the L3 domains (:attr:`~topoagent.core.snapshot.Snapshot.l3_domains`) of the host
    below ``inputs.root`` to the snapshot; what failed to read joins its probe errors."""
    snap = c.require_snapshot()
    if not snap.cpus:
        return
    fs = HostFS(c.inputs.root)
    domains = l3_domains(fs, snap.cpus)
    c.snapshot = msgspec.structs.replace(snap, l3_domains=domains, probe_errors=snap.probe_errors + tuple(fs.errors))
