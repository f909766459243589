"""The person-facing tree: socket -> NUMA node -> host bridge -> switch -> device.

Switch downstream ports are folded into their switch (their devices hang under it), empty
ports are counted rather than drawn, and functions of no interest (USB, SMBus, chipset) are
summarised unless ``show_all`` is set.  Output is deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from topoagent.core.findings import Severity
from topoagent.core.pci import CLASSES, DeviceKind, is_nvswitch_or_other_bridge
from topoagent.core.render.escape import shown
from topoagent.core.render.verdict import unknown_line, unusable_words
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import LinkInfo
from topoagent.core.topology import BridgeRole, Device, Node, Topology
from topoagent.core.version import __version__

_TAG = {
    DeviceKind.GPU: "GPU",
    DeviceKind.NIC: "NIC",
    DeviceKind.NVME: "NVMe",
    DeviceKind.ACCELERATOR: "ACCEL",
    DeviceKind.NVSWITCH: "NVSwitch",
    DeviceKind.BRIDGE: "BRIDGE",
    DeviceKind.OTHER: "other",
}


def format_bytes(n: int | None) -> str:
    """A byte count in binary units (``512.0 GiB``); ``memory ?`` when unknown."""
    if n is None:
        return "memory ?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _gts(v: float | None) -> str:
    return "?" if v is None else (f"{v:g}")


def format_link(link: LinkInfo) -> str | None:
    """``x16 32 GT/s``; ``x8 (max x16) 16 GT/s (max 32)`` when below max; None when unknown."""
    if not link.known:
        return None
    w, mw, s, ms = link.current_width, link.max_width, link.current_gts, link.max_gts
    width = f"x{w}" if w is not None else "x?"
    if mw is not None and mw != w:
        width += f" (max x{mw})"
    speed = f"{_gts(s)} GT/s"
    if ms is not None and ms != s:
        speed = f"{_gts(s)} GT/s (max {_gts(ms)})"
    return f"{width} {speed}"


class _Tree:
    def __init__(self, topo: Topology, show_all: bool, rails: dict[str, str]) -> None:

        self.topo = topo
        self.show_all = show_all
        self.rails = rails
        self.lines: list[str] = []
        self._interesting: dict[str, bool] = {}

    def add(self, prefix: str, last: bool, text: str) -> str:
        self.lines.append(f"{prefix}{'└─ ' if last else '├─ '}{text}")
        return prefix + ("   " if last else "│  ")

    # -- what to draw -------------------------------------------------------------------------
    def interesting(self, d: Device) -> bool:
        """Whether to draw ``d`` (with ``--all``: always).  A bridge is drawn when something
        drawn hangs below it; worked out bottom-up without recursion (chains can be deep)."""
        if self.show_all:
            return True
        if d.id in self._interesting:
            return self._interesting[d.id]
        order, stack = [], [d]
        while stack:  # post-order over the subtree, skipping what is already known
            node = stack.pop()
            order.append(node)
            stack.extend(c for c in self.below(node) if c.id not in self._interesting)
        for node in reversed(order):
            kids = self.below(node)
            if kids:
                self._interesting[node.id] = any(self._interesting[c.id] for c in kids)
            elif node.kind is DeviceKind.BRIDGE:
                # Empty ports, host and ISA bridge functions are chipset furniture; "other"
                # bridges (class 0x0680) of other vendors than NVIDIA (whose are NVSwitches,
                # a kind of their own) are drawn.
                self._interesting[node.id] = node.role is None and is_nvswitch_or_other_bridge(node.class_code)
            else:
                # a Data Direct DMA function is "other" but half of its NIC: drawn
                self._interesting[node.id] = node.kind is not DeviceKind.OTHER or node.platform_role is not None
        return self._interesting[d.id]

    def below(self, d: Device) -> list[Device]:
        """Children to draw under a device, with switch downstream ports folded away (kept
        with ``--all``, which draws every function)."""
        out: list[Device] = []
        for c in self.topo.children(d.bdf):
            if not self.show_all and d.role is BridgeRole.SWITCH_UPSTREAM and c.role is BridgeRole.SWITCH_DOWNSTREAM:
                out.extend(self.topo.children(c.bdf))
            else:
                out.append(c)
        return out

    def label(self, d: Device) -> str:
        if d.role is BridgeRole.ROOT_PORT:
            text = f"{d.bdf} root port"
        elif d.role is BridgeRole.SWITCH_UPSTREAM:
            ports = [c for c in self.topo.children(d.bdf) if c.role is BridgeRole.SWITCH_DOWNSTREAM]
            # (none shown: a source without them, NCCL's topology file drops every one)
            text = f"{d.bdf} switch {shown(d.name)}" + (f" ({len(ports)} downstream ports)" if ports else "")
        elif d.role is not None:
            text = f"{d.bdf} {d.role.value.replace('_', ' ')} {shown(d.name)}"
        else:
            text = f"{d.bdf if d.bdf is not None else d.label} [{_TAG[d.kind]}] {d.id} {shown(d.name)}"
        extras = []
        if d.bdf is not None and d.label is not None:
            extras.append(f"{d.label} in nvidia-smi")
        names = list(d.rdma_devices) + list(d.netdevs)
        if names:
            extras.append(" ".join(map(shown, names)))  # a name is one word, never a line
        link = format_link(d.link)
        if link and (d.role is None or d.role is BridgeRole.ROOT_PORT or d.role is BridgeRole.SWITCH_UPSTREAM):
            extras.append(link)
        if d.numa_node is None and len(self.topo.nodes) > 1 and d.kind is not DeviceKind.BRIDGE:
            extras.append("NUMA unknown")
        if d.physfn:
            extras.append(f"VF of {d.physfn}")
        if d.virtfns:
            extras.append(f"{len(d.virtfns)} VFs")
        rail = self.rails.get(d.id)
        if rail:
            extras.append(rail)
        extras.extend(_platform_labels(self.topo, d))
        if d.notes:
            extras.append("parent bridge not listed: placed under its nearest listed ancestor")
        return text + ("  · " + " · ".join(extras) if extras else "")

    # -- drawing ----------------------------------------------------------------------------
    def devices(self, prefix: str, devs: Iterable[Device]) -> None:
        """Draw ``devs`` and everything below them, depth first, without recursion (a chain
        of bridges can be deeper than Python's stack)."""
        stack: list[tuple[str, list[Device | list[Device]], int]] = [(prefix, self._items(devs), 0)]
        while stack:
            at, items, i = stack.pop()
            if i >= len(items):
                continue
            stack.append((at, items, i + 1))
            item, last = items[i], i == len(items) - 1
            if isinstance(item, Device):
                sub = self.add(at, last, self.label(item))
                kids = self.below(item)
                if kids:
                    stack.append((sub, self._items(kids), 0))
            else:
                self.add(at, last, _summary(item))

    def _items(self, devs: Iterable[Device]) -> list[Device | list[Device]]:
        """The devices to draw, then (as one summary line) those not drawn."""
        group = list(devs)
        hidden = [d for d in group if not self.interesting(d)]
        items: list[Device | list[Device]] = [d for d in group if self.interesting(d)]
        if hidden:
            items.append(hidden)
        return items


def _summary(hidden: list[Device]) -> str:
    kinds = Counter(
        "empty port"
        if d.role is not None
        else CLASSES.get((d.class_code or 0) >> 8, "unclassified")
        if d.class_code is not None
        else "unclassified"
        for d in hidden
    )
    parts = [f"{n}× {k}" if n > 1 else k for k, n in sorted(kinds.items())]
    return f"(+{len(hidden)} not shown: {', '.join(parts)}; --all shows them)"


def _platform_labels(topo: Topology, d: Device) -> list[str]:
    """``Data Direct cx1 DMA function of nic1``, ``ACS xx110x1 required (holds)`` on a platform's
    functions and ports (:mod:`topoagent.core.platform`)."""
    platform = topo.platform
    if platform.kind is None:
        return []
    out = []
    cx = topo.complex_of(d)
    if cx is not None and d.bdf is not None:
        part = (
            "NIC" if d.bdf in cx.nics else "DMA function" if d.bdf == cx.dma else "GPU" if d.bdf in cx.gpus else "port"
        )
        of = ""
        if d.bdf == cx.dma or d.bdf in cx.gpus:
            nic = topo.by_bdf(cx.nics[0])
            of = f" of {nic.id}" if nic is not None and d.bdf == cx.dma else ""
        out.append(f"{cx.kind.label} {cx.id} {part}{of}")
    rule = platform.rule(d.bdf)
    if rule is not None:
        acs = d.config.acs if d.config is not None else None
        state = "unknown" if acs is None else "holds" if rule.holds(acs.control) else f"is 0x{acs.control:04x}"
        out.append(f"ACS {rule.mask} required ({state})")
    return out


def _platform_line(topo: Topology) -> str | None:
    """The header line naming the host's NVIDIA platform kind, or None."""
    p = topo.platform
    if p.kind is None:
        return f"NVIDIA platform: not recognised ({p.problem})" if p.problem else None
    mode = "" if p.virt is None else (" · virtualized (NICs expose ATS)" if p.virt else " · bare metal (no ATS)")
    return f"NVIDIA platform: {p.kind.label} · {len(p.complexes)} complex(es){mode}"


def _rail_labels(result: ScanResult) -> dict[str, str]:
    """``rail nic0 (PIX)`` on GPUs (``unusable: FELL_OFF_BUS`` first on one that is), ``rail
    for gpu0`` / ``storage`` on NICs."""
    labels: dict[str, str] = {}
    topo = result.topology
    for r in result.rails.rails:
        if r.nic is not None:  # the class is ? where no source shows the path (a partial paste)
            text = f"rail {','.join(r.nics)} ({r.cls.token if r.cls is not None else '?'})"
            dev = topo.by_id(r.nic)
            cx = topo.complex_of(dev) if dev is not None else None
            dma = topo.by_bdf(cx.dma) if cx is not None and cx.dma else None
            if dma is not None and r.nccl_path is not None:  # NCCL reaches a Data Direct NIC at its DMA function
                text += f" · NCCL {r.nccl_path.name} through {dma.id}"
            labels[r.gpu] = text
    for nic, role in result.rails.roles.items():
        users = result.rails.users(nic)
        unplaced = role.value == "compute" and nic in result.rails.far  # a paste proves no role
        labels[nic] = (
            f"rail for {','.join(users)}" if users else "no GPU is near it" if unplaced else f"{role.value} NIC"
        )
    for gpu in result.unusable:
        state = unusable_words(result, gpu)
        labels[gpu] = " · ".join(x for x in (state, labels.get(gpu)) if x)
    return labels


def _header(topo: Topology) -> list[str]:
    """The lines above the tree: the tool and host, its counts, its NVIDIA platform, a blank line."""
    lines = []
    gpus, nics = len(topo.gpus), len(topo.nics)
    nvswitches = len(topo.of_kind(DeviceKind.NVSWITCH))
    nics_text = f"{nics} NIC(s)" + (f" · {nvswitches} NVSwitch(es)" if nvswitches else "")
    virt = {True: "yes", False: "no", None: "unknown"}[topo.virtualized]
    if topo.from_host_tree:
        lines.append(f"topoagent {__version__} · host {shown(topo.hostname or '?')} · root {topo.root}")
        lines.append(
            f"{len(topo.sockets)} socket(s) · {len(topo.nodes)} NUMA node(s) · {len(topo.all_cpus)} CPUs · "
            f"{gpus} GPU(s) · {nics_text} · virtualized: {virt}"
        )
    else:
        given = ", ".join(s.name for s in topo.sources)
        cpus = f"{len(topo.all_cpus)} CPUs" if topo.all_cpus else "CPUs unknown"
        lines.append(f"topoagent {__version__} · offline: {given} output, not read from a host")
        lines.append(
            f"sockets unknown · {len(topo.nodes)} NUMA node(s) · {cpus} · {gpus} GPU(s) · {nics_text} · "
            f"virtualized: {virt}"
        )
    platform = _platform_line(topo)
    if platform is not None:
        lines.append(shown(platform))
    return [*lines, ""]


def render(result: ScanResult, *, show_all: bool = False, **_: Any) -> str:
    """The scan as an indented tree for a person, then findings by severity, then lost probes."""
    topo = result.topology
    t = _Tree(topo, show_all, _rail_labels(result))
    t.lines.extend(_header(topo))

    bridges_of: dict[int | None, list[str]] = {}
    for hb in topo.host_bridges:
        bridges_of.setdefault(hb.numa_node, []).append(hb.name)
    treeless: dict[int | None, list[Device]] = {}
    for d in topo.devices:
        if d.root_bus is None and d.parent is None:  # one with a parent is drawn below it
            treeless.setdefault(d.numa_node, []).append(d)

    def node_body(prefix: str, node_id: int | None) -> None:
        items: list[tuple[str, list[Device]]] = [
            (f"{b} host bridge", list(topo.children(b))) for b in bridges_of.get(node_id, [])
        ]
        if treeless.get(node_id):
            items.append(("(no PCI tree in this source)", treeless[node_id]))
        for i, (title, devs) in enumerate(items):
            sub = t.add(prefix, i == len(items) - 1, title)
            t.devices(sub, devs)

    placed: set[int] = set()
    for sock in topo.sockets:
        t.lines.append(f"Socket {sock.id} · CPUs {str(sock.cpus) or '-'}")
        nodes = [n for n in topo.nodes if n.socket == sock.id]
        for i, n in enumerate(nodes):
            placed.add(n.id)
            sub = t.add("", i == len(nodes) - 1, _node_title(n))
            node_body(sub, n.id)
    rest = [n for n in topo.nodes if n.id not in placed]
    if rest:
        t.lines.append("Socket unknown")
        for i, n in enumerate(rest):
            sub = t.add("", i == len(rest) - 1, _node_title(n))
            node_body(sub, n.id)
    # Every device appears: those on a node id the node list lacks, and those on no known node.
    known = {n.id for n in topo.nodes}
    for node_id in sorted(i for i in set(bridges_of) | set(treeless) if i is not None and i not in known):
        t.lines.append(f"NUMA node {node_id} (not among the host's NUMA nodes)")
        node_body("", node_id)
    if bridges_of.get(None) or treeless.get(None):
        t.lines.append("NUMA node unknown")
        node_body("", None)

    t.lines.extend(render_findings(result))
    errors = topo.probe_errors
    sources = ", ".join(f"{s.name} {s.status}" + (f" ({s.detail})" if s.detail else "") for s in topo.sources)
    t.lines.append("")
    t.lines.append(f"Sources: {sources}")
    unknown = unknown_line(result)
    if unknown is not None:
        t.lines.append(unknown)
    if errors:
        t.lines.append(f"Lost probes ({len(errors)}):")
        t.lines.extend(f"  {e.path}: {e.error}" for e in errors)
    return "\n".join(t.lines) + "\n"


def _node_title(n: Node) -> str:
    if not n.cpus_known:
        return f"NUMA node {n.id} · CPUs ? · {format_bytes(n.memory_bytes)}"
    if n.cpu_less:
        bind = f" (bind to node {n.nearest_cpu_node})" if n.nearest_cpu_node is not None else ""
        return f"NUMA node {n.id} · no CPUs{bind} · {format_bytes(n.memory_bytes)}"
    return f"NUMA node {n.id} · CPUs {n.cpulist} · {format_bytes(n.memory_bytes)}"


def expectation_line(result: ScanResult) -> str | None:
    """The sentence that says what ``--expect`` compared the scan with and how it came out."""
    x = result.expectation
    if x is None:
        return None
    source = f"the expected topology of {shown(x.host)}" if x.host else "the expected topology"
    fp = f"fingerprint {shown(x.fingerprint)}"
    if not x.compared:
        return f"Compared with {source} ({fp}): another hardware class ({shown(x.hw_class)}), slots not compared"
    verdict = "matches" if not x.differences else f"{x.differences} difference(s) (EXPECT_*)"
    return f"Compared with {source} ({fp}): {verdict}"


def render_findings(result: ScanResult) -> list[str]:
    """Findings grouped by severity, most severe first (after the line saying what ``--expect``
    compared the scan with, where it did)."""
    lines = [""]
    said = expectation_line(result)
    if said is not None:
        lines += [said, ""]
    if not result.findings:
        return lines + ["Findings: none"]
    lines.append(f"Findings ({len(result.findings)}):")
    for sev in sorted(Severity, reverse=True):
        group = [f for f in result.findings if f.severity is sev]
        if not group:
            continue
        lines.append(f"  {sev.label.upper()} ({len(group)})")
        for f in group:
            lines.append(f"    [{f.code}] {shown(f.message)}")
            lines.append(f"        subjects: {shown(', '.join(f.subjects))}")
            for e in f.evidence[:4]:
                lines.append(
                    f"        evidence: {shown(e.path)} = {shown(e.value if e.value is not None else '(none)')}"
                )
            if len(f.evidence) > 4:
                lines.append(f"        evidence: ... {len(f.evidence) - 4} more in --format json")
            lines.append(f"        remedy:   {shown(f.remedy)}")
    return lines
