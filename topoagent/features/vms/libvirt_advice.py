"""NUMA affinity for libvirt domains with passthrough devices: the verdict, the settings to
write, and (with ``pin``) the vCPU pins.  Pure; the XML to paste is rendered by the ``xml``
argument of :func:`advise_domain` (:mod:`topoagent.features.vms.libvirt_xml`), so this layer never
imports an output.  What the verdicts mean: :mod:`topoagent.features.vms.advice`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from topoagent.core.advice.cores import cores_in
from topoagent.core.cpuset import CpuSet
from topoagent.core.frozen import FrozenMap
from topoagent.features.vms.advice import (
    Affinity,
    HostView,
    Verdict,
    VmAdvice,
    device_nodes,
    join_device,
    node_cpus_for_vms,
    nodes_text,
    split_plan,
)
from topoagent.features.vms.domain import parse_libvirt_set

if TYPE_CHECKING:
    from topoagent.features.vms.domain import Domain

__all__ = ["LibvirtXml", "advise_domain", "pins_outside"]


class LibvirtXml(Protocol):
    """What renders the XML of a recommendation (:mod:`topoagent.features.vms.libvirt_xml`)."""

    def affinity_xml(self, dom: Domain, aff: Affinity) -> str:
        """The ``<vcpu>``, ``<cputune>`` and ``<numatune>`` elements that set ``aff``."""
        ...

    def cells_xml(self, vcpus: int, memory: int | None, nodes: tuple[int, ...], shares: tuple[int, ...]) -> str:
        """The guest NUMA cells (``<cpu><numa>``) of ``shares`` vCPUs and their ``<numatune>``."""
        ...


def _kvm_current(dom: Domain) -> dict[str, str]:
    cur: dict[str, str] = {}
    if dom.vcpu_placement:
        cur["vcpu.placement"] = dom.vcpu_placement
    if dom.vcpu_cpuset:
        cur["vcpu.cpuset"] = dom.vcpu_cpuset
    if dom.numatune_mode:
        cur["numatune.memory.mode"] = dom.numatune_mode
    if dom.numatune_nodeset:
        cur["numatune.memory.nodeset"] = dom.numatune_nodeset
    if dom.numatune_placement:
        cur["numatune.memory.placement"] = dom.numatune_placement
    for m in dom.memnodes:
        cur[f"numatune.memnode.{m.cellid}"] = f"{m.mode or 'strict'}:{m.nodeset}"
    for p in dom.vcpupins:
        cur[f"cputune.vcpupin.{p.id}"] = p.cpuset
    if dom.emulatorpin:
        cur["cputune.emulatorpin"] = dom.emulatorpin
    for p in dom.iothreadpins:
        cur[f"cputune.iothreadpin.{p.id}"] = p.cpuset
    return cur


def _kvm_verdict(dom: Domain, node: int, host: HostView) -> tuple[Verdict, list[str]]:
    auto = dom.numatune_placement == "auto" or (dom.vcpu_placement == "auto" and not dom.numatune_nodeset)
    mem: set[int] = set()
    if not auto and dom.numatune_nodeset:
        mem |= set(parse_libvirt_set(dom.numatune_nodeset, what="nodeset"))
    for m in dom.memnodes:
        mem |= set(parse_libvirt_set(m.nodeset, what="nodeset"))
    node_cpus = host.node_cpus.get(node)
    pins = {p.id: parse_libvirt_set(p.cpuset) for p in dom.vcpupins}
    base = parse_libvirt_set(dom.vcpu_cpuset) if dom.vcpu_cpuset and dom.vcpu_placement != "auto" else None
    count = dom.vcpus or 0
    # Each vCPU runs where its vcpupin says, else where the domain's cpuset says (None: anywhere).
    # Worked out over the pins, never over the vCPU count (a number from the XML).
    pinned = [cpus for vcpu, cpus in pins.items() if 0 <= vcpu < count]
    per_vcpu = pinned + ([base] if len(pinned) < max(count, 1) else [])
    floating = any(c is None for c in per_vcpu)
    used = CpuSet().union(*(c for c in per_vcpu if c is not None))

    reasons = []
    if mem and mem != {node}:
        reasons.append(f"memory is bound to node {nodes_text(sorted(mem))}")
    if used and node_cpus and not used <= node_cpus:
        reasons.append(f"vCPUs may run on CPUs {used - node_cpus} outside node {node}")
    if reasons:
        return Verdict.MISALIGNED, reasons
    if auto:
        return Verdict.UNSET, ["placement is 'auto' (numad picks a node at start, not necessarily the devices')"]
    missing = []
    if not mem:
        missing.append("memory is not bound to a node")
    if floating or not used:
        missing.append("vCPUs are not confined to a node")
    elif not node_cpus:
        missing.append(f"node {node}'s CPUs are unknown")
    if missing:
        return Verdict.UNSET, missing
    return Verdict.ALIGNED, []


def pins_outside(dom: Domain, cpus: CpuSet) -> list[str]:
    """The domain's vcpupin/emulatorpin/iothreadpin entries that reach outside ``cpus``."""
    if not cpus:
        return []
    out = [f"vcpupin {p.id} ({p.cpuset})" for p in dom.vcpupins if not parse_libvirt_set(p.cpuset) <= cpus]
    if dom.emulatorpin and not parse_libvirt_set(dom.emulatorpin) <= cpus:
        out.append(f"emulatorpin ({dom.emulatorpin})")
    out += [f"iothreadpin {p.id} ({p.cpuset})" for p in dom.iothreadpins if not parse_libvirt_set(p.cpuset) <= cpus]
    return out


def _pin_order(cpus: CpuSet, cores: tuple[CpuSet, ...]) -> list[int]:
    """CPUs in the order vCPUs get them: one thread of every core first, then the siblings."""
    groups = sorted((list(c) for c in cores_in(cores, cpus)), key=lambda g: g[0])
    order: list[int] = []
    depth = max(len(g) for g in groups)
    for t in range(depth):
        order.extend(g[t] for g in groups if len(g) > t)
    return order


def _kvm_affinity(
    dom: Domain, nodes: tuple[int, ...], host: HostView, *, pin: bool, reserve_cores: int, notes: list[str]
) -> Affinity | None:
    """The settings for the VM on ``nodes`` (one, or one per guest cell); None when they
    cannot be made (CPU-less node, a multi-node VM without matching guest cells)."""
    avail = {}
    kept = {}
    for n in nodes:
        avail[n], kept[n] = node_cpus_for_vms(host, n, reserve_cores)
        if not avail[n]:
            notes.append(f"node {n}'s CPUs are unknown or it has none: no CPU set to recommend")
            return None
    cpuset = CpuSet().union(*avail.values())
    vcpus = dom.vcpus or 0
    mode = "strict"
    memnodes: tuple[tuple[int, int], ...] = ()
    cells = sorted(dom.cells, key=lambda c: c.id)
    if len(nodes) > 1:
        if len(cells) != len(nodes):
            return None
        memnodes = tuple((c.id, n) for c, n in zip(cells, nodes, strict=True))
    else:
        node = nodes[0]
        mem = host.node_memory.get(node)
        if dom.memory_bytes and mem and dom.memory_bytes > mem:
            mode = "preferred"
            notes.append(
                f"the VM's {dom.memory_bytes >> 30} GiB exceed node {node}'s {mem >> 30} GiB: "
                f"memory mode 'preferred' (strict would fail to allocate)"
            )
        if vcpus > len(avail[node]):
            notes.append(f"{vcpus} vCPUs on node {node}'s {len(avail[node])} CPUs: vCPUs will share CPUs")
    pins = None
    emulator = None
    if pin:
        pin_list = []
        if len(nodes) > 1:
            for c, n in zip(cells, nodes, strict=True):
                order = _pin_order(avail[n], host.cores)
                for j, v in enumerate(sorted(parse_libvirt_set(c.cpus))):
                    pin_list.append((v, CpuSet((order[j % len(order)],))))
        else:
            order = _pin_order(avail[nodes[0]], host.cores)
            pin_list = [(v, CpuSet((order[v % len(order)],))) for v in range(vcpus)]
        pins = tuple(sorted(pin_list))
        reserved = CpuSet().union(*kept.values())
        # Emulator (I/O) threads: on the host's reserved cores of the same node(s) when there
        # are some, so they stay near the devices without taking a vCPU's CPU.
        emulator = reserved if reserved else cpuset
    elif len(nodes) > 1:
        # Without --pin a split VM still needs each cell's vCPUs on its cell's host node: the
        # domain-wide <vcpu cpuset> spans every node, so a cell whose memory is bound to node 0
        # would run anywhere.  Each vCPU gets its cell's whole node (the host scheduler still
        # balances inside it); libvirt's <vcpupin> overrides <vcpu cpuset> per vCPU
        # (https://libvirt.org/formatdomain.html#cpu-tuning).
        pins = tuple(
            sorted((v, avail[n]) for c, n in zip(cells, nodes, strict=True) for v in parse_libvirt_set(c.cpus))
        )
    return Affinity(cpuset, nodes, mode, memnodes, pins, emulator)


def _kvm_settings(aff: Affinity) -> dict[str, str]:
    rec = {
        "vcpu.placement": "static",
        "vcpu.cpuset": str(aff.cpuset),
        "numatune.memory.mode": aff.mem_mode,
        "numatune.memory.nodeset": aff.nodeset,
    }
    for cell, node in aff.memnodes:
        rec[f"numatune.memnode.{cell}"] = f"strict:{node}"
    if aff.vcpupins is not None:
        for v, cpus in aff.vcpupins:
            rec[f"cputune.vcpupin.{v}"] = str(cpus)
        if aff.emulatorpin is not None:
            rec["cputune.emulatorpin"] = str(aff.emulatorpin)
    return rec


def advise_domain(
    dom: Domain, state: str, host: HostView, *, pin: bool = False, reserve_cores: int = 0, xml: LibvirtXml | None = None
) -> VmAdvice | None:
    """Verdict and recommendation for a libvirt domain; None when it has no PCI passthrough.
    The snippet is the XML ``xml`` renders (none without it)."""
    if not dom.hostdevs:
        return None
    devices = tuple(join_device(h.bdf, h.bdf, host) for h in dom.hostdevs)
    current = _kvm_current(dom)
    notes = [d.note for d in devices if d.note]
    nodes = device_nodes(devices)
    affinity = None
    recommend: dict[str, str] = {}
    snippet = ""
    if nodes is None:
        verdict = Verdict.UNKNOWN
        notes.append("nothing recommended: a device's NUMA node is unknown (never guessed)")
    elif len(nodes) == 1:
        verdict, reasons = _kvm_verdict(dom, nodes[0], host)
        notes += reasons
        affinity = _kvm_affinity(dom, nodes, host, pin=pin, reserve_cores=reserve_cores, notes=notes)
        if affinity is not None and (verdict is not Verdict.ALIGNED or pin):
            target = _kvm_settings(affinity)
            if verdict is Verdict.ALIGNED:  # only the pins are new
                target = {k: v for k, v in target.items() if k.startswith("cputune.") and current.get(k) != v}
            recommend = target
            snippet = xml.affinity_xml(dom, affinity) if recommend and xml is not None else ""
        if not recommend:
            affinity = None
        elif not pin:
            stale = pins_outside(dom, CpuSet().union(*(host.node_cpus.get(n, CpuSet()) for n in nodes)))
            if stale:
                notes.append(
                    f"{', '.join(stale)} lie outside node {nodes[0]}'s CPUs and would override the "
                    f"cpuset: remove them, or use --pin to replace them"
                )
    else:
        verdict = Verdict.SPLIT
        fits, why, shares = split_plan(dom.vcpus, dom.memory_bytes, nodes, host, reserve_cores)
        notes.append(f"devices on nodes {nodes_text(nodes)}: {why}")
        if fits and len(dom.cells) == len(nodes):
            affinity = _kvm_affinity(dom, nodes, host, pin=pin, reserve_cores=reserve_cores, notes=notes)
            if affinity is not None:
                recommend = _kvm_settings(affinity)
                snippet = xml.affinity_xml(dom, affinity) if xml is not None else ""
        elif fits:
            notes.append(
                f"the guest has {len(dom.cells)} NUMA cells: define {len(nodes)} "
                f"(<cpu><numa>) first; --apply edits only the affinity elements"
            )
            recommend = {
                "cpu.numa.cells": "+".join(str(s) for s in shares),
                "numatune.memory.mode": "strict",
                "numatune.memory.nodeset": nodes_text(nodes),
            }
            recommend.update({f"numatune.memnode.{i}": f"strict:{n}" for i, n in enumerate(nodes)})
            snippet = xml.cells_xml(dom.vcpus or 0, dom.memory_bytes, nodes, shares) if xml is not None else ""
        else:
            notes.append("give the VM devices of one node, or split it into one VM per node")
    return VmAdvice(
        dom.name,
        state,
        "kvm",
        dom.vcpus,
        dom.memory_bytes,
        devices,
        FrozenMap(current),
        verdict,
        FrozenMap(recommend),
        snippet,
        affinity,
        tuple(notes),
    )
