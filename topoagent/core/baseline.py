"""The expected-topology document (``topoagent baseline``): the facts of a host that identical
builds share -- its slots' (:class:`SlotFacts`), its CPUs' and memory's (:class:`HostShape`) --
their fingerprint, and how a baseline, a scan JSON or a daemon ``state.json`` is read back as
one (:func:`read_expectation`).

A value and its decoder only: a reader (``--expect``, the daemon's configuration, ``fleet``)
reads a document without the analysis, which computes these facts from a scan
(:mod:`topoagent.core.analysis.fingerprint`).  Never serials, MACs, GUIDs, host names,
timestamps or BDFs; docs/fleet.md lists the facts.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from topoagent.core.digest import short_sha256
from topoagent.core.pci import DeviceKind

__all__ = [
    "BASELINE_VERSION",
    "MAX_SLOTS",
    "NO_SLOTS",
    "Baseline",
    "FindingView",
    "HostShape",
    "NodeShape",
    "RawDoc",
    "SlotFacts",
    "SlotLink",
    "decode_slots",
    "fingerprint",
    "fingerprint_of",
    "read_expectation",
    "read_head",
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
