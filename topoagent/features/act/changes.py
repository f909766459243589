"""Changes to a running host, planned as values: what, where, current -> proposed.

Pure: every planner takes the current state (read by :mod:`topoagent.core.read`) and the scan's
result and returns :class:`HostChange` values; nothing is written here.  A change names its
device by stable key (BDF) in ``label``, as the journal requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from topoagent.core.analysis.locality import switch_node_mismatches
from topoagent.core.analysis.paths import Path
from topoagent.core.cpuset import CpuSet
from topoagent.core.frozen import FrozenMap
from topoagent.core.parse.configspace import ConfigSpaceError, parse_config_space
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import ACS_P2P_REDIRECT_MASK, DeviceKind
from topoagent.core.snapshot import AcsInfo
from topoagent.core.topology import Device, Topology, common_ancestors

if TYPE_CHECKING:
    from topoagent.core.analysis.rails import Rails

#: Kinds of change and the value each holds: a CPU list, a 16-bit register as ``0x....``,
#: a file's text (None: no file), a module state (``loaded`` / ``absent``).
IRQ, THREAD, PCI_CONFIG, FILE, MODULE = "irq", "thread", "pci_config", "file", "module"

PEERMEM_MODULE = "nvidia_peermem"
PEERMEM_CONF = "etc/modules-load.d/nvidia-peermem.conf"


class HostChange(msgspec.Struct, frozen=True):
    """One change to make on the host: ``kind`` of thing, ``target`` (irq, tid, bdf+offset,
    path, module), the value now and the value proposed, a stable ``label`` and a sentence for
    people.  (A change observed between two scans is a daemon's
    :class:`~topoagent.features.daemon.changes.ScanChange`.)"""

    kind: str
    target: FrozenMap[str, Any]
    before: str | None
    after: str | None
    label: str
    what: str
    note: str | None = None


# -- process affinity -------------------------------------------------------------------------


def thread_changes(
    pid: int, threads: Sequence[tuple[int, CpuSet]], cpus: CpuSet, starts: Mapping[int, int | None] | None = None
) -> tuple[HostChange, ...]:
    """Bind every thread of ``pid`` to ``cpus`` (threads already there are left alone).  A
    thread's start time (``starts``), where known, goes in its target: undo then knows a
    reused tid from the thread it changed."""
    starts = starts or {}
    return tuple(
        HostChange(
            THREAD,
            FrozenMap({"pid": pid, "tid": tid, **({"start": s} if (s := starts.get(tid)) is not None else {})}),
            str(now),
            str(cpus),
            f"pid {pid}",
            f"pid {pid} thread {tid} CPU affinity",
        )
        for tid, now in threads
        if now != cpus
    )


# -- IRQ affinity ---------------------------------------------------------------------------------


def rail_nics(topo: Topology, rails: Rails) -> tuple[Device, ...]:
    """The NICs that are some GPU's rail, in PCI order."""
    ids = {n for r in rails.rails for n in r.nics}
    return tuple(n for n in topo.nics if n.id in ids)


def irq_changes(
    topo: Topology, nics: Sequence[Device], irqs: Mapping[str, Sequence[tuple[int, CpuSet | None]]]
) -> tuple[tuple[HostChange, ...], tuple[str, ...]]:
    """Move each NIC's MSI/MSI-X IRQs onto the CPUs of the NIC's NUMA node.

    ``irqs`` maps a NIC id to its (irq, current affinity) pairs.  Returns the changes and
    one line for each NIC left alone (no known node, no IRQs, or a node its switch siblings
    contradict: NUMA_SWITCH_MISMATCH, where either node may be the wrong one and moving the
    IRQs could send them to the other socket).
    """
    changes, skipped = [], []
    disputed = {m.device: m for m in switch_node_mismatches(topo)}
    for nic in nics:
        names = ", ".join(nic.rdma_devices + nic.netdevs) or nic.id
        node = topo.node(nic.numa_node)
        if nic.id in disputed:
            m = disputed[nic.id]
            skipped.append(
                f"{nic.id} ({names}, {nic.key}): its NUMA node {m.node} disagrees with the node {m.siblings_node} of "
                f"every other device below its PCIe switch (NUMA_SWITCH_MISMATCH): which is right is unknown, so "
                "its IRQs are left alone"
            )
            continue
        if node is None or not node.cpus:
            skipped.append(f"{nic.id} ({names}, {nic.key}): NUMA node unknown, its IRQs are left alone")
            continue
        mine = irqs.get(nic.id, ())
        if not mine:
            skipped.append(f"{nic.id} ({names}, {nic.key}): no MSI/MSI-X IRQs listed")
            continue
        for irq, now in mine:
            if now == node.cpus:
                continue
            changes.append(
                HostChange(
                    IRQ,
                    FrozenMap({"irq": irq}),
                    None if now is None else str(now),
                    str(node.cpus),
                    nic.key,
                    f"IRQ {irq} of {nic.id} ({names}) -> node {node.id}",
                )
            )
    return tuple(changes), tuple(skipped)


# -- ACS ------------------------------------------------------------------------------------------


def _control_offset(acs: AcsInfo | None) -> int | None:
    return acs.offset + 6 if acs is not None and acs.offset is not None else None


def peer_path_bridges(topo: Topology, paths: Sequence[Path]) -> dict[str, set[str]]:
    """Bridges on GPU-GPU and GPU-NIC peer paths that stay below the root complex (PIX, PXB),
    from the pair's common ancestor down: bridge BDF -> the devices whose traffic turns there."""
    out: dict[str, set[str]] = {}
    for p in paths:
        a, b = topo.by_id(p.a), topo.by_id(p.b)
        if a is None or b is None or DeviceKind.GPU not in (a.kind, b.kind):
            continue
        if p.pcie == PathClass.X or p.pcie > PathClass.PXB:
            continue
        common = common_ancestors(a, b)  # a PIX/PXB pair shares its root bus
        if not common:
            continue
        for bdf in dict.fromkeys(a.ancestors[common - 1 :] + b.ancestors[common - 1 :]):
            out.setdefault(bdf, set()).update((a.id, b.id))
    return out


class AcsPlan(msgspec.Struct, frozen=True):
    """The ACS fix: changes to make, bridges refused (with why), and the kernel parameter
    that makes the same change at every boot."""

    changes: tuple[HostChange, ...]
    refused: tuple[str, ...]
    kernel_parameter: str | None


def acs_plan(topo: Topology, paths: Sequence[Path], configs: Mapping[str, bytes | None]) -> AcsPlan:
    """Clear ACS P2P redirect (ReqRedir, CmpltRedir, EgressCtrl) on the bridges of GPU peer
    paths only.  ``configs`` holds each bridge's config bytes as read now.

    Refuses everything inside a VM (the hypervisor's ACS is not the guest's to change), and
    any bridge with a device bound to vfio-pci below it: there ACS is what isolates the
    passthrough device's IOMMU group.
    """
    if topo.virtualized:
        return AcsPlan(
            (),
            ("this host is a virtual machine: ACS belongs to the hypervisor; change it on the host, not in the guest",),
            None,
        )
    changes, refused, bdfs = [], [], []
    for bdf, devs in sorted(peer_path_bridges(topo, paths).items()):
        bridge = topo.by_bdf(bdf)
        if bridge is None:
            continue
        data = configs.get(bdf)
        if data is None or len(data) < 0x104:
            refused.append(f"{bdf}: ACS not readable (extended config space needs root)")
            continue
        try:
            acs = parse_config_space(data).acs
        except ConfigSpaceError as exc:
            refused.append(f"{bdf}: config space unreadable ({exc})")
            continue
        offset = _control_offset(acs)
        if acs is None or offset is None or not acs.redirects_p2p:
            continue
        vfio = [d for d in topo.devices if bdf in d.ancestors and d.driver == "vfio-pci"]
        if vfio:
            refused.append(
                f"{bdf}: {', '.join(d.key for d in vfio)} below it is bound to vfio-pci; ACS isolates "
                "that passthrough device, so it is left on"
            )
            continue
        new = acs.control & ~ACS_P2P_REDIRECT_MASK
        cleared = [n for bit, n in AcsInfo.BITS if (acs.control & ACS_P2P_REDIRECT_MASK) >> bit & 1]
        changes.append(
            HostChange(
                PCI_CONFIG,
                FrozenMap({"bdf": bdf, "offset": offset}),
                f"0x{acs.control:04x}",
                f"0x{new:04x}",
                bdf,
                f"ACS control of {bridge.role.value.replace('_', ' ') if bridge.role else 'bridge'} "
                f"{bdf} (clear {' '.join(cleared)}; peers: {', '.join(sorted(devs))})",
            )
        )
        bdfs.append(bdf)
    param = f"pci=disable_acs_redir={';'.join(bdfs)}" if bdfs else None
    return AcsPlan(tuple(changes), tuple(refused), param)


# -- peer memory -----------------------------------------------------------------------------------


def peermem_changes(module_loaded: bool, conf_now: str | None, *, live: bool) -> tuple[HostChange, ...]:
    """Load nvidia_peermem now (live host only) and list it in /etc/modules-load.d for boots."""
    out = []
    if live and not module_loaded:
        out.append(
            HostChange(
                MODULE,
                FrozenMap({"module": PEERMEM_MODULE}),
                "absent",
                "loaded",
                PEERMEM_MODULE,
                f"modprobe {PEERMEM_MODULE}",
            )
        )
    want = PEERMEM_MODULE + "\n"
    if conf_now is None or PEERMEM_MODULE not in conf_now.split():
        after = want if conf_now is None else conf_now.rstrip("\n") + "\n" + want
        out.append(
            HostChange(
                FILE,
                FrozenMap({"path": PEERMEM_CONF}),
                conf_now,
                after,
                "/" + PEERMEM_CONF,
                f"/{PEERMEM_CONF}: load {PEERMEM_MODULE} at boot",
            )
        )
    return tuple(out)
