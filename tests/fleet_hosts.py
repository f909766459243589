"""DGX H100 hosts of one build for the fleet tests and benchmarks: the dgx-h100 fixture as read
from its generated tree (one tree, shared by the session), and copies of that snapshot with one
difference each -- harmless ones (another host name, idle GPU links, a scan without root) and
the faults operators page on (a GPU at x8, a NIC at x2, a device fallen off the bus or gone, the
last device of its model lost, ACS turned on, the IOMMU mode changed, SNC turned on, a root
complex on the other socket, SMT off, a DIMM lost, a card added).

A copy is made from the snapshot, not from a tree of its own: a tree of this machine is ~30 MB
and two seconds to write, a snapshot edit a millisecond.  Every edit changes what the reader
would have read from such a host's files (the kernel's link registers, ``numa_node``,
``local_cpulist``, the IOMMU group's ``type``, the CPUs' topology files, ``meminfo``).

:data:`FAULTS` says, for each faulty copy, the one finding its cause must be: code and subject
slot.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.result import ScanResult, analyse
from topoagent.core.snapshot import LinkInfo, NumaNode, PciFunction, Snapshot

GPU0 = "0000:1b:00.0"  # GPU0, behind a two-level Broadcom switch on root bus 0000:15
GPU0_PORT = "0000:1a:00.0"  # the downstream port above it
NIC0 = "0000:18:00.0"  # GPU0's rail NIC (mlx5_0)
NIC0_PORT = "0000:17:00.0"
MGMT = ("0000:01:00.0", "0000:01:00.1")  # the only Intel X710: the management NIC
RAIL0 = "pci0000:15"  # GPU0's and NIC0's root bus: the second of socket 0

#: Their slots (docs/fleet.md): the second root bus of the host, socket 0.
GPU0_SLOT = "s0.r1/01.0/00.0/01.0/00.0/00.0/00.0"
GPU0_PORT_SLOT = "s0.r1/01.0/00.0/01.0/00.0/00.0"
NIC0_SLOT = "s0.r1/01.0/00.0/00.0/00.0"
MGMT_SLOT = "s0.r0/01.0/00.0"

Edit = Callable[[Snapshot], Snapshot]


def _functions(snap: Snapshot, change: Callable[[PciFunction], PciFunction | None]) -> Snapshot:
    pci = tuple(g for f in snap.pci if (g := change(f)) is not None)
    return msgspec.structs.replace(snap, pci=pci)


def _at(bdfs: tuple[str, ...], **fields: object) -> Edit:
    def edit(snap: Snapshot) -> Snapshot:
        return _functions(snap, lambda f: msgspec.structs.replace(f, **fields) if f.bdf in bdfs else f)

    return edit


def _width(bdfs: tuple[str, ...], width: int) -> Edit:
    """The link registers of the functions at both ends of one link read ``width`` lanes."""

    def edit(snap: Snapshot) -> Snapshot:
        def narrow(f: PciFunction) -> PciFunction:
            if f.bdf not in bdfs:
                return f
            link = msgspec.structs.replace(f.link, current_width=width)
            config = f.config and msgspec.structs.replace(f.config, link=link)
            return msgspec.structs.replace(f, link=link, config=config)

        return _functions(snap, narrow)

    return edit


def _off_bus(bdf: str) -> Edit:
    """The function answers no config read (Xid 79): its header reads all ones, so the reader
    keeps no config space and the kernel's link files compute a width of 63 from 0xffff."""
    return _at((bdf,), fell_off_bus=True, config=None, link=LinkInfo(None, 63, None, 63))


def _gone(*bdfs: str) -> Edit:
    def edit(snap: Snapshot) -> Snapshot:
        snap = _functions(snap, lambda f: None if f.bdf in bdfs else f)
        netdevs = tuple(n for n in snap.netdevs if n.bdf not in bdfs)
        rdma = tuple(r for r in snap.rdma if r.bdf not in bdfs)
        return msgspec.structs.replace(snap, netdevs=netdevs, rdma=rdma)

    return edit


def _acs_on(snap: Snapshot) -> Snapshot:
    """A BIOS update turned ACS Request and Completion Redirect on in GPU0's switch port."""

    def on(f: PciFunction) -> PciFunction:
        if f.bdf != GPU0_PORT or f.config is None or f.config.acs is None:
            return f
        acs = msgspec.structs.replace(f.config.acs, control=0x0C)
        return msgspec.structs.replace(f, config=msgspec.structs.replace(f.config, acs=acs))

    return _functions(snap, on)


def _iommu_dma(snap: Snapshot) -> Snapshot:
    """``iommu=pt`` dropped from the command line: every group translates (type ``DMA``)."""
    groups = tuple(msgspec.structs.replace(g, type="DMA") for g in snap.iommu_groups)
    return msgspec.structs.replace(snap, iommu_groups=groups)


def _node_of(snap: Snapshot, node: int) -> NumaNode:
    return next(n for n in snap.numa_nodes if n.id == node)


def _root_moved(snap: Snapshot) -> Snapshot:
    """Firmware puts root bus 0000:15 (GPU0's rail) on socket 1: its functions' ``numa_node``
    reads 1 and their ``local_cpulist`` node 1's CPUs."""
    cpus = _node_of(snap, 1).cpus

    def move(f: PciFunction) -> PciFunction:
        if not (f.sysfs_path or "").startswith(RAIL0 + "/"):
            return f
        return msgspec.structs.replace(f, numa_node=1, local_cpus=cpus)

    return _functions(snap, move)


def _snc2(snap: Snapshot) -> Snapshot:
    """Sub-NUMA clustering (SNC2) on: each socket's node splits in two (its cores' halves, and
    half its memory each); each root bus goes to the node of its place on the die, alternately."""
    nodes: list[NumaNode] = []
    new_of: dict[int, tuple[int, int]] = {}
    for n in snap.numa_nodes:
        cpus = sorted(n.cpus or ())
        cores = sorted(
            {c.id for c in snap.cpus if c.id in cpus and c.siblings is not None and c.id == c.siblings.first}
        )
        halves = (cores[: len(cores) // 2], cores[len(cores) // 2 :])
        for h, half in enumerate(halves):
            members = {t for c in snap.cpus if c.id in half and c.siblings for t in c.siblings}
            nodes.append(NumaNode(id=2 * n.id + h, cpus=CpuSet(members), memory_bytes=(n.memory_bytes or 0) // 2))
        new_of[n.id] = (2 * n.id, 2 * n.id + 1)
    count = len(nodes)
    nodes = [
        msgspec.structs.replace(
            n, distances=tuple(10 if m.id == n.id else 12 if m.id // 2 == n.id // 2 else 21 for m in nodes)
        )
        for n in nodes
    ]
    assert count == 4
    roots = sorted({(f.sysfs_path or "").split("/", 1)[0] for f in snap.pci})
    side = {r: i % 2 for i, r in enumerate(roots)}
    by_id = {n.id: n for n in nodes}

    def place(f: PciFunction) -> PciFunction:
        if f.numa_node is None:
            return f
        node = new_of[f.numa_node][side[(f.sysfs_path or "").split("/", 1)[0]]]
        return msgspec.structs.replace(f, numa_node=node, local_cpus=by_id[node].cpus)

    return msgspec.structs.replace(_functions(snap, place), numa_nodes=tuple(nodes))


def _smt_off(snap: Snapshot) -> Snapshot:
    """Hyper-Threading off in the BIOS: one thread per core, the nodes' CPU lists halved."""
    first = {c.id for c in snap.cpus if c.siblings is not None and c.id == c.siblings.first}
    cpus = tuple(msgspec.structs.replace(c, siblings=CpuSet((c.id,))) for c in snap.cpus if c.id in first)
    nodes = tuple(
        msgspec.structs.replace(n, cpus=CpuSet(i for i in (n.cpus or ()) if i in first)) for n in snap.numa_nodes
    )

    def local(f: PciFunction) -> PciFunction:
        cpus_of = f.local_cpus
        return f if cpus_of is None else msgspec.structs.replace(f, local_cpus=CpuSet(i for i in cpus_of if i in first))

    return msgspec.structs.replace(_functions(snap, local), cpus=cpus, numa_nodes=nodes)


def _dimm_lost(snap: Snapshot) -> Snapshot:
    """One DIMM of sixteen on node 0 failed: its ``MemTotal`` is a sixteenth lower."""
    nodes = tuple(
        msgspec.structs.replace(n, memory_bytes=(n.memory_bytes or 0) * 15 // 16) if n.id == 0 else n
        for n in snap.numa_nodes
    )
    return msgspec.structs.replace(snap, numa_nodes=nodes)


def _memory_reserved(snap: Snapshot) -> Snapshot:
    """Harmless: a crash kernel takes 2 GiB of node 0 (``crashkernel=``): MemTotal is lower."""
    nodes = tuple(
        msgspec.structs.replace(n, memory_bytes=(n.memory_bytes or 0) - 2 * 2**30) if n.id == 0 else n
        for n in snap.numa_nodes
    )
    return msgspec.structs.replace(snap, numa_nodes=nodes)


def _extra_card(snap: Snapshot) -> Snapshot:
    """An NVMe drive added behind a root port of its own (a copy of the boot drive's)."""
    port = next(f for f in snap.pci if f.bdf == "0000:00:03.0")
    drive = next(f for f in snap.pci if f.bdf == "0000:03:00.0")
    group = max(g.id for g in snap.iommu_groups) + 1
    added = (
        msgspec.structs.replace(port, bdf="0000:00:04.0", sysfs_path="pci0000:00/0000:00:04.0", iommu_group=group),
        msgspec.structs.replace(
            drive,
            bdf="0000:04:00.0",
            sysfs_path="pci0000:00/0000:00:04.0/0000:04:00.0",
            iommu_group=group + 1,
        ),
    )
    groups = (*snap.iommu_groups, *(msgspec.structs.replace(snap.iommu_groups[0], id=i) for i in (group, group + 1)))
    return msgspec.structs.replace(snap, pci=snap.pci + added, iommu_groups=groups)


def _nic_moved(snap: Snapshot) -> Snapshot:
    """GPU0's rail NIC moved into a slot of its own on socket 1 (a root port of root bus
    0000:f0): its GPU's rail is now another NIC, at NODE."""
    cpus = _node_of(snap, 1).cpus
    port = next(f for f in snap.pci if f.bdf == "0000:97:01.0")  # a socket-1 root port, copied
    group = max(g.id for g in snap.iommu_groups) + 1
    new_port = msgspec.structs.replace(
        port, bdf="0000:f0:01.0", sysfs_path="pci0000:f0/0000:f0:01.0", iommu_group=group, numa_node=1, local_cpus=cpus
    )

    def move(f: PciFunction) -> PciFunction:
        if f.bdf != NIC0:
            return f
        return msgspec.structs.replace(
            f, bdf="0000:f1:00.0", sysfs_path="pci0000:f0/0000:f0:01.0/0000:f1:00.0", numa_node=1, local_cpus=cpus
        )

    snap = _functions(snap, move)
    netdevs = tuple(msgspec.structs.replace(n, bdf="0000:f1:00.0") if n.bdf == NIC0 else n for n in snap.netdevs)
    rdma = tuple(msgspec.structs.replace(r, bdf="0000:f1:00.0") if r.bdf == NIC0 else r for r in snap.rdma)
    groups = (*snap.iommu_groups, msgspec.structs.replace(snap.iommu_groups[0], id=group))
    return msgspec.structs.replace(snap, pci=(*snap.pci, new_port), netdevs=netdevs, rdma=rdma, iommu_groups=groups)


def _unprivileged(snap: Snapshot) -> Snapshot:
    """Scanned without root: only the 64-byte header of config space, so no ACS (unknown)."""

    def header(f: PciFunction) -> PciFunction:
        if f.config is None:
            return f
        config = msgspec.structs.replace(f.config, size=64, extended_readable=False, extended_caps=(), acs=None)
        return msgspec.structs.replace(f, config=config)

    return _functions(snap, header)


def _idle(snap: Snapshot) -> Snapshot:
    """Harmless: every GPU link idles at 2.5 GT/s."""

    def idle(f: PciFunction) -> PciFunction:
        if f.class_code != 0x030200:
            return f
        return msgspec.structs.replace(f, link=msgspec.structs.replace(f.link, current_gts=2.5))

    return _functions(snap, idle)


def _renamed(snap: Snapshot) -> Snapshot:
    """Harmless: netdevs named otherwise (udev rules of another image)."""
    netdevs = tuple(msgspec.structs.replace(n, name=f"net{i}") for i, n in enumerate(snap.netdevs))
    return msgspec.structs.replace(snap, netdevs=netdevs)


#: Copies that must match the good build (no outlier, no finding).
HARMLESS: dict[str, Edit] = {
    "good": lambda s: s,
    "idle": _idle,
    "renamed": _renamed,
    "reserved": _memory_reserved,
    "unprivileged": _unprivileged,
}

#: Faulty copies: each differs from the good build by one cause.
FAULTY: dict[str, Edit] = {
    "gpu-x8": _width((GPU0, GPU0_PORT), 8),
    "nic-x2": _width((NIC0, NIC0_PORT), 2),
    "gpu-offbus": _off_bus(GPU0),
    "nic-offbus": _off_bus(NIC0),
    "gpu-gone": _gone(GPU0),
    "mgmt-gone": _gone(*MGMT),
    "acs-on": _acs_on,
    "iommu-dma": _iommu_dma,
    "snc2": _snc2,
    "root-moved": _root_moved,
    "smt-off": _smt_off,
    "dimm-lost": _dimm_lost,
    "extra-card": _extra_card,
}

#: A fault with consequences of its own: the moved NIC (EXPECT_PLACEMENT), its GPU's rail
#: (EXPECT_PATH), the root port it is in now (EXPECT_DEVICE_EXTRA).
MOVED: dict[str, Edit] = {"nic-moved": _nic_moved}

VARIANTS: dict[str, Edit] = {**HARMLESS, **FAULTY, **MOVED}

#: The one finding each fault's cause is (code, subject slot).
FAULTS: dict[str, tuple[str, str]] = {
    "gpu-x8": ("EXPECT_LINK", GPU0_SLOT),
    "nic-x2": ("EXPECT_LINK", NIC0_SLOT),
    "gpu-offbus": ("EXPECT_DEVICE_MISSING", GPU0_SLOT),
    "nic-offbus": ("EXPECT_DEVICE_MISSING", NIC0_SLOT),
    "gpu-gone": ("EXPECT_DEVICE_MISSING", GPU0_SLOT),
    "mgmt-gone": ("EXPECT_DEVICE_MISSING", MGMT_SLOT),
    "acs-on": ("EXPECT_STATE", GPU0_PORT_SLOT),
    "iommu-dma": ("EXPECT_STATE", "host"),
    "snc2": ("EXPECT_HOST", "host"),
    "root-moved": ("EXPECT_PLACEMENT", "s0.r1"),
    "smt-off": ("EXPECT_HOST", "host"),
    "dimm-lost": ("EXPECT_HOST", "host"),
    "extra-card": ("EXPECT_DEVICE_EXTRA", "s0.r0/04.0"),
}


def variant(good: Snapshot, name: str, hostname: str | None = None) -> Snapshot:
    """The good snapshot with variant ``name``'s difference, under ``hostname``."""
    snap = VARIANTS[name](good)
    return msgspec.structs.replace(snap, hostname=hostname or f"dgx-{name}")


def variant_result(good: Snapshot, name: str, hostname: str | None = None) -> ScanResult:
    """:func:`variant` analysed (NVML off, as the snapshot was read)."""
    return analyse(variant(good, name, hostname))


__all__ = [
    "FAULTS",
    "FAULTY",
    "GPU0_PORT_SLOT",
    "GPU0_SLOT",
    "HARMLESS",
    "MGMT_SLOT",
    "MOVED",
    "NIC0_SLOT",
    "VARIANTS",
    "variant",
    "variant_result",
]
