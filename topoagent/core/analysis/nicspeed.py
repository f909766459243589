"""A NIC's speed, as the rails weigh it and as NCCL's IB transport adds it up.

NCCL merges the ports of one PCI device into one virtual NIC (``NCCL_IB_MERGE_NICS``, on by
default: NVIDIA/nccl src/transport/net_ib.cc, ``ncclIbGetPciPath`` writes the function digit of
the device's PCI path as ``0``, so a dual-port card's functions .0 and .1 share one path, and
the virtual device's speed is the sum of its ports').  :func:`merged_bandwidth_gbps` is that sum.
"""

from __future__ import annotations

from topoagent.core.topology import Device, Topology

__all__ = ["device_key", "merged_bandwidth_gbps", "nic_bandwidth_gbps"]


def nic_bandwidth_gbps(nic: Device) -> float:
    """A NIC's port speed: RDMA port rate, else netdev speed, else PCIe link (per direction)."""
    rates = [p.rate_gbps for ports in nic.rdma_ports.values() for p in ports if p.rate_gbps]
    if rates:
        return max(rates)
    speeds = [mbps / 1000 for mbps in nic.netdev_speeds.values() if mbps]
    if speeds:
        return max(speeds)
    link = nic.link
    gts, width = link.max_gts or link.current_gts, link.max_width or link.current_width
    return (gts or 0.0) * (width or 0)


def device_key(nic: Device) -> str:
    """The PCI device of a function (its address without the function number): the ports NCCL
    merges into one NIC share it."""
    return nic.bdf.rpartition(".")[0] if nic.bdf else nic.key


def merged_bandwidth_gbps(topo: Topology, nic: Device) -> float:
    """The speed NCCL gives ``nic``: the sum over every RDMA function of its PCI device."""
    key = device_key(nic)
    ports = [n for n in topo.nics if n.rdma_capable and not n.is_vf and device_key(n) == key]
    return sum(nic_bandwidth_gbps(n) for n in ports) if ports else nic_bandwidth_gbps(nic)
