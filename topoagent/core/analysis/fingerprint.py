"""What a host is meant to be (its hardware class) and the facts identical builds share (its
per-slot facts and their fingerprint), from a scan's topology, paths and rails.

A *slot* is a device's position, not its address: ``s<socket>.r<n>`` (the n-th root bus of
that socket, in bus order) then the device/function of each bridge down to the device
(``s0.r1/01.0/00.0/00.0/00.0``).  Bus numbers are left out because firmware renumbers them
when a card is added elsewhere; device/function numbers are wired on the board.

The facts of a slot (:class:`SlotFacts`) and of the host (:class:`Baseline`) are what must be
identical on identical builds; never serials, MACs, GUIDs, host names, timestamps or BDFs.
docs/fleet.md lists them.  :func:`fingerprint` hashes their canonical msgspec JSON.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import msgspec

from topoagent.core.analysis.paths import Path
from topoagent.core.analysis.rails import Rails
from topoagent.core.digest import short_sha256
from topoagent.core.pci import DeviceKind
from topoagent.core.topology import Device, Topology

__all__ = [
    "BASELINE_VERSION",
    "Baseline",
    "SlotFacts",
    "SlotLink",
    "baseline",
    "class_hash",
    "fingerprint",
    "hw_class",
    "slot_names",
]

BASELINE_VERSION: Literal[1] = 1


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
    #: A GPU's NVLink fabric clique (NVLink partition: NVML's ``nvmlDeviceGetGpuFabricInfoV``) once
    #: registered; None where NVML shows no fabric.  The cluster UUID is left out: it names the
    #: rack, so it differs between identical builds.
    fabric_clique: int | None = None


class Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """An expected topology (``topoagent baseline``): the slot facts of a good host.

    ``host`` says where it was taken (not compared).  Links are minimums (:class:`SlotLink`);
    every other fact must be equal.
    """

    schema_version: Literal[1] = BASELINE_VERSION
    host: str | None = None
    hw_class: str
    fingerprint: str
    #: GPUDirect RDMA's peer memory (``nvidia_peermem`` or ``/sys/kernel/mm/memory_peers``).
    peer_memory: bool | None
    slots: list[SlotFacts]


def _devfn(bdf: str) -> str:
    return bdf.rsplit(":", 1)[1]


def slot_names(topo: Topology) -> dict[str, str]:
    """Every device's slot name, by device id (a device without an address keeps its key)."""
    sockets = {h.name: h.socket for h in topo.host_bridges}
    order: dict[str, str] = {}
    per_socket: Counter[int | None] = Counter()
    for name in sorted(sockets):
        sock = sockets[name]
        order[name] = f"s{'?' if sock is None else sock}.r{per_socket[sock]}"
        per_socket[sock] += 1
    names: dict[str, str] = {}
    for d in topo.devices:
        if d.bdf is None or d.root_bus is None:
            names[d.id] = d.key
            continue
        root = order.get(d.root_bus) or d.root_bus
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
        link = d.link
        out.append(
            SlotFacts(
                slot=names[d.id],
                kind=d.kind,
                role=d.role.value if d.role is not None else None,
                model=_model(d),
                numa_node=d.numa_node,
                socket=d.socket,
                link=SlotLink(link.current_width, link.max_width, link.max_gts),
                acs=_acs(d),
                iommu=_iommu(topo, d),
                **gpu,  # type: ignore[arg-type]  # the GPU-only fields
            )
        )
    return sorted(out, key=lambda s: s.slot)


def hw_class(topo: Topology) -> str:
    """What the host is meant to be, readable: ``DMI vendor product / <n>x CPU model / gpu
    <models> / nic <models>`` (models as ``vendor:device``, each once: a host that lost a GPU
    stays in its class, where its fingerprint shows the loss)."""
    dmi = " ".join(t for t in (topo.dmi_vendor, topo.dmi_product) if t) or "unknown system"
    cpu = f"{len(topo.sockets)}x {topo.cpu_model or 'unknown CPU'}"
    parts = [dmi, cpu]
    for kind, label in ((DeviceKind.GPU, "gpu"), (DeviceKind.NIC, "nic")):
        models = sorted({m for d in topo.of_kind(kind) if not d.is_vf and (m := _model(d)) is not None})
        if models:
            parts.append(f"{label} {','.join(models)}")
    return " / ".join(parts)


def fingerprint(peer_memory: bool | None, slots: list[SlotFacts]) -> str:
    """The first 16 hex digits of the SHA-256 of the facts' canonical JSON (msgspec, fields in
    declaration order, slots sorted by name, defaults written out)."""
    return short_sha256(msgspec.json.encode({"peer_memory": peer_memory, "slots": slots}))


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
    return Baseline(
        host=topo.hostname,
        hw_class=hw_class(topo),
        fingerprint=fingerprint(peers, slots),
        peer_memory=peers,
        slots=slots,
    )


# -- reading expectations back ---------------------------------------------------------------


class HostView(msgspec.Struct, frozen=True):
    """The ``host`` object of a scan JSON or daemon ``state.json``, as far as the fleet reads it."""

    hostname: str | None = None
    hw_class: str | None = None
    fingerprint: str | None = None
    peer_memory: bool | None = None


class Head(msgspec.Struct, frozen=True):
    """What names a document's host, class and fingerprint: a scan JSON or ``state.json``
    (``host`` an object) or a baseline file (``host`` a string, the rest at the top).

    ``schema_version`` is required and must be one this build reads: all three documents are
    at version 1 (a ``2``, ``"banana"``, ``null`` or ``1.5`` is refused, not guessed at)."""

    schema_version: Literal[1]
    host: HostView | str | None = None
    hw_class: str | None = None
    fingerprint: str | None = None
    peer_memory: bool | None = None

    @property
    def name(self) -> str | None:
        """The host's name as the document gives it."""
        return self.host.hostname if isinstance(self.host, HostView) else self.host

    @property
    def identity(self) -> tuple[str | None, str | None, bool | None]:
        """Hardware class, fingerprint and peer memory, wherever the document keeps them."""
        if isinstance(self.host, HostView):
            return self.host.hw_class, self.host.fingerprint, self.host.peer_memory
        return self.hw_class, self.fingerprint, self.peer_memory


class Doc(Head, frozen=True):
    """A :class:`Head` and the slot facts."""

    slots: list[SlotFacts] | None = None


_HEAD = msgspec.json.Decoder(Head)
_DOC = msgspec.json.Decoder(Doc)


def read_head(data: bytes) -> Head:
    """A document's :class:`Head` (the rest is skipped, not decoded). Raises
    ``msgspec.DecodeError`` (or ``ValidationError``) for anything else."""
    return _HEAD.decode(data)


def read_expectation(data: bytes) -> Baseline:
    """A baseline file, a scan JSON or a daemon ``state.json`` as an expectation.

    Raises ``msgspec.DecodeError`` when the bytes are not such JSON, ``ValueError`` when they
    carry no slot facts (a scan JSON from before they were written)."""
    doc: Doc = _DOC.decode(data)
    hw, fp, peers = doc.identity
    if doc.slots is None or hw is None or fp is None:
        raise ValueError("no hw_class, fingerprint and slots: not a baseline, scan JSON or state.json with slot facts")
    return Baseline(host=doc.name, hw_class=hw, fingerprint=fp, peer_memory=peers, slots=doc.slots)
