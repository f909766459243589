"""A device whose NUMA node disagrees with the devices that share its PCIe switch.

Every function below one PCIe switch hangs off one root port of one host bridge, and the kernel
gives them the host bridge's node (``pcibus_to_node``: the ACPI ``_PXM`` of the root bridge,
drivers/acpi/pci_root.c); a function's ``numa_node`` file is writable by root besides
(drivers/pci/pci-sysfs.c ``numa_node_store``, which taints the kernel with
``TAINT_FIRMWARE_WORKAROUND``).  So a GPU or NIC whose node differs from the node its switch
siblings agree on has been given another node (a changed ``_PXM``, a hand-written
``numa_node``): one of the two is wrong and the files alone cannot say which.  Nothing placed by
that node -- CPU binding, IRQ affinity -- should follow it until someone finds out
(:func:`switch_node_mismatches`).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import msgspec

from topoagent.core.analysis.paths import switch_of
from topoagent.core.pci import DeviceKind
from topoagent.core.topology import Device, Topology

__all__ = ["NodeMismatch", "switch_node_mismatches"]


class NodeMismatch(msgspec.Struct, frozen=True):
    """A GPU or NIC (``device``, an id) on NUMA node ``node`` whose switch siblings (ids) all
    say ``siblings_node``; ``switch`` is the switch's upstream port BDF."""

    device: str
    node: int
    siblings_node: int
    siblings: tuple[str, ...]
    switch: str


def _switch(topo: Topology, d: Device) -> str | None:
    """The PCIe switch ``d`` hangs below (its nearest one), by upstream port BDF; None where
    it hangs off a root port or the root bus directly."""
    for bdf in reversed(d.ancestors):
        br = topo.by_bdf(bdf)
        sw = switch_of(topo, br) if br is not None else None
        if sw is not None:
            return sw
    return None


def switch_node_mismatches(topo: Topology) -> tuple[NodeMismatch, ...]:
    """Each physical GPU or NIC whose ``numa_node`` differs from the one node that every other
    function below its switch (two at least, its ports included) reports.  Only the kernel's
    ``numa_node`` counts (from sysfs, or as ``lspci -vvv`` prints it): a node derived from CPUs
    is no report of the firmware's."""
    below: dict[str, list[Device]] = defaultdict(list)
    for d in topo.devices:
        if d.bdf is None or d.numa_node is None or d.numa_source not in ("numa_node", "lspci"):
            continue
        # a switch's own ports report the node too; a root port belongs to no switch
        sw = switch_of(topo, d) if d.kind is DeviceKind.BRIDGE else _switch(topo, d)
        if sw is not None:
            below[sw].append(d)
    out = []
    for sw, members in below.items():
        for d in members:
            if d.kind not in (DeviceKind.GPU, DeviceKind.NIC) or d.is_vf:
                continue
            others = [m for m in members if m.id != d.id and not m.is_vf]
            nodes = Counter(m.numa_node for m in others)
            if len(others) < 2 or len(nodes) != 1:
                continue
            (node,) = nodes
            if node is not None and node != d.numa_node:
                assert d.numa_node is not None
                # the devices first, then the switch's own ports, each in device order
                ordered = sorted(others, key=lambda m: (m.kind is DeviceKind.BRIDGE, topo.index.position[m.id]))
                out.append(NodeMismatch(d.id, d.numa_node, node, tuple(m.id for m in ordered), sw))
    return tuple(sorted(out, key=lambda m: topo.index.position[m.device]))
