"""The snapshot: every fact a scan gathered, as plain frozen data.

A snapshot read from a live host, a fake sysfs root, a capture, or pasted tool output is the
same kind of value.  It serialises to JSON and back (:func:`to_dict`, :func:`from_dict`);
everything downstream of it is pure.

Kernel placeholders never reach this module: the parsers turn ``numa_node = -1``, a link speed
of ``Unknown`` or a width of 0/255 into ``None`` ("unknown"), never into a guessed value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.pci import ACS_FLAGS, ACS_P2P_REDIRECT_MASK, CAP_ID_VPD, EXT_CAP_ID_ATS

SNAPSHOT_VERSION = 1


def host_path(rel: str) -> str:
    """How a person reads a root-relative host path: ``sys/module/x`` -> ``/sys/module/x``.

    The one spelling for paths in probe errors and evidence; reading goes through HostFS only.
    """
    return "/" + rel.lstrip("/")


class ProbeError(msgspec.Struct, frozen=True):
    """A probe that failed: the host path (or source) and what went wrong."""

    path: str
    error: str


class SourceStatus(msgspec.Struct, frozen=True):
    """One kind of evidence and whether it was available (``ok``, ``partial``, ``unavailable``)."""

    name: str
    status: str
    detail: str | None = None


class LinkInfo(msgspec.Struct, frozen=True):
    """A PCIe link: current and maximum speed (GT/s per lane) and width (lanes)."""

    current_gts: float | None = None
    current_width: int | None = None
    max_gts: float | None = None
    max_width: int | None = None

    def values(self) -> tuple[float | None, int | None, float | None, int | None]:
        """The four values in field order (without a deep copy)."""
        return self.current_gts, self.current_width, self.max_gts, self.max_width

    @property
    def known(self) -> bool:
        """Whether any of the four values is known."""
        return any(v is not None for v in self.values())

    @property
    def complete(self) -> bool:
        """Whether all four values are known."""
        return None not in self.values()

    def filled_from(self, other: LinkInfo | None) -> LinkInfo:
        """This link with its unknown values taken from ``other`` (another reading of it)."""
        if other is None or other is self or self.complete:
            return self
        return LinkInfo(
            current_gts=self.current_gts if self.current_gts is not None else other.current_gts,
            current_width=self.current_width if self.current_width is not None else other.current_width,
            max_gts=self.max_gts if self.max_gts is not None else other.max_gts,
            max_width=self.max_width if self.max_width is not None else other.max_width,
        )


class SriovCap(msgspec.Struct, frozen=True):
    """A physical function's SR-IOV capability (SR-IOV spec 1.1, 3.3; include/uapi/linux/
    pci_regs.h ``PCI_SRIOV_*``): how many VFs are enabled, where they sit, their device id."""

    total_vfs: int
    num_vfs: int
    #: First VF Offset and VF Stride: VF ``i`` is at routing ID PF + offset + i * stride.
    first_offset: int
    stride: int
    vf_device: int


class AcsInfo(msgspec.Struct, frozen=True):
    """The ACS extended capability: capability and control registers (16 bits each)."""

    capability: int
    control: int
    #: Where the capability sits in config space (None where the source gives no offset:
    #: lspci text); its control register is at ``offset + 6``.
    offset: int | None = None

    #: Control-register bits (bit, lspci's name), :data:`topoagent.core.pci.ACS_FLAGS` in order.
    BITS: ClassVar[tuple[tuple[int, str], ...]] = tuple(enumerate(ACS_FLAGS))

    def enabled(self) -> tuple[str, ...]:
        """Names (lspci's spelling) of the control bits that are set."""
        return tuple(name for bit, name in self.BITS if self.control >> bit & 1)

    @property
    def redirects_p2p(self) -> bool:
        """Request/Completion Redirect or Egress Control: peer traffic goes up to the root."""
        return bool(self.control & ACS_P2P_REDIRECT_MASK)


class ConfigSpace(msgspec.Struct, frozen=True):
    """Facts parsed from a function's PCI configuration space.

    ``size`` is how many bytes could be read: 64 without CAP_SYS_ADMIN, 256 for conventional
    PCI, 4096 for PCIe with privilege.  ``extended_readable`` says whether the extended
    capability list (offset 0x100 on) was visible; when it was not, ``acs`` is unknown rather
    than absent.
    """

    size: int
    header_type: int | None = None
    pcie_port_type: int | None = None
    link: LinkInfo | None = None
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    extended_readable: bool = False
    extended_caps: tuple[int, ...] = ()
    acs: AcsInfo | None = None
    #: Vendor and device id from the header (None on an SR-IOV VF, whose registers read 0xffff).
    vendor_device: tuple[int, int] | None = None
    #: Subsystem vendor and device id: a type-0 header's, or a bridge's SSVID capability's.
    subsystem: tuple[int, int] | None = None
    #: An SR-IOV physical function's capability: its VFs' device id (their vendor is the PF's)
    #: and addresses, as the kernel makes them (drivers/pci/iov.c, pci_iov_add_virtfn).
    sriov: SriovCap | None = None
    #: The standard capability ids, in list order (as far as the bytes read hold the list).
    caps: tuple[int, ...] = ()

    @property
    def has_vpd(self) -> bool:
        """Whether the function has a VPD capability: the kernel then exposes its VPD as the
        ``vpd`` file (drivers/pci/vpd.c, pci_vpd_init)."""
        return CAP_ID_VPD in self.caps

    @property
    def ats(self) -> bool | None:
        """Whether the function exposes an ATS extended capability (Address Translation
        Services, PCIe Base Spec 10.5); None where the extended space was not seen."""
        return EXT_CAP_ID_ATS in self.extended_caps if self.extended_readable else None


class AerCounts(msgspec.Struct, frozen=True):
    """A function's PCIe AER counters since boot, as the kernel keeps them
    (``aer_dev_fatal``, ``aer_dev_nonfatal``, ``aer_dev_correctable``; drivers/pci/pcie/aer.c).
    A total is None where its file could not be read."""

    #: The kernel's counter files: (file, severity, its last line's name); the kernel makes
    #: them for every function with an AER capability (drivers/pci/pcie/aer.c, ``aer_stats_attrs``).
    FILES: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("aer_dev_fatal", "fatal", "TOTAL_ERR_FATAL"),
        ("aer_dev_nonfatal", "nonfatal", "TOTAL_ERR_NONFATAL"),
        ("aer_dev_correctable", "correctable", "TOTAL_ERR_COR"),
    )
    #: The severities, most severe first (a pasted kernel log's events are said in the same words).
    SEVERITIES: ClassVar[tuple[str, ...]] = tuple(severity for _, severity, _ in FILES)

    fatal: int | None = None
    nonfatal: int | None = None
    correctable: int | None = None
    #: The named counters that are not zero: (severity, kernel name, count), severity being
    #: ``fatal``, ``nonfatal`` or ``correctable``.
    errors: tuple[tuple[str, str, int], ...] = ()

    def total(self, severity: str) -> int:
        """The total of one severity (0 where unknown)."""
        value: int | None = getattr(self, severity)
        return value or 0


#: Why a function's extended config space was not seen, by the bytes its config file gave.
UNPRIVILEGED = "the extended config space is readable only with CAP_SYS_ADMIN (64 bytes readable)"


def no_extended_reason(config: ConfigSpace | None) -> str:
    """Why ``config`` shows no PCIe extended capabilities (ACS, SR-IOV, AER), in words.

    The kernel hands a reader without CAP_SYS_ADMIN the first 64 bytes only
    (drivers/pci/pci-sysfs.c, pci_read_config); a function whose config space is 256 bytes
    (conventional PCI, a virtio or emulated device, a VM's bridge) has no extended space even
    for root; anything else is a short read or a file that could not be read.
    """
    if config is None:
        return "config space unreadable"
    if config.size <= 64:
        return UNPRIVILEGED
    if config.size == 256:
        return (
            "config space is 256 bytes on this function (conventional PCI or a virtual device: no PCIe extended space)"
        )
    return f"config space is {config.size} bytes on this function, shorter than the 4096 of PCIe extended space"


class VpdInfo(msgspec.Struct, frozen=True):
    """What a function's Vital Product Data says (the ``vpd`` file; PCI Local Bus Spec 3.0
    appendix I): the identifier string and the VPD-R keywords NVIDIA's tools read.  A ConnectX-8
    Data Direct DMA function carries its NIC's ``V3`` value, which pairs the two (NVIDIA's
    rdma_topo, parse_vpd; mstflint's hot-reset flow matches DMA functions by V3 the same way)."""

    name: str | None = None  # the identifier string (large resource tag 0x82)
    v3: str | None = None  # VPD-R keyword V3 (vendor specific)
    serial: str | None = None  # VPD-R keyword SN
    part: str | None = None  # VPD-R keyword PN


class GpuActivity(msgspec.Struct, frozen=True):
    """Whether a GPU was busy when a tool read its link (``nvidia-smi -q``'s ``Performance
    State`` and ``Utilization``): an idle GPU drops its link speed by design."""

    performance_state: str | None = None
    utilization: int | None = None
    #: Where it was read (``nvidia-smi -q GPU 00000000:18:00.0``).
    source: str = ""
    #: nvidia-smi's clock event reason ``Idle``: ``Active`` (True) means nothing ran on the GPU.
    idle_reason: bool | None = None
    #: nvidia-smi's ``Virtualization Mode`` (``Pass-Through``, ``VGPU``: a guest's GPU).
    virtualization: str | None = None

    @property
    def in_guest(self) -> bool:
        """The GPU was read inside a VM (passthrough or vGPU): its link is what the hypervisor
        shows the guest."""
        return self.virtualization in ("Pass-Through", "VGPU")

    @property
    def busy(self) -> bool | None:
        """Busy: a non-zero utilization, or P0-P2 unless the driver's ``Idle`` clock event
        reason is active (a GPU can sit at P0 with nothing running); idle: a lower state or
        that reason at 0 %; None: unknown."""
        state = self.performance_state
        level = decimal(state[1:], digits=2) if state else None
        if self.utilization is not None and self.utilization > 0:
            return True
        if self.idle_reason:
            return False
        if level is not None:
            return level <= 2
        return None if self.utilization is None else False


class AerLogged(msgspec.Struct, frozen=True):
    """A PCIe AER event the kernel logged for a function (pasted ``dmesg``): its severity
    (``correctable``, ``nonfatal``, ``fatal``), type, error bits, and the line that said so."""

    severity: str
    type: str | None = None
    errors: tuple[str, ...] = ()
    line: int = 0
    text: str = ""


class PciFunction(msgspec.Struct, frozen=True):
    """One PCI function as sysfs (or another source) describes it.

    ``bdf`` is None where the source names devices without an address: a pasted
    ``nvidia-smi topo -m`` calls them ``GPU0`` … ``NIC3`` (``label``).  The fields after
    ``name`` are for such sources and keep their defaults for sysfs.  Beside each field read
    from sysfs, the file of ``/sys/bus/pci/devices/<BDF>/`` it comes from
    (:mod:`topoagent.core.read.pci` says which are required).
    """

    bdf: str | None  # the name of the directory the bus/pci/devices entry leads to
    #: Real path below ``/sys/devices`` (``pci0000:00/0000:00:01.0/0000:01:00.0``); ``None``
    #: where the source has no tree (some captures keep plain directories in bus/pci/devices).
    sysfs_path: str | None = None
    class_code: int | None = None  # class
    vendor_id: int | None = None  # config (header), else vendor
    device_id: int | None = None  # config (header), else device
    subsystem_vendor_id: int | None = None  # config (header), else subsystem_vendor
    subsystem_device_id: int | None = None  # config (header), else subsystem_device
    numa_node: int | None = None  # numa_node
    local_cpus: CpuSet | None = None  # local_cpulist, else local_cpus
    link: LinkInfo = msgspec.field(default_factory=LinkInfo)  # config (Link registers), else *_link_*
    driver: str | None = None  # driver (link)
    iommu_group: int | None = None  # iommu_group (link)
    physfn: str | None = None  # the PF's config (SR-IOV capability), else physfn (link)
    sriov_totalvfs: int | None = None  # sriov_totalvfs
    sriov_numvfs: int | None = None  # sriov_numvfs
    config: ConfigSpace | None = None  # config
    name: str | None = None
    #: The name a tool's output gives the device (``GPU0``, ``NIC3`` of an nvidia-smi matrix);
    #: the key of :attr:`Snapshot.given_paths`.
    label: str | None = None
    #: The device's kind (``gpu``, ``nic`` ...) where the source says what it is but gives no
    #: class code (a matrix row); the class code decides when both are known.
    kind: str | None = None
    #: RDMA devices behind the function, for sources without ``/sys/class/infiniband`` (the
    #: matrix's NIC Legend); sysfs records them in :attr:`Snapshot.rdma` instead.
    rdma_names: tuple[str, ...] = ()
    #: True where the source says the function is RDMA-capable without naming an RDMA device
    #: (a NIC row of a matrix without a legend, a ConnectX in lspci); None: not said.
    rdma: bool | None = None
    #: Where ``numa_node`` came from when not sysfs (``lspci``, ``nvidia-smi``).
    numa_source: str | None = None
    #: What a pasted source printed for the device's NUMA node where that names no one node
    #: (nvidia-smi's ``N/A``, a list such as ``0-7``); None elsewhere.
    numa_said: str | None = None
    #: The function's config header reads all ones although it is no SR-IOV VF: the device no
    #: longer answers (fell off the bus, NVIDIA Xid 79); its ids are the ones sysfs kept.
    fell_off_bus: bool = False  # config
    #: Its AER counters, where the kernel keeps them (None: no AER files).
    aer: AerCounts | None = None  # aer_dev_fatal, aer_dev_nonfatal, aer_dev_correctable
    #: Its Vital Product Data, read for the NVIDIA NIC functions whose pairing it decides.
    vpd: VpdInfo | None = None  # vpd
    #: Where ``link`` was read where that is neither sysfs nor lspci (``nvidia-smi -q GPU
    #: 00000000:18:00.0``): evidence names it.
    link_source: str | None = None
    #: A GPU's activity when its link was read (pasted ``nvidia-smi -q``), None where unknown.
    activity: GpuActivity | None = None
    #: AER events a pasted kernel log holds for it.
    aer_logged: tuple[AerLogged, ...] = ()


class NetDevice(msgspec.Struct, frozen=True):
    """A network interface and the PCI function behind it."""

    name: str  # /sys/class/net/<name>
    bdf: str | None  # the class link (or the device link)
    speed_mbps: int | None = None  # /sys/class/net/<name>/speed
    #: The RDMA device it belongs to where a tool pairs them without a PCI address
    #: (``ibdev2netdev``: ``mlx5_0 port 1 ==> ib0``); None from sysfs.
    rdma: str | None = None
    #: Whether the interface is up (``ibdev2netdev``'s ``(Up)``); None where not read.
    up: bool | None = None


class RdmaPort(msgspec.Struct, frozen=True):
    """One port of an RDMA device (``infiniband/DEV/ports/N``): state, rate and link layer."""

    port: int  # /sys/class/infiniband/<dev>/ports/<port>
    state: str | None = None  # .../ports/<port>/state
    rate_gbps: float | None = None  # .../ports/<port>/rate
    link_layer: str | None = None  # .../ports/<port>/link_layer


#: The kernel modules that give GPUDirect RDMA its peer memory: NVIDIA's ``nvidia_peermem`` and
#: the older Mellanox ``nv_peer_mem`` (NVIDIA/nccl src/transport/net_ib.cc, ncclIbGdrSupport).
PEER_MEMORY_MODULES = ("nvidia_peermem", "nv_peer_mem")


def active_port(ports: Iterable[RdmaPort]) -> int | None:
    """The port a consumer (UCX, NCCL) should use: the first ACTIVE one, else the first
    listed; None without ports.  A dual-port HCA may have port 1 down and port 2 up."""
    ports = tuple(ports)
    active = [p.port for p in ports if (p.state or "").upper() == "ACTIVE"]
    return active[0] if active else (ports[0].port if ports else None)


class RdmaDevice(msgspec.Struct, frozen=True):
    """An RDMA device (``mlx5_0``, ``rdmap16s27``) and the PCI function behind it."""

    name: str  # /sys/class/infiniband/<name>
    bdf: str | None  # the class link (or the device link)
    ports: tuple[RdmaPort, ...] = ()  # /sys/class/infiniband/<name>/ports/*


class CpuIdentity(msgspec.Struct, frozen=True):
    """The first CPU's identity as NCCL's topology XML names it (``<cpu arch vendor familyid
    modelid>``, NCCL src/graph/xml.cc ``ncclTopoGetXmlFromCpu``), from ``/proc/cpuinfo``;
    None where cpuinfo does not state it."""

    arch: str | None = None
    vendor: str | None = None
    familyid: str | None = None
    modelid: str | None = None


class NumaNode(msgspec.Struct, frozen=True):
    """A NUMA node: its CPUs (may be empty; None where the source does not say), memory and
    distance row."""

    id: int  # /sys/devices/system/node/node<id>
    cpus: CpuSet | None = CpuSet()  # node<id>/cpulist, else cpumap, else cpu/cpu*/node<id>; & cpu/online
    memory_bytes: int | None = None  # node<id>/meminfo (MemTotal)
    #: Distances to every node, in the order of :attr:`Snapshot.numa_nodes`.
    distances: tuple[int, ...] = ()  # node<id>/distance
    #: The file the CPUs were read from where it is not ``cpulist`` (``cpumap`` on older
    #: kernels, ``cpu/cpu*/node*`` links where the node's own files fail); evidence names it.
    cpus_file: str | None = None


class Cpu(msgspec.Struct, frozen=True):
    """An online logical CPU and its package (socket): offline CPUs are not listed
    (``cpu/online``), so nothing hands them out.  A package the kernel numbers -1 (s390, some
    POWER) is numbered after the known ids, from its sibling list.

    ``siblings`` is the CPU's core: its hardware threads (``topology/thread_siblings_list``,
    itself included); None where the kernel does not say (offline CPUs, pasted text).
    """

    id: int  # /sys/devices/system/cpu/cpu<id> (online)
    package: int | None = None  # cpu<id>/topology/physical_package_id (-1: numbered by package_cpus_list)
    siblings: CpuSet | None = None  # cpu<id>/topology/thread_siblings_list


class ThreadAffinity(msgspec.Struct, frozen=True):
    """One thread and the CPUs it may run on (``task/<tid>/status`` ``Cpus_allowed_list``, or
    ``sched_getaffinity``); ``start`` its start in clock ticks after boot where read, which
    with the tid names one thread even once the tid is reused."""

    tid: int
    cpus: CpuSet
    start: int | None = None


class IommuGroup(msgspec.Struct, frozen=True):
    """An IOMMU group and its type (``sys/kernel/iommu_groups/N/type``: ``identity``, ``DMA``...)."""

    id: int  # /sys/kernel/iommu_groups/<id>
    type: str | None = None  # /sys/kernel/iommu_groups/<id>/type


class GpuMemoryNode(msgspec.Struct, frozen=True):
    """A NUMA node that holds a GPU's memory (``/proc/driver/nvidia/gpus/BDF/numa_status``,
    or the ``GPU NUMA ID`` column of a matrix, where the GPU is named by ``label``)."""

    bdf: str | None
    node: int
    label: str | None = None


class NvLink(msgspec.Struct, frozen=True):
    """Bonded NVLinks from one GPU to one peer (a GPU, or an NVSwitch) identified by BDF."""

    peer_bdf: str
    count: int


#: NVML's GPU fabric states (``nvmlGpuFabricState_t``: NVML_GPU_FABRIC_STATE_*), by value.
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


class FabricInfo(msgspec.Struct, frozen=True):
    """A GPU's registration with its NVLink fabric (NVML's ``nvmlDeviceGetGpuFabricInfoV``): on
    NVL72-class systems each GPU registers with the fabric manager of the NVLink switch trays
    and joins a clique (an NVLink partition); elsewhere NVML says not supported (no record)."""

    #: ``not_started``, ``in_progress`` or ``completed`` (:data:`FABRIC_STATES`).
    state: str
    #: Once completed: ``success``, or the NVML error the registration ended in (``NVML_ERROR_...``).
    status: str | None = None
    #: The clique (NVLink partition) the GPU belongs to; GPUs of one clique talk over NVLink.
    clique_id: int | None = None
    #: The NVLink domain (the rack's cluster) as a UUID: differs from rack to rack by design.
    cluster_uuid: str | None = None
    #: ``healthMask`` (the V call only): degraded bandwidth, route recovery ... bit fields.
    health_mask: int | None = None

    @property
    def ready(self) -> bool:
        """Registered: state completed with success."""
        return self.state == "completed" and self.status == "success"


class NvmlGpu(msgspec.Struct, frozen=True):
    """What NVML says of one GPU (``nvidia-ml-py``; only on hosts with the NVIDIA driver)."""

    index: int
    bdf: str
    name: str | None = None
    uuid: str | None = None
    minor: int | None = None
    #: ``nvmlDeviceGetNumaNodeId``: the GPU's *own memory* node on platforms where GPU memory
    #: is a NUMA node (Grace: the CPU-less node), not the node the GPU hangs off; None on x86.
    numa_node: int | None = None
    #: NVML's ideal CPU affinity for the GPU, kernel list format.
    cpu_affinity: CpuSet | None = None
    nvlinks: tuple[NvLink, ...] = ()
    #: Peer GPUs (BDF) for which NVML reports P2P read OK / not OK.
    p2p_ok: tuple[str, ...] = ()
    p2p_not_ok: tuple[str, ...] = ()
    #: Its NVLink fabric registration, where NVML has one (NVL72-class systems).
    fabric: FabricInfo | None = None


class GivenP2P(msgspec.Struct, frozen=True):
    """A GPU pair's P2P status as ``nvidia-smi topo -p2p`` states it (NVML's
    ``nvmlDeviceGetP2PStatus``): ``status`` is ``OK``, ``CNS``, ``GNS``, ``TNS``, ``NS``, ``DR``
    or ``U``; ``capability`` ``read``, ``write``, ``nvlink``, ``atomics``, ``prop`` or None where
    the command line was not shown; ``source`` where it was read."""

    a: str
    b: str
    status: str
    capability: str | None = None
    source: str = ""


class NvlinkStatus(msgspec.Struct, frozen=True):
    """One GPU's NVLinks as ``nvidia-smi nvlink -s`` and ``-R`` list them (by the GPU's label,
    ``GPU0``): the speed of each active link whose speed is shown (GB/s, ``-s``), the device
    each active link reaches where shown (``-R``'s ``Remote Device``), the active links'
    numbers, and the inactive ones'."""

    label: str
    speeds: tuple[float, ...] = ()
    inactive: tuple[int, ...] = ()
    source: str = ""
    remote: tuple[str, ...] = ()
    links: tuple[int, ...] = ()

    @property
    def active(self) -> int:
        """How many links are active."""
        return len(self.links) if self.links else len(self.speeds)


#: KFD io_link types (include/uapi/linux/kfd_sysfs.h and drivers/gpu/drm/amd/amdkfd/kfd_crat.h,
#: ``CRAT_IOLINK_TYPE_*``): 2 PCIe, 11 XGMI.
KFD_LINK_PCIE = 2
KFD_LINK_XGMI = 11


class KfdLink(msgspec.Struct, frozen=True):
    """One KFD io_link of an AMD GPU (``io_links/N/properties``) to another KFD node: a CPU
    (``peer_bdf`` None, ``peer_node`` its NUMA node) or a GPU (by BDF)."""

    type: int  # properties: type (2 PCIe, 11 XGMI)
    peer_node: int  # properties: node_to (a KFD node id)
    peer_bdf: str | None = None  # the peer node's domain and location_id, for a GPU
    weight: int | None = None  # properties: weight (15 per XGMI hop, KFD_CRAT_XGMI_WEIGHT)
    min_bandwidth: int | None = None  # properties: min_bandwidth (MB/s)
    max_bandwidth: int | None = None  # properties: max_bandwidth (MB/s)

    @property
    def xgmi(self) -> bool:
        """An XGMI (Infinity Fabric) link."""
        return self.type == KFD_LINK_XGMI


class AmdGpu(msgspec.Struct, frozen=True):
    """What the amdgpu driver and KFD say of one AMD GPU (a KFD node with a ``gpu_id``).

    KFD numbers its nodes CPUs first, then GPUs (drivers/gpu/drm/amd/amdkfd/kfd_topology.c);
    ``index`` is the GPU's place among the GPUs in BDF order, the order of ROCm's device index
    (``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``, rocm-smi's ``GPU[i]``)."""

    bdf: str  # nodes/N/properties: domain, location_id
    kfd_node: int  # /sys/class/kfd/kfd/topology/nodes/<N>
    gpu_id: int | None = None  # nodes/N/gpu_id
    name: str | None = None  # nodes/N/name (gfx942)
    drm_render_minor: int | None = None  # properties: drm_render_minor (/dev/dri/renderD<minor>)
    hive_id: int | None = None  # properties: hive_id; /sys/bus/pci/devices/<bdf>/xgmi_hive_info/xgmi_hive_id
    xgmi_physical_id: int | None = None  # /sys/bus/pci/devices/<bdf>/xgmi_physical_id
    compute_partition: str | None = None  # /sys/bus/pci/devices/<bdf>/current_compute_partition
    memory_partition: str | None = None  # /sys/bus/pci/devices/<bdf>/current_memory_partition
    #: properties: unique_id; ROCm's UUID of the GPU is ``GPU-`` and its 16 hex digits
    #: (``ROCR_VISIBLE_DEVICES=GPU-…``).
    unique_id: int | None = None
    links: tuple[KfdLink, ...] = ()  # nodes/N/io_links/*/properties

    @property
    def uuid(self) -> str | None:
        """The GPU's ROCm UUID (``GPU-4b2c1a9f8d3e6f7a``), where KFD gives its unique id."""
        return f"GPU-{self.unique_id:016x}" if self.unique_id else None


class GivenPath(msgspec.Struct, frozen=True):
    """A path class a source states outright: a cell of ``nvidia-smi topo -m`` (``PIX``,
    ``NV12``, ``SYS`` ...), verbatim, between two devices named by label; or the class
    ``lstopo``'s nesting shows between two functions below one host bridge, named by BDF."""

    a: str
    b: str
    token: str
    #: The cell as printed where that differs from ``token``: ``SOC``, which drivers of about
    #: 2017 printed for SYS with the legend "the SMP link between CPU sockets".
    printed: str | None = None


class Snapshot(msgspec.Struct, frozen=True):
    """Everything one scan gathered.

    ``root`` is the host tree that was read; None for a snapshot built from pasted tool output
    (:mod:`topoagent.core.paste`), where the kernel's state -- modules, command line,
    IOMMU types, CPUs -- is unknown rather than empty.
    """

    hostname: str | None = None  # /proc/sys/kernel/hostname
    root: str | None = "/"
    kernel_cmdline: str | None = None  # /proc/cmdline
    virtualized: bool | None = None  # /proc/cpuinfo flags, /sys/hypervisor/type, DMI
    #: The scanning process's allowed CPUs (``Cpus_allowed_list``), ``None`` when unknown.
    allowed_cpus: CpuSet | None = None
    numa_nodes: tuple[NumaNode, ...] = ()
    cpus: tuple[Cpu, ...] = ()
    pci: tuple[PciFunction, ...] = ()
    netdevs: tuple[NetDevice, ...] = ()
    rdma: tuple[RdmaDevice, ...] = ()
    iommu_groups: tuple[IommuGroup, ...] = ()
    #: Kernel modules relevant to GPUDirect that are loaded (``nvidia``, ``nvidia_peermem`` ...).
    modules: tuple[str, ...] = ()
    #: Entries of ``/sys/kernel/mm/memory_peers`` (``nv_mem``, ``nv_mem_nc``).
    memory_peers: tuple[str, ...] = ()
    gpu_memory_nodes: tuple[GpuMemoryNode, ...] = ()
    nvml_gpus: tuple[NvmlGpu, ...] = ()
    driver_version: str | None = None
    sources: tuple[SourceStatus, ...] = ()
    probe_errors: tuple[ProbeError, ...] = ()
    version: int = SNAPSHOT_VERSION
    #: Path classes stated by a source (an nvidia-smi matrix), keyed by device labels.
    given_paths: tuple[GivenPath, ...] = ()
    #: GPU pairs' P2P status stated by ``nvidia-smi topo -p2p`` (by label).
    given_p2p: tuple[GivenP2P, ...] = ()
    #: GPUs' NVLinks as ``nvidia-smi nvlink -s`` lists them (by label).
    nvlink_status: tuple[NvlinkStatus, ...] = ()
    #: AMD GPUs as KFD and amdgpu describe them (``/sys/class/kfd``), in BDF order.
    amd_gpus: tuple[AmdGpu, ...] = ()
    #: What the host is meant to be (``/sys/class/dmi/id/sys_vendor``, ``product_name``) and
    #: its CPU model (``/proc/cpuinfo`` ``model name``); None where not read.
    dmi_vendor: str | None = None
    dmi_product: str | None = None
    cpu_model: str | None = None
    #: The first CPU's identity (``/proc/cpuinfo``); None where not read.
    cpu_identity: CpuIdentity | None = None
    #: The board's name where there is no DMI: the device tree's ``model``, else cpuinfo's
    #: ``machine`` (POWER); None where neither says.
    system_model: str | None = None
    #: The CPUs that share one L3 cache (``cpu*/cache/index3/shared_cpu_list``): the core
    #: complexes (AMD CCDs), ordered by first CPU; () where the kernel names none.
    l3_domains: tuple[CpuSet, ...] = ()
    #: Inputs that show only part of the host, each said in words (an author's ``...`` in a
    #: matrix, a filtered ``lspci -t -d``): what they do not show is unknown, never absent.
    partial_inputs: tuple[str, ...] = ()
    #: Whether the input lists every NIC the host has, so that an absence proves something: a
    #: host tree with ``/sys/class`` (a capture may lack it), a whole lspci listing (not an
    #: excerpt, not filtered, nothing elided); never a matrix alone (nvidia-smi lists only the
    #: RDMA NICs it knows).  None: not said (a snapshot from before this field).
    lists_every_nic: bool | None = None
    #: ``/proc/sys/kernel/osrelease`` as (major, minor); None where not read.
    kernel_release: tuple[int, int] | None = None
    #: Whether the NVIDIA kernel module is the open one (``/proc/driver/nvidia/version``);
    #: None where no NVIDIA driver version was readable.
    nvidia_open_module: bool | None = None

    @property
    def from_host_tree(self) -> bool:
        """Read from a host tree (sysfs), so absent modules and cmdline mean absent."""
        return self.root is not None

    @property
    def peer_memory(self) -> bool | None:
        """GPUDirect RDMA's peer memory: a peer-memory module loaded (:data:`PEER_MEMORY_MODULES`)
        or a client registered in ``/sys/kernel/mm/memory_peers``; None where the snapshot is not
        from a host tree (pasted tool output does not say which modules are loaded)."""
        if not self.from_host_tree:
            return None
        return bool(self.memory_peers) or any(m in PEER_MEMORY_MODULES for m in self.modules)


# -- (de)serialisation ----------------------------------------------------------------------

T = TypeVar("T")


def enc_hook(value: Any) -> Any:
    """msgspec's hook for the types it does not know: a CPU set as the kernel's list format."""
    if isinstance(value, CpuSet):
        return str(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def dec_hook(tp: Any, data: Any) -> Any:
    """msgspec's hook for the types it does not know: a CPU set from the kernel's list format."""
    if tp is CpuSet and isinstance(data, str):
        return CpuSet.parse(data)  # CpuSetError is a ValueError: msgspec reports it as invalid
    raise NotImplementedError(f"cannot decode {tp!r}")


def to_dict(value: Any) -> Any:
    """A snapshot (or any value in it) as JSON-ready plain data (CPU sets as list strings)."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild a value of type ``cls`` from :func:`to_dict` output (unknown keys ignored).

    Raises :class:`msgspec.ValidationError` when ``data`` does not fit ``cls``.
    """
    return msgspec.convert(data, type=cls, dec_hook=dec_hook)
