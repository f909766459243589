"""The typed, immutable model of a host: sockets, NUMA nodes, host bridges, bridges, endpoints.

Built from a :class:`~topoagent.core.snapshot.Snapshot` by :func:`build_topology`; pure.  The tree
follows hwloc's shape: host -> socket -> NUMA node -> host bridge (root bus) -> root port ->
switch ports -> endpoints.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from enum import Enum
from typing import NamedTuple

import msgspec

from topoagent.core import pci
from topoagent.core.aside import Aside, derived
from topoagent.core.bdf import bdf_key, root_bus_key
from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import trailing_number
from topoagent.core.frozen import FrozenMap
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.platform import Complex, Platform, PlatformRole, platform_role, recognise
from topoagent.core.snapshot import (
    AerCounts,
    AerLogged,
    AmdGpu,
    ConfigSpace,
    Cpu,
    CpuIdentity,
    GivenP2P,
    GpuActivity,
    LinkInfo,
    NumaNode,
    NvlinkStatus,
    NvmlGpu,
    PciFunction,
    ProbeError,
    RdmaPort,
    Snapshot,
    SourceStatus,
    VpdInfo,
)


class BridgeRole(str, Enum):
    """A bridge's place in the PCIe tree (from its port type, else the tree's shape)."""

    ROOT_PORT = "root_port"
    SWITCH_UPSTREAM = "switch_upstream"
    SWITCH_DOWNSTREAM = "switch_downstream"
    PCI_BRIDGE = "pci_bridge"


#: How a device's NUMA node was learnt.
NUMA_FROM_SYSFS = "numa_node"
NUMA_FROM_CPUS = "local_cpus"
NUMA_FROM_NVSMI = "nvidia-smi"
NUMA_FROM_LSPCI = "lspci"  # the same kernel value as numa_node, as lspci printed it

#: Classes that keep a path inside one NUMA node (a NIC's node follows its GPU's).
_NODE_LOCAL = (PathClass.PIX, PathClass.PXB, PathClass.PHB, PathClass.NODE)

_ID_PREFIX = {
    DeviceKind.GPU: "gpu",
    DeviceKind.NIC: "nic",
    DeviceKind.NVME: "nvme",
    DeviceKind.ACCELERATOR: "accel",
    DeviceKind.NVSWITCH: "nvswitch",
    DeviceKind.BRIDGE: "bridge",
    DeviceKind.OTHER: "other",
}


class Device(msgspec.Struct, frozen=True):
    """A PCI function placed in the tree.

    ``bdf`` is None for a device known only by the label a tool gave it (``GPU0`` in a pasted
    ``nvidia-smi topo -m``); such a device has no parent, ancestors or root bus.

    ``id`` (``gpu0``) is the device's position in PCI order among its kind: what people,
    CUDA and the JSON contract count by, and it shifts when a device before it disappears.
    ``key`` is stable: the BDF, or ``nvidia-smi:GPU0`` for a device known only by a tool's
    label, or ``rdma:mlx5_0`` for a NIC known only by its RDMA device.  Events, metrics and
    journals name devices by key.
    """

    id: str
    key: str
    bdf: str | None
    kind: DeviceKind
    role: BridgeRole | None
    name: str
    vendor_id: int | None
    device_id: int | None
    class_code: int | None
    subsystem_vendor_id: int | None
    subsystem_device_id: int | None
    numa_node: int | None
    numa_source: str | None
    local_cpus: CpuSet | None
    socket: int | None
    #: Parent bridge BDF, or the root bus (``pci0000:00``); ``None`` where the source has no tree.
    parent: str | None
    #: BDFs of the bridges from the root bus down to the parent.
    ancestors: tuple[str, ...]
    root_bus: str | None
    driver: str | None
    link: LinkInfo
    netdevs: tuple[str, ...]
    rdma_devices: tuple[str, ...]
    iommu_group: int | None
    iommu_type: str | None
    physfn: str | None
    virtfns: tuple[str, ...]
    config: ConfigSpace | None
    #: The label a tool gave it (``GPU0``, ``NIC3``), None from sysfs.
    label: str | None = None
    #: What a pasted source printed for its NUMA node where that names no one node (``N/A``,
    #: ``0-7``); None elsewhere.
    numa_said: str | None = None
    #: The source says it is RDMA-capable without naming an RDMA device (None: not said).
    rdma: bool | None = None
    #: How the device was placed where the evidence was incomplete (a hidden parent bridge).
    notes: tuple[str, ...] = ()
    #: Its config header reads all ones although it is no SR-IOV VF: it no longer answers (fell
    #: off the bus, NVIDIA Xid 79); its ids are the ones sysfs kept.
    fell_off_bus: bool = False
    #: Its PCIe AER counters since boot, where the kernel keeps them (None: no AER files).
    aer: AerCounts | None = None
    #: What NVML says of it (a GPU on a host whose driver NVML reached), joined by BDF.
    nvml: NvmlGpu | None = None
    #: The NUMA node that holds a GPU's own memory (Grace, POWER9): NVML's NUMA id, else the
    #: driver's ``numa_status``, else a pasted matrix's ``GPU NUMA ID``; None elsewhere.
    memory_node: int | None = None
    #: The ports of each RDMA device behind it (``infiniband/DEV/ports``), by device name, in
    #: the order sysfs listed the devices; a device without ports read (a VF's, pasted text's)
    #: is left out.
    rdma_ports: FrozenMap[str, tuple[RdmaPort, ...]] = msgspec.field(default_factory=FrozenMap)
    #: The speed (Mb/s) of each of its network interfaces whose speed is known, by name.
    netdev_speeds: FrozenMap[str, int] = msgspec.field(default_factory=FrozenMap)
    #: What it is to NVIDIA's platform tool (a Grace root port, a ConnectX switch port, NIC or
    #: Data Direct DMA function: :mod:`topoagent.core.platform`), by its ids; None otherwise.
    platform_role: PlatformRole | None = None
    #: Its Vital Product Data (read for ConnectX NICs and DMA functions), where read.
    vpd: VpdInfo | None = None

    @property
    def ats(self) -> bool | None:
        """Whether it exposes an ATS capability; None where its extended config space is unseen."""
        return self.config.ats if self.config is not None else None

    #: Where :attr:`link` was read where that is neither sysfs nor lspci (``nvidia-smi -q GPU
    #: 00000000:18:00.0``); None otherwise.
    link_source: str | None = None
    #: A GPU's activity when its link was read (pasted ``nvidia-smi -q``), None where unknown.
    activity: GpuActivity | None = None
    #: AER events a pasted kernel log holds for it.
    aer_logged: tuple[AerLogged, ...] = ()
    #: What KFD and amdgpu say of an AMD GPU (XGMI links, hive, partitions), joined by BDF.
    amd: AmdGpu | None = None
    #: Whether each of its network interfaces is up, by name, where a tool said
    #: (``ibdev2netdev``'s ``(Up)``/``(Down)``).
    netdev_up: FrozenMap[str, bool] = msgspec.field(default_factory=FrozenMap)

    @property
    def is_vf(self) -> bool:
        """An SR-IOV virtual function (it has a physical function)."""
        return self.physfn is not None

    @property
    def rdma_capable(self) -> bool:
        """An RDMA device is bound to it, it is an InfiniBand controller (class 0x0207), or
        the source says so (a NIC row of an nvidia-smi matrix, a ConnectX in lspci)."""
        return bool(self.rdma_devices) or pci.is_infiniband(self.class_code) or self.rdma is True


class Node(msgspec.Struct, frozen=True):
    """A NUMA node; ``cpu_less`` nodes (Grace GPU memory, CXL) name the node to bind to.

    ``cpus_known`` is False where the source names the node but not its CPUs (``NUMA node: 1``
    in lspci): ``cpus`` is then empty and the node is not CPU-less, only unknown.
    """

    id: int
    cpus: CpuSet
    socket: int | None
    memory_bytes: int | None
    #: The node's ``distance`` row, one number per node of :attr:`Topology.nodes` in that order
    #: (empty where the row is unknown or does not match the nodes): the table is n**2 numbers,
    #: so rows stay compact tuples.
    distances: tuple[int, ...]
    nearest_cpu_node: int | None
    cpus_known: bool = True
    #: The id of the GPU whose own memory this CPU-less node is (Grace: the driver's
    #: ``numa_status``, NVML, or a matrix's ``GPU NUMA ID``); None otherwise.
    gpu: str | None = None
    #: The file the CPUs were read from where it is not ``cpulist`` (``cpumap``, or
    #: ``cpu/cpu*/node*`` links): evidence names it.
    cpus_file: str | None = None

    @property
    def cpu_less(self) -> bool:
        """A node with memory and no CPUs (Grace GPU memory, CXL)."""
        return self.cpus_known and not self.cpus

    @property
    def cpulist(self) -> str:
        """The node's CPUs in the kernel's list format."""
        return str(self.cpus)


class Socket(msgspec.Struct, frozen=True):
    """A CPU package: its NUMA nodes and CPUs."""

    id: int
    nodes: tuple[int, ...]
    cpus: CpuSet


class HostBridge(msgspec.Struct, frozen=True):
    """A root bus (``/sys/devices/pciDDDD:BB``): the CPU's side of the PCIe tree."""

    name: str
    numa_node: int | None
    socket: int | None


class TopologyIndex(msgspec.Struct, frozen=True):
    """Lookups derived from a :class:`Topology`'s devices and snapshot (read-only maps), built
    once per topology by :func:`index_topology` (:attr:`Topology.index`); no part of its value."""

    by_bdf: FrozenMap[str, Device]
    by_id: FrozenMap[str, Device]
    by_key: FrozenMap[str, Device]
    children: FrozenMap[str, tuple[Device, ...]]
    given: FrozenMap[tuple[str, str], str]
    of_kind: FrozenMap[DeviceKind, tuple[Device, ...]]
    #: Each device's place in PCI order (device order), by id.
    position: FrozenMap[str, int]
    nodes: FrozenMap[int, Node]
    #: The BDFs of the GPUs NVML lists (an NVLink to any other BDF goes to an NVSwitch).
    nvml_bdfs: frozenset[str]


def index_topology(topo: Topology) -> TopologyIndex:
    """The lookups of a topology: devices by BDF, id, key, parent and kind; stated path classes."""
    kids: dict[str, list[Device]] = defaultdict(list)
    kinds: dict[DeviceKind, list[Device]] = defaultdict(list)
    for d in topo.devices:
        if d.parent is not None:
            kids[d.parent].append(d)
        kinds[d.kind].append(d)
    return TopologyIndex(
        by_bdf=FrozenMap({d.bdf: d for d in topo.devices if d.bdf is not None}),
        by_id=FrozenMap({d.id: d for d in topo.devices}),
        by_key=FrozenMap({d.key: d for d in topo.devices}),
        children=FrozenMap({k: tuple(v) for k, v in kids.items()}),
        given=FrozenMap(given_index(topo.snapshot)),
        of_kind=FrozenMap({k: tuple(v) for k, v in kinds.items()}),
        position=FrozenMap({d.id: i for i, d in enumerate(topo.devices)}),
        nodes=FrozenMap({n.id: n for n in topo.nodes}),
        nvml_bdfs=frozenset(g.bdf for g in topo.snapshot.nvml_gpus),
    )


class Topology(msgspec.Struct, frozen=True, weakref=True):
    """The host's model: its tree of devices, NUMA nodes and sockets, and the host's facts.

    Code above the model learns about a device from its :class:`Device` and about the host
    from the properties here (``hostname``, ``peer_memory``, ``probe_errors`` ...); only the
    model, the result and the orchestration read :attr:`snapshot`, the facts it was built
    from (kept for serialising and re-analysing).

    The lookups (:attr:`index`) are derived: built on first use and kept in :attr:`aside`,
    outside the value (:mod:`topoagent.core.aside`), so equality and hashing see the other
    fields only, and a copy with other devices builds its own.
    """

    snapshot: Snapshot
    sockets: tuple[Socket, ...]
    nodes: tuple[Node, ...]
    host_bridges: tuple[HostBridge, ...]
    devices: tuple[Device, ...]
    aside: Aside = msgspec.field(default_factory=Aside)

    @derived("snapshot", "nodes", "devices")
    def index(self) -> TopologyIndex:
        """The topology's lookups (built once per set of devices, nodes and snapshot)."""
        return index_topology(self)

    @derived("devices")
    def platform(self) -> Platform:
        """NVIDIA's platform kind, its complexes and the ACS each port must hold, recognised from
        the devices as NVIDIA's rdma_topo does (:mod:`topoagent.core.platform`)."""
        return recognise(self.devices)

    def by_bdf(self, bdf: str) -> Device | None:
        """The device at a BDF (lower-case ``dddd:bb:dd.f``), or None."""
        return self.index.by_bdf.get(bdf)

    def complex_of(self, d: Device) -> Complex | None:
        """The platform complex a device belongs to (:attr:`platform`), or None."""
        return self.platform.complex_of(d.bdf)

    def physical(self, d: Device) -> Device:
        """A VF's physical function (its paths are the PF's), or the device itself.

        Only a PF of the VF's own kind that is no VF itself stands in for it: in a damaged
        tree the PF may be missing or unclassifiable (an unreadable ``class``), and a device
        that stands for itself is paired like any other.
        """
        if d.physfn is None:
            return d
        pf = self.index.by_bdf.get(d.physfn)
        return pf if pf is not None and pf.kind is d.kind and pf.physfn is None else d

    def by_key(self, key: str) -> Device | None:
        """The device with a stable key (see :class:`Device`), or None."""
        return self.index.by_key.get(key)

    def given_token(self, a: Device, b: Device) -> str | None:
        """The path class a source stated between two devices (a matrix cell, by label; a
        class lstopo's nesting shows, by BDF)."""
        given = self.index.given
        keys = [(x, y) for x in (a.label, a.bdf) for y in (b.label, b.bdf) if x is not None and y is not None]
        return next((given[k] for k in keys if k in given), None)

    @property
    def lists_every_nic(self) -> bool:
        """Whether the input lists every NIC the host has (:attr:`Snapshot.lists_every_nic`;
        where not said, a host tree does and pasted text does not)."""
        said = self.snapshot.lists_every_nic
        whole = said if said is not None else self.from_host_tree
        return whole and not self.partial_inputs  # a filtered or elided input shows part of it

    @property
    def kernel_release(self) -> tuple[int, int] | None:
        """The kernel's (major, minor) release, where read."""
        return self.snapshot.kernel_release

    @property
    def nvidia_open_module(self) -> bool | None:
        """Whether the NVIDIA kernel module is the open one; None where not read."""
        return self.snapshot.nvidia_open_module

    @property
    def dmabuf(self) -> bool | None:
        """Whether GPUDirect RDMA can use DMA-BUF instead of a peer-memory module: Linux >= 5.12
        with the open NVIDIA kernel module (NCCL then uses it: REFERENCE §5); None where the
        kernel release or the module is unknown."""
        release, open_module = self.snapshot.kernel_release, self.snapshot.nvidia_open_module
        if release is None or open_module is None:
            return None
        return release >= (5, 12) and open_module

    @property
    def soc_legend(self) -> bool:
        """A pasted matrix printed ``SOC`` for SYS: its legend (drivers of about 2017) says the
        path crosses "the SMP link between CPU sockets", not merely between NUMA nodes."""
        return any(g.printed == "SOC" for g in self.snapshot.given_paths)

    def by_id(self, ident: str) -> Device | None:
        """The device with a display id (``gpu0``), or None."""
        return self.index.by_id.get(ident)

    def children(self, parent: str | None) -> tuple[Device, ...]:
        """Devices directly below a bridge BDF or a root bus name (none below None)."""
        return self.index.children.get(parent, ()) if parent is not None else ()

    def of_kind(self, kind: DeviceKind) -> tuple[Device, ...]:
        """Devices of one kind, in PCI order."""
        return self.index.of_kind.get(kind, ())

    @property
    def gpus(self) -> tuple[Device, ...]:
        """GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
        return self.of_kind(DeviceKind.GPU)

    @property
    def nics(self) -> tuple[Device, ...]:
        """NICs (physical and virtual functions) in PCI order."""
        return self.of_kind(DeviceKind.NIC)

    def node(self, node_id: int | None) -> Node | None:
        """The NUMA node with this id, or None (also for None)."""
        return self.index.nodes.get(node_id) if node_id is not None else None

    @derived("snapshot", "nodes")
    def all_cpus(self) -> CpuSet:
        """Every CPU that runs: the kernel's online CPUs where a host tree lists them (a CPU in no
        NUMA node's map counts, an offline one does not), else every CPU of every NUMA node."""
        if self.snapshot.cpus:
            return CpuSet(c.id for c in self.snapshot.cpus)
        return CpuSet().union(*(n.cpus for n in self.nodes))

    @property
    def cpu_nodes(self) -> tuple[Node, ...]:
        """The NUMA nodes that have CPUs."""
        return tuple(n for n in self.nodes if n.cpus)

    @property
    def multi_node(self) -> bool:
        """More than one NUMA node with CPUs (or whose CPUs the source did not give)."""
        return sum(1 for n in self.nodes if n.cpus or not n.cpus_known) > 1

    # -- the host's facts (from the snapshot; devices carry their own) ----------------------

    @property
    def hostname(self) -> str | None:
        """The host's name, where read."""
        return self.snapshot.hostname

    @property
    def root(self) -> str | None:
        """The host tree that was read (``/``, a fake or captured root); None for pasted output."""
        return self.snapshot.root

    @property
    def from_host_tree(self) -> bool:
        """Read from a host tree (sysfs), so absent modules and command line mean absent; False
        for pasted tool output, where the kernel's state is unknown."""
        return self.snapshot.from_host_tree

    @property
    def partial_inputs(self) -> tuple[str, ...]:
        """Inputs that show only part of the host (an author's ``...``, a filtered listing), in
        words: what they do not show is unknown, so no absence is claimed from them."""
        return self.snapshot.partial_inputs

    @property
    def virtualized(self) -> bool | None:
        """Whether the host is a virtual machine (None: unknown)."""
        return self.snapshot.virtualized

    @property
    def kernel_cmdline(self) -> str | None:
        """The kernel command line (``/proc/cmdline``), None where not read."""
        return self.snapshot.kernel_cmdline

    @property
    def allowed_cpus(self) -> CpuSet | None:
        """The scanning process's allowed CPUs (``Cpus_allowed_list``), None when unknown."""
        return self.snapshot.allowed_cpus

    @property
    def cpus(self) -> tuple[Cpu, ...]:
        """The online logical CPUs with their package and core siblings."""
        return self.snapshot.cpus

    @property
    def cpu_identity(self) -> CpuIdentity | None:
        """The first CPU's identity as NCCL's topology XML names it, where read."""
        return self.snapshot.cpu_identity

    @property
    def cpu_model(self) -> str | None:
        """The CPU model (``/proc/cpuinfo`` ``model name``), where read."""
        return self.snapshot.cpu_model

    @property
    def system_model(self) -> str | None:
        """The board's name where there is no DMI (device tree ``model``, cpuinfo ``machine``)."""
        return self.snapshot.system_model

    @property
    def dmi_vendor(self) -> str | None:
        """What the host is meant to be: ``/sys/class/dmi/id/sys_vendor``, where read."""
        return self.snapshot.dmi_vendor

    @property
    def dmi_product(self) -> str | None:
        """What the host is meant to be: ``/sys/class/dmi/id/product_name``, where read."""
        return self.snapshot.dmi_product

    @property
    def modules(self) -> tuple[str, ...]:
        """The kernel modules relevant to GPUDirect that are loaded (``nvidia_peermem`` ...)."""
        return self.snapshot.modules

    @property
    def memory_peers(self) -> tuple[str, ...]:
        """The entries of ``/sys/kernel/mm/memory_peers`` (``nv_mem`` ...)."""
        return self.snapshot.memory_peers

    @property
    def peer_memory(self) -> bool | None:
        """GPUDirect RDMA's peer memory: a peer-memory module loaded or a memory-peer client
        registered; None for pasted output (:attr:`Snapshot.peer_memory
        <topoagent.core.snapshot.Snapshot.peer_memory>`)."""
        return self.snapshot.peer_memory

    @property
    def driver_version(self) -> str | None:
        """The NVIDIA driver's version, where read."""
        return self.snapshot.driver_version

    @property
    def l3_domains(self) -> tuple[CpuSet, ...]:
        """The CPUs sharing each L3 cache (a core complex: an AMD CCD, an Intel SNC domain), as
        ``cpu*/cache/index3/shared_cpu_list`` names them; empty where the kernel names none."""
        return self.snapshot.l3_domains

    @property
    def nvml_gpus(self) -> tuple[NvmlGpu, ...]:
        """What NVML says of each GPU, in NVML's index order (each GPU's own record is
        :attr:`Device.nvml`)."""
        return self.snapshot.nvml_gpus

    @property
    def amd_gpus(self) -> tuple[AmdGpu, ...]:
        """What KFD says of each AMD GPU, in KFD's node order (the order ROCm numbers devices
        in); each GPU's own record is :attr:`Device.amd`."""
        return self.snapshot.amd_gpus

    @property
    def given_p2p(self) -> tuple[GivenP2P, ...]:
        """GPU pairs' P2P status as a pasted ``nvidia-smi topo -p2p`` states it (by label)."""
        return self.snapshot.given_p2p

    @property
    def nvlink_status(self) -> tuple[NvlinkStatus, ...]:
        """GPUs' NVLinks as a pasted ``nvidia-smi nvlink -s`` lists them (by label)."""
        return self.snapshot.nvlink_status

    @property
    def sources(self) -> tuple[SourceStatus, ...]:
        """Each source of evidence and whether it was available."""
        return self.snapshot.sources

    @property
    def probe_errors(self) -> tuple[ProbeError, ...]:
        """The probes (files, calls) that failed."""
        return self.snapshot.probe_errors


# -- classification -------------------------------------------------------------------------


def classify(fn: PciFunction) -> DeviceKind:
    """A function's kind from its class code, else from what the source said, else from its
    ids where the built-in tables know them (a class file that could not be read or parsed
    must not turn a known H100 into ``other`` and renumber the GPUs after it).

    A ConnectX-8 Data Direct DMA function (15b3:2100) is ``other`` whatever its class: it is its
    NIC's second path to the GPU, with no network or RDMA device of its own, never a NIC to
    pick (NCCL exposes it under its PF's name, ``mlx5_N_dma``: src/transport/net_ib/init.cc) --
    unless its source says it is a NIC: NCCL's topology file, which shows NCCL's NET there and
    no PF (:mod:`topoagent.core.paste.nccl_xml`).
    """
    if (fn.vendor_id, fn.device_id) in pci.CX_DMA and fn.kind != "nic":
        return DeviceKind.OTHER
    if fn.class_code is None and fn.kind is None:
        by_ids = (
            pci.kind_from_name(None, fn.vendor_id, fn.device_id)
            if pci.known_device(fn.vendor_id, fn.device_id)
            else None
        )
        if by_ids is not None:
            return DeviceKind(by_ids)
    return pci.kind_of(fn.class_code, fn.vendor_id, fn.kind)


def _is_p2p_bridge(fn: PciFunction) -> bool:
    return pci.is_p2p_bridge_class(fn.class_code) or (fn.config is not None and fn.config.header_type == 1)


_ROLE_FROM_PORT = {
    4: BridgeRole.ROOT_PORT,
    5: BridgeRole.SWITCH_UPSTREAM,
    6: BridgeRole.SWITCH_DOWNSTREAM,
    7: BridgeRole.PCI_BRIDGE,
    8: BridgeRole.PCI_BRIDGE,
}


def _order_functions(fns: tuple[PciFunction, ...]) -> list[PciFunction]:
    """BDF order; functions without a BDF after them, in the order the source gave them."""
    with_bdf = sorted((f for f in fns if f.bdf is not None), key=lambda f: bdf_key(f.bdf))  # type: ignore[arg-type]
    return with_bdf + [f for f in fns if f.bdf is None]


def _ancestry(path: str | None) -> tuple[str | None, tuple[str, ...]]:
    """Root bus and the BDF chain above a function, from its real sysfs path."""
    if not path:
        return None, ()
    parts = path.split("/")
    root = parts[0] if parts[0].startswith("pci") else None
    chain = tuple(p.lower() for p in parts[1:-1] if ":" in p and "." in p)
    return root, chain


# -- building -------------------------------------------------------------------------------


def _build_nodes(snap: Snapshot) -> tuple[Node, ...]:
    package_of = {c.id: c.package for c in snap.cpus}
    raw = list(snap.numa_nodes)
    if not raw and snap.cpus:
        # A kernel without CONFIG_NUMA has no node directories: one implied node holds it all.
        raw = [NumaNode(id=0, cpus=CpuSet(c.id for c in snap.cpus), distances=(10,))]
    ids = [n.id for n in raw]
    cpus = {n.id: n.cpus if n.cpus is not None else CpuSet() for n in raw}
    col = {i: k for k, i in enumerate(ids)}  # a node's column in every row
    dist = {n.id: n.distances if len(n.distances) == len(ids) else () for n in raw}
    sockets: dict[int, int | None] = {}
    for n in raw:
        pkgs = Counter(package_of.get(c) for c in cpus[n.id] if package_of.get(c) is not None)
        sockets[n.id] = min(pkgs, key=lambda p: (-pkgs[p], p)) if pkgs else None
    out = []
    for n in raw:
        nearest = None
        if not cpus[n.id]:
            row = dist[n.id]
            with_cpus = [m for m in ids if cpus[m]] if row else []
            if with_cpus:
                best = min(row[col[m]] for m in with_cpus)
                closest = [m for m in with_cpus if row[col[m]] == best]
                # A tie (POWER9 GPU memory is 80 from every CPU node) names no node; the GPU
                # that owns the memory may still place it (see _own_memory_nodes).
                nearest = closest[0] if len(closest) == 1 else None
        socket = sockets[n.id] if cpus[n.id] else (sockets.get(nearest) if nearest is not None else None)
        out.append(
            Node(
                n.id,
                cpus[n.id],
                socket,
                n.memory_bytes,
                dist[n.id],
                nearest,
                n.cpus is not None,
                cpus_file=n.cpus_file,
            )
        )
    return tuple(out)


def _build_sockets(nodes: tuple[Node, ...], snap: Snapshot) -> tuple[Socket, ...]:
    by_socket: dict[int, list[int]] = defaultdict(list)
    for n in nodes:
        if n.socket is not None:
            by_socket[n.socket].append(n.id)
    cpus_of: dict[int, set[int]] = defaultdict(set)
    for c in snap.cpus:
        if c.package is not None:
            cpus_of[c.package].add(c.id)
    ids = sorted(set(by_socket) | set(cpus_of))
    return tuple(Socket(s, tuple(sorted(by_socket.get(s, ()))), CpuSet(cpus_of.get(s, ()))) for s in ids)


def locate_by_cpus(local: CpuSet, nodes: tuple[Node, ...]) -> tuple[int | None, int | None]:
    """(node, socket) from a device's local CPUs, the way hwloc places a PCI device.

    The kernel reports *all* CPUs when it has no locality (``cpumask_of_node(NUMA_NO_NODE)``),
    so a set spanning several nodes names no node; if those nodes share one socket, the socket
    is still known.
    """
    cpu_nodes = [n for n in nodes if n.cpus]
    if not local or not cpu_nodes:
        return None, None
    inside = [n for n in cpu_nodes if local <= n.cpus]
    if len(inside) == 1:
        return inside[0].id, inside[0].socket
    touching = [n for n in cpu_nodes if local & n.cpus]
    socks = {n.socket for n in touching}
    if len(socks) == 1 and len(touching) < len(cpu_nodes):
        return None, socks.pop()
    return None, None


def build_topology(snap: Snapshot) -> Topology:
    """Place every PCI function of the snapshot in the host's tree."""
    nodes = _build_nodes(snap)
    node_by_id = {n.id: n for n in nodes}
    sockets = _build_sockets(nodes, snap)
    fns = _order_functions(snap.pci)
    joins = _joins(snap, fns)
    ancestry = _ancestries(fns)
    roles = _bridge_roles(fns, ancestry)
    counters: Counter[DeviceKind] = Counter()
    devices = []
    kinds = [classify(f) for f in fns]
    placed = [_place(f, nodes, node_by_id) for f in fns]
    placed = _infer_from_given_paths(snap, fns, kinds, placed, node_by_id)
    for f, kind, place, lineage in zip(fns, kinds, placed, ancestry, strict=True):
        ident = f"{_ID_PREFIX[kind]}{counters[kind]}"
        counters[kind] += 1
        devices.append(_device(f, ident, kind, place, lineage, roles, joins))
    host_bridges = _host_bridges(devices, node_by_id)
    nodes = _own_memory_nodes(nodes, snap, devices)
    return Topology(snap, sockets, nodes, tuple(host_bridges), tuple(devices))


class _Joins(NamedTuple):
    """What the snapshot lists beside its functions, keyed for joining each function to it."""

    #: Per BDF: network interfaces and their known speeds (Mb/s), RDMA devices, VFs (of a PF).
    netdevs: dict[str, list[str]]
    speeds: dict[str, dict[str, int]]
    rdma: dict[str, list[str]]
    virtfns: dict[str, list[str]]
    #: Per IOMMU group: its type.
    iommu_type: dict[int, str | None]
    #: Per BDF: the ports of each RDMA device behind it that has ports read (not a VF's).
    ports: dict[str, dict[str, tuple[RdmaPort, ...]]]
    #: Per BDF: NVML's record; a GPU's own memory node by BDF and by label.
    nvml: dict[str, NvmlGpu]
    memory_by_bdf: dict[str, int]
    memory_by_label: dict[str, int]
    #: Per BDF: KFD's record of an AMD GPU.
    amd: dict[str, AmdGpu]
    #: Per RDMA device name, for functions a tool names without a PCI address (a pasted
    #: ibdev2netdev): its netdevs (name, speed, up) and its ports.
    netdevs_by_rdma: dict[str, list[tuple[str, int | None, bool | None]]]
    ports_by_rdma: dict[str, tuple[RdmaPort, ...]]
    #: Per BDF: its netdevs' up/down, where a tool said.
    up: dict[str, dict[str, bool]]


def _joins(snap: Snapshot, fns: list[PciFunction]) -> _Joins:
    """The names sysfs lists per function (network interfaces, RDMA devices), each physical
    function's VFs, the IOMMU groups' types, RDMA ports, NVML's GPUs and GPU memory nodes."""
    netdevs: dict[str, list[str]] = defaultdict(list)
    speeds: dict[str, dict[str, int]] = defaultdict(dict)
    up: dict[str, dict[str, bool]] = defaultdict(dict)
    by_rdma: dict[str, list[tuple[str, int | None, bool | None]]] = defaultdict(list)
    for nd in snap.netdevs:
        if nd.bdf:
            netdevs[nd.bdf].append(nd.name)
            if nd.speed_mbps is not None:
                speeds[nd.bdf][nd.name] = nd.speed_mbps
            if nd.up is not None:
                up[nd.bdf][nd.name] = nd.up
        elif nd.rdma:
            by_rdma[nd.rdma].append((nd.name, nd.speed_mbps, nd.up))
    rdma: dict[str, list[str]] = defaultdict(list)
    ports: dict[str, dict[str, tuple[RdmaPort, ...]]] = defaultdict(dict)
    ports_by_rdma: dict[str, tuple[RdmaPort, ...]] = {}
    for r in snap.rdma:
        if r.bdf:
            rdma[r.bdf].append(r.name)
            if r.ports:
                ports[r.bdf][r.name] = r.ports
        elif r.ports:
            ports_by_rdma[r.name] = r.ports
    virtfns: dict[str, list[str]] = defaultdict(list)
    for f in fns:
        if f.physfn and f.bdf is not None:
            virtfns[f.physfn].append(f.bdf)
    return _Joins(
        netdevs=netdevs,
        speeds=speeds,
        rdma=rdma,
        virtfns=virtfns,
        iommu_type={g.id: g.type for g in snap.iommu_groups},
        ports=ports,
        nvml={g.bdf: g for g in snap.nvml_gpus},
        memory_by_bdf={m.bdf: m.node for m in snap.gpu_memory_nodes if m.bdf is not None},
        memory_by_label={m.label: m.node for m in snap.gpu_memory_nodes if m.label is not None},
        amd={g.bdf: g for g in snap.amd_gpus},
        netdevs_by_rdma=by_rdma,
        ports_by_rdma=ports_by_rdma,
        up=up,
    )


_NO_PORTS: FrozenMap[str, tuple[RdmaPort, ...]] = FrozenMap()
_NO_SPEEDS: FrozenMap[str, int] = FrozenMap()
_NO_UP: FrozenMap[str, bool] = FrozenMap()


def _memory_node(f: PciFunction, nvml: NvmlGpu | None, joins: _Joins) -> int | None:
    """A GPU's own memory node: NVML's NUMA id, else the driver's (by BDF), else a matrix's
    (by label)."""
    if nvml is not None and nvml.numa_node is not None:
        return nvml.numa_node
    if f.bdf is not None and f.bdf in joins.memory_by_bdf:
        return joins.memory_by_bdf[f.bdf]
    return joins.memory_by_label.get(f.label) if f.label is not None else None


_Lineage = tuple[str | None, tuple[str, ...], tuple[str, ...]]  # root bus, listed bridges, hidden ones


def _ancestries(fns: list[PciFunction]) -> list[_Lineage]:
    """Where each function hangs: its root bus and the listed bridges above it.

    A directory on the real path that is not itself a listed function (a bridge hidden by
    firmware, a chipset-internal bridge, a capture that missed it) is skipped: the function
    hangs from the nearest ancestor that exists, and says so -- it is never dropped from the
    tree.
    """
    listed = {f.bdf for f in fns if f.bdf is not None}
    ancestry: list[_Lineage] = []  # per function of fns
    below: dict[str, _Lineage] = {}  # by parent directory
    for f in fns:
        # (a function directly in sys/devices is its own first component: no sharing there)
        parent_dir = f.sysfs_path.rpartition("/")[0] if f.sysfs_path and "/" in f.sysfs_path else None
        known = below.get(parent_dir) if parent_dir is not None else None  # siblings share it (VFs)
        if known is None:
            root, full = _ancestry(f.sysfs_path)
            if listed.issuperset(full):  # the common case: every bridge above is listed
                known = (root, full, ())
            else:
                known = (root, tuple(b for b in full if b in listed), tuple(b for b in full if b not in listed))
            if parent_dir is not None:
                below[parent_dir] = known
        ancestry.append(known)
    return ancestry


def _bridge_roles(fns: list[PciFunction], ancestry: list[_Lineage]) -> dict[str, BridgeRole]:
    """Bridge roles: the PCIe capability's port type where readable, the tree's shape otherwise.

    A switch's upstream port is the bridge whose children are bridges (its downstream ports);
    a bridge with only endpoints below (ASPEED AST1150, PCIe-to-PCI) is not a switch.
    """
    bridge_bdfs = {f.bdf for f in fns if _is_p2p_bridge(f)}
    has_bridge_child = {
        c for f, (_, chain, _) in zip(fns, ancestry, strict=True) if f.bdf in bridge_bdfs for c in chain[-1:]
    }
    roles: dict[str, BridgeRole] = {}
    for f, (_, chain, _) in zip(
        fns, ancestry, strict=True
    ):  # BDF order puts parents before children on every real bus numbering
        if f.bdf is None or not _is_p2p_bridge(f):
            continue
        port = f.config.pcie_port_type if f.config is not None else None
        if port in _ROLE_FROM_PORT:
            roles[f.bdf] = _ROLE_FROM_PORT[port]
            continue
        parent_role = roles.get(chain[-1]) if chain else None
        if f.sysfs_path is not None and not chain:
            roles[f.bdf] = BridgeRole.ROOT_PORT
        elif f.bdf in has_bridge_child and (
            parent_role in (BridgeRole.ROOT_PORT, BridgeRole.SWITCH_DOWNSTREAM) or (f.sysfs_path is None and not chain)
        ):
            # (the top of a subtree whose parent the paste does not show hangs off a port too)
            roles[f.bdf] = BridgeRole.SWITCH_UPSTREAM
        elif parent_role is BridgeRole.SWITCH_UPSTREAM:
            roles[f.bdf] = BridgeRole.SWITCH_DOWNSTREAM
        else:
            roles[f.bdf] = BridgeRole.PCI_BRIDGE
    return roles


def _device(
    f: PciFunction,
    ident: str,
    kind: DeviceKind,
    place: tuple[int | None, str | None, int | None],
    lineage: _Lineage,
    roles: dict[str, BridgeRole],
    joins: _Joins,
) -> Device:
    """The device of one function, placed (node, how, socket) and hung (``lineage``)."""
    numa, source, socket = place
    root, chain, hidden = lineage
    netdev_names = list(joins.netdevs.get(f.bdf, ())) if f.bdf is not None else []
    rdma_names = tuple(joins.rdma.get(f.bdf, ())) if f.bdf is not None else ()
    if f.rdma_names:  # a pasted source's names, next to sysfs's
        rdma_names += tuple(n for n in f.rdma_names if n not in rdma_names)
    speeds = dict(joins.speeds.get(f.bdf, {})) if f.bdf is not None else {}
    ports = dict(joins.ports.get(f.bdf, {})) if f.bdf is not None else {}
    up = dict(joins.up.get(f.bdf, {})) if f.bdf is not None else {}
    for name in rdma_names:  # what a tool pairs with an RDMA name but no PCI address
        if name in joins.ports_by_rdma:
            ports.setdefault(name, joins.ports_by_rdma[name])
        for nd, speed, is_up in joins.netdevs_by_rdma.get(name, ()):
            if nd not in netdev_names:
                netdev_names.append(nd)
            if speed is not None:
                speeds[nd] = speed
            if is_up is not None:
                up[nd] = is_up
    nvml = joins.nvml.get(f.bdf) if f.bdf is not None else None
    return Device(
        id=ident,
        key=device_key(f, ident),
        bdf=f.bdf,
        kind=kind,
        role=roles.get(f.bdf) if kind is DeviceKind.BRIDGE and f.bdf is not None else None,
        name=f.name or pci.device_name(f.vendor_id, f.device_id, f.class_code),
        vendor_id=f.vendor_id,
        device_id=f.device_id,
        class_code=f.class_code,
        subsystem_vendor_id=f.subsystem_vendor_id,
        subsystem_device_id=f.subsystem_device_id,
        numa_node=numa,
        numa_source=source,
        local_cpus=f.local_cpus,
        socket=socket,
        parent=chain[-1] if chain else root,
        ancestors=chain,
        root_bus=root,
        driver=f.driver,
        link=f.link.filled_from(f.config.link if f.config is not None else None),
        netdevs=tuple(sorted(netdev_names)),
        rdma_devices=tuple(sorted(rdma_names)),
        iommu_group=f.iommu_group,
        iommu_type=joins.iommu_type.get(f.iommu_group) if f.iommu_group is not None else None,
        physfn=f.physfn,
        virtfns=tuple(joins.virtfns.get(f.bdf, ())) if f.bdf is not None else (),  # fns are in BDF order
        config=f.config,
        label=f.label,
        numa_said=f.numa_said,
        rdma=f.rdma,
        notes=_hidden_note(hidden, chain, root),
        fell_off_bus=f.fell_off_bus,
        aer=f.aer,
        nvml=nvml,
        memory_node=_memory_node(f, nvml, joins) if kind is DeviceKind.GPU else None,
        rdma_ports=FrozenMap(ports) if ports else _NO_PORTS,
        netdev_speeds=FrozenMap(speeds) if speeds else _NO_SPEEDS,
        platform_role=platform_role(f.vendor_id, f.device_id),
        vpd=f.vpd,
        link_source=f.link_source,
        activity=f.activity,
        aer_logged=f.aer_logged,
        amd=joins.amd.get(f.bdf) if f.bdf is not None and kind is DeviceKind.GPU else None,
        netdev_up=FrozenMap(up) if up else _NO_UP,
    )


def _host_bridges(devices: list[Device], node_by_id: dict[int, Node]) -> list[HostBridge]:
    """A host bridge sits on the NUMA node most of its devices report.
    (``numa_node`` answers outvote local-CPU matches.)"""
    votes: dict[str, Counter[int]] = defaultdict(Counter)
    for d in devices:
        if d.root_bus is not None and d.numa_node is not None:
            votes[d.root_bus][d.numa_node] += 1000 if d.numa_source in (NUMA_FROM_SYSFS, NUMA_FROM_LSPCI) else 1
    buses = sorted({d.root_bus for d in devices if d.root_bus}, key=root_bus_key)
    host_bridges = []
    for b in buses:
        v = votes.get(b)
        numa = min(v, key=lambda n: (-v[n], n)) if v else None
        host_bridges.append(HostBridge(b, numa, node_by_id[numa].socket if numa in node_by_id else None))
    return host_bridges


def _hidden_note(hidden: tuple[str, ...], chain: tuple[str, ...], root: str | None) -> tuple[str, ...]:
    if not hidden:
        return ()
    above = chain[-1] if chain else root
    return (
        f"{'bridge' if len(hidden) == 1 else 'bridges'} {', '.join(hidden)} on its sysfs path "
        "not listed in /sys/bus/pci/devices (hidden by firmware, chipset-internal, or not "
        f"captured): placed under the nearest listed ancestor, {above}",
    )


def _place(
    f: PciFunction, nodes: tuple[Node, ...], node_by_id: dict[int, Node]
) -> tuple[int | None, str | None, int | None]:
    """A function's NUMA node, how it was learnt, and its socket."""
    if f.numa_node is not None:
        source = f.numa_source or NUMA_FROM_SYSFS
        socket = node_by_id[f.numa_node].socket if f.numa_node in node_by_id else None
        return f.numa_node, source, socket
    local = f.local_cpus if f.local_cpus is not None else CpuSet()
    found, socket = locate_by_cpus(local, nodes)
    return found, NUMA_FROM_CPUS if found is not None else None, socket


def _infer_from_given_paths(
    snap: Snapshot,
    fns: list[PciFunction],
    kinds: list[DeviceKind],
    placed: list[tuple[int | None, str | None, int | None]],
    node_by_id: dict[int, Node],
) -> list[tuple[int | None, str | None, int | None]]:
    """A labelled NIC without a NUMA node takes its GPUs' node from the matrix.

    nvidia-smi prints no affinity for NICs, but a NIC that is PIX, PXB, PHB or NODE to a GPU
    shares that GPU's NUMA node (every one of those classes stays inside one node).  The GPUs
    at the NIC's best such class must agree on the node; SYS to every GPU says nothing.
    """
    if not snap.given_paths:
        return placed
    given = given_index(snap)
    gpu_nodes = {
        f.label: p[0]
        for f, k, p in zip(fns, kinds, placed, strict=True)
        if k is DeviceKind.GPU and f.label is not None and p[0] is not None
    }
    out = list(placed)
    for i, (f, kind) in enumerate(zip(fns, kinds, strict=True)):
        if kind is not DeviceKind.NIC or f.label is None or placed[i][0] is not None:
            continue
        ranked = [
            (cls, node)
            for gpu, node in gpu_nodes.items()
            if (t := given.get((f.label, gpu))) is not None and (cls := PathClass.from_token(t)) in _NODE_LOCAL
        ]
        if not ranked:
            continue
        best = min(r for r, _ in ranked)
        found = {node for r, node in ranked if r == best}
        if len(found) == 1:
            numa = found.pop()
            out[i] = (numa, NUMA_FROM_NVSMI, node_by_id[numa].socket if numa in node_by_id else None)
    return out


def _own_memory_nodes(nodes: tuple[Node, ...], snap: Snapshot, devices: list[Device]) -> tuple[Node, ...]:
    """A CPU-less node holding a GPU's memory belongs with the CPU node that GPU hangs off."""
    by_bdf = {d.bdf: d for d in devices if d.bdf is not None}
    by_label = {d.label: d for d in devices if d.label is not None}
    owner = {
        m.node: by_bdf.get(m.bdf) if m.bdf is not None else by_label.get(m.label)  # type: ignore[arg-type]
        for m in snap.gpu_memory_nodes
    }
    for g in snap.nvml_gpus:  # NVML's NUMA id of a GPU is its memory's node (Grace)
        if g.numa_node is not None:
            owner.setdefault(g.numa_node, by_bdf.get(g.bdf))
    cpu_node = {n.id: n for n in nodes if n.cpus}
    out = []
    for n in nodes:
        gpu = owner.get(n.id)
        if n.cpu_less and gpu is not None:
            n = msgspec.structs.replace(n, gpu=gpu.id)
        if n.cpu_less and gpu is not None and gpu.numa_node in cpu_node and gpu.numa_node != n.id:
            n = msgspec.structs.replace(n, nearest_cpu_node=gpu.numa_node, socket=cpu_node[gpu.numa_node].socket)
        out.append(n)
    return tuple(out)


def given_index(snap: Snapshot) -> dict[tuple[str, str], str]:
    """The classes a source stated (matrix cells), keyed by both orders of the label pair;
    where the two cells of a pair differ, the one stated for ``(a, b)`` wins."""
    given: dict[tuple[str, str], str] = {}
    for g in snap.given_paths:
        given[(g.a, g.b)] = g.token
        given.setdefault((g.b, g.a), g.token)
    return given


def common_ancestors(a: Device, b: Device) -> int:
    """How many bridges two devices share from the root bus down (0: none, or other buses).

    Two devices of one subtree whose root bus is unknown (a pasted ``lspci -tv`` excerpt that
    starts below its root-bus line) share the bridges the excerpt shows above both."""
    if a.root_bus != b.root_bus or (a.root_bus is None and not (a.ancestors and b.ancestors)):
        return 0
    common = 0
    for x, y in zip(a.ancestors, b.ancestors, strict=False):
        if x != y:
            break
        common += 1
    return common


def device_key(f: PciFunction, ident: str) -> str:
    """A function's stable key: its BDF, else the label its source gave it (a pasted
    ``nvidia-smi topo -m`` names devices without an address), else its RDMA device (a pasted
    ``ibdev2netdev`` or ``ibv_devinfo``), else its display id."""
    if f.bdf is not None:
        return f.bdf
    if f.label is not None:
        return f"nvidia-smi:{f.label}"
    return f"rdma:{f.rdma_names[0]}" if f.rdma_names else ident


def id_key(ident: str) -> tuple[str, int]:
    """Sort key of a device id: ``gpu2`` before ``gpu10`` (kind, then number)."""
    head, number = trailing_number(ident)
    return head, number or 0
