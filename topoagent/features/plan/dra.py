"""``plan --format dra``: the standard Kubernetes DRA device attributes of every GPU and NIC.

These are the attributes a DRA driver publishes in its ResourceSlice for a PCI device
(kubernetes/kubernetes ``staging/src/k8s.io/dynamic-resource-allocation/deviceattribute``,
KEP-4381/KEP-5316), in the ResourceSlice's own value shape (``{"string": ...}``,
``{"int": ...}``), so a claim can be checked against them before a driver is deployed:

- ``resource.kubernetes.io/pcieRoot``: the device's PCIe root complex as ``pci<domain>:<bus>``
  (``pci0000:15``): the root-bus directory above the device in sysfs, which is what the
  upstream helper ``GetPCIeRootAttributeByPCIBusID`` reads.  A VF has its PF's root.
- ``resource.kubernetes.io/pciBusID``: the extended BDF ``dddd:bb:dd.f``.
- ``resource.kubernetes.io/numaNode``: the device's ``numa_node`` as the kernel gives it; left
  out where it is -1 (unknown), as drivers do -- also where topoagent placed the device by its
  local CPUs instead, which no driver reads.

A device known only by a tool's label (pasted ``nvidia-smi topo -m``) has no PCI attributes.
Whether a claim that matches GPU and NIC on ``pcieRoot`` pairs each GPU with its rail NIC is
the ``DRA_PCIE_ROOT_MISMATCH`` finding's question.
"""

from __future__ import annotations

import builtins
from typing import Any

import msgspec

from topoagent.core.pci import DeviceKind
from topoagent.core.result import ScanResult
from topoagent.core.topology import NUMA_FROM_LSPCI, NUMA_FROM_SYSFS, Device

PREFIX = "resource.kubernetes.io/"
PCIE_ROOT = PREFIX + "pcieRoot"
PCI_BUS_ID = PREFIX + "pciBusID"
NUMA_NODE = PREFIX + "numaNode"


class Attribute(msgspec.Struct, frozen=True, omit_defaults=True):
    """A ResourceSlice device attribute value: exactly one of its typed fields is set."""

    string: str | None = None
    int: builtins.int | None = None  # the builtin: this field is named like it


class DraDevice(msgspec.Struct, frozen=True):
    """One GPU or NIC with its standard attributes."""

    device: str
    key: str
    kind: str
    attributes: dict[str, Attribute]


class DraReport(msgspec.Struct, frozen=True):
    """Every GPU and NIC of the host, in the scan's device order."""

    node: str | None
    devices: list[DraDevice]


def attributes(d: Device) -> dict[str, Attribute]:
    """The standard attributes a DRA driver would publish for the device."""
    out: dict[str, Attribute] = {}
    if d.root_bus is not None:
        out[PCIE_ROOT] = Attribute(string=d.root_bus)
    if d.bdf is not None:
        out[PCI_BUS_ID] = Attribute(string=d.bdf)
    if d.numa_node is not None and d.numa_source in (NUMA_FROM_SYSFS, NUMA_FROM_LSPCI):
        out[NUMA_NODE] = Attribute(int=d.numa_node)
    return out


def report(result: ScanResult) -> DraReport:
    """The attributes of every GPU and NIC."""
    topo = result.topology
    devices = [
        DraDevice(d.id, d.key, d.kind.value, attributes(d))
        for d in topo.devices
        if d.kind in (DeviceKind.GPU, DeviceKind.NIC)
    ]
    return DraReport(topo.hostname, devices)


def render(result: ScanResult, **_: Any) -> str:
    """``plan --format dra``: the attributes, indented."""
    return msgspec.json.format(msgspec.json.encode(report(result)), indent=2).decode() + "\n"
