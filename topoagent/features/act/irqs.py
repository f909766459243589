"""Interrupts of PCI functions: which IRQs a device has and where they may run (reads only).

``/sys/bus/pci/devices/X/msi_irqs/`` lists a function's MSI/MSI-X vectors by IRQ number;
``/proc/irq/N/smp_affinity_list`` is where each may be delivered (Documentation/core-api/
irq/irq-affinity.rst).  Reads go through :class:`~topoagent.core.hostfs.HostFS`, so a fake root
holds a fake ``/proc/irq``.
"""

from __future__ import annotations

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.hostfs import HostFS


def affinity_rel(irq: int) -> str:
    """The host path (root-relative) of an IRQ's affinity list."""
    return f"proc/irq/{irq}/smp_affinity_list"


def device_irqs(fs: HostFS, bdf: str) -> tuple[int, ...]:
    """The MSI/MSI-X IRQ numbers of a PCI function, ascending (none for legacy INTx)."""
    return tuple(
        sorted(n for name in fs.listdir(f"sys/bus/pci/devices/{bdf}/msi_irqs") if (n := decimal(name)) is not None)
    )


def irq_affinity(fs: HostFS, irq: int) -> CpuSet | None:
    """Where an IRQ may be delivered now; None when the file is absent or unreadable."""
    text = fs.text(affinity_rel(irq))
    if text is None:
        return None
    try:
        return CpuSet.parse(text)
    except ValueError:
        fs.record(affinity_rel(irq), "unparsable")
        return None


def irqbalance_pids(fs: HostFS) -> tuple[int, ...]:
    """Processes named ``irqbalance`` (it rewrites IRQ affinity every 10 s by default)."""
    out = []
    for entry in fs.listdir("proc"):
        pid = decimal(entry)
        if pid is not None and fs.text(f"proc/{entry}/comm", quiet=True) == "irqbalance":
            out.append(pid)
    return tuple(out)
