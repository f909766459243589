"""What a host is meant to be (its hardware class) and the facts identical builds share (its
CPU/NUMA shape, its per-slot facts and their fingerprint), from a scan's topology, paths and
rails.

A *slot* is a device's position, not its address: ``s<socket>.r<n>`` (the host's n-th root bus
in bus order, on that socket) then the device/function of each bridge down to the device
(``s0.r1/01.0/00.0/00.0/00.0``).  Bus numbers are left out because firmware renumbers them
when a card is added elsewhere; device/function numbers are wired on the board.  The root
bus's ordinal counts every root bus of the host, not those of its socket, so a root complex
that moves to the other socket renames only its own slots (``s0.r1`` -> ``s1.r1``).

The facts of a slot (:class:`SlotFacts`), of the host's CPUs and memory (:class:`HostShape`)
and of the host (:class:`Baseline`) are what must be identical on identical builds; never
serials, MACs, GUIDs, host names, timestamps or BDFs.  docs/fleet.md lists them.
:func:`fingerprint` hashes their canonical msgspec JSON.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec

from topoagent.core.analysis.paths import Path
from topoagent.core.analysis.rails import Rails
from topoagent.core.digest import short_sha256
from topoagent.core.pci import DeviceKind
from topoagent.core.topology import Device, Topology

__all__ = [
    "BASELINE_VERSION",
    "MAX_SLOTS",
    "Baseline",
    "HostShape",
    "NodeShape",
    "SlotFacts",
    "SlotLink",
    "baseline",
    "class_hash",
    "class_related",
    "fingerprint",
    "host_shape",
    "hw_class",
    "slot_names",
]

BASELINE_VERSION: Literal[1] = 1

#: The most slots one expectation may hold.  The largest hosts have a few hundred physical PCI
#: functions (a DGX H100: 97; the 8,000-function tree of benchmarks/gen_tree.py is a stress
#: test); a document with more is refused before its slots are compared (issue 31: 520,000
#: slots took ``scan --expect`` half a minute and 1.4 GB).
MAX_SLOTS = 16384


class SlotLink(msgspec.Struct, frozen=True):
    """A slot's PCIe link: the width it trained to and what the link can do.

    The current *speed* is left out: GPUs and NICs drop to 2.5 GT/s when idle to save power.
    In a baseline these are minimums: a scan must train to at least ``width`` lanes, and be
    capable of at least ``max_gts`` and ``max_width``.
    """

    width: int | None
    max_width: int | None
    max_gts: float | None


class SlotFacts(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The facts of one slot that identical builds share (docs/fleet.md)."""

    slot: str
    kind: DeviceKind
    #: A bridge's role (``root_port``, ``switch_upstream`` ...), else None.
    role: str | None = None
    #: ``vendor:device`` in hex (``10de:2330``).
    model: str | None
    numa_node: int | None
    socket: int | None
    link: SlotLink
    #: ACS control bits set (lspci's names); ``[]`` none (or no ACS capability), None unknown
    #: (extended config space unreadable: a scan without root).
    acs: list[str] | None = None
    #: The IOMMU domain type of the device's group (``identity``, ``DMA`` ...); ``none`` when a
    #: host tree shows the device in no IOMMU group (no IOMMU translates it); None unknown
    #: (pasted output, or a kernel without the group's ``type`` file).
    iommu: str | None = None
    #: A GPU's NVLinks to the other GPUs, in all; None for other kinds.
    nvlinks: int | None = None
    #: A GPU's primary rail NIC (by slot) and the path class to it.
    rail: str | None = None
    rail_path: str | None = None
    #: A GPU's path class to every physical NIC, by the NIC's slot.
    nic_paths: dict[str, str] | None = None
    #: Listed by sysfs but no longer answering config reads (FELL_OFF_BUS: its link registers
    #: read all ones, a width of 63); its link facts are then unknown.  Left out when false,
    #: so a healthy slot's facts (and fingerprint) do not mention it.
    fell_off_bus: bool = False
    #: A GPU's NVLink fabric clique (NVLink partition: NVML's ``nvmlDeviceGetGpuFabricInfoV``) once
    #: registered; None where NVML shows no fabric.  The cluster UUID is left out: it names the
    #: rack, so it differs between identical builds.
    fabric_clique: int | None = None


class NodeShape(msgspec.Struct, frozen=True):
    """One NUMA node as identical builds share it: its socket, how many CPUs it has online and
    its memory in GiB, rounded (:func:`memory_gib`) so that what the kernel reserves (a crash
    kernel, firmware tables) does not change it while a missing DIMM does."""

    id: int
    socket: int | None
    cpus: int
    memory_gib: int | None


class HostShape(msgspec.Struct, frozen=True, kw_only=True):
    """The host's CPUs and memory as identical builds share them (docs/fleet.md): CPU model,
    sockets, physical cores and threads per core (SMT), and the NUMA layout (the nodes of each
    socket: SNC/NPS) with each node's CPUs and memory."""

    cpu: str | None
    sockets: int
    #: Physical cores (CPUs that share no thread siblings list), all sockets; None unknown.
    cores: int | None
    #: Hardware threads per core (1: SMT off or absent); None unknown.
    threads_per_core: int | None
    nodes: list[NodeShape]


class Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """An expected topology (``topoagent baseline``): the slot facts of a good host.

    ``host`` says where it was taken (not compared).  Links are minimums (:class:`SlotLink`);
    every other fact must be equal.  ``shape`` is None in a document written before it was
    recorded (unknown: not compared).
    """

    schema_version: Literal[1] = BASELINE_VERSION
    host: str | None = None
    hw_class: str
    fingerprint: str
    #: GPUDirect RDMA's peer memory (``nvidia_peermem`` or ``/sys/kernel/mm/memory_peers``).
    peer_memory: bool | None
    shape: HostShape | None = None
    slots: Annotated[list[SlotFacts], msgspec.Meta(max_length=MAX_SLOTS)]


def _devfn(bdf: str) -> str:
    return bdf.rsplit(":", 1)[1]


def slot_names(topo: Topology) -> dict[str, str]:
    """Every device's slot name, by device id (a device without an address keeps its key).

    Root buses are numbered across the host in bus order (``r0`` the lowest), not per socket:
    a host bridge that firmware puts on the other socket keeps its ordinal, and so do all the
    others (numbered per socket, one move renamed every later root bus of both sockets)."""
    roots: dict[str, str] = {}
    for n, h in enumerate(sorted(topo.host_bridges, key=lambda h: h.name)):
        roots[h.name] = f"s{'?' if h.socket is None else h.socket}.r{n}"
    names: dict[str, str] = {}
    for d in topo.devices:
        if d.bdf is None or d.root_bus is None:
            names[d.id] = d.key
            continue
        root = roots.get(d.root_bus) or d.root_bus
        names[d.id] = "/".join((root, *(_devfn(a) for a in d.ancestors), _devfn(d.bdf)))
    return names


def _model(d: Device) -> str | None:
    if d.vendor_id is None or d.device_id is None:
        return None
    return f"{d.vendor_id:04x}:{d.device_id:04x}"


def _acs(d: Device) -> list[str] | None:
    """The ACS control bits set: ``[]`` where none are or the device has no ACS capability in
    a readable extended config space; None where that space is unreadable (a scan without
    root reads only the 64-byte header), so unknown is never taken for none."""
    cfg = d.config
    if cfg is not None and cfg.acs is not None:
        return list(cfg.acs.enabled())
    return [] if cfg is not None and cfg.extended_readable else None


def _iommu(topo: Topology, d: Device) -> str | None:
    """The IOMMU domain type of the device's group; ``none`` where a host tree shows it in no
    group (sysfs links ``iommu_group`` only for a device an IOMMU translates); None where that
    is unknown -- pasted output says nothing of IOMMUs, and kernels before 5.11 write no group
    ``type`` file -- so unknown is never taken for none, as :func:`_acs` does for ACS."""
    if d.iommu_type is not None:
        return d.iommu_type
    return "none" if topo.from_host_tree and d.iommu_group is None else None


def _clique(d: Device) -> int | None:
    """A GPU's NVLink fabric clique once its registration succeeded, else None."""
    fabric = d.nvml.fabric if d.nvml is not None else None
    return fabric.clique_id if fabric is not None and fabric.ready else None


def slot_facts(topo: Topology, paths: tuple[Path, ...], rails: Rails) -> list[SlotFacts]:
    """The facts of every physical device's slot, in slot order (SR-IOV VFs are configuration,
    not build, and are left out)."""
    names = slot_names(topo)
    nics = [n for n in topo.nics if not n.is_vf]
    by_pair = {(p.a, p.b): p for p in paths}

    def path(a: str, b: str) -> Path | None:
        return by_pair.get((a, b)) or by_pair.get((b, a))

    by_id = topo.index.by_id  # once: read per GPU and path below
    out = []
    for d in topo.devices:
        if d.is_vf:
            continue
        gpu: dict[str, object] = {}
        if d.kind is DeviceKind.GPU:
            links = [
                p.nvlinks
                for p in paths
                if d.id in (p.a, p.b) and (by_id.get(p.b if p.a == d.id else p.a) or d).kind is DeviceKind.GPU
            ]
            rail = rails.rail(d.id)
            # a path no source shows (a partial paste) is left out: its class is unknown, not a fact
            nic_paths = {names[n.id]: p.token for n in nics if (p := path(d.id, n.id)) is not None and p.shown}
            gpu = {
                # NVLinks are known only from NVML: without it, unknown rather than none
                "nvlinks": sum(links) if d.nvml is not None else None,
                "rail": names.get(rail.nic) if rail is not None and rail.nic is not None else None,
                "rail_path": rail.cls.name if rail is not None and rail.cls is not None else None,
                "nic_paths": dict(sorted(nic_paths.items())),
                "fabric_clique": _clique(d),
            }
        out.append(
            SlotFacts(
                slot=names[d.id],
                kind=d.kind,
                role=d.role.value if d.role is not None else None,
                model=_model(d),
                numa_node=d.numa_node,
                socket=d.socket,
                link=_link(d),
                acs=_acs(d),
                iommu=_iommu(topo, d),
                fell_off_bus=d.fell_off_bus,
                **gpu,  # type: ignore[arg-type]  # the GPU-only fields
            )
        )
    return sorted(out, key=lambda s: s.slot)


_UNKNOWN_LINK = SlotLink(None, None, None)


def _link(d: Device) -> SlotLink:
    """A slot's link facts; unknown for a device that fell off the bus: the kernel computes
    its link files from registers that now read all ones (a width of 63 passes any minimum)."""
    if d.fell_off_bus:
        return _UNKNOWN_LINK
    link = d.link
    return SlotLink(link.current_width, link.max_width, link.max_gts)


def system_name(topo: Topology) -> str:
    """The board the host is: DMI vendor and product (x86), else what the kernel says where
    there is no DMI (the device tree's ``model`` on arm64 and POWER, cpuinfo's ``machine``);
    ``unknown system`` where nothing says (pasted output)."""
    dmi = " ".join(t for t in (topo.dmi_vendor, topo.dmi_product) if t)
    return dmi or topo.system_model or UNKNOWN_SYSTEM


#: The parts of a class that nothing read: they match any value (:func:`class_related`).
UNKNOWN_SYSTEM = "unknown system"
UNKNOWN_CPU = "unknown CPU"


def hw_class(topo: Topology) -> str:
    """What the host is meant to be, readable: ``<system> / <n>x <CPU model> / gpu <models>``
    (GPU models as ``vendor:device``, each once).

    By board, CPUs and GPU models only, never the full device set: a host that lost a device
    -- a GPU, its only InfiniBand HCA, its management NIC -- stays in its class, where its
    fingerprint shows the loss (issue 32: NIC models in the class made such a host the
    majority of a class of its own).  Only the loss of every GPU of a model changes it, and
    ``fleet`` compares such a class with the one it is that class less one model
    (:func:`class_related`)."""
    parts = [system_name(topo), f"{len(topo.sockets)}x {topo.cpu_model or UNKNOWN_CPU}"]
    models = sorted({m for d in topo.of_kind(DeviceKind.GPU) if not d.is_vf and (m := _model(d)) is not None})
    if models:
        parts.append(f"gpu {','.join(models)}")
    return " / ".join(parts)


def _class_parts(hw: str) -> tuple[str, str, frozenset[str]] | None:
    """System, ``<n>x CPU`` and GPU models of a class string; None where it is not one."""
    parts = hw.split(" / ")
    if len(parts) < 2:
        return None
    gpus: frozenset[str] = frozenset()
    if len(parts) > 2 and parts[2].startswith("gpu "):
        gpus = frozenset(parts[2][4:].split(","))
    return parts[0], parts[1], gpus


def _same_or_unknown(a: str, b: str, unknown: str) -> bool:
    return a == b or unknown in (a, b)


def class_related(small: str, big: str) -> bool:
    """Whether hosts of class ``small`` are hosts of class ``big`` that lost something or
    were read with less: every part equal or unknown on one side (``unknown system``; ``2x
    unknown CPU`` against ``2x AMD EPYC 9654``: a capture made before the CPU's name was
    kept), and the GPU models those of ``big`` or ``big``'s less one model (the last GPU of a
    model lost).  ``fleet`` compares such a class with ``big``'s hosts."""
    a, b = _class_parts(small), _class_parts(big)
    if a is None or b is None:
        return small == big
    (sys_a, cpu_a, gpu_a), (sys_b, cpu_b, gpu_b) = a, b
    count_a, _, model_a = cpu_a.partition("x ")
    count_b, _, model_b = cpu_b.partition("x ")
    return (
        _same_or_unknown(sys_a, sys_b, UNKNOWN_SYSTEM)
        and count_a == count_b
        and _same_or_unknown(model_a, model_b, UNKNOWN_CPU)
        and gpu_a <= gpu_b
        and len(gpu_b - gpu_a) <= 1
    )


def memory_gib(size: int | None) -> int | None:
    """A node's memory in GiB, rounded to a sixteenth of itself (to a power of two GiB, at
    least 1): ``MemTotal`` is what is installed less what the kernel and firmware keep (a
    crash kernel takes up to a few GiB of node 0), which varies between boots and kernels by
    far less than a sixteenth, while a lost DIMM of sixteen takes that much."""
    if size is None or size <= 0:
        return None
    gib = size / 2**30
    step = 2 ** max(0, math.floor(math.log2(gib / 16))) if gib >= 16 else 1
    return round(gib / step) * step


def host_shape(topo: Topology) -> HostShape | None:
    """The host's CPU/NUMA shape; None where no host tree was read (pasted output names
    neither cores nor memory)."""
    if not topo.from_host_tree:
        return None
    cpus = topo.cpus
    cores: set[object] = set()
    threads = 0
    known = bool(cpus)
    for c in cpus:
        if c.siblings is None:
            known = False
            break
        cores.add(c.siblings)
        threads = max(threads, len(c.siblings))
    return HostShape(
        cpu=topo.cpu_model,
        sockets=len(topo.sockets),
        cores=len(cores) if known else None,
        threads_per_core=threads if known else None,
        nodes=[
            NodeShape(n.id, n.socket, len(n.cpus) if n.cpus_known else 0, memory_gib(n.memory_bytes))
            for n in topo.nodes
        ],
    )


def fingerprint(peer_memory: bool | None, slots: list[SlotFacts], shape: HostShape | None = None) -> str:
    """The first 16 hex digits of the SHA-256 of the facts' canonical JSON: msgspec's encoding
    of ``{"peer_memory": ..., "shape": ..., "slots": [...]}`` (fields in declaration order,
    slots sorted by name, a slot's default values left out)."""
    return fingerprint_of(peer_memory, shape, msgspec.json.encode(slots))


def fingerprint_of(peer_memory: bool | None, shape: HostShape | None, slots_json: bytes) -> str:
    """:func:`fingerprint` of slots already encoded (``msgspec.json.encode(slots)``): the fleet
    encodes each distinct slot list once, however many hosts share it."""
    enc = msgspec.json.encode
    return short_sha256(
        b'{"peer_memory":' + enc(peer_memory) + b',"shape":' + enc(shape) + b',"slots":' + slots_json + b"}"
    )


def class_hash(hw_class: str) -> str:
    """A hardware class as 16 hex digits (SHA-256 of its string): for a Kubernetes label value,
    which cannot hold the readable string."""
    return short_sha256(hw_class.encode())


def peer_memory(topo: Topology) -> bool | None:
    """Whether GPUDirect RDMA's peer memory is there (None from pasted output: unknown)."""
    return topo.peer_memory


def baseline(topo: Topology, paths: tuple[Path, ...], rails: Rails) -> Baseline:
    """The host's class, fingerprint and slot facts: its expected topology."""
    slots = slot_facts(topo, paths, rails)
    peers = peer_memory(topo)
    shape = host_shape(topo)
    return Baseline(
        host=topo.hostname,
        hw_class=hw_class(topo),
        fingerprint=fingerprint(peers, slots, shape),
        peer_memory=peers,
        shape=shape,
        slots=slots,
    )


# -- reading expectations back ---------------------------------------------------------------


class HostView(msgspec.Struct, frozen=True):
    """The ``host`` object of a scan JSON or daemon ``state.json``, as far as the fleet reads it."""

    hostname: str | None = None
    hw_class: str | None = None
    fingerprint: str | None = None
    peer_memory: bool | None = None
    shape: HostShape | None = None


class FindingView(msgspec.Struct, frozen=True):
    """A finding of a scan JSON or ``state.json`` as the fleet shows it (its evidence and remedy
    are skipped, not decoded)."""

    code: str
    severity: str
    subjects: list[str]
    message: str


class Head(msgspec.Struct, frozen=True):
    """What names a document's host and class: a scan JSON or ``state.json`` (``host`` an
    object) or a baseline file (``host`` a string, the rest at the top), and the findings the
    host raised itself.

    ``schema_version`` is required and must be one this build reads: all three documents are
    at version 1 (a ``2``, ``"banana"``, ``null`` or ``1.5`` is refused, not guessed at)."""

    schema_version: Literal[1]
    host: HostView | str | None = None
    hw_class: str | None = None
    fingerprint: str | None = None
    peer_memory: bool | None = None
    shape: HostShape | None = None
    findings: list[FindingView] = []

    @property
    def name(self) -> str | None:
        """The host's name as the document gives it."""
        return self.host.hostname if isinstance(self.host, HostView) else self.host

    @property
    def identity(self) -> tuple[str | None, bool | None, HostShape | None]:
        """Hardware class, peer memory and CPU/NUMA shape, wherever the document keeps them
        (the fingerprint it states is not trusted: :func:`read_expectation` recomputes it)."""
        if isinstance(self.host, HostView):
            return self.host.hw_class, self.host.peer_memory, self.host.shape
        return self.hw_class, self.peer_memory, self.shape


#: A document's slot facts.
Slots = list[SlotFacts]


class RawDoc(Head, frozen=True):
    """A :class:`Head` and the slot facts undecoded (the fleet decodes each distinct list once)."""

    raw_slots: msgspec.Raw = msgspec.field(name="slots", default_factory=msgspec.Raw)

    @property
    def slots(self) -> bytes | None:
        """The slot facts' JSON; None where the document has none (or ``null``)."""
        raw = bytes(self.raw_slots)
        return None if raw in (b"", b"null") else raw


_RAW = msgspec.json.Decoder(RawDoc)
#: The slots counted before they are decoded: a list of raw values costs a tenth of what a
#: list of slots does, and nothing is built for a document that holds too many.
_COUNT = msgspec.json.Decoder(Annotated[list[msgspec.Raw], msgspec.Meta(max_length=MAX_SLOTS)])
_SLOTS = msgspec.json.Decoder(Slots)

NO_SLOTS = "no hw_class and slots: not a baseline, scan JSON or state.json with slot facts"


def read_head(data: bytes) -> RawDoc:
    """A document's :class:`Head` with its slots undecoded (the rest is skipped).  Raises
    ``msgspec.DecodeError`` (or ``ValidationError``) for anything else."""
    return _RAW.decode(data)


def decode_slots(raw: bytes) -> list[SlotFacts]:
    """Slot facts from their JSON; ``msgspec.ValidationError`` past :data:`MAX_SLOTS` (checked
    before any is decoded) or for anything that is not slot facts."""
    _COUNT.decode(raw)
    return _SLOTS.decode(raw)


def read_expectation(data: bytes) -> Baseline:
    """A baseline file, a scan JSON or a daemon ``state.json`` as an expectation, its
    fingerprint computed from the facts it holds (the one the document states is not trusted:
    a file could claim another host's).

    Raises ``msgspec.DecodeError`` when the bytes are not such JSON (or hold more than
    :data:`MAX_SLOTS` slots), ``ValueError`` when they carry no slot facts (a scan JSON from
    before they were written)."""
    doc = read_head(data)
    hw, peers, shape = doc.identity
    raw = doc.slots
    if raw is None or hw is None:
        raise ValueError(NO_SLOTS)
    slots = decode_slots(raw)
    return Baseline(
        host=doc.name,
        hw_class=hw,
        fingerprint=fingerprint(peers, slots, shape),
        peer_memory=peers,
        shape=shape,
        slots=slots,
    )
