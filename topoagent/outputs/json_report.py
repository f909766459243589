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

from topoagent import __version__
from topoagent.analysis.findings import Finding
from topoagent.analysis.paths import NIC_PAIR_LIMIT, omitted_nic_pairs, paired_devices
from topoagent.analysis.rails import NicRole
from topoagent.pci import DeviceKind
from topoagent.result import ScanResult
from topoagent.snapshot import LinkInfo, ProbeError, SourceStatus, enc_hook
from topoagent.topology import BridgeRole, Device, Topology

SCHEMA_VERSION: Literal[1] = 1

#: A CPU set in the kernel's list format (``0-3,8``; empty: no CPU).
CpuList = Annotated[str, msgspec.Meta(pattern=r"^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$")]
#: A register value or id in lower-case hex (``0x10de``).
Hex = Annotated[str, msgspec.Meta(pattern=r"^0x[0-9a-f]+$")]
#: A PCI address (``0000:1b:00.0``).
Bdf = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")]
#: A path class, as ``nvidia-smi topo -m`` names it.
PathToken = Annotated[str, msgspec.Meta(pattern=r"^(X|NV[0-9]+|PIX|PXB|PHB|NODE|SYS)$")]
NodeId = Annotated[int, msgspec.Meta(ge=0)]
GpuId = Annotated[str, msgspec.Meta(pattern=r"^gpu[0-9]+$")]
#: ``CUDA_VISIBLE_DEVICES``: CUDA indices, comma-separated.
CudaDevices = Annotated[str, msgspec.Meta(pattern=r"^[0-9]+(,[0-9]+)*$")]


class Tool(msgspec.Struct, frozen=True):
    name: Literal["topoagent"]
    version: str


class Host(msgspec.Struct, frozen=True):
    hostname: str | None
    root: str | None
    sources: list[SourceStatus]
    virtualized: bool | None
    kernel_cmdline: str | None
    allowed_cpus: CpuList | None
    modules: list[str]
    memory_peers: list[str]
    driver_version: str | None


class SocketEntry(msgspec.Struct, frozen=True):
    id: NodeId
    numa_nodes: list[int]
    cpus: CpuList


class NumaNodeEntry(msgspec.Struct, frozen=True):
    id: NodeId
    cpus: Annotated[CpuList | None, msgspec.Meta(
        description="null: the source names the node but not its CPUs (lspci)")]
    socket: int | None
    memory_bytes: NodeId | None
    distances: list[int | None]
    cpu_less: bool | None
    nearest_cpu_node: int | None


class HostBridgeEntry(msgspec.Struct, frozen=True):
    name: Annotated[str, msgspec.Meta(pattern=r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")]
    numa_node: int | None
    socket: int | None


class DeviceEntry(msgspec.Struct, frozen=True):
    id: Annotated[str, msgspec.Meta(pattern=r"^(gpu|nic|nvme|accel|bridge|other)[0-9]+$")]
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
    link: LinkInfo
    nic_role: NicRole | None
    netdevs: list[str]
    rdma_devices: list[str]
    iommu_group: int | None
    iommu_type: str | None
    physfn: str | None
    virtfns: list[str]
    acs_control: list[str] | None
    notes: Annotated[list[str], msgspec.Meta(description=(
        "How the device was placed where the evidence was incomplete (a parent bridge not listed)."
    ))]


class EvidenceEntry(msgspec.Struct, frozen=True):
    path: str
    value: str | None


class FindingEntry(msgspec.Struct, frozen=True):
    code: Annotated[str, msgspec.Meta(pattern=r"^[A-Z][A-Z0-9_]+$")]
    severity: Literal["critical", "warning", "info"]
    subjects: list[str]
    message: Annotated[str, msgspec.Meta(min_length=1)]
    evidence: list[EvidenceEntry]
    remedy: Annotated[str, msgspec.Meta(min_length=1)]


class PathEntry(msgspec.Struct, frozen=True):
    a: str
    b: str
    kind: PathToken
    pcie: Literal["X", "PIX", "PXB", "PHB", "NODE", "SYS"]
    nvlinks: NodeId
    same_socket: bool | None
    locality_known: bool


class PathsOmitted(msgspec.Struct, frozen=True):
    """Pairs ``paths`` leaves out, and why (present only when some are)."""

    nic_nic: Annotated[int, msgspec.Meta(ge=1, description="NIC-NIC pairs not listed.")]
    physical_nics: Annotated[int, msgspec.Meta(ge=0, description="Physical NICs (VFs not counted).")]
    limit: Annotated[int, msgspec.Meta(ge=0, description="Physical NICs up to which NIC-NIC pairs are listed.")]
    why: str


class RailEntry(msgspec.Struct, frozen=True):
    gpu: str
    nic: str | None
    kind: str | None
    nics: list[str]
    shared_with: list[str]


class GpuRecommendation(msgspec.Struct, frozen=True):
    gpu: str
    bdf: str | None
    numa_node: int | None
    cpus: CpuList | None
    nics: list[str]
    env: dict[str, str]
    numactl: str | None


class NumaGroupEntry(msgspec.Struct, frozen=True):
    numa_node: int | None
    gpus: list[GpuId]
    cuda_visible_devices: CudaDevices
    cpus: CpuList | None


class Recommendations(msgspec.Struct, frozen=True):
    gpus: list[GpuRecommendation]
    numa_groups: list[NumaGroupEntry]


class ScanReport(msgspec.Struct, frozen=True, omit_defaults=True):
    """``topoagent scan --format json``. Schema version 1. Additive changes keep the version;
    breaking ones bump it.  Every field but ``paths_omitted`` is always present."""

    schema_version: Literal[1]
    tool: Tool
    host: Host
    sockets: list[SocketEntry]
    numa_nodes: list[NumaNodeEntry]
    host_bridges: list[HostBridgeEntry]
    devices: list[DeviceEntry]
    paths: Annotated[list[PathEntry], msgspec.Meta(description=(
        f"Every GPU-GPU and GPU-NIC pair of physical functions, a before b in device order; every NIC-NIC pair "
        f"too while the host has at most {NIC_PAIR_LIMIT} physical NICs (beyond, paths_omitted counts them)."
    ))]
    rails: list[RailEntry]
    findings: list[FindingEntry]
    recommendations: Recommendations
    probe_errors: list[ProbeError]
    paths_omitted: Annotated[PathsOmitted | None, msgspec.Meta(description=(
        "Present only when paths leaves pairs out: a host with more physical NICs than the limit."
    ))] = None


def str_or_none(value: object) -> str | None:
    """``str(value)``, or None for None (a CPU set that is unknown stays null in JSON)."""
    return None if value is None else str(value)


def _hex(value: int | None, width: int) -> str | None:
    return None if value is None else f"0x{value:0{width}x}"


def device_entry(d: Device, roles: Mapping[str, NicRole]) -> DeviceEntry:
    """One device as the contract's ``devices[]`` entry."""
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
        link=d.link,
        nic_role=roles.get(d.id),
        netdevs=list(d.netdevs),
        rdma_devices=list(d.rdma_devices),
        iommu_group=d.iommu_group,
        iommu_type=d.iommu_type,
        physfn=d.physfn,
        virtfns=list(d.virtfns),
        acs_control=list(d.config.acs.enabled()) if d.config and d.config.acs else None,
        notes=list(d.notes),
    )


def finding_entry(f: Finding) -> FindingEntry:
    """One finding as the contract's ``findings[]`` entry."""
    return FindingEntry(f.code, f.severity.label, list(f.subjects), f.message,  # type: ignore[arg-type]
                        [EvidenceEntry(e.path, e.value) for e in f.evidence], f.remedy)


def numa_entries(topo: Topology) -> list[NumaNodeEntry]:
    return [
        NumaNodeEntry(
            id=n.id,
            cpus=n.cpulist if n.cpus_known else None,
            socket=n.socket,
            memory_bytes=n.memory_bytes,
            distances=list(n.distances),
            cpu_less=n.cpu_less if n.cpus_known else None,
            nearest_cpu_node=n.nearest_cpu_node,
        )
        for n in topo.nodes
    ]


def report(result: ScanResult) -> ScanReport:
    """The scan as the JSON contract's object."""
    snap, topo = result.snapshot, result.topology
    return ScanReport(
        schema_version=SCHEMA_VERSION,
        tool=Tool("topoagent", __version__),
        host=Host(
            hostname=snap.hostname,
            root=snap.root,
            sources=list(snap.sources),
            virtualized=snap.virtualized,
            kernel_cmdline=snap.kernel_cmdline,
            allowed_cpus=str_or_none(snap.allowed_cpus),
            modules=list(snap.modules),
            memory_peers=list(snap.memory_peers),
            driver_version=snap.driver_version,
        ),
        sockets=[SocketEntry(s.id, list(s.nodes), str(s.cpus)) for s in topo.sockets],
        numa_nodes=numa_entries(topo),
        host_bridges=[HostBridgeEntry(h.name, h.numa_node, h.socket) for h in topo.host_bridges],
        devices=[device_entry(d, result.rails.roles) for d in topo.devices],
        paths=[PathEntry(p.a, p.b, p.token, p.pcie.name, p.nvlinks, p.same_socket,  # type: ignore[arg-type]
                         p.locality_known) for p in result.paths],
        rails=[RailEntry(r.gpu, r.nic, r.cls.name if r.cls is not None else None, list(r.nics),
                         list(r.shared_with)) for r in result.rails.rails],
        findings=[finding_entry(f) for f in result.findings],
        recommendations=Recommendations(
            gpus=[GpuRecommendation(g.gpu, g.bdf, g.numa_node, str_or_none(g.cpus), list(g.nics), dict(g.env),
                                    g.numactl) for g in result.plan.gpus],
            numa_groups=[NumaGroupEntry(n.numa_node, list(n.gpus), n.cuda_visible_devices, str_or_none(n.cpus))
                         for n in result.plan.numa_groups],
        ),
        probe_errors=list(snap.probe_errors),
        paths_omitted=paths_omitted(topo),
    )


def paths_omitted(topo: Topology) -> PathsOmitted | None:
    """The marker for the NIC-NIC pairs a scan left out (:func:`~topoagent.analysis.paths.scan_paths`), or None."""
    pairs = omitted_nic_pairs(topo)
    if not pairs:
        return None
    nics = sum(1 for d in paired_devices(topo) if d.kind is DeviceKind.NIC)
    return PathsOmitted(pairs, nics, NIC_PAIR_LIMIT,
                        f"{nics} physical NICs: NIC-NIC pairs are listed up to {NIC_PAIR_LIMIT} NICs "
                        "(the pairs grow as the square); GPU-GPU and GPU-NIC pairs are all listed")


def encode(doc: Any, *, pretty: bool = False) -> str:
    """A contract value (or plain data) as JSON text ending in a newline: one compact line, or
    indented by two spaces for people (``pretty``), as ``json.dumps(indent=2)`` wrote it."""
    data = msgspec.json.encode(doc, enc_hook=enc_hook)
    if pretty:
        data = msgspec.json.format(data, indent=2)
    return data.decode() + "\n"


def render(result: ScanResult, *, pretty: bool = False, **_: Any) -> str:
    """``scan --format json``: the JSON contract, one compact line (``pretty``: indented)."""
    return encode(report(result), pretty=pretty)
