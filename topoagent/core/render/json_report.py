"""The JSON contract of ``topoagent scan --format json`` (schema in ``topoagent/schema``).

The contract is the types below: :func:`report` builds a :class:`ScanReport` from a result,
:func:`render` encodes it with msgspec, and ``python -m topoagent.schema`` writes the published
JSON Schema from the same types, so the schema cannot drift from the output.  Field order is
part of the contract.  ``schema_version`` is bumped only for breaking changes; additive fields
keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from topoagent.core.analysis.links import LinkCapability, capability
from topoagent.core.analysis.paths import NIC_PAIR_LIMIT, omitted_nic_pairs, paired_devices
from topoagent.core.analysis.rails import NicRole
from topoagent.core.baseline import HostShape, SlotFacts
from topoagent.core.findings import Finding
from topoagent.core.pci import DeviceKind
from topoagent.core.platform import ComplexKind, PlatformRole, PortRole
from topoagent.core.render.escape import encodable
from topoagent.core.result import Expectation, ScanResult
from topoagent.core.snapshot import ProbeError, SourceStatus, enc_hook
from topoagent.core.topology import BridgeRole, Device, Topology
from topoagent.core.version import __version__

SCHEMA_VERSION: Literal[1] = 1

#: A CPU set in the kernel's list format (``0-3,8``; empty: no CPU).
CpuList = Annotated[str, msgspec.Meta(pattern=r"^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$")]
#: A register value or id in lower-case hex (``0x10de``).
Hex = Annotated[str, msgspec.Meta(pattern=r"^0x[0-9a-f]+$")]
#: A PCI address (``0000:1b:00.0``).
Bdf = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")]
#: A path class, as ``nvidia-smi topo -m`` names it (``XGMI`` as rocm-smi names AMD GPUs' link).
PathToken = Annotated[str, msgspec.Meta(pattern=r"^(X|NV[0-9]+|XGMI|PIX|PXB|PHB|NODE|SYS)$")]
#: The first 16 hex digits of a SHA-256 (docs/fleet.md).
Fingerprint = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}$")]
NodeId = Annotated[int, msgspec.Meta(ge=0)]
GpuId = Annotated[str, msgspec.Meta(pattern=r"^gpu[0-9]+$")]
#: ``CUDA_VISIBLE_DEVICES``: CUDA indices, comma-separated.
CudaDevices = Annotated[str, msgspec.Meta(pattern=r"^[0-9]+(,[0-9]+)*$")]


class Tool(msgspec.Struct, frozen=True):
    """The program that wrote the report."""

    name: Literal["topoagent"]
    version: str


class Host(msgspec.Struct, frozen=True):
    """The host scanned: its name, root, sources and what its kernel says."""

    hostname: str | None
    root: str | None
    sources: list[SourceStatus]
    virtualized: bool | None
    kernel_cmdline: str | None
    allowed_cpus: CpuList | None
    modules: list[str]
    memory_peers: list[str]
    driver_version: str | None
    hw_class: Annotated[
        str | None,
        msgspec.Meta(
            description=(
                "What the host is meant to be: its board (DMI vendor and product, else the device tree's "
                "model), CPU count and model, GPU models (docs/fleet.md)."
            )
        ),
    ] = None
    fingerprint: Annotated[
        Fingerprint | None,
        msgspec.Meta(
            description=("Hash of the facts identical builds share: peer_memory, shape and slots (docs/fleet.md).")
        ),
    ] = None
    peer_memory: Annotated[
        bool | None,
        msgspec.Meta(
            description=(
                "GPUDirect RDMA peer memory present (nvidia_peermem or /sys/kernel/mm/memory_peers); null: unknown."
            )
        ),
    ] = None
    shape: Annotated[
        HostShape | None,
        msgspec.Meta(
            description=(
                "The CPUs and memory identical builds share: CPU model, sockets, cores, threads per core and "
                "each NUMA node's socket, CPUs and memory in rounded GiB (docs/fleet.md); null: pasted output."
            )
        ),
    ] = None


class SocketEntry(msgspec.Struct, frozen=True):
    """A CPU socket: its NUMA nodes and CPUs."""

    id: NodeId
    numa_nodes: list[int]
    cpus: CpuList


class NumaNodeEntry(msgspec.Struct, frozen=True):
    """A NUMA node: its CPUs, socket, memory and distances."""

    id: NodeId
    cpus: Annotated[
        CpuList | None, msgspec.Meta(description="null: the source names the node but not its CPUs (lspci)")
    ]
    socket: int | None
    memory_bytes: NodeId | None
    distances: list[int | None]
    cpu_less: bool | None
    nearest_cpu_node: int | None
    gpu: Annotated[
        str | None,
        msgspec.Meta(
            description="The GPU whose own memory this node is (Grace: GH200/GB200, nvidia-smi's GPU NUMA "
            "ID); its CPUs are nearest_cpu_node's. null: not a GPU's memory, or not known to be."
        ),
    ] = None


class HostBridgeEntry(msgspec.Struct, frozen=True):
    """A PCI root bus (host bridge) and the NUMA node and socket it hangs off."""

    name: Annotated[str, msgspec.Meta(pattern=r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")]
    numa_node: int | None
    socket: int | None


class LinkEntry(msgspec.Struct, frozen=True):
    """A PCIe link: this end's current and maximum speed (GT/s per lane) and width (lanes), and
    the link's capability (cap_*)."""

    # cap_*: the lower of both ends' maxima, what the link can train to
    # (topoagent.core.analysis.links.capability); compare the current values with those.

    current_gts: float | None = None
    current_width: int | None = None
    max_gts: float | None = None
    max_width: int | None = None
    cap_gts: Annotated[
        float | None,
        msgspec.Meta(description="What the link can train to: the lower of both ends' maximum speeds (GT/s)."),
    ] = None
    cap_width: Annotated[
        int | None, msgspec.Meta(description="What the link can train to: the lower of both ends' maximum widths.")
    ] = None


class DeviceEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """A PCI function: identity, placement, link, and what it is for.  The fields after ``notes``
    are present only on the functions of an NVIDIA platform (``platform``), and ``usable`` only
    on GPUs."""

    id: Annotated[str, msgspec.Meta(pattern=r"^(gpu|nic|nvme|accel|nvswitch|bridge|other)[0-9]+$")]
    bdf: Bdf | None
    kind: DeviceKind
    role: BridgeRole | None
    vendor_id: Hex | None
    device_id: Hex | None
    subsystem_vendor_id: Hex | None
    subsystem_device_id: Hex | None
    class_: Hex | None = msgspec.field(name="class")
    name: str
    numa_node: NodeId | None
    numa_source: Literal["numa_node", "local_cpus", "nvml", "nvidia-smi", "lspci"] | None
    local_cpus: CpuList | None
    socket: int | None
    parent: str | None
    driver: str | None
    link: LinkEntry
    nic_role: NicRole | None
    netdevs: list[str]
    rdma_devices: list[str]
    iommu_group: int | None
    iommu_type: str | None
    physfn: str | None
    virtfns: list[str]
    acs_control: list[str] | None
    notes: Annotated[
        list[str],
        msgspec.Meta(
            description=("How the device was placed where the evidence was incomplete (a parent bridge not listed).")
        ),
    ]
    platform_role: Annotated[
        PlatformRole | None,
        msgspec.Meta(
            description="What the function is to NVIDIA's platform tool (rdma_topo): a Grace/Vera root port, a "
            "ConnectX/BlueField-3 switch port, a ConnectX/BlueField-3 NIC, the ConnectX-8 Data Direct DMA function."
        ),
    ] = None
    complex: Annotated[
        str | None, msgspec.Meta(description="The platform complex (platform.complexes[].id) it belongs to.")
    ] = None
    ats: Annotated[
        bool | None,
        msgspec.Meta(description="A ConnectX/BlueField-3 NIC function: whether it exposes the ATS capability."),
    ] = None
    vpd_name: Annotated[
        str | None, msgspec.Meta(description="Its VPD product name (ConnectX NICs and DMA functions).")
    ] = None
    usable: Annotated[
        bool | None,
        msgspec.Meta(
            description="A GPU: false where a finding makes it unusable (FELL_OFF_BUS; the codes are the "
            "findings naming it): the plan gives it no rank.  Absent on other devices."
        ),
    ] = None


class AcsRuleEntry(msgspec.Struct, frozen=True):
    """A platform port: the ACS mask it must hold, what it holds and whether that satisfies it."""

    port: str
    bdf: Bdf
    role: PortRole
    complex: str | None
    required: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[01x]{7}$",
            description="rdma_topo's mask, bit 6 (DirectTrans) first, bit 0 (SrcValid) last; x: left as it is.",
        ),
    ]
    control: Annotated[Hex | None, msgspec.Meta(description="The ACS Control register now; null: not readable.")]
    holds: bool | None
    why: str


class ComplexEntry(msgspec.Struct, frozen=True):
    """One complex: its kind, NIC PFs (primary first), DMA function, GPUs and ports, by device id."""

    id: str
    kind: ComplexKind
    nics: list[str]
    dma: str | None
    gpus: list[str]
    ports: list[str]
    numa_node: int | None
    name: str | None


class PlatformEntry(msgspec.Struct, frozen=True):
    """NVIDIA's platform kind of the host (topoagent.core.platform, after rdma_topo)."""

    kind: ComplexKind | None
    virtualized: Annotated[
        bool | None, msgspec.Meta(description="Inline only: its NICs expose ATS (set up for virtual machines).")
    ]
    complexes: list[ComplexEntry]
    acs: list[AcsRuleEntry]
    problem: Annotated[
        str | None,
        msgspec.Meta(description="Why a host near a kind (kind null) was not recognised, as rdma_topo refuses it."),
    ] = None


class EvidenceEntry(msgspec.Struct, frozen=True):
    """A file a finding rests on and the value read from it."""

    path: str
    value: str | None


class FindingEntry(msgspec.Struct, frozen=True):
    """A problem found: code, severity, devices, message, evidence and remedy."""

    code: Annotated[str, msgspec.Meta(pattern=r"^[A-Z][A-Z0-9_]+$")]
    severity: Literal["critical", "warning", "info"]
    subjects: list[str]
    message: Annotated[str, msgspec.Meta(min_length=1)]
    evidence: list[EvidenceEntry]
    remedy: Annotated[str, msgspec.Meta(min_length=1)]


class PathEntry(msgspec.Struct, frozen=True):
    """The path class between two devices (as nvidia-smi topo -m names it) and what it rests on."""

    a: str
    b: str
    kind: PathToken
    pcie: Literal["X", "PIX", "PXB", "PHB", "NODE", "SYS"]
    nvlinks: NodeId
    same_socket: bool | None
    locality_known: bool
    shown: Annotated[
        bool,
        msgspec.Meta(
            description=(
                "False when no source shows the pair (a pasted matrix's missing row or unreadable cell, "
                "no tree placing both ends): the class is unknown, `kind`/`pcie` are only placeholders "
                "(the worst case) and the text outputs print `?`."
            )
        ),
    ] = True
    links_known: Annotated[
        bool,
        msgspec.Meta(
            description=(
                "False for two GPUs whose NVLinks (XGMI) no source shows (NVML or KFD not read): `nvlinks` is 0 "
                "for want of knowing, `kind` is the PCIe class where nvidia-smi may print NV#, and the matrix "
                "prints `?` (the host's `unknown` says why)."
            )
        ),
    ] = True


class PathsOmitted(msgspec.Struct, frozen=True):
    """Pairs ``paths`` leaves out, and why (present only when some are)."""

    nic_nic: Annotated[int, msgspec.Meta(ge=1, description="NIC-NIC pairs not listed.")]
    physical_nics: Annotated[int, msgspec.Meta(ge=0, description="Physical NICs (VFs not counted).")]
    limit: Annotated[int, msgspec.Meta(ge=0, description="Physical NICs up to which NIC-NIC pairs are listed.")]
    why: str


class RailEntry(msgspec.Struct, frozen=True):
    """A GPU's rail: its NIC(s), how near they are, and the GPUs that share them."""

    gpu: str
    nic: str | None
    kind: str | None
    nics: list[str]
    shared_with: list[str]
    nccl_path: Annotated[
        str | None,
        msgspec.Meta(
            description="The path to nic as NCCL names it where that differs from kind: for a Grace "
            "GPU's NIC on its own CPU P2C (one of the GPU's fastest NICs, NCCL's ncclTopoGetLocal) or PHB "
            "(a slower one), kind then SYS, as nvidia-smi prints it; for a ConnectX-8 Data Direct NIC the "
            "class to its DMA function, where NCCL places it (NCCL_IB_DATA_DIRECT=1, the default); null "
            "otherwise."
        ),
    ] = None
    gdr: Annotated[
        bool | None,
        msgspec.Meta(
            description="Whether NCCL uses GPUDirect RDMA to nic by default (PXB or better, or P2C with "
            "NCCL >= 2.27, NVIDIA/nccl ncclTopoCheckGdr), for the direct path (NCCL's PXN through an "
            "NVLinked peer GPU aside); null without a nic or where no source shows the path."
        ),
    ] = None


class GpuRecommendation(msgspec.Struct, frozen=True):
    """One GPU's default placement: NUMA node, CPUs, NICs and environment."""

    gpu: str
    bdf: str | None
    numa_node: int | None
    cpus: CpuList | None
    nics: list[str]
    env: dict[str, str]
    numactl: str | None


class NumaGroupEntry(msgspec.Struct, frozen=True):
    """GPUs that share a NUMA node, with one CUDA_VISIBLE_DEVICES and CPU set for them."""

    numa_node: int | None
    gpus: list[GpuId]
    cuda_visible_devices: CudaDevices
    cpus: CpuList | None


class Recommendations(msgspec.Struct, frozen=True):
    """The default placements, per GPU and per NUMA node."""

    gpus: list[GpuRecommendation]
    numa_groups: list[NumaGroupEntry]


class UnknownEntry(msgspec.Struct, frozen=True):
    """A kind of fact the scan could not read (``acs``, ``iommu``, ``nvlinks``, ``peer_memory``,
    ``shape``), the devices it is unknown for and why."""

    fact: Literal["acs", "iommu", "nvlinks", "peer_memory", "shape"]
    subjects: list[str]
    why: str


def unknown_entries(result: ScanResult) -> list[UnknownEntry]:
    """The contract's ``unknown`` list of a result (scan and plan JSON alike)."""
    return [UnknownEntry(u.fact, list(u.subjects), u.why) for u in result.unknown]  # type: ignore[arg-type]


class ScanReport(msgspec.Struct, frozen=True, omit_defaults=True):
    """``topoagent scan --format json``. Schema version 1. Additive changes keep the version;
    breaking ones bump it.  Every field but ``paths_omitted`` and ``platform`` is always present."""

    schema_version: Literal[1]
    tool: Tool
    host: Host
    sockets: list[SocketEntry]
    numa_nodes: list[NumaNodeEntry]
    host_bridges: list[HostBridgeEntry]
    devices: list[DeviceEntry]
    paths: Annotated[
        list[PathEntry],
        msgspec.Meta(
            description=(
                f"Every GPU-GPU and GPU-NIC pair of physical functions, a before b in device order; every NIC-NIC pair "
                f"too while the host has at most {NIC_PAIR_LIMIT} physical NICs (beyond, paths_omitted counts them)."
            )
        ),
    ]
    rails: list[RailEntry]
    findings: list[FindingEntry]
    recommendations: Recommendations
    probe_errors: list[ProbeError]
    unknown: Annotated[
        list[UnknownEntry],
        msgspec.Meta(
            description="What the scan could not read, kind by kind (empty: nothing that matters): the tree's "
            "Unknown line, the matrix's ? cells and topoagent_topology_info{unknown} say the same."
        ),
    ]
    slots: Annotated[
        list[SlotFacts],
        msgspec.Meta(
            description=(
                "Every physical device's slot facts (docs/fleet.md): what the fingerprint hashes and "
                "what topoagent baseline, scan --expect and topoagent fleet compare."
            )
        ),
    ]
    paths_omitted: Annotated[
        PathsOmitted | None,
        msgspec.Meta(
            description=("Present only when paths leaves pairs out: a host with more physical NICs than the limit.")
        ),
    ] = None
    expectation: Annotated[
        Expectation | None,
        msgspec.Meta(
            description=(
                "Present only with scan --expect (or the daemon's expect): what the scan was compared with "
                "and how many EXPECT_* findings that raised (0: it matches)."
            )
        ),
    ] = None
    platform: Annotated[
        PlatformEntry | None,
        msgspec.Meta(
            description="Present only on an NVIDIA GPU platform (Data Direct, Inline or NUMA complexes) or a host "
            "near one: its complexes and the ACS each port must hold (docs/findings.md, the platform family)."
        ),
    ] = None


def str_or_none(value: object) -> str | None:
    """``str(value)``, or None for None (a CPU set that is unknown stays null in JSON)."""
    return None if value is None else str(value)


def _hex(value: int | None, width: int) -> str | None:
    return None if value is None else f"0x{value:0{width}x}"


def device_entry(
    d: Device,
    roles: Mapping[str, NicRole],
    cap: LinkCapability | None = None,
    complex_id: str | None = None,
    *,
    platform: bool = False,
    usable: bool | None = None,
) -> DeviceEntry:
    """One device as the contract's ``devices[]`` entry (``cap``: its link's capability;
    ``complex_id``: the platform complex it belongs to; ``platform``: the host is, or is near,
    an NVIDIA platform, so its functions carry their platform facts; ``usable``: a GPU's state)."""
    nic = platform and d.platform_role in (PlatformRole.CX_NIC, PlatformRole.BF3_NIC)
    return DeviceEntry(
        id=d.id,
        bdf=d.bdf,
        kind=d.kind,
        role=d.role,
        vendor_id=_hex(d.vendor_id, 4),
        device_id=_hex(d.device_id, 4),
        subsystem_vendor_id=_hex(d.subsystem_vendor_id, 4),
        subsystem_device_id=_hex(d.subsystem_device_id, 4),
        class_=_hex(d.class_code, 6),
        name=d.name,
        numa_node=d.numa_node,
        numa_source=d.numa_source,  # type: ignore[arg-type]  # one of the NUMA_FROM_* names
        local_cpus=str_or_none(d.local_cpus),
        socket=d.socket,
        parent=d.parent,
        driver=d.driver,
        link=LinkEntry(*d.link.values(), cap_gts=cap.gts if cap else None, cap_width=cap.width if cap else None),
        nic_role=roles.get(d.id),
        netdevs=list(d.netdevs),
        rdma_devices=list(d.rdma_devices),
        iommu_group=d.iommu_group,
        iommu_type=d.iommu_type,
        physfn=d.physfn,
        virtfns=list(d.virtfns),
        acs_control=list(d.config.acs.enabled()) if d.config and d.config.acs else None,
        notes=list(d.notes),
        platform_role=d.platform_role if platform else None,
        complex=complex_id,
        ats=d.ats if nic else None,
        vpd_name=d.vpd.name if platform and d.vpd is not None else None,
        usable=usable,
    )


def platform_entry(topo: Topology) -> PlatformEntry | None:
    """The contract's ``platform`` object, or None on a host that is no NVIDIA platform."""
    p = topo.platform
    if p.kind is None and p.problem is None:
        return None

    def ids(bdfs: tuple[str, ...]) -> list[str]:
        return [d.id if (d := topo.by_bdf(b)) is not None else b for b in bdfs]

    rules = []
    for r in p.acs:
        port = topo.by_bdf(r.bdf)
        acs = port.config.acs if port is not None and port.config is not None else None
        rules.append(
            AcsRuleEntry(
                port=port.id if port is not None else r.bdf,
                bdf=r.bdf,
                role=r.role,
                complex=r.complex,
                required=r.mask,
                control=_hex(acs.control, 4) if acs is not None else None,
                holds=r.holds(acs.control) if acs is not None else None,
                why=r.why,
            )
        )
    return PlatformEntry(
        kind=p.kind,
        virtualized=p.virt,
        complexes=[
            ComplexEntry(
                c.id,
                c.kind,
                ids(c.nics),
                ids((c.dma,))[0] if c.dma else None,
                ids(c.gpus),
                ids(c.ports),
                c.numa_node,
                c.name,
            )
            for c in p.complexes
        ],
        acs=rules,
        problem=p.problem,
    )


def finding_entry(f: Finding) -> FindingEntry:
    """One finding as the contract's ``findings[]`` entry."""
    return FindingEntry(
        f.code,
        f.severity.label,  # type: ignore[arg-type]
        list(f.subjects),
        f.message,
        [EvidenceEntry(e.path, e.value) for e in f.evidence],
        f.remedy,
    )


def numa_entries(topo: Topology) -> list[NumaNodeEntry]:
    """The contract's ``numa_nodes`` entries of a topology."""
    return [
        NumaNodeEntry(
            id=n.id,
            cpus=n.cpulist if n.cpus_known else None,
            socket=n.socket,
            memory_bytes=n.memory_bytes,
            distances=list(n.distances),
            cpu_less=n.cpu_less if n.cpus_known else None,
            nearest_cpu_node=n.nearest_cpu_node,
            gpu=n.gpu,
        )
        for n in topo.nodes
    ]


def report(result: ScanResult) -> ScanReport:
    """The scan as the JSON contract's object."""
    topo = result.topology
    facts = result.baseline
    on_platform = topo.platform.kind is not None or topo.platform.problem is not None
    return ScanReport(
        schema_version=SCHEMA_VERSION,
        tool=Tool("topoagent", __version__),
        host=Host(
            hostname=topo.hostname,
            root=topo.root,
            sources=list(topo.sources),
            virtualized=topo.virtualized,
            kernel_cmdline=topo.kernel_cmdline,
            allowed_cpus=str_or_none(topo.allowed_cpus),
            modules=list(topo.modules),
            memory_peers=list(topo.memory_peers),
            driver_version=topo.driver_version,
            hw_class=facts.hw_class,
            fingerprint=facts.fingerprint,
            peer_memory=facts.peer_memory,
            shape=facts.shape,
        ),
        sockets=[SocketEntry(s.id, list(s.nodes), str(s.cpus)) for s in topo.sockets],
        numa_nodes=numa_entries(topo),
        host_bridges=[HostBridgeEntry(h.name, h.numa_node, h.socket) for h in topo.host_bridges],
        devices=[
            device_entry(
                d,
                result.rails.roles,
                capability(topo, d),
                _complex_id(topo, d),
                platform=on_platform,
                usable=d.id not in result.unusable if d.kind is DeviceKind.GPU else None,
            )
            for d in topo.devices
        ],
        paths=[
            PathEntry(
                p.a,
                p.b,
                p.token,
                p.pcie.token,  # type: ignore[arg-type]
                p.nvlinks,
                p.same_socket,
                p.locality_known,
                p.shown,
                p.links_known,
            )
            for p in result.paths
        ],
        rails=[
            RailEntry(
                r.gpu,
                r.nic,
                r.cls.token if r.cls is not None else None,
                list(r.nics),
                list(r.shared_with),
                r.nccl_path.name if r.nccl_path is not None else None,
                r.gdr,
            )
            for r in result.rails.rails
        ],
        findings=[finding_entry(f) for f in result.findings],
        recommendations=Recommendations(
            gpus=[
                GpuRecommendation(g.gpu, g.bdf, g.numa_node, str_or_none(g.cpus), list(g.nics), dict(g.env), g.numactl)
                for g in result.plan.gpus
            ],
            numa_groups=[
                NumaGroupEntry(n.numa_node, list(n.gpus), n.cuda_visible_devices, str_or_none(n.cpus))
                for n in result.plan.numa_groups
            ],
        ),
        probe_errors=list(topo.probe_errors),
        unknown=unknown_entries(result),
        slots=list(facts.slots),
        paths_omitted=paths_omitted(topo),
        expectation=result.expectation,
        platform=platform_entry(topo),
    )


def _complex_id(topo: Topology, d: Device) -> str | None:
    c = topo.complex_of(d) if topo.platform.complexes else None
    return c.id if c is not None else None


def paths_omitted(topo: Topology) -> PathsOmitted | None:
    """The marker for the NIC-NIC pairs a scan left out (:func:`~topoagent.core.analysis.paths.scan_paths`), or None."""
    pairs = omitted_nic_pairs(topo)
    if not pairs:
        return None
    nics = sum(1 for d in paired_devices(topo) if d.kind is DeviceKind.NIC)
    return PathsOmitted(
        pairs,
        nics,
        NIC_PAIR_LIMIT,
        f"{nics} physical NICs: NIC-NIC pairs are listed up to {NIC_PAIR_LIMIT} NICs "
        "(the pairs grow as the square); GPU-GPU and GPU-NIC pairs are all listed",
    )


def encode(doc: Any, *, pretty: bool = False) -> str:
    """A contract value (or plain data) as JSON text ending in a newline: one compact line, or
    indented by two spaces for people (``pretty``), as ``json.dumps(indent=2)`` wrote it."""
    try:
        data = msgspec.json.encode(doc, enc_hook=enc_hook)
    except UnicodeEncodeError:  # a name with bytes that are not UTF-8: see escape.encodable
        data = msgspec.json.encode(_mended(msgspec.to_builtins(doc, enc_hook=enc_hook)))
    if pretty:
        data = msgspec.json.format(data, indent=2)
    return data.decode() + "\n"


def _mended(value: Any) -> Any:
    """Plain data with every string (keys too) made encodable (:func:`encodable`)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable(k) if isinstance(k, str) else k: _mended(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mended(v) for v in value]
    return value


def render(result: ScanResult, *, pretty: bool = False, **_: Any) -> str:
    """``scan --format json``: the JSON contract, one compact line (``pretty``: indented)."""
    return encode(report(result), pretty=pretty)
