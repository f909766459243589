"""Network interfaces: ``/sys/class/net`` (net/core/net-sysfs.c;
Documentation/ABI/testing/sysfs-class-net).

Only interfaces with a PCI function behind them are kept (virtual ones -- ``lo``, bridges,
bonds -- have none); the owner comes from the interface's class link
(:meth:`~topoagent.core.read.pci.PciReader.owner`).
"""

from __future__ import annotations

from collections.abc import Callable

from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read.attr import value
from topoagent.core.snapshot import NetDevice

__all__ = ["NET", "OPTIONAL", "netdevs"]

NET = "sys/class/net"
#: Optional files of an interface: ``speed``, read for a physical function's interface only (a
#: VF is never a rail: its speed decides nothing).  Reading it on a down link fails with EINVAL:
#: that is "unknown", not a lost probe.
OPTIONAL = ("speed",)


def netdevs(fs: HostFS, owner: Callable[[str], str | None], vfs: frozenset[str] = frozenset()) -> tuple[NetDevice, ...]:
    """Every network interface with a PCI function behind it (``owner``: the BDF behind a class
    device); ``vfs``: the BDFs of SR-IOV VFs."""
    out = []
    for name in fs.listdir(NET):
        base = f"{NET}/{name}"
        bdf = owner(base)
        if bdf is None:
            continue
        speed = None if bdf in vfs else value(fs, f"{base}/speed", sv.parse_net_speed, quiet=True)
        out.append(NetDevice(name=name, bdf=bdf, speed_mbps=speed))
    return tuple(out)
