"""Whether the host is a virtual machine: ``/sys/hypervisor``, the ``hypervisor`` CPU flag and
the DMI vendor.

``sys/hypervisor/type`` exists under Xen (drivers/xen/sys-hypervisor.c); x86 hypervisors set
the ``hypervisor`` CPU flag (CPUID leaf 1, ECX bit 31); the DMI vendor and product name most
others.  All are optional.
"""

from __future__ import annotations

from collections.abc import Callable

from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv

__all__ = ["HYPERVISOR_TYPE", "virtualized"]

HYPERVISOR_TYPE = "sys/hypervisor/type"

#: DMI vendors/products of hypervisors (``/sys/class/dmi/id``).
_VM_DMI = (
    "qemu",
    "kvm",
    "vmware",
    "virtualbox",
    "xen",
    "microsoft corporation",
    "amazon ec2",
    "google compute engine",
    "openstack",
    "bochs",
    "parallels",
    "innotek",
)


def virtualized(fs: HostFS, cpuinfo: str | None, dmi: Callable[[], tuple[str | None, str | None]]) -> bool | None:
    """Whether the host is a VM; None when unknown.  ``cpuinfo``: ``/proc/cpuinfo``'s head;
    ``dmi``: the DMI vendor and product, read only where the flag and ``sys/hypervisor`` do
    not decide."""
    if cpuinfo is not None and sv.parse_cpuinfo_hypervisor(cpuinfo):
        return True
    if fs.exists(HYPERVISOR_TYPE):
        return True
    names = " ".join(t.lower() for t in dmi() if t)
    if names:
        return any(v in names for v in _VM_DMI)
    return False if cpuinfo is not None else None
