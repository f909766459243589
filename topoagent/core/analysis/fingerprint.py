"""What a host is meant to be (its hardware class) and the facts identical builds share (its
CPU/NUMA shape, its per-slot facts and their fingerprint), from a scan's topology, paths and
rails.

A *slot* is a device's position, not its address: ``s<socket>.r<n>`` (the host's n-th root bus
in bus order, on that socket) then the device/function of each bridge down to the device
(``s0.r1/01.0/00.0/00.0/00.0``).  Bus numbers are left out because firmware renumbers them
when a card is added elsewhere; device/function numbers are wired on the board.  The root
bus's ordinal counts every root bus of the host, not those of its socket, so a root complex
that moves to the other socket renames only its own slots (``s0.r1`` -> ``s1.r1``).

The facts of a slot, of the host's CPUs and memory and of the host are the values of
:mod:`topoagent.core.baseline` (the document, its fingerprint and its decoder); this module
computes them from a scan.
"""

from __future__ import annotations

import math

from topoagent.core.analysis.paths import Path
from topoagent.core.analysis.rails import Rails
from topoagent.core.baseline import Baseline, HostShape, NodeShape, SlotFacts, SlotLink, fingerprint
from topoagent.core.digest import short_sha256
from topoagent.core.pci import DeviceKind
from topoagent.core.topology import Device, Topology

__all__ = [
    "baseline",
    "class_hash",
    "class_related",
    "host_shape",
    "hw_class",
    "slot_names",
]


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


def iommu_type(topo: Topology, d: Device) -> str | None:
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
                iommu=iommu_type(topo, d),
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
