"""RDMA devices: ``/sys/class/infiniband`` (drivers/infiniband/core/sysfs.c;
Documentation/ABI/stable/sysfs-class-infiniband).

Every device is kept, with the PCI function behind it where there is one
(:meth:`~topoagent.core.read.pci.PciReader.owner`); ports only for a physical function's
device: a VF is never a rail, so its port rate decides nothing (and a host with 16 NICs x 250
VFs would read 12,000 port files for it).
"""

from __future__ import annotations

from collections.abc import Callable

from topoagent.core.digits import decimal
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.read.attr import value
from topoagent.core.snapshot import RdmaDevice, RdmaPort

__all__ = ["INFINIBAND", "PORT_FILES", "rdma_devices"]

INFINIBAND = "sys/class/infiniband"
#: Optional files of each port (``ports/N/``): ``state`` (``4: ACTIVE``), ``rate``
#: (``400 Gb/sec (4X NDR)``), ``link_layer`` (``InfiniBand``, ``Ethernet``).
PORT_FILES = ("state", "rate", "link_layer")


def rdma_devices(
    fs: HostFS, owner: Callable[[str], str | None], vfs: frozenset[str] = frozenset()
) -> tuple[RdmaDevice, ...]:
    """Every RDMA device and the PCI function behind it (``owner``: the BDF behind a class
    device); ``vfs``: the BDFs of SR-IOV VFs, whose ports are not read."""
    out = []
    for name in fs.listdir(INFINIBAND):
        base = f"{INFINIBAND}/{name}"
        bdf = owner(base)
        out.append(RdmaDevice(name=name, bdf=bdf, ports=() if bdf in vfs else _ports(fs, base)))
    return tuple(out)


def _ports(fs: HostFS, base: str) -> tuple[RdmaPort, ...]:
    """A device's numbered ports, in order."""
    ports = []
    for port in fs.listdir(f"{base}/ports"):
        number = decimal(port)
        if number is None:
            continue
        p = f"{base}/ports/{port}"
        ports.append(
            RdmaPort(
                port=number,
                state=value(fs, f"{p}/state", sv.parse_rdma_state),
                rate_gbps=value(fs, f"{p}/rate", sv.parse_rdma_rate),
                link_layer=fs.text(f"{p}/link_layer"),
            )
        )
    ports.sort(key=lambda r: r.port)
    return tuple(ports)
