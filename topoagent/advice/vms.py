"""NUMA affinity for VMs with passthrough devices: verdicts and the settings to write.  Pure.

A GPU or NIC passed through to a VM does its DMA to the VM's memory, and its interrupts and
driver threads run on the VM's vCPUs: when those sit on another NUMA node than the device,
every transfer crosses the socket interconnect.  For each VM with PCI passthrough devices this
module joins the devices with the host (a scan's topology and rails, or ESXi's
``esxcli hardware pci list``), and says:

- ``aligned``: memory and vCPUs are confined to the devices' node;
- ``unset``: nothing confines them (or only one of the two), so the scheduler may put them anywhere;
- ``misaligned``: a setting points at another node;
- ``split``: the devices sit on several nodes -- which split of the vCPUs (one guest NUMA cell
  per node) would fit, or that none does;
- ``unknown``: a device's node is unknown (``numa_node`` = -1, not on this host, chosen at
  power-on).  Nothing is recommended then: an unknown node is never guessed as 0.

The recommendation is NUMA affinity first -- libvirt ``<vcpu placement='static' cpuset=…>``
(the node's CPUs less ``reserve_cores`` cores kept for the host) and ``<numatune><memory
mode='strict' nodeset=…>`` (``<memnode>`` per guest cell when the VM spans nodes); VMware
``numa.nodeAffinity``.  Per-vCPU pinning (``vcpupin``/``emulatorpin``) only when asked
(``pin``): it stops the host scheduler from balancing vCPUs inside the node, lets one busy
host thread stall a vCPU, and must be redone when the VM is resized (the reasons VMware's
performance guides give for preferring NUMA affinity to CPU affinity; they hold for KVM too).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from topoagent.cpuset import CpuSet
from topoagent.errors import InputError
from topoagent.frozen import FrozenMap
from topoagent.records import field, record

if TYPE_CHECKING:
    from topoagent.analysis.rails import RailPlan
    from topoagent.parsers.esxcli import EsxPciDevice
    from topoagent.parsers.libvirt_domain import Domain
    from topoagent.parsers.vmx import VmxConfig
    from topoagent.topology import Topology

__all__ = [
    "Affinity",
    "DeviceReport",
    "HostDevice",
    "HostView",
    "Verdict",
    "VmAdvice",
    "VmReport",
    "VmsError",
    "advise_domain",
    "advise_vmx",
    "host_from_esxcli",
    "host_from_scan",
    "node_cpus_for_vms",
    "pins_outside",
]


class VmsError(InputError):
    """Options that cannot be honoured (``--reserve-cores`` leaving a node no CPU)."""


class Verdict(str, Enum):
    ALIGNED = "aligned"
    UNSET = "unset"
    MISALIGNED = "misaligned"
    SPLIT = "split"
    UNKNOWN = "unknown"


# -- the host side --------------------------------------------------------------------------


@record
class HostDevice:
    """A host PCI function as the VM advice needs it."""

    bdf: str
    kind: str
    numa_node: int | None
    name: str
    vendor_id: int | None = None
    device_id: int | None = None
    #: A GPU's rail NICs (BDFs), best first.
    rail_nics: tuple[str, ...] = ()


@record
class HostView:
    """The host: its devices by BDF, its nodes' CPUs and memory (empty where unknown, as from
    esxcli), and its cores (sibling-thread sets) for ``--reserve-cores`` and pinning."""

    source: str
    devices: FrozenMap[str, HostDevice]
    node_cpus: FrozenMap[int, CpuSet] = field(default_factory=FrozenMap)
    node_memory: FrozenMap[int, int] = field(default_factory=FrozenMap)
    cores: tuple[CpuSet, ...] = ()


def host_from_scan(topo: Topology, rails_plan: RailPlan, *, source: str) -> HostView:
    """The host side from a scan's topology and rails: every PCI function, GPUs with their rail
    NICs' BDFs, the cores."""
    from topoagent.advice.cores import host_cores

    devices = {}
    for d in topo.devices:
        if d.bdf is None:
            continue
        rails: tuple[str, ...] = ()
        rail = rails_plan.rail(d.id)
        if rail is not None:
            rails = tuple(n.bdf for nid in rail.nics if (n := topo.by_id(nid)) is not None and n.bdf)
        devices[d.bdf] = HostDevice(d.bdf, d.kind.value, d.numa_node, d.name, d.vendor_id, d.device_id, rails)
    return HostView(
        source=source,
        devices=FrozenMap(devices),
        node_cpus=FrozenMap({n.id: n.cpus for n in topo.nodes if n.cpus_known}),
        node_memory=FrozenMap({n.id: n.memory_bytes for n in topo.nodes if n.memory_bytes}),
        cores=host_cores(topo.snapshot.cpus),
    )


def host_from_esxcli(devices: tuple[EsxPciDevice, ...], *, source: str) -> HostView:
    """The host side from ``esxcli hardware pci list``: devices and nodes, no node CPU lists."""
    from topoagent import pci

    out = {}
    for d in devices:
        kind = pci.kind_of(d.class_code, d.vendor_id).value
        name = d.device_name or pci.device_name(d.vendor_id, d.device_id, d.class_code)
        out[d.bdf] = HostDevice(d.bdf, kind, d.numa_node, name, d.vendor_id, d.device_id)
    return HostView(source=source, devices=FrozenMap(out))


def node_cpus_for_vms(host: HostView, node: int, reserve_cores: int) -> tuple[CpuSet, CpuSet]:
    """(CPUs for VMs, CPUs kept for the host) of ``node``: its first ``reserve_cores`` cores
    (all their threads) are kept.  :class:`VmsError` when nothing would be left."""
    cpus = host.node_cpus.get(node, CpuSet())
    if reserve_cores <= 0 or not cpus:
        return cpus, CpuSet()
    from topoagent.advice.cores import cores_in

    cores = sorted(cores_in(host.cores, cpus), key=lambda c: c.first or 0)
    if reserve_cores >= len(cores):
        raise VmsError(f"--reserve-cores {reserve_cores} leaves node {node} no CPU for VMs "
                       f"(it has {len(cores)} cores)")
    kept = CpuSet().union(*cores[:reserve_cores])
    return cpus - kept, kept


# -- the VM side ----------------------------------------------------------------------------


@record
class DeviceReport:
    """A passthrough device joined with the host.  ``ref`` is how the VM's config names it
    (a BDF for libvirt, the ``pciPassthruN.id`` text for VMware)."""

    bdf: str | None
    ref: str
    kind: str
    numa_node: int | None
    name: str | None
    rail_nics: tuple[str, ...] = ()
    note: str | None = None


@record
class Affinity:
    """libvirt settings to write: vCPU CPUs, memory nodes (and per guest cell), optional pins."""

    cpuset: CpuSet
    nodes: tuple[int, ...]
    mem_mode: str
    memnodes: tuple[tuple[int, int], ...] = ()
    vcpupins: tuple[tuple[int, CpuSet], ...] | None = None
    emulatorpin: CpuSet | None = None

    @property
    def nodeset(self) -> str:
        return str(CpuSet(self.nodes))


@record
class VmAdvice:
    name: str
    state: str
    platform: str  # "kvm" | "vmware"
    vcpus: int | None
    memory_bytes: int | None
    devices: tuple[DeviceReport, ...]
    current: FrozenMap[str, str]
    verdict: Verdict
    recommend: FrozenMap[str, str]
    #: The XML (libvirt) or lines (.vmx) to put in the VM's definition; "" when none.
    snippet: str
    #: What ``--apply`` writes (libvirt, when a recommendation exists).
    affinity: Affinity | None
    notes: tuple[str, ...] = ()


@record
class VmReport:
    """Every VM with passthrough devices; the names of those without are listed apart."""

    source: str
    host: str
    vms: tuple[VmAdvice, ...]
    without_passthrough: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _nodes_text(nodes: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(n) for n in nodes)


def _join(bdf: str, ref: str, host: HostView) -> DeviceReport:
    d = host.devices.get(bdf)
    if d is None:
        return DeviceReport(bdf, ref, "other", None, None,
                            note=f"{ref}: no such device on this host ({host.source})")
    note = None if d.numa_node is not None else f"{bdf}: the host does not know its NUMA node"
    return DeviceReport(bdf, ref, d.kind, d.numa_node, d.name, d.rail_nics, note)


def _device_nodes(devices: tuple[DeviceReport, ...]) -> tuple[int, ...] | None:
    """The devices' nodes, sorted; None when any is unknown."""
    if any(d.numa_node is None for d in devices):
        return None
    return tuple(sorted({d.numa_node for d in devices if d.numa_node is not None}))


def _split_plan(vcpus: int | None, memory: int | None, nodes: tuple[int, ...], host: HostView,
                reserve_cores: int) -> tuple[bool, str, tuple[int, ...]]:
    """Whether an even split of the vCPUs (one guest cell per node) fits, why, and the shares."""
    k = len(nodes)
    if not vcpus:
        return False, "the vCPU count is unknown", ()
    if vcpus < k:
        return False, f"{vcpus} vCPU{'s' if vcpus != 1 else ''} cannot span {k} nodes", ()
    shares = tuple(vcpus // k + (1 if i < vcpus % k else 0) for i in range(k))
    problems = []
    for node, share in zip(nodes, shares):
        avail = node_cpus_for_vms(host, node, reserve_cores)[0] if host.node_cpus else None
        if avail is not None and share > len(avail):
            problems.append(f"node {node} has {len(avail)} CPUs for {share} vCPUs")
        mem = host.node_memory.get(node)
        if memory and mem and memory // k > mem:
            problems.append(f"node {node} has {mem >> 30} GiB for {(memory // k) >> 30} GiB")
    layout = "+".join(str(s) for s in shares)
    if problems:
        return False, f"{layout} vCPUs over nodes {_nodes_text(nodes)} does not fit: " + "; ".join(problems), shares
    cells = ", ".join(f"cell {i} on node {n}" for i, n in enumerate(nodes))
    return True, f"{k} guest NUMA cells of {layout} vCPUs ({cells}) fit", shares


# -- libvirt --------------------------------------------------------------------------------


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
    from topoagent.parsers.libvirt_domain import parse_libvirt_set

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
        reasons.append(f"memory is bound to node {_nodes_text(sorted(mem))}")
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
    from topoagent.parsers.libvirt_domain import parse_libvirt_set

    if not cpus:
        return []
    out = [f"vcpupin {p.id} ({p.cpuset})" for p in dom.vcpupins if not parse_libvirt_set(p.cpuset) <= cpus]
    if dom.emulatorpin and not parse_libvirt_set(dom.emulatorpin) <= cpus:
        out.append(f"emulatorpin ({dom.emulatorpin})")
    out += [f"iothreadpin {p.id} ({p.cpuset})" for p in dom.iothreadpins if not parse_libvirt_set(p.cpuset) <= cpus]
    return out


def _pin_order(cpus: CpuSet, cores: tuple[CpuSet, ...]) -> list[int]:
    """CPUs in the order vCPUs get them: one thread of every core first, then the siblings."""
    from topoagent.advice.cores import cores_in

    groups = sorted((list(c) for c in cores_in(cores, cpus)), key=lambda g: g[0])
    order: list[int] = []
    depth = max(len(g) for g in groups)
    for t in range(depth):
        order.extend(g[t] for g in groups if len(g) > t)
    return order


def _kvm_affinity(dom: Domain, nodes: tuple[int, ...], host: HostView, *, pin: bool,
                  reserve_cores: int, notes: list[str]) -> Affinity | None:
    """The settings for the VM on ``nodes`` (one, or one per guest cell); None when they
    cannot be made (CPU-less node, a multi-node VM without matching guest cells)."""
    from topoagent.parsers.libvirt_domain import parse_libvirt_set

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
        memnodes = tuple((c.id, n) for c, n in zip(cells, nodes))
    else:
        node = nodes[0]
        mem = host.node_memory.get(node)
        if dom.memory_bytes and mem and dom.memory_bytes > mem:
            mode = "preferred"
            notes.append(f"the VM's {dom.memory_bytes >> 30} GiB exceed node {node}'s {mem >> 30} GiB: "
                         f"memory mode 'preferred' (strict would fail to allocate)")
        if vcpus > len(avail[node]):
            notes.append(f"{vcpus} vCPUs on node {node}'s {len(avail[node])} CPUs: vCPUs will share CPUs")
    pins = None
    emulator = None
    if pin:
        pin_list = []
        if len(nodes) > 1:
            for c, n in zip(cells, nodes):
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


def _kvm_snippet(dom: Domain, aff: Affinity) -> str:
    current = f" current='{dom.vcpus_current}'" if dom.vcpus_current is not None else ""
    lines = [f"<vcpu placement='static' cpuset='{aff.cpuset}'{current}>{dom.vcpus or 1}</vcpu>"]
    if aff.vcpupins is not None:
        lines.append("<cputune>")
        lines += [f"  <vcpupin vcpu='{v}' cpuset='{cpus}'/>" for v, cpus in aff.vcpupins]
        if aff.emulatorpin is not None:
            lines.append(f"  <emulatorpin cpuset='{aff.emulatorpin}'/>")
        lines.append("</cputune>")
    lines += ["<numatune>", f"  <memory mode='{aff.mem_mode}' nodeset='{aff.nodeset}'/>"]
    lines += [f"  <memnode cellid='{c}' mode='strict' nodeset='{n}'/>" for c, n in aff.memnodes]
    lines.append("</numatune>")
    return "\n".join(lines)


def _cells_snippet(vcpus: int, memory: int | None, nodes: tuple[int, ...], shares: tuple[int, ...]) -> str:
    lines = ["<cpu>", "  <numa>"]
    first = 0
    per_cell_kib = (memory // len(nodes)) // 1024 if memory else None
    for i, share in enumerate(shares):
        mem = f" memory='{per_cell_kib}' unit='KiB'" if per_cell_kib else ""
        lines.append(f"    <cell id='{i}' cpus='{first}-{first + share - 1}'{mem}/>")
        first += share
    lines += ["  </numa>", "</cpu>", "<numatune>",
              f"  <memory mode='strict' nodeset='{_nodes_text(nodes)}'/>"]
    lines += [f"  <memnode cellid='{i}' mode='strict' nodeset='{n}'/>" for i, n in enumerate(nodes)]
    lines.append("</numatune>")
    return "\n".join(lines)


def advise_domain(dom: Domain, state: str, host: HostView, *, pin: bool = False,
                  reserve_cores: int = 0) -> VmAdvice | None:
    """Verdict and recommendation for a libvirt domain; None when it has no PCI passthrough."""
    if not dom.hostdevs:
        return None
    devices = tuple(_join(h.bdf, h.bdf, host) for h in dom.hostdevs)
    current = _kvm_current(dom)
    notes = [d.note for d in devices if d.note]
    nodes = _device_nodes(devices)
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
            snippet = _kvm_snippet(dom, affinity) if recommend else ""
        if not recommend:
            affinity = None
        elif not pin:
            stale = pins_outside(dom, CpuSet().union(*(host.node_cpus.get(n, CpuSet()) for n in nodes)))
            if stale:
                notes.append(f"{', '.join(stale)} lie outside node {nodes[0]}'s CPUs and would override the "
                             f"cpuset: remove them, or use --pin to replace them")
    else:
        verdict = Verdict.SPLIT
        fits, why, shares = _split_plan(dom.vcpus, dom.memory_bytes, nodes, host, reserve_cores)
        notes.append(f"devices on nodes {_nodes_text(nodes)}: {why}")
        if fits and len(dom.cells) == len(nodes):
            affinity = _kvm_affinity(dom, nodes, host, pin=pin, reserve_cores=reserve_cores, notes=notes)
            if affinity is not None:
                recommend = _kvm_settings(affinity)
                snippet = _kvm_snippet(dom, affinity)
        elif fits:
            notes.append(f"the guest has {len(dom.cells)} NUMA cells: define {len(nodes)} "
                         f"(<cpu><numa>) first; --apply edits only the affinity elements")
            recommend = {"cpu.numa.cells": "+".join(str(s) for s in shares),
                         "numatune.memory.mode": "strict", "numatune.memory.nodeset": _nodes_text(nodes)}
            recommend.update({f"numatune.memnode.{i}": f"strict:{n}" for i, n in enumerate(nodes)})
            snippet = _cells_snippet(dom.vcpus or 0, dom.memory_bytes, nodes, shares)
        else:
            notes.append("give the VM devices of one node, or split it into one VM per node")
    return VmAdvice(dom.name, state, "kvm", dom.vcpus, dom.memory_bytes, devices, FrozenMap(current), verdict,
                    FrozenMap(recommend), snippet, affinity, tuple(notes))


# -- VMware ---------------------------------------------------------------------------------


def _node_list(text: str | None) -> set[int] | None:
    """A VMware node or CPU list (``0``, ``0,1``, ``0-3``); None for unset or ``all``."""
    if text is None or not text.strip() or text.strip().lower() == "all":
        return None
    from topoagent.parsers.libvirt_domain import parse_libvirt_set

    try:
        return set(parse_libvirt_set(text.replace(" ", ""), what="node list"))
    except InputError:
        raise VmsError(f"{text!r} is not a node list") from None


def _vmx_device(dev_index: int, ref: str | None, bdfs: tuple[str, ...], vendor: int | None, device: int | None,
                warning: str | None, host: HostView) -> DeviceReport:
    label = ref or f"pciPassthru{dev_index} (no id)"
    if not bdfs:
        return DeviceReport(None, label, "other", None, None, note=warning)
    found = [b for b in bdfs if b in host.devices]
    if vendor is not None and device is not None and len(found) > 1:
        found = [b for b in found if (host.devices[b].vendor_id, host.devices[b].device_id) in ((vendor, device), (None, None))]
    if len(found) != 1:
        why = ("matches no device in the host list" if not found else
               f"could be {' or '.join(found)}: ambiguous")
        return DeviceReport(bdfs[0] if len(bdfs) == 1 else None, label, "other", None, None,
                            note=f"pciPassthru{dev_index}.id {ref!r} ({' or '.join(bdfs)}) {why} ({host.source})")
    report = _join(found[0], label, host)
    h = host.devices[found[0]]
    notes = [n for n in (warning if len(bdfs) == 1 else None, report.note) if n]
    if vendor is not None and h.vendor_id is not None and (vendor, device) != (h.vendor_id, h.device_id):
        notes.append(f"pciPassthru{dev_index} names {vendor:04x}:{(device or 0):04x} but {found[0]} is "
                     f"{h.vendor_id:04x}:{(h.device_id or 0):04x}")
    return DeviceReport(report.bdf, label, report.kind, report.numa_node, report.name, report.rail_nics,
                        "; ".join(notes) or None)


def advise_vmx(vmx: VmxConfig, host: HostView, *, name: str, state: str = "unknown") -> VmAdvice | None:
    """Verdict and the ``numa.nodeAffinity`` line for a VMware VM; None without passthrough."""
    if not vmx.devices:
        return None
    devices = tuple(_vmx_device(d.index, d.id, d.bdfs, d.vendor_id, d.device_id, d.warning, host)
                    for d in vmx.devices)
    current = {k: v for k, v in (("numa.nodeAffinity", vmx.node_affinity), ("sched.cpu.affinity", vmx.cpu_affinity),
                                 ("sched.mem.affinity", vmx.mem_affinity)) if v}
    notes = [d.note for d in devices if d.note]
    nodes = _device_nodes(devices)
    recommend: dict[str, str] = {}
    if vmx.cpu_affinity and vmx.cpu_affinity.strip().lower() != "all":
        notes.append("sched.cpu.affinity pins vCPUs to host CPUs: NUMA affinity is the lighter control "
                     "(the NUMA scheduler still balances inside the node); left as it is")
    if nodes is None:
        verdict = Verdict.UNKNOWN
        notes.append("nothing recommended: a device's NUMA node is unknown (never guessed)")
    else:
        target = {nodes[0]} if len(nodes) == 1 else set(nodes)
        affinity = _node_list(vmx.node_affinity)
        mem = _node_list(vmx.mem_affinity)
        if len(nodes) > 1:
            verdict = Verdict.SPLIT
            k = len(nodes)
            vcpus = vmx.numvcpus
            if vcpus and vcpus >= k:
                notes.append(f"devices on nodes {_nodes_text(nodes)}: a wide VM of {vcpus} vCPUs spans them "
                             f"({'+'.join(str(vcpus // k + (1 if i < vcpus % k else 0)) for i in range(k))} "
                             f"per node; node sizes cannot be checked from esxcli)")
            else:
                notes.append(f"devices on nodes {_nodes_text(nodes)}: "
                             f"{vcpus if vcpus else 'an unknown number of'} vCPUs cannot span them; "
                             f"give the VM devices of one node")
        elif (affinity is not None and affinity != target) or (mem is not None and mem != target):
            verdict = Verdict.MISALIGNED
        elif affinity == target:
            verdict = Verdict.ALIGNED
        else:
            verdict = Verdict.UNSET
        if verdict is not Verdict.ALIGNED and (len(nodes) == 1 or (vmx.numvcpus or 0) >= len(nodes)):
            if affinity != target:
                recommend["numa.nodeAffinity"] = _nodes_text(nodes)
            if mem is not None and mem != target:
                recommend["sched.mem.affinity"] = _nodes_text(nodes)
    snippet = "\n".join(f'{k} = "{v}"' for k, v in recommend.items())
    if snippet:
        notes.append("the VM must be powered off to change this (Edit Settings > VM Options > Advanced > "
                     "Configuration Parameters, or the .vmx of a powered-off VM)")
    return VmAdvice(name, state, "vmware", vmx.numvcpus, vmx.memory_bytes, devices, FrozenMap(current), verdict,
                    FrozenMap(recommend), snippet, None, tuple(notes))
